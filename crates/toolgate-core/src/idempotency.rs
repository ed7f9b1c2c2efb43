//! Idempotent writes: every effect is recorded under a key, at most once.
//!
//! Two mechanisms share one receipts table:
//! - Local effects ([`run_once_on`]): the effect and its receipt are written in one write
//!   transaction (SQLite's immediate one, or PostgreSQL's under the store's advisory lock;
//!   statements through [`crate::sql::Sql`]), so for one key the effect happens at most once however many callers race, and
//!   an effect that fails leaves neither the effect nor the key.
//! - Effects outside the database ([`claim_on`], [`settle_on`], [`release_on`]): an email handed to a
//!   relay, a call to another server. The key is claimed before the effect, settled with the
//!   receipt after it, and released only when the effect surely did not happen. While a claim is
//!   unsettled (an attempt in progress, or one whose process died between effect and receipt) a
//!   second attempt is refused with a `conflict` that says what to check: the effect may have
//!   happened, and running it again could do it twice.
//!
//! Effect identity: a derived key hashes the principal, the tenant, the run, the tool and the
//! canonical arguments, so two callers making the same write make two effects; a caller-given key
//! is scoped to the principal, the tenant and the tool. A key reused for other arguments is a
//! `conflict`. A [`Receipt`] can only be made here, by recording or reading an effect: its
//! fields are private and it cannot be deserialized, so a handler cannot forge one.

use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;

use crate::canonical::digest_parts;
use crate::error::{ErrorCode, ToolError};
use crate::principal::Principal;
use crate::sql::{Sql, SqlSession, in_write_transaction};
use crate::sql_params;

/// The key a write is recorded under, plus the hash of the arguments it was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdempotencyKey {
    pub key: String,
    pub tool: String,
    pub args_hash: String,
    /// Whether the caller chose the key (rather than it being derived).
    pub caller_given: bool,
}

impl IdempotencyKey {
    /// Derived from who calls (principal and tenant), the run, the tool and the canonical
    /// arguments: a retried call in the same run lands on the same key, another caller's
    /// identical call does not.
    pub fn derived(principal: &Principal, run_id: &str, tool: &str, canonical_args: &str) -> Self {
        IdempotencyKey {
            key: digest_parts(&[
                "derived",
                &principal.tenant,
                &principal.id,
                run_id,
                tool,
                canonical_args,
            ]),
            tool: tool.into(),
            args_hash: digest_parts(&[canonical_args]),
            caller_given: false,
        }
    }

    /// Chosen by the caller, scoped to the tenant, the principal and the tool.
    pub fn given(given: &str, principal: &Principal, tool: &str, canonical_args: &str) -> Self {
        IdempotencyKey {
            key: digest_parts(&["given", &principal.tenant, &principal.id, tool, given]),
            tool: tool.into(),
            args_hash: digest_parts(&[canonical_args]),
            caller_given: true,
        }
    }
}

/// What a write did, as recorded with it. Made only by this module (recording or reading a
/// receipt); handlers receive one and pass it on.
///
/// A receipt cannot be forged, neither from JSON nor by hand (both refused by the compiler):
///
/// ```compile_fail
/// let forged: toolgate_core::Receipt = serde_json::from_str("{}").unwrap();
/// ```
///
/// ```compile_fail
/// let forged = toolgate_core::Receipt { key: String::new(), tool: String::new(),
///     result: serde_json::Value::Null, undo: None, created_at_unix: 0, duplicate: false };
/// ```
///
/// while a receipt can be read as JSON, for traces and reports:
///
/// ```
/// fn shown(receipt: &toolgate_core::Receipt) -> String {
///     serde_json::to_string(receipt).unwrap_or_default()
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipt {
    key: String,
    tool: String,
    result: Value,
    undo: Option<Value>,
    created_at_unix: u64,
    duplicate: bool,
}

impl Receipt {
    /// The idempotency key the effect is recorded under.
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The result the first call returned.
    pub fn result(&self) -> &Value {
        &self.result
    }

    /// How to revert the effect, where it can be reverted.
    pub fn undo(&self) -> Option<&Value> {
        self.undo.as_ref()
    }

    pub fn created_at_unix(&self) -> u64 {
        self.created_at_unix
    }

    /// True when this call found the key already recorded and did nothing.
    pub fn duplicate(&self) -> bool {
        self.duplicate
    }

    pub(crate) fn into_parts(self) -> (Value, Option<Value>) {
        (self.result, self.undo)
    }
}

/// What a write handler's effect produced.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteEffect {
    pub result: Value,
    pub undo: Option<Value>,
}

