//! What a call is and what it produced: the request a caller hands the dispatcher, the typed
//! result, and the one decision record written to the trace. Data only; the steps that produce
//! them live in [`dispatcher`](crate::dispatcher).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::{Value, json};

use crate::approval::{ApprovalChannel, ApprovalTicket, Denial, Mode, TicketAnswer};
use crate::cancel::CancelToken;
use crate::error::{ErrorCode, ErrorStyle, ToolError};
use crate::observation::Observation;
use crate::principal::Principal;
use crate::spec::{Effect, Risk};
use crate::taint::{Taint, TaintRule, TaintSources};
use crate::trace::TraceEvent;
use crate::waits::HumanWaits;

/// Where a call came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Origin {
    /// Our own tool-call loop, driven by a model.
    Loop,
    /// An MCP host, through our MCP server.
    Mcp,
    /// Model-written code in the sandbox.
    Sandbox,
    /// A tool calling another tool (a handler's `ToolCaller`).
    Tool,
    /// A person at our command line, or a test.
    Direct,
}

/// One call, as the caller presents it.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The caller's id for this call (a model's `tool_use` id); echoed in the record.
    pub call_id: String,
    /// The run (conversation, session, eval run) the call belongs to: part of a write's
    /// effect identity, so every caller must name one; an empty run is refused.
    pub run_id: String,
    pub principal: Principal,
    pub tool: String,
    /// The version of the tool the caller was written against: an earlier, deprecated version
    /// served beside the current one answers while its window is open; `None`: the current one.
    pub version: Option<u32>,
    pub arguments: Value,
    /// A caller-chosen idempotency key for writes; derived from principal, run, tool and
    /// arguments otherwise.
    pub idempotency_key: Option<String>,
    /// How a human is reached if this call needs one.
    pub approval: ApprovalChannel,
    /// The approval mode for this call; the dispatcher's default when `None`.
    pub mode: Option<Mode>,
    /// A human's answer to a ticket issued for this same call (or an approval given in advance).
    pub ticket_answer: Option<TicketAnswer>,
    pub origin: Origin,
    /// The call whose handler made this one, for nested calls.
    pub parent_call_id: Option<String>,
    pub cancel: CancelToken,
    /// The enclosing calls' waits for a human, which pause their deadlines while this call's
    /// human is asked.
    pub(crate) waits: Option<Arc<HumanWaits>>,
    /// What the caller knows of where the conversation's text came from (our loop does);
    /// the dispatcher finds the call's tainted values in it.
    pub taint_sources: Option<Arc<TaintSources>>,
}

static CALL_COUNTER: AtomicU64 = AtomicU64::new(1);

impl CallRequest {
    /// A call in run `run_id` by `principal`, origin [`Origin::Direct`], no approval channel.
    pub fn new(principal: Principal, run_id: &str, tool: &str, arguments: Value) -> Self {
        CallRequest {
            call_id: format!("call-{}", CALL_COUNTER.fetch_add(1, Ordering::Relaxed)),
            run_id: run_id.into(),
            principal,
            tool: tool.into(),
            version: None,
            arguments,
            idempotency_key: None,
            approval: ApprovalChannel::None,
            mode: None,
            ticket_answer: None,
            origin: Origin::Direct,
            parent_call_id: None,
            cancel: CancelToken::new(),
            waits: None,
            taint_sources: None,
        }
    }

    /// Moves the call to another run.
    pub fn with_run(mut self, run_id: &str) -> Self {
        self.run_id = run_id.into();
        self
    }

    pub fn with_call_id(mut self, call_id: &str) -> Self {
        self.call_id = call_id.into();
        self
    }

    pub fn with_idempotency_key(mut self, key: &str) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    pub fn with_approval(mut self, channel: ApprovalChannel) -> Self {
        self.approval = channel;
        self
    }

    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Presents an approval given in advance ([`ApprovalLedger::issue`](crate::approval::ApprovalLedger::issue)).
    pub fn with_approval_token(self, token: &str) -> Self {
        self.with_ticket_answer(token, true)
    }

