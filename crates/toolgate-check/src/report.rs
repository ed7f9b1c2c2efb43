//! What a suite found: one [`CaseResult`] per case, judged by [`CaseResult::verdict`] (a pure
//! function of what was expected and what was observed), gathered in a [`SuiteReport`] that
//! renders the reviewer's table and is written as JSON.
//!
//! A block counts only when the trace shows it: a case that was stopped but left no trace
//! line is [`Verdict::Unlogged`], a failure, because "blocked and logged" is the claim.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::CheckError;

/// What a case must end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// An attack that must be stopped: if it gets through, the suite fails.
    Block,
    /// A legitimate request that must get through: if it is blocked, the suite fails (a
    /// control that shows the blocks are not just "block everything").
    Allow,
    /// An attack whose outcome is measured and reported but is not a hard line (an injection
    /// goal that ungated, undoable tools can carry out, or the model's answer).
    Measure,
}

/// What actually happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "observed")]
pub enum Observed {
    /// The request or effect did not happen.
    Blocked,
    /// The request went through or the effect happened.
    Passed,
    /// The case could not be checked; it fails closed.
    Error { message: String },
}

/// Where the trace shows a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceLocation {
    /// The trace file, as the report names it (relative to the report folder when inside it).
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// The rule that decided (an egress block reason, a dispatcher error code, a taint rule).
    pub rule: String,
    /// The hop chain of a redirected request, first URL first; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<String>,
}

impl TraceLocation {
    pub fn cite(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// One case's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    pub id: String,
    /// The group the case belongs to (`redirect-chain`, `ip-literal`, `expired-token`, ...).
    pub category: String,
    pub expect: Expect,
    #[serde(flatten)]
    pub observed: Observed,
    /// Where the trace shows the decision (required for a block to count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<TraceLocation>,
    /// One line for the reviewer: what was attempted and what happened.
    pub detail: String,
    /// Suite-specific facts (the injection suite's per-case flags, say).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub facts: Value,
    pub verdict: Verdict,
}

/// How a case is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// An attack stopped, with its trace line.
    Stopped,
    /// An attack that got through where it must not: the suite fails.
    Leaked,
    /// A measured attack that got through (reported, not a failure).
    SoftLeak,
    /// A control that got through, as it must.
    Passed,
    /// A control that was blocked: the suite fails.
    WronglyBlocked,
    /// Stopped, but no trace line shows it: the suite fails.
    Unlogged,
    /// Could not be checked: the suite fails.
    Error,
    /// The effect did not happen, but the case measured nothing: counted apart from stops.
    Unmeasured,
}

impl Verdict {
    /// Whether this verdict makes the suite fail.
    pub fn fails(self) -> bool {
        match self {
            Verdict::Stopped | Verdict::SoftLeak | Verdict::Passed | Verdict::Unmeasured => false,
            Verdict::Leaked | Verdict::WronglyBlocked | Verdict::Unlogged | Verdict::Error => true,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Stopped => "stopped",
            Verdict::Leaked => "LEAKED",
            Verdict::SoftLeak => "got through (measured)",
            Verdict::Passed => "passed",
            Verdict::WronglyBlocked => "WRONGLY BLOCKED",
            Verdict::Unlogged => "NOT IN TRACE",
            Verdict::Error => "NOT CHECKED",
            Verdict::Unmeasured => "not measured",
        }
    }
}

/// The verdict of `expect` given what was observed and whether the trace shows it.
pub fn judge(expect: Expect, observed: &Observed, logged: bool) -> Verdict {
    match (expect, observed) {
        (_, Observed::Error { .. }) => Verdict::Error,
        (Expect::Block | Expect::Measure, Observed::Blocked) if logged => Verdict::Stopped,
        (Expect::Block | Expect::Measure, Observed::Blocked) => Verdict::Unlogged,
        (Expect::Block, Observed::Passed) => Verdict::Leaked,
        (Expect::Measure, Observed::Passed) => Verdict::SoftLeak,
        (Expect::Allow, Observed::Passed) => Verdict::Passed,
        (Expect::Allow, Observed::Blocked) => Verdict::WronglyBlocked,
    }
}

impl CaseResult {
    /// A judged result: the verdict follows from `expect`, `observed` and `at`.
    pub fn new(
        id: impl Into<String>,
        category: impl Into<String>,
        expect: Expect,
        observed: Observed,
        at: Option<TraceLocation>,
        detail: impl Into<String>,
    ) -> Self {
        let verdict = judge(expect, &observed, at.is_some());
        CaseResult {
            id: id.into(),
            category: category.into(),
            expect,
            observed,
            at,
            detail: detail.into(),
            facts: Value::Null,
            verdict,
        }
    }

