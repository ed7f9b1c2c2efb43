//! Human approval, enforced by code.
//!
//! Guarantees: whether a call needs approval is a pure function of its risk and the mode (low
//! runs; medium asks only in `ask` mode; high asks in every mode). The channel a human is reached
//! through is chosen per call ([`ApprovalChannel`]): ask now and wait, hand back a ticket that a
//! retried call redeems with the human's answer, or none. Every way of not getting a yes is a
//! typed [`Denial`]: no channel, declined, timed out, an unreadable answer, an unavailable
//! approver, and for tickets unknown, expired, already used, bound to another call or issued to
//! another caller. A ticket is bound to the hash of (tool, version, canonical arguments and
//! preview, principal and its tenant), is issued to that principal of that tenant (a user of
//! the same name in another tenant is another caller), expires, and is redeemed at most once:
//! tickets live in a [`TicketStore`] (SQLite here, PostgreSQL for a team in `toolgate-store`),
//! which redeems in one transaction, so single use holds across processes sharing the store and
//! survives a restart. Whether a ticket may be redeemed is one pure function, [`redeemable`].
//! A person may also decide a ticket elsewhere (the approval inbox, [`inbox`]): the store then
//! records who decided what, once, for the ticket's binding only ([`inbox::decidable`]).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::{canonical_json, digest_parts};

use crate::future::BoxFuture;
use crate::principal::Principal;
use crate::question::{QuestionAnswer, QuestionRefused, ServerQuestion};
use crate::spec::{Effect, Risk};

#[path = "approval_inbox.rs"]
pub mod inbox;
pub use inbox::{
    DecisionState, HumanDecision, InboxApprover, InboxDecision, InboxTicket, NotifyError,
    TicketLinks, TicketNotifier, TicketOpened, decidable,
};

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

/// The hash an approval is bound to: the tool, its version, the bound value, and who asks (the
/// principal's id within its tenant).
pub fn binding_hash(tool: &str, version: u32, arguments: &Value, principal: &Principal) -> String {
    digest_parts(&[
        "approval",
        tool,
        &version.to_string(),
        &canonical_json(arguments),
        &principal.tenant,
        &principal.id,
    ])
}

/// Who a ticket is issued to, as the ledger keeps it: the tenant and the id, unambiguous
/// whatever either holds (`["acme","alice"]`).
pub fn holder(principal: &Principal) -> String {
    Value::from(vec![principal.tenant.as_str(), principal.id.as_str()]).to_string()
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
    /// The values that came from untrusted text rather than from the user, and where from
    /// (shown in plain words; not part of the binding, which covers what will happen).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taint: Vec<crate::taint::Taint>,
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

/// An answer and, when the channel names the person who gave it, who (the approval inbox's
/// signed-in approver, in [`holder`] form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedAnswer {
    pub answer: ApprovalAnswer,
    pub decided_by: Option<String>,
}

/// Asks a human (or a script standing in for one in tests).
pub trait Approver: Send + Sync {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>>;

    /// As [`Approver::decide`], naming who answered when the approver knows (the dispatcher
    /// records it as the decision record's `decided_by`); by default nobody is named.
    fn decide_naming<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<NamedAnswer, ApproverError>> {
        Box::pin(async move {
            self.decide(request).await.map(|answer| NamedAnswer {
                answer,
                decided_by: None,
            })
        })
    }

    /// Puts a question an MCP server asks during the call to the person
    /// ([`crate::question`]); by default the channel shows none, and the server hears
    /// that the person declined.
    fn ask<'a>(
        &'a self,
        question: &'a ServerQuestion,
    ) -> BoxFuture<'a, Result<QuestionAnswer, QuestionRefused>> {
        let _ = question;
        Box::pin(async {
            Err(QuestionRefused::NotShown(
                "it shows only approvals of calls".into(),
            ))
        })
    }
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

/// How a call that needs a human reaches one. Chosen by the caller for each call.
#[derive(Clone, Default)]
pub enum ApprovalChannel {
    /// Nobody can be asked: a call that needs approval is denied ([`Denial::NoChannel`]).
    #[default]
    None,
    /// Ask now and wait for the answer (our terminal; an MCP client's elicitation).
    Ask(Arc<dyn Approver>),
    /// Nobody can be asked while the call waits: the call ends with a ticket that carries the
    /// exact preview, and a retry of the same call redeems it with the human's answer (an MCP
    /// `input_required` round trip, a stateless server).
    Ticket,
}

