//! Closed JSON Schemas: derivation from Rust types, normalization, and validation.
//!
//! Guarantees: a schema accepted by [`normalize`] uses only the keywords [`validate`] enforces,
//! and every object in it is closed (`additionalProperties: false`); anything else is refused at
//! registration, so no keyword is ever silently unenforced. [`validate`] is pure and reports every
//! violation with its path, what was expected and what was received.

use regex::Regex;
use serde_json::{Map, Value};

/// Why a schema cannot serve as a tool's input contract.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    #[error("object at `{0}` is open: it must say \"additionalProperties\": false")]
    OpenObject(String),
    #[error("keyword `{keyword}` at `{path}` is not supported by the validator")]
    UnsupportedKeyword { path: String, keyword: String },
    #[error("schema at `{path}` is malformed: {reason}")]
    Malformed { path: String, reason: String },
}

/// The input schema of `T`, derived with schemars, normalized and checked closed.
pub fn schema_for<T: schemars::JsonSchema>() -> Result<Value, SchemaError> {
    let generated = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = generated.to_value();
    if let Value::Object(root) = &mut value {
        // The tool's own description says what the arguments are for; the Rust type name and
        // doc comment of the argument struct are not part of the contract.
        root.remove("title");
        root.remove("description");
    }
    normalize(value)
}

/// Numeric `format`s that schemars emits for Rust integer and float widths; bounds already
/// carry what matters to a caller.
const WIDTH_FORMATS: [&str; 12] = [
    "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float",
    "double", "int",
];

/// Formats [`validate`] checks.
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
/// or null optional field is accepted by [`validate`] anyway), width formats and null defaults
/// go, and every object must be closed.
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

fn is_object_schema(map: &Map<String, Value>) -> bool {
    map.get("type").and_then(Value::as_str) == Some("object") || map.contains_key("properties")
}

/// Whether every object anywhere in `schema` is closed.
pub fn is_closed(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return false;
    };
    if is_object_schema(map) && map.get("additionalProperties") != Some(&Value::Bool(false)) {
        return false;
    }
    let props_closed = match map.get("properties") {
        Some(Value::Object(props)) => props.values().all(is_closed),
        _ => true,
    };
    let items_closed = map.get("items").is_none_or(is_closed);
    props_closed && items_closed
}

/// One way a value fails its schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// JSON path of the offending value (`$` is the whole argument object).
    pub path: String,
    pub kind: ViolationKind,
    /// What the schema asks for at that path, in words.
    pub expected: String,
    /// The offending value (`None` when the field is missing).
    pub received: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViolationKind {
    UnknownField,
    MissingField,
    WrongType,
    NotInEnum,
    OutOfRange,
    BadLength,
    PatternMismatch,
    BadFormat,
    DuplicateItems,
}

/// Checks `value` against a normalized schema; returns every violation found.
pub fn validate(schema: &Value, value: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    validate_at(schema, value, "$", &mut out);
    out
}

fn validate_at(schema: &Value, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let Value::Object(s) = schema else { return };
    if let Some(expected_type) = s.get("type")
        && !type_matches(expected_type, value)
    {
        out.push(Violation {
            path: path.into(),
            kind: ViolationKind::WrongType,
            expected: describe(schema),
            received: Some(value.clone()),
        });
        return;
    }
    if let Some(Value::Array(allowed)) = s.get("enum")
        && !allowed.contains(value)
    {
        out.push(violation(path, ViolationKind::NotInEnum, schema, value));
    }
    if let Some(constant) = s.get("const")
        && constant != value
    {
        out.push(violation(path, ViolationKind::NotInEnum, schema, value));
    }
    match value {
        Value::Number(n) => {
            if let Some(x) = n.as_f64()
                && !in_range(s, x)
            {
                out.push(violation(path, ViolationKind::OutOfRange, schema, value));
            }
        }
        Value::String(text) => check_string(s, schema, text, path, out),
        Value::Array(items) => check_array(s, schema, items, path, out),
        Value::Object(fields) => check_object(s, fields, path, out),
        Value::Null | Value::Bool(_) => {}
    }
}

fn violation(path: &str, kind: ViolationKind, schema: &Value, value: &Value) -> Violation {
    Violation {
        path: path.into(),
        kind,
        expected: describe(schema),
        received: Some(value.clone()),
    }
}

