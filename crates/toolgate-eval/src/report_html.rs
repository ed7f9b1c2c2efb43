//! The eval report as one self-contained HTML page (`toolgate eval report DIR --html FILE`):
//! the verdict of each comparison, each toolset's success with its 95% CI, the paired
//! difference, results per task, and each run's transcript (the task's prompt when the suite
//! file is at hand, every tool call with its arguments and result, the final answer, the checks)
//! in a collapsible `<details>`.
//!
//! Contract:
//! - Every value taken from the run folder is HTML-escaped: a transcript holds text an attacker
//!   wrote (note bodies, fetched web pages, the model's echo of them). Escaping is the template
//!   engine's auto-escape, forced on for every template whatever its name, and the template
//!   marks nothing `safe`; numbers are formatted in Rust and escaped like the rest.
//! - The page needs nothing else: one small inline stylesheet, no script, no remote resource;
//!   a Content-Security-Policy in the page forbids scripts anyway, as a second wall.
//! - Usable by keyboard and a screen reader: `lang`, headings per section, tables with
//!   captions and `scope`d headers, native `<details>`/`<summary>` (focusable, opened with
//!   Enter or Space), pass and fail said in words, not only in colour.
//! - A folder that is not a suite eval is refused with the message of
//!   [`crate::folder::load_suite_plan`] (which names the command that does render it).
//!
//! Engine: minijinja. It is maintained, renders at run time from a template kept beside this
//! file, and toolgate-llm already builds it (chat templates) with these features, so the page
//! adds no crate and no compile time; askama would have added its derive macro and a second
//! template language for the one page.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use minijinja::{AutoEscape, Environment};
use serde::Serialize;
use toolgate_core::canonical::sha256_hex;

use crate::folder::load_suite_plan;
use crate::record::{Ending, RunRecord};
use crate::report::{self, Comparison, Report, ToolsetSummary};
use crate::runner::{Plan, RUNS_FILE, RunnerError, load_records};
use crate::stats::Estimate;
use crate::suite::{Split, Suite};

const TEMPLATE_NAME: &str = "report.html";
const TEMPLATE: &str = include_str!("report_html.html");

