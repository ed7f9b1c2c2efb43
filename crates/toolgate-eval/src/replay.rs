//! Shadow replay, the pure part: what a recorded call proposed and how it was decided, read
//! from a trace; the shape of a result; the comparison of a recorded call with its replay; and
//! the file of accepted differences. The runner that replays the calls is [`crate::replay_run`].
//!
//! Input: JSON Lines of either kind toolgate writes.
//! - A run's trace: each `tool_call` line is a decision record (tool, arguments, principal,
//!   run, mode, stage, outcome, approval, and for a call that ran its `result_shape`). A
//!   record written before the dispatcher kept the shape has none, so such a call is compared
//!   on its decision only ([`Compared::DecisionOnly`]). Other trace events
//!   (`model_turn`, `egress`, `run_end`, ...) are counted and skipped, and so are nested calls
//!   (a record with `parent_call_id`): the call that made them makes them again. An audit
//!   export's lines (`toolgate audit export --format jsonl`) are read the same way: each holds
//!   the decision record whole under `record`.
//! - An eval's `runs.jsonl`: each line is one run of one task on one toolset, with its calls
//!   (tool, arguments, error code, the result as the model read it). The principal is the
//!   eval's (`eval`), and each run starts from a fresh store, as the eval's did.
//!
//! Refuses (a [`TraceError`] naming the line): a line that is not JSON, not an object, an
//! object that is neither a trace event nor an eval run, a `tool_call` line without a field
//! replay needs, and an input with no call at all.
//!
//! Result shape ([`Shape`], the core's, the same the dispatcher records): the JSON structure with the values left out: an object's keys
//! with each value's shape, scalars by type (every number is `number`, so 4 and 4.3 agree),
//! an array by whether it is empty and the merged shape of its elements (objects merge by the
//! union of their keys, so a field only some books have does not make two lists differ),
//! never by its length. Text that is not JSON is `string`. So a replay on the same data
//! agrees wherever the design agrees, and a new key, a removed key or a changed type is a
//! difference. A recorded result that was cut (the eval keeps 1,500 characters) has no
//! shape: such a call is compared on its decision only, and the report says so.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
pub use toolgate_core::shape::Shape;

/// How a call was decided, in the terms replay compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// It ran and returned a result.
    Ran,
    /// A step refused it: the step (unknown for an eval's calls, which record only the code)
    /// and the error code.
    Refused { stage: Option<String>, code: String },
    /// It needed a human (asked, approved, denied or left with a ticket).
    AsksApproval,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Ran => f.write_str("ran"),
            Decision::Refused {
                stage: Some(stage),
                code,
            } => write!(f, "refused at {stage} ({code})"),
            Decision::Refused { stage: None, code } => write!(f, "refused ({code})"),
            Decision::AsksApproval => f.write_str("asked for approval"),
        }
    }
}

/// Where two shapes differ, one line per place (`result.next_offset: absent before, number
/// now`); empty when they are the same.
pub fn shape_differences(before: &Shape, now: &Shape) -> Vec<String> {
    let mut out = Vec::new();
    diff_at("", before, now, &mut out);
    out
}

fn diff_at(path: &str, before: &Shape, now: &Shape, out: &mut Vec<String>) {
    let here = if path.is_empty() { "the result" } else { path };
    let join = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match (before, now) {
        (a, b) if a == b => {}
        (Shape::Object(a), Shape::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff_at(&join(key), x, y, out),
                    (Some(x), None) => {
                        out.push(format!("{}: {} before, absent now", join(key), x.kind()))
                    }
                    (None, Some(y)) => {
                        out.push(format!("{}: absent before, {} now", join(key), y.kind()))
                    }
                    (None, None) => {}
                }
            }
        }
        (Shape::Array(Some(a)), Shape::Array(Some(b))) => diff_at(&format!("{path}[]"), a, b, out),
        (a, b) => out.push(format!("{here}: {} before, {} now", a.kind(), b.kind())),
    }
}

/// What the record says the result was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordedResult {
    /// The whole result was recorded: its shape.
    Shape(Shape),
    /// The record kept only the start of the result.
    Cut,
    /// The record carries no result (a decision record).
    NotRecorded,
}

