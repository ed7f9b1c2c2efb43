//! [`AuditStore`]: the one search API over both stores' `decisions` tables (a SQLite audit file
//! or a team's PostgreSQL database), for the command line and the console alike.
//!
//! Every search runs the statements of [`super::query`] through [`toolgate_core::sql::Sql`], so
//! both stores answer the same filter with the same rows. Calls are async and never block an
//! async thread (SQLite on tokio's blocking pool; PostgreSQL through the store's pool).
//!
//! Guarantees: a page holds at most the asked number of rows, newest first, and says where the
//! next one starts (none when it is the last); a tree is bounded by [`MAX_TREE`] calls; an
//! export writes exactly the rows the same search pages through; a write call's receipt is read
//! where the dispatcher wrote it (the toolset's store: its SQLite file, read-only, or the shared
//! database). Refuses: a SQLite audit file that does not exist (never created by reading it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use toolgate_core::sql::{Sql, SqlError};

use super::egress::{self, EgressEntry};
use super::export::{ExportFormat, ExportWriter};
use super::query::{self, AuditFilter, Cursor, MAX_PAGE, MAX_TREE};
use super::receipts::{WriteRecord, write_record_on};
use super::row::AuditEntry;
use super::tree::CallTree;
use super::upstream::{self, UpstreamEntry};
use crate::postgres::PgStore;
use crate::postgres::sql::writer_lock;

/// The most egress decisions a call's page reads (a handler looping on fetches must not make
/// one page unbounded).
pub const MAX_EGRESS: i64 = 500;

/// The most upstream legs a tree reads per run and instance at each level (the references it
/// follows come only from them).
pub const MAX_LEGS: i64 = 10_000;