/// Creates the receipts and claims tables in a toolset's own database (the effect and the
/// receipt must share a database to share a transaction).
pub fn install(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS tool_receipts (
             key TEXT PRIMARY KEY,
             tool TEXT NOT NULL,
             args_hash TEXT NOT NULL,
             result TEXT NOT NULL,
             undo TEXT,
             created_at INTEGER NOT NULL
         );
         CREATE TABLE IF NOT EXISTS tool_claims (
             key TEXT PRIMARY KEY,
             tool TEXT NOT NULL,
             args_hash TEXT NOT NULL,
             what_to_check TEXT NOT NULL,
             claimed_at INTEGER NOT NULL
         );",
    )
}

/// Where a write tool's receipts are recorded, readable by the dispatcher: a call whose
/// receipt exists already happened, so it replays without running (or asking a human) again.
pub trait ReceiptLog: Send + Sync {
    /// The receipt recorded under `key` (marked `duplicate`), or `None`; a key recorded for
    /// other arguments is a `conflict`.
    fn recorded(&self, key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError>;

    /// [`Self::recorded`]'s answer when it can be had on the calling thread without waiting
    /// (a local file whose connection is free: a read of microseconds), else `None`, and the
    /// dispatcher asks [`Self::recorded`] from a blocking thread. Handing a quick read to the
    /// blocking pool costs two thread switches, more than the read (issue 39). The default
    /// never answers here.
    fn recorded_here(&self, key: &IdempotencyKey) -> Option<Result<Option<Receipt>, ToolError>> {
        let _ = key;
        None
    }
}

/// The receipt recorded under `key`, as a duplicate; a key used for other arguments is a
/// `conflict`. Reads through [`Sql`], so on SQLite and PostgreSQL alike.
pub fn recorded(conn: &dyn Sql, key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError> {
    let Some(row) = conn.query_opt(
        "SELECT tool, args_hash, result, undo, created_at FROM tool_receipts WHERE key = ?1",
        sql_params![&key.key],
    )?
    else {
        return Ok(None);
    };
    let (tool, args_hash) = (row.text(0)?, row.text(1)?);
    if tool != key.tool || args_hash != key.args_hash {
        return Err(reused_key());
    }
    Ok(Some(Receipt {
        key: key.key.clone(),
        tool,
        result: serde_json::from_str(&row.text(2)?).unwrap_or(Value::Null),
        undo: row.opt_text(3)?.and_then(|u| serde_json::from_str(&u).ok()),
        created_at_unix: u64::try_from(row.i64(4)?).unwrap_or(0),
        duplicate: true,
    }))
}

fn reused_key() -> ToolError {
    ToolError::new(
        ErrorCode::Conflict,
        "this idempotency key was already used for a different call",
    )
    .with_hint("use a new idempotency key for different arguments")
}

/// Stores the receipt of `done` under `key` inside `tx`.
fn insert_receipt(
    tx: &dyn Sql,
    key: &IdempotencyKey,
    now_unix: u64,
    done: WriteEffect,
) -> Result<Receipt, ToolError> {
    let undo_text = done.undo.as_ref().map(Value::to_string);
    tx.execute(
        "INSERT INTO tool_receipts (key, tool, args_hash, result, undo, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        sql_params![
            &key.key,
            &key.tool,
            &key.args_hash,
            done.result.to_string(),
            undo_text,
            unix_i64(now_unix)
        ],
    )?;
    Ok(Receipt {
        key: key.key.clone(),
        tool: key.tool.clone(),
        result: done.result,
        undo: done.undo,
        created_at_unix: now_unix,
        duplicate: false,
    })
}

fn unix_i64(secs: u64) -> i64 {
    i64::try_from(secs).unwrap_or(i64::MAX)
}

/// Runs `effect` at most once for `key`: in one write transaction (which serializes with every
/// other writer of the store), a recorded key returns its receipt; otherwise the effect runs
/// and its receipt is stored before commit. On SQLite and PostgreSQL alike.
pub fn run_once_on(
    session: &mut dyn SqlSession,
    key: &IdempotencyKey,
    now_unix: u64,
    effect: impl FnOnce(&dyn Sql) -> Result<WriteEffect, ToolError>,
) -> Result<Receipt, ToolError> {
    in_write_transaction(session, |tx| {
        if let Some(receipt) = recorded(tx, key)? {
            return Ok(receipt);
        }
        refuse_unsettled(tx, key)?;
        let done = effect(tx)?;
        insert_receipt(tx, key, now_unix, done)
    })
}

/// A claimed key: proof that this attempt, and no other, may perform the remote effect. It is
/// consumed by [`settle_on`] or [`release_on`].
#[derive(Debug)]
#[must_use = "a claim must be settled (the effect happened) or released (it surely did not)"]
pub struct Claim {
    key: IdempotencyKey,
}

impl Claim {
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }
}

/// What [`claim_on`] found.
#[derive(Debug)]
pub enum Claimed<T> {
    /// The key is ours now: perform the effect, then settle or release. `T` is what the local
    /// step returned (for example the draft to send).
    New(Claim, T),
    /// The effect already happened: its receipt, marked `duplicate`.
    Recorded(Receipt),
}

