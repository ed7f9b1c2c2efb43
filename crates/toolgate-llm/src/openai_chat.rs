//! The OpenAI Chat Completions wire format (`POST /chat/completions`), as pure functions; also
//! spoken by OpenAI-compatible local servers (llama.cpp server, Ollama, vLLM).
//!
//! Contract: [`build_request`] (OpenAI, `max_completion_tokens`) and [`build_compat_request`]
//! (compatible servers, `max_tokens`) map a [`ModelRequest`] to the documented body and nothing
//! else; [`parse_response`] maps a documented 200 body to a [`ModelResponse`] or a
//! [`LlmError::Decode`]; [`parse_error`] maps any non-2xx answer to [`LlmError::Status`].
//!
//! Mapping rules: tool call arguments travel as a JSON *string*; a result's `is_error` has no
//! field in this format, so failed results reach the model as `ERROR: …`; a user turn's tool
//! results become `tool` messages placed before its text, right after the assistant turn that
//! asked for them; a tool is sent `strict: true` only when [`is_strict_compatible`] says OpenAI's
//! strict mode accepts its schema. On the way back, arguments that do not parse are kept as a JSON
//! string (the dispatcher rejects them with a teaching error), and calls reported with
//! `finish_reason: "stop"` (some local servers) still count as tool use.

use serde_json::{Map, Value, json};

use crate::wire::{
    arguments_from_text, arguments_to_text, count_at, excerpt, flagged_result_content, object,
    str_or_empty, temperature_json,
};
use crate::{
    ContentBlock, LlmError, Message, ModelRequest, ModelResponse, Role, StopReason, ToolCall,
    ToolChoice, ToolDefinition, Usage,
};

/// The request body for OpenAI itself.
pub fn build_request(request: &ModelRequest, model: &str) -> Value {
    build(request, model, Dialect::OpenAi)
}

/// The request body for an OpenAI-compatible server, which reads the older `max_tokens`.
pub fn build_compat_request(request: &ModelRequest, model: &str) -> Value {
    build(request, model, Dialect::Compatible)
}

/// Where the two bodies differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    /// OpenAI: `max_completion_tokens`, and `allowed_tools` to narrow a required call.
    OpenAi,
    /// llama.cpp server, Ollama, vLLM: `max_tokens`, and only the string tool choices (a
    /// narrowed call is sent as `required`; the loop refuses a call outside the set).
    Compatible,
}

fn build(request: &ModelRequest, model: &str, dialect: Dialect) -> Value {
    let max_tokens_field = match dialect {
        Dialect::OpenAi => "max_completion_tokens",
        Dialect::Compatible => "max_tokens",
    };
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages_json(request)));
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
        body.insert(
            "tool_choice".into(),
            tool_choice_json(&request.tool_choice, dialect),
        );
        body.insert(
            "parallel_tool_calls".into(),
            json!(request.parallel_tool_calls),
        );
    }
    body.insert(max_tokens_field.into(), json!(request.max_tokens));
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), temperature_json(t));
    }
    // Chat Completions' documented `seed` (best-effort determinism); sent only when set.
    if let Some(seed) = request.seed {
        body.insert("seed".into(), json!(seed));
    }
    Value::Object(body)
}

fn tool_json(tool: &ToolDefinition) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
            "strict": is_strict_compatible(&tool.input_schema),
        }
    })
}

/// `tool_choice` as Chat Completions spells it.
fn tool_choice_json(choice: &ToolChoice, dialect: Dialect) -> Value {
    match (choice, dialect) {
        (ToolChoice::Auto, _) => json!("auto"),
        (ToolChoice::Any, _) | (ToolChoice::AnyOf(_), Dialect::Compatible) => json!("required"),
        (ToolChoice::None, _) => json!("none"),
        (ToolChoice::Tool(name), _) => json!({"type": "function", "function": {"name": name}}),
        (ToolChoice::AnyOf(names), Dialect::OpenAi) => json!({
            "type": "allowed_tools",
            "allowed_tools": {
                "mode": "required",
                "tools": names
                    .iter()
                    .map(|n| json!({"type": "function", "function": {"name": n}}))
                    .collect::<Vec<_>>(),
            },
        }),
    }
}

/// Keywords OpenAI's strict mode accepts (its documented subset of JSON Schema). Anything else
/// (`minLength`, `default`, `uniqueItems`, `allOf`, `$ref`, …) makes the request fail with 400
/// when `strict` is on, so such a schema is sent non-strict and the dispatcher validates it.
const STRICT_KEYWORDS: [&str; 19] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "description",
    "title",
    "pattern",
    "format",
    "multipleOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
];

