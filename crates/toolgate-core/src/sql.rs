//! What a store's SQL needs from a database, whichever it is: SQLite (the embedded default, one
//! file) or PostgreSQL (a team's shared store, implemented in `toolgate-store`). The receipts and
//! claims ([`crate::idempotency`]) and the toolsets' own queries are written once against
//! [`Sql`], so a write and its receipt share one transaction on either database.
//!
//! Why our own small interface rather than a library's: the toolsets' handlers are synchronous
//! closures run off the async threads (rusqlite's model), the receipts must stay constructible
//! only here, and the SQL libraries that span both databases (sqlx's `Any`) are async throughout
//! and link a second SQLite. This is the least that lets one statement run on both: values,
//! rows, a statement, and a write transaction that serializes with every other writer.
//!
//! Guarantees: statements are written with SQLite's placeholders (`?1`, `?2` or `?`);
//! [`postgres_placeholders`] turns them into PostgreSQL's (`$1`), never inside a quoted string or
//! identifier. A [`SqlRow`] read with the wrong type is an error, never a panic. A
//! [`SqlTx`] dropped without [`SqlTx::commit`] rolls back. Refuses: nothing; what a statement
//! means is its author's business ([`Dialect`] says which database it runs on, for the few
//! statements that differ, such as full-text search).

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{ErrorCode, ToolError};

/// Which database a statement runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A value bound to a statement or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
}

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        SqlValue::Integer(v)
    }
}

impl From<u32> for SqlValue {
    fn from(v: u32) -> Self {
        SqlValue::Integer(i64::from(v))
    }
}

impl From<f64> for SqlValue {
    fn from(v: f64) -> Self {
        SqlValue::Real(v)
    }
}

impl From<bool> for SqlValue {
    fn from(v: bool) -> Self {
        SqlValue::Integer(i64::from(v))
    }
}

impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        SqlValue::Text(v.to_owned())
    }
}

impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        SqlValue::Text(v)
    }
}

impl From<&String> for SqlValue {
    fn from(v: &String) -> Self {
        SqlValue::Text(v.clone())
    }
}

impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(SqlValue::Null, Into::into)
    }
}

/// The parameters of a statement, each converted with `SqlValue::from`.
#[macro_export]
macro_rules! sql_params {
    ($($value:expr),* $(,)?) => {
        &[$($crate::sql::SqlValue::from($value)),*][..]
    };
}

/// One row of a result, its columns in the statement's order.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlRow(pub Vec<SqlValue>);

impl SqlRow {
    fn column(&self, i: usize) -> Result<&SqlValue, SqlError> {
        self.0.get(i).ok_or_else(|| SqlError::Type {
            detail: format!("column {i} of a row of {} columns", self.0.len()),
        })
    }

    pub fn i64(&self, i: usize) -> Result<i64, SqlError> {
        self.opt_i64(i)?.ok_or_else(|| null_at(i))
    }

    pub fn opt_i64(&self, i: usize) -> Result<Option<i64>, SqlError> {
        match self.column(i)? {
            SqlValue::Null => Ok(None),
            SqlValue::Integer(v) => Ok(Some(*v)),
            other => Err(wrong_type(i, "an integer", other)),
        }
    }

    pub fn f64(&self, i: usize) -> Result<f64, SqlError> {
        self.opt_f64(i)?.ok_or_else(|| null_at(i))
    }

    pub fn opt_f64(&self, i: usize) -> Result<Option<f64>, SqlError> {
        match self.column(i)? {
            SqlValue::Null => Ok(None),
            SqlValue::Real(v) => Ok(Some(*v)),
            // SQLite returns a whole REAL as an integer when it was stored as one.
            SqlValue::Integer(v) => Ok(Some(*v as f64)),
            other => Err(wrong_type(i, "a number", other)),
        }
    }

    pub fn text(&self, i: usize) -> Result<String, SqlError> {
        self.opt_text(i)?.ok_or_else(|| null_at(i))
    }

    pub fn opt_text(&self, i: usize) -> Result<Option<String>, SqlError> {
        match self.column(i)? {
            SqlValue::Null => Ok(None),
            SqlValue::Text(v) => Ok(Some(v.clone())),
            other => Err(wrong_type(i, "text", other)),
        }
    }
}

fn null_at(i: usize) -> SqlError {
    SqlError::Type {
        detail: format!("column {i} is NULL where a value was expected"),
    }
}

fn wrong_type(i: usize, wanted: &str, found: &SqlValue) -> SqlError {
    SqlError::Type {
        detail: format!("column {i} holds {found:?} where {wanted} was expected"),
    }
}

