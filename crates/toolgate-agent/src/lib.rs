//! toolgate-agent: the loop that drives a model through the dispatcher, and the approvers a
//! person answers (approvals, and the questions MCP servers ask during our calls).

pub mod approvers;
pub mod conversation;
pub mod deferral;
pub mod described_call;
pub mod echoed_answer;
pub mod grounding;
pub mod phases;
pub mod refused_call;
pub mod repeat_guard;
pub mod run;
pub mod server_questions;
pub mod unfounded_answer;

pub use approvers::TerminalApprover;
pub use deferral::{DEFAULT_DEFER_THRESHOLD, DEFAULT_PRELOAD, DeferralConfig, ToolList};
pub use run::{
    Agent, AgentConfig, AgentEvent, CallSummary, DEFAULT_SYSTEM_PROMPT, DescribedCallCorrected,
    Observer, ReadFirst, RepeatAnswered, RunCatalogueChanged, RunResult, StopCause, ToolsAppended,
    ToolsEnded, ToolsOffered,
};