/// Formats OpenAI's strict mode accepts for strings.
const STRICT_FORMATS: [&str; 9] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Whether OpenAI's strict mode accepts `schema` as it is: the root is an object, every object
/// is closed (`additionalProperties: false`) and lists every property in `required`, and only
/// keywords and formats of the strict subset appear. `false` is always safe (the call is then
/// validated by the dispatcher only); a wrong `true` makes every request fail.
pub fn is_strict_compatible(schema: &Value) -> bool {
    is_object_schema(schema) && strict_node(schema)
}

fn is_object_schema(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        _ => false,
    }
}

fn strict_node(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    let keywords_ok = map.keys().all(|k| STRICT_KEYWORDS.contains(&k.as_str()));
    let format_ok = map
        .get("format")
        .is_none_or(|f| f.as_str().is_some_and(|f| STRICT_FORMATS.contains(&f)));
    let declares_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => false,
    } || map.contains_key("properties");
    let object_ok = !declares_object || closed_and_all_required(map);
    let children_ok = map
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(|props| props.values().all(strict_node))
        && map.get("items").is_none_or(strict_node)
        && map.get("anyOf").is_none_or(|v| {
            v.as_array()
                .is_some_and(|alts| alts.iter().all(strict_node))
        });
    keywords_ok && format_ok && object_ok && children_ok
}

fn closed_and_all_required(map: &Map<String, Value>) -> bool {
    let closed = map.get("additionalProperties") == Some(&Value::Bool(false));
    let required: Vec<&str> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let all_required = map
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(|props| props.keys().all(|k| required.contains(&k.as_str())));
    closed && all_required
}

fn messages_json(request: &ModelRequest) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        out.extend(message_json(message));
    }
    out
}

/// One neutral message as one or more Chat messages.
fn message_json(message: &Message) -> Vec<Value> {
    let text: String = message.text_blocks().collect::<Vec<_>>().join("\n\n");
    match message.role {
        Role::Assistant => {
            let calls: Vec<Value> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolCall(call) => Some(json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": arguments_to_text(&call.arguments)},
                    })),
                    _ => None,
                })
                .collect();
            if text.is_empty() && calls.is_empty() {
                return Vec::new();
            }
            let mut m = Map::new();
            m.insert("role".into(), json!("assistant"));
            m.insert(
                "content".into(),
                if text.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                },
            );
            if !calls.is_empty() {
                m.insert("tool_calls".into(), Value::Array(calls));
            }
            vec![Value::Object(m)]
        }
        Role::User => {
            let mut out: Vec<Value> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolResult(r) => Some(json!({
                        "role": "tool",
                        "tool_call_id": r.call_id,
                        "content": flagged_result_content(&r.content, r.is_error),
                    })),
                    _ => None,
                })
                .collect();
            if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
            out
        }
    }
}

/// A 200 body as a [`ModelResponse`].
pub fn parse_response(body: &Value) -> Result<ModelResponse, LlmError> {
    let map = object(body, "the chat completion")?;
    let choice = map
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| LlmError::Decode("the chat completion has no `choices[0]`".into()))?;
    let message = choice
        .get("message")
        .ok_or_else(|| LlmError::Decode("`choices[0]` has no `message`".into()))?;
    let message = object(message, "`choices[0].message`")?;
    let tool_calls: Vec<ToolCall> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(i, c)| tool_call(i, c))
                .collect()
        })
        .transpose()?
        .unwrap_or_default();
    let refusal = message
        .get("refusal")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty());
    let mut text = content_text(message.get("content"));
    if text.is_empty()
        && let Some(r) = refusal
    {
        text = r.to_string();
    }
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    let stop_reason = match refusal {
        Some(_) => StopReason::Refusal,
        None => stop_reason(finish, !tool_calls.is_empty()),
    };
    Ok(ModelResponse {
        text,
        tool_calls,
        stop_reason,
        usage: usage(map.get("usage").unwrap_or(&Value::Null)),
        model: str_or_empty(map, "model").to_string(),
    })
}

