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

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{
    ApprovalAnswer, ApprovalLedger, ApprovalRequest, Approver, ApproverError, Denial, NamedAnswer,
    OpenTickets, unix_i64,
};
use crate::clock::unix_secs;
use crate::future::BoxFuture;
use crate::principal::Principal;
use crate::spec::Risk;
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

    /// How many tickets wait for a person at `now`: host tickets and inbox tickets, the whole
    /// store's (every instance's, when it is shared).
    pub async fn open_tickets(&self, now: SystemTime) -> Result<OpenTickets, Denial> {
        self.store.open_tickets(unix_i64(unix_secs(now))).await
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

/// Where a ticket's page is: the console's origin (known once its listener is bound, so set
/// late) followed by [`TICKET_PAGE_PATH`] and the token. Clones share the origin.
#[derive(Debug, Clone, Default)]
pub struct TicketLinks {
    origin: Arc<OnceLock<String>>,
}

/// The console's path to a ticket's page, before its token.
pub const TICKET_PAGE_PATH: &str = "/console/tickets/";

impl TicketLinks {
    /// Links with no origin yet: [`TicketLinks::link`] is `None` until one is set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Links under `origin` (`https://mcp.example.org`, no trailing slash); the first origin
    /// set stays.
    pub fn set_origin(&self, origin: &str) {
        let _ = self.origin.set(origin.trim_end_matches('/').to_string());
    }

    /// The page of ticket `token`, once the origin is known.
    pub fn link(&self, token: &str) -> Option<String> {
        self.origin
            .get()
            .map(|origin| format!("{origin}{TICKET_PAGE_PATH}{token}"))
    }
}

/// What a notification that a ticket was opened says: the tool, its risk, who asked and from
/// which client, the ticket's page and its expiry. Never the arguments, the preview or any
/// secret: a notification leaves through a channel the approval does not control.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TicketOpened {
    pub tool: String,
    pub risk: Risk,
    /// The requesting principal ([`super::holder`] form).
    pub requested_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The ticket's page in the console.
    pub link: String,
    pub expires_at_unix: i64,
}

/// Why a notification was not delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    /// The exit refused the destination (not on the allowlist, a private address).
    #[error("the exit refused it: {0}")]
    Refused(String),
    /// It left and failed (no answer, an error status, the relay said no).
    #[error("delivery failed: {0}")]
    Failed(String),
}

/// Tells someone that a ticket waits (a webhook, an email). Best effort: the inbox never waits
/// for it, and a failure is only traced.
pub trait TicketNotifier: Send + Sync {
    /// The channel's name in the trace (`webhook`, `email`).
    fn channel(&self) -> &'static str;

    fn notify<'a>(&'a self, opened: &'a TicketOpened) -> BoxFuture<'a, Result<(), NotifyError>>;
}

