//! The OpenAI Responses API wire format (`POST /responses`), as pure functions.
//!
//! Contract: [`build_request`] maps a [`ModelRequest`] to the documented body and nothing else;
//! [`parse_response`] maps a documented 200 body to a [`ModelResponse`] or an [`LlmError`]
//! (`Decode` for a malformed body or a response whose `status` is `failed`); [`parse_error`] maps
//! any non-2xx answer to [`LlmError::Status`].
//!
//! Mapping rules: the system prompt is `instructions`; the history is stateless `input` items
//! (`{role, content}` messages, `function_call` items for the assistant's calls and
//! `function_call_output` items for results, placed before any user text of the same turn); a
//! result's `is_error` has no field here, so failed results read `ERROR: …`; `store` is false, as
//! the whole history is sent every turn and nothing needs keeping on the provider's side.
//! `strict` follows [`crate::openai_chat::is_strict_compatible`]. On the way back, `function_call`
//! arguments that do not parse are kept as a JSON string, and `status`/`incomplete_details` give
//! the stop reason.

use serde_json::{Map, Value, json};

use crate::openai_chat::is_strict_compatible;
use crate::wire::{
    arguments_from_text, arguments_to_text, count_at, excerpt, flagged_result_content, object,
    required_str, str_or_empty, temperature_json,
};
use crate::{
    ContentBlock, LlmError, Message, ModelRequest, ModelResponse, Role, StopReason, ToolCall,
    ToolChoice, ToolDefinition, Usage,
};

/// The request body for `model`.
pub fn build_request(request: &ModelRequest, model: &str) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("instructions".into(), json!(system));
    }
    body.insert(
        "input".into(),
        request
            .messages
            .iter()
            .flat_map(input_items)
            .collect::<Vec<_>>()
            .into(),
    );
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            request
                .tools
                .iter()
                .map(tool_json)
                .collect::<Vec<_>>()
                .into(),
        );
        body.insert("tool_choice".into(), tool_choice_json(&request.tool_choice));
        body.insert(
            "parallel_tool_calls".into(),
            json!(request.parallel_tool_calls),
        );
    }
    body.insert("max_output_tokens".into(), json!(request.max_tokens));
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), temperature_json(t));
    }
    body.insert("store".into(), json!(false));
    Value::Object(body)
}

fn tool_json(tool: &ToolDefinition) -> Value {
    json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.input_schema,
        "strict": is_strict_compatible(&tool.input_schema),
    })
}

/// `tool_choice` as the Responses API spells it (a named function has no nested `function`).
fn tool_choice_json(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::Any => json!("required"),
        ToolChoice::None => json!("none"),
        ToolChoice::Tool(name) => json!({"type": "function", "name": name}),
        ToolChoice::AnyOf(names) => json!({
            "type": "allowed_tools",
            "mode": "required",
            "tools": names.iter().map(|n| json!({"type": "function", "name": n})).collect::<Vec<_>>(),
        }),
    }
}

/// One neutral message as `input` items.
fn input_items(message: &Message) -> Vec<Value> {
    let text = message.text_blocks().collect::<Vec<_>>().join("\n\n");
    let mut items = Vec::new();
    match message.role {
        Role::Assistant => {
            if !text.is_empty() {
                items.push(json!({"role": "assistant", "content": text}));
            }
            items.extend(message.content.iter().filter_map(|b| match b {
                ContentBlock::ToolCall(call) => Some(json!({
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": arguments_to_text(&call.arguments),
                })),
                _ => None,
            }));
        }
        Role::User => {
            items.extend(message.content.iter().filter_map(|b| match b {
                ContentBlock::ToolResult(r) => Some(json!({
                    "type": "function_call_output",
                    "call_id": r.call_id,
                    "output": flagged_result_content(&r.content, r.is_error),
                })),
                _ => None,
            }));
            if !text.is_empty() {
                items.push(json!({"role": "user", "content": text}));
            }
        }
    }
    items
}

/// A 200 body as a [`ModelResponse`].
pub fn parse_response(body: &Value) -> Result<ModelResponse, LlmError> {
    let map = object(body, "the response")?;
    let status = str_or_empty(map, "status");
    if status == "failed" {
        let error = map.get("error").unwrap_or(&Value::Null);
        let code = error
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        return Err(LlmError::Decode(format!(
            "the provider reported the response failed ({code}): {}",
            excerpt(message)
        )));
    }
    let output = map
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::Decode("the response has no `output` array".into()))?;
    let mut text = String::new();
    let mut refused = false;
    let mut tool_calls = Vec::new();
    for item in output {
        let item = object(item, "an output item")?;
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => {
                            text.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""));
                        }
                        Some("refusal") => {
                            refused = true;
                            text.push_str(
                                part.get("refusal").and_then(Value::as_str).unwrap_or(""),
                            );
                        }
                        _ => {}
                    }
                }
            }
            Some("function_call") => tool_calls.push(ToolCall {
                id: required_str(item, "call_id", "a function_call item")?.to_string(),
                name: required_str(item, "name", "a function_call item")?.to_string(),
                arguments: arguments_from_text(str_or_empty(item, "arguments")),
            }),
            // Reasoning and built-in tool items carry nothing this crate's types hold.
            _ => {}
        }
    }
    let incomplete_reason = map
        .get("incomplete_details")
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str);
    let stop_reason = if refused {
        StopReason::Refusal
    } else {
        stop_reason(status, incomplete_reason, !tool_calls.is_empty())
    };
    Ok(ModelResponse {
        text,
        tool_calls,
        stop_reason,
        usage: usage(map.get("usage").unwrap_or(&Value::Null)),
        model: str_or_empty(map, "model").to_string(),
    })
}

