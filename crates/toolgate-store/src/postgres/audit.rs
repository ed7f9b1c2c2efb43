//! The decision records of every instance in the shared database's `decisions` table (migrations
//! V4, V7, V11), as a trace sink beside the JSONL trace; searched through
//! [`crate::audit::AuditStore`].
//!
//! Why a writer task: a sink is called on the dispatcher's path, synchronously, and a database
//! round trip there would add to every call; so [`PgAudit::record`] only queues the record, and
//! one task per instance writes the queue in order, in batches.
//!
//! Guarantees: every decision record (`tool_call` events) and egress decision (`egress` events,
//! into `egress_decisions`, migration V12) and gateway upstream leg (`upstream_call` events,
//! into `upstream_calls`, V13) is written once, in the order recorded (other kinds
//! are not the audit's; [`crate::audit::row::audit_row`] decides, as for the SQLite file);
//! while the database is unreachable the records wait in memory and the writer retries with a growing pause (at most [`MAX_PAUSE`]), so an outage
//! delays the table and loses nothing while the process lives. [`PgAudit::flush`] waits until
//! everything queued before it is written. Refuses: nothing; what it cannot write (a process
//! killed while the database was down) is still on the JSONL trace when one is kept.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use toolgate_core::trace::{TraceEvent, TraceSink};

use super::PgStore;
use crate::audit::row::{INSERT, Row, audit_row};
use crate::audit::{egress, upstream};

/// The longest pause between two attempts to write while the database is unreachable.
pub const MAX_PAUSE: Duration = Duration::from_secs(5);

/// How many records one statement writes at most.
const BATCH: usize = 64;

enum Queued {
    Record(Row),
    Flush(oneshot::Sender<()>),
}

/// A trace sink that writes decision records to the shared database.
#[derive(Debug, Clone)]
pub struct PgAudit {
    queue: mpsc::UnboundedSender<Queued>,
    /// The runtime the writer runs on, for [`PgAudit::flush_blocking`].
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Queued::Record(_) => "Record",
            Queued::Flush(_) => "Flush",
        })
    }
}

impl PgAudit {
    /// Starts the writer on the current tokio runtime; `instance` names this process in each
    /// row (a host name and port, say).
    pub fn start(store: PgStore, instance: String) -> PgAudit {
        let (queue, pending) = mpsc::unbounded_channel();
        tokio::spawn(write_queue(store, instance, pending));
        PgAudit {
            queue,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// Waits until every record queued before this call is in the table.
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.queue.send(Queued::Flush(done)).is_ok() {
            let _ = written.await;
        }
    }

    /// [`Self::flush`] from synchronous code outside any async context (a command's end),
    /// giving up after `limit`: whether everything was written, or `None` when called in an
    /// async context, where it cannot wait.
    pub fn flush_blocking(&self, limit: Duration) -> Option<bool> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return None;
        }
        Some(
            self.runtime
                .block_on(async { tokio::time::timeout(limit, self.flush()).await.is_ok() }),
        )
    }
}

impl TraceSink for PgAudit {
    fn record(&self, event: Arc<dyn TraceEvent>) {
        let Some(row) = audit_row(event) else {
            return;
        };
        // A closed queue means the runtime is shutting down: nothing is left to write with.
        if self.queue.send(Queued::Record(row)).is_err() {
            eprintln!(
                "toolgate: the shared store's audit writer has stopped; a record was not written \
                 (the JSONL trace, --trace, has it when kept)"
            );
        }
    }
}

async fn write_queue(
    store: PgStore,
    instance: String,
    mut pending: mpsc::UnboundedReceiver<Queued>,
) {
    let mut batch: Vec<Row> = Vec::new();
    while let Some(first) = pending.recv().await {
        let mut flushes = Vec::new();
        for queued in std::iter::once(first).chain(std::iter::from_fn(|| pending.try_recv().ok())) {
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
        }
        let mut pause = Duration::from_millis(100);
        let mut told = false;
        while !batch.is_empty() {
            match insert(&store, &instance, &batch).await {
                Ok(()) => batch.clear(),
                Err(e) => {
                    // Kept and retried, never dropped; said once so a stuck audit is seen.
                    if !std::mem::replace(&mut told, true) {
                        eprintln!(
                            "toolgate: {} records could not be written to the shared store's \
                             audit yet ({e}); retrying",
                            batch.len()
                        );
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
            }
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
}

async fn insert(
    store: &PgStore,
    instance: &str,
    batch: &[Row],
) -> Result<(), toolgate_core::ToolError> {
    let mut client = store.client().await?;
    let failed = |e: tokio_postgres::Error| super::unreachable_store(store.shown(), &e.to_string());
    let tx = client.transaction().await.map_err(failed)?;
    let decisions = tx
        .prepare_cached(&toolgate_core::sql::postgres_placeholders(INSERT))
        .await
        .map_err(failed)?;
    let egress_decisions = tx
        .prepare_cached(&toolgate_core::sql::postgres_placeholders(egress::INSERT))
        .await
        .map_err(failed)?;
    let upstream_calls = tx
        .prepare_cached(&toolgate_core::sql::postgres_placeholders(upstream::INSERT))
        .await
        .map_err(failed)?;
    for row in batch {
        match row {
            // The same columns as the SQLite audit, by the same rule.
            Row::Decision(row) => {
                tx.execute(
                    &decisions,
                    &[
                        &row.time_unix_ms,
                        &instance,
                        &row.call_id,
                        &row.parent_call_id,
                        &row.run_id,
                        &row.tenant,
                        &row.principal,
                        &row.tool,
                        &row.tool_version,
                        &row.origin,
                        &row.risk,
                        &row.stage,
                        &row.outcome,
                        &row.approval,
                        &row.denial,
                        &row.decided_by,
                        &row.idempotency_key,
                        &row.duplicate,
                        &row.catalogue_digest,
                        &tokio_postgres::types::Json(row.record.raw()),
                    ],
                )
                .await
            }
            Row::Egress(row) => {
                tx.execute(
                    &egress_decisions,
                    &[
                        &row.time_unix_ms,
                        &instance,
                        &row.call_id,
                        &row.run_id,
                        &row.decision,
                        &row.method,
                        &row.scheme,
                        &row.host,
                        &row.port,
                        &row.url,
                        &row.status,
                        &row.rule,
                        &row.reason,
                        &row.error,
                        &row.record,
                    ],
                )
                .await
            }
            Row::Upstream(row) => {
                tx.execute(
                    &upstream_calls,
                    &[
                        &row.time_unix_ms,
                        &instance,
                        &row.call_id,
                        &row.run_id,
                        &row.server,
                        &row.tool,
                        &row.outcome,
                        &row.duration_ms,
                        &row.record,
                    ],
                )
                .await
            }
        }
        .map_err(failed)?;
    }
    tx.commit().await.map_err(failed)
}
