//! Finds, in a finished eval, a before/after pair for the same task: a run where an argument
//! error was not recovered from (typically the terse v1 error), and a run where the model read
//! an argument error, fixed its call and succeeded (typically v2's teaching error).

use crate::record::RunRecord;

/// A run whose model fixed its own arguments: an `invalid_argument` result followed by a
/// successful call to the same tool, and a passing run.
pub fn self_corrected(run: &RunRecord) -> bool {
    run.success
        && run.calls.iter().enumerate().any(|(i, c)| {
            c.error.as_deref() == Some("invalid_argument")
                && run.calls[i + 1..]
                    .iter()
                    .any(|later| later.tool == c.tool && !later.is_error)
        })
}

/// A failed run that met an argument error.
pub fn stuck_on_arguments(run: &RunRecord) -> bool {
    !run.success
        && run
            .calls
            .iter()
            .any(|c| c.error.as_deref() == Some("invalid_argument"))
}

/// The best pair: `before` from `first_toolset` and `after` from `second_toolset` on the same
/// task when there is one; else any stuck run and any self-corrected run of the same task;
/// else a self-corrected run alone.
pub fn find<'a>(
    runs: &'a [RunRecord],
    first_toolset: &str,
    second_toolset: &str,
) -> Option<(Option<&'a RunRecord>, &'a RunRecord)> {
    let afters: Vec<&RunRecord> = runs.iter().filter(|r| self_corrected(r)).collect();
    let befores: Vec<&RunRecord> = runs.iter().filter(|r| stuck_on_arguments(r)).collect();
    for after in afters.iter().filter(|a| a.toolset == second_toolset) {
        if let Some(before) = befores
            .iter()
            .find(|b| b.task == after.task && b.toolset == first_toolset)
        {
            return Some((Some(before), after));
        }
    }
    for after in &afters {
        if let Some(before) = befores.iter().find(|b| b.task == after.task) {
            return Some((Some(before), after));
        }
    }
    afters.first().map(|after| (None, *after))
}

/// A run's calls, one block each, as text.
pub fn render(run: &RunRecord) -> String {
    let mut out = format!(
        "{} / task {} / run {}: {} after {} round(s)\n",
        run.toolset,
        run.task,
        run.index + 1,
        if run.success { "PASS" } else { "FAIL" },
        run.rounds
    );
    for c in &run.calls {
        let status = match &c.error {
            Some(code) => format!("error {code}"),
            None => "ok".into(),
        };
        out.push_str(&format!(
            "  [round {}] {} {}\n      -> {status}: {}\n",
            c.round, c.tool, c.arguments, c.result
        ));
    }
    out.push_str(&format!(
        "  answer: {}\n",
        run.answer.as_deref().unwrap_or("(none)")
    ));
    out
}
