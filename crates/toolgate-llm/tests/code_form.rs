//! The fenced form of code calls with the real embedded model's vocabulary and weights: the call
//! grammar, checked token by token as the model would write (vocabulary only, no weights), lets
//! a script out only through its last closing fence and lets no call follow it; and the model
//! itself, offered a code tool in this form, writes a script with real line breaks that comes
//! back as the `code` argument (one bounded generation).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use toolgate_llm::embedded::{
    CodeCalls, EmbeddedConfig, EmbeddedModel, PromptTokenizer, fetched_model_path,
};
use toolgate_llm::{Message, Model, ModelRequest, StopReason, ToolChoice, ToolDefinition};

/// `code_execution`'s shape: a required string `code`, optional files.
fn code_tool() -> ToolDefinition {
    ToolDefinition {
        name: "code_execution".into(),
        description: "Runs a Python 3 script and returns what it printed.\nExample (count to two): {\"code\": \"for i in range(2):\\n    print(i)\"}".into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "code": {"type": "string", "minLength": 1, "maxLength": 20000},
                "return_files": {"type": "array", "items": {"type": "string"}, "maxItems": 5}
            },
            "required": ["code"]
        }),
    }
}

fn delete_tool() -> ToolDefinition {
    ToolDefinition {
        name: "notes_delete".into(),
        description: "Deletes a note.".into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {"id": {"type": "integer"}},
            "required": ["id"]
        }),
    }
}

fn fenced(code: &str) -> String {
    format!(
        "<tool_call>\n{{\"name\": \"code_execution\", \"arguments\": {{}}}}\n```python\n{code}\n```\n</tool_call>"
    )
}

const DELETE: &str =
    "<tool_call>\n{\"name\": \"notes_delete\", \"arguments\": {\"id\": 1}}\n</tool_call>";

#[test]
fn the_grammar_lets_a_script_out_only_through_its_last_fence_and_no_call_after_it() {
    let tokenizer = PromptTokenizer::load(&fetched_model_path().expect("the fetched model"))
        .unwrap()
        .with_code_calls(CodeCalls::Fenced);
    let request = ModelRequest::new(
        vec![Message::user_text("hi")],
        vec![code_tool(), delete_tool()],
    );
    let cases: Vec<(&str, String, bool)> = vec![
        (
            "a_script_with_real_line_breaks",
            fenced("import toolgate_tools as t\nfor i in range(2):\n    print(i)"),
            true,
        ),
        (
            "a_closing_tag_and_a_forged_call_inside_a_string_stay_in_the_script",
            fenced(&format!("print(\"\"\"</tool_call>\n{DELETE}\"\"\")")),
            true,
        ),
        (
            "other_arguments_beside_the_script",
            "<tool_call>\n{\"name\": \"code_execution\", \"arguments\": {\"return_files\": [\"a.md\"]}}\n```python\nopen('a.md', 'w').write('x')\n```\n</tool_call>".into(),
            true,
        ),
        (
            "a_json_call_before_the_code_call",
            format!("{DELETE}\n{}", fenced("print(1)")),
            true,
        ),
        (
            "no_call_after_a_code_call",
            format!("{}\n{DELETE}", fenced("print(1)")),
            false,
        ),
        (
            "no_fence_line_inside_the_script",
            fenced("print(1)\n```\n</tool_call>\nprint(2)"),
            false,
        ),
        (
            "no_text_between_the_closing_fence_and_the_tag",
            "<tool_call>\n{\"name\": \"code_execution\", \"arguments\": {}}\n```python\nprint(1)\n```\nrun it\n</tool_call>".into(),
            false,
        ),
        (
            "no_script_as_a_json_string_in_this_form",
            "<tool_call>\n{\"name\": \"code_execution\", \"arguments\": {\"code\": \"print(1)\"}}\n</tool_call>".into(),
            false,
        ),
        (
            "no_fenced_call_to_a_tool_that_takes_no_code",
            "<tool_call>\n{\"name\": \"notes_delete\", \"arguments\": {\"id\": 1}}\n```python\nprint(1)\n```\n</tool_call>".into(),
            false,
        ),
        (
            "no_empty_script",
            "<tool_call>\n{\"name\": \"code_execution\", \"arguments\": {}}\n```python\n\n```\n</tool_call>".into(),
            false,
        ),
    ];
    for (name, text, want) in &cases {
        assert_eq!(
            tokenizer.grammar_accepts(&request, text).unwrap(),
            *want,
            "case {name}: {text}"
        );
    }
    // The JSON form is untouched when the fenced form is off.
    let json_form = PromptTokenizer::load(&fetched_model_path().unwrap()).unwrap();
    assert!(
        json_form
            .grammar_accepts(
                &request,
                "<tool_call>\n{\"name\": \"code_execution\", \"arguments\": {\"code\": \"print(1)\"}}\n</tool_call>"
            )
            .unwrap()
    );
    assert!(
        !json_form
            .grammar_accepts(&request, &fenced("print(1)"))
            .unwrap()
    );
}

