//! Reports: per toolset, success with a 95% bootstrap CI, tokens and calls per task, pass^k and
//! failures by kind; the paired difference of each toolset against the one listed before it
//! (v2 - v1, then v3 - v2), with the verdict by the acceptance rule; when the runs span both
//! splits, the same tables again for each split, so a dev result and its held-out check are
//! read from one eval; rendered as Markdown, JSON and an SVG chart.
//!
//! The verdict rule: a toolset is better than the one before it if the lower bound of the 95%
//! CI of the success difference (it minus the one before, paired over tasks) is above 0, or if
//! its tokens per task are at least 20% lower and that lower bound is no lower than -15 points.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::{FailureKind, RunRecord};
use crate::stats::{self, DEFAULT_RESAMPLES, DEFAULT_SEED, Estimate};
use crate::suite::Split;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsetSummary {
    pub toolset: String,
    pub tasks: usize,
    pub runs: usize,
    pub success: Estimate,
    pub tokens_per_task: Estimate,
    pub input_tokens_per_task: f64,
    pub output_tokens_per_task: f64,
    pub calls_per_task: f64,
    pub seconds_per_run: f64,
    /// pass^k for k = the number of runs per task.
    pub pass_hat_k: Option<f64>,
    pub k: usize,
    pub failures: BTreeMap<String, usize>,
    /// Wrong-tool and invalid-argument rates, repeats, where failures happened.
    pub design: crate::metrics::DesignMetrics,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub better: bool,
    pub text: String,
}

/// A toolset against the one listed before it, paired over the tasks both ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub baseline: String,
    pub candidate: String,
    /// Candidate minus baseline success, paired over tasks.
    pub difference: Estimate,
    pub verdict: Verdict,
}

/// The toolset table and comparisons over one split's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitReport {
    pub split: Split,
    pub toolsets: Vec<ToolsetSummary>,
    pub comparisons: Vec<Comparison>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub suite: String,
    pub model: String,
    pub toolsets: Vec<ToolsetSummary>,
    /// Each toolset against the one before it, in the eval's order.
    pub comparisons: Vec<Comparison>,
    /// Per split, only when the runs span more than one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_split: Vec<SplitReport>,
    pub resamples: usize,
    pub seed: u64,
    pub runs: Vec<RunRecord>,
}

/// Per task (in first-seen order), the values of each run.
fn per_task(
    records: &[&RunRecord],
    value: impl Fn(&RunRecord) -> f64,
) -> (Vec<String>, Vec<Vec<f64>>) {
    let mut order: Vec<String> = Vec::new();
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in records {
        if !values.contains_key(&r.task) {
            order.push(r.task.clone());
        }
        values.entry(r.task.clone()).or_default().push(value(r));
    }
    let rows = order
        .iter()
        .map(|t| values.get(t).cloned().unwrap_or_default())
        .collect();
    (order, rows)
}

fn summarize(toolset: &str, records: &[&RunRecord]) -> Option<ToolsetSummary> {
    let (_, success) = per_task(records, |r| f64::from(u8::from(r.success)));
    let (_, tokens) = per_task(records, |r| r.tokens() as f64);
    let (_, input) = per_task(records, |r| r.input_tokens as f64);
    let (_, output) = per_task(records, |r| r.output_tokens as f64);
    let (_, calls) = per_task(records, |r| r.calls.len() as f64);
    let k = success.iter().map(Vec::len).min().unwrap_or(0);
    let counts: Vec<(usize, usize)> = success
        .iter()
        .map(|runs| (runs.len(), runs.iter().filter(|x| **x > 0.5).count()))
        .collect();
    let mut failures = BTreeMap::new();
    for kind in FailureKind::ALL {
        let n = records.iter().filter(|r| r.failure == Some(kind)).count();
        if n > 0 {
            failures.insert(kind.as_str().to_string(), n);
        }
    }
    Some(ToolsetSummary {
        toolset: toolset.into(),
        tasks: success.len(),
        runs: records.len(),
        success: stats::bootstrap_mean(&success, DEFAULT_RESAMPLES, DEFAULT_SEED)?,
        tokens_per_task: stats::bootstrap_mean(&tokens, DEFAULT_RESAMPLES, DEFAULT_SEED)?,
        input_tokens_per_task: stats::task_mean(&input)?,
        output_tokens_per_task: stats::task_mean(&output)?,
        calls_per_task: stats::task_mean(&calls)?,
        seconds_per_run: records.iter().map(|r| r.seconds).sum::<f64>()
            / records.len().max(1) as f64,
        pass_hat_k: stats::pass_hat_k(&counts, k),
        k,
        failures,
        design: crate::metrics::design_metrics(records),
    })
}