/// One recorded call: what was proposed, and how it went.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The line of the input it came from (1-based).
    pub line: usize,
    /// The record's call id; for an eval's call, `RUN#N` (the N-th call of the run).
    pub call_id: String,
    pub run_id: String,
    pub principal: String,
    pub tenant: String,
    pub tool: String,
    pub arguments: Value,
    /// `auto` or `ask`, when the record says (the dispatcher's default otherwise).
    pub mode: Option<String>,
    /// `loop`, `mcp`, `sandbox`, `tool` or `direct`, when the record says.
    pub origin: Option<String>,
    pub decision: Decision,
    pub result: RecordedResult,
}

/// Calls that run on one store state: an eval's run (a fresh store each), or every call of a
/// trace (one store, in order).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRun {
    /// The toolset an eval's run was recorded with; `None` for a trace, which does not say.
    pub toolset: Option<String>,
    /// Whether the recording started this run from a fresh store (an eval's run).
    pub fresh_store: bool,
    pub calls: Vec<Proposal>,
}

/// What the input held.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recording {
    pub runs: Vec<RecordedRun>,
    /// Lines that are trace events other than calls, by kind (`model_turn`, `nested
    /// tool_call`, ...): read and left out.
    pub skipped: BTreeMap<String, usize>,
}

impl Recording {
    /// The toolsets the eval runs were recorded with, in order of first appearance.
    pub fn toolsets(&self) -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for run in &self.runs {
            if let Some(t) = &run.toolset
                && !seen.contains(t)
            {
                seen.push(t.clone());
            }
        }
        seen
    }

    /// Only the eval runs recorded with `toolset` (a trace's calls are kept: it names none).
    pub fn recorded_with(mut self, toolset: &str) -> Self {
        self.runs
            .retain(|r| r.toolset.as_deref().is_none_or(|t| t == toolset));
        self
    }

    pub fn call_count(&self) -> usize {
        self.runs.iter().map(|r| r.calls.len()).sum()
    }
}

/// An input replay cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("line {line}: not JSON ({detail}); a trace has one JSON object per line")]
    NotJson { line: usize, detail: String },
    #[error("line {line}: a JSON {found}, not an object; a trace has one JSON object per line")]
    NotObject { line: usize, found: &'static str },
    #[error(
        "line {line}: not a decision record: neither a trace event (no `event`) nor an eval run (no `toolset` and `calls`)"
    )]
    Unrecognised { line: usize },
    #[error("line {line}: a `{kind}` line without `{field}`, which replay needs")]
    MissingField {
        line: usize,
        kind: &'static str,
        field: &'static str,
    },
    #[error("line {line}: its `result_shape` is not a result shape ({detail})")]
    BadShape { line: usize, detail: String },
    #[error("no calls to replay: the input holds no decision record and no eval run with calls")]
    Empty,
}

/// Reads a trace or an eval's `runs.jsonl` (see the module documentation).
pub fn parse_recording(text: &str) -> Result<Recording, TraceError> {
    let mut recording = Recording::default();
    // A trace's calls share one store, in order: they go into one run.
    let mut trace_calls: Vec<Proposal> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(raw).map_err(|e| TraceError::NotJson {
            line,
            detail: e.to_string(),
        })?;
        let Value::Object(map) = &value else {
            return Err(TraceError::NotObject {
                line,
                found: json_kind(&value),
            });
        };
        match (map.get("event"), map.get("toolset"), map.get("calls")) {
            (Some(Value::String(event)), _, _) if event == "tool_call" => {
                if map.get("parent_call_id").is_some_and(|p| !p.is_null()) {
                    *recording
                        .skipped
                        .entry("nested tool_call".into())
                        .or_default() += 1;
                } else {
                    trace_calls.push(decision_record(line, &value)?);
                }
            }
            (Some(Value::String(event)), _, _) => {
                *recording.skipped.entry(event.clone()).or_default() += 1;
            }
            // An audit export line (`toolgate audit export --format jsonl`): the decision
            // record whole under `record`.
            (None, _, _)
                if map
                    .get("record")
                    .is_some_and(|r| r.get("gen_ai.tool.name").is_some()) =>
            {
                let record = map.get("record").unwrap_or(&Value::Null);
                if record.get("parent_call_id").is_some_and(|p| !p.is_null()) {
                    *recording
                        .skipped
                        .entry("nested tool_call".into())
                        .or_default() += 1;
                } else {
                    trace_calls.push(decision_record(line, record)?);
                }
            }
            (None, Some(Value::String(toolset)), Some(Value::Array(calls))) => {
                let run = eval_run(line, toolset, &value, calls, &mut recording.skipped)?;
                recording.runs.push(run);
            }
            _ => return Err(TraceError::Unrecognised { line }),
        }
    }
    if !trace_calls.is_empty() {
        recording.runs.push(RecordedRun {
            toolset: None,
            fresh_store: false,
            calls: trace_calls,
        });
    }
    if recording.call_count() == 0 {
        return Err(TraceError::Empty);
    }
    Ok(recording)
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn text_field(
    line: usize,
    kind: &'static str,
    value: &Value,
    field: &'static str,
) -> Result<String, TraceError> {
    field_as(line, kind, value, field, |v| v.as_str().map(str::to_string))
}

