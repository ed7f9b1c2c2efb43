//! The four views of a tool, kept apart so that editing a description can never change
//! authority: the model view (what a model sees), the policy view (risk, effect, scopes), the
//! executor view (deadline, writes, parallel safety) and the observation view (size bound,
//! error style, provenance).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorStyle;

/// How much harm a call can do, which decides whether a human is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    Low,
    Medium,
    High,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
        }
    }
}

/// What a call does to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Reads only.
    Read,
    /// Writes the user's own data in a way that can be undone.
    UndoableWrite,
    /// Makes an outbound request (the URL itself can carry data out).
    Outbound,
    /// Cannot be undone, or becomes visible to other people.
    Irreversible,
    /// Spends money.
    CostsMoney,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::UndoableWrite => "undoable_write",
            Effect::Outbound => "outbound",
            Effect::Irreversible => "irreversible",
            Effect::CostsMoney => "costs_money",
        }
    }

    /// Whether the effect changes state, and so needs an idempotency key.
    pub fn writes(self) -> bool {
        match self {
            Effect::Read | Effect::Outbound => false,
            Effect::UndoableWrite | Effect::Irreversible | Effect::CostsMoney => true,
        }
    }
}

/// What the tool does, when to call it, when not to (naming the sibling to use instead), and
/// what it returns. Rendered into the model-facing description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    pub does: String,
    pub use_when: String,
    /// `None` only for a tool with no sibling it could be confused with.
    pub avoid_when: Option<String>,
    pub returns: String,
}

/// A complete, valid argument object with a line saying what it does, and optionally what a
/// call with it returns on the toolset's seeded store (checked by `toolgate tools --check`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    pub label: String,
    pub arguments: Value,
    /// Not rendered into the description: a model is shown the call, not its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Expected>,
}

/// A JSON type, as an expected shape names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JsonType {
    Null,
    Boolean,
    /// A whole number (also a `number`).
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl JsonType {
    pub fn as_str(self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Boolean => "boolean",
            JsonType::Integer => "integer",
            JsonType::Number => "number",
            JsonType::String => "string",
            JsonType::Array => "array",
            JsonType::Object => "object",
        }
    }

    /// Whether `value` is of this type (an integer is also a number).
    pub fn admits(self, value: &Value) -> bool {
        match self {
            JsonType::Null => value.is_null(),
            JsonType::Boolean => value.is_boolean(),
            JsonType::Integer => value.is_i64() || value.is_u64(),
            JsonType::Number => value.is_number(),
            JsonType::String => value.is_string(),
            JsonType::Array => value.is_array(),
            JsonType::Object => value.is_object(),
        }
    }

    /// The type of `value` (an integer as `integer`).
    pub fn of(value: &Value) -> JsonType {
        match value {
            Value::Null => JsonType::Null,
            Value::Bool(_) => JsonType::Boolean,
            Value::Number(n) if n.is_i64() || n.is_u64() => JsonType::Integer,
            Value::Number(_) => JsonType::Number,
            Value::String(_) => JsonType::String,
            Value::Array(_) => JsonType::Array,
            Value::Object(_) => JsonType::Object,
        }
    }
}

/// What an example's call must return. Places are JSON pointers (RFC 6901) into the result
/// content (`/notes/0/title`); the empty pointer is the whole content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expected {
    /// Each place is present and holds a value of its type; anything else may be there too.
    Shape(Vec<(String, JsonType)>),
    /// Each place is present and holds exactly its value.
    Values(Vec<(String, Value)>),
    /// The call fails with this stable error code (`not_found`): for an example that shows a
    /// refusal, or one that needs the network, which the check never reaches.
    Error(String),
}

impl Expected {
    pub fn shape(places: &[(&str, JsonType)]) -> Expected {
        Expected::Shape(places.iter().map(|(p, t)| (p.to_string(), *t)).collect())
    }

    pub fn values(places: &[(&str, Value)]) -> Expected {
        Expected::Values(
            places
                .iter()
                .map(|(p, v)| (p.to_string(), v.clone()))
                .collect(),
        )
    }

    pub fn error(code: crate::error::ErrorCode) -> Expected {
        Expected::Error(code.as_str().to_string())
    }
}