    /// Carries the human's answer to the ticket `token` issued for this call.
    pub fn with_ticket_answer(mut self, token: &str, approved: bool) -> Self {
        self.ticket_answer = Some(TicketAnswer {
            token: token.into(),
            approved,
        });
        self
    }

    /// Pins the version of the tool this call was written against.
    pub fn with_version(mut self, version: u32) -> Self {
        self.version = Some(version);
        self
    }

    pub fn with_origin(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }

    pub fn with_cancel(mut self, cancel: CancelToken) -> Self {
        self.cancel = cancel;
        self
    }

    pub fn with_taint_sources(mut self, sources: Arc<TaintSources>) -> Self {
        self.taint_sources = Some(sources);
        self
    }
}

/// The step a call reached (where it stopped, if it failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Resolve,
    Catalogue,
    Validate,
    Authorize,
    Approval,
    Idempotency,
    Execute,
    Observe,
    Done,
}

/// How a human approved a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovedVia {
    /// Asked while the call waited ([`ApprovalChannel::Ask`]).
    Approver,
    /// A ticket redeemed with the human's yes.
    Ticket,
    /// The plan the person approved for exactly this call ([`crate::phase_gate`]), used once.
    Plan,
}

/// How approval went for this call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ApprovalRecord {
    NotNeeded,
    /// The same call already happened (its receipt is recorded): it replays, nothing runs, and
    /// no human is asked about an effect that will not happen again.
    Replayed,
    Approved {
        via: ApprovedVia,
    },
    /// A ticket was issued; the call ran nothing and waits for a retry with the answer.
    Pending {
        expires_at_unix: u64,
    },
    Denied {
        denial: Denial,
    },
}

impl ApprovalRecord {
    /// The record's status as written to the trace (`not_needed`, `approved`, ...).
    pub fn status(&self) -> &'static str {
        match self {
            ApprovalRecord::NotNeeded => "not_needed",
            ApprovalRecord::Replayed => "replayed",
            ApprovalRecord::Approved { .. } => "approved",
            ApprovalRecord::Pending { .. } => "pending",
            ApprovalRecord::Denied { .. } => "denied",
        }
    }
}

/// How the call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Error(ErrorCode),
    /// A human must answer first (a ticket was returned).
    ApprovalRequired,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error(code) => code.as_str(),
            Outcome::ApprovalRequired => "approval_required",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One record per call: what was asked, what was decided, what happened.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionRecord {
    #[serde(rename = "gen_ai.operation.name")]
    pub operation: &'static str,
    #[serde(rename = "gen_ai.tool.call.id")]
    pub call_id: String,
    #[serde(rename = "gen_ai.tool.name")]
    pub tool: String,
    pub tool_version: Option<u32>,
    pub run_id: String,
    pub principal: String,
    pub tenant: String,
    /// The digest of the catalogue the call was decided against ([`crate::Registry::digest`]):
    /// which tool definitions were in force, so an audit can tell catalogue versions apart.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub catalogue_digest: String,
    pub origin: Origin,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<String>,
    /// The arguments, redacted.
    pub arguments: Value,
    pub args_hash: String,
    pub risk: Option<Risk>,
    pub effect: Option<Effect>,
    pub mode: Mode,
    pub stage: Stage,
    pub outcome: Outcome,
    pub approval: ApprovalRecord,
    /// Who answered the approval (approved or declined), when the channel names the person
    /// (a console's signed-in approver); `None` when nobody was asked or the channel names no
    /// one (a terminal). The audit searches by it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    pub duplicate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<Value>,
    pub duration_us: u64,
    /// The length of the call's canonical arguments (what a span reports as bytes in); not on
    /// the JSONL line, whose `args_hash` already names them.
    #[serde(skip)]
    pub argument_bytes: usize,
    pub result_bytes: usize,
    pub truncated: bool,
    pub redactions: usize,
    /// The call's values that came from untrusted text, and where from.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taint: Vec<Taint>,
    /// The taint rule that acted on the call, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taint_rule: Option<TaintRule>,
    /// Whether a call made from inside this one (its handler's [`ToolCaller`]) went to a tool
    /// that writes, even if it was then refused or canceled: what this call may have changed
    /// is more than its own effect (a loop that remembers reads must forget them).
    ///
    /// [`ToolCaller`]: crate::tool::ToolCaller
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub nested_writes: bool,
    /// A write's receipt, signed, when the dispatcher signs receipts
    /// ([`crate::receipt_signing`]); a replay carries the first call's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<crate::receipt_signing::SignedReceipt>,
    /// The structure of what the model read, values left out ([`crate::shape`]), for a call
    /// that ran: a recorded call replays against it (`toolgate replay`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_shape: Option<crate::shape::Shape>,
}