impl std::fmt::Debug for ApprovalChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ApprovalChannel::None => "None",
            ApprovalChannel::Ask(_) => "Ask",
            ApprovalChannel::Ticket => "Ticket",
        })
    }
}

/// The human's answer to a ticket, carried by the retried call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketAnswer {
    pub token: String,
    pub approved: bool,
}

/// "A human must answer first": what a call that needs approval returns on the
/// [`ApprovalChannel::Ticket`] channel. The question shows `request` (the exact arguments and
/// preview); the answer is redeemed by retrying the same call with a [`TicketAnswer`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalTicket {
    pub token: String,
    pub request: ApprovalRequest,
    pub expires_at_unix: u64,
}

/// Why a call that needed approval did not get it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Denial {
    #[error(
        "no way to ask a human was given for this call, so nothing that needs approval can run"
    )]
    NoChannel,
    #[error("the human declined: {reason}")]
    Declined { reason: String },
    #[error("no answer within {after_ms} ms")]
    TimedOut { after_ms: u64 },
    #[error("the approver's answer could not be read: {detail}")]
    Unreadable { detail: String },
    #[error("the approver is unavailable: {detail}")]
    ApproverUnavailable { detail: String },
    #[error("no such approval was issued")]
    UnknownTicket,
    #[error("the approval has expired")]
    Expired,
    #[error("the approval was already used")]
    AlreadyUsed,
    #[error("the approval was given for a different tool, version or arguments")]
    BoundToOtherCall,
    #[error("the approval was given to another caller")]
    OtherCaller,
    #[error("the approval store failed: {detail}")]
    LedgerFailed { detail: String },
}

impl Denial {
    /// A stable name for records and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            Denial::NoChannel => "no_channel",
            Denial::Declined { .. } => "declined",
            Denial::TimedOut { .. } => "timed_out",
            Denial::Unreadable { .. } => "unreadable",
            Denial::ApproverUnavailable { .. } => "approver_unavailable",
            Denial::UnknownTicket => "unknown_ticket",
            Denial::Expired => "expired",
            Denial::AlreadyUsed => "already_used",
            Denial::BoundToOtherCall => "bound_to_other_call",
            Denial::OtherCaller => "other_caller",
            Denial::LedgerFailed { .. } => "ledger_failed",
        }
    }
}

impl From<ApproverError> for Denial {
    fn from(e: ApproverError) -> Self {
        match e {
            ApproverError::Unreadable(detail) => Denial::Unreadable { detail },
            ApproverError::Unavailable(detail) => Denial::ApproverUnavailable { detail },
        }
    }
}

/// A ticket as a ledger stores it when it is issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTicket {
    pub token: String,
    pub binding: String,
    /// Who it is issued to ([`holder`]).
    pub holder: String,
    pub tool: String,
    /// The [`ApprovalRequest`] as JSON, for the people who answer tickets.
    pub request: String,
    pub expires_at_unix: i64,
    /// Opened for the approval inbox, where a person decides it ([`InboxApprover`]); a ticket
    /// answered through the host is never listed there and cannot be decided there.
    pub inbox: bool,
}

/// What a ledger reads of a ticket to decide whether it may be redeemed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketState {
    pub binding: String,
    pub holder: String,
    pub expires_at_unix: i64,
    pub used_at_unix: Option<i64>,
    /// An approval-inbox ticket that no person has approved there: its token travels to the
    /// host (in the ticket page's URL, as `requestState`), so the host's own "approve" must
    /// never redeem it.
    pub awaits_inbox_yes: bool,
}

