//! Human approval, enforced by code.
//!
//! Guarantees: whether a call needs approval is a pure function of its risk and the mode (low
//! runs; medium asks only in `ask` mode; high asks in every mode). An approval is bound to the
//! hash of (tool, version, canonical arguments, principal), expires, and is redeemed once. No
//! approver, a timeout, an approver error or an unreadable answer are all denials.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::{canonical_json, digest_parts};

use crate::spec::{Effect, Risk};
use crate::tool::BoxFuture;

/// How much the dispatcher may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Medium-risk calls run (logged, with an undo handle); high risk still asks.
    #[default]
    Auto,
    /// Medium- and high-risk calls ask.
    Ask,
}

/// Whether a call of this risk needs a human's approval in this mode.
pub fn approval_needed(risk: Risk, mode: Mode) -> bool {
    match (risk, mode) {
        (Risk::Low, _) => false,
        (Risk::Medium, Mode::Auto) => false,
        (Risk::Medium, Mode::Ask) => true,
        (Risk::High, _) => true,
    }
}

/// What an approval covers: the arguments, and the preview when the tool has one.
pub fn bound_value(arguments: &Value, preview: Option<&Value>) -> Value {
    match preview {
        Some(p) => serde_json::json!({"arguments": arguments, "preview": p}),
        None => arguments.clone(),
    }
}

/// The hash an approval is bound to.
pub fn binding_hash(tool: &str, version: u32, arguments: &Value, principal: &str) -> String {
    digest_parts(&[
        "approval",
        tool,
        &version.to_string(),
        &canonical_json(arguments),
        principal,
    ])
}

/// What the human is shown: the exact arguments, never a paraphrase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub binding: String,
    pub tool: String,
    pub version: u32,
    pub risk: Risk,
    pub reason: String,
    pub effect: Effect,
    pub arguments: Value,
    /// What the call will do, read from the store (e.g. the email a draft id stands for);
    /// bound into the approval with the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<Value>,
    pub principal: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum ApprovalAnswer {
    Approve,
    Deny { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApproverError {
    #[error("the approver's answer could not be read: {0}")]
    Unreadable(String),
    #[error("the approver is unavailable: {0}")]
    Unavailable(String),
}

/// Asks a human (or a script standing in for one in tests).
pub trait Approver: Send + Sync {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>>;
}

/// Denies everything: the default when no human is attached.
#[derive(Debug, Default, Clone, Copy)]
pub struct DenyAll;

impl Approver for DenyAll {
    fn decide<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async {
            Ok(ApprovalAnswer::Deny {
                reason: "no human is attached to approve this call".into(),
            })
        })
    }
}

/// Approves exactly the bindings it was given, each once; denies the rest. Records every
/// request it saw, so tests can check what a human would have been shown.
#[derive(Debug, Default)]
pub struct ScriptedApprover {
    approvals: Mutex<Vec<String>>,
    seen: Mutex<Vec<ApprovalRequest>>,
}

impl ScriptedApprover {
    pub fn approving(bindings: impl IntoIterator<Item = String>) -> Self {
        ScriptedApprover {
            approvals: Mutex::new(bindings.into_iter().collect()),
            seen: Mutex::new(Vec::new()),
        }
    }

    pub fn seen(&self) -> Vec<ApprovalRequest> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Approver for ScriptedApprover {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async move {
            if let Ok(mut seen) = self.seen.lock() {
                seen.push(request.clone());
            }
            let mut approvals = self
                .approvals
                .lock()
                .map_err(|_| ApproverError::Unavailable("approval script lock poisoned".into()))?;
            match approvals.iter().position(|b| *b == request.binding) {
                Some(i) => {
                    approvals.remove(i);
                    Ok(ApprovalAnswer::Approve)
                }
                None => Ok(ApprovalAnswer::Deny {
                    reason: "not in the approval script".into(),
                }),
            }
        })
    }
}

