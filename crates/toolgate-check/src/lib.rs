//! toolgate-check: the security suites a reviewer reruns with `toolgate check`.
//!
//! Every suite works the same way:
//! - its cases come from TOML files: the repository's own (`security/<suite>/*.toml`, compiled
//!   into the binary so an installed `toolgate` has them) plus any given with `--cases FILE`,
//!   in the same format (each suite's module documents its case format);
//! - each case is run against the real component (the dispatcher, the egress exit, the MCP
//!   server), with the trace written to a JSON Lines file;
//! - each case ends as a [`CaseResult`]: what it expected (blocked, allowed, or only
//!   measured), what was observed, and for every block the rule and the trace line that shows
//!   it ([`TraceLocation`]);
//! - a [`SuiteReport`] gathers them, renders the table ([`SuiteReport::table`]) and is written
//!   as JSON; [`SuiteReport::passed`] is false when anything leaked, a case that must pass was
//!   blocked, a block left no trace, or a case could not be checked (a check that cannot be
//!   made fails closed).
//!
//! Refuses: a case file with an unknown field, a duplicate case id, or an empty case list
//! ([`CheckError::Cases`], naming the file and the case).

pub mod auth;
pub mod cases;
pub mod egress;
pub mod error;
pub mod injection;
pub mod report;
pub mod robustness;
pub mod trace_index;

use std::path::PathBuf;
use std::sync::Arc;

pub use cases::{CaseSource, load_cases};
pub use error::CheckError;
pub use report::{CaseResult, Expect, Observed, SuiteReport, Totals, TraceLocation, Verdict};
pub use trace_index::{TraceIndex, TraceLine};

/// The suites `toolgate check` runs, in the order `all` runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Suite {
    Egress,
    Auth,
    Robustness,
    Injection,
}

impl Suite {
    pub const ALL: [Suite; 4] = [
        Suite::Egress,
        Suite::Auth,
        Suite::Robustness,
        Suite::Injection,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Suite::Egress => "egress",
            Suite::Auth => "auth",
            Suite::Robustness => "robustness",
            Suite::Injection => "injection",
        }
    }
}

/// Progress lines for a person watching a long suite (stderr in the CLI).
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// What every suite is given.
#[derive(Clone)]
pub struct SuiteOptions {
    /// Case files to run beside the built-in ones, in the suite's format.
    pub extra_cases: Vec<PathBuf>,
    /// Where the suite writes its trace files and report (`<suite>.json`); created if missing.
    pub out_dir: PathBuf,
    pub progress: Option<Progress>,
}

impl SuiteOptions {
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        SuiteOptions {
            extra_cases: Vec::new(),
            out_dir: out_dir.into(),
            progress: None,
        }
    }

    /// Says `line` to whoever watches.
    pub fn say(&self, line: &str) {
        if let Some(progress) = &self.progress {
            progress(line);
        }
    }
}
