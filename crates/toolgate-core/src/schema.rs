//! Tool input schemas: derivation from Rust types, normalization, checks on declared
//! (runtime) schemas, and validation with the `jsonschema` crate, compiled once per tool.
//!
//! Guarantees:
//! - A derived schema accepted by [`normalize`] uses only the plain keywords small models and
//!   providers handle, and every object in it is closed (`additionalProperties: false`).
//! - A declared schema ([`check_declared`], used by `ToolBuilder::from_schema`) is refused,
//!   before the validator sees it and without recursion, when it is larger than
//!   [`MAX_SCHEMA_BYTES`], nests deeper than [`MAX_SCHEMA_DEPTH`], expands through its
//!   references to more than [`MAX_EXPANDED_SUBSCHEMAS`] subschemas, loops through references
//!   without descending into the value, refers outside itself (`$ref` other than `#` or
//!   `#/...`, a `$schema` the validator does not bundle), or leaves an object open (unless the
//!   tool opts in). Nothing is ever fetched: the validator's retriever refuses every URI.
//! - Keyword allowlist: kept for declared schemas too. The validator enforces every standard
//!   keyword, but it silently ignores keywords it does not know (a misspelled `minLenght`, a
//!   vendor extension, `$dynamicRef` we do not support), and an ignored keyword is a constraint
//!   the schema's author believes in that nobody checks; so anything outside the 2020-12
//!   assertions, applicators, local references and annotations is refused, and an unknown
//!   `format` is refused by the validator. `pattern`s use the linear-time `regex` engine.
//! - [`CompiledSchema::validate`] is pure, costs one pass of the compiled validator for a valid
//!   value, and reports every violation with its path (`filters.year`, `ids[2]`), what was
//!   expected in words, and what was received; a `oneOf`/`anyOf` failure lists the
//!   alternatives and why the nearest one failed. For derived schemas an optional field given
//!   as `null` is absent (serde reads it as `None`); declared schemas keep JSON Schema's
//!   meaning of `null`.

use regex::Regex;
use serde_json::{Map, Value};

/// Why a schema cannot serve as a tool's input contract.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    #[error("object at `{0}` is open: it must say \"additionalProperties\": false")]
    OpenObject(String),
    #[error("keyword `{keyword}` at `{path}` is not supported by the validator")]
    UnsupportedKeyword { path: String, keyword: String },
    #[error("schema at `{path}` is malformed: {reason}")]
    Malformed { path: String, reason: String },
    #[error("schema is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("schema nests deeper than {limit} levels at `{path}`")]
    TooDeep { path: String, limit: usize },
    #[error("schema expands to more than {limit} subschemas through its references")]
    TooManySubschemas { limit: u64 },
    #[error(
        "`$ref` or `$schema` at `{path}` points outside the schema (`{reference}`): only local references (`#` or `#/...`) are allowed, and nothing is fetched"
    )]
    NonLocalRef { path: String, reference: String },
    #[error("schema at `{path}` refers back to itself without descending into the value")]
    RefLoop { path: String },
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
    let typed_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t.as_str() == Some("object")),
        _ => false,
    };
    typed_object || map.contains_key("properties")
}

/// An object schema is closed when it refuses fields it does not name, directly or after its
/// `allOf` members have named theirs.
fn is_closed_object(map: &Map<String, Value>) -> bool {
    map.get("additionalProperties") == Some(&Value::Bool(false))
        || map.get("unevaluatedProperties") == Some(&Value::Bool(false))
}

/// Keywords whose value is one subschema.
const SUBSCHEMA_KEYWORDS: [&str; 10] = [
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
const SUBSCHEMA_MAP_KEYWORDS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is a list of subschemas.
const SUBSCHEMA_LIST_KEYWORDS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];