/// Why a search or an export failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("the audit file {path} could not be opened: {detail}")]
    Open { path: String, detail: String },
    #[error("the audit search failed: {0}")]
    Sql(#[from] SqlError),
    #[error("the audit store could not be reached: {0}")]
    Store(Box<toolgate_core::ToolError>),
    #[error("writing the export failed: {0}")]
    Write(#[from] std::io::Error),
    #[error("writing the CSV export failed: {0}")]
    Csv(#[from] csv::Error),
    #[error("the audit search's task failed")]
    Task,
}

impl From<toolgate_core::ToolError> for AuditError {
    fn from(e: toolgate_core::ToolError) -> Self {
        AuditError::Store(Box::new(e))
    }
}

/// One page of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub entries: Vec<AuditEntry>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<Cursor>,
}

/// The `decisions` table of one store, for reading.
#[derive(Clone, Debug)]
pub enum AuditStore {
    /// A SQLite audit file, opened read-only.
    Sqlite {
        path: PathBuf,
        conn: Arc<Mutex<Connection>>,
        /// The toolset's store file its calls wrote their receipts into, opened read-only when
        /// a receipt is read ([`AuditStore::with_receipts_file`]); `None`: receipts are not read.
        receipts: Option<PathBuf>,
    },
    /// A team's shared database.
    Postgres(PgStore),
}

impl AuditStore {
    /// The existing SQLite audit file at `path`.
    pub fn open_file(path: &Path) -> Result<AuditStore, AuditError> {
        let conn = super::sqlite::open_read_only(path)?;
        Ok(AuditStore::Sqlite {
            path: path.to_path_buf(),
            conn: Arc::new(Mutex::new(conn)),
            receipts: None,
        })
    }

    /// Also reads write calls' receipts from the toolset's store file at `store` (opened
    /// read-only at each read, so a store created later is found). A PostgreSQL audit reads
    /// them from its own database already.
    pub fn with_receipts_file(self, store: &Path) -> AuditStore {
        match self {
            AuditStore::Sqlite { path, conn, .. } => AuditStore::Sqlite {
                path,
                conn,
                receipts: Some(store.to_path_buf()),
            },
            postgres @ AuditStore::Postgres(_) => postgres,
        }
    }

    /// The audit table of a shared database.
    pub fn on_postgres(store: PgStore) -> AuditStore {
        AuditStore::Postgres(store)
    }

    /// Which store this is, for messages (never a password).
    pub fn shown(&self) -> String {
        match self {
            AuditStore::Sqlite { path, .. } => path.display().to_string(),
            AuditStore::Postgres(pg) => format!("postgres://{}", pg.shown()),
        }
    }

    /// Runs `work` on the store's connection, off the async threads.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn Sql) -> Result<T, AuditError> + Send + 'static,
    ) -> Result<T, AuditError> {
        match self {
            AuditStore::Sqlite { conn, .. } => {
                let conn = Arc::clone(conn);
                tokio::task::spawn_blocking(move || {
                    // A poisoned lock only means another search panicked mid-read; the
                    // read-only connection holds no half-done state.
                    let guard = conn
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    work(&*guard)
                })
                .await
                .map_err(|_| AuditError::Task)?
            }
            AuditStore::Postgres(pg) => {
                // Searches only read: the writer lock named here is never taken.
                pg.blocking(writer_lock("audit"), move |session| {
                    Ok(work(as_sql(session)))
                })
                .await?
            }
        }
    }

    /// One page of `filter`'s rows, newest first, after `after`; `limit` is clamped to
    /// 1..=[`MAX_PAGE`].
    pub async fn search(
        &self,
        filter: &AuditFilter,
        after: Option<Cursor>,
        limit: u32,
    ) -> Result<Page, AuditError> {
        let filter = filter.clone();
        self.run(move |sql| search_on(sql, &filter, after, limit))
            .await
    }

    /// The row with id `id`, or `None`.
    pub async fn entry(&self, id: i64) -> Result<Option<AuditEntry>, AuditError> {
        self.run(move |sql| {
            let statement = query::by_id(id);
            sql.query_opt(&statement.sql, &statement.params)?
                .map(|row| AuditEntry::from_row(&row))
                .transpose()
                .map_err(AuditError::from)
        })
        .await
    }

    /// The newest call `call_id` (in run `run_id`, when given) with the calls made from inside
    /// it, or `None` when no such call is recorded.
    pub async fn tree(
        &self,
        call_id: &str,
        run_id: Option<&str>,
    ) -> Result<Option<CallTree>, AuditError> {
        let call_id = call_id.to_owned();
        let run_id = run_id.map(str::to_owned);
        let sqlite = matches!(self, AuditStore::Sqlite { .. });
        self.run(move |sql| {
            let has_legs = !sqlite || sqlite_has_table(sql, "upstream_calls");
            tree_on(sql, &call_id, run_id.as_deref(), has_legs)
        })
        .await
    }

    /// The egress exit's decisions made inside call `call_id` of run `run_id`, oldest first,
    /// at most [`MAX_EGRESS`] (an audit file older than the table has none).
    pub async fn egress(
        &self,
        call_id: &str,
        run_id: &str,
    ) -> Result<Vec<EgressEntry>, AuditError> {
        let (sql_text, params) = egress::of_call(call_id, run_id, MAX_EGRESS);
        let sqlite = matches!(self, AuditStore::Sqlite { .. });
        self.run(move |sql| {
            if sqlite && !sqlite_has_table(sql, "egress_decisions") {
                return Ok(Vec::new());
            }
            let rows = sql.query(&sql_text, &params)?;
            rows.iter()
                .map(EgressEntry::from_row)
                .collect::<Result<Vec<_>, _>>()
                .map_err(AuditError::from)
        })
        .await
    }

    /// The upstream legs (a gateway call's requests to its MCP server) sent from inside any of
    /// `call_ids` of run `run_id`, oldest first (an audit file older than the table has none).
    pub async fn upstream_legs(
        &self,
        run_id: &str,
        call_ids: Vec<String>,
    ) -> Result<Vec<UpstreamEntry>, AuditError> {
        let run_id = run_id.to_owned();
        let sqlite = matches!(self, AuditStore::Sqlite { .. });
        self.run(move |sql| {
            if sqlite && !sqlite_has_table(sql, "upstream_calls") {
                return Ok(Vec::new());
            }
            upstream_legs_on(sql, &run_id, &call_ids)
        })
        .await
    }

    /// What the store holds under a write's idempotency `key` (its receipt, or an unsettled
    /// claim), or `None` when this audit reads no receipts (a SQLite audit given no store).
    pub async fn write_record(&self, key: &str) -> Result<Option<WriteRecord>, AuditError> {
        let source = match self {
            AuditStore::Sqlite { receipts: None, .. } => return Ok(None),
            AuditStore::Sqlite {
                receipts: Some(file),
                ..
            } => ReceiptSource::Sqlite(file.clone()),
            AuditStore::Postgres(pg) => ReceiptSource::Postgres(pg.clone()),
        };
        let key = key.to_owned();
        let work = move |sql: &dyn Sql| -> Result<WriteRecord, AuditError> {
            Ok(write_record_on(sql, &key)?)
        };
        let found = match source {
            ReceiptSource::Sqlite(file) => tokio::task::spawn_blocking(move || {
                let conn = super::sqlite::open_read_only(&file)?;
                if !has_receipt_tables(&conn) {
                    return Ok(WriteRecord::Missing);
                }
                work(&conn)
            })
            .await
            .map_err(|_| AuditError::Task)??,
            ReceiptSource::Postgres(pg) => {
                pg.blocking(writer_lock("audit"), move |session| {
                    Ok(work(as_sql(session)))
                })
                .await??
            }
        };
        Ok(Some(found))
    }

    /// Writes every row of `filter`, newest first, to `out` as `format`; returns how many.
    pub async fn export<W: std::io::Write + Send>(
        &self,
        filter: &AuditFilter,
        format: ExportFormat,
        out: W,
    ) -> Result<usize, AuditError> {
        let mut writer = ExportWriter::new(format, out)?;
        let mut after = None;
        let mut written = 0;
        loop {
            let page = self.search(filter, after, MAX_PAGE).await?;
            for entry in &page.entries {
                writer.write(entry)?;
            }
            written += page.entries.len();
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        writer.finish()?;
        Ok(written)
    }
}

/// Where receipts are read, when they are.
enum ReceiptSource {
    Sqlite(PathBuf),
    Postgres(PgStore),
}

fn as_sql(session: &mut dyn toolgate_core::sql::SqlSession) -> &dyn Sql {
    session
}

/// Whether a SQLite audit file has `table` (one written by an older toolgate may not).
fn sqlite_has_table(sql: &dyn Sql, table: &str) -> bool {
    sql.query_i64(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        &[table.into()],
    )
    .is_ok_and(|n| n > 0)
}

/// Whether a SQLite store file has the receipts table (a store that never wrote may not).
fn has_receipt_tables(conn: &Connection) -> bool {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tool_receipts'",
        [],
        |row| row.get::<_, i64>(0),
    )
    .is_ok_and(|n| n > 0)
}

