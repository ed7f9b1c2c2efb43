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

/// A complete, valid argument object with a line saying what it does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    pub label: String,
    pub arguments: Value,
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