/// The acceptance rule, applied.
pub fn verdict(first: &ToolsetSummary, second: &ToolsetSummary, difference: &Estimate) -> Verdict {
    let points = |x: f64| x * 100.0;
    let token_ratio = second.tokens_per_task.mean / first.tokens_per_task.mean.max(1e-9);
    let ci = format!(
        "success difference {:+.1} points, 95% CI [{:+.1}, {:+.1}]",
        points(difference.mean),
        points(difference.low),
        points(difference.high)
    );
    let tokens = format!(
        "tokens per task {:.0} vs {:.0} ({:+.0}%)",
        second.tokens_per_task.mean,
        first.tokens_per_task.mean,
        (token_ratio - 1.0) * 100.0
    );
    if difference.low > 0.0 {
        Verdict {
            better: true,
            text: format!(
                "{} is better than {}: the CI of the {ci} lies above 0; {tokens}.",
                second.toolset, first.toolset
            ),
        }
    } else if token_ratio <= 0.8 && difference.low >= -0.15 {
        Verdict {
            better: true,
            text: format!(
                "{} is better than {} on cost: {tokens}, at least 20% fewer, and the {ci} rules out a loss of more than 15 points.",
                second.toolset, first.toolset
            ),
        }
    } else if difference.high < 0.0 {
        // The interval excludes 0 from below: a loss is shown, and saying it "includes 0" would
        // turn a measured regression into an open question.
        Verdict {
            better: false,
            text: format!(
                "{} is worse than {}: the CI of the {ci} lies below 0; {tokens}.",
                second.toolset, first.toolset
            ),
        }
    } else {
        let why = if token_ratio > 0.8 {
            "its tokens per task are not 20% lower"
        } else {
            "the CI's lower bound is below -15 points"
        };
        Verdict {
            better: false,
            text: format!(
                "Not shown: {} is not better than {} by the rule. The {ci} includes 0, and {why} ({tokens}). More tasks or runs narrow the interval.",
                second.toolset, first.toolset
            ),
        }
    }
}