/// [`AuditStore::search`] on a connection.
pub fn search_on(
    sql: &dyn Sql,
    filter: &AuditFilter,
    after: Option<Cursor>,
    limit: u32,
) -> Result<Page, AuditError> {
    let limit = limit.clamp(1, MAX_PAGE);
    // One row more than shown says whether another page exists.
    let statement = query::search(filter, after, limit + 1);
    let rows = sql.query(&statement.sql, &statement.params)?;
    let mut entries = rows
        .iter()
        .map(AuditEntry::from_row)
        .collect::<Result<Vec<_>, _>>()?;
    let more = entries.len() > limit as usize;
    entries.truncate(limit as usize);
    let next = entries.last().filter(|_| more).map(|last| Cursor {
        time_unix_ms: last.time_unix_ms,
        id: last.id,
    });
    Ok(Page { entries, next })
}

/// [`AuditStore::tree`] on a connection: the root, then its descendants level by level: the
/// calls made from inside each level's calls in their run and instance, and the calls another
/// toolgate process dispatched for them, found only by the references the level's own
/// upstream legs recorded as sent (never by a reference computed from a run and call id, which
/// anyone can guess). `has_legs`: whether the store has the legs' table (an audit file older
/// than it has no legs, so no calls served by reference).
pub fn tree_on(
    sql: &dyn Sql,
    call_id: &str,
    run_id: Option<&str>,
    has_legs: bool,
) -> Result<Option<CallTree>, AuditError> {
    let statement = query::call(call_id, run_id);
    let Some(row) = sql.query_opt(&statement.sql, &statement.params)? else {
        return Ok(None);
    };
    let root = AuditEntry::from_row(&row)?;
    let mut seen = std::collections::HashSet::from([root.id]);
    let mut descendants: Vec<AuditEntry> = Vec::new();
    let mut legs: Vec<UpstreamEntry> = Vec::new();
    let mut level = vec![root.clone()];
    while !level.is_empty() && descendants.len() < MAX_TREE {
        let mut statements = Vec::new();
        let mut local: std::collections::BTreeMap<(String, String), Vec<String>> =
            std::collections::BTreeMap::new();
        for entry in &level {
            local
                .entry((entry.run_id.clone(), entry.instance.clone()))
                .or_default()
                .push(entry.call_id.clone());
        }
        let room = MAX_TREE - descendants.len();
        let mut references: Vec<String> = Vec::new();
        for ((run, instance), mut parents) in local {
            parents.sort();
            parents.dedup();
            statements.push(query::children(&run, &instance, &parents, room));
            if has_legs {
                for part in parents.chunks(500) {
                    let (text, params) = upstream::of_calls_in(&run, &instance, part, MAX_LEGS);
                    for row in &sql.query(&text, &params)? {
                        let leg = UpstreamEntry::from_row(row)?;
                        references.extend(leg.reference.clone());
                        legs.push(leg);
                    }
                }
            }
        }
        references.sort();
        references.dedup();
        for part in references.chunks(500) {
            statements.push(query::served_for(part, room));
        }
        level.clear();
        for statement in statements {
            for row in &sql.query(&statement.sql, &statement.params)? {
                let entry = AuditEntry::from_row(row)?;
                // A call already read is not asked for again, so a malformed cycle ends here.
                if descendants.len() < MAX_TREE && seen.insert(entry.id) {
                    level.push(entry.clone());
                    descendants.push(entry);
                }
            }
        }
    }
    Ok(Some(CallTree::assemble(root, descendants, &legs)))
}

/// [`AuditStore::upstream_legs`] on a connection.
pub fn upstream_legs_on(
    sql: &dyn Sql,
    run_id: &str,
    call_ids: &[String],
) -> Result<Vec<UpstreamEntry>, AuditError> {
    let mut legs = Vec::new();
    // A bounded number of ids per statement (a large tree is read in parts).
    for part in call_ids.chunks(500) {
        let (text, params) = upstream::of_calls(run_id, part, MAX_EGRESS);
        for row in &sql.query(&text, &params)? {
            legs.push(UpstreamEntry::from_row(row)?);
        }
    }
    legs.sort_by_key(|l| (l.time_unix_ms, l.id));
    Ok(legs)
}
