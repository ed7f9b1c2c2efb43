//! What one run left behind, and how a failed run is classified.
//!
//! A run is a success only when every check passed AND it ended in a final answer that is not
//! an echo of raw tool output ([`crate::echo`]); the one exception is a task judged only on the
//! final store (every check `state_sql`), whose work is done when the store is right however
//! the loop stopped and whatever it said. A run that hit the round cap, the token budget or a
//! model error with passing answer checks is classified by its ending; one whose final answer
//! is mostly a tool result's JSON is [`FailureKind::EchoedToolResult`] (a user shown raw tool
//! output got no answer, even when the right value is somewhere in it).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checks::CheckOutcome;
use crate::echo::{Echo, echoed_tool_output};

/// Why a run failed, from the most to the least fundamental cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The model errored (transport, decode, context overflow).
    ModelError,
    /// The run hit the round cap.
    RoundCap,
    /// The run hit the token budget.
    TokenBudget,
    /// The model answered without calling any tool.
    NoToolCall,
    /// The model named a tool that does not exist or is not in its catalogue.
    WrongTool,
    /// Calls were refused for their arguments and the task was not completed.
    InvalidArguments,
    /// The store did not end in the expected state.
    WrongFinalState,
    /// The final answer was mostly a tool result's raw JSON, not an answer.
    EchoedToolResult,
    /// The store was right (or untouched) but the answer was wrong.
    WrongAnswer,
}

impl FailureKind {
    pub const ALL: [FailureKind; 9] = [
        FailureKind::ModelError,
        FailureKind::RoundCap,
        FailureKind::TokenBudget,
        FailureKind::NoToolCall,
        FailureKind::WrongTool,
        FailureKind::InvalidArguments,
        FailureKind::WrongFinalState,
        FailureKind::EchoedToolResult,
        FailureKind::WrongAnswer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::ModelError => "model error",
            FailureKind::RoundCap => "round cap",
            FailureKind::TokenBudget => "token budget",
            FailureKind::NoToolCall => "no tool call",
            FailureKind::WrongTool => "wrong tool",
            FailureKind::InvalidArguments => "invalid arguments",
            FailureKind::WrongFinalState => "wrong final state",
            FailureKind::EchoedToolResult => "echoed tool result",
            FailureKind::WrongAnswer => "wrong answer",
        }
    }
}

/// One tool call as the run made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub round: u32,
    pub tool: String,
    pub arguments: Value,
    pub is_error: bool,
    pub error: Option<String>,
    /// The result as the model read it (bounded).
    pub result: String,
}

/// A tool result as a record keeps it: whole up to `max` characters, else its first `max`
/// characters and a mark of the cut, `… (N chars)`.
pub fn bound_result(text: &str, max: usize) -> String {
    let chars = text.chars().count();
    if chars <= max {
        text.to_string()
    } else {
        format!(
            "{}{CUT_MARK}{chars} chars)",
            text.chars().take(max).collect::<String>()
        )
    }
}

const CUT_MARK: &str = "… (";

/// The kept part of a recorded result that [`bound_result`] cut; `None` for a whole one.
pub fn kept_part(result: &str) -> Option<&str> {
    let (kept, tail) = result.rsplit_once(CUT_MARK)?;
    let count = tail.strip_suffix(" chars)")?;
    (!count.is_empty() && count.chars().all(|c| c.is_ascii_digit())).then_some(kept)
}

/// How the run ended, in the words of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    FinalAnswer,
    RoundCap,
    TokenBudget,
    ModelError,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub toolset: String,
    pub task: String,
    pub category: String,
    pub split: crate::suite::Split,
    pub index: usize,
    pub success: bool,
    pub failure: Option<FailureKind>,
    pub checks: Vec<CheckOutcome>,
    pub answer: Option<String>,
    pub ending: Ending,
    pub ending_detail: String,
    pub rounds: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub calls: Vec<CallRecord>,
    pub seconds: f64,
    /// The run's sampling seed, when the eval sampled (absent for greedy runs and in
    /// records made before seeds were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl RunRecord {
    pub fn key(&self) -> (String, String, usize) {
        (self.toolset.clone(), self.task.clone(), self.index)
    }

    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// The run's final answer as an echo of its tool results, if it is one ([`crate::echo`]).
