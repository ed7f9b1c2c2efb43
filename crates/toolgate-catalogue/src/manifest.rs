//! The release manifest: one JSON document (`"format": 1`) naming the versions and digests of
//! everything a release is made of, so a release is one reviewable unit: toolgate's version,
//! the configuration file (its bytes' SHA-256 and the digest of its parsed content), every
//! toolset's catalogue (its digest, and per tool the name, version, digest and the digest of
//! its schemas, from a [`Snapshot`]), every eval suite file (SHA-256, task count), and the last
//! eval results (per finished run folder: the SHA-256 of `runs.jsonl`, the number of runs and,
//! when the report has it, the success rate per toolset), sealed by a digest over the whole
//! manifest's canonical JSON.
//!
//! Only finished measurements are release entries ([`run_finished`]): a folder an eval is still
//! appending to changes under a committed manifest, so it is left out (and listed by
//! [`skipped`] with the reason) until its report is written over every run its plan asks for;
//! it then appears as an added entry.
//!
//! Guarantees: [`build`] is pure (the caller reads the files) and deterministic: lists are
//! sorted, keys are written sorted, so the same tree gives byte-identical manifests.
//! [`Manifest::from_json`] refuses a newer format naming both formats, fields it does not
//! know, and a manifest whose digest does not match its content (edited by hand).
//! [`diff`] names every entry that was added, removed or changed, and which of its fields.
//! Refuses: nothing is judged here (whether a change may ship is the catalogue gate's and the
//! reviewer's call); the manifest only records.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::canonical::{canonical_json, sha256_hex};

use crate::Snapshot;

/// The manifest format this build writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;

