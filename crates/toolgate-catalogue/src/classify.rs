//! The compatibility gate: every difference between an old snapshot (the last release) and a
//! new one, each classified as breaking for callers, a policy change that a person must
//! review, or compatible.
//!
//! Guarantees: [`check`] is pure and reports every difference it finds, in tool order, as data
//! (tool, path, kind, rule, a plain-words reason). Breaking: a tool removed without a shipped
//! deprecation, an input narrowed (a type or enum narrowed, a bound tightened, a new required
//! field, a field removed, an object closed or opened), an output widened or an output field
//! removed, an error code removed, a scope added, a deadline or output bound lowered. Policy,
//! whatever the version: risk or effect lowered, a scope removed, approval dropped in a mode,
//! whether the tool writes changed. Compatible: a new tool, a new optional field, an input
//! widened or an output narrowed, a description edited, a tool removed inside its deprecation
//! window (with a notice). A tool's version number changes nothing here: a breaking change with
//! a bumped version is still breaking.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_core::approval::Mode;
use toolgate_core::spec::Milestone;
use toolgate_core::{Effect, Risk};

use crate::review::Review;
use crate::schema_diff::{self, SchemaChange, Shift};
use crate::snapshot::{Snapshot, ToolEntry};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A caller that worked against the old catalogue may fail against the new one.
    Breaking,
    /// What a call may do without a person, or who may call, changed: reviewed, never assumed.
    Policy,
    /// Callers of the old catalogue keep working.
    Compatible,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Breaking => "breaking",
            ChangeKind::Policy => "policy",
            ChangeKind::Compatible => "compatible",
        }
    }
}

/// Which rule a difference falls under (a review accepts a policy change by its rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    ToolAdded,
    ToolRemoved,
    ToolRemovedBeforeDeprecation,
    ToolRemovedInWindow,
    /// An earlier version served beside the current one changed.
    EarlierVersionChanged,
    /// An earlier version is now served beside the current one.
    EarlierVersionKept,
    VersionChanged,
    DescriptionEdited,
    RiskReasonEdited,
    DeprecationDeclared,
    DeprecationWithdrawn,
    RiskLowered,
    RiskRaised,
    EffectLowered,
    EffectRaised,
    ScopeRemoved,
    ScopeAdded,
    ApprovalDropped,
    ApprovalAdded,
    WritesChanged,
    DeadlineShortened,
    DeadlineLengthened,
    OutputBoundLowered,
    OutputBoundRaised,
    ErrorCodeRemoved,
    ErrorCodeAdded,
    InputNarrowed,
    InputWidened,
    InputChanged,
    NewRequiredField,
    NewOptionalField,
    InputFieldRemoved,
    DeprecatedFieldRemoved,
    InputObjectOpened,
    InputObjectClosed,
    OutputWidened,
    OutputNarrowed,
    OutputChanged,
    OutputFieldRemoved,
    OutputFieldAdded,
    OutputSchemaAdded,
    OutputSchemaRemoved,
    SchemaAnnotationEdited,
}

