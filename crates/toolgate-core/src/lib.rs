//! toolgate-core: the tool contract.
//!
//! A tool is declared once ([`ToolBuilder`]) with four views ([`spec`]); the [`Registry`] holds
//! them, versioned and digested; the [`Dispatcher`] is the only way to reach a handler, and it
//! validates, authorizes, asks for approval, keeps writes idempotent, enforces deadlines and
//! bounds what comes back. Errors form a closed algebra ([`ErrorCode`]).
//!
//! For remote callers (an MCP server, imported tools, code calling tools back):
//! - a call names its run and principal ([`CallRequest`]); a write's effect identity is derived
//!   from principal, tenant, run, tool and arguments, never from a transport's request id;
//! - effects outside the database are claimed, settled and released ([`idempotency::claim_on`]);
//! - approval is a channel chosen per call ([`ApprovalChannel`]): ask now, or return a ticket
//!   ([`CallResult::ApprovalRequired`]) kept in a ticket store ([`ApprovalLedger`]: SQLite here,
//!   PostgreSQL for a team) that a retry redeems;
//!   every non-approval is a typed [`Denial`];
//! - past a threshold of tools, a run can offer [`tool_search`] (FTS5 over names and
//!   descriptions, only the caller's tools) instead of every definition;
//! - tools can be declared from a runtime JSON Schema ([`ToolBuilder::from_schema`]);
//! - a handler calls other tools back through [`ToolCaller`], each call recorded with its
//!   [`Origin`] and parent, carrying the conversation's taint sources and handing back what it
//!   read and whether it wrote;
//! - what a person reads to approve a call shows every character ([`display`]): no escape
//!   sequence or bidirectional control in an argument reaches a terminal or a host's form;
//! - receipts, claims and the toolsets' statements are written once against [`sql::Sql`], so they
//!   run on SQLite and on a team's PostgreSQL alike;
//! - the trace is typed ([`TraceEvent`]): [`DecisionRecord`] here, each layer its own.
//!
//! The curated API is re-exported below; the modules stay public for the rest.

pub mod approval;
mod approval_text;
pub mod blocking;
pub mod budget;
pub mod call;
pub mod caller;
pub mod cancel;
pub mod canonical;
pub mod clock;
pub mod dispatcher;
pub mod display;
pub mod error;
pub mod error_chain;
pub mod future;
pub mod health;
pub mod idempotency;
pub mod observation;
pub mod offers;
pub mod phase_gate;
pub mod plan_tool;
pub mod principal;
pub mod question;
pub mod receipt_keys;
pub mod receipt_signing;
pub mod registry;
pub mod schema;
pub mod shape;
pub mod spec;
pub mod sql;
pub mod taint;
pub mod telemetry;
pub mod tool;
pub mod tool_search;
pub mod trace;
mod waits;

pub use approval::{
    ApprovalAnswer, ApprovalChannel, ApprovalLedger, ApprovalRequest, ApprovalTicket, Approver,
    ApproverError, Denial, DenyAll, Mode, OpenTickets, ScriptedApprover, StoredTicket,
    TicketAnswer, TicketState, TicketStore, redeemable,
};
pub use call::{
    ApprovalRecord, ApprovedVia, CallOutcome, CallRequest, CallResult, DecisionRecord, Origin,
    Outcome, Stage,
};
pub use caller::Caller;
pub use cancel::CancelToken;
pub use clock::{Clock, ManualClock, SystemClock};
pub use dispatcher::{Dispatcher, DispatcherError};
pub use error::{ErrorCode, ErrorStyle, ToolError};
pub use future::BoxFuture;
pub use idempotency::{Claim, Claimed, IdempotencyKey, Receipt, ReceiptLog, WriteEffect};
pub use observation::Observation;
pub use principal::Principal;
pub use question::{Asked, QuestionAnswer, QuestionRefused, ServerQuestion};
pub use registry::Registry;
pub use spec::{Effect, Risk, ToolSpec};
pub use tool::{
    DeclarationError, ExecContext, Tool, ToolBuilder, ToolCaller, ToolOutput, UntrustedText,
    WriteOutput,
};
pub use trace::{JsonlTrace, MemoryTrace, NoTrace, Tee, TraceEvent, TraceSink};
