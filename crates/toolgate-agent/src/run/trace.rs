//! The trace events of the loop: each model turn, the tools a search appended, the repeats
//! answered from memory, the described-call correction, the end of tool use and the end of
//! the run. Tool calls themselves are traced by the dispatcher.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::trace::TraceEvent;
use toolgate_llm::{LlmError, ModelResponse, StopReason, Usage};

use super::{Agent, StopCause};
use crate::described_call::DescribedCall;
use crate::echoed_answer::Echo;
use crate::refused_call::RefusedCall;
use crate::unfounded_answer::Unfounded;

/// One model turn, as traced: the request's model, its token usage and what it asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTurn {
    pub run_id: String,
    pub round: u32,
    pub model: String,
    pub duration_ms: u64,
    /// What the model answered, or why the turn failed.
    pub outcome: Result<TurnSummary, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnSummary {
    pub response_model: String,
    pub usage: Usage,
    pub finish_reason: StopReason,
    pub tool_calls: Vec<String>,
}

impl TraceEvent for ModelTurn {
    fn kind(&self) -> &'static str {
        "model_turn"
    }

    fn attributes(&self) -> Value {
        let mut event = json!({
            "run_id": self.run_id,
            "round": self.round,
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self.model,
            "duration_ms": self.duration_ms,
        });
        match &self.outcome {
            Ok(r) => {
                event["gen_ai.response.model"] = json!(r.response_model);
                event["gen_ai.usage.input_tokens"] = json!(r.usage.input_tokens);
                event["gen_ai.usage.output_tokens"] = json!(r.usage.output_tokens);
                event["cached_input_tokens"] = json!(r.usage.cached_input_tokens);
                event["gen_ai.response.finish_reasons"] = json!([r.finish_reason]);
                event["tool_calls"] = json!(r.tool_calls);
            }
            Err(e) => {
                event["error.type"] = json!(e);
            }
        }
        event
    }
}

/// Definitions a tool search found, appended to the run's tool list from the next round on.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsAppended {
    pub run_id: String,
    /// The round whose search found them (0: the runtime's preload for the user's message,
    /// before the first request).
    pub round: u32,
    pub tools: Vec<String>,
}

impl TraceEvent for ToolsAppended {
    fn kind(&self) -> &'static str {
        "tools_appended"
    }

    fn attributes(&self) -> Value {
        json!({"run_id": self.run_id, "round": self.round, "tools": self.tools})
    }
}

/// Withheld tools whose phase rule came to hold, appended to the run's tool list from the next
/// round on (see [`crate::phases`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsOffered {
    pub run_id: String,
    /// The round whose results made the rules hold.
    pub round: u32,
    pub tools: Vec<String>,
}

impl TraceEvent for ToolsOffered {
    fn kind(&self) -> &'static str {
        "tools_offered"
    }

    fn attributes(&self) -> Value {
        json!({"run_id": self.run_id, "round": self.round, "tools": self.tools})
    }
}

/// The run's catalogue changed under the policy's phases (`toolgate_core::phase_gate`): a plan
/// approved opened a tool (appended from the next round on), a plan used closed it again.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCatalogueChanged {
    pub run_id: String,
    /// The round whose calls changed it.
    pub round: u32,
    pub opened: Vec<String>,
    pub closed: Vec<String>,
}

impl TraceEvent for RunCatalogueChanged {
    fn kind(&self) -> &'static str {
        "run_catalogue_changed"
    }

    fn attributes(&self) -> Value {
        json!({"run_id": self.run_id, "round": self.round, "opened": self.opened, "closed": self.closed})
    }
}

/// An exact repeat the loop answered with an earlier round's result (nothing ran).
#[derive(Debug, Clone, PartialEq)]
pub struct RepeatAnswered {
    pub run_id: String,
    pub round: u32,
    pub call_id: String,
    pub tool: String,
    pub earlier_round: u32,
}

impl TraceEvent for RepeatAnswered {
    fn kind(&self) -> &'static str {
        "repeat_answered"
    }

    fn attributes(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "round": self.round,
            "gen_ai.tool.call.id": self.call_id,
            "gen_ai.tool.name": self.tool,
            "earlier_round": self.earlier_round,
        })
    }
}