/// `content` as a string, a list of text parts (some compatible servers) or null.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// One `tool_calls[i]`; a server that gives no id gets `call_{i}` so results can still echo one.
fn tool_call(index: usize, call: &Value) -> Result<ToolCall, LlmError> {
    let function = call
        .get("function")
        .ok_or_else(|| LlmError::Decode(format!("tool_calls[{index}] has no `function`")))?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| LlmError::Decode(format!("tool_calls[{index}] has no function name")))?;
    let arguments = match function.get("arguments") {
        Some(Value::String(text)) => arguments_from_text(text),
        Some(Value::Null) | None => json!({}),
        // Some local servers send the object itself.
        Some(other) => other.clone(),
    };
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map_or_else(|| format!("call_{index}"), str::to_string);
    Ok(ToolCall {
        id,
        name: name.to_string(),
        arguments,
    })
}

/// `finish_reason`; calls present under `stop` (Ollama, older llama.cpp) are still tool use.
fn stop_reason(finish_reason: Option<&str>, has_calls: bool) -> StopReason {
    match finish_reason {
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("stop") | None if has_calls => StopReason::ToolUse,
        Some("stop") => StopReason::EndTurn,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Refusal,
        Some(other) => StopReason::Other(other.to_string()),
        None => StopReason::Other("missing".into()),
    }
}

fn usage(usage: &Value) -> Usage {
    Usage {
        input_tokens: count_at(usage, &["prompt_tokens"]),
        output_tokens: count_at(usage, &["completion_tokens"]),
        cached_input_tokens: count_at(usage, &["prompt_tokens_details", "cached_tokens"]),
    }
}

