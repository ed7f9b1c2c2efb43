//! Small pure helpers shared by the wire-format modules: JSON field access that never panics,
//! number formatting the providers read back exactly, and bounded excerpts of provider text for
//! error messages.
//!
//! Contract: every function here is pure and total (no I/O, no panics); none of them knows a
//! provider.

use serde_json::{Map, Value};

use crate::LlmError;

/// The most characters of a provider's body quoted in an error message.
pub(crate) const MAX_EXCERPT_CHARS: usize = 300;

/// `temperature` as the JSON number a person would write (`0.2`, not `0.20000000298023224`,
/// which is what widening the `f32` to `f64` gives).
pub(crate) fn temperature_json(temperature: f32) -> Value {
    temperature
        .to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// At most [`MAX_EXCERPT_CHARS`] characters of `text`, trimmed, marked when cut.
pub(crate) fn excerpt(text: &str) -> String {
    let trimmed = text.trim();
    let mut chars = trimmed.char_indices();
    match chars.nth(MAX_EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}… ({} bytes in all)", &trimmed[..cut], trimmed.len()),
        None => trimmed.to_string(),
    }
}

/// The object at `value`, or a decode error naming what was expected.
pub(crate) fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, LlmError> {
    value
        .as_object()
        .ok_or_else(|| LlmError::Decode(format!("{what} is not a JSON object")))
}

/// The string field `key` of `map`, or a decode error naming it.
pub(crate) fn required_str<'a>(
    map: &'a Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<&'a str, LlmError> {
    map.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| LlmError::Decode(format!("{what} has no string `{key}`")))
}

/// The string field `key` of `map`, empty when absent or not a string.
pub(crate) fn str_or_empty<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A token count at `path` inside `value`, 0 when absent or null (providers omit counts they do
/// not have).
pub(crate) fn count_at(value: &Value, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(value, |v, key| v.get(key))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// Arguments as the model wrote them: the parsed JSON when the text parses, otherwise the text
/// itself as a JSON string, so the dispatcher rejects it with a teaching error instead of the
/// whole response being lost.
pub(crate) fn arguments_from_text(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Arguments as the JSON text OpenAI formats carry: objects compact, a string kept verbatim (the
/// model's own unparseable text goes back as it wrote it).
pub(crate) fn arguments_to_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// What a model reads for a failed tool result in formats that have no `is_error` flag.
pub(crate) fn flagged_result_content(content: &str, is_error: bool) -> String {
    if is_error {
        format!("ERROR: {content}")
    } else {
        content.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prevents_float_noise_in_temperature() {
        let cases = [
            (0.2_f32, json!(0.2)),
            (0.0, json!(0.0)),
            (1.0, json!(1.0)),
            (0.7, json!(0.7)),
        ];
        for (input, want) in cases {
            assert_eq!(temperature_json(input), want, "{input}");
        }
    }

    #[test]
    fn prevents_huge_or_split_excerpts() {
        let long = "é".repeat(MAX_EXCERPT_CHARS + 10);
        let cases = [
            ("  short  ", "short".to_string()),
            (
                long.as_str(),
                format!(
                    "{}… ({} bytes in all)",
                    "é".repeat(MAX_EXCERPT_CHARS),
                    long.len()
                ),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(excerpt(input), want);
        }
    }

    #[test]
    fn prevents_losing_a_call_whose_arguments_do_not_parse() {
        let cases = [
            ("{\"a\":1}", json!({"a": 1})),
            ("", json!({})),
            ("  ", json!({})),
            ("{\"a\":", json!("{\"a\":")),
            ("not json", json!("not json")),
        ];
        for (input, want) in cases {
            assert_eq!(arguments_from_text(input), want, "{input:?}");
        }
    }

    #[test]
    fn prevents_double_encoding_unparsed_arguments() {
        let cases = [
            (json!({"a": 1, "b": "x"}), "{\"a\":1,\"b\":\"x\"}"),
            (json!("{\"a\":"), "{\"a\":"),
            (json!({}), "{}"),
        ];
        for (input, want) in cases {
            assert_eq!(arguments_to_text(&input), want);
        }
    }

    #[test]
    fn prevents_a_failed_result_reading_as_success() {
        let cases = [("boom", true, "ERROR: boom"), ("ok", false, "ok")];
        for (content, is_error, want) in cases {
            assert_eq!(flagged_result_content(content, is_error), want);
        }
    }

    #[test]
    fn prevents_panics_on_missing_counts() {
        let usage = json!({"a": {"b": 7}, "n": null});
        let cases: [(&[&str], u64); 4] = [
            (&["a", "b"], 7),
            (&["a", "c"], 0),
            (&["n"], 0),
            (&["x", "y"], 0),
        ];
        for (path, want) in cases {
            assert_eq!(count_at(&usage, path), want, "{path:?}");
        }
    }
}