/// A release manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    /// The version of the toolgate that wrote it.
    pub toolgate_version: String,
    /// The configuration file, when one was used.
    pub config: Option<ConfigEntry>,
    /// The folder the eval suites (`*.toml`) and run folders (`runs/<name>/`) were read from.
    pub evals_dir: String,
    /// Ordered by name.
    pub toolsets: Vec<ToolsetEntry>,
    /// Ordered by path.
    pub suites: Vec<SuiteEntry>,
    /// Ordered by path.
    pub runs: Vec<RunEntry>,
    /// SHA-256 over the canonical JSON of every other field.
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigEntry {
    pub path: String,
    /// SHA-256 of the file's bytes.
    pub sha256: String,
    /// SHA-256 of the canonical JSON of its parsed content (comments, key order and layout do
    /// not count), when it parses.
    pub content_digest: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsetEntry {
    pub name: String,
    /// The catalogue digest (the registry's, as the snapshot records it).
    pub digest: String,
    /// Ordered by name.
    pub tools: Vec<ToolDigest>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDigest {
    pub name: String,
    pub version: u32,
    /// The snapshot entry's digest (model view, schemas, policy, bounds, error codes).
    pub digest: String,
    /// SHA-256 of the canonical JSON of the input and output schemas.
    pub schemas_digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteEntry {
    pub path: String,
    pub sha256: String,
    /// The number of tasks, when the suite parses.
    pub tasks: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunEntry {
    /// The run folder.
    pub path: String,
    /// SHA-256 of its `runs.jsonl`.
    pub runs_sha256: String,
    /// The number of runs (non-empty lines of `runs.jsonl`).
    pub runs: usize,
    /// Success rate per toolset, from `report.json` when it has one.
    pub success: BTreeMap<String, f64>,
}

/// What [`build`] records: files already read by the caller.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub toolgate_version: String,
    pub config: Option<ConfigInput>,
    pub evals_dir: String,
    pub snapshots: Vec<Snapshot>,
    pub suites: Vec<SuiteInput>,
    pub runs: Vec<RunInput>,
}

#[derive(Debug, Clone)]
pub struct ConfigInput {
    pub path: String,
    pub bytes: Vec<u8>,
    /// The parsed content as JSON, when the file parses.
    pub parsed: Option<Value>,
}

#[derive(Debug, Clone)]
pub struct SuiteInput {
    pub path: String,
    pub bytes: Vec<u8>,
    pub tasks: Option<usize>,
}

/// One folder under `<evals>/runs/` that has a `runs.jsonl` or a `plan.json`.
#[derive(Debug, Clone, Default)]
pub struct RunInput {
    pub path: String,
    /// The folder's `runs.jsonl`, when it has one.
    pub runs_jsonl: Option<Vec<u8>>,
    /// The folder's `plan.json`, when it has one.
    pub plan_json: Option<Vec<u8>>,
    /// The folder's `report.json`, when it has one.
    pub report_json: Option<Vec<u8>>,
    /// Whether the folder has a `report.md` (the only report the code-mode measurement writes).
    pub report_md: bool,
}

/// Why a run folder is not (yet) a release entry. The message is what `release manifest`
/// prints after the folder's path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfinished {
    /// The plan is written before the first run; `runs.jsonl` only with it.
    #[error("unfinished (no runs.jsonl yet)")]
    NoRuns,
    /// The eval writes its report after its last run: none yet means it is running, or was
    /// stopped and may be resumed.
    #[error("unfinished ({}, no {report})", runs_of(*runs, *planned))]
    NoReport {
        runs: usize,
        planned: Option<usize>,
        report: &'static str,
    },
    /// A report over part of the plan: rendered by hand (`eval report`) mid-run, or the eval
    /// was stopped; a `--resume` appends the rest.
    #[error("unfinished ({runs} of {planned} runs)")]
    ShortOfPlan { runs: usize, planned: usize },
    /// More records than the plan asks for: not the measurement the plan describes.
    #[error("not as planned ({runs} runs, the plan asks for {planned})")]
    BeyondPlan { runs: usize, planned: usize },
    /// Runs were appended after the report was written.
    #[error("unfinished (report.json covers {covered} of the {runs} runs in runs.jsonl)")]
    StaleReport { covered: usize, runs: usize },
    /// Whether it is finished cannot be told, so it is not recorded (fail closed).
    #[error("plan.json cannot be read: {0}")]
    UnreadablePlan(String),
}

fn runs_of(runs: usize, planned: Option<usize>) -> String {
    match planned {
        Some(planned) => format!("{runs} of {planned} runs"),
        None if runs == 1 => "1 run".to_string(),
        None => format!("{runs} runs"),
    }
}

/// A run folder left out of the manifest, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

/// Why a manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("not a JSON release manifest: {0}")]
    NotJson(serde_json::Error),
    #[error("not a release manifest: no numeric \"format\" field at the top")]
    NoFormat,
    #[error(
        "release manifest format {found} is newer than this toolgate reads (format {supported}): verify it with the toolgate that wrote it, or upgrade"
    )]
    Newer { found: u64, supported: u32 },
    #[error("release manifest format {found} is not one this toolgate reads (format {supported})")]
    Unknown { found: u64, supported: u32 },
    #[error("release manifest format {MANIFEST_FORMAT} does not fit: {0}")]
    Malformed(serde_json::Error),
    #[error(
        "the manifest's digest does not match its content (edited by hand?); write it again with `toolgate release manifest`"
    )]
    DigestMismatch,
}

/// How an entry differs between a recorded manifest and the tree now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffKind {
    Added,
    Removed,
    Changed,
}

/// One entry that differs: `entry` names it (`config PATH`, `toolset NAME`, `tool
/// TOOLSET/NAME`, `suite PATH`, `run PATH`, `toolgate`, `evals_dir`), `fields` lists what
/// changed in it (empty when added or removed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub entry: String,
    pub kind: DiffKind,
    pub fields: Vec<String>,
}

