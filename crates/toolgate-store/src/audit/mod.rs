//! The audit: every decision record the dispatcher makes, in a `decisions` table that can be
//! searched, and every decision of the egress exit, in `egress_decisions`, on either store (a SQLite file, or a team's PostgreSQL database).
//!
//! - [`row`]: the table's columns as taken from a decision record (one rule for both writers).
//! - [`sqlite`]: [`SqliteAudit`], the trace sink that writes the SQLite table off the call path
//!   (PostgreSQL's is [`crate::postgres::audit::PgAudit`]), and the table's schema.
//! - [`query`]: the searches as statements, built by pure functions: filters, newest first,
//!   keyset pages, a call's tree.
//! - [`tree`]: a call and the calls made from inside it, assembled from rows.
//! - [`egress`]: the egress exit's decisions, each tied to the call that caused it.
//! - [`upstream`]: a gateway call's requests to its MCP server, each tied to the call that sent
//!   it, and the reference a toolgate server behind the gateway records as their parent.
//! - [`export`]: a search written out as JSON Lines or CSV (spreadsheet-safe).
//! - [`receipts`]: a write call's receipt (or unsettled claim) as the toolset's store keeps it.
//! - [`store`]: [`AuditStore`], the one search API over both stores.
//!
//! Guarantees: a record is written once, in the order recorded, and nothing queued is lost while
//! the process lives (a store that fails is retried); the same filter returns the same rows on
//! either store; a page never re-reads the rows before it (keyset, never OFFSET). Refuses: a
//! filter value that is not one of the closed sets (outcomes, approval states) at parse time.

pub mod egress;
pub mod export;
pub mod query;
pub mod receipts;
pub mod row;
pub mod sqlite;
pub mod store;
pub mod tree;
pub mod upstream;

pub use egress::{EgressEntry, EgressRow};
pub use export::ExportFormat;
pub use query::{ApprovalFilter, AuditFilter, Cursor, OutcomeFilter};
pub use receipts::{StoredClaim, StoredReceipt, WriteRecord};
pub use row::{AuditEntry, AuditRow};
pub use sqlite::SqliteAudit;
pub use store::{AuditError, AuditStore, MAX_EGRESS, Page};
pub use tree::CallTree;
pub use upstream::{UpstreamEntry, UpstreamRow};
