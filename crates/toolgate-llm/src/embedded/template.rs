//! Renders a request into the model's own chat template (read from the GGUF file) with
//! minijinja, in the message shapes Hugging Face templates expect.
//!
//! Guarantees: tool definitions, calls and results reach the template in OpenAI's function
//! shape; `tojson` behaves as in Hugging Face (see `pyjson`); a template that fails to render
//! is an error, never a silently different prompt.

use minijinja::{Environment, Value as JinjaValue};
use serde_json::{Value, json};

use super::pyjson;
use crate::{ContentBlock, LlmError, ModelRequest, Role, ToolChoice};

/// Messages and tools in the shapes chat templates expect.
pub fn template_context(request: &ModelRequest) -> (Vec<Value>, Vec<Value>) {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut results = Vec::new();
        for block in &message.content {
            match block {
                ContentBlock::Text { text: t } => {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(t);
                }
                ContentBlock::ToolCall(call) => calls.push(json!({
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                })),
                ContentBlock::ToolResult(result) => {
                    let content = if result.is_error {
                        format!("ERROR: {}", result.content)
                    } else {
                        result.content.clone()
                    };
                    results.push(json!({"role": "tool", "content": content}));
                }
            }
        }
        match message.role {
            Role::User => {
                messages.extend(results);
                if !text.is_empty() {
                    messages.push(json!({"role": "user", "content": text}));
                }
            }
            Role::Assistant => {
                let mut m = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    m["tool_calls"] = Value::Array(calls);
                }
                messages.push(m);
            }
        }
    }
    let tools = match &request.tool_choice {
        ToolChoice::None => Vec::new(),
        ToolChoice::Tool(name) => request
            .tools
            .iter()
            .filter(|t| &t.name == name)
            .map(function_shape)
            .collect(),
        ToolChoice::Auto | ToolChoice::Any => request.tools.iter().map(function_shape).collect(),
    };
    (messages, tools)
}

fn function_shape(tool: &crate::ToolDefinition) -> Value {
    json!({
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.input_schema},
    })
}

/// Renders the prompt text, ending with the assistant's turn opener.
pub fn render(template: &str, request: &ModelRequest) -> Result<String, LlmError> {
    let mut env = Environment::new();
    env.add_filter(
        "tojson",
        |value: JinjaValue| -> Result<String, minijinja::Error> {
            let json: Value = serde_json::to_value(&value).map_err(|e| {
                minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, e.to_string())
            })?;
            Ok(pyjson::dumps(&json))
        },
    );
    env.add_function(
        "raise_exception",
        |message: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                message,
            ))
        },
    );
    env.add_template("chat", template)
        .map_err(|e| LlmError::Engine(format!("the model's chat template does not parse: {e}")))?;
    let (messages, tools) = template_context(request);
    let ctx = minijinja::context! {
        messages => messages,
        tools => if tools.is_empty() { None } else { Some(tools) },
        add_generation_prompt => true,
        bos_token => "",
        eos_token => "",
    };
    env.get_template("chat")
        .and_then(|t| t.render(ctx))
        .map_err(|e| LlmError::Engine(format!("the model's chat template failed to render: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, ToolCall, ToolDefinition, ToolResult};

    /// The tool-calling template shipped in Qwen2.5 Instruct GGUF files (abridged to the parts
    /// that matter: system with tools, assistant calls, tool responses).
    const QWEN_LIKE: &str = r#"{%- if tools %}<|im_start|>system
{{ messages[0]['content'] if messages[0]['role'] == 'system' else 'default' }}
<tools>{%- for tool in tools %}
{{ tool | tojson }}{%- endfor %}
</tools><|im_end|>
{% endif %}{%- for message in messages %}{%- if message.role == "user" or (message.role == "assistant" and not message.tool_calls) %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == "assistant" %}<|im_start|>assistant{% for tool_call in message.tool_calls %}{% set tool_call = tool_call.function %}
<tool_call>
{"name": "{{ tool_call.name }}", "arguments": {{ tool_call.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == "tool" %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"#;

    #[test]
    fn renders_tools_calls_and_results_in_template_shapes() {
        let mut request = ModelRequest::new(
            vec![
                Message::user_text("How many?"),
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ToolCall(ToolCall {
                        id: "c1".into(),
                        name: "books_search".into(),
                        arguments: json!({"author": "Collins"}),
                    })],
                },
                Message::tool_results(vec![ToolResult {
                    call_id: "c1".into(),
                    content: "{\"total_matches\": 4}".into(),
                    is_error: false,
                }]),
            ],
            vec![ToolDefinition {
                name: "books_search".into(),
                description: "Finds books.".into(),
                input_schema: json!({"type": "object", "properties": {"author": {"type": "string"}}}),
            }],
        );
        request.system = Some("Be brief.".into());
        let prompt = render(QWEN_LIKE, &request).unwrap();
        assert!(prompt.starts_with("<|im_start|>system\nBe brief.\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"books_search\""), "{prompt}");
        assert!(prompt.contains("<tool_call>\n{\"name\": \"books_search\", \"arguments\": {\"author\": \"Collins\"}}\n</tool_call>"), "{prompt}");
        assert!(prompt.contains("<tool_response>\n{\"total_matches\": 4}\n</tool_response>"));
        assert!(prompt.ends_with("<|im_start|>assistant\n"));
    }

    #[test]
    fn tool_choice_none_hides_the_tools() {
        let mut request = ModelRequest::new(
            vec![Message::user_text("hi")],
            vec![ToolDefinition {
                name: "t".into(),
                description: "d".into(),
                input_schema: json!({}),
            }],
        );
        request.tool_choice = ToolChoice::None;
        let prompt = render(QWEN_LIKE, &request).unwrap();
        assert!(!prompt.contains("<tools>"));
    }

    #[test]
    fn broken_template_is_an_error_not_a_prompt() {
        let request = ModelRequest::new(vec![Message::user_text("hi")], vec![]);
        assert!(render("{% for %}", &request).is_err());
    }
}