/// What became of one notification: the trace line `approval_notification`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotificationRecord {
    pub channel: &'static str,
    pub tool: String,
    /// `sent`, `refused` or `failed`.
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl TraceEvent for NotificationRecord {
    fn kind(&self) -> &'static str {
        "approval_notification"
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
    links: TicketLinks,
    notifiers: Arc<[Arc<dyn TicketNotifier>]>,
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
            links: TicketLinks::new(),
            notifiers: Arc::new([]),
        }
    }

    /// Records each decision it reads in `trace` (by default, nowhere).
    pub fn with_trace(mut self, trace: Arc<dyn TraceSink>) -> Self {
        self.trace = trace;
        self
    }

    /// Links each ticket's page with `links`, and tells `notifiers` of each ticket opened
    /// (by default nobody).
    pub fn with_notifiers(
        mut self,
        links: TicketLinks,
        notifiers: Vec<Arc<dyn TicketNotifier>>,
    ) -> Self {
        self.links = links;
        self.notifiers = notifiers.into();
        self
    }

    /// Where the tickets' pages are.
    pub fn links(&self) -> &TicketLinks {
        &self.links
    }

    /// The ledger its tickets are in.
    pub fn ledger(&self) -> &Arc<ApprovalLedger> {
        &self.ledger
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

    /// The principal a request names, in this inbox's tenant.
    fn requester(&self, request: &ApprovalRequest) -> Principal {
        Principal {
            id: request.principal.clone(),
            tenant: self.tenant.clone(),
            ..Principal::local("", &[])
        }
    }

    /// Opens an inbox ticket for `request`, issued to `principal`, noting the MCP `client` it
    /// came from, and tells the notifiers (on their own task: nothing waits for them).
    pub async fn open(
        &self,
        request: &ApprovalRequest,
        principal: &Principal,
        client: Option<&str>,
    ) -> Result<super::ApprovalTicket, ApproverError> {
        let ticket = self
            .ledger
            .open_inbox_ticket_from(request, principal, (SystemTime::now(), self.ttl), client)
            .await
            .map_err(|d| ApproverError::Unavailable(d.to_string()))?;
        self.announce(&ticket, principal, client);
        Ok(ticket)
    }

    fn announce(
        &self,
        ticket: &super::ApprovalTicket,
        principal: &Principal,
        client: Option<&str>,
    ) {
        let (Some(link), false) = (self.links.link(&ticket.token), self.notifiers.is_empty())
        else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let opened = TicketOpened {
            tool: ticket.request.tool.clone(),
            risk: ticket.request.risk,
            requested_by: super::holder(principal),
            client: client.map(str::to_string),
            link,
            expires_at_unix: unix_i64(ticket.expires_at_unix),
        };
        for notifier in self.notifiers.iter() {
            let notifier = Arc::clone(notifier);
            let trace = Arc::clone(&self.trace);
            let opened = opened.clone();
            runtime.spawn(async move {
                let (outcome, detail) = match notifier.notify(&opened).await {
                    Ok(()) => ("sent", String::new()),
                    Err(e @ NotifyError::Refused(_)) => ("refused", e.to_string()),
                    Err(e @ NotifyError::Failed(_)) => ("failed", e.to_string()),
                };
                trace.record(Arc::new(NotificationRecord {
                    channel: notifier.channel(),
                    tool: opened.tool.clone(),
                    outcome,
                    detail,
                }));
            });
        }
    }

    /// Waits for a person's decision on inbox ticket `token` for `request` by `principal`:
    /// the ticket must be an inbox ticket issued to `principal` for `request`'s binding
    /// (whoever carried the token, a ticket for another call or caller approves nothing). A
    /// yes redeems the ticket (once, in the store's transaction); a no, an expiry or an
    /// unknown ticket spends it. Who decided is named in the answer.
    pub async fn await_decision(
        &self,
        token: &str,
        request: &ApprovalRequest,
        principal: &Principal,
    ) -> Result<NamedAnswer, ApproverError> {
        let mut closing = Closing {
            ledger: Arc::clone(&self.ledger),
            token: token.to_string(),
            armed: true,
        };
        let unavailable = |d: Denial| ApproverError::Unavailable(d.to_string());
        loop {
            let now = SystemTime::now();
            let found = self.ledger.ticket(token).await.map_err(unavailable)?;
            let Some(ticket) = found else {
                closing.armed = false;
                self.record(request, None);
                return Ok(denied(Denial::UnknownTicket.to_string()));
            };
            if ticket.binding != request.binding || ticket.holder != super::holder(principal) {
                // Left as it is: it belongs to another call, which may still be waiting.
                closing.armed = false;
                return Ok(denied(
                    if ticket.binding != request.binding {
                        Denial::BoundToOtherCall
                    } else {
                        Denial::OtherCaller
                    }
                    .to_string(),
                ));
            }
            if let Some(decision) = ticket.decision {
                closing.armed = false;
                self.record(request, Some(&decision));
                let answer = if decision.approved {
                    match self
                        .ledger
                        .redeem(token, &request.binding, principal, now)
                        .await
                    {
                        Ok(()) => ApprovalAnswer::Approve,
                        Err(denial) => ApprovalAnswer::Deny {
                            reason: denial.to_string(),
                        },
                    }
                } else {
                    // Spent whatever was decided: the ticket answers this call only.
                    self.ledger.spend(token, now).await.map_err(unavailable)?;
                    answer_of(&decision)
                };
                return Ok(NamedAnswer {
                    answer,
                    decided_by: Some(decision.decided_by),
                });
            }
            if unix_secs(now) >= unix_u64(ticket.expires_at_unix) || ticket.used_at_unix.is_some() {
                // Spent, so a decision arriving now is refused as already used.
                let _ = self.ledger.spend(token, now).await;
                closing.armed = false;
                self.record(request, None);
                return Ok(denied(
                    "nobody decided in the approval inbox before the ticket expired".into(),
                ));
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// The requester withdraws inbox ticket `token` for `request` by `principal` (the person at
    /// the host would not open its page): the ticket is spent, whatever a person decided, and
    /// the call denied with `reason`. A token for another call or caller is left as it is (it
    /// may still be waiting), so carrying someone's token withdraws nothing of theirs.
    pub async fn withdraw(
        &self,
        token: &str,
        request: &ApprovalRequest,
        principal: &Principal,
        reason: String,
    ) -> Result<NamedAnswer, ApproverError> {
        let unavailable = |d: Denial| ApproverError::Unavailable(d.to_string());
        let Some(ticket) = self.ledger.ticket(token).await.map_err(unavailable)? else {
            return Ok(denied(Denial::UnknownTicket.to_string()));
        };
        if ticket.binding != request.binding {
            return Ok(denied(Denial::BoundToOtherCall.to_string()));
        }
        if ticket.holder != super::holder(principal) {
            return Ok(denied(Denial::OtherCaller.to_string()));
        }
        self.ledger
            .spend(token, SystemTime::now())
            .await
            .map_err(unavailable)?;
        self.record(request, None);
        Ok(denied(reason))
    }

    async fn wait(&self, request: &ApprovalRequest) -> Result<NamedAnswer, ApproverError> {
        let principal = self.requester(request);
        let ticket = self.open(request, &principal, None).await?;
        self.await_decision(&ticket.token, request, &principal)
            .await
    }
}

fn denied(reason: String) -> NamedAnswer {
    NamedAnswer {
        answer: ApprovalAnswer::Deny { reason },
        decided_by: None,
    }
}

fn unix_u64(secs: i64) -> u64 {
    u64::try_from(secs).unwrap_or(0)
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
        Box::pin(async move { self.wait(request).await.map(|named| named.answer) })
    }

    fn decide_naming<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<NamedAnswer, ApproverError>> {
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

    fn request(binding: &str) -> ApprovalRequest {
        ApprovalRequest {
            binding: binding.into(),
            tool: "email_send".into(),
            version: 1,
            risk: Risk::High,
            reason: "It sends mail.".into(),
            effect: crate::spec::Effect::Irreversible,
            arguments: serde_json::json!({"draft_id": 7}),
            preview: None,
            principal: "alice".into(),
            taint: Vec::new(),
        }
    }

    fn person(id: &str) -> Principal {
        Principal {
            id: id.into(),
            tenant: "iss".into(),
            ..Principal::local("", &[])
        }
    }

    /// A token that reaches the server from a host (in a URL, a retry's state) approves only
    /// the call and caller it was opened for, once, and names who decided.
    #[tokio::test]
    async fn an_inbox_token_approves_only_its_own_call_once_naming_the_approver() {
        let ledger = Arc::new(ApprovalLedger::in_memory().unwrap());
        let inbox = InboxApprover::new(Arc::clone(&ledger), "iss", Duration::from_secs(30));
        let alice = person("alice");
        let wanted = request("bind-a");
        let ticket = inbox
            .open(&wanted, &alice, Some("OAuth client app"))
            .await
            .unwrap();
        assert_eq!(
            ledger.client_of(&ticket.token).await.unwrap().as_deref(),
            Some("OAuth client app"),
            "the ticket's page can name the requesting client"
        );
        let now = unix_i64(unix_secs(SystemTime::now()));
        let yes = HumanDecision {
            decided_by: "[\"iss\",\"bob\"]".into(),
            approved: true,
            reason: String::new(),
            decided_at_unix: now,
        };
        ledger.decide(&ticket.token, "bind-a", &yes).await.unwrap();
        let refused = |named: NamedAnswer| matches!(named.answer, ApprovalAnswer::Deny { .. });
        let other_call = inbox
            .await_decision(&ticket.token, &request("bind-b"), &alice)
            .await
            .unwrap();
        assert!(refused(other_call), "a token for another call");
        let other_caller = inbox
            .await_decision(&ticket.token, &wanted, &person("mallory"))
            .await
            .unwrap();
        assert!(refused(other_caller), "a token issued to another caller");
        let own = inbox
            .await_decision(&ticket.token, &wanted, &alice)
            .await
            .unwrap();
        assert_eq!(
            own,
            NamedAnswer {
                answer: ApprovalAnswer::Approve,
                decided_by: Some(yes.decided_by.clone()),
            }
        );
        let again = inbox
            .await_decision(&ticket.token, &wanted, &alice)
            .await
            .unwrap();
        assert!(refused(again), "a second use");
    }

    /// A host's "decline" on a retry withdraws only its own call's ticket: another call's or
    /// caller's token is left waiting, and a withdrawn ticket is redeemed by nobody, even after
    /// a person's yes.
    #[tokio::test]
    async fn a_declined_retry_spends_only_its_own_ticket_and_nothing_redeems_it_after() {
        let ledger = Arc::new(ApprovalLedger::in_memory().unwrap());
        let inbox = InboxApprover::new(Arc::clone(&ledger), "iss", Duration::from_secs(30));
        let alice = person("alice");
        let wanted = request("bind-a");
        let ticket = inbox.open(&wanted, &alice, None).await.unwrap();
        let refused = |named: &NamedAnswer| matches!(named.answer, ApprovalAnswer::Deny { .. });
        for (label, call, caller) in [
            ("another call", request("bind-b"), alice.clone()),
            ("another caller", wanted.clone(), person("mallory")),
        ] {
            let named = inbox
                .withdraw(&ticket.token, &call, &caller, "declined".into())
                .await
                .unwrap();
            assert!(refused(&named), "{label}");
            let still = ledger.ticket(&ticket.token).await.unwrap().unwrap();
            assert!(still.used_at_unix.is_none(), "{label}: left waiting");
        }
        let own = inbox
            .withdraw(
                &ticket.token,
                &wanted,
                &alice,
                "declined at the host".into(),
            )
            .await
            .unwrap();
        assert_eq!(
            own.answer,
            ApprovalAnswer::Deny {
                reason: "declined at the host".into()
            }
        );
        let now = unix_i64(unix_secs(SystemTime::now()));
        let yes = HumanDecision {
            decided_by: "[\"iss\",\"bob\"]".into(),
            approved: true,
            reason: String::new(),
            decided_at_unix: now,
        };
        let late = ledger.decide(&ticket.token, "bind-a", &yes).await;
        assert!(late.is_err(), "a withdrawn ticket is not decided: {late:?}");
        let redeemed = ledger
            .redeem(&ticket.token, "bind-a", &alice, SystemTime::now())
            .await;
        assert!(redeemed.is_err(), "{redeemed:?}");
    }

    /// Redeeming is how a retried call's ticket answer is checked: an inbox ticket's token
    /// (which reaches the host in the page's URL) redeems nothing until a person approved it.
    #[tokio::test]
    async fn an_inbox_ticket_cannot_be_redeemed_before_a_person_approves_it() {
        let ledger = Arc::new(ApprovalLedger::in_memory().unwrap());
        let inbox = InboxApprover::new(Arc::clone(&ledger), "iss", Duration::from_secs(30));
        let alice = person("alice");
        let ticket = inbox.open(&request("bind-a"), &alice, None).await.unwrap();
        let early = ledger
            .redeem(&ticket.token, "bind-a", &alice, SystemTime::now())
            .await;
        assert!(matches!(early, Err(Denial::Declined { .. })), "{early:?}");
        let yes = HumanDecision {
            decided_by: "[\"iss\",\"bob\"]".into(),
            approved: true,
            reason: String::new(),
            decided_at_unix: unix_i64(unix_secs(SystemTime::now())),
        };
        ledger.decide(&ticket.token, "bind-a", &yes).await.unwrap();
        ledger
            .redeem(&ticket.token, "bind-a", &alice, SystemTime::now())
            .await
            .unwrap();
    }

    #[test]
    fn a_tickets_link_waits_for_the_consoles_origin() {
        let links = TicketLinks::new();
        assert_eq!(links.link("t"), None);
        links.clone().set_origin("https://mcp.example.org/");
        links.set_origin("https://other.example");
        assert_eq!(
            links.link("t").as_deref(),
            Some("https://mcp.example.org/console/tickets/t")
        );
    }

    #[test]
    fn the_requesting_client_is_kept_beside_the_stored_request() {
        let json = super::super::stored_json(&request("b"), Some("OAuth client app"));
        assert_eq!(
            super::super::stored_client(&json).as_deref(),
            Some("OAuth client app")
        );
        let read = super::super::stored_request(&json, "b", "email_send");
        assert_eq!(read, request("b"));
        let without = super::super::stored_json(&request("b"), None);
        assert_eq!(super::super::stored_client(&without), None);
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
