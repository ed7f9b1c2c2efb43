//! JSON written the way Python's `json.dumps(x, ensure_ascii=False)` writes it, which is what
//! Hugging Face chat templates' `tojson` produces: `", "` and `": "` separators, keys in their
//! given order, no HTML escaping. Rendering the template exactly as the model was trained on
//! it matters more than compactness.

use serde_json::Value;

pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matches_python_separators_and_keeps_key_order() {
        let v = json!({"type": "function", "function": {"name": "a", "b": [1, 2.5, null, true], "q": "it's <x>"}});
        assert_eq!(
            dumps(&v),
            r#"{"type": "function", "function": {"name": "a", "b": [1, 2.5, null, true], "q": "it's <x>"}}"#
        );
    }
}
