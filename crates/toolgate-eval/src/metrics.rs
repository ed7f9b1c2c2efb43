//! The tool-design metrics beside success and tokens, computed from run records alone (pure):
//! wrong-tool and invalid-argument rates over calls, calls per successful run, calls that
//! repeat an earlier call of the same run with unchanged arguments, how many invalid-argument
//! errors the model acted on (called the tool again with changed arguments, rather than answering
//! or repeating the call), and where each failed run went wrong (its first call, a later call,
//! or its final answer).

use serde::{Deserialize, Serialize};

use crate::record::{CallRecord, RunRecord};

/// Where a failed run first went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureAt {
    /// Its first call failed, or it made none.
    FirstCall,
    /// A later call failed (the first went through).
    LaterCall,
    /// Every call went through; the answer or the final state was wrong.
    FinalAnswer,
}

impl FailureAt {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureAt::FirstCall => "first call",
            FailureAt::LaterCall => "later call",
            FailureAt::FinalAnswer => "final answer",
        }
    }
}

/// A tool name the model made up, or one outside its catalogue.
pub fn is_wrong_tool(call: &CallRecord) -> bool {
    match call.error.as_deref() {
        Some("forbidden") => true,
        Some("not_found") => call.result.contains("there is no tool"),
        _ => false,
    }
}

pub fn is_invalid_argument(call: &CallRecord) -> bool {
    call.error.as_deref() == Some("invalid_argument")
}

/// Calls of the run equal to an earlier call (same tool, same arguments).
pub fn repeated_calls(calls: &[CallRecord]) -> usize {
    calls
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            calls[..*i]
                .iter()
                .any(|earlier| earlier.tool == c.tool && earlier.arguments == c.arguments)
        })
        .count()
}

/// Invalid-argument calls followed, as the run's next call, by a call of the same tool with other
/// arguments: the error was acted on, not answered to the user or sent again unchanged.
pub fn acted_on_invalid_argument(calls: &[CallRecord]) -> usize {
    calls
        .windows(2)
        .filter(|pair| {
            is_invalid_argument(&pair[0])
                && pair[1].tool == pair[0].tool
                && pair[1].arguments != pair[0].arguments
        })
        .count()
}

/// Where `run` went wrong; `None` for a run that succeeded.
pub fn failure_at(run: &RunRecord) -> Option<FailureAt> {
    if run.success {
        return None;
    }
    Some(match run.calls.iter().position(|c| c.is_error) {
        None if run.calls.is_empty() => FailureAt::FirstCall,
        None => FailureAt::FinalAnswer,
        Some(0) => FailureAt::FirstCall,
        Some(_) => FailureAt::LaterCall,
    })
}

/// A count out of a total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub count: usize,
    pub total: usize,
}

impl Share {
    pub fn rate(self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.count as f64 / self.total as f64
        }
    }
}

/// The metrics of one toolset's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignMetrics {
    pub wrong_tool: Share,
    pub invalid_argument: Share,
    /// Invalid-argument calls the model acted on, out of all invalid-argument calls.
    pub invalid_argument_acted_on: Share,
    /// Mean calls over the runs that succeeded (`None` when none did).
    pub calls_per_success: Option<f64>,
    /// Calls repeating an earlier call of their run, out of all calls.
    pub repeated: Share,
    pub seconds_per_run: f64,
    pub failed_at_first_call: usize,
    pub failed_at_later_call: usize,
    pub failed_at_final_answer: usize,
}

