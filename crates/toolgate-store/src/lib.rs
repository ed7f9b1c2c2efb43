//! toolgate-store: what the toolsets' SQLite stores share, below the toolsets and above the
//! contract.
//!
//! - [`audit`]: the decision records as a searchable `decisions` table on either store: the
//!   SQLite sink, the searches (filters, keyset pages, a call's tree) and their export.
//! - [`file`]: creating a store's file whole or not at all, and opening only an existing one.
//! - [`shared_conn`]: [`SharedConnection`], the one connection a toolset's handlers share
//!   (blocking work off the async threads, one call at a time, writes at most once per
//!   idempotency key with the receipt in the same transaction).
//! - [`taglist`]: the stored form of the user's tags (one comma-separated column).
//! - [`postgres`]: PostgreSQL as a team's shared store (a bounded pool, versioned migrations,
//!   the shared approval tickets) and a throwaway cluster for tests.
//!
//! Guarantees: a failed create leaves no file and no half file; a missing file is refused, never
//! created empty; a poisoned connection is an `internal` tool error, never a second panic; equal
//! tag sets are stored as equal strings. Refuses nothing else: what a store holds is the
//! toolset's business.

pub mod audit;
pub mod file;
pub mod postgres;
/// Tables a SQLite store makes with the same statement as the PostgreSQL migration that makes
/// them there (written once, in the migration).
pub mod schema {
    /// Each user's sealed downstream tokens (migration V6).
    pub const DOWNSTREAM_TOKENS: &str = include_str!("../migrations/V6__downstream_tokens.sql");
}
pub mod shared_conn;
pub mod taglist;

pub use shared_conn::SharedConnection;
