//! The Anthropic Messages API wire format (`POST /v1/messages`), as pure functions.
//!
//! Contract: [`build_request`] maps a [`ModelRequest`] to the documented request body and nothing
//! else (no I/O, no keys); [`parse_response`] maps a documented 200 body to a [`ModelResponse`]
//! or a [`LlmError::Decode`] naming what was missing; [`parse_error`] maps any non-2xx answer to
//! [`LlmError::Status`], whatever its body.
//!
//! Anthropic's rules this module enforces on the way out: user and assistant turns alternate
//! (consecutive same-role messages are merged), a user turn's `tool_result` blocks come before any
//! text, text blocks are never empty, `tool_use.input` is always an object, and the last tool
//! definition carries `cache_control` so the tool prefix is cached across turns (the last of
//! [`ModelRequest::stable_tools`] when a loop appends tools, so the marker never moves).
//!
//! Usage: Anthropic counts uncached, cache-write and cache-read input tokens separately;
//! [`Usage::input_tokens`] is their sum and [`Usage::cached_input_tokens`] the cache reads.

use serde_json::{Map, Value, json};

use crate::wire::{count_at, excerpt, object, required_str, str_or_empty, temperature_json};
use crate::{
    ContentBlock, LlmError, Message, ModelRequest, ModelResponse, Role, StopReason, ToolCall,
    ToolChoice, ToolDefinition, Usage,
};

/// The `anthropic-version` header value this format follows.
pub const API_VERSION: &str = "2023-06-01";

/// The request body for `model`.
pub fn build_request(request: &ModelRequest, model: &str) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(request.max_tokens));
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("system".into(), json!(system));
    }
    body.insert(
        "messages".into(),
        Value::Array(messages_json(&request.messages)),
    );
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            tools_json(&request.tools, request.stable_tools),
        );
        body.insert(
            "tool_choice".into(),
            tool_choice_json(&request.tool_choice, request.parallel_tool_calls),
        );
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), temperature_json(t));
    }
    Value::Object(body)
}

/// Tool definitions, the last stable one marked as the end of the cached prefix (the last one
/// of all when every tool is stable), so appending tools never changes one already sent.
fn tools_json(tools: &[ToolDefinition], stable: Option<usize>) -> Value {
    let last = stable
        .unwrap_or(tools.len())
        .min(tools.len())
        .checked_sub(1);
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let mut t = json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.input_schema,
            });
            if Some(i) == last
                && let Some(map) = t.as_object_mut()
            {
                map.insert("cache_control".into(), json!({"type": "ephemeral"}));
            }
            t
        })
        .collect()
}

/// `tool_choice`; `disable_parallel_tool_use` only where Anthropic accepts it (not on `none`).
fn tool_choice_json(choice: &ToolChoice, parallel: bool) -> Value {
    let mut value = match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        // Anthropic cannot narrow "any" to a set: the loop refuses a call outside it.
        ToolChoice::Any | ToolChoice::AnyOf(_) => json!({"type": "any"}),
        ToolChoice::None => return json!({"type": "none"}),
        ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
    };
    if !parallel && let Some(map) = value.as_object_mut() {
        map.insert("disable_parallel_tool_use".into(), json!(true));
    }
    value
}

/// The history as Anthropic's alternating turns.
fn messages_json(messages: &[Message]) -> Vec<Value> {
    merge_turns(messages)
        .into_iter()
        .map(|(role, blocks)| {
            json!({
                "role": match role { Role::User => "user", Role::Assistant => "assistant" },
                "content": blocks.iter().map(|b| block_json(b)).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// Consecutive same-role messages merged into one turn, empty text and empty turns dropped,
/// and in user turns every tool result moved before other content (order otherwise kept).
fn merge_turns(messages: &[Message]) -> Vec<(Role, Vec<&ContentBlock>)> {
    let mut turns: Vec<(Role, Vec<&ContentBlock>)> = Vec::new();
    for message in messages {
        let blocks: Vec<&ContentBlock> = message
            .content
            .iter()
            .filter(|b| !matches!(b, ContentBlock::Text { text } if text.trim().is_empty()))
            .collect();
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((role, existing)) if *role == message.role => existing.extend(blocks),
            _ => turns.push((message.role, blocks)),
        }
    }
    for (role, blocks) in &mut turns {
        if *role == Role::User {
            blocks.sort_by_key(|b| !matches!(b, ContentBlock::ToolResult(_)));
        }
    }
    turns
}

fn block_json(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::ToolCall(call) => json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": tool_input(&call.arguments),
        }),
        ContentBlock::ToolResult(result) => {
            let mut value = json!({
                "type": "tool_result",
                "tool_use_id": result.call_id,
                "content": result.content,
            });
            if result.is_error
                && let Some(map) = value.as_object_mut()
            {
                map.insert("is_error".into(), json!(true));
            }
            value
        }
    }
}

/// `tool_use.input` must be an object; arguments that never parsed (kept as a string by another
/// adapter) go back as an empty object rather than making the whole request fail.
fn tool_input(arguments: &Value) -> Value {
    if arguments.is_object() {
        arguments.clone()
    } else {
        json!({})
    }
}

/// A 200 body as a [`ModelResponse`].
pub fn parse_response(body: &Value) -> Result<ModelResponse, LlmError> {
    let map = object(body, "the Messages response")?;
    if map.get("type").and_then(Value::as_str) == Some("error") {
        return Err(error_from_body(200, body));
    }
    let content = map
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::Decode("the Messages response has no `content` array".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        let block = object(block, "a content block")?;
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(str_or_empty(block, "text")),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: required_str(block, "id", "a tool_use block")?.to_string(),
                name: required_str(block, "name", "a tool_use block")?.to_string(),
                arguments: block.get("input").cloned().unwrap_or_else(|| json!({})),
            }),
            // Thinking and server-tool blocks carry nothing this crate's types hold.
            _ => {}
        }
    }
    Ok(ModelResponse {
        text,
        tool_calls,
        stop_reason: stop_reason(map.get("stop_reason").and_then(Value::as_str)),
        usage: usage(map.get("usage").unwrap_or(&Value::Null)),
        model: str_or_empty(map, "model").to_string(),
    })
}

