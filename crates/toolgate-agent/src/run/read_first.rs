//! The read-first lever (part of stage 1, preparing the conversation): before the first
//! request, the loop itself makes one read with the user's own words, and the conversation
//! starts with that call and its result, as if the model had made it.
//!
//! Why: the embedded model, forced to call a tool first, wrote with ids it guessed (a tag on
//! note 3, to-dos from "meeting 100", a send of "draft 123") instead of searching; and when it
//! did search, it narrowed with filters that hid the right note. The user's message, searched
//! as it stands, ranks the note it is about first for nearly every task of the notes suite, so
//! the model starts with the ids, dates and figures it needs.
//!
//! Guarantees: the read goes through the dispatcher as the run's principal like any call
//! (validated, bounded, untrusted-marked, traced, observed, remembered by the repeat guard and
//! the taint sources); it is made only when the configured tool is offered to the model in
//! this run and is a read (a tool that writes, or one the registry does not know, is never
//! called by the loop on its own); when the call fails (the message too long for the
//! argument's schema, a store error), nothing is added and the run starts as without the
//! lever. Refuses nothing the model could not have asked for itself.

use std::sync::Arc;

use serde_json::{Map, Value};
use toolgate_llm::{ContentBlock, Message, Role, ToolCall};

use super::{Agent, RunState};
use crate::repeat_guard::CallKind;

/// The call id of the loop's own first read (the model's ids never take this form).
pub const READ_FIRST_CALL_ID: &str = "toolgate-read-first";

/// Which read the loop makes before the first request: `tool`, with the argument `argument`
/// made from the user's last message by `words`.
#[derive(Debug, Clone)]
pub struct ReadFirst {
    pub tool: String,
    pub argument: String,
    /// The argument's value for a message, `None` when nothing is left to search with. The
    /// toolset's own rule (for notes, the words its search matches on, without the common
    /// ones), so the call the model sees is a query as a person would type it: the model
    /// copies the form of the calls it sees.
    pub words: fn(&str) -> Option<String>,
}

/// The user's message as it stands, trimmed: `ReadFirst::words` for a tool with no rule of its
/// own.
pub fn whole_message(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The call the lever makes for a conversation whose last user turn says `text`, when there is
/// something to search with.
pub fn read_first_call(read: &ReadFirst, text: &str) -> Option<ToolCall> {
    let value = (read.words)(text)?;
    if value.trim().is_empty() {
        return None;
    }
    let mut arguments = Map::new();
    arguments.insert(read.argument.clone(), Value::String(value));
    Some(ToolCall {
        id: READ_FIRST_CALL_ID.into(),
        name: read.tool.clone(),
        arguments: Value::Object(arguments),
    })
}

impl Agent {
    /// Makes the configured first read and, when it succeeds, adds the call and its result
    /// to the conversation (see the module documentation).
    pub(super) async fn read_first(&self, run: &mut RunState<'_>) {
        let Some(read) = &self.config.read_first else {
            return;
        };
        let offered = run.tools.definitions().iter().any(|d| d.name == read.tool);
        let kind = self.call_kind(&read.tool);
        let is_read = match kind {
            CallKind::AnswersRepeats | CallKind::Read => true,
            CallKind::Writes => false,
        };
        if !offered || !is_read {
            return;
        }
        let Some(text) = last_user_text(&run.messages) else {
            return;
        };
        let Some(call) = read_first_call(read, &text) else {
            return;
        };
        let sources = Arc::new(run.sources.clone());
        let Some(outcome) = self
            .dispatch_all(run.run_id, std::slice::from_ref(&call), sources)
            .await
            .pop()
        else {
            return;
        };
        if outcome.is_error() || outcome.observation().is_none() {
            return;
        }
        run.messages.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolCall(call.clone())],
        });
        let result = self.record_outcome(run, &call, kind, &outcome);
        run.messages.push(Message::tool_results(vec![result]));
    }
}

/// The text of the conversation's last user turn that says something (tool results are user
/// turns too, but carry no text).
pub(super) fn last_user_text(messages: &[Message]) -> Option<String> {
    messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::User)
        .map(Message::text)
        .find(|t| !t.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read() -> ReadFirst {
        ReadFirst {
            tool: "notes_search".into(),
            argument: "query".into(),
            words: whole_message,
        }
    }

    #[test]
    fn an_empty_message_makes_no_read() {
        for text in ["", "   ", "\n\t"] {
            assert!(read_first_call(&read(), text).is_none(), "{text:?}");
        }
        let nothing_left = ReadFirst {
            words: |_| Some("  ".into()),
            ..read()
        };
        assert!(read_first_call(&nothing_left, "the of and").is_none());
    }

    #[test]
    fn the_toolsets_rule_makes_the_query() {
        let keywords = ReadFirst {
            words: |text| Some(text.to_lowercase()),
            ..read()
        };
        let call = read_first_call(&keywords, "Design Budget").unwrap();
        assert_eq!(call.arguments, json!({"query": "design budget"}));
    }

    #[test]
    fn the_users_words_are_one_string_argument_never_parsed() {
        let hostile = "budget\", \"kind\": \"clip\"} {\"note_ids\": [1]";
        let call = read_first_call(&read(), hostile).unwrap();
        assert_eq!(call.id, READ_FIRST_CALL_ID);
        assert_eq!(call.name, "notes_search");
        assert_eq!(call.arguments, json!({"query": hostile}));
    }

    #[test]
    fn the_last_user_turn_with_text_is_read_not_a_tool_result() {
        let messages = vec![
            Message::user_text("first question"),
            Message::user_text("What budget did we settle on?"),
            Message::tool_results(vec![]),
        ];
        assert_eq!(
            last_user_text(&messages).as_deref(),
            Some("What budget did we settle on?")
        );
        assert_eq!(last_user_text(&[]), None);
    }
}
