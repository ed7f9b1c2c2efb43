//! Idempotent writes: a key recorded in the same SQLite transaction as the effect.
//!
//! Guarantees: for one key, the effect happens at most once, however many callers race; a
//! duplicate returns the first receipt and changes nothing; the same key with different
//! arguments is a `conflict`; an effect that fails leaves neither the effect nor the key.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::digest_parts;
use crate::error::{ErrorCode, ToolError};

/// The key a write is recorded under, plus the hash of the arguments it was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyKey {
    pub key: String,
    pub tool: String,
    pub args_hash: String,
    /// Whether the caller chose the key (rather than it being derived).
    pub caller_given: bool,
}

impl IdempotencyKey {
    /// Derived from the run, the tool and the canonical arguments: a retried call in the same
    /// run lands on the same key.
    pub fn derived(run_id: &str, tool: &str, canonical_args: &str) -> Self {
        IdempotencyKey {
            key: digest_parts(&["derived", run_id, tool, canonical_args]),
            tool: tool.into(),
            args_hash: digest_parts(&[canonical_args]),
            caller_given: false,
        }
    }

    /// Chosen by the caller, scoped to the principal and the tool.
    pub fn given(given: &str, principal: &str, tool: &str, canonical_args: &str) -> Self {
        IdempotencyKey {
            key: digest_parts(&["given", principal, tool, given]),
            tool: tool.into(),
            args_hash: digest_parts(&[canonical_args]),
            caller_given: true,
        }
    }
}

/// What a write did, as recorded with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub key: String,
    pub tool: String,
    /// The result the first call returned.
    pub result: Value,
    /// How to revert the effect, where it can be reverted.
    pub undo: Option<Value>,
    pub created_at_unix: u64,
    /// True when this call found the key already recorded and did nothing.
    pub duplicate: bool,
}

/// What a write handler's effect produced.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteEffect {
    pub result: Value,
    pub undo: Option<Value>,
}

/// Creates the receipts table in a toolset's own database (the effect and the receipt must
/// share a database to share a transaction).
pub fn install(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS tool_receipts (
             key TEXT PRIMARY KEY,
             tool TEXT NOT NULL,
             args_hash TEXT NOT NULL,
             result TEXT NOT NULL,
             undo TEXT,
             created_at INTEGER NOT NULL
         );",
    )
}

/// Where a write tool's receipts are recorded, readable by the dispatcher: a call whose
/// receipt exists already happened, so it replays without running (or asking a human) again.
pub trait ReceiptLog: Send + Sync {
    /// The receipt recorded under `key` (marked `duplicate`), or `None`; a key recorded for
    /// other arguments is a `conflict`.
    fn recorded(&self, key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError>;
}

/// The receipt recorded under `key`, as a duplicate; a key used for other arguments is a
/// `conflict`.
pub fn recorded(conn: &Connection, key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError> {
    let existing = conn
        .query_row(
            "SELECT tool, args_hash, result, undo, created_at FROM tool_receipts WHERE key = ?1",
            params![key.key],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, Option<String>>(3)?,
                    row.get::<_, i64>(4)?,
                ))
            },
        )
        .optional()
        .map_err(store_error)?;
    let Some((tool, args_hash, result, undo, created_at)) = existing else {
        return Ok(None);
    };
    if tool != key.tool || args_hash != key.args_hash {
        return Err(ToolError::new(
            ErrorCode::Conflict,
            "this idempotency key was already used for a different call",
        )
        .with_hint("use a new idempotency key for different arguments"));
    }
    Ok(Some(Receipt {
        key: key.key.clone(),
        tool,
        result: serde_json::from_str(&result).unwrap_or(Value::Null),
        undo: undo.and_then(|u| serde_json::from_str(&u).ok()),
        created_at_unix: u64::try_from(created_at).unwrap_or(0),
        duplicate: true,
    }))
}