/// A non-2xx answer as [`LlmError::Status`]; the documented
/// `{"error":{"message","type","code"}}` body gives `type (code): message`, any other body an
/// excerpt of itself.
pub fn parse_error(status: u16, body: &str) -> LlmError {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let message = match error {
        Some(Value::Object(e)) => {
            let text = e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            let kind = e
                .get("type")
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty());
            let code = e.get("code").and_then(|c| match c {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            });
            match (kind, code) {
                (Some(k), Some(c)) => format!("{k} ({c}): {}", excerpt(text)),
                (Some(k), None) => format!("{k}: {}", excerpt(text)),
                (None, Some(c)) => format!("({c}): {}", excerpt(text)),
                (None, None) => excerpt(text),
            }
        }
        // Some compatible servers answer `{"error": "message"}`.
        Some(Value::String(text)) => excerpt(text),
        _ if body.trim().is_empty() => "no body".into(),
        _ => excerpt(body),
    };
    LlmError::Status { status, message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolResult;

    #[test]
    fn a_seed_is_sent_only_when_the_request_names_one() {
        let mut request = ModelRequest::new(vec![Message::user_text("hi")], Vec::new());
        assert!(build_request(&request, "m").get("seed").is_none());
        request.seed = Some(42);
        request.temperature = Some(0.7);
        assert_eq!(build_request(&request, "m")["seed"], json!(42));
    }

    #[test]
    fn prevents_strict_mode_rejecting_a_schema() {
        let cases = [
            (
                "closed, all required",
                json!({"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"type": "string"}}}),
                true,
            ),
            (
                "optional property",
                json!({"type": "object", "additionalProperties": false, "required": [], "properties": {"a": {"type": "string"}}}),
                false,
            ),
            (
                "no required list",
                json!({"type": "object", "additionalProperties": false, "properties": {"a": {"type": "string"}}}),
                false,
            ),
            (
                "open root",
                json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}),
                false,
            ),
            (
                "open nested object",
                json!({"type": "object", "additionalProperties": false, "required": ["f"], "properties": {"f": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}),
                false,
            ),
            (
                "closed nested object in array items",
                json!({"type": "object", "additionalProperties": false, "required": ["xs"], "properties": {"xs": {"type": "array", "maxItems": 3, "items": {"type": "object", "additionalProperties": false, "required": ["x"], "properties": {"x": {"type": "integer", "minimum": 0}}}}}}),
                true,
            ),
            (
                "nullable type array is allowed",
                json!({"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"type": ["string", "null"], "enum": ["x", null]}}}),
                true,
            ),
            (
                "unsupported keyword minLength",
                json!({"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"type": "string", "minLength": 1}}}),
                false,
            ),
            (
                "unsupported keyword default",
                json!({"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"type": "integer", "default": 3}}}),
                false,
            ),
            (
                "unsupported format uri",
                json!({"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"type": "string", "format": "uri"}}}),
                false,
            ),
            (
                "supported format date",
                json!({"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"type": "string", "format": "date"}}}),
                true,
            ),
            ("root is not an object", json!({"type": "string"}), false),
            (
                "anyOf at the root",
                json!({"anyOf": [{"type": "object", "additionalProperties": false, "properties": {}}]}),
                false,
            ),
            (
                "empty closed object",
                json!({"type": "object", "additionalProperties": false, "properties": {}}),
                true,
            ),
            (
                "anyOf branch that is open",
                json!({"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {}}]}}}),
                false,
            ),
        ];
        for (name, schema, want) in cases {
            assert_eq!(is_strict_compatible(&schema), want, "{name}");
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
                json!({"type": "function", "function": {"name": "notes_get"}}),
            ),
            (
                ToolChoice::AnyOf(vec!["notes_search".into(), "notes_get".into()]),
                json!({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
                    {"type": "function", "function": {"name": "notes_search"}},
                    {"type": "function", "function": {"name": "notes_get"}},
                ]}}),
            ),
        ];
        for (choice, want) in cases {
            assert_eq!(tool_choice_json(&choice, Dialect::OpenAi), want);
        }
    }

    #[test]
    fn a_narrowed_call_to_a_compatible_server_is_sent_as_required() {
        // llama.cpp server, Ollama and vLLM read only the string choices; the loop refuses a
        // call outside the set.
        let choice = ToolChoice::AnyOf(vec!["notes_search".into()]);
        assert_eq!(
            tool_choice_json(&choice, Dialect::Compatible),
            json!("required")
        );
        assert_eq!(
            tool_choice_json(&ToolChoice::Auto, Dialect::Compatible),
            json!("auto")
        );
    }

    #[test]
    fn prevents_tool_messages_landing_after_user_text() {
        let message = Message {
            role: Role::User,
            content: vec![
                ContentBlock::Text {
                    text: "and also".into(),
                },
                ContentBlock::ToolResult(ToolResult {
                    call_id: "c1".into(),
                    content: "bad".into(),
                    is_error: true,
                }),
            ],
        };
        assert_eq!(
            message_json(&message),
            vec![
                json!({"role": "tool", "tool_call_id": "c1", "content": "ERROR: bad"}),
                json!({"role": "user", "content": "and also"}),
            ]
        );
    }

    #[test]
    fn prevents_dropping_calls_a_local_server_reports_as_stop() {
        let cases = [
            (Some("stop"), false, StopReason::EndTurn),
            (Some("stop"), true, StopReason::ToolUse),
            (None, true, StopReason::ToolUse),
            (Some("tool_calls"), true, StopReason::ToolUse),
            (Some("function_call"), true, StopReason::ToolUse),
            (Some("length"), true, StopReason::MaxTokens),
            (Some("length"), false, StopReason::MaxTokens),
            (Some("content_filter"), false, StopReason::Refusal),
            (Some("eos"), false, StopReason::Other("eos".into())),
            (None, false, StopReason::Other("missing".into())),
        ];
        for (finish, has_calls, want) in cases {
            assert_eq!(
                stop_reason(finish, has_calls),
                want,
                "{finish:?} {has_calls}"
            );
        }
    }

    #[test]
    fn prevents_losing_or_crashing_on_odd_tool_calls() {
        let cases = [
            (
                json!({"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}),
                ("call_1", json!({"a": 1})),
            ),
            (
                json!({"id": "call_2", "type": "function", "function": {"name": "f", "arguments": "{\"a\":"}}),
                ("call_2", json!("{\"a\":")),
            ),
            (
                json!({"type": "function", "function": {"name": "f", "arguments": {"a": 2}}}),
                ("call_0", json!({"a": 2})),
            ),
            (
                json!({"id": "", "function": {"name": "f"}}),
                ("call_0", json!({})),
            ),
        ];
        for (input, (id, args)) in cases {
            let call = tool_call(0, &input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!((call.id.as_str(), call.arguments), (id, args), "{input}");
        }
        assert!(matches!(
            tool_call(3, &json!({"id": "x", "function": {"arguments": "{}"}})),
            Err(LlmError::Decode(m)) if m.contains("tool_calls[3]")
        ));
    }

    #[test]
    fn prevents_unreadable_error_messages() {
        let cases = [
            (
                401,
                r#"{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
                "invalid_request_error (invalid_api_key): Incorrect API key provided.",
            ),
            (
                429,
                r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":null}}"#,
                "requests: Rate limit reached",
            ),
            (500, r#"{"error":"model not loaded"}"#, "model not loaded"),
            (502, "Bad Gateway", "Bad Gateway"),
            (503, " ", "no body"),
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
    fn prevents_losing_text_in_other_content_shapes() {
        let cases = [
            (Some(json!("hi")), "hi"),
            (Some(json!(null)), ""),
            (None, ""),
            (
                Some(json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])),
                "ab",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(content_text(input.as_ref()), want);
        }
    }
}