impl Rule {
    pub fn as_str(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// One difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub tool: String,
    /// Where in the tool: `tool`, `policy.risk`, `input.filters.year_min`, `output.items[]`.
    pub path: String,
    pub kind: ChangeKind,
    pub rule: Rule,
    pub reason: String,
    /// The new snapshot's digest of the tool (what a review accepts), when it still exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Every difference between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub old: String,
    pub new: String,
    pub changes: Vec<Change>,
}

/// Compares `old` (the release) with `new`.
pub fn check(old: &Snapshot, new: &Snapshot) -> Report {
    let mut changes = Vec::new();
    for before in &old.tools {
        match new.tool(&before.name) {
            Some(after) => compare_tool(before, after, &mut changes),
            None => changes.push(removal(before, new)),
        }
    }
    for after in &new.tools {
        if old.tool(&after.name).is_none() {
            changes.push(Change {
                tool: after.name.clone(),
                path: "tool".into(),
                kind: ChangeKind::Compatible,
                rule: Rule::ToolAdded,
                reason: "new tool".into(),
                digest: Some(after.digest.clone()),
            });
        }
    }
    check_earlier(old, new, &mut changes);
    changes.sort_by(|a, b| a.tool.cmp(&b.tool).then(a.kind.cmp(&b.kind)));
    Report {
        old: format!("{} ({})", old.source, old.taken_on),
        new: format!("{} ({})", new.source, new.taken_on),
        changes,
    }
}

/// Earlier versions served beside the current ones: a pinned caller's contract. One that
/// leaves follows the removal rules (its deprecation window); one that stays must not change;
/// one that arrives is compatible (callers gain a version to pin).
fn check_earlier(old: &Snapshot, new: &Snapshot, changes: &mut Vec<Change>) {
    for before in &old.earlier {
        let path = format!("version {}", before.version);
        match new.earlier_version(&before.name, before.version) {
            None if new.tool(&before.name).is_some_and(|t| t.version == before.version) => {}
            None => changes.push(Change {
                path,
                ..removal(before, new)
            }),
            Some(after) if after.digest != before.digest => changes.push(Change {
                tool: before.name.clone(),
                path,
                kind: ChangeKind::Breaking,
                rule: Rule::EarlierVersionChanged,
                reason: "an earlier version served beside the current one changed: the callers that pinned it get another contract".into(),
                digest: Some(after.digest.clone()),
            }),
            Some(_) => {}
        }
    }
    for after in &new.earlier {
        if old.earlier_version(&after.name, after.version).is_none() {
            changes.push(Change {
                tool: after.name.clone(),
                path: format!("version {}", after.version),
                kind: ChangeKind::Compatible,
                rule: Rule::EarlierVersionKept,
                reason: "notice: this version is served beside the current one during its deprecation window (callers may pin it)".into(),
                digest: Some(after.digest.clone()),
            });
        }
    }
}

fn milestone(m: &Milestone) -> String {
    match m {
        Milestone::Version(v) => format!("version {v}"),
        Milestone::Date(d) => d.clone(),
    }
}

/// Whether `m` is reached: a version by the old tool's version (the release callers had), a
/// day by the new snapshot's day.
fn reached(m: &Milestone, tool_version: u32, today: &str) -> bool {
    match m {
        Milestone::Version(v) => tool_version >= *v,
        // `YYYY-MM-DD` days order as text.
        Milestone::Date(d) => today >= d.as_str(),
    }
}

fn removal(before: &ToolEntry, new: &Snapshot) -> Change {
    let (kind, rule, reason) = match &before.deprecation {
        None => (
            ChangeKind::Breaking,
            Rule::ToolRemoved,
            "removed without a deprecation window: its callers now get not_found; declare it deprecated (deprecated_since, remove_after) and ship that release first".to_string(),
        ),
        Some(d) if !reached(&d.deprecated_since, before.version, &new.taken_on) => (
            ChangeKind::Breaking,
            Rule::ToolRemovedBeforeDeprecation,
            format!(
                "removed before its deprecation began ({}): callers were never warned",
                milestone(&d.deprecated_since)
            ),
        ),
        Some(d) => {
            let window = if reached(&d.remove_after, before.version, &new.taken_on) {
                "after its window closed"
            } else {
                "inside its deprecation window"
            };
            (
                ChangeKind::Compatible,
                Rule::ToolRemovedInWindow,
                format!(
                    "notice: removed {window} (deprecated since {}, kept until {}): callers were warned",
                    milestone(&d.deprecated_since),
                    milestone(&d.remove_after)
                ),
            )
        }
    };
    Change {
        tool: before.name.clone(),
        path: "tool".into(),
        kind,
        rule,
        reason,
        digest: None,
    }
}

/// How much an effect does to the world, for "lowered" and "raised".
fn effect_rank(e: Effect) -> u8 {
    match e {
        Effect::Read => 0,
        Effect::UndoableWrite => 1,
        Effect::Outbound => 2,
        Effect::Irreversible => 3,
        Effect::CostsMoney => 4,
    }
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Auto => "auto",
        Mode::Ask => "ask",
    }
}