impl DecisionRecord {
    /// A record with nothing decided yet.
    pub(crate) fn begin(request: &CallRequest, mode: Mode) -> Self {
        DecisionRecord {
            operation: "execute_tool",
            call_id: request.call_id.clone(),
            tool: request.tool.clone(),
            tool_version: None,
            run_id: request.run_id.clone(),
            principal: request.principal.id.clone(),
            tenant: request.principal.tenant.clone(),
            catalogue_digest: String::new(),
            origin: request.origin,
            parent_call_id: request.parent_call_id.clone(),
            arguments: Value::Null,
            args_hash: String::new(),
            risk: None,
            effect: None,
            mode,
            stage: Stage::Resolve,
            outcome: Outcome::Ok,
            approval: ApprovalRecord::NotNeeded,
            decided_by: None,
            idempotency_key: None,
            duplicate: false,
            undo: None,
            duration_us: 0,
            argument_bytes: 0,
            result_bytes: 0,
            truncated: false,
            redactions: 0,
            taint: Vec::new(),
            taint_rule: None,
            nested_writes: false,
            receipt: None,
            result_shape: None,
        }
    }

    /// The record of a call whose task was lost before the dispatcher could answer (the
    /// caller still owes the model one result per call id).
    pub fn lost(call_id: &str, tool: &str) -> Self {
        let mut record = DecisionRecord::begin(
            &CallRequest::new(Principal::anonymous(), "", tool, Value::Null).with_call_id(call_id),
            Mode::Auto,
        );
        record.stage = Stage::Execute;
        record.outcome = Outcome::Error(ErrorCode::Internal);
        record
    }

    /// The error code, when the call failed.
    pub fn error(&self) -> Option<ErrorCode> {
        match self.outcome {
            Outcome::Error(code) => Some(code),
            Outcome::Ok | Outcome::ApprovalRequired => None,
        }
    }
}

/// A decision record's JSON line, serialized straight from the record (the trace's hot path).
#[derive(Serialize)]
struct RecordLine<'a> {
    event: &'static str,
    time_unix_ms: u64,
    #[serde(flatten)]
    record: &'a DecisionRecord,
    #[serde(rename = "error.type", skip_serializing_if = "Option::is_none")]
    error_type: Option<&'static str>,
}

impl TraceEvent for DecisionRecord {
    fn kind(&self) -> &'static str {
        "tool_call"
    }

    fn write_line(
        &self,
        time_unix_ms: u64,
        out: &mut dyn std::io::Write,
    ) -> serde_json::Result<()> {
        let line = RecordLine {
            event: self.kind(),
            time_unix_ms,
            record: self,
            error_type: self.error().map(ErrorCode::as_str),
        };
        serde_json::to_writer(out, &line)
    }

    fn attributes(&self) -> Value {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let (Some(code), Value::Object(map)) = (self.error(), &mut value) {
            map.insert("error.type".into(), Value::String(code.as_str().into()));
        }
        value
    }
}