    /// An attack whose effect did not happen but that measured nothing (an injection payload
    /// the model never received, a run that ended without an answer): [`Verdict::Unmeasured`],
    /// counted apart from stops and not a failure.
    pub fn unmeasured(
        id: impl Into<String>,
        category: impl Into<String>,
        expect: Expect,
        at: Option<TraceLocation>,
        detail: impl Into<String>,
    ) -> Self {
        CaseResult {
            verdict: Verdict::Unmeasured,
            ..CaseResult::new(id, category, expect, Observed::Blocked, at, detail)
        }
    }

    pub fn with_facts(mut self, facts: Value) -> Self {
        self.facts = facts;
        self
    }
}

/// Counts over a suite's cases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Attacks tried (cases expected blocked or measured).
    pub attempted: usize,
    /// Attacks stopped with a trace line.
    pub blocked: usize,
    /// Attacks that got through where they must not.
    pub leaked: usize,
    /// Measured attacks that got through.
    pub measured_through: usize,
    /// Controls (must pass), and how many did.
    pub controls: usize,
    pub controls_passed: usize,
    pub wrongly_blocked: usize,
    pub unlogged: usize,
    pub errors: usize,
    /// Attacks that measured nothing (not counted as blocked).
    #[serde(default)]
    pub unmeasured: usize,
}

/// One suite's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteReport {
    pub suite: String,
    /// The case files read, in order.
    pub case_files: Vec<String>,
    /// The trace files the cases cite.
    pub traces: Vec<String>,
    pub duration_ms: u64,
    pub totals: Totals,
    pub passed: bool,
    pub cases: Vec<CaseResult>,
    /// Suite-wide figures (the injection suite's rates with their CIs, a load run's counts).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub figures: Value,
}

impl SuiteReport {
    pub fn new(
        suite: &str,
        case_files: Vec<String>,
        traces: Vec<String>,
        cases: Vec<CaseResult>,
        duration_ms: u64,
    ) -> Self {
        let totals = totals(&cases);
        SuiteReport {
            suite: suite.into(),
            case_files,
            traces,
            duration_ms,
            passed: !cases.is_empty() && !cases.iter().any(|c| c.verdict.fails()),
            totals,
            cases,
            figures: Value::Null,
        }
    }

    pub fn with_figures(mut self, figures: Value) -> Self {
        self.figures = figures;
        self
    }

