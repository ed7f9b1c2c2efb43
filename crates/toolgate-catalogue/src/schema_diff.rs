//! Differences between two JSON Schemas, each said as what it does to the set of values the
//! schema allows (narrowed, widened, changed both ways), a field added or removed, an object
//! opened or closed, or an annotation edited. Whether that breaks anyone depends on the side
//! (an input's callers send values; an output's callers read them): [`crate::classify`] decides.
//!
//! Local `$ref`s (`#/$defs/...`, `#/definitions/...`, any local JSON pointer) are resolved
//! against their own schema's root before comparing, so a reference renamed to an identical
//! definition is no change and a reference whose target changed is compared by what it points
//! to. Written here rather than taken from a library: the JSON Schema crates validate instances;
//! none compares two schemas by the values they allow. Where a comparison cannot be made (a
//! remote reference, a keyword this walk does not model, a cycle too deep), the difference is
//! reported as changed both ways, so it fails closed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// What a difference does to the set of allowed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shift {
    /// Fewer values are allowed.
    Narrowed,
    /// More values are allowed.
    Widened,
    /// Some values lost, others gained, or not comparable: breaks either side.
    Changed,
    /// A named field is gone; `deprecated` when the old schema marked it `"deprecated": true`.
    FieldRemoved { deprecated: bool },
    /// A named field is new.
    FieldAdded { required: bool },
    /// An object that refused unknown fields now accepts them.
    Opened,
    /// An object that accepted unknown fields now refuses them.
    Closed,
    /// Only words changed (description, title, examples, default).
    Annotation,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaChange {
    pub path: String,
    pub shift: Shift,
    pub reason: String,
}

/// Keywords the walk compares (or ignores on purpose); any other keyword that differs is
/// reported as changed.
const KNOWN: &[&str] = &[
    "$ref",
    "$defs",
    "definitions",
    "$schema",
    "$id",
    "$comment",
    "description",
    "title",
    "examples",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "pattern",
    "format",
    "multipleOf",
    "uniqueItems",
    "anyOf",
    "oneOf",
    "allOf",
];
const ANNOTATIONS: &[&str] = &["description", "title", "examples", "default", "$comment"];
const LOWER_BOUNDS: &[&str] = &[
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
];
const UPPER_BOUNDS: &[&str] = &[
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
];
const MAX_DEPTH: usize = 64;

/// Every difference between `old` and `new`, paths starting at `root` (`input`, `output`).
pub(crate) fn diff(old: &Value, new: &Value, root: &str) -> Vec<SchemaChange> {
    let mut walk = Walk {
        old_root: old,
        new_root: new,
        seen: BTreeSet::new(),
        out: Vec::new(),
    };
    walk.compare(old, new, root, 0);
    walk.out
}

struct Walk<'a> {
    old_root: &'a Value,
    new_root: &'a Value,
    /// Reference pairs already being compared: a recursive definition is compared once.
    seen: BTreeSet<(String, String)>,
    out: Vec<SchemaChange>,
}

/// A schema node with its `$ref` chain followed: the target's keywords, overlaid by the
/// referring node's own, plus the reference it came through.
fn resolve(root: &Value, node: &Value) -> Result<(Map<String, Value>, Option<String>), String> {
    let mut current = match node {
        Value::Bool(true) => return Ok((Map::new(), None)),
        Value::Object(map) => map.clone(),
        // `false` allows nothing: the same as an impossible `not: {}`.
        Value::Bool(false) => {
            let mut map = Map::new();
            map.insert("not".into(), Value::Object(Map::new()));
            return Ok((map, None));
        }
        other => return Err(format!("`{other}` is not a schema")),
    };
    let mut via = None;
    for _ in 0..32 {
        let Some(reference) = current
            .get("$ref")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return Ok((current, via));
        };
        let Some(pointer) = reference.strip_prefix('#') else {
            return Err(format!("`$ref` {reference} is not local"));
        };
        let target = match root.pointer(pointer) {
            Some(Value::Object(map)) => map.clone(),
            Some(Value::Bool(true)) => Map::new(),
            _ => return Err(format!("`$ref` {reference} points nowhere")),
        };
        current.remove("$ref");
        let mut merged = target;
        for (key, value) in current {
            merged.insert(key, value);
        }
        current = merged;
        via = Some(reference);
    }
    Err("a `$ref` chain longer than 32 links".into())
}