fn check_string(
    s: &Map<String, Value>,
    schema: &Value,
    text: &str,
    path: &str,
    out: &mut Vec<Violation>,
) {
    let len = text.chars().count() as u64;
    let too_short = s
        .get("minLength")
        .and_then(Value::as_u64)
        .is_some_and(|m| len < m);
    let too_long = s
        .get("maxLength")
        .and_then(Value::as_u64)
        .is_some_and(|m| len > m);
    let value = Value::String(text.into());
    if too_short || too_long {
        out.push(violation(path, ViolationKind::BadLength, schema, &value));
    }
    if let Some(pattern) = s.get("pattern").and_then(Value::as_str) {
        // normalize() refused invalid patterns, so a failure here means a schema that skipped
        // normalization: refuse the value rather than let it through unchecked.
        let ok = Regex::new(pattern).is_ok_and(|re| re.is_match(text));
        if !ok {
            out.push(violation(
                path,
                ViolationKind::PatternMismatch,
                schema,
                &value,
            ));
        }
    }
    if let Some(format) = s.get("format").and_then(Value::as_str)
        && !format_matches(format, text)
    {
        out.push(violation(path, ViolationKind::BadFormat, schema, &value));
    }
}

fn check_array(
    s: &Map<String, Value>,
    schema: &Value,
    items: &[Value],
    path: &str,
    out: &mut Vec<Violation>,
) {
    let len = items.len() as u64;
    let too_few = s
        .get("minItems")
        .and_then(Value::as_u64)
        .is_some_and(|m| len < m);
    let too_many = s
        .get("maxItems")
        .and_then(Value::as_u64)
        .is_some_and(|m| len > m);
    if too_few || too_many {
        out.push(violation(
            path,
            ViolationKind::BadLength,
            schema,
            &Value::Array(items.to_vec()),
        ));
    }
    if s.get("uniqueItems") == Some(&Value::Bool(true)) {
        let mut seen = std::collections::HashSet::new();
        if !items.iter().all(|item| seen.insert(item.to_string())) {
            out.push(violation(
                path,
                ViolationKind::DuplicateItems,
                schema,
                &Value::Array(items.to_vec()),
            ));
        }
    }
    if let Some(item_schema) = s.get("items") {
        for (i, item) in items.iter().enumerate() {
            validate_at(item_schema, item, &format!("{path}[{i}]"), out);
        }
    }
}

fn check_object(
    s: &Map<String, Value>,
    fields: &Map<String, Value>,
    path: &str,
    out: &mut Vec<Violation>,
) {
    let empty = Map::new();
    let props = s
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let closed = s.get("additionalProperties") == Some(&Value::Bool(false));
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for name in &required {
        if fields.get(*name).is_none_or(Value::is_null) {
            out.push(Violation {
                path: join(path, name),
                kind: ViolationKind::MissingField,
                expected: props.get(*name).map(describe).unwrap_or_default(),
                received: None,
            });
        }
    }
    for (name, field_value) in fields {
        match props.get(name) {
            // A null field is absent: reported above when required, accepted when optional.
            Some(_) if field_value.is_null() => {}
            Some(sub) => validate_at(sub, field_value, &join(path, name), out),
            None if closed || !s.contains_key("additionalProperties") => {
                let mut allowed: Vec<&str> = props.keys().map(String::as_str).collect();
                allowed.sort_unstable();
                out.push(Violation {
                    path: join(path, name),
                    kind: ViolationKind::UnknownField,
                    expected: format!("one of the fields: {}", allowed.join(", ")),
                    received: Some(field_value.clone()),
                });
            }
            None => {}
        }
    }
}

fn join(path: &str, name: &str) -> String {
    if path == "$" {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn type_matches(expected: &Value, value: &Value) -> bool {
    match expected {
        Value::String(t) => single_type_matches(t, value),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .any(|t| single_type_matches(t, value)),
        _ => false,
    }
}

fn single_type_matches(t: &str, value: &Value) -> bool {
    match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => match value {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        _ => false,
    }
}

fn in_range(s: &Map<String, Value>, x: f64) -> bool {
    let bound = |k: &str| s.get(k).and_then(Value::as_f64);
    bound("minimum").is_none_or(|m| x >= m)
        && bound("maximum").is_none_or(|m| x <= m)
        && bound("exclusiveMinimum").is_none_or(|m| x > m)
        && bound("exclusiveMaximum").is_none_or(|m| x < m)
}

/// Whether `text` is a calendar date written `YYYY-MM-DD`.
pub fn is_iso_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = text.get(r)?;
        if part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days_in_month).contains(&day)
}

