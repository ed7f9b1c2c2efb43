//! Provider-neutral request and response types: what every adapter maps to and from its wire
//! format.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as a model is shown it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// A closed JSON Schema for the arguments (key order preserved).
    pub input_schema: Value,
}

/// Whether and how the model must call a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "type", content = "name", rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must not call tools.
    None,
    /// The model must call this tool.
    Tool(String),
    /// The model must call one of these tools. Every tool is still shown (so a cached prompt
    /// prefix holds); an adapter whose provider cannot narrow the choice sends "must call some
    /// tool", and the loop refuses a call outside the set unrun.
    AnyOf(Vec<String>),
}

impl ToolChoice {
    /// Whether a call to `tool` is within this choice.
    pub fn allows(&self, tool: &str) -> bool {
        match self {
            ToolChoice::Auto | ToolChoice::Any => true,
            ToolChoice::None => false,
            ToolChoice::Tool(name) => name == tool,
            ToolChoice::AnyOf(names) => names.iter().any(|n| n == tool),
        }
    }

    /// Whether the model must call a tool.
    pub fn must_call(&self) -> bool {
        match self {
            ToolChoice::Any | ToolChoice::Tool(_) | ToolChoice::AnyOf(_) => true,
            ToolChoice::Auto | ToolChoice::None => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; each result must echo it.
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them (an object when they parsed as JSON).
    pub arguments: Value,
}

/// The answer to one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    /// What the model reads (JSON text or plain text).
    pub content: String,
    pub is_error: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text { text: String },
    ToolCall(ToolCall),
    ToolResult(ToolResult),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
    pub fn user_text(text: &str) -> Self {
        Message {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// The assistant turn a response becomes in the history.
    pub fn from_response(response: &ModelResponse) -> Self {
        let mut content = Vec::new();
        if !response.text.is_empty() {
            content.push(ContentBlock::Text {
                text: response.text.clone(),
            });
        }
        content.extend(
            response
                .tool_calls
                .iter()
                .cloned()
                .map(ContentBlock::ToolCall),
        );
        Message {
            role: Role::Assistant,
            content,
        }
    }

    /// One user turn carrying a result for each call.
    pub fn tool_results(results: Vec<ToolResult>) -> Self {
        Message {
            role: Role::User,
            content: results.into_iter().map(ContentBlock::ToolResult).collect(),
        }
    }

    /// The message's text blocks in order; its tool calls and results are left out.
    pub fn text_blocks(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            ContentBlock::ToolCall(_) | ContentBlock::ToolResult(_) => None,
        })
    }

    /// The message's text: its text blocks, one per line (empty when it has none).
    pub fn text(&self) -> String {
        self.text_blocks().collect::<Vec<_>>().join("\n")
    }
}

/// Everything one model call needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDefinition>,
    pub tool_choice: ToolChoice,
    /// Cap on generated tokens for this call.
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    /// Whether the model may ask for several calls in one turn.
    pub parallel_tool_calls: bool,
    /// How many leading `tools` stay the same for the rest of the conversation: a loop that
    /// appends definitions found by a tool search sends its standing set first. An adapter that
    /// marks a cache breakpoint in the tool list marks the last of these, so the bytes of a
    /// tool already sent never change when more are appended. `None`: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_tools: Option<usize>,
    /// The sampling seed for this call when `temperature` samples: the same seed and request
    /// give the same answer (the embedded model; OpenAI's `seed`, best effort). `None`: the
    /// engine's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl ModelRequest {
    pub fn new(messages: Vec<Message>, tools: Vec<ToolDefinition>) -> Self {
        ModelRequest {
            system: None,
            messages,
            tools,
            tool_choice: ToolChoice::Auto,
            max_tokens: 1024,
            temperature: None,
            parallel_tool_calls: true,
            stable_tools: None,
            seed: None,
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A final answer.
    EndTurn,
    /// It asked for tool calls.
    ToolUse,
    /// It hit `max_tokens`.
    MaxTokens,
    StopSequence,
    Refusal,
    /// A reason this crate does not know, kept verbatim.
    Other(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Every input token of the call, those served from a cache included (Anthropic reports
    /// uncached, cache-write and cache-read counts apart; adapters add them up).
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from a provider's prompt cache (or the embedded KV cache).
    pub cached_input_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The model's text (empty when it only called tools).
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub stop_reason: StopReason,
    pub usage: Usage,
    /// The model that answered, as the provider names it.
    pub model: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_joins_the_text_blocks_and_leaves_out_calls_and_results() {
        let message = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text {
                    text: "first".into(),
                },
                ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "notes_search".into(),
                    arguments: Value::Null,
                }),
                ContentBlock::ToolResult(ToolResult {
                    call_id: "c1".into(),
                    content: "result".into(),
                    is_error: false,
                }),
                ContentBlock::Text {
                    text: "second".into(),
                },
            ],
        };
        assert_eq!(message.text(), "first\nsecond");
        assert_eq!(
            message.text_blocks().collect::<Vec<_>>(),
            ["first", "second"]
        );
        assert_eq!(Message::tool_results(Vec::new()).text(), "");
    }
}
