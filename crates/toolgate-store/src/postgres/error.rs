//! Why a PostgreSQL store could not be opened, and how a failing one is reported to a call.
//!
//! Guarantees: each start-up failure is its own variant with a message that says what to do;
//! none carries the URL's password (messages show `host:port/database`).

use tokio_postgres::error::SqlState;
use toolgate_core::{ErrorCode, ToolError};

#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "the store URL could not be read: {detail}; write it as postgres://user:password@host:port/database"
    )]
    BadUrl { detail: String },
    #[error(
        "PostgreSQL at {database} could not be reached: {detail}; check that the server runs and the host and port are right"
    )]
    Unreachable { database: String, detail: String },
    #[error(
        "PostgreSQL at {database} refused the user or password ({detail}); check the URL's user and password"
    )]
    Refused { database: String, detail: String },
    #[error("the database {database} does not exist; create it (createdb) or fix the URL")]
    NoDatabase { database: String },
    #[error(
        "the database {database} has schema version {found}, newer than this toolgate's {known}: it was left as it is; run a toolgate at least as new as the one that upgraded it"
    )]
    SchemaNewer {
        database: String,
        found: i64,
        known: i64,
    },
    #[error("the schema of {database} could not be brought up to date: {detail}")]
    Migration { database: String, detail: String },
    #[error("the connection pool could not be built: {detail}")]
    Pool { detail: String },
}

impl PgError {
    /// Classifies a failure to get a first connection.
    pub(crate) fn from_pool(database: &str, e: deadpool_postgres::PoolError) -> PgError {
        use deadpool_postgres::PoolError;
        match e {
            PoolError::Backend(e) => PgError::from_client(database, &e),
            PoolError::Timeout(_) => PgError::Unreachable {
                database: database.into(),
                detail: "no connection within the connect timeout".into(),
            },
            PoolError::Closed | PoolError::NoRuntimeSpecified | PoolError::PostCreateHook(_) => {
                PgError::Pool {
                    detail: e.to_string(),
                }
            }
        }
    }

    pub(crate) fn from_client(database: &str, e: &tokio_postgres::Error) -> PgError {
        let database = database.to_owned();
        match e.code() {
            Some(code)
                if *code == SqlState::INVALID_PASSWORD
                    || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
            {
                PgError::Refused {
                    database,
                    detail: server_message(e),
                }
            }
            Some(code) if *code == SqlState::INVALID_CATALOG_NAME => {
                PgError::NoDatabase { database }
            }
            _ => PgError::Unreachable {
                database,
                detail: server_message(e),
            },
        }
    }
}

/// The server's own words when it sent any, else the client's.
fn server_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
    }
}

/// A call's error when the shared store cannot be reached or fails mid-call: transient, so the
/// caller may retry once the store is back; nothing was written (the transaction did not
/// commit).
pub fn unreachable_store(database: &str, detail: &str) -> ToolError {
    ToolError::new(
        ErrorCode::TransientDependency,
        format!("the shared store (PostgreSQL at {database}) failed: {detail}"),
    )
    .with_hint("retry once the database is reachable again; nothing was written by this call")
}
