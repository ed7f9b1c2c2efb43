//! toolgate-core: the tool contract.
//!
//! A tool is declared once ([`ToolBuilder`]) with four views ([`spec`]); the [`Registry`] holds
//! them, versioned and digested; the [`Dispatcher`] is the only way to reach a handler, and it
//! validates, authorizes, asks for approval, keeps writes idempotent, enforces deadlines and
//! bounds what comes back. Errors form a closed algebra ([`ErrorCode`]).

pub mod approval;
pub mod cancel;
pub mod canonical;
pub mod clock;
pub mod dispatcher;
pub mod error;
pub mod idempotency;
pub mod observation;
pub mod principal;
pub mod registry;
pub mod schema;
pub mod spec;
pub mod tool;
pub mod trace;

pub use approval::{
    ApprovalAnswer, ApprovalLedger, ApprovalRequest, Approver, ApproverError, DenyAll, Mode,
    ScriptedApprover,
};
pub use cancel::CancelToken;
pub use clock::{Clock, ManualClock, SystemClock};
pub use dispatcher::{CallOutcome, CallRequest, DecisionRecord, Dispatcher, Stage};
pub use error::{ErrorCode, ErrorStyle, ToolError};
pub use idempotency::{IdempotencyKey, Receipt, WriteEffect};
pub use observation::Observation;
pub use principal::Principal;
pub use registry::Registry;
pub use spec::{Effect, Risk, ToolSpec};
pub use tool::{ExecContext, Tool, ToolBuilder, ToolOutput, UntrustedText, WriteOutput};