fn format_matches(format: &str, text: &str) -> bool {
    match format {
        "date" => is_iso_date(text),
        "email" => {
            let mut parts = text.split('@');
            matches!((parts.next(), parts.next(), parts.next()),
                (Some(local), Some(domain), None)
                    if !local.is_empty() && domain.contains('.') && !domain.starts_with('.')
                        && !domain.ends_with('.') && !text.chars().any(char::is_whitespace))
        }
        "uri" => text.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.is_empty()
                && !text.chars().any(char::is_whitespace)
        }),
        // normalize() refuses other formats; refuse values rather than pass them unchecked.
        _ => false,
    }
}

/// What a schema accepts, in a short phrase for error messages.
pub fn describe(schema: &Value) -> String {
    let Value::Object(s) = schema else {
        return "a value".into();
    };
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
        facts.push(format!("each {}", describe(items)));
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

/// Edit distance, for "did you mean" suggestions on field and tool names.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut row = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = prev[j] + usize::from(ca != *cb);
            row[j + 1] = substitution.min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    prev[b.len()]
}

/// The candidates closest to `wanted` (at most `n`), nearest first; ties by name.
pub fn closest<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    n: usize,
) -> Vec<&'a str> {
    let wanted_lower = wanted.to_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| {
            let lower = c.to_lowercase();
            let mut d = edit_distance(&wanted_lower, &lower);
            if lower.contains(&wanted_lower) || wanted_lower.contains(&lower) {
                d = d.min(1);
            }
            (d, c)
        })
        .collect();
    scored.sort();
    let limit = wanted.chars().count().max(3);
    scored
        .into_iter()
        .filter(|(d, _)| *d <= limit)
        .take(n)
        .map(|(_, c)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn search_schema() -> Value {
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

    fn kinds(args: Value) -> Vec<(String, ViolationKind)> {
        validate(&search_schema(), &args)
            .into_iter()
            .map(|v| (v.path, v.kind))
            .collect()
    }

    /// (case, arguments, expected (path, kind) violations)
    type ValidationCase = (&'static str, Value, Vec<(&'static str, ViolationKind)>);

    #[test]
    fn validation_table() {
        use ViolationKind::*;
        let cases: Vec<ValidationCase> = vec![
            ("valid minimal call passes", json!({"query": "x"}), vec![]),
            (
                "optional null is treated as absent",
                json!({"query": "x", "limit": null}),
                vec![],
            ),
            (
                "unknown field is rejected",
                json!({"query": "x", "lmit": 3}),
                vec![("lmit", UnknownField)],
            ),
            (
                "unknown nested field is rejected",
                json!({"query": "x", "filters": {"yr": 1}}),
                vec![("filters.yr", UnknownField)],
            ),
            (
                "missing required field is rejected",
                json!({}),
                vec![("query", MissingField)],
            ),
            (
                "null for a required field is missing",
                json!({"query": null}),
                vec![("query", MissingField)],
            ),
            (
                "wrong enum value is rejected",
                json!({"query": "x", "format": "full"}),
                vec![("format", NotInEnum)],
            ),
            (
                "string for integer is rejected",
                json!({"query": "x", "limit": "5"}),
                vec![("limit", WrongType)],
            ),
            (
                "fractional integer is rejected",
                json!({"query": "x", "limit": 2.5}),
                vec![("limit", WrongType)],
            ),
            (
                "integer above maximum is rejected",
                json!({"query": "x", "limit": 51}),
                vec![("limit", OutOfRange)],
            ),
            (
                "empty string below minLength is rejected",
                json!({"query": ""}),
                vec![("query", BadLength)],
            ),
            (
                "too many items are rejected",
                json!({"query": "x", "ids": [1, 2, 3, 4]}),
                vec![("ids", BadLength)],
            ),
            (
                "duplicate items are rejected",
                json!({"query": "x", "ids": [1, 1]}),
                vec![("ids", DuplicateItems)],
            ),
            (
                "bad item is reported with its index",
                json!({"query": "x", "ids": [1, 0]}),
                vec![("ids[1]", OutOfRange)],
            ),
            (
                "relative date is rejected",
                json!({"query": "x", "due": "Friday"}),
                vec![("due", BadFormat)],
            ),
            (
                "impossible date is rejected",
                json!({"query": "x", "due": "2026-02-30"}),
                vec![("due", BadFormat)],
            ),
            (
                "non-object arguments are rejected",
                json!([1]),
                vec![("$", WrongType)],
            ),
        ];
        for (name, args, expected) in cases {
            let expected: Vec<(String, ViolationKind)> = expected
                .into_iter()
                .map(|(p, k)| (p.to_string(), k))
                .collect();
            assert_eq!(kinds(args), expected, "case: {name}");
        }
    }

    #[test]
    fn normalization_table() {
        let cases: Vec<(&str, Value, Result<(), &str>)> = vec![
            (
                "open object is refused",
                json!({"type": "object", "properties": {}}),
                Err("open"),
            ),
            (
                "nested open object is refused",
                json!({"type": "object", "additionalProperties": false, "properties": {"f": {"type": "object"}}}),
                Err("open"),
            ),
            (
                "unsupported keyword is refused",
                json!({"type": "object", "additionalProperties": false, "oneOf": []}),
                Err("oneOf"),
            ),
            (
                "unknown format is refused",
                json!({"type": "string", "format": "ipv4"}),
                Err("ipv4"),
            ),
            (
                "invalid pattern is refused",
                json!({"type": "string", "pattern": "("}),
                Err("pattern"),
            ),
            (
                "closed object is accepted",
                json!({"type": "object", "additionalProperties": false, "properties": {"a": {"type": "string"}}}),
                Ok(()),
            ),
        ];
        for (name, schema, expected) in cases {
            match (normalize(schema), expected) {
                (Ok(s), Ok(())) => assert!(is_closed(&s), "case: {name}"),
                (Err(e), Err(fragment)) => {
                    assert!(e.to_string().contains(fragment), "case: {name}: {e}")
                }
                (got, want) => panic!("case {name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn optional_enum_with_variant_notes_becomes_a_plain_enum() {
        let derived = json!({
            "description": "Reading status.",
            "anyOf": [
                {"oneOf": [
                    {"type": "string", "enum": ["reading", "read"]},
                    {"type": "string", "const": "none", "description": "No status set."}
                ]},
                {"type": "null"}
            ]
        });
        assert_eq!(
            normalize(derived).unwrap(),
            json!({"description": "Reading status (none: No status set.)", "type": "string", "enum": ["reading", "read", "none"]})
        );
    }

    #[test]
    fn normalization_drops_null_types_and_width_formats() {
        let s = search_schema();
        assert_eq!(
            s["properties"]["limit"],
            json!({"type": "integer", "minimum": 1, "maximum": 50})
        );
        assert_eq!(
            s["properties"]["format"]["enum"],
            json!(["concise", "detailed"])
        );
    }

    #[test]
    fn expected_text_lists_allowed_enum_values() {
        let v = validate(&search_schema(), &json!({"query": "x", "format": "full"}));
        assert_eq!(v[0].expected, r#"one of "concise", "detailed""#);
        assert_eq!(v[0].received, Some(json!("full")));
    }

    #[test]
    fn iso_date_table() {
        for (text, ok) in [
            ("2026-11-29", true),
            ("2024-02-29", true),
            ("2023-02-29", false),
            ("2026-13-01", false),
            ("2026-1-01", false),
            ("tomorrow", false),
            ("2026-11-29T00:00", false),
            ("２０２６-11-29", false),
        ] {
            assert_eq!(is_iso_date(text), ok, "{text}");
        }
    }

    #[test]
    fn closest_names_prefers_near_misses() {
        let names = ["books_search", "books_get", "books_tag", "books_set_status"];
        assert_eq!(
            closest("book_search", names, 2),
            ["books_search", "books_get"]
        );
        assert_eq!(closest("search", names, 1), ["books_search"]);
        assert!(closest("zz", names, 3).is_empty());
    }
}
