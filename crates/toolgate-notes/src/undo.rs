//! Undo: reverting the most recent undoable writes, newest first.
//!
//! Every undoable write records an [`UndoHandle`] in its idempotency receipt (the
//! `WriteEffect.undo` the dispatcher also puts in its decision record). [`undo_last`] walks the
//! receipts newest first, skipping those without a handle (reads never have receipts; an
//! irreversible write such as `notes_delete` or `email_send` has no handle) and those already
//! undone. Undoing `email_draft` deletes the draft only while it is still a draft.
//!
//! On PostgreSQL the receipts table is shared with other toolsets: undo walks only the receipts
//! of the notes toolset's own tools ([`OWN_RECEIPTS`]), newest first by the order they were
//! recorded in (migration V5's `recorded_order`, SQLite's rowid).
//!
//! Guarantees: each undo runs in one write transaction that both reverts the effect and
//! records the receipt as undone, so an undo is applied at most once however many processes
//! race; a failure leaves that write as it was (and reports how many were undone before it);
//! note ids are never reused, so a handle can only ever touch the notes its write touched;
//! a note that has since disappeared is reported, not an error. The receipt itself is kept:
//! replaying the original call with the same idempotency key returns the original receipt and
//! does not redo the write.

use serde::{Deserialize, Serialize};
use toolgate_core::sql::{Dialect, Sql, SqlError, SqlSession, in_write_transaction};
use toolgate_core::{ToolError, sql_params};

use crate::store::{NotesStore, OWN_RECEIPTS};

/// How to revert one write, as stored in its receipt. New undoable tools add a variant here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum UndoHandle {
    /// Delete the notes the write created.
    DeleteNotes { note_ids: Vec<i64> },
    /// Put back the tags the notes had before the write.
    RestoreTags { notes: Vec<TagsBefore> },
    /// Delete the email draft the write saved, unless it is being sent or was sent (a sent
    /// email cannot be taken back, so its draft stays as the record of what went out).
    DeleteDraft { draft_id: i64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagsBefore {
    pub id: i64,
    /// The normalized comma list as it was.
    pub tags: String,
}

impl UndoHandle {
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// One write that was reverted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UndoneAction {
    /// The receipt's idempotency key.
    pub receipt_key: String,
    /// The tool that made the write.
    pub tool: String,
    /// When the write was made (the dispatcher clock, Unix seconds).
    pub written_at_unix: u64,
    /// What was done to revert it, in a sentence.
    pub summary: String,
    /// Notes the undo changed or deleted.
    pub note_ids: Vec<i64>,
    /// Notes the handle named that no longer exist (nothing to revert for them).
    pub missing: Vec<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error(
        "the receipt {key} of `{tool}` has an undo handle this version cannot read ({reason}); it and everything older were left as they are, after undoing {} newer write(s)", undone.len()
    )]
    UnreadableHandle {
        key: String,
        tool: String,
        reason: String,
        undone: Vec<UndoneAction>,
    },
    #[error("the store failed while undoing, after undoing {} write(s): {source}", undone.len())]
    Store {
        source: SqlError,
        undone: Vec<UndoneAction>,
    },
    /// The store could not be used at all (unreachable, or its connection lost to an earlier
    /// failure).
    #[error("the notes store is unavailable: {0}")]
    Unavailable(Box<ToolError>),
}

impl UndoError {
    /// The writes undone before the failure (they stay undone).
    pub fn undone(&self) -> &[UndoneAction] {
        match self {
            UndoError::UnreadableHandle { undone, .. } | UndoError::Store { undone, .. } => undone,
            UndoError::Unavailable(_) => &[],
        }
    }
}

/// What one pass found and did.
enum Step {
    Nothing,
    Undone(UndoneAction),
    Unreadable {
        key: String,
        tool: String,
        reason: String,
    },
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// The receipts undo may still revert, as a `FROM .. WHERE ..` (a shared PostgreSQL store
/// holds other toolsets' receipts too).
fn undoable(dialect: Dialect) -> String {
    let own = match dialect {
        Dialect::Sqlite => String::new(),
        Dialect::Postgres => format!(" AND {OWN_RECEIPTS}"),
    };
    format!(
        "FROM tool_receipts
         WHERE undo IS NOT NULL AND undo <> 'null'
           AND key NOT IN (SELECT receipt_key FROM notes_undone){own}"
    )
}

/// Newest first: the order receipts were recorded in.
fn newest_first(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => "ORDER BY rowid DESC",
        Dialect::Postgres => "ORDER BY recorded_order DESC",
    }
}

/// Undoes the newest undoable write that is not undone yet, in one transaction.
fn undo_one(session: &mut dyn SqlSession) -> Result<Step, SqlError> {
    in_write_transaction(session, undo_newest)
}

