//! A write call's receipt, read for the audit: what the store recorded under the call's
//! idempotency key (`tool_receipts`, the table [`toolgate_core::idempotency`] writes in the
//! toolset's own database), or the claim an outside effect left unsettled (`tool_claims`).
//!
//! Why a view of its own rather than [`toolgate_core::Receipt`]: a `Receipt` can only be made by
//! recording or replaying an effect, so nothing can forge one; the audit only shows what is
//! stored, and never hands it back to a dispatcher.
//!
//! Guarantees: the key is bound as a parameter; a stored value that is not JSON is shown as the
//! text it is, never refused (the audit shows what is there); the same statement runs on SQLite
//! and PostgreSQL. Refuses: nothing; a SQLite store file that never wrote (no receipts table) is
//! read as holding [`WriteRecord::Missing`] by [`crate::audit::AuditStore::write_record`].

use serde::Serialize;
use serde_json::Value;
use toolgate_core::sql::{Sql, SqlError, SqlValue};

/// A receipt as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredReceipt {
    pub key: String,
    pub tool: String,
    /// What the write returned when it happened: what was written.
    pub result: Value,
    /// How to revert it, where it can be.
    pub undo: Option<Value>,
    pub created_at_unix: i64,
}

/// A claim on a key for an effect outside the database, not (yet) settled with a receipt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredClaim {
    pub key: String,
    pub tool: String,
    /// What a person must check before retrying: the effect may have happened.
    pub what_to_check: String,
    pub claimed_at_unix: i64,
}

/// What the store holds under a key.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum WriteRecord {
    Receipt(StoredReceipt),
    Claimed(StoredClaim),
    /// Nothing under this key: the write failed before its receipt, or the store was reset.
    Missing,
}

/// The statement that reads a receipt by key.
pub const RECEIPT: &str =
    "SELECT key, tool, result, undo, created_at FROM tool_receipts WHERE key = ?1";

/// The statement that reads a claim by key.
pub const CLAIM: &str =
    "SELECT key, tool, what_to_check, claimed_at FROM tool_claims WHERE key = ?1";

/// Stored text as JSON when it is JSON, else the text itself.
pub fn json_or_text(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// What `sql` holds under `key`: its receipt, else its unsettled claim, else nothing.
pub fn write_record_on(sql: &dyn Sql, key: &str) -> Result<WriteRecord, SqlError> {
    let params = [SqlValue::Text(key.to_owned())];
    if let Some(row) = sql.query_opt(RECEIPT, &params)? {
        return Ok(WriteRecord::Receipt(StoredReceipt {
            key: row.text(0)?,
            tool: row.text(1)?,
            result: json_or_text(row.text(2)?),
            undo: row.opt_text(3)?.map(json_or_text),
            created_at_unix: row.i64(4)?,
        }));
    }
    if let Some(row) = sql.query_opt(CLAIM, &params)? {
        return Ok(WriteRecord::Claimed(StoredClaim {
            key: row.text(0)?,
            tool: row.text(1)?,
            what_to_check: row.text(2)?,
            claimed_at_unix: row.i64(3)?,
        }));
    }
    Ok(WriteRecord::Missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_text_that_is_not_json_is_shown_as_text_not_refused() {
        for (stored, shown) in [
            (r#"{"sent":true}"#, json!({"sent": true})),
            ("not json <b>", json!("not json <b>")),
            ("", json!("")),
            ("42", json!(42)),
        ] {
            assert_eq!(json_or_text(stored.into()), shown, "{stored:?}");
        }
    }

    #[test]
    fn a_key_finds_its_receipt_else_its_claim_else_nothing() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        toolgate_core::idempotency::install(&conn).unwrap();
        conn.execute_batch(
            "INSERT INTO tool_receipts VALUES ('k1', 'notes_create', 'h', '{\"id\":7}', NULL, 1700);
             INSERT INTO tool_claims VALUES ('k2', 'email_send', 'h', 'check the outbox', 1800);",
        )
        .unwrap();
        let cases = [
            (
                "k1",
                WriteRecord::Receipt(StoredReceipt {
                    key: "k1".into(),
                    tool: "notes_create".into(),
                    result: json!({"id": 7}),
                    undo: None,
                    created_at_unix: 1700,
                }),
            ),
            (
                "k2",
                WriteRecord::Claimed(StoredClaim {
                    key: "k2".into(),
                    tool: "email_send".into(),
                    what_to_check: "check the outbox".into(),
                    claimed_at_unix: 1800,
                }),
            ),
            ("k1' OR '1'='1", WriteRecord::Missing),
            ("", WriteRecord::Missing),
        ];
        for (key, expected) in cases {
            assert_eq!(write_record_on(&conn, key).unwrap(), expected, "{key}");
        }
    }
}
