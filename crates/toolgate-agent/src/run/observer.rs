//! What observers are told while a run goes on (a terminal shows it; the trace is separate).

use std::sync::Arc;

use toolgate_core::CallOutcome;
use toolgate_llm::{ModelRequest, ModelResponse, ToolCall};

use super::RunResult;
use crate::described_call::DescribedCall;
use crate::echoed_answer::Echo;
use crate::refused_call::RefusedCall;
use crate::repeat_guard::Earlier;
use crate::unfounded_answer::Unfounded;

/// Things worth showing a person while a run goes on.
#[derive(Debug, Clone)]
pub enum AgentEvent<'a> {
    Request {
        round: u32,
        request: &'a ModelRequest,
    },
    Response {
        round: u32,
        response: &'a ModelResponse,
    },
    ToolCall {
        call: &'a ToolCall,
    },
    ToolResult {
        call: &'a ToolCall,
        outcome: &'a CallOutcome,
    },
    /// An exact repeat answered with an earlier round's result instead of running (no
    /// `ToolCall` or `ToolResult` event comes for it).
    RepeatAnswered {
        call: &'a ToolCall,
        earlier: &'a Earlier,
    },
    /// A final answer that described a call to `call.tool` instead of making it; the loop
    /// sends one corrective turn and asks again.
    DescribedCallCorrected {
        round: u32,
        call: &'a DescribedCall,
    },
    /// A final answer that was mostly raw tool output; the loop sends one corrective turn
    /// and asks again.
    EchoedAnswerCorrected {
        round: u32,
        echo: &'a Echo,
    },
    /// A final answer that stated no figure or name from the run's successful tool results;
    /// the loop sends one corrective turn and asks again.
    UnfoundedAnswerCorrected {
        round: u32,
        unfounded: &'a Unfounded,
    },
    /// A final answer after a round whose calls were all refused with a fixable error; the
    /// loop sends one corrective turn and asks again.
    RefusedCallRetried {
        round: u32,
        call: &'a RefusedCall,
    },
    /// The run repeated a read a second time with nothing written since: tool use ends, and
    /// the model must answer.
    ToolsEnded {
        round: u32,
    },
    Finished {
        result: &'a RunResult,
    },
}

pub type Observer = Arc<dyn Fn(&AgentEvent<'_>) + Send + Sync>;
