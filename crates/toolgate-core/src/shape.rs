//! The JSON structure of a tool's result with its values left out: what a caller relies on
//! when it reads the result (which keys, of which types; a list empty or not), recorded in each
//! decision record (`result_shape`) so a recorded call can be replayed and compared on its
//! result's shape, not only on its decision.
//!
//! Guarantees: pure and deterministic: equal values give equal shapes; numbers are one kind;
//! a list's elements are merged into one shape (an object's keys united), so a list's length
//! never matters, only whether it is empty; elements of different kinds are `mixed`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The JSON structure of a result, values left out (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    Null,
    Bool,
    Number,
    String,
    /// `None`: empty.
    Array(Option<Box<Shape>>),
    Object(BTreeMap<String, Shape>),
    /// Elements (or one key across elements) of different kinds.
    Mixed(BTreeSet<Shape>),
}

impl Shape {
    /// The shape of `value`.
    pub fn of(value: &Value) -> Shape {
        match value {
            Value::Null => Shape::Null,
            Value::Bool(_) => Shape::Bool,
            Value::Number(_) => Shape::Number,
            Value::String(_) => Shape::String,
            Value::Array(items) => Shape::Array(
                items
                    .iter()
                    .map(Shape::of)
                    .reduce(Shape::merge)
                    .map(Box::new),
            ),
            Value::Object(map) => {
                Shape::Object(map.iter().map(|(k, v)| (k.clone(), Shape::of(v))).collect())
            }
        }
    }

    /// The shape of a result as the model read it: its JSON's, or `string` for other text.
    pub fn of_text(text: &str) -> Shape {
        serde_json::from_str::<Value>(text).map_or(Shape::String, |v| Shape::of(&v))
    }

    /// Two elements' shapes as one.
    pub fn merge(self, other: Shape) -> Shape {
        match (self, other) {
            (a, b) if a == b => a,
            (Shape::Object(mut a), Shape::Object(b)) => {
                for (key, shape) in b {
                    let merged = match a.remove(&key) {
                        Some(mine) => mine.merge(shape),
                        None => shape,
                    };
                    a.insert(key, merged);
                }
                Shape::Object(a)
            }
            (Shape::Array(a), Shape::Array(b)) => Shape::Array(match (a, b) {
                (Some(a), Some(b)) => Some(Box::new(a.merge(*b))),
                (a, b) => a.or(b),
            }),
            (Shape::Mixed(mut a), Shape::Mixed(b)) => {
                a.extend(b);
                Shape::Mixed(a)
            }
            (Shape::Mixed(mut a), b) | (b, Shape::Mixed(mut a)) => {
                a.insert(b);
                Shape::Mixed(a)
            }
            (a, b) => Shape::Mixed([a, b].into_iter().collect()),
        }
    }

    /// A short name for a report (`object`, `[]`, `[…]`, `number`, ...).
    pub fn kind(&self) -> String {
        match self {
            Shape::Null => "null".into(),
            Shape::Bool => "bool".into(),
            Shape::Number => "number".into(),
            Shape::String => "string".into(),
            Shape::Array(None) => "an empty list".into(),
            Shape::Array(Some(_)) => "a list".into(),
            Shape::Object(_) => "an object".into(),
            Shape::Mixed(kinds) => kinds.iter().map(Shape::kind).collect::<Vec<_>>().join("|"),
        }
    }
}