/// Keywords a declared schema may use: the JSON Schema 2020-12 assertions and applicators the
/// validator enforces, local references, and annotations. A keyword outside this list is refused
/// rather than ignored: the validator ignores keywords it does not know (`requird`,
/// `minLenght`, draft-04 leftovers), and an ignored keyword is a constraint the tool's author
/// believes in and nobody enforces.
const DECLARED_KEYWORDS: [&str; 50] = [
    // assertions
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    // applicators
    "properties",
    "patternProperties",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "unevaluatedItems",
    "contains",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    // references and containers
    "$ref",
    "$defs",
    "definitions",
    "$schema",
    "$comment",
    // annotations
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Meta-schemas the validator bundles; any other `$schema` would have to be fetched.
const KNOWN_META_SCHEMAS: [&str; 6] = [
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-04/schema#",
];

/// The largest declared schema accepted, in bytes of compact JSON.
pub const MAX_SCHEMA_BYTES: usize = 256 * 1024;
/// The deepest nesting of JSON objects and arrays a declared schema may have.
pub const MAX_SCHEMA_DEPTH: usize = 64;
/// The most subschemas a declared schema may stand for once its local references are
/// expanded: what bounds `{"a2": {"allOf": [a1, a1]}, "a3": {"allOf": [a2, a2]}, ...}`,
/// which is small to write and exponential to evaluate.
pub const MAX_EXPANDED_SUBSCHEMAS: u64 = 100_000;

/// What a position in a declared schema holds.
#[derive(Clone, Copy)]
enum Role {
    Schema,
    SchemaMap,
    SchemaList,
    Data,
}

/// Escapes a JSON Pointer segment.
fn escape_segment(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The compact-JSON size a node adds besides its children.
fn own_size(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.len(),
        Value::Object(map) => 2 + map.keys().map(|k| k.len() + 4).sum::<usize>(),
    }
}

/// Refuses a declared schema that is too big, too deep, uses a keyword the validator would
/// ignore, refers to anything outside itself, or (unless `allow_open`) leaves an object open.
///
/// Runs before the validator sees the schema, walks it with an explicit stack (so nesting
/// cannot overflow ours) and stops at the first problem, so a hostile schema costs at most
/// [`MAX_SCHEMA_BYTES`] of work.
pub fn check_declared(schema: &Value, allow_open: bool) -> Result<(), SchemaError> {
    let mut size = 0usize;
    let mut stack: Vec<(&Value, String, usize, Role)> = vec![(schema, "#".into(), 1, Role::Schema)];
    while let Some((value, path, depth, role)) = stack.pop() {
        if depth > MAX_SCHEMA_DEPTH {
            return Err(SchemaError::TooDeep {
                path,
                limit: MAX_SCHEMA_DEPTH,
            });
        }
        size = size.saturating_add(own_size(value));
        if size > MAX_SCHEMA_BYTES {
            return Err(SchemaError::TooLarge {
                limit: MAX_SCHEMA_BYTES,
            });
        }
        let child = |key: &str| format!("{path}/{}", escape_segment(key));
        match (role, value) {
            (Role::Schema, Value::Bool(_)) => {}
            (Role::Schema, Value::Object(map)) => {
                check_schema_object(map, &path, allow_open)?;
                for (key, sub) in map {
                    let sub_role = if SUBSCHEMA_MAP_KEYWORDS.contains(&key.as_str()) {
                        Role::SchemaMap
                    } else if SUBSCHEMA_LIST_KEYWORDS.contains(&key.as_str())
                        || (key == "items" && sub.is_array())
                    {
                        Role::SchemaList
                    } else if SUBSCHEMA_KEYWORDS.contains(&key.as_str()) {
                        Role::Schema
                    } else {
                        Role::Data
                    };
                    stack.push((sub, child(key), depth + 1, sub_role));
                }
            }
            (Role::Schema, _) => {
                return Err(SchemaError::Malformed {
                    path,
                    reason: "a schema must be an object or a boolean".into(),
                });
            }
            (Role::SchemaMap, Value::Object(map)) => {
                for (key, sub) in map {
                    stack.push((sub, child(key), depth + 1, Role::Schema));
                }
            }
            (Role::SchemaList, Value::Array(items)) => {
                for (i, sub) in items.iter().enumerate() {
                    stack.push((sub, format!("{path}/{i}"), depth + 1, Role::Schema));
                }
            }
            (Role::SchemaMap | Role::SchemaList, _) => {
                return Err(SchemaError::Malformed {
                    path,
                    reason: "this keyword takes an object or a list of schemas".into(),
                });
            }
            (Role::Data, Value::Object(map)) => {
                for (key, sub) in map {
                    stack.push((sub, child(key), depth + 1, Role::Data));
                }
            }
            (Role::Data, Value::Array(items)) => {
                for (i, sub) in items.iter().enumerate() {
                    stack.push((sub, format!("{path}/{i}"), depth + 1, Role::Data));
                }
            }
            (Role::Data, _) => {}
        }
    }
    check_expansion(schema)
}

fn check_schema_object(
    map: &Map<String, Value>,
    path: &str,
    allow_open: bool,
) -> Result<(), SchemaError> {
    for keyword in map.keys() {
        if !DECLARED_KEYWORDS.contains(&keyword.as_str()) {
            return Err(SchemaError::UnsupportedKeyword {
                path: path.into(),
                keyword: keyword.clone(),
            });
        }
    }
    if let Some(reference) = map.get("$ref") {
        let local = reference
            .as_str()
            .is_some_and(|r| r == "#" || r.starts_with("#/"));
        if !local {
            return Err(SchemaError::NonLocalRef {
                path: path.into(),
                reference: reference
                    .as_str()
                    .map_or_else(|| reference.to_string(), Into::into),
            });
        }
    }
    if let Some(meta) = map.get("$schema") {
        let known = path == "#"
            && meta
                .as_str()
                .is_some_and(|m| KNOWN_META_SCHEMAS.contains(&m));
        if !known {
            return Err(SchemaError::NonLocalRef {
                path: path.into(),
                reference: meta.as_str().map_or_else(|| meta.to_string(), Into::into),
            });
        }
    }
    if !allow_open && is_object_schema(map) && !is_closed_object(map) {
        return Err(SchemaError::OpenObject(path.into()));
    }
    Ok(())
}

/// The target of a local `$ref` (`#` or `#/json/pointer`) in `root`.
fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    match reference {
        "#" => Some(root),
        r => root.pointer(r.strip_prefix('#')?),
    }
}