pub fn design_metrics(runs: &[&RunRecord]) -> DesignMetrics {
    let calls: Vec<&CallRecord> = runs.iter().flat_map(|r| r.calls.iter()).collect();
    let share = |pred: &dyn Fn(&CallRecord) -> bool| Share {
        count: calls.iter().filter(|c| pred(c)).count(),
        total: calls.len(),
    };
    let successes: Vec<&&RunRecord> = runs.iter().filter(|r| r.success).collect();
    let at = |place: FailureAt| runs.iter().filter(|r| failure_at(r) == Some(place)).count();
    let invalid_argument = share(&is_invalid_argument);
    DesignMetrics {
        wrong_tool: share(&is_wrong_tool),
        invalid_argument,
        invalid_argument_acted_on: Share {
            count: runs
                .iter()
                .map(|r| acted_on_invalid_argument(&r.calls))
                .sum(),
            total: invalid_argument.count,
        },
        calls_per_success: (!successes.is_empty()).then(|| {
            successes.iter().map(|r| r.calls.len()).sum::<usize>() as f64 / successes.len() as f64
        }),
        repeated: Share {
            count: runs.iter().map(|r| repeated_calls(&r.calls)).sum(),
            total: calls.len(),
        },
        seconds_per_run: runs.iter().map(|r| r.seconds).sum::<f64>() / runs.len().max(1) as f64,
        failed_at_first_call: at(FailureAt::FirstCall),
        failed_at_later_call: at(FailureAt::LaterCall),
        failed_at_final_answer: at(FailureAt::FinalAnswer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Ending;
    use serde_json::json;

    fn call(
        tool: &str,
        arguments: serde_json::Value,
        error: Option<&str>,
        result: &str,
    ) -> CallRecord {
        CallRecord {
            round: 1,
            tool: tool.into(),
            arguments,
            is_error: error.is_some(),
            error: error.map(Into::into),
            result: result.into(),
        }
    }

    fn run(success: bool, calls: Vec<CallRecord>) -> RunRecord {
        RunRecord {
            toolset: "books-v2".into(),
            task: "t".into(),
            category: "c".into(),
            split: crate::suite::Split::Dev,
            index: 0,
            success,
            failure: None,
            checks: Vec::new(),
            answer: None,
            ending: Ending::FinalAnswer,
            ending_detail: String::new(),
            rounds: 1,
            input_tokens: 0,
            output_tokens: 0,
            cached_input_tokens: 0,
            calls,
            seconds: 2.0,
            seed: None,
        }
    }

    #[test]
    fn an_unknown_tool_name_counts_as_a_wrong_tool_but_an_unknown_id_does_not() {
        for (error, result, wrong) in [
            (
                Some("not_found"),
                "there is no tool named books_find; did you mean books_search?",
                true,
            ),
            (Some("not_found"), "no book has id 99999", false),
            (Some("forbidden"), "not in your catalogue", true),
            (
                Some("invalid_argument"),
                "year_min must be an integer",
                false,
            ),
            (None, "{}", false),
        ] {
            assert_eq!(
                is_wrong_tool(&call("x", json!({}), error, result)),
                wrong,
                "{result}"
            );
        }
    }

    #[test]
    fn a_call_repeating_an_earlier_one_is_counted_each_time_it_repeats() {
        let same = || call("books_get", json!({"ids": [1]}), None, "{}");
        let calls = vec![
            same(),
            call("books_get", json!({"ids": [2]}), None, "{}"),
            same(),
            same(),
        ];
        assert_eq!(repeated_calls(&calls), 2);
        assert_eq!(repeated_calls(&calls[..2]), 0);
    }

    #[test]
    fn an_error_answered_or_repeated_is_not_counted_as_acted_on() {
        let bad = || {
            call(
                "books_search",
                json!({"limit": 100}),
                Some("invalid_argument"),
                "limit",
            )
        };
        let fixed = || call("books_search", json!({"limit": 50}), None, "{}");
        let other_tool = || call("books_get", json!({"ids": [1]}), None, "{}");
        for (calls, acted) in [
            (vec![bad(), fixed()], 1),
            (vec![bad()], 0),
            (vec![bad(), bad()], 0),
            (vec![bad(), other_tool()], 0),
            (vec![bad(), bad(), fixed(), bad(), fixed()], 2),
        ] {
            assert_eq!(acted_on_invalid_argument(&calls), acted, "{calls:?}");
        }
    }

    #[test]
    fn where_a_failed_run_went_wrong() {
        let ok = || call("books_search", json!({}), None, "{}");
        let bad = || {
            call(
                "books_tag",
                json!({}),
                Some("invalid_argument"),
                "tags must not be empty",
            )
        };
        for (success, calls, at) in [
            (true, vec![ok()], None),
            (false, vec![], Some(FailureAt::FirstCall)),
            (false, vec![bad(), ok()], Some(FailureAt::FirstCall)),
            (false, vec![ok(), bad()], Some(FailureAt::LaterCall)),
            (false, vec![ok(), ok()], Some(FailureAt::FinalAnswer)),
        ] {
            assert_eq!(failure_at(&run(success, calls)), at);
        }
    }

    #[test]
    fn rates_are_over_calls_and_calls_per_success_over_successful_runs() {
        let ok = || call("books_search", json!({"author": "x"}), None, "{}");
        let invalid = || call("books_tag", json!({}), Some("invalid_argument"), "bad");
        let wrong = || {
            call(
                "books_find",
                json!({}),
                Some("not_found"),
                "there is no tool named books_find",
            )
        };
        let runs = [
            run(true, vec![ok(), ok()]),
            run(false, vec![invalid(), wrong(), ok()]),
            run(true, vec![ok(), ok(), ok(), ok()]),
        ];
        let refs: Vec<&RunRecord> = runs.iter().collect();
        let m = design_metrics(&refs);
        assert_eq!(m.wrong_tool, Share { count: 1, total: 9 });
        assert_eq!(m.invalid_argument, Share { count: 1, total: 9 });
        assert_eq!(m.invalid_argument_acted_on, Share { count: 0, total: 1 });
        assert_eq!(m.calls_per_success, Some(3.0));
        assert_eq!(m.repeated, Share { count: 4, total: 9 });
        assert_eq!(
            (
                m.failed_at_first_call,
                m.failed_at_later_call,
                m.failed_at_final_answer
            ),
            (1, 0, 0)
        );
        assert!((m.seconds_per_run - 2.0).abs() < 1e-9);
    }

    #[test]
    fn no_successful_run_has_no_calls_per_success() {
        let runs = [run(false, vec![])];
        let refs: Vec<&RunRecord> = runs.iter().collect();
        assert_eq!(design_metrics(&refs).calls_per_success, None);
        assert_eq!(design_metrics(&refs).wrong_tool.rate(), 0.0);
    }
}
