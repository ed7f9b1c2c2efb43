//! Canonical JSON and digests.
//!
//! Guarantees: `canonical_json` is deterministic (object keys sorted by code point, no
//! insignificant whitespace), whatever order the value was built in, so hashes of arguments and
//! catalogues are stable across runs, processes and `serde_json` feature flags.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Serializes `value` with object keys sorted at every depth and no whitespace.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*key).clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(*key) {
                    write_canonical(v, out);
                }
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
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// SHA-256 over a sequence of parts, each length-prefixed so that ("ab","c") != ("a","bc").
pub fn digest_parts(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let mut hex = String::with_capacity(64);
    for byte in hasher.finalize() {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
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
}