/// `status` and `incomplete_details.reason` as a stop reason.
fn stop_reason(status: &str, incomplete_reason: Option<&str>, has_calls: bool) -> StopReason {
    match (status, incomplete_reason) {
        ("completed", _) if has_calls => StopReason::ToolUse,
        ("completed", _) => StopReason::EndTurn,
        ("incomplete", Some("max_output_tokens")) => StopReason::MaxTokens,
        ("incomplete", Some("content_filter")) => StopReason::Refusal,
        ("incomplete", Some(other)) => StopReason::Other(other.to_string()),
        ("", _) => StopReason::Other("missing".into()),
        (other, _) => StopReason::Other(other.to_string()),
    }
}

fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: count_at(usage, &["input_tokens"]),
        output_tokens: count_at(usage, &["output_tokens"]),
        cached_input_tokens: count_at(usage, &["input_tokens_details", "cached_tokens"]),
    }
}

/// A non-2xx answer as [`LlmError::Status`]; the error body is the same
/// `{"error":{"message","type","code"}}` as Chat Completions.
pub fn parse_error(status: u16, body: &str) -> LlmError {
    crate::openai_chat::parse_error(status, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolResult;

    #[test]
    fn prevents_misreading_status_as_stop_reason() {
        let cases = [
            ("completed", None, false, StopReason::EndTurn),
            ("completed", None, true, StopReason::ToolUse),
            (
                "incomplete",
                Some("max_output_tokens"),
                false,
                StopReason::MaxTokens,
            ),
            (
                "incomplete",
                Some("max_output_tokens"),
                true,
                StopReason::MaxTokens,
            ),
            (
                "incomplete",
                Some("content_filter"),
                false,
                StopReason::Refusal,
            ),
            (
                "incomplete",
                Some("other"),
                false,
                StopReason::Other("other".into()),
            ),
            (
                "in_progress",
                None,
                false,
                StopReason::Other("in_progress".into()),
            ),
            ("", None, false, StopReason::Other("missing".into())),
        ];
        for (status, reason, has_calls, want) in cases {
            assert_eq!(
                stop_reason(status, reason, has_calls),
                want,
                "{status} {reason:?}"
            );
        }
    }

    #[test]
    fn prevents_wrong_tool_choice() {
        let cases = [
            (ToolChoice::Auto, json!("auto")),
            (ToolChoice::Any, json!("required")),
            (ToolChoice::None, json!("none")),
            (
                ToolChoice::Tool("notes_get".into()),
                json!({"type": "function", "name": "notes_get"}),
            ),
            (
                ToolChoice::AnyOf(vec!["notes_search".into(), "notes_get".into()]),
                json!({"type": "allowed_tools", "mode": "required", "tools": [
                    {"type": "function", "name": "notes_search"},
                    {"type": "function", "name": "notes_get"},
                ]}),
            ),
        ];
        for (choice, want) in cases {
            assert_eq!(tool_choice_json(&choice), want);
        }
    }

    #[test]
    fn prevents_outputs_landing_after_user_text() {
        let message = Message {
            role: Role::User,
            content: vec![
                ContentBlock::Text {
                    text: "then this".into(),
                },
                ContentBlock::ToolResult(ToolResult {
                    call_id: "c1".into(),
                    content: "nope".into(),
                    is_error: true,
                }),
            ],
        };
        assert_eq!(
            input_items(&message),
            vec![
                json!({"type": "function_call_output", "call_id": "c1", "output": "ERROR: nope"}),
                json!({"role": "user", "content": "then this"}),
            ]
        );
    }

    #[test]
    fn prevents_a_failed_response_passing_as_an_answer() {
        let body = json!({
            "status": "failed",
            "error": {"code": "server_error", "message": "The model failed to generate a response."},
            "output": []
        });
        assert_eq!(
            parse_response(&body),
            Err(LlmError::Decode(
                "the provider reported the response failed (server_error): The model failed to generate a response."
                    .into()
            ))
        );
    }

    #[test]
    fn prevents_a_refusal_reading_as_an_answer() {
        let body = json!({
            "status": "completed",
            "model": "gpt-4.1",
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]
        });
        let response = parse_response(&body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.stop_reason, StopReason::Refusal);
        assert_eq!(response.text, "I can't help with that.");
    }
}
