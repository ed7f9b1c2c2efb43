//! Reads tool calls out of a local model's text, tolerantly: `<tool_call>` tags (what the
//! grammar produces), ```json fences, or a bare JSON object, with `arguments` as an object or
//! as a JSON string. What is not a call stays text.

use serde_json::Value;

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
    loop {
        let tag = rest
            .find("<tool_call>")
            .map(|i| (i, "<tool_call>", "</tool_call>"));
        let fence = rest.find("```").map(|i| (i, "```", "```"));
        let next = match (tag, fence) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        let Some((start, open, close)) = next else {
            text.push_str(rest);
            break;
        };
        let after_open = &rest[start + open.len()..];
        let (inner, consumed, remainder) = match after_open.find(close) {
            Some(end) => (
                &after_open[..end],
                end + close.len(),
                &after_open[end + close.len()..],
            ),
            None => (after_open, after_open.len(), ""),
        };
        let body = if open == "```" {
            strip_fence_language(inner)
        } else {
            inner
        };
        match call_from_json(body.trim()) {
            Some(call) => {
                text.push_str(&rest[..start]);
                calls.push(call);
            }
            None => text.push_str(&rest[..start + open.len() + consumed]),
        }
        rest = remainder;
    }
    if calls.is_empty()
        && let Some(call) = call_from_json(text.trim())
    {
        return (String::new(), vec![call]);
    }
    (text.trim().to_string(), calls)
}

fn strip_fence_language(inner: &str) -> &str {
    match inner.split_once('\n') {
        Some((first, body)) if !first.trim_start().starts_with('{') => body,
        _ => inner,
    }
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
                "fenced call with a language tag",
                "I will search.\n```json\n{\"name\": \"books_search\", \"arguments\": {\"title\": \"Dune\"}}\n```",
                (
                    "I will search.",
                    vec![call("books_search", json!({"title": "Dune"}))],
                ),
            ),
            (
                "bare json call",
                "{\"name\": \"books_get\", \"arguments\": \"{\\\"ids\\\": [1]}\"}",
                ("", vec![call("books_get", json!({"ids": [1]}))]),
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
}