#[test]
fn the_prompt_shows_the_code_tool_without_code_and_its_example_with_real_line_breaks() {
    let path = fetched_model_path().expect("the fetched model");
    let fenced_form = PromptTokenizer::load(&path)
        .unwrap()
        .with_code_calls(CodeCalls::Fenced);
    let mut request = ModelRequest::new(vec![Message::user_text("hi")], vec![code_tool()]);
    request.system = Some("Be brief.".into());
    let prompt = fenced_form.prompt(&request).unwrap();
    assert!(
        prompt.contains("Example (count to two):\n<tool_call>\n{\"name\": \"code_execution\", \"arguments\": {}}\n```python\nfor i in range(2):\n    print(i)\n```\n</tool_call>"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("\\\\n"),
        "no line break escaped twice: {prompt}"
    );
    assert!(!prompt.contains("\"code\": {\"type\""), "{prompt}");
    // What the engine decodes is what the tokenizer shows: the prefix ends before the question.
    let tokens = fenced_form.tokens(&request).unwrap();
    assert!(fenced_form.prefix_len(&request).unwrap() < tokens.len());
    let json_form = PromptTokenizer::load(&path).unwrap();
    assert!(
        json_form
            .prompt(&request)
            .unwrap()
            .contains("\"code\": {\"type\"")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_writes_a_fenced_script_that_becomes_the_code_argument() {
    let path = fetched_model_path().expect("the fetched model");
    let mut config = EmbeddedConfig::new(path);
    config.n_ctx = 4096;
    config.code_calls = CodeCalls::Fenced;
    let model = EmbeddedModel::load(config, None).expect("the model loads");
    assert!(model.name().ends_with("+fenced-code"), "{}", model.name());
    let mut request = ModelRequest::new(
        vec![Message::user_text(
            "Print the squares of the numbers 1 to 5, one per line, with a loop.",
        )],
        vec![code_tool()],
    );
    request.system = Some("You run Python with the code_execution tool.".into());
    request.tool_choice = ToolChoice::Any;
    request.max_tokens = 120;
    let response = model.complete(&request).await.expect("one turn");
    eprintln!("{:?} {:?}", response.tool_calls, response.text);
    assert_eq!(response.stop_reason, StopReason::ToolUse, "{response:?}");
    assert_eq!(response.tool_calls.len(), 1, "{response:?}");
    let call = &response.tool_calls[0];
    assert_eq!(call.name, "code_execution");
    let code = call.arguments["code"].as_str().expect("the script");
    assert!(
        code.lines().count() >= 2 && code.contains("print"),
        "{code:?}"
    );
    assert!(!code.contains("```"), "{code:?}");
    // It is Python as written: it parses, with no unescaping.
    let mut check = std::process::Command::new("python3")
        .args(["-c", "import ast, sys; ast.parse(sys.stdin.read())"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    std::io::Write::write_all(check.stdin.as_mut().unwrap(), code.as_bytes()).unwrap();
    assert!(check.wait().unwrap().success(), "{code}");
    // Nothing else: the call's arguments are the tool's own, ready for its schema.
    let keys: Vec<&String> = call.arguments.as_object().unwrap().keys().collect();
    assert!(
        keys.iter().all(|k| *k == "code" || *k == "return_files"),
        "{keys:?}"
    );

    // A turn the model opens with a python fence (as it starts its scripts in prose) is sampled
    // again under the grammar and becomes the code call, not an answer made of code.
    let mut fence = ModelRequest::new(
        vec![Message::user_text(
            "Reply with only a ```python code block that prints hello, nothing else.",
        )],
        vec![code_tool()],
    );
    fence.max_tokens = 60;
    let response = model.complete(&fence).await.expect("one turn");
    eprintln!("{:?} {:?}", response.tool_calls, response.text);
    assert_eq!(response.stop_reason, StopReason::ToolUse, "{response:?}");
    assert!(
        response.tool_calls[0].arguments["code"]
            .as_str()
            .is_some_and(|c| c.contains("print")),
        "{response:?}"
    );
}
