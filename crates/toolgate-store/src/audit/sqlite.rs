//! The audit table in a SQLite file, written by a trace sink beside the JSONL trace.
//!
//! Why a writer thread: a sink is called on the dispatcher's path, synchronously, and a write
//! to the file there would add to every call; so [`SqliteAudit::record`](TraceSink::record)
//! only queues the record, and one thread per sink writes the queue in order, in batches of at
//! most [`BATCH`] rows per transaction, gathered for at most [`LINGER`] (its own connection,
//! so no toolset's connection waits).
//!
//! Guarantees (those of [`crate::postgres::audit::PgAudit`]): every decision record
//! (`tool_call` events) and every egress decision (`egress` events, into `egress_decisions`,
//! tied to the call running when it was recorded: [`super::egress`]) and every gateway call's
//! upstream leg (`upstream_call` events, into `upstream_calls`) is written once, in the order
//! recorded (other kinds are not the audit's); a batch that fails (the file busy or the disk full) is kept and retried with a
//! growing pause (at most [`MAX_PAUSE`]), so nothing queued is lost while the process lives;
//! [`SqliteAudit::flush`] waits until everything queued before it is written. Refuses: a file
//! that cannot be opened or given the table, at [`SqliteAudit::open`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use toolgate_core::sql::{Sql, sqlite_error};
use toolgate_core::trace::{TraceEvent, TraceSink};

use super::row::{INSERT, Row, audit_row};
use super::store::AuditError;
use super::{egress, upstream};

/// The table and its indexes (created when missing).
pub const SCHEMA: &str = include_str!("schema.sql");

/// The longest pause between two attempts to write a batch that failed.
pub const MAX_PAUSE: Duration = Duration::from_secs(5);

/// How many records one transaction writes at most.
pub const BATCH: usize = 256;

/// How long the writer waits for more records after the first of a transaction. A commit costs
/// about what writing a row with its indexes does, so a busy server commits several calls'
/// records at once instead of one transaction per call or two. Nothing is less durable for
/// it (a queued record is in memory until written either way), and [`SqliteAudit::flush`]
/// ends the wait at once.
pub const LINGER: Duration = Duration::from_millis(10);

/// How long a writer waits for another writer of the same file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

enum Queued {
    Record(Row),
    Flush(mpsc::Sender<()>),
}

/// A trace sink that writes decision records to a SQLite file's `decisions` table.
#[derive(Debug, Clone)]
pub struct SqliteAudit {
    queue: mpsc::Sender<Queued>,
    path: Arc<PathBuf>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Queued::Record(_) => "Record",
            Queued::Flush(_) => "Flush",
        })
    }
}

/// Opens (creating when missing) the audit file at `path` with its table, for reading and
/// writing.
pub fn open_file(path: &Path) -> Result<Connection, AuditError> {
    let failed = |e: rusqlite::Error| AuditError::Open {
        path: path.display().to_string(),
        detail: e.to_string(),
    };
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(folder).map_err(|e| AuditError::Open {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
    }
    let conn = Connection::open(path).map_err(failed)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(failed)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(failed)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(failed)?;
    conn.execute_batch(SCHEMA).map_err(failed)?;
    Ok(conn)
}

/// Opens the existing audit file at `path` for reading only (a missing file is refused, never
/// created empty).
pub fn open_read_only(path: &Path) -> Result<Connection, AuditError> {
    let failed = |e: rusqlite::Error| AuditError::Open {
        path: path.display().to_string(),
        detail: e.to_string(),
    };
    if !path.exists() {
        return Err(AuditError::Open {
            path: path.display().to_string(),
            detail: "no such file: nothing has been recorded there yet".into(),
        });
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(failed)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(failed)?;
    Ok(conn)
}

impl SqliteAudit {
    /// Opens (or creates) the audit file at `path` and starts its writer thread; `instance`
    /// names this process in each row (`ask/1234`, a host name and process id).
    pub fn open(path: &Path, instance: String) -> Result<SqliteAudit, AuditError> {
        let conn = open_file(path)?;
        let (queue, pending) = mpsc::channel();
        std::thread::Builder::new()
            .name("toolgate-audit".into())
            .spawn(move || write_queue(conn, &instance, &pending))
            .map_err(|e| AuditError::Open {
                path: path.display().to_string(),
                detail: format!("the writer thread could not start: {e}"),
            })?;
        Ok(SqliteAudit {
            queue,
            path: Arc::new(path.to_path_buf()),
        })
    }

    /// The audit file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits until every record queued before this call is in the table. Blocks the thread:
    /// call it off the async threads or at the end of a command.
    pub fn flush(&self) {
        let (done, written) = mpsc::channel();
        if self.queue.send(Queued::Flush(done)).is_ok() {
            let _ = written.recv();
        }
    }

    /// [`Self::flush`], giving up after `limit`; whether everything was written.
    pub fn flush_within(&self, limit: Duration) -> bool {
        let (done, written) = mpsc::channel();
        self.queue.send(Queued::Flush(done)).is_ok() && written.recv_timeout(limit).is_ok()
    }
}

impl TraceSink for SqliteAudit {
    fn record(&self, event: Arc<dyn TraceEvent>) {
        let Some(row) = audit_row(event) else {
            return;
        };
        // A closed queue means the writer is gone (its thread panicked): nothing is left to
        // write with, and the JSONL trace, when kept, still has the record.
        if self.queue.send(Queued::Record(row)).is_err() {
            eprintln!(
                "toolgate: the audit file {} has no writer left; a record was not written (the \
                 JSONL trace, --trace, has it when kept)",
                self.path.display()
            );
        }
    }
}

fn write_queue(mut conn: Connection, instance: &str, pending: &mpsc::Receiver<Queued>) {
    let mut batch: Vec<Row> = Vec::new();
    while let Ok(first) = pending.recv() {
        let mut flushes = Vec::new();
        let deadline = Instant::now() + LINGER;
        let mut next = Some(first);
        while let Some(queued) = next.take() {
            match queued {
                Queued::Record(row) => batch.push(row),
                Queued::Flush(done) => {
                    flushes.push(done);
                    break;
                }
            }
            if batch.len() >= BATCH {
                break;
            }
            next = match pending.try_recv() {
                Ok(queued) => Some(queued),
                Err(mpsc::TryRecvError::Empty) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    (!left.is_zero())
                        .then(|| pending.recv_timeout(left).ok())
                        .flatten()
                }
                Err(mpsc::TryRecvError::Disconnected) => None,
            };
        }
        let mut pause = Duration::from_millis(50);
        let mut told = false;
        while !batch.is_empty() {
            match insert(&mut conn, instance, &batch) {
                Ok(()) => batch.clear(),
                Err(e) => {
                    // Kept and retried, never dropped; said once so a stuck audit is seen.
                    if !std::mem::replace(&mut told, true) {
                        eprintln!(
                            "toolgate: {} records could not be written to the audit file yet \
                             ({e}); retrying",
                            batch.len()
                        );
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            }
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
}

/// Writes `batch` in one transaction: all of it or none.
pub fn insert(
    conn: &mut Connection,
    instance: &str,
    batch: &[Row],
) -> Result<(), toolgate_core::sql::SqlError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite_error)?;
    for row in batch {
        match row {
            Row::Decision(row) => Sql::execute(&*tx, INSERT, &row.sqlite_params(instance))?,
            Row::Egress(row) => Sql::execute(&*tx, egress::INSERT, &row.params(instance))?,
            Row::Upstream(row) => Sql::execute(&*tx, upstream::INSERT, &row.params(instance))?,
        };
    }
    tx.commit().map_err(sqlite_error)
}
