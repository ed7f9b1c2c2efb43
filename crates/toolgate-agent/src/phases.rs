//! Tools offered in phases: a tool whose input only the user or another tool can supply is
//! offered once that input exists in the conversation, not before.
//!
//! Why: the embedded model, shown a tool, calls it whether or not it has what the tool needs.
//! On notes-v4's dev runs it clipped made-up URLs when the user said they had *already* clipped
//! a page (6 failed runs), and sent guessed draft ids before any draft existed (3). A rule
//! ([`OfferRule`]) withholds such a tool until its input can exist: `web_clip` until the
//! user's message holds a URL, `email_send` until `email_draft` has returned a draft. This is
//! the seeds' "phases" applied per run, decided by code, not by asking the model to wait.
//!
//! Guarantees: [`withheld`] is a pure function of the rules, the user's last message and the
//! tools that have returned a result without error in the conversation so far
//! ([`PhaseState`]); a withheld tool is never sent to the model and a call to it is refused
//! unrun ([`not_offered_error`]); once a rule holds, the tool stays offered for the rest of
//! the run (its definition is appended, never removed, so every request's tool list begins
//! with the bytes of the one before and a cached prompt prefix holds). Refuses nothing at
//! configuration time: a rule naming a tool the caller cannot see withholds nothing.

use std::collections::BTreeSet;

use toolgate_core::{ErrorCode, ToolError};
use toolgate_llm::{ContentBlock, Message};

/// When one tool is offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferRule {
    pub tool: String,
    pub when: OfferWhen,
}

/// The condition that makes a withheld tool offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfferWhen {
    /// The user's last message holds an `http://` or `https://` URL: for a tool whose input is
    /// a page the user names.
    UserGaveUrl,
    /// One of these tools has returned a result without error in this conversation: for a
    /// tool whose input is another tool's output (a draft to send).
    After(Vec<String>),
}

impl OfferRule {
    /// `tool`, offered once the user's message names a URL.
    pub fn when_user_gives_url(tool: &str) -> Self {
        OfferRule {
            tool: tool.into(),
            when: OfferWhen::UserGaveUrl,
        }
    }

    /// `tool`, offered once one of `tools` has returned a result without error.
    pub fn after(tool: &str, tools: &[&str]) -> Self {
        OfferRule {
            tool: tool.into(),
            when: OfferWhen::After(tools.iter().map(|t| (*t).to_string()).collect()),
        }
    }

    /// Whether the rule holds in `state`.
    pub fn holds(&self, state: &PhaseState) -> bool {
        match &self.when {
            OfferWhen::UserGaveUrl => holds_url(&state.user_text),
            OfferWhen::After(tools) => tools.iter().any(|t| state.succeeded.contains(t)),
        }
    }

    /// What the model is told when it calls the tool before the rule holds.
    fn unmet(&self) -> String {
        match &self.when {
            OfferWhen::UserGaveUrl => format!(
                "{} is offered only for a URL the user's message gives, and this message gives none",
                self.tool
            ),
            OfferWhen::After(tools) => format!(
                "{} is offered only after {} has returned a result in this conversation",
                self.tool,
                tools.join(" or ")
            ),
        }
    }
}

/// What the rules are decided on: the user's last message, and the tools that have returned
/// a result without error so far (in the history the run continues, and in the run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhaseState {
    user_text: String,
    succeeded: BTreeSet<String>,
}

impl PhaseState {
    /// The state a conversation starts a run in: its last user message's text, and the tools
    /// whose calls in it have a result that is not an error.
    pub fn from_history(history: &[Message], last_user_text: Option<String>) -> Self {
        let mut names = std::collections::HashMap::new();
        let mut succeeded = BTreeSet::new();
        for block in history.iter().flat_map(|m| &m.content) {
            match block {
                ContentBlock::ToolCall(call) => {
                    names.insert(call.id.clone(), call.name.clone());
                }
                ContentBlock::ToolResult(result) if !result.is_error => {
                    if let Some(name) = names.get(&result.call_id) {
                        succeeded.insert(name.clone());
                    }
                }
                ContentBlock::ToolResult(_) | ContentBlock::Text { .. } => {}
            }
        }
        PhaseState {
            user_text: last_user_text.unwrap_or_default(),
            succeeded,
        }
    }

    /// `tool` returned a result without error.
    pub fn succeeded(&mut self, tool: &str) {
        self.succeeded.insert(tool.to_string());
    }
}

/// The tools `rules` withhold in `state`: those with a rule that does not hold.
pub fn withheld(rules: &[OfferRule], state: &PhaseState) -> BTreeSet<String> {
    rules
        .iter()
        .filter(|r| !r.holds(state))
        .map(|r| r.tool.clone())
        .collect()
}

/// The refusal of a call to `tool` while a rule withholds it (nothing ran). Forbidden: it is
/// the loop's gate, not an argument the model can fix.
pub fn not_offered_error(rules: &[OfferRule], tool: &str) -> ToolError {
    let why = rules
        .iter()
        .find(|r| r.tool == tool)
        .map_or_else(|| format!("{tool} is not offered here"), OfferRule::unmet);
    ToolError::new(ErrorCode::Forbidden, format!("not run: {why}"))
        .with_hint("use the tools you were offered")
}

/// The refusal of a call to `tool` in a round whose request allowed only `allowed` (the first
/// round that reads, on a provider that could not narrow the choice).
pub fn outside_choice_error(allowed: &[String], tool: &str) -> ToolError {
    ToolError::new(
        ErrorCode::Forbidden,
        format!(
            "not run: {tool} was not among this round's tools; first look up what you need with {}",
            allowed.join(" or ")
        ),
    )
    .with_hint("call one of those tools now")
}

/// Whether `text` holds an `http://` or `https://` URL with a host: a scheme followed by at
/// least one character that can start a host name or address.
pub fn holds_url(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    ["http://", "https://"].iter().any(|scheme| {
        lower.match_indices(scheme).any(|(at, _)| {
            lower[at + scheme.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '[' || !c.is_ascii())
        })
    })
}

#[cfg(test)]
#[path = "phases_tests.rs"]
mod tests;
