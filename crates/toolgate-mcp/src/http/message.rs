//! What the front reads of a POST body before rmcp does: the JSON-RPC id, method and tool
//! ([`peek`]), and whether rmcp could parse it at all ([`unreadable`]).
//!
//! Guarantees: only the fields the front needs are built (the rest is skipped); a body that is
//! not UTF-8 or nests deeper than rmcp's parser goes is named before rmcp sees it; a batch
//! (an array) is not read as a message.

use bytes::Bytes;
use serde_json::Value;

/// The JSON-RPC id of the request a response answers: read already, or still in its body
/// (read only if an error or a timeout must name it).
pub(super) enum RequestId {
    Known(Value),
    InBody(Bytes),
}

impl RequestId {
    /// The id (null for a notification, or a body that is not a JSON-RPC message).
    pub(super) fn value(&self) -> Value {
        match self {
            RequestId::Known(id) => id.clone(),
            RequestId::InBody(body) => peek(body).map_or(Value::Null, |p| p.id),
        }
    }
}

/// What the front reads of a POST body.
#[derive(Debug, PartialEq)]
pub(super) struct Peeked {
    /// The JSON-RPC id (null for a notification or anything else that is JSON).
    pub(super) id: Value,
    /// The JSON-RPC method, when it is a string.
    pub(super) method: Option<String>,
    /// For a `tools/call`, the tool it names.
    pub(super) tool: Option<String>,
}

/// What the single JSON-RPC message in `body` is ([`Peeked`]), or why `body` is not JSON. Only
/// these are built; the rest is skipped.
pub(super) fn peek(body: &[u8]) -> Result<Peeked, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(default)]
        name: Option<Value>,
    }
    #[derive(serde::Deserialize)]
    struct Message {
        #[serde(default)]
        id: Option<Value>,
        #[serde(default)]
        method: Option<Value>,
        #[serde(default)]
        params: Option<Params>,
    }
    // serde reads a struct from an array too, so only an object is read as a message.
    let is_object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    match is_object.then(|| serde_json::from_slice::<Message>(body)) {
        Some(Ok(message)) => {
            let method = message
                .method
                .as_ref()
                .and_then(Value::as_str)
                .map(str::to_string);
            let calls = method.as_deref() == Some("tools/call");
            let tool = message
                .params
                .and_then(|p| p.name)
                .and_then(|n| n.as_str().map(str::to_string))
                .filter(|_| calls);
            Ok(Peeked {
                id: message.id.unwrap_or(Value::Null),
                method,
                tool,
            })
        }
        _ => serde_json::from_slice::<serde::de::IgnoredAny>(body).map(|_| Peeked {
            id: Value::Null,
            method: None,
            tool: None,
        }),
    }
}

/// Why `body` cannot be parsed as rmcp parses it, beyond not being JSON: it is not UTF-8
/// (serde_json skips the bytes of a string it does not keep), or it nests deeper than rmcp's
/// parser goes.
pub(super) fn unreadable(body: &[u8]) -> Option<String> {
    if let Err(e) = std::str::from_utf8(body) {
        return Some(format!("the body is not UTF-8 ({e})"));
    }
    crate::stdio::nests_deeper_than(body, crate::stdio::MAX_NESTING).then(|| {
        format!(
            "the body nests arrays and objects deeper than {} levels",
            crate::stdio::MAX_NESTING
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_body_is_refused_as_not_json_only_when_it_is_not() {
        let cases: [(&[u8], Option<Value>); 7] = [
            (
                br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
                Some(json!(7)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#,
                Some(json!("a")),
            ),
            (
                br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                Some(Value::Null),
            ),
            (
                br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                Some(Value::Null),
            ),
            (br#"42"#, Some(Value::Null)),
            (br#"{"jsonrpc": "2.0", "#, None),
            (b"\xff\xfe", None),
        ];
        for (body, id) in cases {
            assert_eq!(
                peek(body).ok().map(|p| p.id),
                id,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn bodies_rmcp_cannot_parse_are_named_before_it_sees_them() {
        let deep = format!("{}{}", "[".repeat(101), "]".repeat(101));
        let text = format!("{{\"x\":\"{}\"}}", "[".repeat(500));
        let cases: [(&[u8], Option<&str>); 4] = [
            (br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, None),
            (b"{\"x\":\"\xff\xfe\"}", Some("not UTF-8")),
            (deep.as_bytes(), Some("deeper than 100")),
            // Brackets inside strings are text, not nesting.
            (text.as_bytes(), None),
        ];
        for (body, why) in cases {
            let got = unreadable(body);
            assert_eq!(
                got.is_some(),
                why.is_some(),
                "{}: {got:?}",
                String::from_utf8_lossy(body)
            );
            if let (Some(got), Some(why)) = (got, why) {
                assert!(got.contains(why), "{got}");
            }
        }
    }

    #[test]
    fn only_a_tools_call_names_a_tool_for_the_scope_check() {
        let cases: [(&[u8], Option<&str>); 5] = [
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes_delete"}}"#,
                Some("notes_delete"),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"x"}}"#,
                None,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#,
                None,
            ),
            (br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, None),
            (
                br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}]"#,
                None,
            ),
        ];
        let listed = peek(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
        assert_eq!(listed.method.as_deref(), Some("tools/list"));
        assert_eq!(peek(b"[1]").unwrap().method, None);
        for (body, tool) in cases {
            let peeked = peek(body).unwrap();
            assert_eq!(
                peeked.tool.as_deref(),
                tool,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
