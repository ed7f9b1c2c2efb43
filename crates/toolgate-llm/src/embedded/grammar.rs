//! Grammar for tool calls: the local model's `strict: true`.
//!
//! The call object (`{"name": ..., "arguments": ...}`) is described as one JSON Schema (a
//! `oneOf` over the offered tools, each with its closed argument schema) and converted with
//! llama.cpp's JSON-schema-to-grammar; the result is wrapped so that the output is one or more
//! `<tool_call>` blocks, the format the model's chat template teaches.
//!
//! Calls to code tools in the fenced form (`code_form`) get their own block: the call object
//! without `code` (converted the same way), then the script between a ```` ```python ```` line
//! and a closing fence line. No line of the script may start with three backticks, so the
//! first such line closes it; only `</tool_call>` may follow, and such a block is the turn's
//! last, so the model can neither leave the script early nor write a call after it.

use serde_json::{Value, json};

use super::code_form::{self, CLOSE_FENCE, OPEN_FENCE};
use crate::{LlmError, ModelRequest, ToolDefinition};

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

/// The grammar `request`'s calls are sampled under (`None` when it offers no tool), with
/// llama.cpp's converter.
pub fn request_grammar(
    request: &ModelRequest,
    code_tools: &[String],
) -> Result<Option<String>, LlmError> {
    let offered: Vec<&ToolDefinition> = request
        .tools
        .iter()
        .filter(|t| request.tool_choice.allows(&t.name))
        .collect();
    if offered.is_empty() {
        return Ok(None);
    }
    call_grammar(&offered, code_tools, |schema| {
        llama_cpp_2::json_schema_to_grammar(schema).map_err(|e| e.to_string())
    })
    .map(Some)
}

/// The names the converter gives the rules of JSON calls and of fenced code calls' objects: the
/// two properties of one wrapper schema, converted at once so that their helper rules share
/// one namespace (the converter names every other rule after a property path below them, or
/// after a primitive).
const JSON_CALLS_RULE: &str = "tgjsoncall";
const CODE_CALLS_RULE: &str = "tgcodecall";

/// The call grammar for `tools`, those named in `code_tools` in the fenced form; `convert` is
/// llama.cpp's JSON-schema-to-grammar. Without code tools it is exactly [`wrap_call_grammar`]
/// of the tools' [`call_schema`], as before the fenced form.
pub fn call_grammar(
    tools: &[&ToolDefinition],
    code_tools: &[String],
    convert: impl Fn(&str) -> Result<String, String>,
) -> Result<String, LlmError> {
    let converted = |schema: &Value| {
        convert(&schema.to_string()).map_err(|e| {
            LlmError::Engine(format!("cannot turn the tool schemas into a grammar: {e}"))
        })
    };
    let (code, json_tools): (Vec<&ToolDefinition>, Vec<&ToolDefinition>) = tools
        .iter()
        .partition(|t| code_tools.iter().any(|c| c == &t.name));
    if code.is_empty() {
        return wrap_call_grammar(&converted(&call_schema(tools))?);
    }
    let code_objects: Vec<ToolDefinition> = code
        .iter()
        .map(|t| ToolDefinition {
            input_schema: code_form::schema_without_code(&t.input_schema),
            ..(*t).clone()
        })
        .collect();
    let mut properties = serde_json::Map::new();
    if !json_tools.is_empty() {
        properties.insert(JSON_CALLS_RULE.into(), call_schema(&json_tools));
    }
    properties.insert(
        CODE_CALLS_RULE.into(),
        call_schema(&code_objects.iter().collect::<Vec<_>>()),
    );
    let required: Vec<&String> = properties.keys().collect();
    let wrapper = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    let rules = converted(&wrapper)?;
    wrap_with_code_calls(&rules, !json_tools.is_empty())
}

/// The fenced code call's block and the script's lines, after the converted rules (whose
/// wrapper `root` is dropped): one to [`MAX_CALLS_PER_TURN`] calls, a code call only last.
fn wrap_with_code_calls(converted: &str, with_json: bool) -> Result<String, LlmError> {
    let defines = |rule: &str| {
        converted
            .lines()
            .any(|l| l.strip_prefix(rule).is_some_and(|r| r.starts_with(" ::=")))
    };
    let missing = [CODE_CALLS_RULE, JSON_CALLS_RULE]
        .into_iter()
        .filter(|r| (*r == CODE_CALLS_RULE || with_json) && !defines(r))
        .collect::<Vec<_>>();
    if !missing.is_empty() {
        return Err(LlmError::Engine(format!(
            "the converted tool grammar has no rule {}",
            missing.join(", ")
        )));
    }
    let rules: String = converted
        .lines()
        .filter(|l| !l.starts_with("root ::="))
        .map(|l| format!("{l}\n"))
        .collect();
    let more = MAX_CALLS_PER_TURN.saturating_sub(1);
    let root = if with_json {
        format!(
            "root ::= (tg-json-block \"\\n\"){{0,{more}}} (tg-json-block | tg-code-block)\n\
             tg-json-block ::= \"<tool_call>\\n\" {JSON_CALLS_RULE} \"\\n</tool_call>\"\n"
        )
    } else {
        "root ::= tg-code-block\n".to_owned()
    };
    let open = gbnf_literal(&format!("\n{OPEN_FENCE}\n"));
    let close = gbnf_literal(&format!("\n{CLOSE_FENCE}\n</tool_call>"));
    // A script line: anything but a line break, not starting with three backticks.
    Ok(format!(
        "{root}\
         tg-code-block ::= \"<tool_call>\\n\" {CODE_CALLS_RULE} {open} tg-code-first (\"\\n\" tg-code-line)* {close}\n\
         tg-code-first ::= [^`\\n] [^\\n]* | \"`\" [^`\\n] [^\\n]* | \"``\" [^`\\n] [^\\n]*\n\
         tg-code-line ::= (tg-code-first | \"`\" | \"``\")?\n\
         {rules}"
    ))
}