pub fn build(suite: &str, model: &str, toolsets: &[String], runs: Vec<RunRecord>) -> Report {
    let all: Vec<&RunRecord> = runs.iter().collect();
    let (summaries, comparisons) = tables(toolsets, &all);
    let ran = |split: Split| runs.iter().any(|r| r.split == split);
    let by_split = if ran(Split::Dev) && ran(Split::Heldout) {
        [Split::Dev, Split::Heldout]
            .into_iter()
            .map(|split| {
                let records: Vec<&RunRecord> = runs.iter().filter(|r| r.split == split).collect();
                let (toolsets, comparisons) = tables(toolsets, &records);
                SplitReport {
                    split,
                    toolsets,
                    comparisons,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    Report {
        suite: suite.into(),
        model: model.into(),
        toolsets: summaries,
        comparisons,
        by_split,
        resamples: DEFAULT_RESAMPLES,
        seed: DEFAULT_SEED,
        runs,
    }
}

/// The per-toolset summaries of `records`, and each toolset against the one before it.
fn tables(toolsets: &[String], records: &[&RunRecord]) -> (Vec<ToolsetSummary>, Vec<Comparison>) {
    let of = |t: &String| -> Vec<&RunRecord> {
        records
            .iter()
            .copied()
            .filter(|r| &r.toolset == t)
            .collect()
    };
    let summaries: Vec<ToolsetSummary> = toolsets
        .iter()
        .filter_map(|t| summarize(t, &of(t)))
        .collect();
    let comparisons = summaries
        .windows(2)
        .filter_map(|pair| {
            let [baseline, candidate] = pair else {
                return None;
            };
            let difference = paired_difference(&of(&baseline.toolset), &of(&candidate.toolset))?;
            Some(Comparison {
                baseline: baseline.toolset.clone(),
                candidate: candidate.toolset.clone(),
                verdict: verdict(baseline, candidate, &difference),
                difference,
            })
        })
        .collect();
    (summaries, comparisons)
}

/// Paired bootstrap of b's success minus a's, over the tasks both ran.
fn paired_difference(a: &[&RunRecord], b: &[&RunRecord]) -> Option<Estimate> {
    let success = |r: &RunRecord| f64::from(u8::from(r.success));
    let (tasks_a, values_a) = per_task(a, success);
    let (tasks_b, values_b) = per_task(b, success);
    let paired: Vec<(Vec<f64>, Vec<f64>)> = tasks_a
        .iter()
        .zip(values_a)
        .filter_map(|(t, va)| {
            tasks_b
                .iter()
                .position(|tb| tb == t)
                .and_then(|i| values_b.get(i))
                .map(|vb| (va, vb.clone()))
        })
        .collect();
    let (pa, pb): (Vec<Vec<f64>>, Vec<Vec<f64>>) = paired.into_iter().unzip();
    stats::paired_bootstrap_difference(&pa, &pb, DEFAULT_RESAMPLES, DEFAULT_SEED)
}

fn pct(e: &Estimate) -> String {
    format!(
        "{:.0}% [{:.0}, {:.0}]",
        e.mean * 100.0,
        e.low * 100.0,
        e.high * 100.0
    )
}

/// The toolset table, then each comparison's difference and verdict.
fn push_tables(out: &mut String, toolsets: &[ToolsetSummary], comparisons: &[Comparison]) {
    out.push_str("| toolset | tasks × runs | success (95% CI) | tokens per task (95% CI) | input / output | tool calls per task | pass^k | s per run |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for s in toolsets {
        out.push_str(&format!(
            "| {} | {} × {} | {} | {:.0} [{:.0}, {:.0}] | {:.0} / {:.0} | {:.2} | {} | {:.1} |\n",
            s.toolset,
            s.tasks,
            s.k,
            pct(&s.success),
            s.tokens_per_task.mean,
            s.tokens_per_task.low,
            s.tokens_per_task.high,
            s.input_tokens_per_task,
            s.output_tokens_per_task,
            s.calls_per_task,
            s.pass_hat_k
                .map_or("-".into(), |p| format!("{:.2} (k={})", p, s.k)),
            s.seconds_per_run
        ));
    }
    for c in comparisons {
        let d = &c.difference;
        out.push_str(&format!(
            "\nSuccess difference ({} − {}), paired over tasks: {:+.1} points, 95% CI [{:+.1}, {:+.1}].\n",
            c.candidate,
            c.baseline,
            d.mean * 100.0,
            d.low * 100.0,
            d.high * 100.0
        ));
        out.push_str(&format!("\n**Verdict:** {}\n", c.verdict.text));
    }
}

pub fn markdown(report: &Report) -> String {
    let mut out = format!(
        "# Eval: {} on {}\n\n95% bootstrap CIs ({} resamples over tasks, then runs within tasks; seed {}).\n\n",
        report.suite, report.model, report.resamples, report.seed
    );
    push_tables(&mut out, &report.toolsets, &report.comparisons);
    if !report.by_split.is_empty() {
        out.push_str("\n## By split\n");
        for part in &report.by_split {
            let name = match part.split {
                Split::Dev => "dev",
                Split::Heldout => "held-out",
            };
            out.push_str(&format!("\n### {name}\n\n"));
            push_tables(&mut out, &part.toolsets, &part.comparisons);
        }
    }
    out.push_str("\n## Tool-design metrics\n\n| toolset | wrong tool | invalid arguments | of those, acted on | repeated calls (same arguments) | calls per successful run | failed at first call / later call / final answer |\n| --- | --- | --- | --- | --- | --- | --- |\n");
    for s in &report.toolsets {
        let d = &s.design;
        let share = |x: crate::metrics::Share| {
            format!("{:.1}% ({}/{})", x.rate() * 100.0, x.count, x.total)
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} / {} / {} |\n",
            s.toolset,
            share(d.wrong_tool),
            share(d.invalid_argument),
            share(d.invalid_argument_acted_on),
            share(d.repeated),
            d.calls_per_success
                .map_or("-".into(), |c| format!("{c:.2}")),
            d.failed_at_first_call,
            d.failed_at_later_call,
            d.failed_at_final_answer
        ));
    }
    out.push_str("\n## Failures by kind\n\n| toolset | kind | runs |\n| --- | --- | --- |\n");
    for s in &report.toolsets {
        if s.failures.is_empty() {
            out.push_str(&format!("| {} | none | 0 |\n", s.toolset));
        }
        for (kind, n) in &s.failures {
            out.push_str(&format!("| {} | {kind} | {n} |\n", s.toolset));
        }
    }
    out.push_str("\n## Runs\n\n| toolset | task | run | result | rounds | calls | tokens | answer |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for r in &report.runs {
        let result = match r.failure {
            None => "pass".to_string(),
            Some(kind) => kind.as_str().to_string(),
        };
        let answer: String = r
            .answer
            .as_deref()
            .unwrap_or("")
            .chars()
            .take(80)
            .collect::<String>()
            .replace(['|', '\n'], " ");
        out.push_str(&format!(
            "| {} | {} | {} | {result} | {} | {} | {} | {answer} |\n",
            r.toolset,
            r.task,
            r.index + 1,
            r.rounds,
            r.calls.len(),
            r.tokens()
        ));
    }
    out
}

/// Two panels: success with CI whiskers, and tokens per task with CI whiskers.
pub fn svg(report: &Report) -> String {
    const W: f64 = 720.0;
    const H: f64 = 320.0;
    const PANEL_W: f64 = 300.0;
    const TOP: f64 = 50.0;
    const PLOT_H: f64 = 200.0;
    let colors = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759"];
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{} ({})</text>\n",
        W / 2.0,
        escape(&report.suite),
        escape(&report.model)
    );
    let max_tokens = report
        .toolsets
        .iter()
        .map(|s| s.tokens_per_task.high)
        .fold(1.0_f64, f64::max);
    for (panel, (title, max)) in [
        ("success rate (95% CI)", 1.0),
        ("tokens per task (95% CI)", max_tokens),
    ]
    .iter()
    .enumerate()
    {
        let x0 = 60.0 + panel as f64 * (PANEL_W + 60.0);
        out.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{title}</text>\n<line x1=\"{x0}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n<line x1=\"{x0}\" y1=\"{TOP}\" x2=\"{x0}\" y2=\"{}\" stroke=\"#333\"/>\n",
            x0 + PANEL_W / 2.0,
            TOP - 8.0,
            TOP + PLOT_H,
            x0 + PANEL_W,
            TOP + PLOT_H,
            TOP + PLOT_H
        ));
        for tick in 0..=4 {
            let value = max * f64::from(tick) / 4.0;
            let y = TOP + PLOT_H - PLOT_H * f64::from(tick) / 4.0;
            let label = if panel == 0 {
                format!("{:.0}%", value * 100.0)
            } else {
                format!("{value:.0}")
            };
            out.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"10\">{label}</text>\n",
                x0 - 4.0,
                y + 3.0
            ));
        }
        let n = report.toolsets.len().max(1) as f64;
        let slot = PANEL_W / n;
        for (i, s) in report.toolsets.iter().enumerate() {
            let e = if panel == 0 {
                &s.success
            } else {
                &s.tokens_per_task
            };
            let scale = |v: f64| TOP + PLOT_H - PLOT_H * (v / max).clamp(0.0, 1.0);
            let bx = x0 + slot * i as f64 + slot * 0.2;
            let bw = slot * 0.6;
            let color = colors[i % colors.len()];
            out.push_str(&format!(
                "<rect x=\"{bx:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{color}\"/>\n",
                scale(e.mean),
                TOP + PLOT_H - scale(e.mean)
            ));
            let cx = bx + bw / 2.0;
            out.push_str(&format!(
                "<line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\n<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\n<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\n",
                scale(e.low),
                scale(e.high),
                cx - 6.0,
                scale(e.low),
                cx + 6.0,
                scale(e.low),
                cx - 6.0,
                scale(e.high),
                cx + 6.0,
                scale(e.high)
            ));
            let value = if panel == 0 {
                format!("{:.0}%", e.mean * 100.0)
            } else {
                format!("{:.0}", e.mean)
            };
            out.push_str(&format!(
                "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{value}</text>\n",
                TOP + PLOT_H + 16.0,
                escape(&s.toolset),
                TOP + PLOT_H + 30.0
            ));
        }
    }
    out.push_str("</svg>\n");
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(name: &str, tokens: f64) -> ToolsetSummary {
        ToolsetSummary {
            toolset: name.into(),
            tasks: 20,
            runs: 60,
            success: Estimate {
                mean: 0.5,
                low: 0.4,
                high: 0.6,
            },
            tokens_per_task: Estimate {
                mean: tokens,
                low: tokens * 0.9,
                high: tokens * 1.1,
            },
            input_tokens_per_task: tokens,
            output_tokens_per_task: 0.0,
            calls_per_task: 1.0,
            seconds_per_run: 1.0,
            pass_hat_k: None,
            k: 3,
            failures: BTreeMap::new(),
            design: crate::metrics::design_metrics(&[]),
        }
    }

    #[test]
    fn verdict_rule_table() {
        let v1 = summary("books-v1", 10_000.0);
        let d = |mean: f64, low: f64, high: f64| Estimate { mean, low, high };
        let cases = [
            (
                "lower bound above zero is better",
                summary("books-v2", 10_000.0),
                d(0.2, 0.05, 0.35),
                true,
            ),
            (
                "20% fewer tokens and no big loss is better",
                summary("books-v2", 7_000.0),
                d(0.0, -0.1, 0.1),
                true,
            ),
            (
                "exactly 20% fewer counts",
                summary("books-v2", 8_000.0),
                d(0.0, -0.15, 0.1),
                true,
            ),
            (
                "fewer tokens but a possible big loss is not",
                summary("books-v2", 5_000.0),
                d(-0.05, -0.2, 0.1),
                false,
            ),
            (
                "same tokens and an interval over zero is not",
                summary("books-v2", 9_500.0),
                d(0.05, -0.05, 0.15),
                false,
            ),
        ];
        for (name, v2, diff, better) in cases {
            let verdict = verdict(&v1, &v2, &diff);
            assert_eq!(verdict.better, better, "{name}: {}", verdict.text);
        }
    }

    #[test]
    fn a_shown_loss_is_never_reported_as_an_interval_that_includes_zero() {
        let v1 = summary("notes-v6", 8_400.0);
        let d = |mean: f64, low: f64, high: f64| Estimate { mean, low, high };
        let cases = [
            (
                "a loss shown",
                d(-0.45, -0.683, -0.217),
                "is worse than",
                false,
            ),
            (
                "an interval over zero",
                d(-0.05, -0.2, 0.1),
                "includes 0",
                false,
            ),
            ("a gain shown", d(0.2, 0.05, 0.35), "is better than", true),
        ];
        for (name, diff, says, better) in cases {
            let verdict = verdict(&v1, &summary("notes-v7", 9_900.0), &diff);
            assert_eq!(verdict.better, better, "{name}: {}", verdict.text);
            assert!(verdict.text.contains(says), "{name}: {}", verdict.text);
        }
    }

    fn run(toolset: &str, task: &str, split: Split, index: usize, success: bool) -> RunRecord {
        RunRecord {
            toolset: toolset.into(),
            task: task.into(),
            category: "c".into(),
            split,
            index,
            success,
            failure: (!success).then_some(FailureKind::WrongAnswer),
            checks: Vec::new(),
            answer: None,
            ending: crate::record::Ending::FinalAnswer,
            ending_detail: String::new(),
            rounds: 1,
            input_tokens: 100,
            output_tokens: 10,
            cached_input_tokens: 0,
            calls: Vec::new(),
            seconds: 1.0,
            seed: None,
        }
    }

    /// v1 passes nothing; v2 passes the dev task; v3 passes both tasks.
    fn three_toolsets_over_two_splits() -> Vec<RunRecord> {
        let mut runs = Vec::new();
        for (task, split) in [("d", Split::Dev), ("h", Split::Heldout)] {
            for index in 0..2 {
                runs.push(run("books-v1", task, split, index, false));
                runs.push(run("books-v2", task, split, index, split == Split::Dev));
                runs.push(run("books-v3", task, split, index, true));
            }
        }
        runs
    }

    fn names(toolsets: &[&str]) -> Vec<String> {
        toolsets.iter().map(|t| t.to_string()).collect()
    }

    fn three_way_report() -> Report {
        build(
            "books",
            "m",
            &names(&["books-v1", "books-v2", "books-v3"]),
            three_toolsets_over_two_splits(),
        )
    }

    #[test]
    fn a_third_toolset_is_compared_with_the_second_not_hidden() {
        let report = three_way_report();
        let pairs: Vec<(&str, &str, f64)> = report
            .comparisons
            .iter()
            .map(|c| (c.baseline.as_str(), c.candidate.as_str(), c.difference.mean))
            .collect();
        assert_eq!(
            pairs,
            [("books-v1", "books-v2", 0.5), ("books-v2", "books-v3", 0.5)]
        );
        let text = markdown(&report);
        assert!(
            text.contains("Success difference (books-v2 − books-v1)"),
            "{text}"
        );
        assert!(
            text.contains("Success difference (books-v3 − books-v2)"),
            "{text}"
        );
    }

    #[test]
    fn a_held_out_result_is_not_averaged_away_into_the_dev_one() {
        let report = three_way_report();
        let splits: Vec<Split> = report.by_split.iter().map(|p| p.split).collect();
        assert_eq!(splits, [Split::Dev, Split::Heldout]);
        let v2_success: Vec<f64> = report
            .by_split
            .iter()
            .map(|p| p.toolsets[1].success.mean)
            .collect();
        assert_eq!(v2_success, [1.0, 0.0]);
        let held_out = &report.by_split[1];
        assert_eq!(held_out.comparisons[0].difference.mean, 0.0);
        assert_eq!(held_out.comparisons[1].difference.mean, 1.0);
        let text = markdown(&report);
        assert!(text.contains("## By split"), "{text}");
        assert!(text.contains("### held-out"), "{text}");
    }

    #[test]
    fn one_split_gets_no_split_section() {
        let runs: Vec<RunRecord> = three_toolsets_over_two_splits()
            .into_iter()
            .filter(|r| r.split == Split::Dev)
            .collect();
        let report = build("books", "m", &names(&["books-v1", "books-v2"]), runs);
        assert!(report.by_split.is_empty());
        assert_eq!(report.comparisons.len(), 1);
        assert!(!markdown(&report).contains("## By split"));
    }
}
