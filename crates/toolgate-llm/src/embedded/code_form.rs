//! The fenced form of a call to a code tool: the model writes the script as plain Python after
//! the call object, not as a JSON string inside it.
//!
//! Why: the embedded 1.5B model wrote its scripts inside a JSON string escaped twice (`\\n`
//! for a line break, `\"content\\\"` for a quote; evals/runs/code-mode-embedded), copying the
//! tool's own example, which its chat template shows as JSON inside a JSON description. A
//! coder model writes code well in a fenced block; this form lets it:
//!
//! ````text
//! <tool_call>
//! {"name": "code_execution", "arguments": {}}
//! ```python
//! import toolgate_tools as t
//! print(t.notes_search(query="invoice")["content"]["total_matches"])
//! ```
//! </tool_call>
//! ````
//!
//! A code tool is one whose argument schema requires a string property `code` (the
//! `code_execution` tool). With [`CodeCalls::Fenced`], and only for code tools: the model is
//! shown the tool without `code` in its parameters, its examples that hold code move from the
//! description (where the template would escape them twice) to a note at the end of the
//! system prompt, written in this form with real line breaks ([`prompt_request`]); the call
//! grammar takes the code between the fences (`grammar`); the parser puts the code back as the
//! `code` argument (`parse`), so the call reaches the dispatcher with the same arguments, and
//! the same validation, as a JSON-form call. Other tools' calls are unchanged.
//!
//! Guarantees: a code call is the last call of its turn and its code runs to the turn's last
//! closing fence, so nothing a script holds (a `</tool_call>`, a closing fence inside a
//! string, text shaped like another call) can close it early or open a second call: the
//! grammar lets no line of the code start with three backticks and lets nothing but
//! `</tool_call>` follow the closing fence, and the parser reads a block that starts as a code
//! call either as that one call or, when anything but the closing tag follows its last fence,
//! as text. Refused (read as text): a code-form block naming a tool that is not a code tool,
//! or whose call object also gives `code`.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::pyjson;
use crate::{ModelRequest, ToolDefinition};

/// The argument a code tool's script goes in.
pub const CODE_ARGUMENT: &str = "code";
/// The fence that opens a code call's script (the grammar writes exactly this).
pub const OPEN_FENCE: &str = "```python";
/// The fence that closes it, alone on its line.
pub const CLOSE_FENCE: &str = "```";

/// How the embedded model writes calls to code tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CodeCalls {
    /// As every other call: the script is the JSON string `code` in the arguments.
    #[default]
    Json,
    /// The script as plain text between fences after the call object (see the module doc).
    Fenced,
}

/// Whether `tool` takes a script: its argument schema requires a string `code`.
pub fn is_code_tool(tool: &ToolDefinition) -> bool {
    let schema = &tool.input_schema;
    let required = schema["required"]
        .as_array()
        .is_some_and(|r| r.iter().any(|n| n == CODE_ARGUMENT));
    required && schema["properties"][CODE_ARGUMENT]["type"] == "string"
}

/// The names of the code tools `request` offers the model under `form` (none with
/// [`CodeCalls::Json`], or when the tool choice offers no tool).
pub fn offered_code_tools(request: &ModelRequest, form: CodeCalls) -> Vec<String> {
    match form {
        CodeCalls::Json => Vec::new(),
        CodeCalls::Fenced => request
            .tools
            .iter()
            .filter(|t| request.tool_choice.allows(&t.name))
            .filter(|t| is_code_tool(t))
            .map(|t| t.name.clone())
            .collect(),
    }
}

/// A code tool's argument schema without `code` (what the call object holds in this form).
pub fn schema_without_code(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        properties.remove(CODE_ARGUMENT);
    }
    if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|n| n != CODE_ARGUMENT);
    }
    schema
}

/// One example of a code tool, taken out of its description.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeExample {
    pub label: String,
    /// The other arguments (without `code`).
    pub arguments: Map<String, Value>,
    pub code: String,
}

/// `description` without its example lines that hold code, and those examples. An example line
/// is how `toolgate-core` renders one: `Example (LABEL): {JSON arguments}` on one line; a
/// line that does not read so stays in the description.
pub fn split_examples(description: &str) -> (String, Vec<CodeExample>) {
    let mut kept = Vec::new();
    let mut examples = Vec::new();
    for line in description.split('\n') {
        match code_example(line) {
            Some(example) => examples.push(example),
            None => kept.push(line),
        }
    }
    (kept.join("\n"), examples)
}

fn code_example(line: &str) -> Option<CodeExample> {
    let rest = line.strip_prefix("Example (")?;
    // The label may hold "): " itself: the first cut after which the rest is an object wins.
    rest.match_indices("): ").find_map(|(at, sep)| {
        let Ok(Value::Object(mut arguments)) =
            serde_json::from_str::<Value>(&rest[at + sep.len()..])
        else {
            return None;
        };
        let Some(Value::String(code)) = arguments.remove(CODE_ARGUMENT) else {
            return None;
        };
        Some(CodeExample {
            label: rest[..at].to_owned(),
            arguments,
            code,
        })
    })
}

/// A code call in this form, exactly as the grammar lets the model write it.
pub fn fenced_call(name: &str, arguments: &Map<String, Value>, code: &str) -> String {
    let object = pyjson::dumps(&serde_json::json!({
        "name": name,
        "arguments": Value::Object(arguments.clone()),
    }));
    format!(
        "<tool_call>\n{object}\n{OPEN_FENCE}\n{}\n{CLOSE_FENCE}\n</tool_call>",
        code.trim_end_matches('\n')
    )
}