/// Whether the ticket read as `state` (`None`: unknown) may be redeemed by `holder` for a
/// call bound to `binding` at `now_unix`. Checked in order: known, same caller (id and
/// tenant), same call, unused, unexpired, and for an inbox ticket a person's yes recorded
/// there. Every ledger decides with this, inside the transaction that then marks the ticket
/// used.
pub fn redeemable(
    state: Option<&TicketState>,
    binding: &str,
    holder: &str,
    now_unix: i64,
) -> Result<(), Denial> {
    let ticket = state.ok_or(Denial::UnknownTicket)?;
    // Tickets written before tenants were kept hold a bare id: they match nobody.
    if ticket.holder != holder {
        return Err(Denial::OtherCaller);
    }
    if ticket.binding != binding {
        return Err(Denial::BoundToOtherCall);
    }
    if ticket.used_at_unix.is_some() {
        return Err(Denial::AlreadyUsed);
    }
    if now_unix >= ticket.expires_at_unix {
        return Err(Denial::Expired);
    }
    if ticket.awaits_inbox_yes {
        return Err(Denial::Declined {
            reason: INBOX_ONLY_REASON.into(),
        });
    }
    Ok(())
}

/// Why an inbox ticket without a person's yes is not redeemed.
const INBOX_ONLY_REASON: &str =
    "an approval-inbox ticket is approved only by a person's decision there";

/// Where tickets are kept. An implementation stores what it is given and redeems atomically:
/// the read, the [`redeemable`] decision and the marking happen in one transaction, so two
/// processes sharing the store cannot both redeem one ticket. Any failure of the store itself is
/// [`Denial::LedgerFailed`]: the call does not run.
pub trait TicketStore: Send + Sync {
    fn insert<'a>(&'a self, ticket: StoredTicket) -> BoxFuture<'a, Result<(), Denial>>;

    fn redeem<'a>(
        &'a self,
        token: &'a str,
        binding: &'a str,
        holder: &'a str,
        now_unix: i64,
    ) -> BoxFuture<'a, Result<(), Denial>>;

    /// Marks the ticket used without approving anything (an unknown or used one is left as
    /// it is).
    fn spend<'a>(&'a self, token: &'a str, now_unix: i64) -> BoxFuture<'a, Result<(), Denial>>;

    /// Inbox tickets waiting for a person at `now_unix` (undecided, unused, unexpired), newest
    /// first, at most `limit`.
    fn pending<'a>(
        &'a self,
        now_unix: i64,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<InboxTicket>, Denial>>;

    /// How many tickets wait for a person's answer at `now_unix` (unused, undecided,
    /// unexpired), host tickets and inbox tickets apart: one count for the whole store, whoever
    /// opened them.
    fn open_tickets<'a>(&'a self, now_unix: i64) -> BoxFuture<'a, Result<OpenTickets, Denial>>;

    /// The inbox ticket `token` with its decision, if any; `None` when unknown or not an inbox
    /// ticket.
    fn ticket<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<InboxTicket>, Denial>>;

    /// The MCP client noted when inbox ticket `token` was opened ([`stored_client`]); `None`
    /// when none was noted, the ticket is unknown, or the store does not keep it (the default).
    fn client<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<String>, Denial>> {
        let _ = token;
        Box::pin(async { Ok(None) })
    }

    /// Records a person's `decision` on inbox ticket `token` for a form that named `binding`:
    /// the read, [`decidable`] and the write in one transaction, so a ticket is decided once (a
    /// ticket that is not an inbox ticket is unknown here).
    fn decide<'a>(
        &'a self,
        token: &'a str,
        binding: &'a str,
        decision: &'a HumanDecision,
    ) -> BoxFuture<'a, Result<(), Denial>>;
}

/// A stored request as JSON back to what the person is shown; an unreadable one (a ticket
/// issued in advance carries none) shows as an empty request for its tool.
pub fn stored_request(json: &str, binding: &str, tool: &str) -> ApprovalRequest {
    serde_json::from_str(json).unwrap_or_else(|_| ApprovalRequest {
        binding: binding.into(),
        tool: tool.into(),
        version: 0,
        risk: Risk::High,
        reason: "the stored request could not be read".into(),
        effect: Effect::Irreversible,
        arguments: Value::Null,
        preview: None,
        principal: String::new(),
        taint: Vec::new(),
    })
}

/// The key of the stored request's JSON under which the requesting MCP client is noted.
pub const CLIENT_KEY: &str = "client";

/// The request as a ticket stores it: its JSON, with the requesting client beside its fields
/// (an extra key: a reader that does not know it still reads the request).
fn stored_json(request: &ApprovalRequest, client: Option<&str>) -> String {
    let mut value = serde_json::to_value(request).unwrap_or_default();
    if let (Some(client), Value::Object(fields)) = (client, &mut value) {
        fields.insert(CLIENT_KEY.into(), Value::String(client.into()));
    }
    value.to_string()
}

