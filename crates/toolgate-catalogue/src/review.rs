//! Reviewed policy changes: a small JSON file a person commits to say "this risk lowered (this
//! scope removed, this approval dropped) is intended", so `catalogue check --accept FILE` lets
//! it pass.
//!
//! Guarantees: an acceptance names the tool, the rule and the new tool's digest, so it covers
//! exactly the reviewed definition: any later edit to the tool changes its digest and asks for
//! a new review. Only policy changes can be accepted; a breaking change cannot be reviewed
//! away. Refuses: a newer file format, unknown fields, an acceptance without a digest.
//!
//! ```json
//! {"format": 1, "accepted": [
//!   {"tool": "notes_search", "rule": "risk_lowered", "digest": "3f2a…", "note": "reads only"}
//! ]}
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::classify::{Change, ChangeKind, Rule};

pub const REVIEW_FORMAT: u32 = 1;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Review {
    pub format: u32,
    pub accepted: Vec<Accepted>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accepted {
    pub tool: String,
    pub rule: Rule,
    /// The new snapshot's digest of the tool, as `check --json` prints it.
    pub digest: String,
    /// Who reviewed it and why (free text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("not a JSON review file: {0}")]
    NotJson(serde_json::Error),
    #[error("not a review file: no numeric \"format\" field at the top")]
    NoFormat,
    #[error("review file format {found} is not one this toolgate reads (format {supported})")]
    Format { found: u64, supported: u32 },
    #[error("review file format {REVIEW_FORMAT} does not fit: {0}")]
    Malformed(serde_json::Error),
}

impl Review {
    /// No change reviewed.
    pub fn none() -> Review {
        Review {
            format: REVIEW_FORMAT,
            accepted: Vec::new(),
        }
    }

    pub fn from_json(text: &str) -> Result<Review, ReviewError> {
        let value: Value = serde_json::from_str(text).map_err(ReviewError::NotJson)?;
        let found = value
            .get("format")
            .and_then(Value::as_u64)
            .ok_or(ReviewError::NoFormat)?;
        if found != u64::from(REVIEW_FORMAT) {
            return Err(ReviewError::Format {
                found,
                supported: REVIEW_FORMAT,
            });
        }
        serde_json::from_value(value).map_err(ReviewError::Malformed)
    }

    /// Whether `change` is a policy change this review accepts for exactly that definition.
    pub fn accepts(&self, change: &Change) -> bool {
        change.kind == ChangeKind::Policy
            && self.accepted.iter().any(|a| {
                a.tool == change.tool
                    && a.rule == change.rule
                    && change.digest.as_deref() == Some(a.digest.as_str())
            })
    }
}