fn compare_tool(before: &ToolEntry, after: &ToolEntry, out: &mut Vec<Change>) {
    let mut push = |path: &str, kind: ChangeKind, rule: Rule, reason: String| {
        out.push(Change {
            tool: after.name.clone(),
            path: path.to_string(),
            kind,
            rule,
            reason,
            digest: Some(after.digest.clone()),
        });
    };
    use ChangeKind::{Breaking, Compatible};
    if before.version != after.version {
        push(
            "version",
            Compatible,
            Rule::VersionChanged,
            format!("version {} -> {}", before.version, after.version),
        );
    }
    if before.description != after.description {
        push(
            "description",
            Compatible,
            Rule::DescriptionEdited,
            "description edited".into(),
        );
    }
    if before.risk_reason != after.risk_reason {
        push(
            "policy.reason",
            Compatible,
            Rule::RiskReasonEdited,
            "risk reason edited".into(),
        );
    }
    match (&before.deprecation, &after.deprecation) {
        (None, Some(d)) => push(
            "deprecation",
            Compatible,
            Rule::DeprecationDeclared,
            format!(
                "notice: deprecated since {}, may be removed after {}",
                milestone(&d.deprecated_since),
                milestone(&d.remove_after)
            ),
        ),
        (Some(_), None) => push(
            "deprecation",
            Compatible,
            Rule::DeprecationWithdrawn,
            "no longer deprecated".into(),
        ),
        (Some(a), Some(b)) if a != b => push(
            "deprecation",
            Compatible,
            Rule::DeprecationDeclared,
            format!(
                "notice: deprecation now since {}, until {}",
                milestone(&b.deprecated_since),
                milestone(&b.remove_after)
            ),
        ),
        _ => {}
    }
    policy(before, after, &mut push);
    if before.deadline_ms != after.deadline_ms {
        let shorter = after.deadline_ms < before.deadline_ms;
        push(
            "executor.deadline",
            if shorter { Breaking } else { Compatible },
            if shorter {
                Rule::DeadlineShortened
            } else {
                Rule::DeadlineLengthened
            },
            format!(
                "deadline {} ms -> {} ms{}",
                before.deadline_ms,
                after.deadline_ms,
                if shorter {
                    ": calls that finished in time may now fail with deadline_exceeded"
                } else {
                    ""
                }
            ),
        );
    }
    if before.max_output_bytes != after.max_output_bytes {
        let lower = after.max_output_bytes < before.max_output_bytes;
        push(
            "observation.max_bytes",
            if lower { Breaking } else { Compatible },
            if lower {
                Rule::OutputBoundLowered
            } else {
                Rule::OutputBoundRaised
            },
            format!(
                "result bound {} -> {} bytes{}",
                before.max_output_bytes,
                after.max_output_bytes,
                if lower {
                    ": results that fitted may now be cut"
                } else {
                    ""
                }
            ),
        );
    }
    for code in &before.error_codes {
        if !after.error_codes.contains(code) {
            push(
                "error_codes",
                Breaking,
                Rule::ErrorCodeRemoved,
                format!("error code `{code}` removed or renamed: callers matching on it miss it"),
            );
        }
    }
    for code in &after.error_codes {
        if !before.error_codes.contains(code) {
            push(
                "error_codes",
                Compatible,
                Rule::ErrorCodeAdded,
                format!("error code `{code}` may now be returned"),
            );
        }
    }
    for change in schema_diff::diff(&before.input_schema, &after.input_schema, "input") {
        let (kind, rule) = input_rule(change.shift);
        push(&change.path, kind, rule, change.reason);
    }
    match (&before.output_schema, &after.output_schema) {
        (None, None) => {}
        (None, Some(_)) => push(
            "output",
            Compatible,
            Rule::OutputSchemaAdded,
            "output schema declared".into(),
        ),
        (Some(_), None) => push(
            "output",
            Breaking,
            Rule::OutputSchemaRemoved,
            "output schema removed: callers lose what they read the result by".into(),
        ),
        (Some(a), Some(b)) => {
            for SchemaChange {
                path,
                shift,
                reason,
            } in schema_diff::diff(a, b, "output")
            {
                let (kind, rule) = output_rule(shift);
                push(&path, kind, rule, reason);
            }
        }
    }
}

