//! What a run ends with: why it stopped, each call as it happened, and the whole conversation.

use serde::Serialize;
use serde_json::Value;
use toolgate_llm::{LlmError, Message, Usage};

use crate::described_call::DescribedCall;
use crate::echoed_answer::Echo;
use crate::refused_call::RefusedCall;
use crate::unfounded_answer::Unfounded;

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StopCause {
    FinalAnswer,
    RoundCap {
        rounds: u32,
    },
    TokenBudget {
        used: u64,
        budget: u64,
    },
    /// The policy's budget for the run or the principal (`[budgets]`) is spent.
    BudgetExhausted {
        detail: String,
    },
    ModelError {
        message: String,
        retryable: bool,
    },
}

impl StopCause {
    pub fn describe(&self) -> String {
        match self {
            StopCause::FinalAnswer => "final answer".into(),
            StopCause::RoundCap { rounds } => {
                format!("round cap reached ({rounds} model turns) without a final answer")
            }
            StopCause::TokenBudget { used, budget } => {
                format!("token budget exhausted ({used} of {budget} tokens)")
            }
            StopCause::BudgetExhausted { detail } => format!("budget exhausted: {detail}"),
            StopCause::ModelError { message, .. } => format!("model error: {message}"),
        }
    }
}

/// One tool call as it happened.
#[derive(Debug, Clone, Serialize)]
pub struct CallSummary {
    pub round: u32,
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub is_error: bool,
    /// The error code, when it failed.
    pub error: Option<String>,
    pub result_bytes: usize,
    pub duration_us: u64,
    /// The round whose identical call answered this one (it did not run again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_from_round: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub run_id: String,
    pub answer: Option<String>,
    pub stop: StopCause,
    pub rounds: u32,
    pub usage: Usage,
    pub calls: Vec<CallSummary>,
    /// The whole conversation, for transcripts and follow-up turns.
    pub transcript: Vec<Message>,
    /// Tools whose definitions searches appended to the list, in order (empty when the run
    /// did not defer).
    pub appended_tools: Vec<String>,
    /// The described call the run corrected, when
    /// [`AgentConfig::correct_described_calls`](super::AgentConfig::correct_described_calls)
    /// gave its one corrective turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub described_call: Option<DescribedCall>,
    /// The round whose repeat ended tool use, under
    /// [`AgentConfig::end_tools_after_repeats`](super::AgentConfig::end_tools_after_repeats).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_ended_round: Option<u32>,
    /// The refused call the run asked the model to correct, when
    /// [`AgentConfig::retry_refused_calls`](super::AgentConfig::retry_refused_calls) gave its
    /// one corrective turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_call: Option<RefusedCall>,
    /// The echoed answer the run asked the model to answer in its own words, when
    /// [`AgentConfig::correct_echoed_answers`](super::AgentConfig::correct_echoed_answers) gave
    /// its one corrective turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echoed_answer: Option<Echo>,
    /// The unfounded answer the run asked the model to answer again from the results, when
    /// [`AgentConfig::correct_unfounded_answers`](super::AgentConfig::correct_unfounded_answers)
    /// gave its one corrective turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unfounded_answer: Option<Unfounded>,
}

/// The stop of a run whose model request failed.
pub(super) fn model_error(e: &LlmError) -> StopCause {
    StopCause::ModelError {
        message: e.to_string(),
        retryable: e.retryable(),
    }
}
