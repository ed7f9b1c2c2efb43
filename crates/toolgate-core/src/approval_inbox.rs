//! The approval inbox: tickets a person decides on elsewhere (the web console) while the call
//! that needs them waits.
//!
//! Guarantees: a human decision ([`HumanDecision`]: who, approve or decline, an optional reason,
//! when) is recorded on a ticket at most once, only for the binding the ticket was opened for,
//! and only before it expires and before it is used; whether it may be recorded is one pure
//! function, [`decidable`], which every [`TicketStore`](super::TicketStore) applies inside the
//! transaction that records it. [`InboxApprover`] opens a ticket for each request and waits,
//! polling the store (so a decision made through any instance sharing the store reaches it),
//! until a decision is recorded or the ticket expires; expiry, a decline and a store failure
//! are all a no. The ticket is spent once a decision is read, so it can never be redeemed
//! through another channel afterwards, and closed when the wait ends without one (the call was
//! cancelled), so nobody decides a call that no longer waits. Each decision the approver reads (and each expiry) is
//! one [`InboxDecision`] in its trace: who decided which call's binding, and how, beside the
//! dispatcher's record of the call.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{
    ApprovalAnswer, ApprovalLedger, ApprovalRequest, Approver, ApproverError, Denial, unix_i64,
};
use crate::clock::unix_secs;
use crate::future::BoxFuture;
use crate::principal::Principal;
use crate::trace::{NoTrace, TraceEvent, TraceSink};

/// What a person decided about a ticket, as the store records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanDecision {
    /// Who decided: their principal's tenant and id ([`super::holder`] form).
    pub decided_by: String,
    pub approved: bool,
    /// Why, in the person's words (may be empty).
    pub reason: String,
    pub decided_at_unix: i64,
}

/// A ticket as the inbox lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxTicket {
    pub token: String,
    pub binding: String,
    /// Who the ticket is issued to ([`super::holder`] form).
    pub holder: String,
    /// What the person is shown: the exact arguments, preview and taint.
    pub request: ApprovalRequest,
    pub opened_at_unix: i64,
    pub expires_at_unix: i64,
    pub used_at_unix: Option<i64>,
    pub decision: Option<HumanDecision>,
}

/// What a store reads of a ticket to decide whether a decision may be recorded on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionState {
    pub binding: String,
    pub expires_at_unix: i64,
    pub used_at_unix: Option<i64>,
    pub decided: bool,
}

/// Whether a decision may be recorded on the ticket read as `state` (`None`: unknown) by a
/// form that names `binding`, at `now_unix`. Checked in order: known, same call, undecided and
/// unused, unexpired.
pub fn decidable(
    state: Option<&DecisionState>,
    binding: &str,
    now_unix: i64,
) -> Result<(), Denial> {
    let ticket = state.ok_or(Denial::UnknownTicket)?;
    if ticket.binding != binding {
        return Err(Denial::BoundToOtherCall);
    }
    if ticket.decided || ticket.used_at_unix.is_some() {
        return Err(Denial::AlreadyUsed);
    }
    if now_unix >= ticket.expires_at_unix {
        return Err(Denial::Expired);
    }
    Ok(())
}

/// The most tickets one inbox page lists.
pub const INBOX_LIMIT: u32 = 200;

impl ApprovalLedger {
    /// Tickets still waiting for a person at `now` (undecided, unused, unexpired), newest
    /// first, at most [`INBOX_LIMIT`].
    pub async fn pending(&self, now: SystemTime) -> Result<Vec<InboxTicket>, Denial> {
        self.store
            .pending(unix_i64(unix_secs(now)), INBOX_LIMIT)
            .await
    }

    /// The ticket `token`, whatever its state.
    pub async fn ticket(&self, token: &str) -> Result<Option<InboxTicket>, Denial> {
        self.store.ticket(token).await
    }

    /// Records `decision` on ticket `token`, whose binding the deciding form named as
    /// `binding` ([`decidable`] decides, in the store's transaction).
    pub async fn decide(
        &self,
        token: &str,
        binding: &str,
        decision: &HumanDecision,
    ) -> Result<(), Denial> {
        self.store.decide(token, binding, decision).await
    }
}

/// What the inbox approver records when the wait ends: the call (tool, binding, requester),
/// who decided and how, or that nobody did before the ticket expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InboxDecision {
    pub tool: String,
    pub binding: String,
    /// The requesting principal's id.
    pub requested_by: String,
    /// `approved`, `declined` or `expired`.
    pub outcome: &'static str,
    /// Who decided ([`super::holder`] form); none when it expired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