/// The claim's own statements, inside the caller's transaction: a recorded key returns its
/// receipt, an unsettled one is refused, else `local` runs and the claim is stored.
fn claim_in<T>(
    tx: &dyn Sql,
    key: &IdempotencyKey,
    now_unix: u64,
    what_to_check: &str,
    local: impl FnOnce() -> Result<T, ToolError>,
) -> Result<Claimed<T>, ToolError> {
    if let Some(receipt) = recorded(tx, key)? {
        return Ok(Claimed::Recorded(receipt));
    }
    refuse_unsettled(tx, key)?;
    let value = local()?;
    tx.execute(
        "INSERT INTO tool_claims (key, tool, args_hash, what_to_check, claimed_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        sql_params![
            &key.key,
            &key.tool,
            &key.args_hash,
            what_to_check,
            unix_i64(now_unix)
        ],
    )?;
    Ok(Claimed::New(Claim { key: key.clone() }, value))
}

fn unclaim(tx: &dyn Sql, claim: &Claim) -> Result<u64, ToolError> {
    Ok(tx.execute(
        "DELETE FROM tool_claims WHERE key = ?1",
        sql_params![&claim.key.key],
    )?)
}

fn lost_claim() -> ToolError {
    ToolError::internal("the claim of this write was lost before its effect was recorded")
}

/// Claims `key` before an effect outside the database. In one write transaction: a recorded
/// key returns its receipt; a key claimed by an earlier attempt that never settled is refused
/// (a `conflict` naming `what_to_check`, the thing a person must look at to learn whether the
/// effect happened); otherwise `local` runs (bookkeeping that must commit with the claim, such
/// as marking a draft `sending`) and the claim is stored with `what_to_check`.
pub fn claim_on<T>(
    session: &mut dyn SqlSession,
    key: &IdempotencyKey,
    now_unix: u64,
    what_to_check: &str,
    local: impl FnOnce(&dyn Sql) -> Result<T, ToolError>,
) -> Result<Claimed<T>, ToolError> {
    in_write_transaction(session, |tx| {
        claim_in(tx, key, now_unix, what_to_check, || local(tx))
    })
}

/// Settles a claim after the effect happened: `local` records it in the store (for example
/// the draft becomes `sent`), and the receipt is stored and the claim removed, all in one
/// transaction.
pub fn settle_on(
    session: &mut dyn SqlSession,
    claim: Claim,
    now_unix: u64,
    local: impl FnOnce(&dyn Sql) -> Result<WriteEffect, ToolError>,
) -> Result<Receipt, ToolError> {
    in_write_transaction(session, |tx| {
        if unclaim(tx, &claim)? != 1 {
            return Err(lost_claim());
        }
        let done = local(tx)?;
        insert_receipt(tx, &claim.key, now_unix, done)
    })
}

/// Releases a claim whose effect surely did not happen (it failed before it started, or was
/// refused), so a later attempt may run. `local` undoes the claim's bookkeeping.
pub fn release_on(
    session: &mut dyn SqlSession,
    claim: Claim,
    local: impl FnOnce(&dyn Sql) -> Result<(), ToolError>,
) -> Result<(), ToolError> {
    in_write_transaction(session, |tx| {
        unclaim(tx, &claim)?;
        local(tx)
    })
}

/// Refuses a key that an earlier attempt claimed and never settled or released.
fn refuse_unsettled(conn: &dyn Sql, key: &IdempotencyKey) -> Result<(), ToolError> {
    let Some(row) = conn.query_opt(
        "SELECT args_hash, what_to_check, claimed_at FROM tool_claims WHERE key = ?1",
        sql_params![&key.key],
    )?
    else {
        return Ok(());
    };
    let (args_hash, what_to_check, claimed_at) = (row.text(0)?, row.text(1)?, row.i64(2)?);
    if args_hash != key.args_hash {
        return Err(reused_key());
    }
    Err(ToolError::new(
        ErrorCode::Conflict,
        format!(
            "an earlier attempt of this `{}` call started at unix time {claimed_at} and never recorded whether it took effect, so it may already have happened; it is not run again",
            key.tool
        ),
    )
    .with_hint(format!(
        "do not retry; tell the user to check {what_to_check}"
    )))
}

/// Classifies a SQLite failure: contention is transient, anything else is ours.
pub fn store_error(e: rusqlite::Error) -> ToolError {
    let busy = matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    );
    if busy {
        ToolError::new(
            ErrorCode::TransientDependency,
            "the store is busy with another write; try again",
        )
    } else {
        ToolError::internal("the store failed to complete the operation")
    }
}
#[cfg(test)]
#[path = "idempotency_tests.rs"]
mod tests;