/// `field` of a `kind` line read by `read`, or the error naming the line and the field.
fn field_as<T>(
    line: usize,
    kind: &'static str,
    value: &Value,
    field: &'static str,
    read: impl Fn(&Value) -> Option<T>,
) -> Result<T, TraceError> {
    value
        .get(field)
        .and_then(read)
        .ok_or(TraceError::MissingField { line, kind, field })
}

fn decision_record(line: usize, value: &Value) -> Result<Proposal, TraceError> {
    let kind = "tool_call";
    let field = |name: &'static str| text_field(line, kind, value, name);
    let arguments = field_as(line, kind, value, "arguments", |v| Some(v.clone()))?;
    let outcome = field("outcome")?;
    let stage = field("stage")?;
    let approval = value
        .get("approval")
        .and_then(|a| a.get("status"))
        .and_then(Value::as_str)
        .ok_or(TraceError::MissingField {
            line,
            kind,
            field: "approval",
        })?;
    let asked = matches!(approval, "approved" | "pending" | "denied");
    let decision = match outcome.as_str() {
        _ if asked => Decision::AsksApproval,
        "ok" => Decision::Ran,
        "approval_required" => Decision::AsksApproval,
        code => Decision::Refused {
            stage: Some(stage),
            code: code.to_string(),
        },
    };
    Ok(Proposal {
        line,
        call_id: field("gen_ai.tool.call.id")?,
        run_id: field("run_id")?,
        principal: field("principal")?,
        tenant: value
            .get("tenant")
            .and_then(Value::as_str)
            .unwrap_or("local")
            .to_string(),
        tool: field("gen_ai.tool.name")?,
        arguments,
        mode: value
            .get("mode")
            .and_then(Value::as_str)
            .map(str::to_string),
        origin: value
            .get("origin")
            .and_then(Value::as_str)
            .map(str::to_string),
        decision,
        // Records written before the dispatcher kept the shape carry none.
        result: match value.get("result_shape") {
            None => RecordedResult::NotRecorded,
            Some(shape) => {
                RecordedResult::Shape(serde_json::from_value::<Shape>(shape.clone()).map_err(
                    |e| TraceError::BadShape {
                        line,
                        detail: e.to_string(),
                    },
                )?)
            }
        },
    })
}

/// The principal every eval run calls as.
pub const EVAL_PRINCIPAL: &str = "eval";

fn eval_run(
    line: usize,
    toolset: &str,
    value: &Value,
    calls: &[Value],
    skipped: &mut BTreeMap<String, usize>,
) -> Result<RecordedRun, TraceError> {
    let kind = "eval run";
    let task = text_field(line, kind, value, "task")?;
    let index = field_as(line, kind, value, "index", Value::as_u64)?;
    // The eval's own run id, so that effect identities are the ones it had.
    let run_id = format!("{toolset}/{task}/{index}");
    let mut proposals = Vec::with_capacity(calls.len());
    for (n, call) in calls.iter().enumerate() {
        let kind = "eval call";
        let tool = text_field(line, kind, call, "tool")?;
        let arguments = field_as(line, kind, call, "arguments", |v| Some(v.clone()))?;
        let is_error = field_as(line, kind, call, "is_error", Value::as_bool)?;
        let result = text_field(line, kind, call, "result")?;
        if answered_by_the_loop(&result) {
            *skipped.entry(LOOP_ANSWERED.into()).or_default() += 1;
            continue;
        }
        let decision = match (is_error, call.get("error").and_then(Value::as_str)) {
            (false, _) => Decision::Ran,
            (true, Some("approval_denied" | "approval_required")) => Decision::AsksApproval,
            (true, Some(code)) => Decision::Refused {
                stage: None,
                code: code.to_string(),
            },
            (true, None) => {
                return Err(TraceError::MissingField {
                    line,
                    kind,
                    field: "error",
                });
            }
        };
        let result = if crate::record::kept_part(&result).is_some() {
            RecordedResult::Cut
        } else {
            RecordedResult::Shape(Shape::of_text(&result))
        };
        proposals.push(Proposal {
            line,
            call_id: format!("{run_id}#{}", n + 1),
            run_id: run_id.clone(),
            principal: EVAL_PRINCIPAL.into(),
            tenant: "local".into(),
            tool,
            arguments,
            mode: None,
            origin: Some("loop".into()),
            decision,
            result,
        });
    }
    Ok(RecordedRun {
        toolset: Some(toolset.to_string()),
        fresh_store: true,
        calls: proposals,
    })
}