/// What a call produced.
#[derive(Debug, Clone)]
pub enum CallResult {
    Done(Observation),
    Failed(ToolError),
    /// A human must answer first: nothing ran, and a retry of the same call with the answer
    /// redeems the ticket.
    ApprovalRequired(ApprovalTicket),
}

/// What the caller gets back.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub result: CallResult,
    /// Shared with the trace, which holds the same record.
    pub record: Arc<DecisionRecord>,
    pub error_style: ErrorStyle,
    /// The untrusted text that calls made from inside this one read (a page a script fetched
    /// and did not print), as taint sources: a caller that keeps the conversation's sources
    /// adds them, so what a script read still taints the calls that follow.
    pub nested_untrusted: Vec<crate::taint::UntrustedSource>,
}

impl CallOutcome {
    /// Whether the model should read this result as an error (it failed, or it did not run
    /// because a human must answer first).
    pub fn is_error(&self) -> bool {
        !matches!(self.result, CallResult::Done(_))
    }

    pub fn observation(&self) -> Option<&Observation> {
        match &self.result {
            CallResult::Done(observation) => Some(observation),
            CallResult::Failed(_) | CallResult::ApprovalRequired(_) => None,
        }
    }

    pub fn error(&self) -> Option<&ToolError> {
        match &self.result {
            CallResult::Failed(error) => Some(error),
            CallResult::Done(_) | CallResult::ApprovalRequired(_) => None,
        }
    }

    pub fn ticket(&self) -> Option<&ApprovalTicket> {
        match &self.result {
            CallResult::ApprovalRequired(ticket) => Some(ticket),
            CallResult::Done(_) | CallResult::Failed(_) => None,
        }
    }

    /// The tool result as a model reads it (an error is an ordinary result with `is_error`).
    pub fn model_value(&self) -> Value {
        self.result.model_value(self.error_style)
    }

    /// [`Self::model_value`] as compact text.
    pub fn model_text(&self) -> String {
        self.result.model_text(self.error_style)
    }
}

impl CallResult {
    /// The result as a model reads it, errors in `style`.
    pub fn model_value(&self, style: ErrorStyle) -> Value {
        match self {
            CallResult::Done(observation) => observation.to_model_value(),
            CallResult::Failed(error) => error.to_model_value(style),
            CallResult::ApprovalRequired(ticket) => json!({
                "status": "approval_required",
                "message": format!(
                    "`{}` needs a human's approval first; the person was asked and nothing ran yet",
                    ticket.request.tool
                ),
            }),
        }
    }

    /// [`Self::model_value`] as compact text.
    pub fn model_text(&self, style: ErrorStyle) -> String {
        if let CallResult::Done(observation) = self {
            return observation.model_view().to_text();
        }
        match self.model_value(style) {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_text(record: &DecisionRecord) -> String {
        let mut out = Vec::new();
        record.write_line(0, &mut out).unwrap();
        let mut written: Value = serde_json::from_slice(&out).unwrap();
        written["time_unix_ms"] = json!(0);
        written.to_string()
    }

    #[test]
    fn fast_trace_line_is_the_line_the_attributes_make() {
        let ok = DecisionRecord::begin(
            &CallRequest::new(
                Principal::local("alice", &[]),
                "run-1",
                "books_get",
                json!({"ids": [1]}),
            ),
            Mode::Auto,
        );
        let mut failed = ok.clone();
        failed.outcome = Outcome::Error(ErrorCode::ApprovalDenied);
        failed.approval = ApprovalRecord::Denied {
            denial: Denial::NoChannel,
        };
        for record in [ok, failed] {
            let mut slow = crate::trace::event_line(&record);
            slow["time_unix_ms"] = json!(0);
            assert_eq!(line_text(&record), slow.to_string(), "{:?}", record.outcome);
        }
    }
}