/// Anthropic's `stop_reason`, unknown values kept verbatim.
fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Refusal,
        Some(other) => StopReason::Other(other.to_string()),
        None => StopReason::Other("missing".into()),
    }
}

fn usage(usage: &Value) -> Usage {
    let cache_read = count_at(usage, &["cache_read_input_tokens"]);
    Usage {
        input_tokens: count_at(usage, &["input_tokens"])
            + count_at(usage, &["cache_creation_input_tokens"])
            + cache_read,
        output_tokens: count_at(usage, &["output_tokens"]),
        cached_input_tokens: cache_read,
    }
}

/// A non-2xx answer as [`LlmError::Status`]; the documented `{"type":"error","error":{…}}` body
/// gives `type: message`, any other body an excerpt of itself.
pub fn parse_error(status: u16, body: &str) -> LlmError {
    match serde_json::from_str::<Value>(body) {
        Ok(value) if value.get("error").is_some_and(Value::is_object) => {
            error_from_body(status, &value)
        }
        _ => LlmError::Status {
            status,
            message: if body.trim().is_empty() {
                "no body".into()
            } else {
                excerpt(body)
            },
        },
    }
}

fn error_from_body(status: u16, body: &Value) -> LlmError {
    let error = body.get("error").unwrap_or(&Value::Null);
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    LlmError::Status {
        status,
        message: format!("{kind}: {}", excerpt(message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolResult;

    fn call(id: &str) -> ContentBlock {
        ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: json!({}),
        })
    }

    fn result(id: &str) -> ContentBlock {
        ContentBlock::ToolResult(ToolResult {
            call_id: id.into(),
            content: "r".into(),
            is_error: false,
        })
    }

    fn text(t: &str) -> ContentBlock {
        ContentBlock::Text { text: t.into() }
    }

    fn msg(role: Role, content: Vec<ContentBlock>) -> Message {
        Message { role, content }
    }

    #[test]
    fn the_cache_marker_never_moves_onto_an_appended_tool() {
        let tool = |name: &str| ToolDefinition {
            name: name.into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        };
        let tools: Vec<ToolDefinition> = ["a", "b", "c", "d"].into_iter().map(tool).collect();
        let cases: &[(usize, Option<usize>, Option<&str>)] = &[
            (4, None, Some("d")),
            (4, Some(2), Some("b")),
            (2, Some(2), Some("b")),
            (4, Some(9), Some("d")),
            (4, Some(0), None),
            (0, None, None),
        ];
        for (count, stable, marked) in cases {
            let rendered = tools_json(&tools[..*count], *stable);
            let with_marker: Vec<&str> = rendered
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t.get("cache_control").is_some())
                .map(|t| t["name"].as_str().unwrap())
                .collect();
            assert_eq!(
                with_marker,
                marked.iter().copied().collect::<Vec<_>>(),
                "{count} tools, stable {stable:?}"
            );
        }
    }

    /// Shape of the merged turns: role and a short tag per block.
    fn shape(messages: &[Message]) -> Vec<(Role, Vec<String>)> {
        merge_turns(messages)
            .into_iter()
            .map(|(role, blocks)| {
                let tags = blocks
                    .iter()
                    .map(|b| match b {
                        ContentBlock::Text { text } => format!("text:{text}"),
                        ContentBlock::ToolCall(c) => format!("call:{}", c.id),
                        ContentBlock::ToolResult(r) => format!("result:{}", r.call_id),
                    })
                    .collect();
                (role, tags)
            })
            .collect()
    }

    /// A case: its name, the history, and the turns Anthropic must receive.
    type HistoryCase = (&'static str, Vec<Message>, Vec<(Role, Vec<&'static str>)>);

    #[test]
    fn prevents_rejected_histories() {
        use Role::{Assistant, User};
        let cases: Vec<HistoryCase> = vec![
            (
                "consecutive user messages merge",
                vec![msg(User, vec![text("a")]), msg(User, vec![text("b")])],
                vec![(User, vec!["text:a", "text:b"])],
            ),
            (
                "tool results come before text in a user turn",
                vec![
                    msg(Assistant, vec![call("1"), call("2")]),
                    msg(User, vec![text("also this")]),
                    msg(User, vec![result("1"), result("2")]),
                ],
                vec![
                    (Assistant, vec!["call:1", "call:2"]),
                    (User, vec!["result:1", "result:2", "text:also this"]),
                ],
            ),
            (
                "empty text and empty turns are dropped, neighbours merge",
                vec![
                    msg(User, vec![text("q")]),
                    msg(Assistant, vec![text("  ")]),
                    msg(User, vec![text("again")]),
                ],
                vec![(User, vec!["text:q", "text:again"])],
            ),
            (
                "consecutive assistant messages merge",
                vec![
                    msg(Assistant, vec![text("x")]),
                    msg(Assistant, vec![call("9")]),
                ],
                vec![(Assistant, vec!["text:x", "call:9"])],
            ),
        ];
        for (name, input, want) in cases {
            let want: Vec<(Role, Vec<String>)> = want
                .into_iter()
                .map(|(r, tags)| (r, tags.into_iter().map(String::from).collect()))
                .collect();
            assert_eq!(shape(&input), want, "{name}");
        }
    }

    #[test]
    fn prevents_wrong_tool_choice_or_parallel_flag() {
        let cases = [
            (ToolChoice::Auto, true, json!({"type": "auto"})),
            (
                ToolChoice::Auto,
                false,
                json!({"type": "auto", "disable_parallel_tool_use": true}),
            ),
            (
                ToolChoice::Any,
                false,
                json!({"type": "any", "disable_parallel_tool_use": true}),
            ),
            (ToolChoice::None, false, json!({"type": "none"})),
            (
                ToolChoice::Tool("notes_get".into()),
                true,
                json!({"type": "tool", "name": "notes_get"}),
            ),
            // No narrowed "any" on this API: the loop refuses a call outside the set.
            (
                ToolChoice::AnyOf(vec!["notes_search".into()]),
                true,
                json!({"type": "any"}),
            ),
        ];
        for (choice, parallel, want) in cases {
            assert_eq!(
                tool_choice_json(&choice, parallel),
                want,
                "{choice:?} {parallel}"
            );
        }
    }

    #[test]
    fn prevents_a_400_for_arguments_that_never_parsed() {
        let cases = [
            (json!({"a": 1}), json!({"a": 1})),
            (json!("{broken"), json!({})),
            (json!(null), json!({})),
        ];
        for (input, want) in cases {
            assert_eq!(tool_input(&input), want);
        }
    }

    #[test]
    fn prevents_misreading_stop_reasons() {
        let cases = [
            (Some("end_turn"), StopReason::EndTurn),
            (Some("tool_use"), StopReason::ToolUse),
            (Some("max_tokens"), StopReason::MaxTokens),
            (Some("stop_sequence"), StopReason::StopSequence),
            (Some("refusal"), StopReason::Refusal),
            (Some("pause_turn"), StopReason::Other("pause_turn".into())),
            (None, StopReason::Other("missing".into())),
        ];
        for (input, want) in cases {
            assert_eq!(stop_reason(input), want, "{input:?}");
        }
    }

    #[test]
    fn prevents_undercounting_cached_input() {
        let cases = [
            (json!({"input_tokens": 10, "output_tokens": 5}), (10, 5, 0)),
            (
                json!({"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 0}),
                (110, 5, 0),
            ),
            (
                json!({"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": null, "cache_read_input_tokens": 900}),
                (910, 5, 900),
            ),
            (json!(null), (0, 0, 0)),
        ];
        for (input, (i, o, c)) in cases {
            let want = Usage {
                input_tokens: i,
                output_tokens: o,
                cached_input_tokens: c,
            };
            assert_eq!(usage(&input), want, "{input}");
        }
    }

    #[test]
    fn prevents_unreadable_error_messages() {
        let cases = [
            (
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                "overloaded_error: Overloaded",
            ),
            (502, "<html>Bad gateway</html>", "<html>Bad gateway</html>"),
            (500, "", "no body"),
            (400, r#"{"unexpected":true}"#, r#"{"unexpected":true}"#),
        ];
        for (status, body, want) in cases {
            assert_eq!(
                parse_error(status, body),
                LlmError::Status {
                    status,
                    message: want.into()
                },
                "{body}"
            );
        }
    }

    #[test]
    fn prevents_silently_accepting_malformed_responses() {
        let cases = [
            json!([]),
            json!({"type": "message"}),
            json!({"content": [{"type": "tool_use", "name": "t", "input": {}}]}),
            json!({"content": [{"type": "tool_use", "id": "x", "input": {}}]}),
        ];
        for body in cases {
            assert!(
                matches!(parse_response(&body), Err(LlmError::Decode(_))),
                "{body}"
            );
        }
    }
}
