//! Which measurement made a run folder, so that a command that reads one kind of folder answers
//! any other kind with the command that does read it.
//!
//! `toolgate eval report` and `toolgate eval trace-pair` read the folder of a suite eval
//! (`plan.json` naming a suite, and `runs.jsonl`). The other measurements keep their runs in
//! files of their own shape (the tool-search plan names catalogue sizes, the code-mode folder
//! has transcripts and no plan, the injection suite writes `injection-plan.json`) and are
//! re-rendered by their own command. Guarantees: [`load_suite_plan`] returns a suite plan or an
//! error that names what the folder holds and what to run instead; it never writes.

use std::path::Path;

use crate::runner::{PLAN_FILE, Plan, RUNS_FILE, RunnerError};

/// What a run folder holds, judged from its file names and its plan's top-level keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolderKind {
    /// `toolgate eval --suite ...`: what `eval report` and `eval trace-pair` read.
    SuiteEval,
    /// `toolgate eval tool-search`.
    ToolSearch,
    /// `toolgate eval code-mode`.
    CodeMode,
    /// `toolgate check injection`.
    Injection,
    /// None of the above (an empty or unrelated folder, or a plan this version cannot place).
    Unknown,
}

const INJECTION_PLAN_FILE: &str = "injection-plan.json";

/// Classifies a folder from the names of its files and, when it has a `plan.json` that is a
/// JSON object, that object's keys.
pub fn classify(file_names: &[&str], plan_keys: Option<&[&str]>) -> FolderKind {
    let has = |name: &str| file_names.contains(&name);
    if let Some(keys) = plan_keys {
        let key = |k: &str| keys.contains(&k);
        if key("suite_name") && key("toolsets") {
            return FolderKind::SuiteEval;
        }
        if key("sizes") && key("catalogue_digest") {
            return FolderKind::ToolSearch;
        }
        return FolderKind::Unknown;
    }
    if has(INJECTION_PLAN_FILE) {
        return FolderKind::Injection;
    }
    let transcripts = file_names
        .iter()
        .any(|n| n.starts_with("transcript-") && n.ends_with(".json"));
    if transcripts && has(RUNS_FILE) {
        return FolderKind::CodeMode;
    }
    FolderKind::Unknown
}

/// The sentence that tells a user what `dir` holds and how to render it, for every kind that is
/// not a suite eval.
fn not_a_suite_eval(dir: &str, kind: FolderKind) -> String {
    let instead = |what: &str, command: &str| {
        format!(
            "{dir} holds {what}, not a suite eval (`toolgate eval --suite ...`); render its report with `{command}`"
        )
    };
    match kind {
        FolderKind::ToolSearch => instead(
            "a tool-search measurement",
            &format!("toolgate eval tool-search --out {dir} --report-only"),
        ),
        FolderKind::CodeMode => instead(
            "a code-mode measurement",
            &format!("toolgate eval code-mode --out {dir} --report-only"),
        ),
        FolderKind::Injection => instead(
            "injection-suite runs",
            &format!("toolgate check injection --out {dir} --report-only"),
        ),
        FolderKind::SuiteEval | FolderKind::Unknown => format!(
            "{dir} is not the folder of a suite eval: it has no readable {PLAN_FILE} naming a suite (a folder made by `toolgate eval --suite FILE --out DIR` has {PLAN_FILE} and {RUNS_FILE})"
        ),
    }
}

/// Reads the plan of the suite eval in `dir`; any other folder gets an error saying what it
/// holds and which command renders it.
pub fn load_suite_plan(dir: &Path) -> Result<Plan, RunnerError> {
    let shown = dir.display().to_string();
    let entries = std::fs::read_dir(dir).map_err(|source| RunnerError::Io {
        path: shown.clone(),
        source,
    })?;
    let names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let plan_path = dir.join(PLAN_FILE);
    let plan_text = match std::fs::read_to_string(&plan_path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(RunnerError::Io {
                path: plan_path.display().to_string(),
                source,
            });
        }
    };
    let plan_value: Option<serde_json::Value> = plan_text
        .as_deref()
        .and_then(|t| serde_json::from_str(t).ok());
    // Decided before the plan is read as a suite plan, so another measurement's plan gets its
    // own command rather than a missing-field error.
    let plan_keys: Option<Vec<&str>> = plan_value
        .as_ref()
        .and_then(serde_json::Value::as_object)
        .map(|o| o.keys().map(String::as_str).collect());
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    match classify(&name_refs, plan_keys.as_deref()) {
        FolderKind::SuiteEval => serde_json::from_value(plan_value.unwrap_or_default())
            .map_err(|e| RunnerError::Usage(format!("{}: {e}", plan_path.display()))),
        kind @ (FolderKind::ToolSearch
        | FolderKind::CodeMode
        | FolderKind::Injection
        | FolderKind::Unknown) => Err(RunnerError::Usage(not_a_suite_eval(&shown, kind))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_of_another_measurement_is_not_read_as_a_suite_eval() {
        let suite_keys = ["suite_name", "suite_digest", "model", "toolsets", "runs"];
        let search_keys = ["suite_digest", "catalogue_digest", "model", "sizes", "runs"];
        let cases: &[(&[&str], Option<&[&str]>, FolderKind)] = &[
            (
                &["plan.json", "runs.jsonl"],
                Some(&suite_keys),
                FolderKind::SuiteEval,
            ),
            (
                &["plan.json", "runs.jsonl"],
                Some(&search_keys),
                FolderKind::ToolSearch,
            ),
            (
                &["report.md", "runs.jsonl", "transcript-325-script.json"],
                None,
                FolderKind::CodeMode,
            ),
            (
                &["injection-plan.json", "injection-runs.jsonl"],
                None,
                FolderKind::Injection,
            ),
            // A plan with other keys is not guessed to be a suite plan.
            (
                &["plan.json"],
                Some(&["name", "steps"]),
                FolderKind::Unknown,
            ),
            (&["runs.jsonl"], None, FolderKind::Unknown),
            (&[], None, FolderKind::Unknown),
        ];
        for (names, keys, expected) in cases {
            assert_eq!(classify(names, *keys), *expected, "{names:?} {keys:?}");
        }
    }

    #[test]
    fn another_measurements_folder_is_told_its_own_report_command() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            dir.path().join(PLAN_FILE),
            r#"{"suite_digest":"x","catalogue_digest":"y","model":"m","sizes":[10],"runs":1}"#,
        )
        .expect("plan");
        let shown = dir.path().display().to_string();
        let message = load_suite_plan(dir.path())
            .expect_err("a tool-search plan is not a suite plan")
            .to_string();
        assert!(
            message.contains(&format!(
                "toolgate eval tool-search --out {shown} --report-only"
            )),
            "{message}"
        );

        let empty = tempfile::tempdir().expect("temp dir");
        let message = load_suite_plan(empty.path())
            .expect_err("an empty folder has no plan")
            .to_string();
        assert!(
            message.contains("is not the folder of a suite eval"),
            "{message}"
        );
    }
}