/// Why a presented approval token was not honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RedeemError {
    #[error("no such approval was issued")]
    Unknown,
    #[error("the approval was given for a different tool, version, arguments or caller")]
    Mismatch,
    #[error("the approval was already used")]
    AlreadyUsed,
    #[error("the approval has expired")]
    Expired,
    #[error("no randomness was available to make an approval token")]
    NoRandomness,
}

#[derive(Debug, Clone)]
struct Grant {
    binding: String,
    expires_at: SystemTime,
    used: bool,
}

/// Approvals given out of band (for example through an MCP elicitation) and presented later
/// with the call they approve.
#[derive(Debug, Default)]
pub struct ApprovalLedger {
    grants: Mutex<HashMap<String, Grant>>,
}

impl ApprovalLedger {
    pub fn new() -> Self {
        ApprovalLedger::default()
    }

    /// Records an approval for `binding`, valid for `ttl` from `now`; returns its token, which
    /// is random (unguessable) so that it can travel through a host.
    pub fn issue(
        &self,
        binding: &str,
        now: SystemTime,
        ttl: Duration,
    ) -> Result<String, RedeemError> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|_| RedeemError::NoRandomness)?;
        let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let mut grants = self.grants.lock().map_err(|_| RedeemError::Unknown)?;
        grants.insert(
            token.clone(),
            Grant {
                binding: binding.into(),
                expires_at: now + ttl,
                used: false,
            },
        );
        Ok(token)
    }

    /// Consumes the approval `token` for a call whose binding is `binding`.
    pub fn redeem(&self, token: &str, binding: &str, now: SystemTime) -> Result<(), RedeemError> {
        let mut grants = self.grants.lock().map_err(|_| RedeemError::Unknown)?;
        let grant = grants.get_mut(token).ok_or(RedeemError::Unknown)?;
        if grant.binding != binding {
            return Err(RedeemError::Mismatch);
        }
        if grant.used {
            return Err(RedeemError::AlreadyUsed);
        }
        if now >= grant.expires_at {
            return Err(RedeemError::Expired);
        }
        grant.used = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn approval_needed_table() {
        let cases = [
            (Risk::Low, Mode::Auto, false),
            (Risk::Low, Mode::Ask, false),
            (Risk::Medium, Mode::Auto, false),
            (Risk::Medium, Mode::Ask, true),
            (Risk::High, Mode::Auto, true),
            (Risk::High, Mode::Ask, true),
        ];
        for (risk, mode, needed) in cases {
            assert_eq!(approval_needed(risk, mode), needed, "{risk:?} in {mode:?}");
        }
    }

    #[test]
    fn binding_changes_with_every_bound_part_but_not_key_order() {
        let base = binding_hash("email_send", 1, &json!({"a": 1, "b": 2}), "alice");
        assert_eq!(
            base,
            binding_hash("email_send", 1, &json!({"b": 2, "a": 1}), "alice")
        );
        for other in [
            binding_hash("email_draft", 1, &json!({"a": 1, "b": 2}), "alice"),
            binding_hash("email_send", 2, &json!({"a": 1, "b": 2}), "alice"),
            binding_hash("email_send", 1, &json!({"a": 1, "b": 3}), "alice"),
            binding_hash("email_send", 1, &json!({"a": 1, "b": 2}), "mallory"),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn redeem_table() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let ttl = Duration::from_secs(60);
        let ledger = ApprovalLedger::new();
        let token = ledger.issue("bind-a", t0, ttl).unwrap();
        assert_eq!(
            ledger.redeem("nope", "bind-a", t0),
            Err(RedeemError::Unknown)
        );
        assert_eq!(
            ledger.redeem(&token, "bind-b", t0),
            Err(RedeemError::Mismatch)
        );
        assert_eq!(ledger.redeem(&token, "bind-a", t0), Ok(()));
        assert_eq!(
            ledger.redeem(&token, "bind-a", t0),
            Err(RedeemError::AlreadyUsed)
        );
        let late = ledger.issue("bind-a", t0, ttl).unwrap();
        assert_eq!(
            ledger.redeem(&late, "bind-a", t0 + ttl),
            Err(RedeemError::Expired)
        );
        assert_ne!(
            token, late,
            "tokens are unique even for the same binding and time"
        );
    }
}