/// The note the system prompt ends with for `tool`: how to call it in this form, with its
/// examples (or one showing only the shape, when it has none).
fn note(tool: &str, examples: &[CodeExample]) -> String {
    let mut text = format!(
        "# How to call {tool}\nThe script is not a JSON string. Write the call object without \"{CODE_ARGUMENT}\", then the script as plain Python (real line breaks, nothing escaped) in a {OPEN_FENCE} block, then </tool_call>. This call is the last of its turn."
    );
    if examples.is_empty() {
        text.push_str("\nFor example:\n");
        text.push_str(&fenced_call(tool, &Map::new(), "print(\"hello\")"));
    }
    for example in examples {
        text.push_str(&format!("\nExample ({}):\n", example.label));
        text.push_str(&fenced_call(tool, &example.arguments, &example.code));
    }
    text
}

/// `request` as the model reads it when `code_tools` are called in this form: each code tool
/// shown without `code` and without its code examples, which follow the system prompt in a
/// note each (see the module doc). Borrowed unchanged when `code_tools` is empty.
pub fn prompt_request<'a>(
    request: &'a ModelRequest,
    code_tools: &[String],
) -> Cow<'a, ModelRequest> {
    if code_tools.is_empty() {
        return Cow::Borrowed(request);
    }
    let mut rewritten = request.clone();
    let mut notes = Vec::new();
    for tool in &mut rewritten.tools {
        if !code_tools.contains(&tool.name) {
            continue;
        }
        let (description, examples) = split_examples(&tool.description);
        tool.description = description;
        tool.input_schema = schema_without_code(&tool.input_schema);
        notes.push(note(&tool.name, &examples));
    }
    let notes = notes.join("\n\n");
    rewritten.system = Some(match &request.system {
        Some(system) if !system.is_empty() => format!("{system}\n\n{notes}"),
        _ => notes,
    });
    Cow::Owned(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolChoice;
    use serde_json::json;

    fn code_tool() -> ToolDefinition {
        ToolDefinition {
            name: "code_execution".into(),
            description: "Runs a script.\nWhen to use: loops.\nExample (count (all pages)): {\"code\": \"import t\\nprint(1)\"}\nExample (a file): {\"code\": \"open('a').write('x')\", \"return_files\": [\"a\"]}\nExample (no code): {\"return_files\": []}".into(),
            input_schema: json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "code": {"type": "string", "minLength": 1},
                    "return_files": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["code"]
            }),
        }
    }

    #[test]
    fn only_a_tool_that_requires_a_string_code_is_a_code_tool() {
        let optional = ToolDefinition {
            input_schema: json!({"type": "object", "properties": {"code": {"type": "string"}}}),
            ..code_tool()
        };
        let numeric = ToolDefinition {
            input_schema: json!({"type": "object", "properties": {"code": {"type": "integer"}}, "required": ["code"]}),
            ..code_tool()
        };
        let cases = [(code_tool(), true), (optional, false), (numeric, false)];
        for (tool, want) in cases {
            assert_eq!(is_code_tool(&tool), want, "{}", tool.input_schema);
        }
    }

    #[test]
    fn a_json_form_request_is_not_rewritten() {
        let request = ModelRequest::new(vec![], vec![code_tool()]);
        assert!(offered_code_tools(&request, CodeCalls::Json).is_empty());
        assert!(matches!(prompt_request(&request, &[]), Cow::Borrowed(_)));
        let mut none = request.clone();
        none.tool_choice = ToolChoice::None;
        assert!(offered_code_tools(&none, CodeCalls::Fenced).is_empty());
        assert_eq!(
            offered_code_tools(&request, CodeCalls::Fenced),
            ["code_execution"]
        );
    }

    #[test]
    fn code_examples_leave_the_description_and_keep_their_labels_and_arguments() {
        let (description, examples) = split_examples(&code_tool().description);
        assert_eq!(
            description,
            "Runs a script.\nWhen to use: loops.\nExample (no code): {\"return_files\": []}"
        );
        assert_eq!(
            examples,
            vec![
                CodeExample {
                    label: "count (all pages)".into(),
                    arguments: Map::new(),
                    code: "import t\nprint(1)".into(),
                },
                CodeExample {
                    label: "a file".into(),
                    arguments: json!({"return_files": ["a"]}).as_object().unwrap().clone(),
                    code: "open('a').write('x')".into(),
                },
            ]
        );
    }

    #[test]
    fn the_model_reads_code_tools_without_code_and_the_examples_with_real_line_breaks() {
        let mut request = ModelRequest::new(vec![], vec![code_tool()]);
        request.system = Some("Be brief.".into());
        let code_tools = offered_code_tools(&request, CodeCalls::Fenced);
        let shown = prompt_request(&request, &code_tools);
        let tool = &shown.tools[0];
        assert!(tool.input_schema["properties"].get("code").is_none());
        assert_eq!(tool.input_schema["required"], json!([]));
        assert!(!tool.description.contains("import t"));
        let system = shown.system.as_deref().unwrap();
        assert!(system.starts_with("Be brief.\n\n# How to call code_execution\n"));
        assert!(
            system.contains("Example (count (all pages)):\n<tool_call>\n{\"name\": \"code_execution\", \"arguments\": {}}\n```python\nimport t\nprint(1)\n```\n</tool_call>"),
            "{system}"
        );
        assert!(system.contains("{\"name\": \"code_execution\", \"arguments\": {\"return_files\": [\"a\"]}}\n```python\nopen('a').write('x')\n```"));
        // The request itself is untouched: the dispatcher still validates the real schema.
        assert!(request.tools[0].input_schema["properties"]["code"].is_object());
    }
}