/// The subschemas directly inside a schema object, with their JSON Pointer suffixes.
fn subschemas(map: &Map<String, Value>) -> Vec<(String, &Value)> {
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

/// Refuses a schema whose local references expand to more than [`MAX_EXPANDED_SUBSCHEMAS`]
/// subschemas, or that refers to itself without descending into the value (`{"$ref": "#"}`
/// at the root, or two definitions whose `allOf`s name each other), which would evaluate
/// forever. Iterative, memoized per JSON Pointer.
fn check_expansion(root: &Value) -> Result<(), SchemaError> {
    use std::collections::HashMap;
    let target_of = |map: &Map<String, Value>| {
        map.get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .map(str::to_string)
    };
    // Expanded size of each pointer; `None` while it is being expanded (a back reference
    // counts once: recursion is bounded by the value, loops are caught below).
    let mut sizes: HashMap<String, Option<u64>> = HashMap::new();
    let mut stack: Vec<(String, bool)> = vec![(String::new(), false)];
    while let Some((pointer, expanded)) = stack.pop() {
        let Some(Value::Object(map)) = root.pointer(&pointer) else {
            sizes.insert(pointer, Some(1));
            continue;
        };
        let children = subschemas(map);
        let target = target_of(map);
        if expanded {
            let mut total: u64 = 1;
            let size_of = |p: &str| sizes.get(p).copied().flatten().unwrap_or(1);
            for (suffix, _) in &children {
                total = total.saturating_add(size_of(&format!("{pointer}{suffix}")));
            }
            if let Some(t) = &target {
                total = total.saturating_add(size_of(t));
            }
            if total > MAX_EXPANDED_SUBSCHEMAS {
                return Err(SchemaError::TooManySubschemas {
                    limit: MAX_EXPANDED_SUBSCHEMAS,
                });
            }
            sizes.insert(pointer, Some(total));
            continue;
        }
        if sizes.contains_key(&pointer) {
            continue;
        }
        sizes.insert(pointer.clone(), None);
        stack.push((pointer.clone(), true));
        if let Some(t) = target {
            if root.pointer(&t).is_none() {
                return Err(SchemaError::Malformed {
                    path: format!("#{pointer}"),
                    reason: format!("`$ref` target `#{t}` does not exist"),
                });
            }
            if !sizes.contains_key(&t) {
                stack.push((t, false));
            }
        }
        for (suffix, _) in children {
            stack.push((format!("{pointer}{suffix}"), false));
        }
    }
    // Loops: a cycle through references and applicators that evaluate the same value.
    let successors = |pointer: &str| -> Vec<String> {
        let Some(Value::Object(map)) = root.pointer(pointer) else {
            return Vec::new();
        };
        let mut out: Vec<String> = target_of(map).into_iter().collect();
        for (suffix, _) in subschemas(map) {
            let same_value = matches!(
                suffix.split('/').nth(1),
                Some(
                    "allOf"
                        | "anyOf"
                        | "oneOf"
                        | "not"
                        | "if"
                        | "then"
                        | "else"
                        | "dependentSchemas"
                )
            );
            if same_value {
                out.push(format!("{pointer}{suffix}"));
            }
        }
        out
    };
    // 1: on the current path, 2: done.
    let mut state: HashMap<String, u8> = HashMap::new();
    for start in sizes.into_keys() {
        if state.contains_key(&start) {
            continue;
        }
        state.insert(start.clone(), 1);
        let next = successors(&start);
        let mut path: Vec<(String, Vec<String>, usize)> = vec![(start, next, 0)];
        while let Some((pointer, next, at)) = path.last_mut() {
            if let Some(following) = next.get(*at).cloned() {
                *at += 1;
                match state.get(&following) {
                    Some(1) => {
                        return Err(SchemaError::RefLoop {
                            path: format!("#{pointer}"),
                        });
                    }
                    Some(_) => {}
                    None => {
                        state.insert(following.clone(), 1);
                        let after = successors(&following);
                        path.push((following, after, 0));
                    }
                }
            } else if let Some((done, _, _)) = path.pop() {
                state.insert(done, 2);
            }
        }
    }
    Ok(())
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

/// Takes a value apart without recursion: dropping a deeply nested `Value` recurses once per
/// level and can overflow the stack.
pub fn drop_without_recursion(value: Value) {
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        match node {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
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
    /// `oneOf`/`anyOf`: the value fits none of the alternatives (`expected` lists them).
    NoAlternativeMatched,
    /// `oneOf`: the value fits more than one alternative.
    SeveralAlternativesMatched,
    /// Any other constraint (`not`, `false`, `contains`, dependencies...).
    NotAllowed,
}

/// Refuses every attempt to fetch a schema: references are local by contract
/// ([`check_declared`]); this is the second lock.
struct RefuseRetrieval;

impl jsonschema::Retrieve for RefuseRetrieval {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(
            format!("schemas are never fetched (`{uri}`): only local references are allowed")
                .into(),
        )
    }
}

/// A tool's input schema compiled once, at declaration; validating a call walks the compiled
/// form only.
pub struct CompiledSchema {
    /// The schema as the model sees it; error messages describe its subschemas.
    model: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compiles a schema [`normalize`] produced for a Rust type. An optional field given as
    /// `null` is accepted as absent (serde reads it as `None`), as [`normalize`] promises.
    pub fn derived(schema: &Value) -> Result<Self, SchemaError> {
        let mut validating = schema.clone();
        accept_null_for_optionals(&mut validating);
        Self::build(schema.clone(), &validating)
    }

    /// Compiles a declared (runtime) schema after [`check_declared`]. JSON Schema's own
    /// semantics apply: `null` is a value like any other.
    pub fn declared(schema: &Value, allow_open: bool) -> Result<Self, SchemaError> {
        check_declared(schema, allow_open)?;
        Self::build(schema.clone(), schema)
    }

    fn build(model: Value, validating: &Value) -> Result<Self, SchemaError> {
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .with_retriever(RefuseRetrieval)
            .should_validate_formats(true)
            .should_ignore_unknown_formats(false)
            .with_format("date", is_iso_date)
            .with_format("email", |text: &str| format_matches("email", text))
            .with_format("uri", |text: &str| format_matches("uri", text))
            // The linear-time engine: no pattern can backtrack for ever.
            .with_pattern_options(jsonschema::PatternOptions::regex().size_limit(1 << 20))
            .build(validating)
            .map_err(|e| SchemaError::Malformed {
                path: format!("#{}", e.instance_path().as_str()),
                reason: e.to_string(),
            })?;
        Ok(CompiledSchema { model, validator })
    }

    /// The schema as the model sees it.
    pub fn model_schema(&self) -> &Value {
        &self.model
    }

    /// Every violation of `value`; empty when it is valid. A valid value costs one pass of the
    /// compiled validator and no allocation.
    pub fn validate(&self, value: &Value) -> Vec<Violation> {
        if self.validator.is_valid(value) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for error in self.validator.iter_errors(value) {
            self.push_violations(&error, &mut out);
        }
        // A value of the wrong type is reported once, not again for each rule it then breaks.
        let wrong_type: Vec<String> = out
            .iter()
            .filter(|v| v.kind == ViolationKind::WrongType)
            .map(|v| v.path.clone())
            .collect();
        out.retain(|v| {
            matches!(
                v.kind,
                ViolationKind::WrongType
                    | ViolationKind::NoAlternativeMatched
                    | ViolationKind::SeveralAlternativesMatched
            ) || !wrong_type.contains(&v.path)
        });
        out
    }

    /// The subschema an error's keyword sits in, and the keyword's parent segments.
    fn subschema_of(&self, error: &jsonschema::ValidationError<'_>) -> (Vec<String>, &Value) {
        let keyword = error.kind().keyword();
        let mut segments: Vec<String> = error
            .schema_path()
            .as_str()
            .split('/')
            .skip(1)
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect();
        if let Some(at) = segments.iter().rposition(|s| s == keyword) {
            segments.truncate(at);
        }
        let sub = walk_schema(&self.model, &segments).unwrap_or(&Value::Null);
        (segments, sub)
    }

    fn push_violations(&self, error: &jsonschema::ValidationError<'_>, out: &mut Vec<Violation>) {
        use jsonschema::error::ValidationErrorKind as K;
        let path = instance_path(error.instance_path());
        let instance: &Value = error.instance();
        let (segments, sub) = self.subschema_of(error);
        let expected = describe_in(&self.model, sub);
        let plain = |kind: ViolationKind| Violation {
            path: path.clone(),
            kind,
            expected: expected.clone(),
            received: Some(instance.clone()),
        };
        match error.kind() {
            K::AdditionalProperties { unexpected } | K::UnevaluatedProperties { unexpected } => {
                let mut allowed = fields_of(&self.model, sub);
                allowed.sort_unstable();
                for name in unexpected {
                    out.push(Violation {
                        path: join(&path, name),
                        kind: ViolationKind::UnknownField,
                        expected: format!("one of the fields: {}", allowed.join(", ")),
                        received: instance.get(name).cloned(),
                    });
                }
            }
            K::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                let field = sub
                    .get("properties")
                    .and_then(|p| p.get(name))
                    .map(|f| describe_in(&self.model, f))
                    .unwrap_or_default();
                out.push(Violation {
                    path: join(&path, name),
                    kind: ViolationKind::MissingField,
                    expected: field,
                    received: None,
                });
            }
            K::Type { .. } => {
                let required_null = instance.is_null()
                    && segments.len() >= 2
                    && segments[segments.len() - 2] == "properties"
                    && walk_schema(&self.model, &segments[..segments.len() - 2])
                        .and_then(|parent| parent.get("required"))
                        .and_then(Value::as_array)
                        .is_some_and(|r| {
                            r.iter()
                                .any(|n| n.as_str() == segments.last().map(String::as_str))
                        });
                if required_null {
                    out.push(Violation {
                        path,
                        kind: ViolationKind::MissingField,
                        expected,
                        received: None,
                    });
                } else {
                    out.push(plain(ViolationKind::WrongType));
                }
            }
            K::Enum { .. } | K::Constant { .. } => out.push(plain(ViolationKind::NotInEnum)),
            K::Minimum { .. }
            | K::Maximum { .. }
            | K::ExclusiveMinimum { .. }
            | K::ExclusiveMaximum { .. }
            | K::MultipleOf { .. } => out.push(plain(ViolationKind::OutOfRange)),
            K::MinLength { .. }
            | K::MaxLength { .. }
            | K::MinItems { .. }
            | K::MaxItems { .. }
            | K::MinProperties { .. }
            | K::MaxProperties { .. } => out.push(plain(ViolationKind::BadLength)),
            K::Pattern { .. } | K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => {
                out.push(plain(ViolationKind::PatternMismatch))
            }
            K::Format { .. } => out.push(plain(ViolationKind::BadFormat)),
            K::UniqueItems => out.push(plain(ViolationKind::DuplicateItems)),
            K::OneOfNotValid { context } | K::AnyOf { context } => {
                out.push(Violation {
                    expected: alternatives(&self.model, sub),
                    ..plain(ViolationKind::NoAlternativeMatched)
                });
                // Then why the closest alternative failed: the one that failed least, among
                // those whose discriminating constants and types fit.
                let wrong_branch = |errors: &Vec<jsonschema::ValidationError<'static>>| {
                    errors.iter().any(|e| {
                        matches!(e.kind(), K::Constant { .. } | K::Enum { .. })
                            || (matches!(e.kind(), K::Type { .. })
                                && e.instance_path() == error.instance_path())
                    })
                };
                let closest = context
                    .iter()
                    .min_by_key(|errors| (wrong_branch(errors), errors.len()));
                // When no alternative even has the right type or constants, the list of
                // alternatives is the lesson; otherwise also say why the nearest one failed.
                if let Some(errors) = closest.filter(|errors| !wrong_branch(errors)) {
                    for sub_error in errors {
                        self.push_violations(sub_error, out);
                    }
                }
            }
            K::OneOfMultipleValid { .. } => out.push(Violation {
                expected: alternatives(&self.model, sub),
                ..plain(ViolationKind::SeveralAlternativesMatched)
            }),
            _ => out.push(Violation {
                expected: error.to_string(),
                ..plain(ViolationKind::NotAllowed)
            }),
        }
    }
}

