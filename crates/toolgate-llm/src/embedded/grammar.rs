//! Grammar for tool calls: the local model's `strict: true`.
//!
//! The call object (`{"name": ..., "arguments": ...}`) is described as one JSON Schema (a
//! `oneOf` over the offered tools, each with its closed argument schema) and converted with
//! llama.cpp's JSON-schema-to-grammar; the result is wrapped so that the output is one or more
//! `<tool_call>` blocks, the format the model's chat template teaches.

use serde_json::{Value, json};

use crate::{LlmError, ToolDefinition};

/// Most calls one turn may hold.
pub const MAX_CALLS_PER_TURN: usize = 4;

/// The JSON Schema of one call to any of `tools`. Key order (name, then arguments) is kept,
/// since the grammar writes properties in schema order.
pub fn call_schema(tools: &[&ToolDefinition]) -> Value {
    let variants: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": {
                    "name": {"const": t.name},
                    "arguments": strip_annotations(&t.input_schema),
                },
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    if variants.len() == 1 {
        variants.into_iter().next().unwrap_or(Value::Null)
    } else {
        json!({ "oneOf": variants })
    }
}

/// Descriptions and examples do not constrain output; dropping them keeps the grammar small.
fn strip_annotations(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "description" | "examples" | "title" | "default")
                })
                .map(|(k, v)| {
                    let v = if k == "properties" {
                        match v {
                            Value::Object(props) => Value::Object(
                                props
                                    .iter()
                                    .map(|(pk, pv)| (pk.clone(), strip_annotations(pv)))
                                    .collect(),
                            ),
                            other => other.clone(),
                        }
                    } else {
                        strip_annotations(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_annotations).collect()),
        other => other.clone(),
    }
}

/// Wraps a converted call grammar (whose start rule is `root`) so that the whole output is
/// one to [`MAX_CALLS_PER_TURN`] tagged calls.
pub fn wrap_call_grammar(call_grammar: &str) -> Result<String, LlmError> {
    let mut renamed = String::new();
    let mut found_root = false;
    for line in call_grammar.lines() {
        if let Some(rest) = line.strip_prefix("root ::=") {
            found_root = true;
            renamed.push_str("tool-call-object ::=");
            renamed.push_str(rest);
        } else {
            renamed.push_str(line);
        }
        renamed.push('\n');
    }
    if !found_root {
        return Err(LlmError::Engine(
            "the converted tool grammar has no root rule".into(),
        ));
    }
    let more = MAX_CALLS_PER_TURN.saturating_sub(1);
    Ok(format!(
        "root ::= tool-call-block (\"\\n\" tool-call-block){{0,{more}}}\n\
         tool-call-block ::= \"<tool_call>\\n\" tool-call-object \"\\n</tool_call>\"\n\
         {renamed}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_schema_names_each_tool_and_keeps_arguments_closed() {
        let a = ToolDefinition {
            name: "a".into(),
            description: "d".into(),
            input_schema: json!({"type": "object", "additionalProperties": false, "properties": {"x": {"type": "integer", "description": "long text"}}}),
        };
        let b = ToolDefinition {
            name: "b".into(),
            ..a.clone()
        };
        let schema = call_schema(&[&a, &b]);
        let variants = schema["oneOf"].as_array().unwrap();
        assert_eq!(variants[0]["properties"]["name"], json!({"const": "a"}));
        assert_eq!(variants[1]["properties"]["name"], json!({"const": "b"}));
        assert_eq!(
            variants[0]["properties"]["arguments"]["properties"]["x"],
            json!({"type": "integer"})
        );
        let keys: Vec<&String> = variants[0]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["name", "arguments"], "name must come first");
    }

    #[test]
    fn wrapped_grammar_starts_with_tagged_blocks() {
        let g = wrap_call_grammar("root ::= \"{\" space \"}\"\nspace ::= \" \"?\n").unwrap();
        assert!(g.starts_with("root ::= tool-call-block"));
        assert!(g.contains("tool-call-object ::= \"{\" space \"}\""));
        assert!(wrap_call_grammar("space ::= \" \"").is_err());
    }
}