/// How a call ended, as [`check_example_result`] compares it: its result content, or its
/// error's stable code.
#[derive(Debug, Clone, PartialEq)]
pub enum ActualResult<'a> {
    Content(&'a Value),
    Error(&'a str),
}

/// Whether `actual` is what `expected` says, and every way it is not. Pure: the runner that
/// makes the call lives in the wiring.
pub fn check_example_result(
    expected: &Expected,
    actual: &ActualResult<'_>,
) -> Result<(), Vec<String>> {
    let problems: Vec<String> = match (expected, actual) {
        (Expected::Error(code), ActualResult::Error(got)) if code == got => Vec::new(),
        (Expected::Error(code), ActualResult::Error(got)) => {
            vec![format!("expected error `{code}`, got error `{got}`")]
        }
        (Expected::Error(code), ActualResult::Content(_)) => {
            vec![format!("expected error `{code}`, the call succeeded")]
        }
        (Expected::Shape(_) | Expected::Values(_), ActualResult::Error(got)) => {
            vec![format!("the call failed with `{got}`")]
        }
        (Expected::Shape(places), ActualResult::Content(content)) => places
            .iter()
            .filter_map(|(place, ty)| match content.pointer(place) {
                None => Some(format!("`{place}` is missing (expected {})", ty.as_str())),
                Some(v) if !ty.admits(v) => Some(format!(
                    "`{place}` is {}, expected {}",
                    JsonType::of(v).as_str(),
                    ty.as_str()
                )),
                Some(_) => None,
            })
            .collect(),
        (Expected::Values(places), ActualResult::Content(content)) => places
            .iter()
            .filter_map(|(place, want)| match content.pointer(place) {
                None => Some(format!("`{place}` is missing (expected {want})")),
                Some(got) if !same_value(got, want) => {
                    Some(format!("`{place}` is {got}, expected {want}"))
                }
                Some(_) => None,
            })
            .collect(),
    };
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Equal as JSON values, with `2` and `2.0` the same number.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        _ => a == b,
    }
}

/// Whether every place `expected` names can exist in a result valid under `output_schema`,
/// with a value of the expected type: every way it cannot. Places the schema leaves open (no
/// `properties` entry in an object that allows others) are not judged.
pub fn check_expected_against_schema(expected: &Expected, output_schema: &Value) -> Vec<String> {
    let places: Vec<(&str, Option<JsonType>)> = match expected {
        Expected::Error(_) => return Vec::new(),
        Expected::Shape(places) => places.iter().map(|(p, t)| (p.as_str(), Some(*t))).collect(),
        Expected::Values(places) => places
            .iter()
            .map(|(p, v)| (p.as_str(), Some(JsonType::of(v))))
            .collect(),
    };
    let mut problems = Vec::new();
    for (place, ty) in places {
        if !place.is_empty() && !place.starts_with('/') {
            problems.push(format!("`{place}` is not a JSON pointer"));
            continue;
        }
        let mut schema = Some(output_schema);
        for token in place.split('/').skip(1) {
            let key = token.replace("~1", "/").replace("~0", "~");
            let Some(here) = schema else { break };
            if let Some(sub) = here.get("properties").and_then(|p| p.get(&key)) {
                schema = Some(sub);
            } else if let Some(items) = here.get("items").filter(|_| key.parse::<usize>().is_ok()) {
                schema = Some(items);
            } else if here.get("additionalProperties") == Some(&Value::Bool(false))
                || (here.get("items").is_some() && key.parse::<usize>().is_err())
            {
                problems.push(format!("`{place}` is not in the output schema"));
                schema = None;
                break;
            } else {
                // Open at this level: nothing more to judge.
                schema = None;
            }
        }
        if let (Some(schema), Some(ty)) = (schema, ty)
            && let Some(declared) = schema.get("type")
        {
            let names: Vec<&str> = match declared {
                Value::String(one) => vec![one.as_str()],
                Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            let fits = names
                .iter()
                .any(|n| *n == ty.as_str() || (*n == "number" && ty == JsonType::Integer));
            if !names.is_empty() && !fits {
                problems.push(format!(
                    "`{place}` is {} in the output schema, expected {}",
                    names.join(" or "),
                    ty.as_str()
                ));
            }
        }
    }
    problems
}

/// Exactly what a model (or MCP host) is shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelView {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyView {
    pub risk: Risk,
    /// One sentence: why this risk level.
    pub reason: String,
    pub effect: Effect,
    /// Scopes a principal must hold to see and call the tool.
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorView {
    pub deadline: Duration,
    /// Whether a call changes state (and so gets an idempotency key). Declared by how the tool
    /// is finished (`read` or `write`), not by its effect: an outbound fetch that stores what
    /// it fetched writes.
    pub writes: bool,
    /// Whether calls to this tool may run concurrently with other calls in the same turn.
    pub parallel_safe: bool,
    /// Whether a loop may answer an exact repeat of an earlier call to this read (same
    /// arguments, no write since) with the earlier result instead of running it again.
    pub answers_repeats: bool,
    /// Whether the dispatcher can read this write tool's receipts: a retry of a call that
    /// already happened then replays its receipt instead of asking a human again.
    pub receipts_visible: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservationView {
    /// Bytes of serialized result the model may receive; more is truncated loudly.
    pub max_bytes: usize,
    pub error_style: ErrorStyle,
    /// What the model should do to see what truncation cut (e.g. "narrow the filters").
    pub more_hint: String,
}

/// Where a tool's input schema came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputOrigin {
    /// Derived from the Rust argument type, normalized and closed.
    Derived,
    /// Declared as a JSON Schema value (an imported tool, a fixture), checked closed.
    Declared,
    /// Declared, and opened on purpose (`allow_open_schema`): the contract check reports it.
    DeclaredOpen,
}

/// A point in a tool's life: one of its own version numbers, or a day written `YYYY-MM-DD`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Milestone {
    Version(u32),
    Date(String),
}