/// A final answer that described a call instead of making it, answered with the run's one
/// corrective turn.
#[derive(Debug, Clone, PartialEq)]
pub struct DescribedCallCorrected {
    pub run_id: String,
    pub round: u32,
    pub call: DescribedCall,
}

impl TraceEvent for DescribedCallCorrected {
    fn kind(&self) -> &'static str {
        "described_call_corrected"
    }

    fn attributes(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "round": self.round,
            "gen_ai.tool.name": self.call.tool,
            "evidence": self.call.evidence,
        })
    }
}

/// A final answer that was mostly raw tool output, answered with the run's one corrective
/// turn.
#[derive(Debug, Clone, PartialEq)]
pub struct EchoedAnswerCorrected {
    pub run_id: String,
    pub round: u32,
    pub echo: Echo,
}

impl TraceEvent for EchoedAnswerCorrected {
    fn kind(&self) -> &'static str {
        "echoed_answer_corrected"
    }

    fn attributes(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "round": self.round,
            "copied_chars": self.echo.copied_chars,
            "answer_chars": self.echo.answer_chars,
        })
    }
}

/// A final answer that stated nothing from the run's successful tool results, answered with
/// the run's one corrective turn.
#[derive(Debug, Clone, PartialEq)]
pub struct UnfoundedAnswerCorrected {
    pub run_id: String,
    pub round: u32,
    pub unfounded: Unfounded,
}

impl TraceEvent for UnfoundedAnswerCorrected {
    fn kind(&self) -> &'static str {
        "unfounded_answer_corrected"
    }

    fn attributes(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "round": self.round,
            "data_tokens": self.unfounded.data_tokens,
            "results": self.unfounded.results,
        })
    }
}

/// A final answer after a round of refused calls got the run's one retry turn.
#[derive(Debug, Clone, PartialEq)]
pub struct RefusedCallRetried {
    pub run_id: String,
    pub round: u32,
    pub call: RefusedCall,
}

impl TraceEvent for RefusedCallRetried {
    fn kind(&self) -> &'static str {
        "refused_call_retried"
    }

    fn attributes(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "round": self.round,
            "gen_ai.tool.name": self.call.tool,
            "error.type": self.call.code,
        })
    }
}

/// Repeats ended tool use for the rest of the run: later requests say `tool_choice: None`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsEnded {
    pub run_id: String,
    /// The round whose repeat ended them.
    pub round: u32,
    /// Exact repeats counted by then.
    pub repeats: u32,
}

impl TraceEvent for ToolsEnded {
    fn kind(&self) -> &'static str {
        "tools_ended"
    }

    fn attributes(&self) -> Value {
        json!({"run_id": self.run_id, "round": self.round, "repeats": self.repeats})
    }
}

/// The end of a run, as traced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    pub run_id: String,
    pub model: String,
    pub stop: StopCause,
    pub rounds: u32,
    pub usage: Usage,
    pub tool_calls: usize,
}

impl TraceEvent for RunEnd {
    fn kind(&self) -> &'static str {
        "run_end"
    }

    fn attributes(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "gen_ai.request.model": self.model,
            "stop": self.stop,
            "rounds": self.rounds,
            "gen_ai.usage.input_tokens": self.usage.input_tokens,
            "gen_ai.usage.output_tokens": self.usage.output_tokens,
            "cached_input_tokens": self.usage.cached_input_tokens,
            "tool_calls": self.tool_calls,
        })
    }
}

impl Agent {
    /// One model turn as traced (and as its span ends): what it answered, or why it failed.
    pub(super) fn model_turn(
        &self,
        run_id: &str,
        round: u32,
        response: &Result<ModelResponse, LlmError>,
        elapsed: Duration,
    ) -> ModelTurn {
        match response {
            Ok(r) => ModelTurn {
                run_id: run_id.into(),
                round,
                model: self.model.name(),
                duration_ms: elapsed.as_millis() as u64,
                outcome: Ok(TurnSummary {
                    response_model: r.model.clone(),
                    usage: r.usage,
                    finish_reason: r.stop_reason.clone(),
                    tool_calls: r.tool_calls.iter().map(|c| c.name.clone()).collect(),
                }),
            },
            Err(e) => ModelTurn {
                run_id: run_id.into(),
                round,
                model: self.model.name(),
                duration_ms: elapsed.as_millis() as u64,
                outcome: Err(e.to_string()),
            },
        }
    }
}
