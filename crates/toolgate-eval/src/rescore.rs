//! Re-scoring a suite eval's recorded runs with today's checks (`toolgate eval rescore`).
//!
//! Guarantees: each record is re-judged from what the run recorded: answer checks from the
//! recorded final answer and the suite's task prompt, with the checks resolved as a run
//! resolves them today; state checks (`state_sql`) keep their recorded outcome, because the
//! run's final store was not kept; success and failure kind are recomputed with today's rule
//! ([`crate::record::classify`], which also fails a final answer that echoes the recorded tool
//! results). Every other field of a record is kept as it was.
//!
//! Refused, with nothing written: a suite file other than the one the eval ran (its SHA-256
//! differs from the plan's), a suite that no longer loads, a record of a task the suite lacks,
//! a record whose checks are not the task's checks (count and kinds). `runs.jsonl` is replaced
//! atomically (a temporary file in the same folder, synced, then renamed over it), so a
//! failure leaves the old file whole.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use toolgate_core::canonical::sha256_hex;
use toolgate_wiring::Store;

use crate::checks::{self, CheckOutcome, ResolvedCheck};
use crate::folder::load_suite_plan;
use crate::record::{Ending, FailureKind, RunRecord, classify, echo_of};
use crate::runner::{RUNS_FILE, RunnerError, load_records, resolve_checks};
use crate::suite::{Suite, SuiteError, Task};

#[derive(Debug, thiserror::Error)]
pub enum RescoreError {
    #[error(transparent)]
    Runner(#[from] RunnerError),
    #[error(transparent)]
    Suite(#[from] SuiteError),
    #[error(
        "{suite} is not the suite {dir} was run with (the plan's suite digest is {planned}, the file's is {found}); pass --suite with the file the eval ran"
    )]
    SuiteMismatch {
        dir: String,
        suite: String,
        planned: String,
        found: String,
    },
    #[error("run {run} is of task `{task}`, which the suite does not have")]
    UnknownTask { run: String, task: String },
    #[error(
        "run {run} recorded the checks [{recorded}], but the suite's task `{task}` has [{suite}]: the suite changed since the run"
    )]
    ChecksDiffer {
        run: String,
        task: String,
        recorded: String,
        suite: String,
    },
}

/// One run whose success changed, and why (the first failing check's detail, or the ending).
#[derive(Debug, Clone, PartialEq)]
pub struct Flip {
    pub task: String,
    /// 0-based run index, as in the record.
    pub index: usize,
    pub why: String,
}

/// Before and after, for one toolset of the eval.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsetChange {
    pub toolset: String,
    pub runs: usize,
    pub before: usize,
    pub after: usize,
    /// Runs that passed before and fail now.
    pub now_failing: Vec<Flip>,
    /// Runs that failed before and pass now.
    pub now_passing: Vec<Flip>,
}

/// The re-judged records (same order) and what changed per toolset (in order of first record).
#[derive(Debug, Clone, PartialEq)]
pub struct Rescored {
    pub records: Vec<RunRecord>,
    pub changes: Vec<ToolsetChange>,
}

fn run_name(r: &RunRecord) -> String {
    format!("{}/{}#{}", r.toolset, r.task, r.index + 1)
}

fn kinds(outcomes: impl Iterator<Item = String>) -> String {
    outcomes.collect::<Vec<_>>().join(", ")
}

fn kind_of(check: &ResolvedCheck) -> &'static str {
    match check {
        ResolvedCheck::AnswerNumber { .. } => "answer_number",
        ResolvedCheck::StateSql { .. } => "state_sql",
        ResolvedCheck::AnswerContains { .. } => "answer_contains",
        ResolvedCheck::AnswerExcludes { .. } => "answer_excludes",
    }
}