/// The requesting MCP client noted in a stored request's JSON, if any.
pub fn stored_client(json: &str) -> Option<String> {
    serde_json::from_str::<Value>(json)
        .ok()?
        .get(CLIENT_KEY)?
        .as_str()
        .map(str::to_string)
}

/// Tickets waiting for a person's answer ([`TicketStore::open_tickets`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenTickets {
    /// Tickets whose question went back to the caller, for its host to ask (MCP 2026-07-28's
    /// `input_required`): the retried call brings the answer.
    pub host: u64,
    /// Tickets in the approval inbox, waiting for a person's decision there.
    pub inbox: u64,
}

/// Approval tickets: issued for one binding and one principal, expiring, redeemed at most
/// once, in a [`TicketStore`] (SQLite here; PostgreSQL for a team, in `toolgate-store`).
#[derive(Clone)]
pub struct ApprovalLedger {
    store: Arc<dyn TicketStore>,
}

impl std::fmt::Debug for ApprovalLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalLedger").finish_non_exhaustive()
    }
}

/// Why the ledger could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("the approval ledger at {path} could not be opened: {source}")]
pub struct LedgerError {
    path: String,
    source: rusqlite::Error,
}

impl ApprovalLedger {
    /// A ledger private to this process (tickets die with it).
    pub fn in_memory() -> Result<Self, LedgerError> {
        SqliteTickets::from_conn(Connection::open_in_memory(), ":memory:").map(Self::on)
    }

    /// The ledger in the SQLite file at `path` (created if missing), shared by every process
    /// that opens it.
    pub fn open(path: &Path) -> Result<Self, LedgerError> {
        SqliteTickets::from_conn(Connection::open(path), &path.display().to_string()).map(Self::on)
    }

    /// The ledger kept in `store`.
    pub fn on(store: impl TicketStore + 'static) -> Self {
        ApprovalLedger {
            store: Arc::new(store),
        }
    }

    /// Stores a ticket for `request` (its binding), issued to `principal` (its id within its
    /// tenant), valid for `ttl` from `now`, and returns it. The token is random (unguessable),
    /// so it can travel through a host.
    pub async fn open_ticket(
        &self,
        request: &ApprovalRequest,
        principal: &Principal,
        now: SystemTime,
        ttl: Duration,
    ) -> Result<ApprovalTicket, Denial> {
        self.issue_ticket(request, principal, now, ttl, false, None)
            .await
    }

    /// As [`ApprovalLedger::open_ticket`], for the approval inbox: listed there, and decided
    /// there by a person ([`ApprovalLedger::decide`]).
    pub async fn open_inbox_ticket(
        &self,
        request: &ApprovalRequest,
        principal: &Principal,
        now: SystemTime,
        ttl: Duration,
    ) -> Result<ApprovalTicket, Denial> {
        self.issue_ticket(request, principal, now, ttl, true, None)
            .await
    }

    /// As [`ApprovalLedger::open_inbox_ticket`], noting the MCP client the call came from
    /// (its `clientInfo` name, its OAuth client id) in the stored request under
    /// [`CLIENT_KEY`], where [`stored_client`] reads it back.
    pub async fn open_inbox_ticket_from(
        &self,
        request: &ApprovalRequest,
        principal: &Principal,
        (now, ttl): (SystemTime, Duration),
        client: Option<&str>,
    ) -> Result<ApprovalTicket, Denial> {
        self.issue_ticket(request, principal, now, ttl, true, client)
            .await
    }

