//! What a conversation's messages say, by who said it: the texts of the user's turns and the
//! contents of the tool results. Pure; shared by the levers that judge an answer or a call by
//! what the conversation has shown (`grounding`, the answer corrections of the loop).

use toolgate_llm::{ContentBlock, Message, Role};

/// The texts the user's turns say (the corrections the loop sent in the user's role among them).
pub fn user_texts(messages: &[Message]) -> Vec<&str> {
    messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The contents of the tool results in `messages`, errors among them only `with_errors`.
pub fn tool_results(messages: &[Message], with_errors: bool) -> Vec<&str> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) if with_errors || !r.is_error => Some(r.content.as_str()),
            _ => None,
        })
        .collect()
}