/// Re-judges one record against its task's resolved checks (pure).
pub fn rescore_record(
    record: &RunRecord,
    resolved: &[ResolvedCheck],
) -> Result<RunRecord, RescoreError> {
    let same_checks = record.checks.len() == resolved.len()
        && record
            .checks
            .iter()
            .zip(resolved)
            .all(|(o, r)| o.kind == kind_of(r));
    if !same_checks {
        return Err(RescoreError::ChecksDiffer {
            run: run_name(record),
            task: record.task.clone(),
            recorded: kinds(record.checks.iter().map(|c| c.kind.clone())),
            suite: kinds(resolved.iter().map(|r| kind_of(r).to_string())),
        });
    }
    let outcomes: Vec<CheckOutcome> = resolved
        .iter()
        .zip(&record.checks)
        .map(|(check, recorded)| {
            // A state check's store is gone: its recorded outcome stands.
            checks::judge_answer(check, record.answer.as_deref())
                .unwrap_or_else(|| recorded.clone())
        })
        .collect();
    let failure = classify(
        record.ending,
        record.answer.as_deref(),
        &record.calls,
        &outcomes,
    );
    Ok(RunRecord {
        success: failure.is_none(),
        failure,
        checks: outcomes,
        ..record.clone()
    })
}

/// Why a run that now fails fails: an echo, its first failing check, or its ending.
fn why_failing(r: &RunRecord) -> String {
    if r.failure == Some(FailureKind::EchoedToolResult)
        && let Some(echo) = echo_of(r.answer.as_deref(), &r.calls)
    {
        return echo.describe();
    }
    match r.checks.iter().find(|c| !c.passed) {
        Some(c) => format!("{}: {}", c.kind, c.detail),
        None => {
            let ending = match r.ending {
                Ending::FinalAnswer => "a final answer",
                Ending::RoundCap => "the round cap",
                Ending::TokenBudget => "the token budget",
                Ending::ModelError => "a model error",
            };
            format!("its checks pass but it ended with {ending}, not a final answer")
        }
    }
}

/// Why a run that now passes passes: the checks whose outcome changed.
fn why_passing(before: &RunRecord, after: &RunRecord) -> String {
    let changed: Vec<String> = before
        .checks
        .iter()
        .zip(&after.checks)
        .filter(|(b, a)| b.passed != a.passed)
        .map(|(_, a)| format!("{}: {}", a.kind, a.detail))
        .collect();
    if changed.is_empty() {
        "the success rule changed".into()
    } else {
        changed.join("; ")
    }
}

/// Re-judges every record (pure): `resolved` maps a task id to its checks, resolved as a run
/// resolves them.
pub fn rescore(
    records: &[RunRecord],
    resolved: &HashMap<String, Vec<ResolvedCheck>>,
) -> Result<Rescored, RescoreError> {
    let mut out = Vec::with_capacity(records.len());
    let mut changes: Vec<ToolsetChange> = Vec::new();
    for record in records {
        let checks = resolved
            .get(&record.task)
            .ok_or_else(|| RescoreError::UnknownTask {
                run: run_name(record),
                task: record.task.clone(),
            })?;
        let after = rescore_record(record, checks)?;
        let position = match changes.iter().position(|c| c.toolset == record.toolset) {
            Some(i) => i,
            None => {
                changes.push(ToolsetChange {
                    toolset: record.toolset.clone(),
                    runs: 0,
                    before: 0,
                    after: 0,
                    now_failing: Vec::new(),
                    now_passing: Vec::new(),
                });
                changes.len() - 1
            }
        };
        let change = &mut changes[position];
        change.runs += 1;
        change.before += usize::from(record.success);
        change.after += usize::from(after.success);
        let flip = |why: String| Flip {
            task: record.task.clone(),
            index: record.index,
            why,
        };
        match (record.success, after.success) {
            (true, false) => change.now_failing.push(flip(why_failing(&after))),
            (false, true) => change.now_passing.push(flip(why_passing(record, &after))),
            (true, true) | (false, false) => {}
        }
        out.push(after);
    }
    Ok(Rescored {
        records: out,
        changes,
    })
}