    async fn issue_ticket(
        &self,
        request: &ApprovalRequest,
        principal: &Principal,
        now: SystemTime,
        ttl: Duration,
        inbox: bool,
        client: Option<&str>,
    ) -> Result<ApprovalTicket, Denial> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|_| Denial::LedgerFailed {
            detail: "no randomness was available to make a ticket".into(),
        })?;
        let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let expires_at_unix = crate::clock::unix_secs(now + ttl);
        self.store
            .insert(StoredTicket {
                token: token.clone(),
                binding: request.binding.clone(),
                holder: holder(principal),
                tool: request.tool.clone(),
                request: stored_json(request, client),
                expires_at_unix: unix_i64(expires_at_unix),
                inbox,
            })
            .await?;
        Ok(ApprovalTicket {
            token,
            request: request.clone(),
            expires_at_unix,
        })
    }

    /// An approval given in advance for `binding` and `principal` (a human said yes out of
    /// band); the returned token is presented with the call as an approving [`TicketAnswer`].
    pub async fn issue(
        &self,
        binding: &str,
        principal: &Principal,
        now: SystemTime,
        ttl: Duration,
    ) -> Result<String, Denial> {
        let request = ApprovalRequest {
            binding: binding.into(),
            tool: String::new(),
            version: 0,
            risk: Risk::High,
            reason: "approved out of band".into(),
            effect: Effect::Irreversible,
            arguments: Value::Null,
            preview: None,
            principal: principal.id.clone(),
            taint: Vec::new(),
        };
        self.open_ticket(&request, principal, now, ttl)
            .await
            .map(|t| t.token)
    }

    /// Consumes ticket `token` for a call whose binding is `binding`, made by `principal`
    /// ([`redeemable`] decides; the ticket is marked used in the same transaction).
    pub async fn redeem(
        &self,
        token: &str,
        binding: &str,
        principal: &Principal,
        now: SystemTime,
    ) -> Result<(), Denial> {
        let now_unix = unix_i64(crate::clock::unix_secs(now));
        self.store
            .redeem(token, binding, &holder(principal), now_unix)
            .await
    }

    /// The MCP client the call of inbox ticket `token` came from, when it was noted (its
    /// OAuth client id, else its `clientInfo` name): what the ticket's page shows as the
    /// requesting client.
    pub async fn client_of(&self, token: &str) -> Result<Option<String>, Denial> {
        self.store.client(token).await
    }

    /// Marks ticket `token` used without approving anything (the human said no): a declined
    /// ticket cannot be redeemed later with a yes.
    pub async fn spend(&self, token: &str, now: SystemTime) -> Result<(), Denial> {
        let now_unix = unix_i64(crate::clock::unix_secs(now));
        self.store.spend(token, now_unix).await
    }
}

fn unix_i64(secs: u64) -> i64 {
    i64::try_from(secs).unwrap_or(i64::MAX)
}

/// Tickets in SQLite (a file shared by the processes that open it, or memory). The work is a
/// few statements on a local file, so it runs on the calling task.
struct SqliteTickets {
    conn: Mutex<Connection>,
}

impl SqliteTickets {
    fn from_conn(conn: rusqlite::Result<Connection>, path: &str) -> Result<Self, LedgerError> {
        let fail = |source| LedgerError {
            path: path.into(),
            source,
        };
        let conn = conn.map_err(fail)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(fail)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE IF NOT EXISTS approval_tickets (
                 token TEXT PRIMARY KEY,
                 binding TEXT NOT NULL,
                 principal TEXT NOT NULL,
                 tool TEXT NOT NULL,
                 request TEXT NOT NULL,
                 expires_at INTEGER NOT NULL,
                 used_at INTEGER
             );",
        )
        .map_err(fail)?;
        // Columns the inbox added; a ledger file from before gets them here.
        for (column, kind) in INBOX_COLUMNS {
            let present: bool = conn
                .query_row(
                    "SELECT count(*) > 0 FROM pragma_table_info('approval_tickets') WHERE name = ?1",
                    params![column],
                    |row| row.get(0),
                )
                .map_err(fail)?;
            if !present {
                conn.execute_batch(&format!(
                    "ALTER TABLE approval_tickets ADD COLUMN {column} {kind}"
                ))
                .map_err(fail)?;
            }
        }
        Ok(SqliteTickets {
            conn: Mutex::new(conn),
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Connection>, Denial> {
        self.conn.lock().map_err(|_| Denial::LedgerFailed {
            detail: "the ledger lock was poisoned by an earlier failure".into(),
        })
    }

    fn insert_now(&self, ticket: &StoredTicket) -> Result<(), Denial> {
        let conn = self.lock()?;
        conn.execute(
            "INSERT INTO approval_tickets
                 (token, binding, principal, tool, request, expires_at, opened_at, inbox)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, CAST(strftime('%s', 'now') AS INTEGER), ?7)",
            params![
                ticket.token,
                ticket.binding,
                ticket.holder,
                ticket.tool,
                ticket.request,
                ticket.expires_at_unix,
                ticket.inbox
            ],
        )
        .map_err(ledger_failed)?;
        Ok(())
    }

    fn redeem_now(
        &self,
        token: &str,
        binding: &str,
        holder: &str,
        now_unix: i64,
    ) -> Result<(), Denial> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(ledger_failed)?;
        let state = tx
            .query_row(
                "SELECT binding, principal, expires_at, used_at,
                        inbox = 1 AND coalesce(approved, 0) = 0
                 FROM approval_tickets WHERE token = ?1",
                params![token],
                |row| {
                    Ok(TicketState {
                        binding: row.get(0)?,
                        holder: row.get(1)?,
                        expires_at_unix: row.get(2)?,
                        used_at_unix: row.get(3)?,
                        awaits_inbox_yes: row.get(4)?,
                    })
                },
            )
            .optional()
            .map_err(ledger_failed)?;
        redeemable(state.as_ref(), binding, holder, now_unix)?;
        let marked = tx
            .execute(
                "UPDATE approval_tickets SET used_at = ?1 WHERE token = ?2 AND used_at IS NULL",
                params![now_unix, token],
            )
            .map_err(ledger_failed)?;
        if marked != 1 {
            return Err(Denial::AlreadyUsed);
        }
        tx.commit().map_err(ledger_failed)
    }

