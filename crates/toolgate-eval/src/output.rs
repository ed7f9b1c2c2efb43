//! Writing and re-reading a run directory: `plan.json`, `runs.jsonl`, and the rendered
//! `report.md`, `report.json` and `chart.svg`.

use std::path::{Path, PathBuf};

use crate::folder::load_suite_plan;
use crate::report::{self, Report};
use crate::runner::{RUNS_FILE, RunnerError, load_records};

/// Renders the report of `dir` from its plan and runs, writes the three files, returns it.
pub fn write_report(dir: &Path) -> Result<(Report, Vec<PathBuf>), RunnerError> {
    let plan = load_suite_plan(dir)?;
    let runs = load_records(&dir.join(RUNS_FILE))?;
    if runs.is_empty() {
        return Err(RunnerError::Usage(format!(
            "{} has no finished runs yet",
            dir.display()
        )));
    }
    let report = report::build(&plan.suite_name, &plan.model, &plan.toolsets, runs);
    let files = [
        (dir.join("report.md"), report::markdown(&report)),
        (
            dir.join("report.json"),
            serde_json::to_string_pretty(&report).unwrap_or_default(),
        ),
        (dir.join("chart.svg"), report::svg(&report)),
    ];
    let mut written = Vec::new();
    for (path, body) in files {
        std::fs::write(&path, body).map_err(|source| RunnerError::Io {
            path: path.display().to_string(),
            source,
        })?;
        written.push(path);
    }
    Ok((report, written))
}