impl TraceEvent for InboxDecision {
    fn kind(&self) -> &'static str {
        "approval_decision"
    }

    fn attributes(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// Asks through the inbox: opens a ticket for the request and waits for a person's decision.
#[derive(Clone)]
pub struct InboxApprover {
    ledger: Arc<ApprovalLedger>,
    tenant: String,
    ttl: Duration,
    poll: Duration,
    trace: Arc<dyn TraceSink>,
}

impl std::fmt::Debug for InboxApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboxApprover")
            .field("tenant", &self.tenant)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl InboxApprover {
    /// Tickets in `ledger`, issued to the requesting principal of `tenant` (the authorization
    /// server's issuer: the approval request names only the principal's id), each waiting
    /// `ttl` for a decision.
    pub fn new(ledger: Arc<ApprovalLedger>, tenant: &str, ttl: Duration) -> Self {
        InboxApprover {
            ledger,
            tenant: tenant.into(),
            ttl,
            poll: Duration::from_millis(200),
            trace: Arc::new(NoTrace),
        }
    }

    /// Records each decision it reads in `trace` (by default, nowhere).
    pub fn with_trace(mut self, trace: Arc<dyn TraceSink>) -> Self {
        self.trace = trace;
        self
    }

    fn record(&self, request: &ApprovalRequest, decision: Option<&HumanDecision>) {
        let outcome = match decision {
            Some(d) if d.approved => "approved",
            Some(_) => "declined",
            None => "expired",
        };
        self.trace.record(Arc::new(InboxDecision {
            tool: request.tool.clone(),
            binding: request.binding.clone(),
            requested_by: request.principal.clone(),
            outcome,
            decided_by: decision.map(|d| d.decided_by.clone()),
            reason: decision.map(|d| d.reason.clone()).unwrap_or_default(),
        }));
    }

    async fn wait(&self, request: &ApprovalRequest) -> Result<ApprovalAnswer, ApproverError> {
        let principal = Principal {
            id: request.principal.clone(),
            tenant: self.tenant.clone(),
            ..Principal::local("", &[])
        };
        let ticket = self
            .ledger
            .open_inbox_ticket(request, &principal, SystemTime::now(), self.ttl)
            .await
            .map_err(|d| ApproverError::Unavailable(d.to_string()))?;
        let mut closing = Closing {
            ledger: Arc::clone(&self.ledger),
            token: ticket.token.clone(),
            armed: true,
        };
        loop {
            let now = SystemTime::now();
            let found = self
                .ledger
                .ticket(&ticket.token)
                .await
                .map_err(|d| ApproverError::Unavailable(d.to_string()))?;
            let decision = found.as_ref().and_then(|t| t.decision.clone());
            if let Some(decision) = decision {
                // Spent whatever was decided: the ticket answers this call only.
                self.ledger
                    .spend(&ticket.token, now)
                    .await
                    .map_err(|d| ApproverError::Unavailable(d.to_string()))?;
                closing.armed = false;
                self.record(request, Some(&decision));
                return Ok(answer_of(&decision));
            }
            if unix_secs(now) >= ticket.expires_at_unix || found.is_none() {
                // Spent, so a decision arriving now is refused as already used.
                let _ = self.ledger.spend(&ticket.token, now).await;
                closing.armed = false;
                self.record(request, None);
                return Ok(ApprovalAnswer::Deny {
                    reason: "nobody decided in the approval inbox before the ticket expired".into(),
                });
            }
            tokio::time::sleep(self.poll).await;
        }
    }
}

/// Closes (spends) a ticket whose wait ended without reading a decision: the call was cancelled
/// or the dispatcher stopped waiting, so nobody may decide a call that no longer waits.
struct Closing {
    ledger: Arc<ApprovalLedger>,
    token: String,
    armed: bool,
}

impl Drop for Closing {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Dropped inside the runtime that ran the wait; without one the ticket simply expires.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let ledger = Arc::clone(&self.ledger);
            let token = std::mem::take(&mut self.token);
            runtime.spawn(async move {
                let _ = ledger.spend(&token, SystemTime::now()).await;
            });
        }
    }
}

/// The answer a recorded decision gives the waiting call.
pub fn answer_of(decision: &HumanDecision) -> ApprovalAnswer {
    if decision.approved {
        ApprovalAnswer::Approve
    } else {
        let said = if decision.reason.trim().is_empty() {
            String::new()
        } else {
            format!(": {}", decision.reason.trim())
        };
        ApprovalAnswer::Deny {
            reason: format!(
                "declined in the approval inbox by {}{said}",
                decision.decided_by
            ),
        }
    }
}

impl Approver for InboxApprover {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(self.wait(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(decided: bool, used: Option<i64>) -> DecisionState {
        DecisionState {
            binding: "bind-a".into(),
            expires_at_unix: 1_060,
            used_at_unix: used,
            decided,
        }
    }

    #[test]
    fn decidable_refuses_all_but_a_fresh_ticket_for_its_own_binding() {
        let fresh = state(false, None);
        let decided = state(true, None);
        let used = state(false, Some(1_001));
        let cases = [
            (
                "a tampered ticket id",
                None,
                "bind-a",
                1_000,
                Err(Denial::UnknownTicket),
            ),
            (
                "a form for another call",
                Some(&fresh),
                "bind-b",
                1_000,
                Err(Denial::BoundToOtherCall),
            ),
            (
                "a ticket already decided",
                Some(&decided),
                "bind-a",
                1_000,
                Err(Denial::AlreadyUsed),
            ),
            (
                "a ticket already used",
                Some(&used),
                "bind-a",
                1_000,
                Err(Denial::AlreadyUsed),
            ),
            (
                "an expired ticket",
                Some(&fresh),
                "bind-a",
                1_060,
                Err(Denial::Expired),
            ),
            ("a fresh ticket", Some(&fresh), "bind-a", 1_059, Ok(())),
        ];
        for (label, state, binding, now, want) in cases {
            assert_eq!(decidable(state, binding, now), want, "{label}");
        }
    }

    #[test]
    fn a_decline_never_reads_as_an_approval() {
        let decline = HumanDecision {
            decided_by: "[\"iss\",\"bob\"]".into(),
            approved: false,
            reason: " not this week ".into(),
            decided_at_unix: 5,
        };
        assert_eq!(
            answer_of(&decline),
            ApprovalAnswer::Deny {
                reason: "declined in the approval inbox by [\"iss\",\"bob\"]: not this week".into()
            }
        );
        let approve = HumanDecision {
            approved: true,
            ..decline
        };
        assert_eq!(answer_of(&approve), ApprovalAnswer::Approve);
    }
}