    /// The reviewer's table: one row per case, then the totals.
    pub fn table(&self) -> String {
        let header = ["case", "category", "expected", "result", "rule", "trace"];
        let rows: Vec<[String; 6]> = self
            .cases
            .iter()
            .map(|c| {
                [
                    c.id.clone(),
                    c.category.clone(),
                    match c.expect {
                        Expect::Block => "blocked",
                        Expect::Allow => "allowed",
                        Expect::Measure => "measured",
                    }
                    .to_string(),
                    c.verdict.as_str().to_string(),
                    c.at.as_ref().map(|a| a.rule.clone()).unwrap_or_default(),
                    c.at.as_ref().map(TraceLocation::cite).unwrap_or_default(),
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: &[String]| -> String {
            let mut s = String::new();
            for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
                if i + 1 == cells.len() {
                    s.push_str(cell);
                } else {
                    s.push_str(&format!("{cell:<w$}  "));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        out.push_str(&line(&header.map(String::from)));
        for row in &rows {
            out.push_str(&line(row));
        }
        let t = &self.totals;
        out.push_str(&format!(
            "\n{}: {} attempted, {} blocked, {} leaked",
            self.suite, t.attempted, t.blocked, t.leaked
        ));
        if t.unmeasured > 0 {
            out.push_str(&format!(", {} measured nothing", t.unmeasured));
        }
        if t.measured_through > 0 {
            out.push_str(&format!(
                ", {} measured attacks got through",
                t.measured_through
            ));
        }
        if t.controls > 0 {
            out.push_str(&format!(
                "; {} of {} must-pass cases passed",
                t.controls_passed, t.controls
            ));
        }
        if t.unlogged > 0 {
            out.push_str(&format!("; {} blocks not in the trace", t.unlogged));
        }
        if t.errors > 0 {
            out.push_str(&format!("; {} cases could not be checked", t.errors));
        }
        out.push_str(if self.passed {
            " - PASS\n"
        } else {
            " - FAIL\n"
        });
        out
    }

    /// Writes the report as pretty JSON to `path` (creating its folder).
    pub fn write_json(&self, path: &Path) -> Result<(), CheckError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| CheckError::io(dir, e))?;
        }
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| CheckError::io(path, std::io::Error::other(e)))?;
        std::fs::write(path, text + "\n").map_err(|e| CheckError::io(path, e))
    }
}

fn totals(cases: &[CaseResult]) -> Totals {
    let mut t = Totals::default();
    for case in cases {
        match case.expect {
            Expect::Block | Expect::Measure => t.attempted += 1,
            Expect::Allow => t.controls += 1,
        }
        match case.verdict {
            Verdict::Stopped => t.blocked += 1,
            Verdict::Leaked => t.leaked += 1,
            Verdict::SoftLeak => t.measured_through += 1,
            Verdict::Passed => t.controls_passed += 1,
            Verdict::WronglyBlocked => t.wrongly_blocked += 1,
            Verdict::Unlogged => t.unlogged += 1,
            Verdict::Error => t.errors += 1,
            Verdict::Unmeasured => t.unmeasured += 1,
        }
    }
    t
}

/// The report's default file inside an output folder.
pub fn report_path(out_dir: &Path, suite: &str) -> PathBuf {
    out_dir.join(format!("{suite}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Option<TraceLocation> {
        Some(TraceLocation {
            file: "trace.jsonl".into(),
            line: 3,
            rule: "host_not_allowed".into(),
            hops: vec![],
        })
    }

    /// An attack that measured nothing must not be read as a block, nor fail the suite.
    #[test]
    fn an_unmeasured_attack_is_counted_apart_from_blocks_and_does_not_fail() {
        let stopped = CaseResult::new("a", "c", Expect::Block, Observed::Blocked, at(), "d");
        let unmeasured = CaseResult::unmeasured("b", "c", Expect::Block, at(), "not exposed");
        assert_eq!(unmeasured.verdict, Verdict::Unmeasured);
        let report = SuiteReport::new("s", vec![], vec![], vec![stopped, unmeasured], 1);
        assert_eq!(
            (
                report.totals.attempted,
                report.totals.blocked,
                report.totals.unmeasured
            ),
            (2, 1, 1)
        );
        assert!(report.passed);
        assert!(
            report
                .table()
                .contains("1 blocked, 0 leaked, 1 measured nothing")
        );
    }

    #[test]
    fn verdicts_follow_expectation_and_observation() {
        let error = Observed::Error {
            message: "x".into(),
        };
        let table = [
            (Expect::Block, Observed::Blocked, true, Verdict::Stopped),
            (Expect::Block, Observed::Blocked, false, Verdict::Unlogged),
            (Expect::Block, Observed::Passed, false, Verdict::Leaked),
            (Expect::Measure, Observed::Passed, false, Verdict::SoftLeak),
            (Expect::Allow, Observed::Passed, true, Verdict::Passed),
            (
                Expect::Allow,
                Observed::Blocked,
                true,
                Verdict::WronglyBlocked,
            ),
            (Expect::Block, error.clone(), true, Verdict::Error),
            (Expect::Allow, error, false, Verdict::Error),
        ];
        for (expect, observed, logged, want) in table {
            assert_eq!(
                judge(expect, &observed, logged),
                want,
                "{expect:?} {observed:?} {logged}"
            );
        }
    }

    #[test]
    fn a_block_without_a_trace_line_fails_the_suite() {
        let case = CaseResult::new("a", "c", Expect::Block, Observed::Blocked, None, "d");
        let report = SuiteReport::new("egress", vec![], vec![], vec![case], 1);
        assert!(!report.passed);
        assert_eq!(report.totals.unlogged, 1);
    }

    #[test]
    fn a_wrongly_blocked_control_fails_the_suite() {
        let cases = vec![
            CaseResult::new("a", "c", Expect::Block, Observed::Blocked, at(), "d"),
            CaseResult::new("b", "c", Expect::Allow, Observed::Blocked, at(), "d"),
        ];
        let report = SuiteReport::new("egress", vec![], vec![], cases, 1);
        assert!(!report.passed);
        assert!(report.table().contains("WRONGLY BLOCKED"));
    }

    #[test]
    fn an_empty_report_does_not_pass() {
        assert!(!SuiteReport::new("egress", vec![], vec![], vec![], 1).passed);
    }

    #[test]
    fn table_cites_the_trace_line_of_every_block() {
        let cases = vec![
            CaseResult::new("a", "unlisted", Expect::Block, Observed::Blocked, at(), "d"),
            CaseResult::new("b", "soft", Expect::Measure, Observed::Passed, None, "d"),
        ];
        let report = SuiteReport::new("egress", vec![], vec![], cases, 1);
        let table = report.table();
        assert!(table.contains("trace.jsonl:3"), "{table}");
        assert!(table.contains("host_not_allowed"), "{table}");
        assert!(
            table.contains("2 attempted, 1 blocked, 0 leaked"),
            "{table}"
        );
        assert!(report.passed, "{table}");
    }

    #[test]
    fn report_round_trips_through_json() {
        let dir = tempfile::tempdir().unwrap();
        let cases = vec![CaseResult::new(
            "a",
            "c",
            Expect::Block,
            Observed::Blocked,
            at(),
            "d",
        )];
        let report = SuiteReport::new("egress", vec!["f".into()], vec![], cases, 1);
        let path = report_path(dir.path(), "egress");
        report.write_json(&path).unwrap();
        let back: SuiteReport =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back.totals, report.totals);
        assert_eq!(back.cases[0].verdict, Verdict::Stopped);
    }
}
