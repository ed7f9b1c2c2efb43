//! Canonical JSON and digests.
//!
//! Guarantees: `canonical_json` is deterministic (object keys sorted by code point, no
//! insignificant whitespace), whatever order the value was built in, so hashes of arguments and
//! catalogues are stable across runs, processes and `serde_json` feature flags.

use std::fmt::Write as _;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Serializes `value` with object keys sorted at every depth and no whitespace.
///
/// Strings are escaped and numbers written exactly as `serde_json` writes them, so for a value
/// whose keys are already sorted the result equals `value.to_string()`.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::with_capacity(64);
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(key, out);
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::String(s) => write_json_string(s, out),
        // `Number`'s `Display` is the text `serde_json` serializes; writing to a `String`
        // cannot fail.
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Null => out.push_str("null"),
    }
}

/// Writes `text` as a JSON string literal with `serde_json`'s escapes: `\"`, `\\`, `\b`,
/// `\f`, `\n`, `\r`, `\t`, other control characters as `\u00xx`, everything else as is.
fn write_json_string(text: &str, out: &mut String) {
    out.push('"');
    let mut start = 0;
    for (i, byte) in text.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Every byte escaped is ASCII, so `i` is a character boundary.
        out.push_str(&text[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// Lower-case hex of `bytes`.
fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    hex
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    to_hex(&Sha256::digest(bytes))
}

/// SHA-256 over a sequence of parts, each length-prefixed so that ("ab","c") != ("a","bc").
pub fn digest_parts(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    to_hex(&hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_canonical_form() {
        let a = json!({"b": 1, "a": {"y": [1, {"d": 2, "c": 3}], "x": null}});
        let mut built = serde_json::Map::new();
        built.insert("a".into(), json!({"x": null, "y": [1, {"c": 3, "d": 2}]}));
        built.insert("b".into(), json!(1));
        assert_eq!(canonical_json(&a), canonical_json(&Value::Object(built)));
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":null,"y":[1,{"c":3,"d":2}]},"b":1}"#
        );
    }

    #[test]
    fn strings_are_escaped_in_the_canonical_form() {
        assert_eq!(canonical_json(&json!({"k\"": "a\nb"})), r#"{"k\"":"a\nb"}"#);
    }

    #[test]
    fn length_prefix_keeps_part_boundaries_apart() {
        assert_ne!(digest_parts(&["ab", "c"]), digest_parts(&["a", "bc"]));
        assert_eq!(digest_parts(&["a"]).len(), 64);
    }

    #[test]
    fn canonical_form_of_sorted_value_equals_serde_json_text() {
        // Escapes and numbers must be serde_json's, or hashes change between versions of this
        // function.
        let controls: String = (0u8..0x20).map(char::from).collect();
        let cases = [
            json!(null),
            json!([
                true,
                false,
                0,
                -1,
                u64::MAX,
                i64::MIN,
                1.5,
                1e300,
                -0.000123
            ]),
            json!({"a": controls, "b": "quote \" backslash \\ del \u{7f} é ✓ 🦀", "c": ""}),
            json!({"a": {"b": [{"c": 1}], "d": {}}, "e": []}),
        ];
        for value in cases {
            assert_eq!(canonical_json(&value), value.to_string(), "{value}");
        }
    }

    #[test]
    fn hex_digests_are_lower_case_sha256() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let expected: String = Sha256::digest(b"abc")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sha256_hex(b"abc"), expected);
    }
}
