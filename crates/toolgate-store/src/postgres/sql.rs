//! [`Sql`] on PostgreSQL: the statements the stores write once (with SQLite's placeholders) run
//! on a pooled connection, synchronously, on a blocking thread.
//!
//! Why synchronous: the toolsets' handlers and the receipts are closures that run off the async
//! threads (rusqlite's model), so the PostgreSQL side drives the async client with
//! [`tokio::runtime::Handle::block_on`] on a thread of tokio's blocking pool. Sessions exist only
//! inside [`PgStore::blocking`], which puts the work on that pool, so `block_on` never runs on
//! an async thread.
//!
//! Guarantees: a value is bound as the type PostgreSQL inferred for its parameter when the
//! conversion loses nothing (an integer for `int4` that does not fit is refused, never
//! truncated); every column of a result is read as a [`SqlValue`] or the read fails with
//! [`SqlError::Type`]; a write transaction takes the store's advisory lock first, so writers of
//! one store serialize across every instance as SQLite's immediate transactions do in one file;
//! a failure is classified (a lost connection is `Unavailable`, contention `Busy`, a constraint
//! `Constraint`).

use std::error::Error as _;

use bytes::BytesMut;
use deadpool_postgres::GenericClient;
use tokio::runtime::Handle;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use toolgate_core::ToolError;
use toolgate_core::sql::{
    Dialect, Sql, SqlError, SqlRow, SqlSession, SqlTx, SqlValue, postgres_placeholders,
};

use super::PgStore;

impl PgStore {
    /// Runs `work` on one pooled connection, on a blocking thread. `writer_lock` names the store
    /// whose writers serialize (each toolset's own; see [`writer_lock`]).
    pub async fn blocking<T: Send + 'static>(
        &self,
        writer_lock: i64,
        work: impl FnOnce(&mut dyn SqlSession) -> Result<T, ToolError> + Send + 'static,
    ) -> Result<T, ToolError> {
        let store = self.clone();
        let handle = Handle::current();
        tokio::task::spawn_blocking(move || {
            let mut client = handle
                .block_on(store.pool.get())
                .map_err(|e| super::unreachable_store(&store.shown, &e.to_string()))?;
            let mut session = PgSession {
                client: &mut client,
                handle: &handle,
                writer_lock,
            };
            work(&mut session)
        })
        .await
        .map_err(|_| ToolError::internal("the shared store's task failed"))?
    }
}

impl PgStore {
    /// Runs `work` on one pooled connection on this thread: a blocking thread (where tokio
    /// allows waiting outright) or a thread of tokio's multi-thread runtime (which is told the
    /// thread blocks). Anywhere else, an `internal` error and nothing runs.
    pub fn blocking_here<T>(
        &self,
        writer_lock: i64,
        work: impl FnOnce(&mut dyn SqlSession) -> Result<T, ToolError>,
    ) -> Result<T, ToolError> {
        let handle = Handle::try_current().map_err(|_| {
            ToolError::internal("the shared store was used outside tokio's runtime")
        })?;
        let run = || {
            let mut client = handle
                .block_on(self.pool.get())
                .map_err(|e| super::unreachable_store(&self.shown, &e.to_string()))?;
            let mut session = PgSession {
                client: &mut client,
                handle: &handle,
                writer_lock,
            };
            work(&mut session)
        };
        match handle.runtime_flavor() {
            tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(run),
            _ => Err(ToolError::internal(
                "the shared store needs tokio's multi-thread runtime to wait on this thread",
            )),
        }
    }
}

/// The advisory-lock key of a store's writers, from its name (stable across instances and
/// versions: the first eight bytes of its SHA-256 would do as well; this is FNV-1a, which needs
/// no dependency).
pub fn writer_lock(store: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in store.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// One pooled connection, used from a blocking thread.
struct PgSession<'c> {
    client: &'c mut deadpool_postgres::Object,
    handle: &'c Handle,
    writer_lock: i64,
}

/// A write transaction on a session.
struct PgTx<'c> {
    tx: deadpool_postgres::Transaction<'c>,
    handle: &'c Handle,
}

impl Sql for PgSession<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn query(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, SqlError> {
        self.handle.block_on(query_on(&*self.client, sql, params))
    }

    fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<u64, SqlError> {
        self.handle.block_on(execute_on(&*self.client, sql, params))
    }

    fn execute_batch(&self, sql: &str) -> Result<(), SqlError> {
        self.handle
            .block_on(self.client.batch_execute(sql))
            .map_err(pg_error)
    }
}

/// Runs `sql` (prepared once per connection) on a pooled connection or a transaction.
async fn query_on(
    client: &impl GenericClient,
    sql: &str,
    params: &[SqlValue],
) -> Result<Vec<SqlRow>, SqlError> {
    let statement = client
        .prepare_cached(&postgres_placeholders(sql))
        .await
        .map_err(pg_error)?;
    let rows = client
        .query(&statement, &refs(&wrapped(params)))
        .await
        .map_err(pg_error)?;
    rows.iter().map(read_row).collect()
}

async fn execute_on(
    client: &impl GenericClient,
    sql: &str,
    params: &[SqlValue],
) -> Result<u64, SqlError> {
    let statement = client
        .prepare_cached(&postgres_placeholders(sql))
        .await
        .map_err(pg_error)?;
    client
        .execute(&statement, &refs(&wrapped(params)))
        .await
        .map_err(pg_error)
}