#[derive(Debug, thiserror::Error)]
pub enum ReportHtmlError {
    /// The folder is not a suite eval, or its plan or runs cannot be read.
    #[error(transparent)]
    Folder(#[from] RunnerError),
    #[error("{dir} has no finished runs yet: nothing to render")]
    NoRuns { dir: String },
    #[error("rendering the report page: {0}")]
    Template(#[from] minijinja::Error),
    #[error("{path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// The task prompts of the suite an eval ran, when `suite_path` is that suite (same digest as
/// the plan), with a sentence saying whether the transcripts show them and why not.
pub fn prompts_of(plan: &Plan, suite_path: &Path) -> (BTreeMap<String, String>, String) {
    let shown = suite_path.display();
    let Ok(text) = std::fs::read_to_string(suite_path) else {
        return (
            BTreeMap::new(),
            format!(
                "The task prompts are not shown: the suite file {shown} was not found. Each transcript shows the tool calls, their results and the final answer."
            ),
        );
    };
    if sha256_hex(text.as_bytes()) != plan.suite_digest {
        return (
            BTreeMap::new(),
            format!(
                "The task prompts are not shown: {shown} has changed since the eval ran (its digest differs from the plan's). Each transcript shows the tool calls, their results and the final answer."
            ),
        );
    }
    match Suite::parse(&text, &shown.to_string()) {
        Ok(suite) => (
            suite.tasks.into_iter().map(|t| (t.id, t.prompt)).collect(),
            format!("Task prompts from {shown}, the suite file the eval ran."),
        ),
        Err(e) => (
            BTreeMap::new(),
            format!("The task prompts are not shown: {e}."),
        ),
    }
}

/// Renders the report of the suite eval in `dir` to `out`, with the prompts of `suite_path`
/// when it is the suite the eval ran. Returns the report it rendered.
pub fn write_html(dir: &Path, out: &Path, suite_path: &Path) -> Result<Report, ReportHtmlError> {
    let plan = load_suite_plan(dir)?;
    let runs = load_records(&dir.join(RUNS_FILE))?;
    if runs.is_empty() {
        return Err(ReportHtmlError::NoRuns {
            dir: dir.display().to_string(),
        });
    }
    let report = report::build(&plan.suite_name, &plan.model, &plan.toolsets, runs);
    let (prompts, prompts_note) = prompts_of(&plan, suite_path);
    let page = render(&report, &plan, &prompts, &prompts_note)?;
    std::fs::write(out, page).map_err(|source| ReportHtmlError::Write {
        path: out.display().to_string(),
        source,
    })?;
    Ok(report)
}

/// Where `write_html` looks for the suite by default: `evals/<suite name>.toml` under `root`.
pub fn default_suite_path(root: &Path, plan: &Plan) -> PathBuf {
    root.join("evals").join(format!("{}.toml", plan.suite_name))
}

/// The page, as a string.
pub fn render(
    report: &Report,
    plan: &Plan,
    prompts: &BTreeMap<String, String>,
    prompts_note: &str,
) -> Result<String, minijinja::Error> {
    let mut env = Environment::new();
    // Escape every template as HTML, not only those whose name ends in .html.
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.add_template(TEMPLATE_NAME, TEMPLATE)?;
    env.get_template(TEMPLATE_NAME)?
        .render(page_view(report, plan, prompts, prompts_note))
}

#[derive(Serialize)]
struct PageView {
    suite: String,
    model: String,
    resamples: usize,
    seed: u64,
    plan: PlanView,
    toolsets: Vec<String>,
    comparisons: Vec<ComparisonView>,
    toolset_rows: Vec<ToolsetRow>,
    by_split: Vec<SplitView>,
    tasks: Vec<TaskRow>,
    runs: Vec<RunView>,
    prompts_note: String,
}

#[derive(Serialize)]
struct PlanView {
    runs: usize,
    split: &'static str,
    max_rounds: u32,
    temperature: String,
}

#[derive(Serialize)]
struct ComparisonView {
    baseline: String,
    candidate: String,
    difference: String,
    interval: String,
    better: bool,
    verdict: String,
}

#[derive(Serialize)]
struct ToolsetRow {
    toolset: String,
    tasks: usize,
    k: usize,
    success: String,
    interval: String,
    tokens: String,
    calls: String,
    pass_hat_k: String,
    seconds: String,
    failures: String,
}

#[derive(Serialize)]
struct SplitView {
    name: &'static str,
    toolset_rows: Vec<ToolsetRow>,
    comparisons: Vec<ComparisonView>,
}

#[derive(Serialize)]
struct TaskRow {
    task: String,
    category: String,
    split: &'static str,
    /// One per toolset of the eval, in its order.
    cells: Vec<TaskCell>,
}

#[derive(Serialize)]
struct TaskCell {
    text: String,
    class: &'static str,
}

#[derive(Serialize)]
struct RunView {
    toolset: String,
    task: String,
    number: usize,
    success: bool,
    result: String,
    ending: &'static str,
    ending_detail: String,
    rounds: u32,
    tokens: u64,
    seconds: String,
    prompt: Option<String>,
    calls: Vec<CallView>,
    answer: Option<String>,
    checks: Vec<CheckView>,
}

#[derive(Serialize)]
struct CallView {
    round: u32,
    tool: String,
    arguments: String,
    is_error: bool,
    error: Option<String>,
    result: String,
}

#[derive(Serialize)]
struct CheckView {
    kind: String,
    passed: bool,
    detail: String,
}

fn split_name(split: Split) -> &'static str {
    match split {
        Split::Dev => "dev",
        Split::Heldout => "held-out",
    }
}

fn ending_words(ending: Ending) -> &'static str {
    match ending {
        Ending::FinalAnswer => "a final answer",
        Ending::RoundCap => "the round cap",
        Ending::TokenBudget => "the token budget",
        Ending::ModelError => "a model error",
    }
}

fn percent_interval(e: &Estimate) -> String {
    format!("[{:.0}%, {:.0}%]", e.low * 100.0, e.high * 100.0)
}

fn points(x: f64) -> String {
    format!("{:+.1} points", x * 100.0)
}

fn comparison_view(c: &Comparison) -> ComparisonView {
    ComparisonView {
        baseline: c.baseline.clone(),
        candidate: c.candidate.clone(),
        difference: points(c.difference.mean),
        interval: format!(
            "[{}, {}]",
            points(c.difference.low),
            points(c.difference.high)
        ),
        better: c.verdict.better,
        verdict: c.verdict.text.clone(),
    }
}

fn toolset_row(s: &ToolsetSummary) -> ToolsetRow {
    let failures = if s.failures.is_empty() {
        "none".to_string()
    } else {
        s.failures
            .iter()
            .map(|(kind, n)| format!("{kind}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    ToolsetRow {
        toolset: s.toolset.clone(),
        tasks: s.tasks,
        k: s.k,
        success: format!("{:.0}%", s.success.mean * 100.0),
        interval: percent_interval(&s.success),
        tokens: format!(
            "{:.0} [{:.0}, {:.0}]",
            s.tokens_per_task.mean, s.tokens_per_task.low, s.tokens_per_task.high
        ),
        calls: format!("{:.2}", s.calls_per_task),
        pass_hat_k: s
            .pass_hat_k
            .map_or_else(|| "-".to_string(), |p| format!("{p:.2} (k={})", s.k)),
        seconds: format!("{:.1}", s.seconds_per_run),
        failures,
    }
}

/// Per task in first-seen order, each toolset's successes out of its runs.
fn task_rows(runs: &[RunRecord], toolsets: &[String]) -> Vec<TaskRow> {
    let mut rows: Vec<TaskRow> = Vec::new();
    let mut counts: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    for r in runs {
        if !rows.iter().any(|row| row.task == r.task) {
            rows.push(TaskRow {
                task: r.task.clone(),
                category: r.category.clone(),
                split: split_name(r.split),
                cells: Vec::new(),
            });
        }
        let entry = counts
            .entry((r.task.clone(), r.toolset.clone()))
            .or_default();
        entry.1 += 1;
        if r.success {
            entry.0 += 1;
        }
    }
    for row in &mut rows {
        row.cells = toolsets
            .iter()
            .map(|t| match counts.get(&(row.task.clone(), t.clone())) {
                None => TaskCell {
                    text: "not run".into(),
                    class: "muted",
                },
                Some(&(passed, of)) => TaskCell {
                    text: format!("{passed}/{of} passed"),
                    class: if passed == of { "pass" } else { "fail" },
                },
            })
            .collect();
    }
    rows
}

fn run_view(r: &RunRecord, prompts: &BTreeMap<String, String>) -> RunView {
    RunView {
        toolset: r.toolset.clone(),
        task: r.task.clone(),
        number: r.index + 1,
        success: r.success,
        result: match r.failure {
            None if r.success => "pass".to_string(),
            None => "fail".to_string(),
            Some(kind) => format!("fail ({})", kind.as_str()),
        },
        ending: ending_words(r.ending),
        ending_detail: r.ending_detail.clone(),
        rounds: r.rounds,
        tokens: r.tokens(),
        seconds: format!("{:.1}", r.seconds),
        prompt: prompts.get(&r.task).cloned(),
        calls: r
            .calls
            .iter()
            .map(|c| CallView {
                round: c.round,
                tool: c.tool.clone(),
                arguments: serde_json::to_string_pretty(&c.arguments)
                    .unwrap_or_else(|_| c.arguments.to_string()),
                is_error: c.is_error,
                error: c.error.clone(),
                result: c.result.clone(),
            })
            .collect(),
        answer: r.answer.clone(),
        checks: r
            .checks
            .iter()
            .map(|c| CheckView {
                kind: c.kind.clone(),
                passed: c.passed,
                detail: c.detail.clone(),
            })
            .collect(),
    }
}

fn page_view(
    report: &Report,
    plan: &Plan,
    prompts: &BTreeMap<String, String>,
    prompts_note: &str,
) -> PageView {
    PageView {
        suite: report.suite.clone(),
        model: report.model.clone(),
        resamples: report.resamples,
        seed: report.seed,
        plan: PlanView {
            runs: plan.runs,
            split: plan.split.map_or("both splits", split_name),
            max_rounds: plan.max_rounds,
            temperature: plan
                .temperature
                .map_or_else(|| "greedy".to_string(), |t| t.to_string()),
        },
        toolsets: plan.toolsets.clone(),
        comparisons: report.comparisons.iter().map(comparison_view).collect(),
        toolset_rows: report.toolsets.iter().map(toolset_row).collect(),
        by_split: report
            .by_split
            .iter()
            .map(|part| SplitView {
                name: split_name(part.split),
                toolset_rows: part.toolsets.iter().map(toolset_row).collect(),
                comparisons: part.comparisons.iter().map(comparison_view).collect(),
            })
            .collect(),
        tasks: task_rows(&report.runs, &plan.toolsets),
        runs: report.runs.iter().map(|r| run_view(r, prompts)).collect(),
        prompts_note: prompts_note.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::CheckOutcome;
    use crate::record::CallRecord;

    const HOSTILE: &str = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=1\"></details><h1>forged</h1>";

    fn plan() -> Plan {
        Plan {
            suite_name: "notes".into(),
            suite_digest: "0".into(),
            model: "m".into(),
            toolsets: vec!["a".into(), "b".into()],
            runs: 1,
            split: None,
            tasks: vec!["t1".into()],
            max_rounds: 8,
            temperature: None,
            seed: None,
        }
    }

    fn record(toolset: &str, success: bool) -> RunRecord {
        RunRecord {
            toolset: toolset.into(),
            task: "t1".into(),
            category: "lookup".into(),
            split: Split::Dev,
            index: 0,
            success,
            failure: None,
            checks: vec![CheckOutcome {
                kind: "answer_contains".into(),
                passed: success,
                detail: HOSTILE.into(),
            }],
            answer: Some(HOSTILE.into()),
            ending: Ending::FinalAnswer,
            ending_detail: String::new(),
            rounds: 2,
            input_tokens: 10,
            output_tokens: 5,
            cached_input_tokens: 0,
            calls: vec![CallRecord {
                round: 1,
                tool: "notes_get".into(),
                arguments: serde_json::json!({ "q": HOSTILE }),
                is_error: false,
                error: None,
                result: HOSTILE.into(),
            }],
            seconds: 1.0,
            seed: None,
        }
    }

    /// A plan of toolsets `a` and `b` and its report: one failed run of `a`, one passed of `b`.
    fn two_runs() -> (Plan, Report) {
        let plan = plan();
        let report = report::build(
            "notes",
            "m",
            &plan.toolsets,
            vec![record("a", false), record("b", true)],
        );
        (plan, report)
    }

    #[test]
    fn transcript_markup_is_escaped_not_rendered() {
        let (plan, report) = two_runs();
        let mut prompts = BTreeMap::new();
        prompts.insert("t1".to_string(), HOSTILE.to_string());
        let page = render(&report, &plan, &prompts, HOSTILE).unwrap();
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains("<h1>forged"), "{page}");
        assert!(
            page.contains("&lt;script&gt;window.pwned=1&lt;&#x2f;script&gt;"),
            "{page}"
        );
        // One real <details> per run; the hostile closing tags were escaped.
        assert_eq!(page.matches("<details").count(), 2);
        assert_eq!(page.matches("</details>").count(), 2);
    }

    #[test]
    fn a_page_names_verdict_interval_and_every_run() {
        let (plan, report) = two_runs();
        let page = render(&report, &plan, &BTreeMap::new(), "no prompts").unwrap();
        assert!(
            page.starts_with("<!doctype html>\n<html lang=\"en\">"),
            "{page}"
        );
        assert!(page.contains("<title>Eval: notes on m</title>"), "{page}");
        assert!(page.contains("<th scope=\"col\">95% CI</th>"), "{page}");
        assert!(page.contains("Success difference (b − a)"), "{page}");
        assert!(page.contains("a · t1 · run 1"), "{page}");
        assert!(page.contains("b · t1 · run 1"), "{page}");
    }
}