fn policy(
    before: &ToolEntry,
    after: &ToolEntry,
    push: &mut impl FnMut(&str, ChangeKind, Rule, String),
) {
    use ChangeKind::{Breaking, Compatible, Policy};
    if before.risk != after.risk {
        let lowered = after.risk < before.risk;
        push(
            "policy.risk",
            if lowered { Policy } else { Compatible },
            if lowered {
                Rule::RiskLowered
            } else {
                Rule::RiskRaised
            },
            format!(
                "risk {} -> {}",
                risk_name(before.risk),
                risk_name(after.risk)
            ),
        );
    }
    if before.effect != after.effect {
        let lowered = effect_rank(after.effect) < effect_rank(before.effect);
        push(
            "policy.effect",
            if lowered { Policy } else { Compatible },
            if lowered {
                Rule::EffectLowered
            } else {
                Rule::EffectRaised
            },
            format!(
                "effect {} -> {}",
                before.effect.as_str(),
                after.effect.as_str()
            ),
        );
    }
    for scope in &before.scopes {
        if !after.scopes.contains(scope) {
            push(
                "policy.scopes",
                Policy,
                Rule::ScopeRemoved,
                format!("scope `{scope}` no longer needed: more principals may see and call it"),
            );
        }
    }
    for scope in &after.scopes {
        if !before.scopes.contains(scope) {
            push(
                "policy.scopes",
                Breaking,
                Rule::ScopeAdded,
                format!("scope `{scope}` now needed: callers without it lose the tool"),
            );
        }
    }
    for mode in [Mode::Auto, Mode::Ask] {
        match (
            before.approval_in.contains(&mode),
            after.approval_in.contains(&mode),
        ) {
            (true, false) => push(
                "policy.approval",
                Policy,
                Rule::ApprovalDropped,
                format!("no longer asks a person in {} mode", mode_name(mode)),
            ),
            (false, true) => push(
                "policy.approval",
                Compatible,
                Rule::ApprovalAdded,
                format!("now asks a person in {} mode", mode_name(mode)),
            ),
            _ => {}
        }
    }
    if before.writes != after.writes {
        push(
            "executor.writes",
            Policy,
            Rule::WritesChanged,
            if after.writes {
                "now writes (idempotency keys and receipts apply)".into()
            } else {
                "no longer declared as writing: no idempotency key, no receipt".into()
            },
        );
    }
}

fn risk_name(r: Risk) -> &'static str {
    r.as_str()
}

/// Inputs: callers send values, so allowing fewer breaks them.
fn input_rule(shift: Shift) -> (ChangeKind, Rule) {
    use ChangeKind::{Breaking, Compatible};
    match shift {
        Shift::Narrowed => (Breaking, Rule::InputNarrowed),
        Shift::Widened => (Compatible, Rule::InputWidened),
        Shift::Changed => (Breaking, Rule::InputChanged),
        Shift::FieldRemoved { deprecated: false } => (Breaking, Rule::InputFieldRemoved),
        Shift::FieldRemoved { deprecated: true } => (Compatible, Rule::DeprecatedFieldRemoved),
        Shift::FieldAdded { required: true } => (Breaking, Rule::NewRequiredField),
        Shift::FieldAdded { required: false } => (Compatible, Rule::NewOptionalField),
        // Inputs stay closed: an opened object silently accepts a misspelt field.
        Shift::Opened => (Breaking, Rule::InputObjectOpened),
        Shift::Closed => (Breaking, Rule::InputObjectClosed),
        Shift::Annotation => (Compatible, Rule::SchemaAnnotationEdited),
    }
}

/// Outputs: callers read values, so producing more (or dropping a field) breaks them.
fn output_rule(shift: Shift) -> (ChangeKind, Rule) {
    use ChangeKind::{Breaking, Compatible};
    match shift {
        Shift::Narrowed | Shift::Closed => (Compatible, Rule::OutputNarrowed),
        Shift::Widened | Shift::Opened => (Breaking, Rule::OutputWidened),
        Shift::Changed => (Breaking, Rule::OutputChanged),
        Shift::FieldRemoved { deprecated: false } => (Breaking, Rule::OutputFieldRemoved),
        Shift::FieldRemoved { deprecated: true } => (Compatible, Rule::DeprecatedFieldRemoved),
        Shift::FieldAdded { .. } => (Compatible, Rule::OutputFieldAdded),
        Shift::Annotation => (Compatible, Rule::SchemaAnnotationEdited),
    }
}

