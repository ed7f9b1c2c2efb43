//! Normalization of derived schemas: what schemars emits, made plain and strict.
//!
//! Guarantees: a schema [`normalize`] accepts uses only the plain keywords small models and
//! providers handle (the assertions listed here, `uniqueItems` and annotations); an optional
//! field loses its `null` type and `null` default, an `Option<T>` wrapper
//! (`anyOf: [T, null]`) becomes `T`, an enum with documented variants (`oneOf` of `const`s)
//! becomes a plain `enum` with the variant notes in its description, width `format`s
//! (`uint32`, `double`...) go, and every object is closed.
//!
//! Refuses, with the path: a schema that is not an object, any other keyword, a `format` other
//! than `date`, `email` and `uri`, a `pattern` the `regex` crate cannot compile, and an object
//! that does not say `additionalProperties: false`.

use regex::Regex;
use serde_json::{Map, Value};

use super::SchemaError;
use super::structure::is_object_schema;

/// Numeric `format`s that schemars emits for Rust integer and float widths; bounds already
/// carry what matters to a caller.
const WIDTH_FORMATS: [&str; 12] = [
    "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float",
    "double", "int",
];

/// Formats [`validate`](super::validate) checks.
const KNOWN_FORMATS: [&str; 3] = ["date", "email", "uri"];

const ANNOTATION_KEYWORDS: [&str; 4] = ["description", "title", "examples", "default"];

const ASSERTION_KEYWORDS: [&str; 17] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "items",
    "minItems",
    "maxItems",
];

/// Makes a derived schema plain and strict: optional fields lose their `null` type (an absent
/// or null optional field is accepted by [`validate`](super::validate) anyway), width formats
/// and null defaults go, and every object must be closed.
pub fn normalize(schema: Value) -> Result<Value, SchemaError> {
    normalize_at(schema, "$")
}

fn normalize_at(schema: Value, path: &str) -> Result<Value, SchemaError> {
    let Value::Object(mut map) = schema else {
        return Err(SchemaError::Malformed {
            path: path.into(),
            reason: "a schema must be an object".into(),
        });
    };
    unwrap_optional(&mut map);
    consts_to_enum(&mut map);
    if let Some(Value::Array(types)) = map.get("type") {
        let non_null: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        let collapsed = match non_null.as_slice() {
            [single] => single.clone(),
            _ => Value::Array(non_null),
        };
        map.insert("type".into(), collapsed);
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if map.get("default").is_some_and(Value::is_null) {
        map.remove("default");
    }
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| WIDTH_FORMATS.contains(&f))
    {
        map.remove("format");
    }
    for keyword in map.keys() {
        if !ASSERTION_KEYWORDS.contains(&keyword.as_str())
            && !ANNOTATION_KEYWORDS.contains(&keyword.as_str())
            && keyword != "uniqueItems"
        {
            return Err(SchemaError::UnsupportedKeyword {
                path: path.into(),
                keyword: keyword.clone(),
            });
        }
    }
    if let Some(format) = map.get("format").and_then(Value::as_str)
        && !KNOWN_FORMATS.contains(&format)
    {
        return Err(SchemaError::UnsupportedKeyword {
            path: path.into(),
            keyword: format!("format: {format}"),
        });
    }
    if let Some(pattern) = map.get("pattern").and_then(Value::as_str)
        && Regex::new(pattern).is_err()
    {
        return Err(SchemaError::Malformed {
            path: path.into(),
            reason: format!("pattern `{pattern}` is not a valid regular expression"),
        });
    }
    if let Some(Value::Object(props)) = map.remove("properties") {
        let mut normalized = Map::new();
        for (name, sub) in props {
            let child = normalize_at(sub, &format!("{path}.{name}"))?;
            normalized.insert(name, child);
        }
        map.insert("properties".into(), Value::Object(normalized));
    }
    if let Some(items) = map.remove("items") {
        map.insert("items".into(), normalize_at(items, &format!("{path}[]"))?);
    }
    if is_object_schema(&map) && map.get("additionalProperties") != Some(&Value::Bool(false)) {
        return Err(SchemaError::OpenObject(path.into()));
    }
    Ok(Value::Object(map))
}

/// `Option<T>` of a non-primitive `T` derives as `anyOf: [T, {"type": "null"}]`: keep `T`,
/// with the outer annotations (description, default) on top.
fn unwrap_optional(map: &mut Map<String, Value>) {
    let Some(Value::Array(variants)) = map.get("anyOf") else {
        return;
    };
    let non_null: Vec<&Value> = variants
        .iter()
        .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
        .collect();
    if non_null.len() + 1 != variants.len() || non_null.len() != 1 {
        return;
    }
    let Some(Value::Object(inner)) = non_null.first().map(|v| (*v).clone()) else {
        return;
    };
    map.remove("anyOf");
    for (key, value) in inner {
        map.entry(key).or_insert(value);
    }
}

/// An enum whose variants carry doc comments derives as `oneOf` of `const`s: make it a plain
/// `enum` (what every provider and small model handles) and keep the variant notes in the
/// description.
fn consts_to_enum(map: &mut Map<String, Value>) {
    let Some(Value::Array(variants)) = map.get("oneOf") else {
        return;
    };
    if variants.is_empty() {
        return;
    }
    let mut values = Vec::new();
    let mut notes = Vec::new();
    for variant in variants {
        let constants: Vec<Value> = match (variant.get("const"), variant.get("enum")) {
            (Some(constant), None) => vec![constant.clone()],
            (None, Some(Value::Array(listed))) => listed.clone(),
            _ => return,
        };
        if let Some(note) = variant.get("description").and_then(Value::as_str) {
            let names: Vec<&str> = constants.iter().filter_map(Value::as_str).collect();
            notes.push(format!("{}: {}", names.join(", "), note));
        }
        values.extend(constants);
    }
    map.remove("oneOf");
    if values.iter().all(Value::is_string) {
        map.insert("type".into(), Value::String("string".into()));
    }
    map.insert("enum".into(), Value::Array(values));
    if !notes.is_empty() {
        let base = map
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let joined = format!("{} ({})", base.trim_end_matches('.'), notes.join("; "));
        map.insert(
            "description".into(),
            Value::String(joined.trim().to_string()),
        );
    }
}

#[cfg(test)]
#[path = "normalize_tests.rs"]
mod tests;