pub fn echo_of(answer: Option<&str>, calls: &[CallRecord]) -> Option<Echo> {
    echoed_tool_output(answer?, calls.iter().map(|c| c.result.as_str()))
}

/// Classifies a run: `None` (a success) when every check passed and the run ended in a final
/// answer that is not an echo of its tool results, or when every check passed and every check
/// is `state_sql`.
pub fn classify(
    ending: Ending,
    answer: Option<&str>,
    calls: &[CallRecord],
    checks: &[CheckOutcome],
) -> Option<FailureKind> {
    let all_passed = !checks.is_empty() && checks.iter().all(|c| c.passed);
    let only_state = checks.iter().all(|c| c.kind == "state_sql");
    let echo = echo_of(answer, calls).is_some();
    if all_passed && ((ending == Ending::FinalAnswer && !echo) || only_state) {
        return None;
    }
    match ending {
        Ending::ModelError => return Some(FailureKind::ModelError),
        Ending::RoundCap => return Some(FailureKind::RoundCap),
        Ending::TokenBudget => return Some(FailureKind::TokenBudget),
        Ending::FinalAnswer => {}
    }
    if calls.is_empty() {
        return Some(FailureKind::NoToolCall);
    }
    let had = |code: &str| calls.iter().any(|c| c.error.as_deref() == Some(code));
    // not_found is also what a real tool says about an unknown id; only an unknown tool name
    // (the dispatcher's "there is no tool") is a wrong tool.
    let unknown_tool = calls
        .iter()
        .any(|c| c.error.as_deref() == Some("not_found") && c.result.contains("there is no tool"));
    if unknown_tool || had("forbidden") {
        return Some(FailureKind::WrongTool);
    }
    let state_failed = checks.iter().any(|c| c.kind == "state_sql" && !c.passed);
    if had("invalid_argument") {
        return Some(FailureKind::InvalidArguments);
    }
    if state_failed {
        Some(FailureKind::WrongFinalState)
    } else if echo {
        Some(FailureKind::EchoedToolResult)
    } else {
        Some(FailureKind::WrongAnswer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(error: Option<&str>, result: &str) -> CallRecord {
        CallRecord {
            round: 1,
            tool: "t".into(),
            arguments: json!({}),
            is_error: error.is_some(),
            error: error.map(str::to_string),
            result: result.into(),
        }
    }

    fn check(kind: &str, passed: bool) -> CheckOutcome {
        CheckOutcome {
            kind: kind.into(),
            passed,
            detail: String::new(),
        }
    }

    #[test]
    fn a_cut_result_gives_back_its_kept_part_and_a_whole_one_nothing() {
        let text = "{\"result\":\"abcdefghij\"}";
        let cut = bound_result(text, 8);
        assert_eq!(cut, "{\"result… (23 chars)");
        assert_eq!(kept_part(&cut), Some("{\"result"));
        assert_eq!(bound_result(text, 23), text);
        for whole in [text, "a note about… (things)", "ends with … (12 words)"] {
            assert_eq!(kept_part(whole), None, "{whole}");
        }
    }

    #[test]
    fn failure_classification_table() {
        let ok = call(None, "{}");
        let cases: Vec<(
            &str,
            Ending,
            Vec<CallRecord>,
            Vec<CheckOutcome>,
            Option<FailureKind>,
        )> = vec![
            (
                "all checks pass is a success",
                Ending::FinalAnswer,
                vec![ok.clone()],
                vec![check("answer_number", true)],
                None,
            ),
            (
                "a round cap with passing answer checks is not a success",
                Ending::RoundCap,
                vec![ok.clone()],
                vec![check("answer_number", true)],
                Some(FailureKind::RoundCap),
            ),
            (
                "a model error with passing answer and state checks is not a success",
                Ending::ModelError,
                vec![ok.clone()],
                vec![check("state_sql", true), check("answer_contains", true)],
                Some(FailureKind::ModelError),
            ),
            (
                "a token budget ending with a passing answer check is not a success",
                Ending::TokenBudget,
                vec![ok.clone()],
                vec![check("answer_excludes", true)],
                Some(FailureKind::TokenBudget),
            ),
            (
                "a state-only task whose store is right succeeds at the round cap",
                Ending::RoundCap,
                vec![ok.clone()],
                vec![check("state_sql", true), check("state_sql", true)],
                None,
            ),
            (
                "model error wins",
                Ending::ModelError,
                vec![],
                vec![check("answer_number", false)],
                Some(FailureKind::ModelError),
            ),
            (
                "round cap",
                Ending::RoundCap,
                vec![ok.clone()],
                vec![check("state_sql", false)],
                Some(FailureKind::RoundCap),
            ),
            (
                "no calls",
                Ending::FinalAnswer,
                vec![],
                vec![check("answer_number", false)],
                Some(FailureKind::NoToolCall),
            ),
            (
                "a made-up tool",
                Ending::FinalAnswer,
                vec![call(Some("not_found"), "there is no tool named `x`")],
                vec![check("answer_number", false)],
                Some(FailureKind::WrongTool),
            ),
            (
                "an unknown id is not a wrong tool",
                Ending::FinalAnswer,
                vec![call(Some("not_found"), "no book has id 999")],
                vec![check("state_sql", false)],
                Some(FailureKind::WrongFinalState),
            ),
            (
                "uncorrected bad arguments",
                Ending::FinalAnswer,
                vec![call(Some("invalid_argument"), "400 Bad Request")],
                vec![check("state_sql", false)],
                Some(FailureKind::InvalidArguments),
            ),
            (
                "state wrong",
                Ending::FinalAnswer,
                vec![ok.clone()],
                vec![check("state_sql", false), check("answer_contains", true)],
                Some(FailureKind::WrongFinalState),
            ),
            (
                "answer wrong",
                Ending::FinalAnswer,
                vec![ok],
                vec![check("state_sql", true), check("answer_number", false)],
                Some(FailureKind::WrongAnswer),
            ),
        ];
        for (name, ending, calls, checks, want) in cases {
            assert_eq!(
                classify(ending, Some("It is 3."), &calls, &checks),
                want,
                "{name}"
            );
        }
    }

    const RESULT: &str = r#"{"result":{"match":"all_words","total_matches":1,"hits":[{"id":23,"title":"Submit the November expense report","due":"2025-12-12","done":false}]}}"#;

    #[test]
    fn a_raw_tool_result_as_the_final_answer_is_not_a_success() {
        let searched = vec![call(None, RESULT)];
        let refused = vec![call(
            Some("invalid_argument"),
            r#"{"error":{"code":"invalid_argument","message":"`limit` is out of range"}}"#,
        )];
        let error_echo =
            r#"Error: {"error":{"code":"invalid_argument","message":"`limit` is out of range"}}"#;
        // (why, answer, calls, checks, want)
        let cases: Vec<(
            &str,
            &str,
            &Vec<CallRecord>,
            Vec<CheckOutcome>,
            Option<FailureKind>,
        )> = vec![
            (
                "the raw result passes the answer check but is an echo",
                RESULT,
                &searched,
                vec![check("answer_contains", true)],
                Some(FailureKind::EchoedToolResult),
            ),
            (
                "an answer quoting a value of the result succeeds",
                "The November expense report is due 2025-12-12.",
                &searched,
                vec![check("answer_contains", true)],
                None,
            ),
            (
                "an echo that fails its answer check is classified as an echo",
                RESULT,
                &searched,
                vec![check("answer_number", false)],
                Some(FailureKind::EchoedToolResult),
            ),
            (
                "a state-only task whose store is right succeeds whatever it said",
                RESULT,
                &searched,
                vec![check("state_sql", true)],
                None,
            ),
            (
                "an echo with the store wrong is a wrong final state",
                RESULT,
                &searched,
                vec![check("state_sql", false), check("answer_contains", true)],
                Some(FailureKind::WrongFinalState),
            ),
            (
                "an echoed error after uncorrected bad arguments is invalid arguments",
                error_echo,
                &refused,
                vec![check("answer_number", true)],
                Some(FailureKind::InvalidArguments),
            ),
        ];
        for (why, answer, calls, checks, want) in cases {
            assert_eq!(
                classify(Ending::FinalAnswer, Some(answer), calls, &checks),
                want,
                "{why}"
            );
        }
        // Every kind has its name in the report's taxonomy.
        assert_eq!(FailureKind::EchoedToolResult.as_str(), "echoed tool result");
        assert!(FailureKind::ALL.contains(&FailureKind::EchoedToolResult));
    }
}