    fn spend_now(&self, token: &str, now_unix: i64) -> Result<(), Denial> {
        let conn = self.lock()?;
        conn.execute(
            "UPDATE approval_tickets SET used_at = ?1 WHERE token = ?2 AND used_at IS NULL",
            params![now_unix, token],
        )
        .map_err(ledger_failed)?;
        Ok(())
    }
}

/// The inbox's columns, added to a ledger file that lacks them.
const INBOX_COLUMNS: [(&str, &str); 6] = [
    ("inbox", "INTEGER NOT NULL DEFAULT 0"),
    ("opened_at", "INTEGER"),
    ("decided_by", "TEXT"),
    ("approved", "INTEGER"),
    ("decision_reason", "TEXT"),
    ("decided_at", "INTEGER"),
];

const INBOX_SELECT: &str = "SELECT token, binding, principal, tool, request, \
     coalesce(opened_at, 0), expires_at, used_at, decided_by, approved, decision_reason, \
     decided_at FROM approval_tickets";

fn inbox_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<InboxTicket> {
    let binding: String = row.get(1)?;
    let tool: String = row.get(3)?;
    let request: String = row.get(4)?;
    let decided_by: Option<String> = row.get(8)?;
    let approved: Option<bool> = row.get(9)?;
    let decision = match (decided_by, approved) {
        (Some(decided_by), Some(approved)) => Some(HumanDecision {
            decided_by,
            approved,
            reason: row.get::<_, Option<String>>(10)?.unwrap_or_default(),
            decided_at_unix: row.get::<_, Option<i64>>(11)?.unwrap_or_default(),
        }),
        _ => None,
    };
    Ok(InboxTicket {
        token: row.get(0)?,
        request: stored_request(&request, &binding, &tool),
        binding,
        holder: row.get(2)?,
        opened_at_unix: row.get(5)?,
        expires_at_unix: row.get(6)?,
        used_at_unix: row.get(7)?,
        decision,
    })
}

impl SqliteTickets {
    fn pending_now(&self, now_unix: i64, limit: u32) -> Result<Vec<InboxTicket>, Denial> {
        let conn = self.lock()?;
        let mut statement = conn
            .prepare(&format!(
                "{INBOX_SELECT} WHERE inbox = 1 AND used_at IS NULL AND decided_by IS NULL
                 AND expires_at > ?1
                 ORDER BY opened_at DESC, rowid DESC LIMIT ?2"
            ))
            .map_err(ledger_failed)?;
        let rows = statement
            .query_map(params![now_unix, limit], inbox_row)
            .map_err(ledger_failed)?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(ledger_failed)
    }