/// Runs `effect` at most once for `key`: in one immediate transaction, a recorded key returns
/// its receipt; otherwise the effect runs and its receipt is stored before commit.
pub fn run_once(
    conn: &mut Connection,
    key: &IdempotencyKey,
    now_unix: u64,
    effect: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<WriteEffect, ToolError>,
) -> Result<Receipt, ToolError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(store_error)?;
    if let Some(receipt) = recorded(&tx, key)? {
        return Ok(receipt);
    }
    let done = effect(&tx)?;
    let undo_text = done.undo.as_ref().map(Value::to_string);
    tx.execute(
        "INSERT INTO tool_receipts (key, tool, args_hash, result, undo, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            key.key,
            key.tool,
            key.args_hash,
            done.result.to_string(),
            undo_text,
            i64::try_from(now_unix).unwrap_or(i64::MAX)
        ],
    )
    .map_err(store_error)?;
    tx.commit().map_err(store_error)?;
    Ok(Receipt {
        key: key.key.clone(),
        tool: key.tool.clone(),
        result: done.result,
        undo: done.undo,
        created_at_unix: now_unix,
        duplicate: false,
    })
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
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn open(path: &std::path::Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE IF NOT EXISTS effects (n INTEGER);",
        )
        .unwrap();
        install(&conn).unwrap();
        conn
    }

    fn add_effect(tx: &rusqlite::Transaction<'_>) -> Result<WriteEffect, ToolError> {
        tx.execute("INSERT INTO effects (n) VALUES (1)", [])
            .map_err(store_error)?;
        Ok(WriteEffect {
            result: json!({"added": 1}),
            undo: None,
        })
    }

    #[test]
    fn sixteen_racing_duplicates_on_separate_connections_leave_one_effect() {
        let dir = tempfile::tempdir().unwrap();
        let path = Arc::new(dir.path().join("race.sqlite"));
        drop(open(&path));
        let key = IdempotencyKey::derived("run-1", "demo_add", "{}");
        let handles: Vec<_> = (0..16)
            .map(|_| {
                let path = Arc::clone(&path);
                let key = key.clone();
                std::thread::spawn(move || {
                    let mut conn = open(&path);
                    run_once(&mut conn, &key, 1, add_effect).unwrap()
                })
            })
            .collect();
        let receipts: Vec<Receipt> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let firsts = receipts.iter().filter(|r| !r.duplicate).count();
        assert_eq!(firsts, 1, "exactly one call performs the effect");
        assert!(
            receipts
                .iter()
                .all(|r| r.result == json!({"added": 1}) && r.key == key.key)
        );
        let conn = open(&path);
        let n: i64 = conn
            .query_row("SELECT count(*) FROM effects", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn failed_effect_records_neither_effect_nor_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(&dir.path().join("f.sqlite"));
        let key = IdempotencyKey::derived("run", "demo_add", "{}");
        let failed = run_once(&mut conn, &key, 1, |tx| {
            add_effect(tx)?;
            Err(ToolError::invalid("x", "refused after writing"))
        });
        assert_eq!(failed.unwrap_err().code, ErrorCode::InvalidArgument);
        let rows: i64 = conn
            .query_row(
                "SELECT (SELECT count(*) FROM effects) + (SELECT count(*) FROM tool_receipts)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(rows, 0);
        let retried = run_once(&mut conn, &key, 2, add_effect).unwrap();
        assert!(!retried.duplicate);
    }

    #[test]
    fn reusing_a_given_key_for_other_arguments_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open(&dir.path().join("c.sqlite"));
        let first = IdempotencyKey::given("k1", "alice", "demo_add", r#"{"n":1}"#);
        let second = IdempotencyKey::given("k1", "alice", "demo_add", r#"{"n":2}"#);
        run_once(&mut conn, &first, 1, add_effect).unwrap();
        let err = run_once(&mut conn, &second, 2, add_effect).unwrap_err();
        assert_eq!(err.code, ErrorCode::Conflict);
    }
}