/// Re-scores the suite eval in `dir` against the suite at `suite_path` and replaces its
/// `runs.jsonl` (see the module doc); the caller re-renders the report.
pub fn rescore_dir(dir: &Path, suite_path: &Path) -> Result<Vec<ToolsetChange>, RescoreError> {
    let plan = load_suite_plan(dir)?;
    let shown = suite_path.display().to_string();
    let text = std::fs::read_to_string(suite_path).map_err(|source| SuiteError::Read {
        path: shown.clone(),
        source,
    })?;
    let found = sha256_hex(text.as_bytes());
    if found != plan.suite_digest {
        return Err(RescoreError::SuiteMismatch {
            dir: dir.display().to_string(),
            suite: shown,
            planned: plan.suite_digest,
            found,
        });
    }
    let suite = Suite::parse(&text, &shown)?;
    let runs_path = dir.join(RUNS_FILE);
    let records = load_records(&runs_path)?;
    if records.is_empty() {
        return Err(
            RunnerError::Usage(format!("{} has no finished runs yet", dir.display())).into(),
        );
    }
    let tasks: Vec<&Task> = suite.tasks.iter().collect();
    let resolved = resolve_on_a_fresh_store(&suite, &tasks)?;
    let by_id: HashMap<String, Vec<ResolvedCheck>> =
        tasks.iter().map(|t| t.id.clone()).zip(resolved).collect();
    let rescored = rescore(&records, &by_id)?;
    write_atomically(&runs_path, &rescored.records)?;
    Ok(rescored.changes)
}

/// Resolves the checks on the suite's initial store, made in a temporary folder that is removed
/// afterwards.
fn resolve_on_a_fresh_store(
    suite: &Suite,
    tasks: &[&Task],
) -> Result<Vec<Vec<ResolvedCheck>>, RescoreError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let folder =
        std::env::temp_dir().join(format!("toolgate-rescore-{}-{nanos}", std::process::id()));
    let io = |source| RunnerError::Io {
        path: folder.display().to_string(),
        source,
    };
    std::fs::create_dir_all(&folder).map_err(io)?;
    let resolved = Store::open_or_init(suite.suite.store, &folder.join("initial.sqlite"))
        .map_err(RunnerError::from)
        .and_then(|store| resolve_checks(&store, tasks));
    // Best effort: the folder holds only a copy of the sample store.
    let _ = std::fs::remove_dir_all(&folder);
    Ok(resolved?)
}