fn types(node: &Map<String, Value>) -> Option<BTreeSet<String>> {
    match node.get("type") {
        Some(Value::String(t)) => Some(BTreeSet::from([t.clone()])),
        Some(Value::Array(ts)) => Some(
            ts.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        ),
        _ => None,
    }
}

fn accepts_type(types: &BTreeSet<String>, t: &str) -> bool {
    types.contains(t) || (t == "integer" && types.contains("number"))
}

fn shown(values: &[&Value]) -> String {
    values
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Walk<'_> {
    fn push(&mut self, path: &str, shift: Shift, reason: impl Into<String>) {
        self.out.push(SchemaChange {
            path: path.to_string(),
            shift,
            reason: reason.into(),
        });
    }

    fn compare(&mut self, old: &Value, new: &Value, path: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.push(path, Shift::Changed, "nested too deep to compare");
            return;
        }
        let (o, n) = match (resolve(self.old_root, old), resolve(self.new_root, new)) {
            (Ok(o), Ok(n)) => (o, n),
            (Err(why), _) | (_, Err(why)) => {
                self.push(path, Shift::Changed, format!("cannot be compared: {why}"));
                return;
            }
        };
        if let (Some(a), Some(b)) = (&o.1, &n.1)
            && !self.seen.insert((a.clone(), b.clone()))
        {
            return;
        }
        let (o, n) = (o.0, n.0);
        if o == n && refs_free(&o) {
            return;
        }
        self.annotations(&o, &n, path);
        self.types(&o, &n, path);
        self.value_sets(&o, &n, path);
        self.bounds(&o, &n, path);
        self.object(&o, &n, path, depth);
        self.items(&o, &n, path, depth);
        for key in ["anyOf", "oneOf", "allOf"] {
            self.branches(&o, &n, key, path, depth);
        }
        let others: BTreeSet<&String> = o
            .keys()
            .chain(n.keys())
            .filter(|k| !KNOWN.contains(&k.as_str()))
            .collect();
        for key in others {
            if o.get(key) != n.get(key) {
                self.push(
                    path,
                    Shift::Changed,
                    format!("keyword `{key}` changed (not compared by meaning)"),
                );
            }
        }
    }

    fn annotations(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str) {
        let edited: Vec<&str> = ANNOTATIONS
            .iter()
            .copied()
            .filter(|k| o.get(*k) != n.get(*k))
            .collect();
        if !edited.is_empty() {
            self.push(
                path,
                Shift::Annotation,
                format!("{} edited", edited.join(", ")),
            );
        }
        if o.get("deprecated") != n.get("deprecated") {
            self.push(path, Shift::Annotation, "marked deprecated (or no longer)");
        }
    }

    fn types(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str) {
        match (types(o), types(n)) {
            (None, None) => {}
            (None, Some(new)) => self.push(
                path,
                Shift::Narrowed,
                format!("any type before, now only {}", join(&new)),
            ),
            (Some(old), None) => self.push(
                path,
                Shift::Widened,
                format!("only {} before, now any type", join(&old)),
            ),
            (Some(old), Some(new)) => {
                let lost: BTreeSet<String> = old
                    .iter()
                    .filter(|t| !accepts_type(&new, t))
                    .cloned()
                    .collect();
                let gained: BTreeSet<String> = new
                    .iter()
                    .filter(|t| !accepts_type(&old, t))
                    .cloned()
                    .collect();
                if !lost.is_empty() {
                    self.push(
                        path,
                        Shift::Narrowed,
                        format!("type {} no longer allowed", join(&lost)),
                    );
                }
                if !gained.is_empty() {
                    self.push(
                        path,
                        Shift::Widened,
                        format!("type {} now allowed", join(&gained)),
                    );
                }
            }
        }
    }

    fn value_sets(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str) {
        match (
            o.get("enum").and_then(Value::as_array),
            n.get("enum").and_then(Value::as_array),
        ) {
            (None, None) => {}
            (None, Some(_)) => self.push(path, Shift::Narrowed, "now limited to an enum"),
            (Some(_), None) => self.push(path, Shift::Widened, "no longer limited to an enum"),
            (Some(old), Some(new)) => {
                let lost: Vec<&Value> = old.iter().filter(|v| !new.contains(v)).collect();
                let gained: Vec<&Value> = new.iter().filter(|v| !old.contains(v)).collect();
                if !lost.is_empty() {
                    self.push(path, Shift::Narrowed, format!("enum lost {}", shown(&lost)));
                }
                if !gained.is_empty() {
                    self.push(
                        path,
                        Shift::Widened,
                        format!("enum gained {}", shown(&gained)),
                    );
                }
            }
        }
        match (o.get("const"), n.get("const")) {
            (None, None) => {}
            (None, Some(c)) => self.push(path, Shift::Narrowed, format!("now fixed to {c}")),
            (Some(c), None) => {
                self.push(path, Shift::Widened, format!("no longer fixed to {c}"));
            }
            (Some(a), Some(b)) if a != b => {
                self.push(path, Shift::Changed, format!("fixed value {a} became {b}"));
            }
            _ => {}
        }
    }

    fn bounds(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str) {
        for (keys, lower) in [(LOWER_BOUNDS, true), (UPPER_BOUNDS, false)] {
            for key in keys {
                let (a, b) = (o.get(*key), n.get(*key));
                let shift = match (a.and_then(Value::as_f64), b.and_then(Value::as_f64)) {
                    (None, None) => continue,
                    (None, Some(_)) => Shift::Narrowed,
                    (Some(_), None) => Shift::Widened,
                    (Some(x), Some(y)) if x == y => continue,
                    // A lower bound raised, or an upper bound lowered, allows less.
                    (Some(x), Some(y)) if (y > x) == lower => Shift::Narrowed,
                    (Some(_), Some(_)) => Shift::Widened,
                };
                let show = |v: Option<&Value>| v.map_or("none".to_string(), Value::to_string);
                self.push(path, shift, format!("{key} {} -> {}", show(a), show(b)));
            }
        }
        for key in ["pattern", "format", "multipleOf"] {
            let shift = match (o.get(key), n.get(key)) {
                (None, None) => continue,
                (Some(a), Some(b)) if a == b => continue,
                (None, Some(_)) => Shift::Narrowed,
                (Some(_), None) => Shift::Widened,
                (Some(_), Some(_)) => Shift::Changed,
            };
            self.push(path, shift, format!("{key} changed"));
        }
        let unique = |m: &Map<String, Value>| m.get("uniqueItems") == Some(&Value::Bool(true));
        match (unique(o), unique(n)) {
            (false, true) => self.push(path, Shift::Narrowed, "items must now be unique"),
            (true, false) => self.push(path, Shift::Widened, "items no longer must be unique"),
            _ => {}
        }
    }

    fn object(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str, depth: usize) {
        let props = |m: &Map<String, Value>| -> Map<String, Value> {
            m.get("properties")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let required = |m: &Map<String, Value>| -> BTreeSet<String> {
            m.get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let (po, pn) = (props(o), props(n));
        let (ro, rn) = (required(o), required(n));
        let names: BTreeMap<&String, ()> = po.keys().chain(pn.keys()).map(|k| (k, ())).collect();
        for name in names.keys() {
            let at = format!("{path}.{name}");
            match (po.get(*name), pn.get(*name)) {
                (Some(old), None) => {
                    let deprecated = resolve(self.old_root, old)
                        .map(|(m, _)| m.get("deprecated") == Some(&Value::Bool(true)))
                        .unwrap_or(false);
                    self.push(
                        &at,
                        Shift::FieldRemoved { deprecated },
                        if deprecated {
                            "field removed (it was marked deprecated)"
                        } else {
                            "field removed"
                        },
                    );
                }
                (None, Some(_)) => {
                    let required = rn.contains(*name);
                    self.push(
                        &at,
                        Shift::FieldAdded { required },
                        if required {
                            "new required field"
                        } else {
                            "new optional field"
                        },
                    );
                }
                (Some(old), Some(new)) => {
                    match (ro.contains(*name), rn.contains(*name)) {
                        (false, true) => self.push(&at, Shift::Narrowed, "now required"),
                        (true, false) => self.push(&at, Shift::Widened, "no longer required"),
                        _ => {}
                    }
                    self.compare(old, new, &at, depth + 1);
                }
                (None, None) => {}
            }
        }
        let objectish = |m: &Map<String, Value>| {
            m.contains_key("properties")
                || m.contains_key("additionalProperties")
                || types(m).is_some_and(|t| t.contains("object"))
        };
        if !(objectish(o) || objectish(n)) {
            return;
        }
        let (eo, en) = (extra(o), extra(n));
        let at = format!("{path}.*");
        match (eo, en) {
            (Extra::Closed, Extra::Closed) | (Extra::Open, Extra::Open) => {}
            (Extra::Closed, _) => {
                self.push(path, Shift::Opened, "object now accepts unknown fields")
            }
            (_, Extra::Closed) => {
                self.push(path, Shift::Closed, "object now refuses unknown fields")
            }
            (Extra::Open, Extra::Schema(_)) => {
                self.push(
                    &at,
                    Shift::Narrowed,
                    "unknown fields now limited by a schema",
                );
            }
            (Extra::Schema(_), Extra::Open) => {
                self.push(&at, Shift::Widened, "unknown fields no longer limited");
            }
            (Extra::Schema(a), Extra::Schema(b)) => self.compare(a, b, &at, depth + 1),
        }
    }

    fn items(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str, depth: usize) {
        let at = format!("{path}[]");
        match (o.get("items"), n.get("items")) {
            (None, None) => {}
            (None, Some(_)) => self.push(&at, Shift::Narrowed, "items now limited by a schema"),
            (Some(_), None) => self.push(&at, Shift::Widened, "items no longer limited"),
            (
                Some(a @ (Value::Object(_) | Value::Bool(_))),
                Some(b @ (Value::Object(_) | Value::Bool(_))),
            ) => {
                self.compare(a, b, &at, depth + 1);
            }
            (Some(a), Some(b)) if a != b => {
                self.push(&at, Shift::Changed, "tuple items changed");
            }
            _ => {}
        }
    }

    /// `anyOf`/`oneOf` branches compared by position; a branch more allows more, a branch
    /// fewer allows less (for `allOf`, the other way round).
    fn branches(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        key: &str,
        path: &str,
        depth: usize,
    ) {
        let empty = Vec::new();
        let list = |m: &Map<String, Value>| m.get(key).and_then(Value::as_array).cloned();
        let (a, b) = (list(o), list(n));
        if a.is_none() && b.is_none() {
            return;
        }
        let (a, b) = (
            a.unwrap_or_else(|| empty.clone()),
            b.unwrap_or_else(|| empty.clone()),
        );
        for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
            self.compare(x, y, &format!("{path}|{key}[{i}]"), depth + 1);
        }
        let conjunctive = key == "allOf";
        if b.len() > a.len() {
            let shift = if conjunctive {
                Shift::Narrowed
            } else {
                Shift::Widened
            };
            self.push(
                path,
                shift,
                format!("{key} gained {} branch(es)", b.len() - a.len()),
            );
        } else if a.len() > b.len() {
            let shift = if conjunctive {
                Shift::Widened
            } else {
                Shift::Narrowed
            };
            self.push(
                path,
                shift,
                format!("{key} lost {} branch(es)", a.len() - b.len()),
            );
        }
    }
}

enum Extra<'v> {
    Closed,
    Open,
    Schema(&'v Value),
}

/// What an object does with fields it does not name.
fn extra(m: &Map<String, Value>) -> Extra<'_> {
    match m.get("additionalProperties") {
        Some(Value::Bool(false)) => Extra::Closed,
        None | Some(Value::Bool(true)) => Extra::Open,
        Some(schema) => Extra::Schema(schema),
    }
}

/// Whether a node holds no reference anywhere below: only then does equal text mean equal
/// meaning (a `$ref` below may point at a definition that changed).
fn refs_free(node: &Map<String, Value>) -> bool {
    fn free(v: &Value) -> bool {
        match v {
            Value::Object(m) => !m.contains_key("$ref") && m.values().all(free),
            Value::Array(a) => a.iter().all(free),
            _ => true,
        }
    }
    node.values().all(free)
}

fn join(set: &BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join(", ")
}