/// What the gate concludes, given the reviews.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub breaking: usize,
    pub unreviewed: usize,
    pub accepted: usize,
    pub compatible: usize,
}

impl Verdict {
    /// Whether the new catalogue may ship.
    pub fn passes(&self) -> bool {
        self.breaking == 0 && self.unreviewed == 0
    }
}

impl Report {
    pub fn verdict(&self, review: &Review) -> Verdict {
        let count = |f: &dyn Fn(&Change) -> bool| self.changes.iter().filter(|c| f(c)).count();
        Verdict {
            breaking: count(&|c| c.kind == ChangeKind::Breaking),
            unreviewed: count(&|c| c.kind == ChangeKind::Policy && !review.accepts(c)),
            accepted: count(&|c| c.kind == ChangeKind::Policy && review.accepts(c)),
            compatible: count(&|c| c.kind == ChangeKind::Compatible),
        }
    }

    /// The status a change shows: its kind, and for a policy change whether it is reviewed.
    fn status(change: &Change, review: &Review) -> &'static str {
        match change.kind {
            ChangeKind::Breaking => "breaking",
            ChangeKind::Policy if review.accepts(change) => "policy (reviewed)",
            ChangeKind::Policy => "policy (unreviewed)",
            ChangeKind::Compatible => "compatible",
        }
    }

    /// A plain-text table, one row a change, and the verdict's line.
    pub fn to_table(&self, review: &Review) -> String {
        let header = ["status", "tool", "where", "rule", "reason"];
        let rows: Vec<[String; 5]> = self
            .changes
            .iter()
            .map(|c| {
                [
                    Report::status(c, review).to_string(),
                    c.tool.clone(),
                    c.path.clone(),
                    c.rule.as_str(),
                    c.reason.clone(),
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row.iter()).take(4) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: [&str; 5]| {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i < 4 {
                    text.push_str(&format!("{cell:<w$}  ", w = widths[i]));
                } else {
                    text.push_str(cell);
                }
            }
            text.trim_end().to_string() + "\n"
        };
        let mut out = format!("catalogue check: {} -> {}\n\n", self.old, self.new);
        if rows.is_empty() {
            out.push_str("no differences\n");
        } else {
            out.push_str(&line(header));
            for row in &rows {
                out.push_str(&line([&row[0], &row[1], &row[2], &row[3], &row[4]]));
            }
        }
        let v = self.verdict(review);
        out.push_str(&format!(
            "\n{} breaking, {} policy unreviewed, {} policy reviewed, {} compatible: {}\n",
            v.breaking,
            v.unreviewed,
            v.accepted,
            v.compatible,
            if v.passes() { "passes" } else { "FAILS" }
        ));
        out
    }

    /// The report as JSON: every change with its status, an acceptance entry to copy into a
    /// review file for each unreviewed policy change, and the verdict.
    pub fn to_json(&self, review: &Review) -> Value {
        let changes: Vec<Value> = self
            .changes
            .iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
                v["status"] = json!(Report::status(c, review));
                v
            })
            .collect();
        let to_accept: Vec<Value> = self
            .changes
            .iter()
            .filter(|c| c.kind == ChangeKind::Policy && !review.accepts(c))
            .map(|c| json!({"tool": c.tool, "rule": c.rule, "digest": c.digest}))
            .collect();
        let v = self.verdict(review);
        json!({
            "old": self.old,
            "new": self.new,
            "changes": changes,
            "unreviewed_policy_changes": to_accept,
            "verdict": {
                "breaking": v.breaking,
                "policy_unreviewed": v.unreviewed,
                "policy_reviewed": v.accepted,
                "compatible": v.compatible,
                "passes": v.passes(),
            },
        })
    }
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