/// What the report calls an eval's call that the loop answered itself.
pub const LOOP_ANSWERED: &str = "call answered by the loop, never run";

/// Whether an eval's recorded result is the loop's own answer, never the dispatcher's: an
/// exact repeat answered from memory (`[repeat] ...`), or a call the loop refused itself (a
/// tool not offered this round, tool use ended), whose message starts `not run:`.
fn answered_by_the_loop(result: &str) -> bool {
    if result.starts_with("[repeat]") {
        return true;
    }
    serde_json::from_str::<Value>(result).is_ok_and(|v| {
        v.pointer("/error/message")
            .and_then(Value::as_str)
            .is_some_and(|m| m.starts_with("not run:"))
    })
}

/// How the replay of one call compares with its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Difference {
    Same,
    /// A step refuses it now (and did not, or refused it with another code).
    NowRefused {
        stage: String,
        code: String,
    },
    /// It needs a human now, and did not.
    NowAsksApproval,
    /// It runs, and its result has another shape; or it runs now and was refused or asked.
    DifferentResult {
        what: String,
    },
}

impl Difference {
    /// The kind as an accept file names it.
    pub fn kind(&self) -> DifferenceKind {
        match self {
            Difference::Same => DifferenceKind::Same,
            Difference::NowRefused { .. } => DifferenceKind::NowRefused,
            Difference::NowAsksApproval => DifferenceKind::NowAsksApproval,
            Difference::DifferentResult { .. } => DifferenceKind::DifferentResult,
        }
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Same => f.write_str("same"),
            Difference::NowRefused { stage, code } => {
                write!(f, "now refused at {stage} ({code})")
            }
            Difference::NowAsksApproval => f.write_str("now asks for approval"),
            Difference::DifferentResult { what } => write!(f, "different result: {what}"),
        }
    }
}

/// A [`Difference`]'s kind, without its details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DifferenceKind {
    Same,
    NowRefused,
    NowAsksApproval,
    DifferentResult,
}

/// What a comparison could look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compared {
    DecisionAndShape,
    /// The record kept only the start of the result.
    DecisionOnlyResultCut,
    /// The record carries no result (a trace's decision record).
    DecisionOnly,
}

/// The replayed call, as compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    /// For a refusal, the step is always known.
    pub decision: Decision,
    /// The shape of what the replay returned (the model's text of it).
    pub shape: Shape,
}

/// How `replayed` compares with the record `recorded`, and what could be compared.
pub fn compare(recorded: &Proposal, replayed: &Replayed) -> (Difference, Compared) {
    let compared = match (&recorded.result, &recorded.decision, &replayed.decision) {
        (RecordedResult::NotRecorded, _, _) => Compared::DecisionOnly,
        (RecordedResult::Cut, Decision::Ran, Decision::Ran) => Compared::DecisionOnlyResultCut,
        (RecordedResult::Cut, _, _) | (RecordedResult::Shape(_), _, _) => {
            Compared::DecisionAndShape
        }
    };
    let difference = match (&recorded.decision, &replayed.decision) {
        (Decision::Ran, Decision::Ran) => match &recorded.result {
            RecordedResult::Shape(before) => {
                let lines = shape_differences(before, &replayed.shape);
                if lines.is_empty() {
                    Difference::Same
                } else {
                    Difference::DifferentResult {
                        what: lines.join("; "),
                    }
                }
            }
            RecordedResult::Cut | RecordedResult::NotRecorded => Difference::Same,
        },
        (Decision::AsksApproval, Decision::AsksApproval) => Difference::Same,
        (
            Decision::Refused {
                stage: was_stage,
                code: was,
            },
            Decision::Refused { stage, code },
        ) if was == code && was_stage.as_ref().is_none_or(|s| Some(s) == stage.as_ref()) => {
            Difference::Same
        }
        (_, Decision::Refused { stage, code }) => Difference::NowRefused {
            stage: stage.clone().unwrap_or_else(|| "unknown".into()),
            code: code.clone(),
        },
        (_, Decision::AsksApproval) => Difference::NowAsksApproval,
        (was, Decision::Ran) => Difference::DifferentResult {
            what: format!("now runs; it {was} in the record"),
        },
    };
    (difference, compared)
}

