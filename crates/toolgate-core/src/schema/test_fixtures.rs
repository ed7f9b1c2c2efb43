//! Schemas the schema tests share.

use serde_json::{Value, json};

use super::normalize;

/// A derived-style schema with one field of each kind the validator words differently.
pub(super) fn search_schema() -> Value {
    normalize(json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["query"],
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 100},
            "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 1, "maximum": 50, "default": null},
            "format": {"type": ["string", "null"], "enum": ["concise", "detailed", null]},
            "ids": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 3, "uniqueItems": true},
            "due": {"type": "string", "format": "date"},
            "filters": {"type": "object", "additionalProperties": false, "properties": {"year": {"type": "integer"}}}
        }
    }))
    .unwrap()
}