fn write_atomically(path: &Path, records: &[RunRecord]) -> Result<(), RunnerError> {
    let temporary = path.with_file_name(format!(".{RUNS_FILE}.rescore.tmp"));
    let io = |p: &Path| {
        let shown = p.display().to_string();
        move |source| RunnerError::Io {
            path: shown.clone(),
            source,
        }
    };
    let mut body = String::new();
    for record in records {
        let line = serde_json::to_string(record)
            .map_err(|e| RunnerError::Usage(format!("cannot serialise a record: {e}")))?;
        body.push_str(&line);
        body.push('\n');
    }
    let mut file = std::fs::File::create(&temporary).map_err(io(&temporary))?;
    file.write_all(body.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io(&temporary))?;
    drop(file);
    std::fs::rename(&temporary, path).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::CheckOutcome;
    use crate::suite::Split;

    fn record(
        task: &str,
        answer: Option<&str>,
        ending: Ending,
        checks: Vec<CheckOutcome>,
    ) -> RunRecord {
        let success = checks.iter().all(|c| c.passed);
        RunRecord {
            toolset: "notes".into(),
            task: task.into(),
            category: "read".into(),
            split: Split::Dev,
            index: 0,
            success,
            failure: (!success).then_some(FailureKind::WrongAnswer),
            checks,
            answer: answer.map(str::to_string),
            ending,
            ending_detail: String::new(),
            rounds: 2,
            input_tokens: 1,
            output_tokens: 1,
            cached_input_tokens: 0,
            calls: vec![crate::record::CallRecord {
                round: 1,
                tool: "notes_search".into(),
                arguments: serde_json::json!({}),
                is_error: false,
                error: None,
                result: "{}".into(),
            }],
            seconds: 1.0,
            seed: None,
        }
    }

    fn outcome(kind: &str, passed: bool) -> CheckOutcome {
        CheckOutcome {
            kind: kind.into(),
            passed,
            detail: "recorded".into(),
        }
    }

    fn number(expected: f64) -> ResolvedCheck {
        ResolvedCheck::AnswerNumber {
            expected,
            prompt_numbers: Vec::new(),
            figures_asked: 1,
        }
    }

    #[test]
    fn a_lenient_pass_on_a_listing_flips_to_a_failure_with_its_reason() {
        let runs = [record(
            "count",
            Some("notes 1, 2, 3, 4"),
            Ending::FinalAnswer,
            vec![outcome("answer_number", true)],
        )];
        let resolved = HashMap::from([("count".to_string(), vec![number(3.0)])]);
        let rescored = rescore(&runs, &resolved).unwrap();
        assert!(!rescored.records[0].success);
        assert_eq!(rescored.records[0].failure, Some(FailureKind::WrongAnswer));
        let change = &rescored.changes[0];
        assert_eq!((change.runs, change.before, change.after), (1, 1, 0));
        assert!(
            change.now_failing[0].why.contains("first figure"),
            "{:?}",
            change.now_failing
        );
    }

    #[test]
    fn a_state_check_keeps_its_recorded_outcome_and_a_round_cap_is_not_a_success() {
        let state = ResolvedCheck::StateSql {
            query: "SELECT 1".into(),
            expected: vec![],
        };
        let runs = [record(
            "mixed",
            Some("Done: 3 notes."),
            Ending::RoundCap,
            vec![outcome("state_sql", true), outcome("answer_number", true)],
        )];
        let resolved = HashMap::from([("mixed".to_string(), vec![state, number(3.0)])]);
        let rescored = rescore(&runs, &resolved).unwrap();
        let after = &rescored.records[0];
        assert_eq!(after.checks[0], outcome("state_sql", true));
        assert!(after.checks[1].passed);
        assert_eq!(after.failure, Some(FailureKind::RoundCap));
        assert!(
            rescored.changes[0].now_failing[0]
                .why
                .contains("the round cap")
        );
    }

    #[test]
    fn a_recorded_pass_that_echoed_its_tool_result_flips_to_a_failure_with_its_reason() {
        let result = r#"{"result":{"total_matches":1,"hits":[{"id":23,"due":"2025-12-12"}]}}"#;
        let mut echoed = record(
            "due",
            Some(result),
            Ending::FinalAnswer,
            vec![outcome("answer_contains", true)],
        );
        echoed.calls[0].result = result.into();
        let mut answered = echoed.clone();
        answered.index = 1;
        answered.answer = Some("It is due 2025-12-12.".into());
        let resolved = HashMap::from([(
            "due".to_string(),
            vec![ResolvedCheck::AnswerContains {
                expected: vec!["2025-12-12".into()],
            }],
        )]);
        let rescored = rescore(&[echoed, answered], &resolved).unwrap();
        assert_eq!(
            rescored.records[0].failure,
            Some(FailureKind::EchoedToolResult)
        );
        assert!(
            rescored.records[0].checks[0].passed,
            "the check itself passes"
        );
        assert!(rescored.records[1].success);
        let change = &rescored.changes[0];
        assert_eq!((change.runs, change.before, change.after), (2, 2, 1));
        assert!(
            change.now_failing[0].why.contains("raw tool output"),
            "{:?}",
            change.now_failing
        );
    }

    #[test]
    fn records_whose_checks_are_not_the_suites_are_refused() {
        let runs = [record(
            "t",
            Some("3"),
            Ending::FinalAnswer,
            vec![outcome("answer_contains", true)],
        )];
        let resolved = HashMap::from([("t".to_string(), vec![number(3.0)])]);
        assert!(matches!(
            rescore(&runs, &resolved),
            Err(RescoreError::ChecksDiffer { .. })
        ));
        let none = HashMap::new();
        assert!(matches!(
            rescore(&runs, &none),
            Err(RescoreError::UnknownTask { .. })
        ));
    }
}
