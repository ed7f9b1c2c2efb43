//! What one run left behind, and how a failed run is classified.
//!
//! A run is a success only when every check passed AND it ended in a final answer; the one
//! exception is a task judged only on the final store (every check `state_sql`), whose work is
//! done when the store is right however the loop stopped. A run that hit the round cap, the
//! token budget or a model error with passing answer checks is classified by its ending.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checks::CheckOutcome;

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
    /// The store was right (or untouched) but the answer was wrong.
    WrongAnswer,
}

impl FailureKind {
    pub const ALL: [FailureKind; 8] = [
        FailureKind::ModelError,
        FailureKind::RoundCap,
        FailureKind::TokenBudget,
        FailureKind::NoToolCall,
        FailureKind::WrongTool,
        FailureKind::InvalidArguments,
        FailureKind::WrongFinalState,
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

/// Classifies a run: `None` (a success) when every check passed and the run ended in a final
/// answer, or when every check passed and every check is `state_sql`.
pub fn classify(
    ending: Ending,
    calls: &[CallRecord],
    checks: &[CheckOutcome],
) -> Option<FailureKind> {
    let all_passed = !checks.is_empty() && checks.iter().all(|c| c.passed);
    let only_state = checks.iter().all(|c| c.kind == "state_sql");
    if all_passed && (ending == Ending::FinalAnswer || only_state) {
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
            assert_eq!(classify(ending, &calls, &checks), want, "{name}");
        }
    }
}