impl Milestone {
    /// Whether a date milestone is a real `YYYY-MM-DD` day (a version always is).
    pub fn is_well_formed(&self) -> bool {
        match self {
            Milestone::Version(_) => true,
            Milestone::Date(day) => {
                let parts: Vec<&str> = day.split('-').collect();
                let digits =
                    |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
                matches!(parts.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2)
                    && matches!(m.parse::<u32>(), Ok(1..=12))
                    && matches!(d.parse::<u32>(), Ok(1..=31)))
            }
        }
    }
}

/// A tool on its way out: deprecated from `deprecated_since`, kept at least until
/// `remove_after`. A catalogue check allows its removal once the deprecation has been shipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deprecation {
    pub deprecated_since: Milestone,
    pub remove_after: Milestone,
}

/// The complete declaration of a tool, minus its handler.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub version: u32,
    pub description: Description,
    pub examples: Vec<Example>,
    pub input_schema: Value,
    pub input_origin: InputOrigin,
    pub output_schema: Option<Value>,
    pub policy: PolicyView,
    pub executor: ExecutorView,
    pub observation: ObservationView,
    /// Declared with `ToolBuilder::deprecated`; `None` for a tool not on its way out.
    pub deprecation: Option<Deprecation>,
}

impl ToolSpec {
    /// The description as a model reads it.
    pub fn rendered_description(&self) -> String {
        let d = &self.description;
        let mut text = format!("{}\nWhen to use: {}", d.does.trim(), d.use_when.trim());
        if let Some(avoid) = &d.avoid_when {
            text.push_str(&format!("\nWhen not to use: {}", avoid.trim()));
        }
        text.push_str(&format!("\nReturns: {}", d.returns.trim()));
        for example in &self.examples {
            text.push_str(&format!(
                "\nExample ({}): {}",
                example.label.trim(),
                serde_json::to_string(&example.arguments).unwrap_or_default()
            ));
        }
        text
    }

    pub fn model_view(&self) -> ModelView {
        ModelView {
            name: self.name.clone(),
            description: self.rendered_description(),
            input_schema: self.input_schema.clone(),
            output_schema: self.output_schema.clone(),
        }
    }

    pub fn writes(&self) -> bool {
        self.executor.writes
    }
}

#[cfg(test)]
#[path = "spec_example_tests.rs"]
mod example_result_tests;
