//! Guards on declared (runtime) schemas: what a schema a tool brings with it (an imported MCP
//! tool's, one built with `ToolBuilder::from_schema`) must satisfy before the validator
//! compiles it.
//!
//! Guarantees: [`check_declared`] runs before the validator sees the schema, walks it with an
//! explicit stack and stops at the first problem, so a hostile schema costs at most
//! [`MAX_SCHEMA_BYTES`] of work and cannot overflow our stack; the reference expansion check
//! is iterative and memoized per JSON Pointer. [`drop_without_recursion`] lets a refused,
//! deeply nested value go without overflowing the stack either.
//!
//! Refuses: a schema larger than [`MAX_SCHEMA_BYTES`]; nesting deeper than
//! [`MAX_SCHEMA_DEPTH`]; expanding through its references to more than
//! [`MAX_EXPANDED_SUBSCHEMAS`] subschemas; looping through references without descending into
//! the value; a `$ref` other than `#` or `#/...`, or one whose target does not exist; a
//! `$schema` the validator does not bundle, or one below the root; a keyword outside the
//! 2020-12 assertions, applicators, local references and annotations (the validator would
//! silently ignore it); a subschema that is neither an object nor a boolean; and, unless the
//! tool opts in, an open object.

use serde_json::{Map, Value};

use super::SchemaError;
use super::structure::{
    SUBSCHEMA_KEYWORDS, SUBSCHEMA_LIST_KEYWORDS, SUBSCHEMA_MAP_KEYWORDS, escape_segment,
    is_closed_object, is_object_schema, subschemas,
};

/// The largest declared schema accepted, in bytes of compact JSON.
pub const MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// The deepest nesting of JSON objects and arrays a declared schema may have.
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// The most subschemas a declared schema may stand for once its local references are
/// expanded: what bounds `{"a2": {"allOf": [a1, a1]}, "a3": {"allOf": [a2, a2]}, ...}`,
/// which is small to write and exponential to evaluate.
pub const MAX_EXPANDED_SUBSCHEMAS: u64 = 100_000;

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

/// What a position in a declared schema holds.
#[derive(Clone, Copy)]
enum Role {
    Schema,
    SchemaMap,
    SchemaList,
    Data,
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
