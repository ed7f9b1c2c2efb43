//! A schema as a tree, the vocabulary the other parts share: which keywords hold subschemas,
//! whether an object is open or closed, and where a local reference points.
//!
//! Guarantees: nothing here recurses on the schema (walks use an explicit stack, reference
//! chains are followed a bounded number of hops), so a deeply nested or self-referring schema
//! cannot overflow the stack; [`is_closed`] says yes only when every object anywhere in the
//! schema refuses fields it does not name (`additionalProperties: false` or
//! `unevaluatedProperties: false`).
//!
//! Refuses: nothing itself. A reference that does not resolve is `None` here; the
//! declared-schema guards turn it into an error.

use serde_json::{Map, Value};

/// Keywords whose value is one subschema.
pub(super) const SUBSCHEMA_KEYWORDS: [&str; 10] = [
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
];

/// Keywords whose value maps names to subschemas.
pub(super) const SUBSCHEMA_MAP_KEYWORDS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Keywords whose value is a list of subschemas.
pub(super) const SUBSCHEMA_LIST_KEYWORDS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];

pub(super) fn is_object_schema(map: &Map<String, Value>) -> bool {
    let typed_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t.as_str() == Some("object")),
        _ => false,
    };
    typed_object || map.contains_key("properties")
}

/// An object schema is closed when it refuses fields it does not name, directly or after its
/// `allOf` members have named theirs.
pub(super) fn is_closed_object(map: &Map<String, Value>) -> bool {
    map.get("additionalProperties") == Some(&Value::Bool(false))
        || map.get("unevaluatedProperties") == Some(&Value::Bool(false))
}

/// Whether every object anywhere in `schema` is closed (says `additionalProperties: false`, or
/// `unevaluatedProperties: false`).
pub fn is_closed(schema: &Value) -> bool {
    if !schema.is_object() {
        return false;
    }
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        let Value::Object(map) = node else { continue };
        if is_object_schema(map) && !is_closed_object(map) {
            return false;
        }
        stack.extend(subschemas(map).into_iter().map(|(_, sub)| sub));
    }
    true
}

/// The subschemas directly inside a schema object, with their JSON Pointer suffixes.
pub(super) fn subschemas(map: &Map<String, Value>) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    for (key, value) in map {
        let k = escape_segment(key);
        if SUBSCHEMA_MAP_KEYWORDS.contains(&key.as_str()) {
            if let Value::Object(children) = value {
                for (name, sub) in children {
                    out.push((format!("/{k}/{}", escape_segment(name)), sub));
                }
            }
        } else if SUBSCHEMA_LIST_KEYWORDS.contains(&key.as_str())
            || (key == "items" && value.is_array())
        {
            if let Value::Array(items) = value {
                for (i, sub) in items.iter().enumerate() {
                    out.push((format!("/{k}/{i}"), sub));
                }
            }
        } else if SUBSCHEMA_KEYWORDS.contains(&key.as_str()) {
            out.push((format!("/{k}"), value));
        }
    }
    out
}

/// Escapes a JSON Pointer segment.
pub(super) fn escape_segment(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The target of a local `$ref` (`#` or `#/json/pointer`) in `root`.
pub(super) fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    match reference {
        "#" => Some(root),
        r => root.pointer(r.strip_prefix('#')?),
    }
}

/// `schema` with its local references followed (a bounded number of hops).
pub(super) fn dereference<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
    for _ in 0..16 {
        match schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| resolve_ref(root, r))
        {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema
}