/// Why a statement failed, classified for the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SqlError {
    /// Another writer holds the database; trying again may succeed.
    #[error("the store is busy with another write: {detail}")]
    Busy { detail: String },
    /// The database could not be reached or went away mid-statement.
    #[error("the store could not be reached: {detail}")]
    Unavailable { detail: String },
    /// A constraint refused the statement (a duplicate key, a missing reference).
    #[error("the store refused the change: {detail}")]
    Constraint { detail: String },
    /// A row did not hold the type the reader expected.
    #[error("a stored value had an unexpected type: {detail}")]
    Type { detail: String },
    /// Anything else: a statement the database could not run.
    #[error("the store failed: {detail}")]
    Failed { detail: String },
}

impl From<SqlError> for ToolError {
    fn from(e: SqlError) -> Self {
        match e {
            SqlError::Busy { .. } => ToolError::new(
                ErrorCode::TransientDependency,
                "the store is busy with another write; try again",
            ),
            SqlError::Unavailable { detail } => ToolError::new(
                ErrorCode::TransientDependency,
                format!("the store could not be reached: {detail}"),
            )
            .with_hint(
                "retry once the database is reachable again; nothing was written by this call",
            ),
            SqlError::Constraint { .. } | SqlError::Type { .. } | SqlError::Failed { .. } => {
                ToolError::internal("the store failed to complete the operation")
            }
        }
    }
}

/// Statements on one database, inside a transaction or not.
pub trait Sql {
    fn dialect(&self) -> Dialect;

    /// Runs `sql` and returns every row.
    fn query(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, SqlError>;

    /// Runs `sql` and returns how many rows it changed.
    fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<u64, SqlError>;

    /// Runs several statements without parameters (a schema, a reset).
    fn execute_batch(&self, sql: &str) -> Result<(), SqlError>;

    /// The first row, or `None`.
    fn query_opt(&self, sql: &str, params: &[SqlValue]) -> Result<Option<SqlRow>, SqlError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// The first column of the first row, as an integer (a count).
    fn query_i64(&self, sql: &str, params: &[SqlValue]) -> Result<i64, SqlError> {
        match self.query_opt(sql, params)? {
            Some(row) => row.i64(0),
            None => Err(SqlError::Type {
                detail: "a query for one value returned no row".into(),
            }),
        }
    }
}

/// A write transaction: it serializes with every other writer of the store (SQLite's immediate
/// transaction; a store-wide advisory lock on PostgreSQL), so a read-then-write inside it sees
/// no other write in between. Dropped without `commit`, it rolls back.
pub trait SqlTx: Sql {
    fn commit(self: Box<Self>) -> Result<(), SqlError>;
}

/// A connection that can begin write transactions.
pub trait SqlSession: Sql {
    fn begin_write(&mut self) -> Result<Box<dyn SqlTx + '_>, SqlError>;
}

/// Runs `work` in one write transaction on `session`, committing only when it succeeds.
pub fn in_write_transaction<T, E: From<SqlError>>(
    session: &mut dyn SqlSession,
    work: impl FnOnce(&dyn Sql) -> Result<T, E>,
) -> Result<T, E> {
    let tx = session.begin_write()?;
    let value = work(&*tx)?;
    tx.commit()?;
    Ok(value)
}

/// `sql` with SQLite's placeholders (`?N`, and `?` numbered in order) written as PostgreSQL's
/// (`$N`). Text inside single quotes (strings) and double quotes (identifiers) is kept as it is.
pub fn postgres_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut next_anonymous = 1u32;
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                out.push(c);
            }
            '?' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    digits.push(d);
                    chars.next();
                }
                out.push('$');
                if digits.is_empty() {
                    out.push_str(&next_anonymous.to_string());
                    next_anonymous += 1;
                } else {
                    out.push_str(&digits);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// SQLite
// ---------------------------------------------------------------------------------------------

fn sqlite_params(params: &[SqlValue]) -> impl Iterator<Item = rusqlite::types::Value> + '_ {
    params.iter().map(|p| match p {
        SqlValue::Null => rusqlite::types::Value::Null,
        SqlValue::Integer(v) => rusqlite::types::Value::Integer(*v),
        SqlValue::Real(v) => rusqlite::types::Value::Real(*v),
        SqlValue::Text(v) => rusqlite::types::Value::Text(v.clone()),
    })
}

/// Classifies a SQLite failure: contention is `Busy`, a constraint is `Constraint`.
pub fn sqlite_error(e: rusqlite::Error) -> SqlError {
    let detail = e.to_string();
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            SqlError::Busy { detail }
        }
        Some(rusqlite::ErrorCode::ConstraintViolation) => SqlError::Constraint { detail },
        _ => SqlError::Failed { detail },
    }
}

