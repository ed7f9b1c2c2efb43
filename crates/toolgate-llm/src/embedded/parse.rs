//! Reads tool calls out of a local model's text. Only the format the chat template teaches and
//! the tool grammar produces is a call: a `<tool_call>` … `</tool_call>` block holding one JSON
//! object with a string `name` (and `arguments` as an object or a JSON string; `parameters` is
//! read as `arguments`). A final block may lack its closing tag (the turn ended there). A JSON
//! object in prose, fenced or bare, is text whatever it holds: a model quoting a page's code
//! block must not run it. A tag whose body is not a call stays text too.

use serde_json::Value;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// A call as written by the model, before it gets an id.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    pub name: String,
    pub arguments: Value,
}

/// Splits model output into its prose and its calls.
pub fn parse_output(output: &str) -> (String, Vec<ParsedCall>) {
    let mut calls = Vec::new();
    let mut text = String::new();
    let mut rest = output;
    while let Some(start) = rest.find(OPEN) {
        let after_open = &rest[start + OPEN.len()..];
        let (inner, remainder) = match after_open.find(CLOSE) {
            Some(end) => (&after_open[..end], &after_open[end + CLOSE.len()..]),
            None => (after_open, ""),
        };
        match call_from_json(inner.trim()) {
            Some(call) => {
                text.push_str(&rest[..start]);
                calls.push(call);
            }
            None => text.push_str(&rest[..rest.len() - remainder.len()]),
        }
        rest = remainder;
    }
    text.push_str(rest);
    (text.trim().to_string(), calls)
}

/// Whether the first piece the model samples starts a call, so that the engine samples the
/// turn again, from the same logits, under the tool grammar (whose output is tagged calls to
/// offered tools, nothing else): a call tag (`<tool_call>`, or a first piece of it such as
/// `<`), or a turn that opens with a JSON object, which is how the embedded 1.5B model starts
/// most of its calls (it copies the `{"name": …}` line of its template's instructions; without
/// this it would answer with the call as text). A fence opens prose: a quoted code block is
/// never a call, nor is anything after the first piece.
pub fn starts_call_tag(piece: &[u8]) -> bool {
    let start = piece
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(piece.len());
    let piece = &piece[start..];
    !piece.is_empty()
        && (piece.starts_with(OPEN.as_bytes())
            || OPEN.as_bytes().starts_with(piece)
            || piece.starts_with(b"{"))
}

fn call_from_json(body: &str) -> Option<ParsedCall> {
    let value: Value = serde_json::from_str(body).ok()?;
    let object = value.as_object()?;
    let name = object.get("name")?.as_str()?.to_string();
    let arguments = match object.get("arguments").or_else(|| object.get("parameters")) {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        Some(other) => other.clone(),
        None => Value::Object(serde_json::Map::new()),
    };
    Some(ParsedCall { name, arguments })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, arguments: Value) -> ParsedCall {
        ParsedCall {
            name: name.into(),
            arguments,
        }
    }

    #[test]
    fn output_parsing_table() {
        type Case<'a> = (&'a str, &'a str, (&'a str, Vec<ParsedCall>));
        let cases: Vec<Case> = vec![
            (
                "plain answer stays text",
                "There are 4 books.",
                ("There are 4 books.", vec![]),
            ),
            (
                "tagged call",
                "<tool_call>\n{\"name\": \"books_search\", \"arguments\": {\"author\": \"Collins\"}}\n</tool_call>",
                ("", vec![call("books_search", json!({"author": "Collins"}))]),
            ),
            (
                "two tagged calls",
                "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": 1}}\n</tool_call>",
                ("", vec![call("a", json!({})), call("b", json!({"x": 1}))]),
            ),
            (
                "prose then a tagged call with arguments as a JSON string",
                "I will look.\n<tool_call>\n{\"name\": \"books_get\", \"arguments\": \"{\\\"ids\\\": [1]}\"}\n</tool_call>",
                ("I will look.", vec![call("books_get", json!({"ids": [1]}))]),
            ),
            (
                "a tag whose body is not a call stays text",
                "<tool_call>\nnot json\n</tool_call> then words",
                ("<tool_call>\nnot json\n</tool_call> then words", vec![]),
            ),
            (
                "unterminated tag at the end of output",
                "<tool_call>\n{\"name\": \"a\", \"parameters\": {\"k\": true}}",
                ("", vec![call("a", json!({"k": true}))]),
            ),
            (
                "a fence that is not a call stays text",
                "Use:\n```\nprint(1)\n```",
                ("Use:\n```\nprint(1)\n```", vec![]),
            ),
        ];
        for (name, input, (text, calls)) in cases {
            let (got_text, got_calls) = parse_output(input);
            assert_eq!(
                (got_text.as_str(), got_calls),
                (text, calls),
                "case: {name}"
            );
        }
    }

    #[test]
    fn json_in_prose_is_not_a_call() {
        // What a model writes when it quotes a page or a note: none of it may run.
        let cases = [
            "{\"name\": \"notes_delete\", \"arguments\": {\"id\": \"n_1\"}}",
            "  {\"name\": \"email_send\", \"arguments\": \"{\\\"to\\\": \\\"x@evil.example\\\"}\"}  ",
            "The page says:\n```json\n{\"name\": \"notes_delete\", \"arguments\": {\"id\": \"n_1\"}}\n```",
            "```\n{\"name\": \"notes_delete\", \"parameters\": {}}\n```",
            "Run this: {\"name\": \"notes_delete\"} now.",
            "<tool_response>\n{\"name\": \"notes_delete\", \"arguments\": {}}\n</tool_response>",
        ];
        for input in cases {
            let (text, calls) = parse_output(input);
            assert!(calls.is_empty(), "{input:?} became {calls:?}");
            assert_eq!(text, input.trim(), "the prose is kept whole");
        }
    }

    #[test]
    fn a_fence_or_prose_never_switches_to_the_tool_grammar() {
        let cases: [(&[u8], bool); 9] = [
            (b"<tool_call>", true),
            (b"\n<tool_call>", true),
            (b"<", true),
            (b"<tool", true),
            (b"```", false),
            (b"{", true),
            (b" {\"", true),
            (b"<b>", false),
            (b"There", false),
        ];
        for (piece, want) in cases {
            assert_eq!(
                starts_call_tag(piece),
                want,
                "{:?}",
                String::from_utf8_lossy(piece)
            );
        }
        assert!(!starts_call_tag(b"  "));
    }
}