/// The manifest of `inputs`, sorted and sealed.
pub fn build(inputs: &Inputs) -> Manifest {
    let config = inputs.config.as_ref().map(|c| ConfigEntry {
        path: c.path.clone(),
        sha256: sha256_hex(&c.bytes),
        content_digest: c
            .parsed
            .as_ref()
            .map(|v| sha256_hex(canonical_json(v).as_bytes())),
    });
    let mut toolsets: Vec<ToolsetEntry> = inputs.snapshots.iter().map(toolset_entry).collect();
    toolsets.sort_by(|a, b| a.name.cmp(&b.name));
    let mut suites: Vec<SuiteEntry> = inputs
        .suites
        .iter()
        .map(|s| SuiteEntry {
            path: s.path.clone(),
            sha256: sha256_hex(&s.bytes),
            tasks: s.tasks,
        })
        .collect();
    suites.sort_by(|a, b| a.path.cmp(&b.path));
    let mut runs: Vec<RunEntry> = inputs
        .runs
        .iter()
        .filter_map(|run| match (run_finished(run), &run.runs_jsonl) {
            (Ok(()), Some(jsonl)) => Some(run_entry(run, jsonl)),
            _ => None,
        })
        .collect();
    runs.sort_by(|a, b| a.path.cmp(&b.path));
    let mut manifest = Manifest {
        format: MANIFEST_FORMAT,
        toolgate_version: inputs.toolgate_version.clone(),
        config,
        evals_dir: inputs.evals_dir.clone(),
        toolsets,
        suites,
        runs,
        digest: String::new(),
    };
    manifest.digest = manifest.content_digest();
    manifest
}

fn toolset_entry(snapshot: &Snapshot) -> ToolsetEntry {
    let mut tools: Vec<ToolDigest> = snapshot
        .tools
        .iter()
        .map(|t| ToolDigest {
            name: t.name.clone(),
            version: t.version,
            digest: t.digest.clone(),
            schemas_digest: sha256_hex(
                canonical_json(&serde_json::json!({
                    "input": t.input_schema,
                    "output": t.output_schema,
                }))
                .as_bytes(),
            ),
        })
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    ToolsetEntry {
        name: snapshot.source.clone(),
        digest: snapshot.digest.clone(),
        tools,
    }
}

/// The run folders of `inputs` that [`build`] leaves out, ordered by path, with the reason.
pub fn skipped(inputs: &Inputs) -> Vec<Skipped> {
    let mut skipped: Vec<Skipped> = inputs
        .runs
        .iter()
        .filter_map(|run| {
            run_finished(run).err().map(|reason| Skipped {
                path: run.path.clone(),
                reason: reason.to_string(),
            })
        })
        .collect();
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    skipped
}

/// Whether the measurement in a run folder is finished, so that its files no longer change:
/// - it has runs (`runs.jsonl`);
/// - it has its report, which every eval writes after its last run: `report.json` (the suite
///   and tool-search evals), or, in a folder without a plan, `report.md` (the code-mode
///   measurement writes only that);
/// - when `plan.json` is a suite eval's plan (it lists `toolsets` and `tasks` and says `runs`),
///   `runs.jsonl` holds exactly toolsets x tasks x runs records (a tool-search plan does not
///   list its tasks, so its size cannot be told from the plan alone: its report decides);
/// - when `report.json` lists its runs (a suite eval's report), it lists all of them (no run
///   was appended after the report was written).
pub fn run_finished(run: &RunInput) -> Result<(), Unfinished> {
    let planned = match &run.plan_json {
        None => None,
        Some(bytes) => planned_runs(bytes)?,
    };
    let Some(jsonl) = &run.runs_jsonl else {
        return Err(Unfinished::NoRuns);
    };
    let runs = count_runs(jsonl);
    let has_report = run.report_json.is_some() || (run.plan_json.is_none() && run.report_md);
    if !has_report {
        let report = if run.plan_json.is_some() {
            "report.json"
        } else {
            "report.json or report.md"
        };
        return Err(Unfinished::NoReport {
            runs,
            planned,
            report,
        });
    }
    match planned {
        Some(planned) if runs < planned => return Err(Unfinished::ShortOfPlan { runs, planned }),
        Some(planned) if runs > planned => return Err(Unfinished::BeyondPlan { runs, planned }),
        _ => {}
    }
    let covered = run
        .report_json
        .as_deref()
        .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
        .and_then(|report| report.get("runs")?.as_array().map(Vec::len));
    match covered {
        Some(covered) if covered != runs => Err(Unfinished::StaleReport { covered, runs }),
        _ => Ok(()),
    }
}

