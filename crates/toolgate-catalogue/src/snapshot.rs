//! The catalogue snapshot: one JSON document per toolset holding, for every tool, what callers
//! and reviewers depend on: name, version, the model view (description, input and output
//! schemas), the policy (risk, effect, reason, scopes, the modes that ask a human), the
//! executor's bounds (deadline, output size, whether it writes), the error codes it may return,
//! its deprecation window, and a digest over all of it.
//!
//! Guarantees: `"format": 1` is written; reading refuses a newer format with an error naming
//! both formats, refuses fields it does not know (a snapshot this build would silently
//! misread), duplicate tool names, and a tool whose digest does not match its content (a
//! hand-edited entry could otherwise carry a review's blessing). Tools are ordered by name, so
//! two snapshots of the same catalogue are byte-identical except for the day they were taken.
//!
//! The core declares no per-tool error codes, so every tool lists the dispatcher's closed set
//! ([`toolgate_core::ErrorCode::ALL`]) by its stable names.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::approval::{Mode, approval_needed};
use toolgate_core::canonical::{canonical_json, sha256_hex};
use toolgate_core::spec::Deprecation;
use toolgate_core::{Effect, ErrorCode, Registry, Risk, ToolSpec};

/// The snapshot format this build writes and reads.
pub const FORMAT: u32 = 1;

/// A snapshot of one catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    pub format: u32,
    /// What was snapshotted: a toolset's name, or `mcp:` and the mcpServers file.
    pub source: String,
    /// The day the snapshot was taken (`YYYY-MM-DD`): a deprecation window dated by day is
    /// judged against the newer snapshot's day.
    pub taken_on: String,
    /// The registry's digest over every tool's name, version and model view.
    pub digest: String,
    pub tools: Vec<ToolEntry>,
    /// Earlier, deprecated versions served beside the current ones (a caller pins one), by
    /// name then version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<ToolEntry>,
}

/// One tool as the snapshot records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolEntry {
    pub name: String,
    pub version: u32,
    /// The description exactly as a model reads it.
    pub description: String,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    pub risk: Risk,
    pub effect: Effect,
    pub risk_reason: String,
    pub scopes: Vec<String>,
    /// The approval modes in which a call asks a human first.
    pub approval_in: Vec<Mode>,
    pub writes: bool,
    pub deadline_ms: u64,
    pub max_output_bytes: usize,
    /// Stable names of the error codes a call may end in.
    pub error_codes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    /// SHA-256 over the canonical JSON of every other field of this entry.
    pub digest: String,
}

/// Why a snapshot could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("not a JSON snapshot: {0}")]
    NotJson(serde_json::Error),
    #[error("not a catalogue snapshot: no numeric \"format\" field at the top")]
    NoFormat,
    #[error(
        "snapshot format {found} is newer than this toolgate reads (format {supported}): compare it with the toolgate that wrote it, or upgrade"
    )]
    Newer { found: u64, supported: u32 },
    #[error("snapshot format {found} is not one this toolgate reads (format {supported})")]
    Unknown { found: u64, supported: u32 },
    #[error("snapshot format {FORMAT} does not fit: {0}")]
    Malformed(serde_json::Error),
    #[error("tool `{0}` appears twice in the snapshot")]
    Duplicate(String),
    #[error(
        "tool `{0}`: its digest does not match its content (edited by hand?); take the snapshot again"
    )]
    DigestMismatch(String),
}

impl Snapshot {
    /// The snapshot of every tool in `registry`, taken on `taken_on` (`YYYY-MM-DD`).
    pub fn of_registry(registry: &Registry, source: &str, taken_on: &str) -> Snapshot {
        Snapshot {
            format: FORMAT,
            source: source.to_string(),
            taken_on: taken_on.to_string(),
            digest: registry.digest().to_string(),
            tools: registry.specs().map(ToolEntry::of_spec).collect(),
            earlier: registry.earlier_specs().map(ToolEntry::of_spec).collect(),
        }
    }

    /// Reads a snapshot, refusing other formats, unknown fields and tampered entries.
    pub fn from_json(text: &str) -> Result<Snapshot, SnapshotError> {
        let value: Value = serde_json::from_str(text).map_err(SnapshotError::NotJson)?;
        let found = value
            .get("format")
            .and_then(Value::as_u64)
            .ok_or(SnapshotError::NoFormat)?;
        if found > u64::from(FORMAT) {
            return Err(SnapshotError::Newer {
                found,
                supported: FORMAT,
            });
        }
        if found != u64::from(FORMAT) {
            return Err(SnapshotError::Unknown {
                found,
                supported: FORMAT,
            });
        }
        let snapshot: Snapshot = serde_json::from_value(value).map_err(SnapshotError::Malformed)?;
        let mut seen = BTreeSet::new();
        for tool in &snapshot.tools {
            if !seen.insert(tool.name.as_str()) {
                return Err(SnapshotError::Duplicate(tool.name.clone()));
            }
            if tool.content_digest() != tool.digest {
                return Err(SnapshotError::DigestMismatch(tool.name.clone()));
            }
        }
        let mut seen_earlier = BTreeSet::new();
        for tool in &snapshot.earlier {
            let named = format!("{} version {}", tool.name, tool.version);
            if !seen_earlier.insert((tool.name.as_str(), tool.version)) {
                return Err(SnapshotError::Duplicate(named));
            }
            if tool.content_digest() != tool.digest {
                return Err(SnapshotError::DigestMismatch(named));
            }
        }
        Ok(snapshot)
    }

    /// The snapshot as pretty JSON with a final newline (what is committed).
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    pub fn tool(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The earlier version `version` of `name` served beside the current one, if recorded.
    pub fn earlier_version(&self, name: &str, version: u32) -> Option<&ToolEntry> {
        self.earlier
            .iter()
            .find(|t| t.name == name && t.version == version)
    }
}

impl ToolEntry {
    pub fn of_spec(spec: &ToolSpec) -> ToolEntry {
        let mut entry = ToolEntry {
            name: spec.name.clone(),
            version: spec.version,
            description: spec.rendered_description(),
            input_schema: spec.input_schema.clone(),
            output_schema: spec.output_schema.clone(),
            risk: spec.policy.risk,
            effect: spec.policy.effect,
            risk_reason: spec.policy.reason.clone(),
            scopes: spec.policy.scopes.clone(),
            approval_in: [Mode::Auto, Mode::Ask]
                .into_iter()
                .filter(|mode| approval_needed(spec.policy.risk, *mode))
                .collect(),
            writes: spec.executor.writes,
            deadline_ms: u64::try_from(spec.executor.deadline.as_millis()).unwrap_or(u64::MAX),
            max_output_bytes: spec.observation.max_bytes,
            error_codes: ErrorCode::ALL
                .iter()
                .map(|c| c.as_str().to_string())
                .collect(),
            deprecation: spec.deprecation.clone(),
            digest: String::new(),
        };
        entry.digest = entry.content_digest();
        entry
    }

    /// The digest of every field but `digest` itself.
    pub fn content_digest(&self) -> String {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.remove("digest");
        }
        sha256_hex(canonical_json(&value).as_bytes())
    }

    /// Recomputes the digest after an edit (tests and tools that derive a changed copy).
    pub fn reseal(&mut self) {
        self.digest = self.content_digest();
    }
}

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;