/// A catalogue to replay against (`--against`, a catalogue snapshot): its views decide what the
/// dispatcher decides before a handler runs: whether the tool exists, whether the arguments fit
/// its input schema, and whether the call's mode asks a human first. A call it lets through
/// runs the toolset's own handler (a snapshot holds no code).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogueGate {
    /// What the snapshot says it is of (a toolset's name).
    pub source: String,
    pub tools: BTreeMap<String, GateTool>,
}

/// One tool's views, as a [`CatalogueGate`] checks them.
#[derive(Debug, Clone, PartialEq)]
pub struct GateTool {
    /// The input schema as a model reads it (normalized).
    pub input_schema: Value,
    /// The approval modes in which a call asks a human first.
    pub approval_in: Vec<toolgate_core::Mode>,
}

impl CatalogueGate {
    /// What the catalogue decides for a call of `tool` with `arguments` in `mode` before any
    /// handler runs: a refusal or a human to ask; `None` when it lets the call through.
    pub fn decide(
        &self,
        tool: &str,
        arguments: &Value,
        mode: toolgate_core::Mode,
    ) -> Option<Decision> {
        let Some(view) = self.tools.get(tool) else {
            return Some(Decision::Refused {
                stage: Some("resolve".into()),
                code: "not_found".into(),
            });
        };
        if !toolgate_core::schema::validate(&view.input_schema, arguments).is_empty() {
            return Some(Decision::Refused {
                stage: Some("validate".into()),
                code: "invalid_argument".into(),
            });
        }
        view.approval_in
            .contains(&mode)
            .then_some(Decision::AsksApproval)
    }
}

/// The accept file: known differences that do not fail a replay.
///
/// ```json
/// {"accept": [
///   {"call": "books-v2/collins-count/0#1", "reason": "v3 pages its results"},
///   {"tool": "books_search", "kind": "different_result", "reason": "..."}
/// ]}
/// ```
///
/// An entry names a call, a tool or both, and optionally a kind; it accepts every
/// difference that matches all it names. Every entry must say why (`reason`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptFile {
    pub accept: Vec<Accepted>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Accepted {
    #[serde(default)]
    pub call: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub kind: Option<DifferenceKind>,
    pub reason: String,
}

/// An accept file replay cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    #[error("the accept file is not valid: {0}")]
    Invalid(String),
    #[error("accept entry {index} names neither a call nor a tool; it would accept everything")]
    Unbounded { index: usize },
    #[error("accept entry {index} gives no reason")]
    NoReason { index: usize },
}

impl AcceptFile {
    /// Reads an accept file's JSON.
    pub fn parse(text: &str) -> Result<AcceptFile, AcceptError> {
        let file: AcceptFile =
            serde_json::from_str(text).map_err(|e| AcceptError::Invalid(e.to_string()))?;
        for (i, entry) in file.accept.iter().enumerate() {
            let index = i + 1;
            if entry.call.is_none() && entry.tool.is_none() {
                return Err(AcceptError::Unbounded { index });
            }
            if entry.reason.trim().is_empty() {
                return Err(AcceptError::NoReason { index });
            }
        }
        Ok(file)
    }

    /// The index of the first entry that accepts `difference` of call `call_id` to `tool`;
    /// `None` for [`Difference::Same`], which needs no accepting.
    pub fn accepting(&self, call_id: &str, tool: &str, difference: &Difference) -> Option<usize> {
        if *difference == Difference::Same {
            return None;
        }
        self.accept.iter().position(|entry| {
            entry.call.as_deref().is_none_or(|c| c == call_id)
                && entry.tool.as_deref().is_none_or(|t| t == tool)
                && entry.kind.is_none_or(|k| k == difference.kind())
        })
    }
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