fn undo_newest(tx: &dyn Sql) -> Result<Step, SqlError> {
    let dialect = tx.dialect();
    let newest = tx
        .query_opt(
            &format!(
                "SELECT key, tool, undo, created_at {} {} LIMIT 1",
                undoable(dialect),
                newest_first(dialect)
            ),
            &[],
        )?
        .map(|r| Ok::<_, SqlError>((r.text(0)?, r.text(1)?, r.text(2)?, r.i64(3)?)))
        .transpose()?;
    let Some((key, tool, undo_text, created_at)) = newest else {
        return Ok(Step::Nothing);
    };
    let handle: UndoHandle = match serde_json::from_str(&undo_text) {
        Ok(handle) => handle,
        Err(e) => {
            return Ok(Step::Unreadable {
                key,
                tool,
                reason: e.to_string(),
            });
        }
    };
    let mut changed = Vec::new();
    let mut missing = Vec::new();
    let summary = match &handle {
        UndoHandle::DeleteNotes { note_ids } => {
            for id in note_ids {
                let gone = tx.execute("DELETE FROM notes WHERE id = ?1", sql_params![*id])? > 0;
                if gone {
                    changed.push(*id)
                } else {
                    missing.push(*id)
                }
            }
            format!(
                "deleted {} that `{tool}` created",
                plural(changed.len(), "note", "notes")
            )
        }
        UndoHandle::RestoreTags { notes } => {
            for before in notes {
                let restored = tx.execute(
                    "UPDATE notes SET tags = ?1 WHERE id = ?2",
                    sql_params![&before.tags, before.id],
                )? > 0;
                if restored {
                    changed.push(before.id)
                } else {
                    missing.push(before.id)
                }
            }
            format!(
                "restored the previous tags of {}",
                plural(changed.len(), "note", "notes")
            )
        }
        UndoHandle::DeleteDraft { draft_id } => {
            let status = tx
                .query_opt(
                    "SELECT status FROM email_drafts WHERE id = ?1",
                    sql_params![*draft_id],
                )?
                .map(|r| r.text(0))
                .transpose()?;
            match status.as_deref() {
                None => format!("draft {draft_id} that `{tool}` saved was already gone"),
                Some("draft") => {
                    tx.execute(
                        "DELETE FROM email_drafts WHERE id = ?1 AND status = 'draft'",
                        sql_params![*draft_id],
                    )?;
                    format!("deleted draft {draft_id} that `{tool}` saved")
                }
                Some(sent_or_sending) => format!(
                    "left draft {draft_id} as it is: it is {sent_or_sending}, and a sent email cannot be taken back"
                ),
            }
        }
    };
    tx.execute(
        "INSERT INTO notes_undone (receipt_key, undone_at) VALUES (?1, ?2)",
        sql_params![&key, now_unix()],
    )?;
    let summary = if missing.is_empty() {
        summary
    } else {
        format!(
            "{summary}; {} already gone",
            plural(missing.len(), "note was", "notes were")
        )
    };
    Ok(Step::Undone(UndoneAction {
        receipt_key: key,
        tool,
        written_at_unix: u64::try_from(created_at).unwrap_or(0),
        summary,
        note_ids: changed,
        missing,
    }))
}

/// Reverts the last `n` undoable writes, newest first, each in its own transaction; returns
/// what was undone (fewer than `n` when fewer were left).
pub fn undo_last(store: &NotesStore, n: usize) -> Result<Vec<UndoneAction>, UndoError> {
    let mut undone = Vec::new();
    for _ in 0..n {
        let step = store
            .with_sql(|session| Ok(undo_one(session)))
            .map_err(|e| UndoError::Unavailable(Box::new(e)))?;
        match step {
            Ok(Step::Nothing) => break,
            Ok(Step::Undone(action)) => undone.push(action),
            Ok(Step::Unreadable { key, tool, reason }) => {
                return Err(UndoError::UnreadableHandle {
                    key,
                    tool,
                    reason,
                    undone,
                });
            }
            Err(source) => return Err(UndoError::Store { source, undone }),
        }
    }
    Ok(undone)
}

/// How many writes [`undo_last`] could still revert.
pub fn undoable_count(store: &NotesStore) -> Result<usize, UndoError> {
    let counted = store
        .with_sql(|conn| {
            Ok(conn.query_i64(
                &format!("SELECT count(*) {}", undoable(conn.dialect())),
                &[],
            ))
        })
        .map_err(|e| UndoError::Unavailable(Box::new(e)))?;
    counted
        .map(|n| usize::try_from(n).unwrap_or(0))
        .map_err(|source| UndoError::Store {
            source,
            undone: Vec::new(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn handles_have_a_stable_wire_form() {
        let cases = [
            (
                UndoHandle::DeleteNotes { note_ids: vec![4] },
                json!({"action": "delete_notes", "note_ids": [4]}),
            ),
            (
                UndoHandle::RestoreTags {
                    notes: vec![TagsBefore {
                        id: 2,
                        tags: "a,b".into(),
                    }],
                },
                json!({"action": "restore_tags", "notes": [{"id": 2, "tags": "a,b"}]}),
            ),
            (
                UndoHandle::DeleteDraft { draft_id: 3 },
                json!({"action": "delete_draft", "draft_id": 3}),
            ),
        ];
        for (handle, wire) in cases {
            assert_eq!(handle.to_value(), wire);
            assert_eq!(
                serde_json::from_value::<UndoHandle>(wire).ok(),
                Some(handle)
            );
        }
    }
}