/// `text` as a GBNF string literal.
fn gbnf_literal(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
    use crate::ToolChoice;

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

    fn real_converter(schema: &str) -> Result<String, String> {
        llama_cpp_2::json_schema_to_grammar(schema).map_err(|e| e.to_string())
    }

    fn tool(name: &str, schema: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: "d".into(),
            input_schema: schema,
        }
    }

    fn code_tool() -> ToolDefinition {
        tool(
            "code_execution",
            json!({"type": "object", "additionalProperties": false, "properties": {"code": {"type": "string"}, "return_files": {"type": "array", "items": {"type": "string"}}}, "required": ["code"]}),
        )
    }

    #[test]
    fn a_narrowed_call_can_name_only_the_tools_in_its_set() {
        let schema = json!({"type": "object", "additionalProperties": false, "properties": {"x": {"type": "integer"}}});
        let request = crate::ModelRequest {
            system: None,
            messages: Vec::new(),
            tools: vec![
                tool("notes_search", schema.clone()),
                tool("notes_create", schema.clone()),
                tool("notes_get", schema),
            ],
            tool_choice: ToolChoice::AnyOf(vec!["notes_search".into(), "notes_get".into()]),
            max_tokens: 16,
            temperature: None,
            parallel_tool_calls: true,
            stable_tools: None,
            seed: None,
        };
        let grammar = request_grammar(&request, &[]).unwrap().unwrap();
        assert!(grammar.contains("notes_search") && grammar.contains("notes_get"));
        assert!(!grammar.contains("notes_create"), "{grammar}");
        let none = crate::ModelRequest {
            tool_choice: ToolChoice::AnyOf(Vec::new()),
            ..request
        };
        assert_eq!(request_grammar(&none, &[]).unwrap(), None);
    }

    #[test]
    fn without_code_tools_the_grammar_is_the_one_before_the_fenced_form() {
        let a = tool(
            "a",
            json!({"type": "object", "additionalProperties": false, "properties": {"x": {"type": "integer"}}}),
        );
        let code = code_tool();
        let tools = [&a, &code];
        let before =
            wrap_call_grammar(&real_converter(&call_schema(&tools).to_string()).unwrap()).unwrap();
        assert_eq!(call_grammar(&tools, &[], real_converter).unwrap(), before);
    }

    #[test]
    fn a_code_call_block_is_last_and_its_object_has_no_code() {
        let a = tool(
            "a",
            json!({"type": "object", "additionalProperties": false, "properties": {"x": {"type": "integer"}}}),
        );
        let code = code_tool();
        let names = vec!["code_execution".to_owned()];
        let both = call_grammar(&[&a, &code], &names, real_converter).unwrap();
        assert!(
            both.starts_with(
                "root ::= (tg-json-block \"\\n\"){0,3} (tg-json-block | tg-code-block)\n"
            ),
            "{both}"
        );
        assert_eq!(both.matches("root ::=").count(), 1, "{both}");
        assert!(!both.contains("\\\"code\\\""), "no code key: {both}");
        assert!(both.contains("\\\"return_files\\\""), "{both}");
        let alone = call_grammar(&[&code], &names, real_converter).unwrap();
        assert!(alone.starts_with("root ::= tg-code-block\n"), "{alone}");
        assert!(!alone.contains("tg-json-block"), "{alone}");
    }

    /// What books-v6's write schema rests on: the converter writes an object's required
    /// properties before its optional ones, whatever order the schema lists them in, so a
    /// model under this grammar can only write a required field first.
    #[test]
    fn the_converter_writes_required_properties_before_optional_ones() {
        let schema = json!({"type": "object", "additionalProperties": false,
            "properties": {"author": {"type": "string"}, "tag": {"type": "string"}},
            "required": ["tag"]});
        let grammar = real_converter(&schema.to_string()).unwrap();
        let root = grammar.lines().find(|l| l.starts_with("root ::=")).unwrap();
        let (tag, author) = (
            root.find("tag-kv").unwrap(),
            root.find("author-kv").unwrap(),
        );
        assert!(tag < author, "{root}");
        // A required object listed first is written first: the books before the tag.
        let nested = json!({"type": "object", "additionalProperties": false,
            "properties": {"books": {"type": "object", "additionalProperties": false,
                "properties": {"author": {"type": "string"}}}, "tag": {"type": "string"}},
            "required": ["books", "tag"]});
        let grammar = real_converter(&nested.to_string()).unwrap();
        let root = grammar.lines().find(|l| l.starts_with("root ::=")).unwrap();
        assert!(
            root.find("books-kv").unwrap() < root.find("tag-kv").unwrap(),
            "{root}"
        );
    }

    #[test]
    fn a_conversion_without_the_expected_rules_is_refused_not_guessed() {
        let code = code_tool();
        let names = vec!["code_execution".to_owned()];
        let renamed = |_: &str| Ok("root ::= something\nsomething ::= \"{}\"\n".to_owned());
        assert!(matches!(
            call_grammar(&[&code], &names, renamed),
            Err(LlmError::Engine(_))
        ));
    }
}