impl Sql for Connection {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn query(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, SqlError> {
        let mut stmt = self.prepare_cached(sql).map_err(sqlite_error)?;
        let width = stmt.column_count();
        let rows = stmt
            .query_map(rusqlite::params_from_iter(sqlite_params(params)), |row| {
                (0..width)
                    .map(|i| {
                        Ok(match row.get_ref(i)? {
                            rusqlite::types::ValueRef::Null => SqlValue::Null,
                            rusqlite::types::ValueRef::Integer(v) => SqlValue::Integer(v),
                            rusqlite::types::ValueRef::Real(v) => SqlValue::Real(v),
                            rusqlite::types::ValueRef::Text(t)
                            | rusqlite::types::ValueRef::Blob(t) => {
                                SqlValue::Text(String::from_utf8_lossy(t).into_owned())
                            }
                        })
                    })
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map(SqlRow)
            })
            .map_err(sqlite_error)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(sqlite_error)?;
        Ok(rows)
    }

    fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<u64, SqlError> {
        let mut stmt = self.prepare_cached(sql).map_err(sqlite_error)?;
        let changed = stmt
            .execute(rusqlite::params_from_iter(sqlite_params(params)))
            .map_err(sqlite_error)?;
        Ok(changed as u64)
    }

    fn execute_batch(&self, sql: &str) -> Result<(), SqlError> {
        Connection::execute_batch(self, sql).map_err(sqlite_error)
    }
}

/// A SQLite immediate transaction as an [`SqlTx`].
struct SqliteTx<'c>(rusqlite::Transaction<'c>);

impl Sql for SqliteTx<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn query(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, SqlError> {
        Sql::query(&*self.0, sql, params)
    }

    fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<u64, SqlError> {
        Sql::execute(&*self.0, sql, params)
    }

    fn execute_batch(&self, sql: &str) -> Result<(), SqlError> {
        Sql::execute_batch(&*self.0, sql)
    }
}

impl SqlTx for SqliteTx<'_> {
    fn commit(self: Box<Self>) -> Result<(), SqlError> {
        self.0.commit().map_err(sqlite_error)
    }
}

impl SqlSession for Connection {
    fn begin_write(&mut self) -> Result<Box<dyn SqlTx + '_>, SqlError> {
        let tx = self
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite_error)?;
        Ok(Box::new(SqliteTx(tx)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn placeholders_become_postgres_ones_but_never_inside_quotes() {
        let cases = [
            (
                "numbered",
                "SELECT a FROM t WHERE b = ?1 AND c = ?2",
                "SELECT a FROM t WHERE b = $1 AND c = $2",
            ),
            (
                "reused",
                "UPDATE t SET a = ?1 WHERE b = ?1",
                "UPDATE t SET a = $1 WHERE b = $1",
            ),
            (
                "anonymous in order",
                "LIMIT ? OFFSET ?",
                "LIMIT $1 OFFSET $2",
            ),
            (
                "a question mark in a string",
                "SELECT '?1 and ?' WHERE a = ?1",
                "SELECT '?1 and ?' WHERE a = $1",
            ),
            (
                "in an identifier",
                "SELECT \"odd?name\" FROM t WHERE a = ?",
                "SELECT \"odd?name\" FROM t WHERE a = $1",
            ),
            (
                "an escaped quote",
                "SELECT 'it''s ?' , ?2",
                "SELECT 'it''s ?' , $2",
            ),
            ("no placeholder", "SELECT 1", "SELECT 1"),
            ("ten and more", "?10, ?11", "$10, $11"),
        ];
        for (label, sqlite, postgres) in cases {
            assert_eq!(postgres_placeholders(sqlite), postgres, "{label}");
        }
    }

    #[test]
    fn a_row_read_with_the_wrong_type_is_an_error_not_a_panic() {
        let row = SqlRow(vec![
            SqlValue::Text("x".into()),
            SqlValue::Null,
            SqlValue::Integer(3),
        ]);
        assert!(row.i64(0).is_err());
        assert!(row.i64(1).is_err(), "NULL where a value is expected");
        assert_eq!(row.opt_i64(1).unwrap(), None);
        assert_eq!(row.f64(2).unwrap(), 3.0, "a whole number read as a number");
        assert!(row.text(7).is_err(), "a column past the row's end");
    }

    #[test]
    fn a_write_transaction_dropped_without_commit_leaves_nothing() {
        let mut conn = Connection::open_in_memory().unwrap();
        Sql::execute_batch(&conn, "CREATE TABLE t (v INTEGER)").unwrap();
        let failed: Result<(), SqlError> = in_write_transaction(&mut conn, |tx| {
            tx.execute("INSERT INTO t VALUES (?1)", sql_params![1i64])?;
            Err(SqlError::Failed {
                detail: "the effect failed".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(
            Sql::query_i64(&conn, "SELECT count(*) FROM t", &[]).unwrap(),
            0
        );
        in_write_transaction::<_, SqlError>(&mut conn, |tx| {
            tx.execute("INSERT INTO t VALUES (?1)", sql_params![2i64])
        })
        .unwrap();
        assert_eq!(
            Sql::query_i64(&conn, "SELECT count(*) FROM t", &[]).unwrap(),
            1
        );
    }
}