/// The number of runs a suite eval's plan asks for (toolsets x tasks x runs); `None` for a plan
/// of another shape.
fn planned_runs(plan: &[u8]) -> Result<Option<usize>, Unfinished> {
    let value: Value =
        serde_json::from_slice(plan).map_err(|e| Unfinished::UnreadablePlan(e.to_string()))?;
    let Some(plan) = value.as_object() else {
        return Err(Unfinished::UnreadablePlan("not a JSON object".into()));
    };
    let toolsets = plan.get("toolsets").and_then(Value::as_array).map(Vec::len);
    let tasks = plan.get("tasks").and_then(Value::as_array).map(Vec::len);
    let runs = plan
        .get("runs")
        .and_then(Value::as_u64)
        .and_then(|r| usize::try_from(r).ok());
    Ok(match (toolsets, tasks, runs) {
        (Some(toolsets), Some(tasks), Some(runs)) => Some(toolsets * tasks * runs),
        _ => None,
    })
}

/// Records are the non-empty lines of `runs.jsonl`.
fn count_runs(jsonl: &[u8]) -> usize {
    String::from_utf8_lossy(jsonl)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

fn run_entry(run: &RunInput, jsonl: &[u8]) -> RunEntry {
    RunEntry {
        path: run.path.clone(),
        runs_sha256: sha256_hex(jsonl),
        runs: count_runs(jsonl),
        success: run
            .report_json
            .as_deref()
            .map(success_by_toolset)
            .unwrap_or_default(),
    }
}

/// `toolsets[].toolset` and `toolsets[].success.mean` of an eval report; whatever does not
/// have that shape is left out (an older report, a report of another kind).
fn success_by_toolset(report: &[u8]) -> BTreeMap<String, f64> {
    let Ok(value) = serde_json::from_slice::<Value>(report) else {
        return BTreeMap::new();
    };
    value
        .get("toolsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let name = t.get("toolset")?.as_str()?;
            let mean = t.get("success")?.get("mean")?.as_f64()?;
            Some((name.to_string(), mean))
        })
        .collect()
}