    fn open_now(&self, now_unix: i64) -> Result<OpenTickets, Denial> {
        let conn = self.lock()?;
        let mut statement = conn
            .prepare(
                "SELECT inbox, count(*) FROM approval_tickets
                 WHERE used_at IS NULL AND decided_by IS NULL AND expires_at > ?1
                 GROUP BY inbox",
            )
            .map_err(ledger_failed)?;
        let rows = statement
            .query_map(params![now_unix], |row| {
                Ok((row.get::<_, bool>(0)?, row.get::<_, i64>(1)?))
            })
            .map_err(ledger_failed)?;
        let mut open = OpenTickets::default();
        for row in rows {
            let (inbox, count) = row.map_err(ledger_failed)?;
            let count = u64::try_from(count).unwrap_or(0);
            if inbox {
                open.inbox = count;
            } else {
                open.host = count;
            }
        }
        Ok(open)
    }

    fn ticket_now(&self, token: &str) -> Result<Option<InboxTicket>, Denial> {
        let conn = self.lock()?;
        conn.query_row(
            &format!("{INBOX_SELECT} WHERE token = ?1 AND inbox = 1"),
            params![token],
            inbox_row,
        )
        .optional()
        .map_err(ledger_failed)
    }

    fn decide_now(
        &self,
        token: &str,
        binding: &str,
        decision: &HumanDecision,
    ) -> Result<(), Denial> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(ledger_failed)?;
        let state = tx
            .query_row(
                "SELECT binding, expires_at, used_at, decided_by IS NOT NULL
                 FROM approval_tickets WHERE token = ?1 AND inbox = 1",
                params![token],
                |row| {
                    Ok(DecisionState {
                        binding: row.get(0)?,
                        expires_at_unix: row.get(1)?,
                        used_at_unix: row.get(2)?,
                        decided: row.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(ledger_failed)?;
        decidable(state.as_ref(), binding, decision.decided_at_unix)?;
        let marked = tx
            .execute(
                "UPDATE approval_tickets
                 SET decided_by = ?1, approved = ?2, decision_reason = ?3, decided_at = ?4
                 WHERE token = ?5 AND decided_by IS NULL AND used_at IS NULL",
                params![
                    decision.decided_by,
                    decision.approved,
                    decision.reason,
                    decision.decided_at_unix,
                    token
                ],
            )
            .map_err(ledger_failed)?;
        if marked != 1 {
            return Err(Denial::AlreadyUsed);
        }
        tx.commit().map_err(ledger_failed)
    }
}

impl TicketStore for SqliteTickets {
    fn pending<'a>(
        &'a self,
        now_unix: i64,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<InboxTicket>, Denial>> {
        Box::pin(async move { self.pending_now(now_unix, limit) })
    }

    fn open_tickets<'a>(&'a self, now_unix: i64) -> BoxFuture<'a, Result<OpenTickets, Denial>> {
        Box::pin(async move { self.open_now(now_unix) })
    }

    fn ticket<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<InboxTicket>, Denial>> {
        Box::pin(async move { self.ticket_now(token) })
    }

    fn decide<'a>(
        &'a self,
        token: &'a str,
        binding: &'a str,
        decision: &'a HumanDecision,
    ) -> BoxFuture<'a, Result<(), Denial>> {
        Box::pin(async move { self.decide_now(token, binding, decision) })
    }

    fn insert<'a>(&'a self, ticket: StoredTicket) -> BoxFuture<'a, Result<(), Denial>> {
        Box::pin(async move { self.insert_now(&ticket) })
    }

    fn redeem<'a>(
        &'a self,
        token: &'a str,
        binding: &'a str,
        holder: &'a str,
        now_unix: i64,
    ) -> BoxFuture<'a, Result<(), Denial>> {
        Box::pin(async move { self.redeem_now(token, binding, holder, now_unix) })
    }

    fn spend<'a>(&'a self, token: &'a str, now_unix: i64) -> BoxFuture<'a, Result<(), Denial>> {
        Box::pin(async move { self.spend_now(token, now_unix) })
    }

    fn client<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<String>, Denial>> {
        Box::pin(async move {
            let conn = self.lock()?;
            let request: Option<String> = conn
                .query_row(
                    "SELECT request FROM approval_tickets WHERE token = ?1 AND inbox = 1",
                    params![token],
                    |row| row.get(0),
                )
                .optional()
                .map_err(ledger_failed)?;
            Ok(request.as_deref().and_then(stored_client))
        })
    }
}

fn ledger_failed(e: rusqlite::Error) -> Denial {
    Denial::LedgerFailed {
        detail: e.to_string(),
    }
}

#[cfg(test)]
#[path = "approval_tests.rs"]
mod tests;
