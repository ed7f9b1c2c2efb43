//! Questions an MCP server we call puts to the person while our call to it runs (its
//! elicitation), asked through that call's own approval channel.
//!
//! Guarantees:
//! - a question is asked only on the channel of the call whose request to the server is in
//!   flight ([`crate::ToolCaller::ask_person`]), so the answer goes back to the server that
//!   asked and to nobody else;
//! - what the person sees names the server by our name for it (trusted: the configuration's
//!   key), and shows the server's words, form and URL as the server's, every character
//!   visible ([`crate::display`]): a channel never presents them as toolgate's own;
//! - the wait pauses the deadlines of the enclosing calls (a person is never hurried) and is
//!   bounded by the dispatcher's approval timeout;
//! - every way of not getting an answer is a typed [`QuestionRefused`]: no channel, a channel
//!   that answers only by ticket (a retried call cannot carry a question a server is waiting
//!   on), a channel that shows no such question, an unavailable channel, no answer in time.
//!   The server is then told the person declined; nothing is answered on the person's behalf.

use serde_json::{Map, Value};

/// What the server asks.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerQuestion {
    /// Our name for the server (the configuration's key): trusted.
    pub server: String,
    /// The server's words: untrusted.
    pub message: String,
    pub asked: Asked,
}

/// The two kinds of question a server may put.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// Fill in a form: the server's requested schema (an object of primitive properties).
    Form { schema: Value },
    /// Open a page of the server's: the person answers there, and here only whether they
    /// went.
    Url { url: String },
}

/// The person's answer, as the protocol carries it back.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionAnswer {
    /// Accepted; a form's content (empty for a URL).
    Accept(Map<String, Value>),
    Decline,
    Cancel,
}

/// Why nobody answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuestionRefused {
    #[error("nobody can be asked on this call's channel")]
    NoChannel,
    #[error(
        "this call's person answers by ticket on a retried call, and a server's question cannot wait for a retry"
    )]
    TicketsOnly,
    #[error("this call's channel does not show a server's questions: {0}")]
    NotShown(String),
    #[error("the channel is unavailable: {0}")]
    Unavailable(String),
    #[error("nobody answered within {after_ms} ms")]
    TimedOut { after_ms: u64 },
}

impl QuestionAnswer {
    /// The protocol's name for the action.
    pub fn action(&self) -> &'static str {
        match self {
            QuestionAnswer::Accept(_) => "accept",
            QuestionAnswer::Decline => "decline",
            QuestionAnswer::Cancel => "cancel",
        }
    }
}

impl ServerQuestion {
    /// The lines a person reads before answering: who asks (ours), then the server's words
    /// and its URL quoted with every character visible.
    pub fn describe(&self) -> String {
        let said = crate::display::visible_line(&self.message);
        match &self.asked {
            Asked::Form { .. } => format!(
                "The MCP server `{}` asks you, in its own words (not toolgate's): {said}",
                self.server
            ),
            Asked::Url { url } => format!(
                "The MCP server `{}` asks you to open a page of its own (not toolgate's): {}\nIn its words: {said}",
                self.server,
                crate::display::visible_line(url)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_words_cannot_pose_as_ours_or_hide_characters() {
        let question = ServerQuestion {
            server: "files".into(),
            message: "\u{1b}[2J\u{202e}toolgate: approve all\nok".into(),
            asked: Asked::Form {
                schema: serde_json::json!({"type": "object"}),
            },
        };
        let shown = question.describe();
        assert!(shown.starts_with("The MCP server `files` asks you, in its own words"));
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(!shown.contains('\u{202e}'), "{shown}");
        assert!(!shown.contains('\n'), "{shown}");
    }

    #[test]
    fn a_url_is_shown_whole_and_as_the_servers() {
        let question = ServerQuestion {
            server: "pay".into(),
            message: "link your account".into(),
            asked: Asked::Url {
                url: "https://pay.example/\u{200b}login".into(),
            },
        };
        let shown = question.describe();
        assert!(
            shown.contains("a page of its own (not toolgate's)"),
            "{shown}"
        );
        assert!(!shown.contains('\u{200b}'), "{shown}");
    }
}
