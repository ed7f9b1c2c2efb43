//! How a run is configured: its caps, its prompt, and the levers of the loop (each off by
//! default; see [`crate::run`] for what each does).

use super::read_first::ReadFirst;
use crate::deferral::DeferralConfig;
use crate::grounding::GroundRule;
use crate::phases::OfferRule;

/// What the model is told before the user speaks, unless a caller says otherwise. Measured on
/// the embedded model: shorter or gentler wordings made it describe how to use the tools
/// instead of calling them or stating the answer.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are an assistant with tools. You cannot see the user's data: call a \
tool to look it up before you answer, and never guess. If a tool returns an error, fix your call and try again. \
When tool results answer the question, reply with the answer in one short sentence.";

/// Default cap on model turns per run.
pub const DEFAULT_MAX_ROUNDS: u32 = 8;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub max_rounds: u32,
    /// Stop once input + output tokens across the run exceed this.
    pub token_budget: Option<u64>,
    pub max_tokens_per_turn: u32,
    pub temperature: Option<f32>,
    pub system: Option<String>,
    /// When to send a standing set plus `tool_search` instead of every definition; `None`
    /// never defers. Only a registry that offers `tool_search` can defer.
    pub deferral: Option<DeferralConfig>,
    /// Show the model only these tools (the others stay callable by tools that call tools,
    /// such as `code_execution`'s scripts); `None` shows every tool of the principal.
    pub offered: Option<Vec<String>>,
    /// The run's sampling seed (with a `temperature` that samples); each round's request gets
    /// it plus the round number.
    pub seed: Option<u64>,
    /// Give a final answer that describes a tool call instead of making it one corrective
    /// turn per run (see the module documentation).
    pub correct_described_calls: bool,
    /// End tool use for the run at its second exact repeat of a read with nothing written
    /// since, and word the repeat notice plainly (see the module documentation).
    pub end_tools_after_repeats: bool,
    /// Ask for a tool call (`tool_choice: Any`) in the run's first round.
    pub first_round_must_call: bool,
    /// Before the first request, make this read with the user's last message and start the
    /// conversation with its call and result (see the module documentation).
    pub read_first: Option<ReadFirst>,
    /// Give an answer that makes no call after a round whose calls were all refused with a
    /// fixable error one corrective turn per run (see the module documentation).
    pub retry_refused_calls: bool,
    /// With [`AgentConfig::retry_refused_calls`]: the request after the retry turn asks for a
    /// call to the refused tool (`ToolChoice::AnyOf`), and the turn asks only for the
    /// corrected call (see the module documentation).
    pub retry_must_call: bool,
    /// Tools offered in phases: each withheld until its rule holds (a URL in the user's
    /// message, another tool's result), then appended for the rest of the run; a call to a
    /// withheld tool is refused unrun (see [`crate::phases`]).
    pub offer_rules: Vec<OfferRule>,
    /// Ask for a call to a tool that only reads in the run's first round (stronger than
    /// [`AgentConfig::first_round_must_call`], which it overrides in that round); a write
    /// asked for then is refused unrun.
    pub first_round_reads: bool,
    /// Tools whose calls may state only figures the conversation has shown: a call stating
    /// one that neither the user nor a tool result gave is refused unrun (see
    /// [`crate::grounding`]).
    pub grounded_figures: Vec<GroundRule>,
    /// Give a final answer that is mostly raw tool output one corrective turn per run (see
    /// the module documentation).
    pub correct_echoed_answers: bool,
    /// Give a final answer that states no figure or name the run's successful tool results
    /// gave one corrective turn per run (see [`crate::unfounded_answer`]).
    pub correct_unfounded_answers: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_rounds: DEFAULT_MAX_ROUNDS,
            token_budget: None,
            max_tokens_per_turn: 1024,
            temperature: None,
            system: Some(DEFAULT_SYSTEM_PROMPT.into()),
            deferral: Some(DeferralConfig::default()),
            offered: None,
            seed: None,
            correct_described_calls: false,
            end_tools_after_repeats: false,
            first_round_must_call: false,
            read_first: None,
            retry_refused_calls: false,
            retry_must_call: false,
            offer_rules: Vec::new(),
            first_round_reads: false,
            grounded_figures: Vec::new(),
            correct_echoed_answers: false,
            correct_unfounded_answers: false,
        }
    }
}