impl Manifest {
    /// The digest of every field but `digest` itself.
    pub fn content_digest(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.remove("digest");
        }
        sha256_hex(canonical_json(&value).as_bytes())
    }

    /// Pretty JSON with keys sorted at every depth and a final newline (what is committed).
    pub fn to_json(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        // Through the canonical text, so keys are sorted whatever map `serde_json` keeps.
        let sorted: Value = serde_json::from_str(&canonical_json(&value)).unwrap_or(value);
        let mut text = serde_json::to_string_pretty(&sorted).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Reads a manifest, refusing other formats, unknown fields and a digest that does not
    /// match.
    pub fn from_json(text: &str) -> Result<Manifest, ManifestError> {
        let value: Value = serde_json::from_str(text).map_err(ManifestError::NotJson)?;
        let found = value
            .get("format")
            .and_then(Value::as_u64)
            .ok_or(ManifestError::NoFormat)?;
        if found > u64::from(MANIFEST_FORMAT) {
            return Err(ManifestError::Newer {
                found,
                supported: MANIFEST_FORMAT,
            });
        }
        if found != u64::from(MANIFEST_FORMAT) {
            return Err(ManifestError::Unknown {
                found,
                supported: MANIFEST_FORMAT,
            });
        }
        let manifest: Manifest = serde_json::from_value(value).map_err(ManifestError::Malformed)?;
        if manifest.content_digest() != manifest.digest {
            return Err(ManifestError::DigestMismatch);
        }
        Ok(manifest)
    }

    /// Every entry by its name, with its fields (what [`diff`] compares).
    fn entries(&self) -> BTreeMap<String, BTreeMap<String, Value>> {
        let mut entries = BTreeMap::new();
        let mut add = |name: String, value: Value| {
            let fields = match value {
                Value::Object(map) => map.into_iter().collect(),
                other => BTreeMap::from([("value".to_string(), other)]),
            };
            entries.insert(name, fields);
        };
        add(
            "toolgate".into(),
            Value::String(self.toolgate_version.clone()),
        );
        add("evals_dir".into(), Value::String(self.evals_dir.clone()));
        if let Some(config) = &self.config {
            add(format!("config {}", config.path), to_value(config));
        }
        for toolset in &self.toolsets {
            add(
                format!("toolset {}", toolset.name),
                serde_json::json!({"digest": toolset.digest}),
            );
            for tool in &toolset.tools {
                add(
                    format!("tool {}/{}", toolset.name, tool.name),
                    to_value(tool),
                );
            }
        }
        for suite in &self.suites {
            add(format!("suite {}", suite.path), to_value(suite));
        }
        for run in &self.runs {
            add(format!("run {}", run.path), to_value(run));
        }
        entries
    }
}

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The entries of `recorded` that the tree's manifest `now` adds, removes or changes, ordered
/// by entry name; empty when the two record the same release.
pub fn diff(recorded: &Manifest, now: &Manifest) -> Vec<Difference> {
    let old = recorded.entries();
    let new = now.entries();
    let mut differences = Vec::new();
    for (name, old_fields) in &old {
        match new.get(name) {
            None => differences.push(Difference {
                entry: name.clone(),
                kind: DiffKind::Removed,
                fields: Vec::new(),
            }),
            Some(new_fields) => {
                let fields: Vec<String> = old_fields
                    .keys()
                    .chain(new_fields.keys())
                    .filter(|k| old_fields.get(*k) != new_fields.get(*k))
                    .cloned()
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if !fields.is_empty() {
                    differences.push(Difference {
                        entry: name.clone(),
                        kind: DiffKind::Changed,
                        fields,
                    });
                }
            }
        }
    }
    for name in new.keys().filter(|n| !old.contains_key(*n)) {
        differences.push(Difference {
            entry: name.clone(),
            kind: DiffKind::Added,
            fields: Vec::new(),
        });
    }
    differences.sort_by(|a, b| a.entry.cmp(&b.entry));
    differences
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_core::tool::{ToolBuilder, ToolOutput};
    use toolgate_core::{Effect, Registry, Risk, Tool};

    use super::*;

    fn tool(name: &str, version: u32, field: &str) -> Tool {
        ToolBuilder::from_schema(
            name,
            version,
            json!({"type": "object", "properties": {field: {"type": "string"}}, "additionalProperties": false}),
        )
        .describe("Finds things.", "When asked.", None, "The things.")
        .policy(Risk::Low, Effect::Read, "It only reads.")
        .read(|_ctx, _args| async { Ok(ToolOutput::new(json!({}))) })
        .unwrap()
    }

    fn snapshot(source: &str, tools: Vec<Tool>) -> Snapshot {
        Snapshot::of_registry(&Registry::new(tools).unwrap(), source, "2026-12-05")
    }

    fn inputs() -> Inputs {
        Inputs {
            toolgate_version: "0.1.0".into(),
            config: Some(ConfigInput {
                path: "toolgate.toml".into(),
                bytes: b"[books]\ndb = \"b.sqlite\"\n".to_vec(),
                parsed: Some(json!({"books": {"db": "b.sqlite"}})),
            }),
            evals_dir: "evals".into(),
            snapshots: vec![
                snapshot("demo-b", vec![tool("b_find", 1, "q")]),
                snapshot("demo-a", vec![tool("a_zed", 1, "q"), tool("a_find", 2, "q")]),
            ],
            suites: vec![
                SuiteInput {
                    path: "evals/z.toml".into(),
                    bytes: b"z".to_vec(),
                    tasks: Some(3),
                },
                SuiteInput {
                    path: "evals/a.toml".into(),
                    bytes: b"a".to_vec(),
                    tasks: None,
                },
            ],
            runs: vec![RunInput {
                path: "evals/runs/one".into(),
                runs_jsonl: Some(b"{\"success\":true}\n\n{\"success\":false}\n".to_vec()),
                plan_json: None,
                report_json: Some(
                    br#"{"toolsets":[{"toolset":"demo-a","success":{"mean":0.5}},{"toolset":"odd"}]}"#
                        .to_vec(),
                ),
                report_md: true,
            }],
        }
    }

    #[test]
    fn the_same_inputs_in_another_order_give_a_byte_identical_manifest() {
        let a = build(&inputs());
        let mut shuffled = inputs();
        shuffled.snapshots.reverse();
        shuffled.suites.reverse();
        let b = build(&shuffled);
        assert_eq!(a.to_json(), b.to_json());
        let names: Vec<&str> = a.toolsets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["demo-a", "demo-b"]);
        let tools: Vec<&str> = a.toolsets[0]
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(tools, ["a_find", "a_zed"]);
        let suites: Vec<&str> = a.suites.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(suites, ["evals/a.toml", "evals/z.toml"]);
    }

    #[test]
    fn runs_are_counted_by_line_and_success_read_only_where_the_report_has_it() {
        let m = build(&inputs());
        assert_eq!(m.runs[0].runs, 2);
        assert_eq!(
            m.runs[0].success,
            BTreeMap::from([("demo-a".to_string(), 0.5)])
        );
        let mut no_report = inputs();
        no_report.runs[0].report_json = Some(b"not json".to_vec());
        assert!(build(&no_report).runs[0].success.is_empty());
    }

    #[test]
    fn a_manifest_reads_back_as_written_and_keys_are_sorted() {
        let m = build(&inputs());
        let text = m.to_json();
        assert_eq!(Manifest::from_json(&text).unwrap(), m);
        let config = text.find("\"config\"").unwrap();
        let digest = text.find("\"digest\"").unwrap();
        let format = text.find("\"format\"").unwrap();
        assert!(config < digest && digest < format, "{text}");
    }

    #[test]
    fn unreadable_manifests_are_refused_with_the_reason() {
        let good = build(&inputs()).to_json();
        let tampered = good.replacen("\"0.1.0\"", "\"0.2.0\"", 1);
        let unknown_field = {
            let mut v: Value = serde_json::from_str(&good).unwrap();
            v["extra"] = json!(1);
            v.to_string()
        };
        let cases: [(&str, &str, fn(&ManifestError) -> bool); 6] = [
            ("not json", "{", |e| matches!(e, ManifestError::NotJson(_))),
            ("no format", "{}", |e| matches!(e, ManifestError::NoFormat)),
            ("newer", r#"{"format": 2}"#, |e| {
                matches!(
                    e,
                    ManifestError::Newer {
                        found: 2,
                        supported: 1
                    }
                )
            }),
            ("older", r#"{"format": 0}"#, |e| {
                matches!(e, ManifestError::Unknown { found: 0, .. })
            }),
            ("unknown field", &unknown_field, |e| {
                matches!(e, ManifestError::Malformed(_))
            }),
            ("edited by hand", &tampered, |e| {
                matches!(e, ManifestError::DigestMismatch)
            }),
        ];
        for (name, text, expected) in cases {
            let error = Manifest::from_json(text).unwrap_err();
            assert!(expected(&error), "{name}: {error}");
        }
        let newer = Manifest::from_json(r#"{"format": 2}"#)
            .unwrap_err()
            .to_string();
        assert!(
            newer.contains("format 2") && newer.contains("format 1"),
            "{newer}"
        );
    }

    #[test]
    fn diff_names_exactly_the_entry_that_changed() {
        type Edit = fn(&mut Inputs);
        let cases: [(&str, Edit, &[(&str, DiffKind, &[&str])]); 8] = [
            ("nothing", |_| {}, &[]),
            (
                "config bytes only (a comment)",
                |i| i.config.as_mut().unwrap().bytes.extend(b"# note\n"),
                &[("config toolgate.toml", DiffKind::Changed, &["sha256"])],
            ),
            (
                "config content",
                |i| {
                    let c = i.config.as_mut().unwrap();
                    c.bytes.extend(b"x");
                    c.parsed = Some(json!({"books": {"db": "other"}}));
                },
                &[(
                    "config toolgate.toml",
                    DiffKind::Changed,
                    &["content_digest", "sha256"],
                )],
            ),
            (
                "a suite",
                |i| i.suites[1].bytes.push(b'!'),
                &[("suite evals/a.toml", DiffKind::Changed, &["sha256"])],
            ),
            (
                "a run",
                |i| i.runs[0].runs_jsonl.as_mut().unwrap().extend(b"{}\n"),
                &[(
                    "run evals/runs/one",
                    DiffKind::Changed,
                    &["runs", "runs_sha256"],
                )],
            ),
            (
                "a suite removed",
                |i| {
                    i.suites.remove(0);
                },
                &[("suite evals/z.toml", DiffKind::Removed, &[])],
            ),
            (
                "a tool's schema",
                |i| {
                    i.snapshots[1] = snapshot(
                        "demo-a",
                        vec![tool("a_zed", 1, "q"), tool("a_find", 2, "r")],
                    )
                },
                &[
                    (
                        "tool demo-a/a_find",
                        DiffKind::Changed,
                        &["digest", "schemas_digest"],
                    ),
                    ("toolset demo-a", DiffKind::Changed, &["digest"]),
                ],
            ),
            (
                "a toolset added",
                |i| {
                    i.snapshots
                        .push(snapshot("demo-c", vec![tool("c_find", 1, "q")]))
                },
                &[
                    ("tool demo-c/c_find", DiffKind::Added, &[]),
                    ("toolset demo-c", DiffKind::Added, &[]),
                ],
            ),
        ];
        let recorded = build(&inputs());
        for (name, edit, expected) in cases {
            let mut changed = inputs();
            edit(&mut changed);
            let got = diff(&recorded, &build(&changed));
            let got: Vec<(&str, DiffKind, Vec<&str>)> = got
                .iter()
                .map(|d| {
                    (
                        d.entry.as_str(),
                        d.kind,
                        d.fields.iter().map(String::as_str).collect(),
                    )
                })
                .collect();
            let expected: Vec<(&str, DiffKind, Vec<&str>)> = expected
                .iter()
                .map(|(e, k, f)| (*e, *k, f.to_vec()))
                .collect();
            assert_eq!(got, expected, "{name}");
        }
    }

    /// A suite eval's folder: a plan for `planned` runs (one toolset, `planned` tasks, one run
    /// each), `runs` records, and a report over `reported` runs when given.
    fn suite_folder(planned: usize, runs: usize, reported: Option<usize>) -> RunInput {
        let tasks: Vec<String> = (0..planned).map(|i| format!("t{i}")).collect();
        let plan = json!({"suite_name": "s", "toolsets": ["demo-a"], "tasks": tasks, "runs": 1});
        RunInput {
            path: "evals/runs/suite".into(),
            runs_jsonl: Some("{\"success\":true}\n".repeat(runs).into_bytes()),
            plan_json: Some(plan.to_string().into_bytes()),
            report_json: reported.map(|n| {
                json!({"toolsets": [], "runs": vec![json!({}); n]})
                    .to_string()
                    .into_bytes()
            }),
            report_md: reported.is_some(),
        }
    }

    #[test]
    fn a_run_folder_that_may_still_change_is_not_a_release_entry() {
        let tool_search_plan =
            br#"{"suite_digest":"x","catalogue_digest":"y","sizes":[10],"runs":1}"#;
        let cases: Vec<(&str, RunInput, Result<(), Unfinished>, &str)> = vec![
            (
                "every planned run and its report",
                suite_folder(3, 3, Some(3)),
                Ok(()),
                "",
            ),
            (
                "an eval still running (no report yet)",
                suite_folder(180, 115, None),
                Err(Unfinished::NoReport {
                    runs: 115,
                    planned: Some(180),
                    report: "report.json",
                }),
                "unfinished (115 of 180 runs, no report.json)",
            ),
            (
                "a report rendered by hand mid-run, or an eval stopped",
                suite_folder(6, 5, Some(5)),
                Err(Unfinished::ShortOfPlan {
                    runs: 5,
                    planned: 6,
                }),
                "unfinished (5 of 6 runs)",
            ),
            (
                "runs appended after the report",
                suite_folder(3, 3, Some(2)),
                Err(Unfinished::StaleReport {
                    covered: 2,
                    runs: 3,
                }),
                "unfinished (report.json covers 2 of the 3 runs in runs.jsonl)",
            ),
            (
                "more records than the plan asks for",
                suite_folder(2, 3, Some(3)),
                Err(Unfinished::BeyondPlan {
                    runs: 3,
                    planned: 2,
                }),
                "not as planned (3 runs, the plan asks for 2)",
            ),
            (
                "report.md written, report.json not yet (the eval writes md first)",
                RunInput {
                    report_md: true,
                    ..suite_folder(3, 3, None)
                },
                Err(Unfinished::NoReport {
                    runs: 3,
                    planned: Some(3),
                    report: "report.json",
                }),
                "unfinished (3 of 3 runs, no report.json)",
            ),
            (
                "a plan and no run yet",
                RunInput {
                    runs_jsonl: None,
                    ..suite_folder(3, 0, None)
                },
                Err(Unfinished::NoRuns),
                "unfinished (no runs.jsonl yet)",
            ),
            (
                "a plan that cannot be read",
                RunInput {
                    plan_json: Some(b"{".to_vec()),
                    ..suite_folder(3, 3, Some(3))
                },
                Err(Unfinished::UnreadablePlan(
                    "EOF while parsing an object at line 1 column 1".into(),
                )),
                "plan.json cannot be read: EOF while parsing an object at line 1 column 1",
            ),
            (
                "a tool-search folder with its report (its plan does not list tasks)",
                RunInput {
                    path: "evals/runs/search".into(),
                    runs_jsonl: Some(b"{}\n{}\n".to_vec()),
                    plan_json: Some(tool_search_plan.to_vec()),
                    report_json: Some(br#"{"standing":[],"report":{}}"#.to_vec()),
                    report_md: true,
                },
                Ok(()),
                "",
            ),
            (
                "a tool-search folder still running",
                RunInput {
                    path: "evals/runs/search".into(),
                    runs_jsonl: Some(b"{}\n".to_vec()),
                    plan_json: Some(tool_search_plan.to_vec()),
                    report_json: None,
                    report_md: false,
                },
                Err(Unfinished::NoReport {
                    runs: 1,
                    planned: None,
                    report: "report.json",
                }),
                "unfinished (1 run, no report.json)",
            ),
            (
                "a code-mode folder (no plan) with its report.md",
                RunInput {
                    path: "evals/runs/code".into(),
                    runs_jsonl: Some(b"{}\n".to_vec()),
                    plan_json: None,
                    report_json: None,
                    report_md: true,
                },
                Ok(()),
                "",
            ),
            (
                "a code-mode folder still running",
                RunInput {
                    path: "evals/runs/code".into(),
                    runs_jsonl: Some(b"{}\n".to_vec()),
                    plan_json: None,
                    report_json: None,
                    report_md: false,
                },
                Err(Unfinished::NoReport {
                    runs: 1,
                    planned: None,
                    report: "report.json or report.md",
                }),
                "unfinished (1 run, no report.json or report.md)",
            ),
        ];
        for (name, run, expected, message) in cases {
            let got = run_finished(&run);
            assert_eq!(got, expected, "{name}");
            if let Err(reason) = got {
                assert_eq!(reason.to_string(), message, "{name}");
            }
        }
    }

    #[test]
    fn an_eval_running_under_a_committed_manifest_does_not_fail_verify_and_shows_as_added_once_finished()
     {
        let mut running = inputs();
        running.runs.push(RunInput {
            path: "evals/runs/two".into(),
            ..suite_folder(4, 2, None)
        });
        let recorded = build(&running);
        assert_eq!(
            recorded
                .runs
                .iter()
                .map(|r| r.path.as_str())
                .collect::<Vec<_>>(),
            ["evals/runs/one"]
        );
        assert_eq!(
            skipped(&running),
            [Skipped {
                path: "evals/runs/two".into(),
                reason: "unfinished (2 of 4 runs, no report.json)".into(),
            }]
        );
        // More runs appended: still nothing to report.
        running.runs[1] = RunInput {
            path: "evals/runs/two".into(),
            ..suite_folder(4, 3, None)
        };
        assert!(diff(&recorded, &build(&running)).is_empty());
        // Finished: an added entry, and nothing skipped.
        running.runs[1] = RunInput {
            path: "evals/runs/two".into(),
            ..suite_folder(4, 4, Some(4))
        };
        assert!(skipped(&running).is_empty());
        let differences = diff(&recorded, &build(&running));
        assert_eq!(
            differences,
            [Difference {
                entry: "run evals/runs/two".into(),
                kind: DiffKind::Added,
                fields: Vec::new(),
            }]
        );
    }
}