impl SqlSession for PgSession<'_> {
    fn begin_write(&mut self) -> Result<Box<dyn SqlTx + '_>, SqlError> {
        let handle = self.handle;
        let lock = self.writer_lock;
        let tx = handle.block_on(async {
            let tx = self.client.transaction().await.map_err(pg_error)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock])
                .await
                .map_err(pg_error)?;
            Ok::<_, SqlError>(tx)
        })?;
        Ok(Box::new(PgTx { tx, handle }))
    }
}

impl Sql for PgTx<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn query(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, SqlError> {
        self.handle.block_on(query_on(&self.tx, sql, params))
    }

    fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<u64, SqlError> {
        self.handle.block_on(execute_on(&self.tx, sql, params))
    }

    fn execute_batch(&self, sql: &str) -> Result<(), SqlError> {
        self.handle
            .block_on(self.tx.batch_execute(sql))
            .map_err(pg_error)
    }
}

impl SqlTx for PgTx<'_> {
    fn commit(self: Box<Self>) -> Result<(), SqlError> {
        let PgTx { tx, handle } = *self;
        handle.block_on(tx.commit()).map_err(pg_error)
    }
}

/// A value bound as the type PostgreSQL inferred for its parameter.
#[derive(Debug)]
struct Param<'a>(&'a SqlValue);

fn wrapped(params: &[SqlValue]) -> Vec<Param<'_>> {
    params.iter().map(Param).collect()
}

fn refs<'p>(params: &'p [Param<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match (self.0, ty) {
            (SqlValue::Null, _) => Ok(IsNull::Yes),
            (SqlValue::Integer(v), &Type::INT8) => v.to_sql(ty, out),
            (SqlValue::Integer(v), &Type::INT4) => i32::try_from(*v)?.to_sql(ty, out),
            (SqlValue::Integer(v), &Type::INT2) => i16::try_from(*v)?.to_sql(ty, out),
            (SqlValue::Integer(v), &Type::FLOAT8) => (*v as f64).to_sql(ty, out),
            (SqlValue::Integer(v), &Type::BOOL) => (*v != 0).to_sql(ty, out),
            (SqlValue::Integer(v), &Type::TEXT | &Type::VARCHAR) => v.to_string().to_sql(ty, out),
            (SqlValue::Real(v), &Type::FLOAT8) => v.to_sql(ty, out),
            (SqlValue::Real(v), &Type::FLOAT4) => (*v as f32).to_sql(ty, out),
            (SqlValue::Text(v), &Type::JSONB | &Type::JSON) => {
                serde_json::from_str::<serde_json::Value>(v)?.to_sql(ty, out)
            }
            (SqlValue::Text(v), _) => v.as_str().to_sql(ty, out),
            (value, ty) => Err(format!("a {value:?} cannot be bound as {ty}").into()),
        }
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn read_row(row: &tokio_postgres::Row) -> Result<SqlRow, SqlError> {
    let type_error = |e: tokio_postgres::Error| SqlError::Type {
        detail: e.to_string(),
    };
    (0..row.len())
        .map(|i| {
            let ty = row.columns()[i].type_();
            Ok(match *ty {
                Type::INT8 => row
                    .try_get::<_, Option<i64>>(i)
                    .map_err(type_error)?
                    .map_or(SqlValue::Null, SqlValue::Integer),
                Type::INT4 => row
                    .try_get::<_, Option<i32>>(i)
                    .map_err(type_error)?
                    .map_or(SqlValue::Null, |v| SqlValue::Integer(i64::from(v))),
                Type::INT2 => row
                    .try_get::<_, Option<i16>>(i)
                    .map_err(type_error)?
                    .map_or(SqlValue::Null, |v| SqlValue::Integer(i64::from(v))),
                Type::BOOL => row
                    .try_get::<_, Option<bool>>(i)
                    .map_err(type_error)?
                    .map_or(SqlValue::Null, |v| SqlValue::Integer(i64::from(v))),
                Type::FLOAT8 => row
                    .try_get::<_, Option<f64>>(i)
                    .map_err(type_error)?
                    .map_or(SqlValue::Null, SqlValue::Real),
                Type::FLOAT4 => row
                    .try_get::<_, Option<f32>>(i)
                    .map_err(type_error)?
                    .map_or(SqlValue::Null, |v| SqlValue::Real(f64::from(v))),
                Type::JSON | Type::JSONB => row
                    .try_get::<_, Option<serde_json::Value>>(i)
                    .map_err(type_error)?
                    .map_or(SqlValue::Null, |v| SqlValue::Text(v.to_string())),
                _ => row
                    .try_get::<_, Option<String>>(i)
                    .map_err(type_error)?
                    .map_or(SqlValue::Null, SqlValue::Text),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(SqlRow)
}

/// Classifies a PostgreSQL failure.
pub(crate) fn pg_error(e: tokio_postgres::Error) -> SqlError {
    use tokio_postgres::error::SqlState;
    let detail = match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => match e.source() {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    };
    let Some(code) = e.code() else {
        // No SQLSTATE: the connection itself failed or closed.
        return SqlError::Unavailable { detail };
    };
    let class = &code.code()[..2];
    if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED {
        SqlError::Busy { detail }
    } else if class == "23" {
        SqlError::Constraint { detail }
    } else if class == "08" || class == "57" || class == "53" {
        // Connection exceptions, an operator's shutdown, insufficient resources.
        SqlError::Unavailable { detail }
    } else {
        SqlError::Failed { detail }
    }
}