/// Makes every optional property of a normalized schema accept `null` without changing the
/// schema's shape (so JSON Pointers into it still point at the model's schema).
fn accept_null_for_optionals(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for (name, sub) in props.iter_mut() {
            accept_null_for_optionals(sub);
            if !required.contains(name) {
                accept_null(sub);
            }
        }
    }
    if let Some(items) = map.get_mut("items") {
        accept_null_for_optionals(items);
    }
}

fn accept_null(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".into(), Value::Array(vec![t.into(), "null".into()]));
        }
        Some(Value::Array(types)) if !types.iter().any(|t| t == "null") => {
            types.push("null".into());
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    if let Some(constant) = map.remove("const") {
        map.insert("enum".into(), Value::Array(vec![constant, Value::Null]));
    }
}

/// Our path notation for a validator location: `filters.year`, `ids[2]`, `$` for the root.
fn instance_path(location: &jsonschema::paths::Location) -> String {
    let mut path = String::from("$");
    for segment in location.segments() {
        match segment {
            jsonschema::paths::LocationSegment::Property(name) => path = join(&path, &name),
            jsonschema::paths::LocationSegment::Index(i) => path = format!("{path}[{i}]"),
        }
    }
    path
}

/// Follows schema keyword segments from `root`, through local `$ref`s.
fn walk_schema<'a>(root: &'a Value, segments: &[String]) -> Option<&'a Value> {
    let mut cursor = root;
    for segment in segments {
        cursor = if segment == "$ref" {
            resolve_ref(root, cursor.get("$ref")?.as_str()?)?
        } else {
            match cursor {
                Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                other => other.get(segment)?,
            }
        };
    }
    Some(cursor)
}

/// `schema` with its local references followed (a bounded number of hops).
fn dereference<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
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

/// The field names an object schema allows, through references and composition.
fn fields_of(root: &Value, schema: &Value) -> Vec<String> {
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

/// The alternatives of a `oneOf`/`anyOf`, numbered, each in a short phrase.
fn alternatives(root: &Value, schema: &Value) -> String {
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

/// Checks `value` against a normalized schema, compiling it first; returns every violation.
/// Hot paths hold a [`CompiledSchema`] instead.
pub fn validate(schema: &Value, value: &Value) -> Vec<Violation> {
    match CompiledSchema::derived(schema) {
        Ok(compiled) => compiled.validate(value),
        Err(e) => vec![Violation {
            path: "$".into(),
            kind: ViolationKind::NotAllowed,
            expected: format!("a value of a valid schema ({e})"),
            received: Some(value.clone()),
        }],
    }
}

fn join(path: &str, name: &str) -> String {
    if path == "$" {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
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
