//! A schema in words, for error messages: what it accepts in a short phrase ("an integer (from
//! 1 to 50)", "one of: (1) an object {kind: \"circle\", radius: a number}; (2) ..."), and the
//! field names an object allows, for "did you mean" hints.
//!
//! Guarantees: descriptions follow local references (a bounded number of hops) and stop
//! nesting after a few levels with "a value", so a recursive schema still gets a finite
//! phrase; field lists look through `allOf`/`anyOf`/`oneOf` and array items.
//!
//! Refuses: nothing. What it cannot describe is "a value"; a path it cannot follow has no
//! fields.

use serde_json::Value;

use super::structure::dereference;

/// What a schema accepts, in a short phrase for error messages.
pub fn describe(schema: &Value) -> String {
    describe_at(schema, schema, 0)
}

/// [`describe`] for a subschema of `root`, following local references and listing the
/// alternatives of a `oneOf`/`anyOf`.
pub fn describe_in(root: &Value, schema: &Value) -> String {
    describe_at(root, schema, 0)
}

/// How deep descriptions nest before they say "a value" (references can be recursive).
const DESCRIBE_DEPTH: usize = 4;

fn describe_at(root: &Value, schema: &Value, depth: usize) -> String {
    let schema = dereference(root, schema);
    let Value::Object(s) = schema else {
        return "a value".into();
    };
    if depth > DESCRIBE_DEPTH {
        return "a value".into();
    }
    if s.get("oneOf")
        .or_else(|| s.get("anyOf"))
        .is_some_and(Value::is_array)
    {
        return alternatives_at(root, schema, depth + 1);
    }
    if let Some(Value::Array(members)) = s.get("allOf") {
        let all: Vec<String> = members
            .iter()
            .map(|m| describe_shape(root, m, depth + 1))
            .collect();
        return format!("all of: {}", all.join(" and "));
    }
    if let Some(Value::Array(allowed)) = s.get("enum") {
        let names: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return format!("one of {}", names.join(", "));
    }
    if let Some(constant) = s.get("const") {
        return format!("exactly {constant}");
    }
    let base = match s.get("type") {
        Some(Value::String(t)) => article(t),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(article)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "a value".into(),
    };
    let mut facts = Vec::new();
    let num = |k: &str| s.get(k).map(Value::to_string);
    match (num("minimum"), num("maximum")) {
        (Some(lo), Some(hi)) => facts.push(format!("from {lo} to {hi}")),
        (Some(lo), None) => facts.push(format!("at least {lo}")),
        (None, Some(hi)) => facts.push(format!("at most {hi}")),
        (None, None) => {}
    }
    match (num("minLength"), num("maxLength")) {
        (Some(lo), Some(hi)) => facts.push(format!("{lo} to {hi} characters")),
        (Some(lo), None) => facts.push(format!("at least {lo} characters")),
        (None, Some(hi)) => facts.push(format!("at most {hi} characters")),
        (None, None) => {}
    }
    match (num("minItems"), num("maxItems")) {
        (Some(lo), Some(hi)) => facts.push(format!("{lo} to {hi} items")),
        (Some(lo), None) => facts.push(format!("at least {lo} items")),
        (None, Some(hi)) => facts.push(format!("at most {hi} items")),
        (None, None) => {}
    }
    if s.get("uniqueItems") == Some(&Value::Bool(true)) {
        facts.push("no duplicates".into());
    }
    if let Some(items) = s.get("items") {
        facts.push(format!("each {}", describe_at(root, items, depth + 1)));
    }
    if let Some(format) = s.get("format").and_then(Value::as_str) {
        facts.push(match format {
            "date" => "a date written YYYY-MM-DD".into(),
            other => format!("in {other} format"),
        });
    }
    if let Some(pattern) = s.get("pattern").and_then(Value::as_str) {
        facts.push(format!("matching /{pattern}/"));
    }
    if facts.is_empty() {
        base
    } else {
        format!("{base} ({})", facts.join(", "))
    }
}

fn article(t: &str) -> String {
    match t {
        "integer" | "array" | "object" => format!("an {t}"),
        other => format!("a {other}"),
    }
}

/// The alternatives of a `oneOf`/`anyOf`, numbered, each in a short phrase.
pub(super) fn alternatives(root: &Value, schema: &Value) -> String {
    alternatives_at(root, schema, 0)
}

fn alternatives_at(root: &Value, schema: &Value, depth: usize) -> String {
    let members = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array);
    let Some(members) = members else {
        return describe_at(root, schema, depth);
    };
    let listed: Vec<String> = members
        .iter()
        .enumerate()
        .map(|(i, m)| format!("({}) {}", i + 1, describe_shape(root, m, depth + 1)))
        .collect();
    format!("one of: {}", listed.join("; "))
}

/// An alternative in a phrase: an object by its fields (constants shown), anything else as
/// [`describe`] says it.
fn describe_shape(root: &Value, schema: &Value, depth: usize) -> String {
    let schema = dereference(root, schema);
    let Some(Value::Object(props)) = schema.get("properties") else {
        return describe_at(root, schema, depth);
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = props
        .iter()
        .map(|(name, field)| {
            let field = dereference(root, field);
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            match field.get("const") {
                Some(constant) => format!("{name}{optional}: {constant}"),
                None => format!("{name}{optional}: {}", describe_at(root, field, depth + 1)),
            }
        })
        .collect();
    format!("an object {{{}}}", fields.join(", "))
}

/// The field names an object schema allows, through references and composition.
pub(super) fn fields_of(root: &Value, schema: &Value) -> Vec<String> {
    let mut names = Vec::new();
    let mut stack = vec![(schema, 0)];
    while let Some((node, depth)) = stack.pop() {
        let node = dereference(root, node);
        if let Some(Value::Object(props)) = node.get("properties") {
            for name in props.keys() {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        if depth < 8 {
            for keyword in ["allOf", "anyOf", "oneOf"] {
                if let Some(Value::Array(members)) = node.get(keyword) {
                    stack.extend(members.iter().map(|m| (m, depth + 1)));
                }
            }
        }
    }
    names
}

/// The fields allowed next to the field at `path` (`filters.yr` → the fields of `filters`),
/// through references, composition and array items.
pub fn fields_at(schema: &Value, path: &str) -> Vec<String> {
    let mut cursor = schema;
    let parts: Vec<&str> = path.split('.').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        let name = part.split('[').next().unwrap_or(part);
        let holder = dereference(schema, cursor);
        let next = std::iter::once(holder)
            .chain(["allOf", "anyOf", "oneOf"].iter().flat_map(|k| {
                holder
                    .get(*k)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            }))
            .map(|s| dereference(schema, s))
            .find_map(|s| s.get("properties").and_then(|p| p.get(name)));
        let Some(next) = next else { return Vec::new() };
        cursor = dereference(schema, next);
        for _ in 0..part.matches('[').count() {
            cursor = dereference(schema, cursor.get("items").unwrap_or(cursor));
        }
    }
    fields_of(schema, cursor)
}
