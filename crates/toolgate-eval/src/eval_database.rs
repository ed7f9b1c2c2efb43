//! An eval on PostgreSQL (`toolgate eval --store postgres://USER@HOST:PORT/DATABASE`): a
//! database of the eval's own, created beside DATABASE on the same server, used by every run of
//! the eval in turn and dropped when the eval ends.
//!
//! Why one database per eval, restored before every run, and not one per run: the runs of an
//! eval are sequential, and the runner already restores its store before every run (on SQLite
//! as on PostgreSQL, `Store::reset` in one transaction, ids from 1 again), which is the
//! isolation the SQLite eval has always had and the one both backends must be compared under.
//! A database per run would add a `CREATE DATABASE`, the migrations and the sample notebook to
//! every run (about a second on a small server) and compare nothing more. Why not the team's
//! DATABASE itself: the runner restores the store before every run, which would wipe the team's
//! notebook; the eval never writes to DATABASE (it connects to it only to create and drop its
//! own). Why a database and not a schema: the migrations and the stores name their tables
//! unqualified, so a database is the unit they can be given whole, and dropping it removes
//! every trace of the eval.
//!
//! Guarantees: at most one database per eval exists at a time, named `toolgate_eval_<pid>_<n>`
//! (so a leftover after a killed process is recognisable), with the migrations applied and the
//! store filled by [`toolgate_wiring::SharedStore`]; it is dropped (`WITH (FORCE)`, PostgreSQL
//! 13 or newer) by [`EvalDatabase::remove`], or when the value is dropped on any other path
//! (an error, a panic); connecting is bounded by a timeout. The few SQLite functions the
//! suites' check SQL uses ([`SQLITE_FUNCTIONS`]: `instr`, `group_concat`, `json_each` over a
//! JSON array in a text column) are created in that database only. Refuses: a URL that is not
//! `postgres://` or `postgresql://` ([`EvalDatabaseError::BadUrl`]); a role that may not create
//! databases ([`EvalDatabaseError::MayNotCreate`], saying what to grant). The password is never
//! printed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio_postgres::NoTls;
use toolgate_core::sql::{Sql, SqlError};
use toolgate_wiring::shared::SharedConnection;
use toolgate_wiring::{SharedStore, Store, StoreKind, WiringError};

/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// PostgreSQL versions of the SQLite functions the suites' check SQL calls, written so that a
/// statement means the same on both (`instr` is 1-based, 0 when absent; `group_concat` skips
/// NULLs and keeps the order rows arrive in; `json_each` of a JSON array gives `key`, the
/// 0-based index, and `value`, each element as text).
pub const SQLITE_FUNCTIONS: &str = "
CREATE OR REPLACE FUNCTION instr(haystack text, needle text) RETURNS integer
    LANGUAGE sql IMMUTABLE AS $$ SELECT strpos(haystack, needle) $$;
CREATE OR REPLACE FUNCTION group_concat_step(acc text, item text, separator text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE WHEN item IS NULL THEN acc WHEN acc IS NULL THEN item
                    ELSE acc || separator || item END
    $$;
CREATE OR REPLACE AGGREGATE group_concat(text, text) (SFUNC = group_concat_step, STYPE = text);
CREATE OR REPLACE FUNCTION group_concat_comma_step(acc text, item text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$ SELECT group_concat_step(acc, item, ',') $$;
CREATE OR REPLACE AGGREGATE group_concat(text) (SFUNC = group_concat_comma_step, STYPE = text);
CREATE OR REPLACE FUNCTION json_each(document text) RETURNS TABLE (key integer, value text)
    LANGUAGE sql IMMUTABLE AS $$
        SELECT (position - 1)::integer, element
        FROM json_array_elements_text(document::json) WITH ORDINALITY AS items(element, position)
    $$;
";

/// Why the eval's own database could not be had.
#[derive(Debug, thiserror::Error)]
pub enum EvalDatabaseError {
    #[error(
        "--store for an eval wants a URL postgres://USER:PASSWORD@HOST:PORT/DATABASE naming a server the eval may create a database on: {detail}"
    )]
    BadUrl { detail: String },
    #[error("could not reach the PostgreSQL server {shown} for the eval: {detail}")]
    Unreachable { shown: String, detail: String },
    #[error(
        "the role {role} may not create databases on {shown}: an eval runs on a database of its own (created and dropped by the eval; the team's database is never changed), so give a role with CREATEDB (ALTER ROLE {role} CREATEDB) or run the eval on SQLite (without --store)"
    )]
    MayNotCreate { role: String, shown: String },
    #[error("could not create the eval's database {name} on {shown}: {detail}")]
    Create {
        name: String,
        shown: String,
        detail: String,
    },
    #[error("could not drop the eval's database {name} on {shown} (drop it by hand): {detail}")]
    Drop {
        name: String,
        shown: String,
        detail: String,
    },
    #[error("could not open the store in the eval's database: {0}")]
    Store(#[from] WiringError),
    #[error("could not prepare the eval's database {name}: {source}")]
    Functions { name: String, source: SqlError },
}

/// A database of the eval's own; dropped when this value is removed or dropped.
pub struct EvalDatabase {
    /// Where to connect to create and drop it (the database the URL named).
    server: tokio_postgres::Config,
    shown: String,
    name: String,
    url: String,
    removed: bool,
}

impl std::fmt::Debug for EvalDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalDatabase")
            .field("server", &self.shown)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl EvalDatabase {
    /// Creates a fresh, empty database on the server `url` names (see the module
    /// documentation).
    pub async fn create(url: &str) -> Result<EvalDatabase, EvalDatabaseError> {
        let mut server: tokio_postgres::Config =
            url.parse().map_err(|e| EvalDatabaseError::BadUrl {
                detail: format!("{e}"),
            })?;
        server.connect_timeout(CONNECT_TIMEOUT);
        server.application_name("toolgate eval");
        let shown = shown(&server);
        let name = next_name();
        let url = with_database(url, &name)?;
        let client = connect(&server, &shown).await?;
        match client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
        {
            Ok(()) => Ok(EvalDatabase {
                server,
                shown,
                name,
                url,
                removed: false,
            }),
            Err(e)
                if e.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) =>
            {
                Err(EvalDatabaseError::MayNotCreate {
                    role: server.get_user().unwrap_or("(default)").to_owned(),
                    shown,
                })
            }
            Err(e) => Err(EvalDatabaseError::Create {
                name,
                shown,
                detail: db_message(&e),
            }),
        }
    }

    /// The database's URL (with the password the given URL had).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store of `kind` in this database (migrated, filled with its initial contents), with
    /// the SQLite functions the check SQL uses.
    pub async fn open_store(&self, kind: StoreKind) -> Result<Store, EvalDatabaseError> {
        let shared = SharedStore::connect(&self.url).await?;
        let store = shared.store(kind).await?;
        store_connection(&store)
            .with_sql(|session| Ok(install_sqlite_functions(session)))
            .map_err(|e| EvalDatabaseError::Functions {
                name: self.name.clone(),
                source: SqlError::Failed { detail: e.message },
            })?
            .map_err(|source| EvalDatabaseError::Functions {
                name: self.name.clone(),
                source,
            })?;
        Ok(store)
    }

    /// Drops the database (its remaining connections are ended first).
    pub async fn remove(mut self) -> Result<(), EvalDatabaseError> {
        self.removed = true;
        drop_database(&self.server, &self.shown, &self.name).await
    }
}

impl Drop for EvalDatabase {
    /// An eval that ended on an error or a panic still drops its database: on a thread of its
    /// own with a runtime of its own, since this may run inside an async task.
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        let (server, shown, name) = (self.server.clone(), self.shown.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime
                .block_on(drop_database(&server, &shown, &name))
                .map_err(|e| e.to_string())
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("toolgate: {e}");
        }
    }
}

async fn connect(
    server: &tokio_postgres::Config,
    shown: &str,
) -> Result<tokio_postgres::Client, EvalDatabaseError> {
    let (client, connection) =
        server
            .connect(NoTls)
            .await
            .map_err(|e| EvalDatabaseError::Unreachable {
                shown: shown.to_owned(),
                detail: db_message(&e),
            })?;
    tokio::spawn(connection);
    Ok(client)
}

async fn drop_database(
    server: &tokio_postgres::Config,
    shown: &str,
    name: &str,
) -> Result<(), EvalDatabaseError> {
    let failed = |detail: String| EvalDatabaseError::Drop {
        name: name.to_owned(),
        shown: shown.to_owned(),
        detail,
    };
    let client = connect(server, shown)
        .await
        .map_err(|e| failed(e.to_string()))?;
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await
        .map_err(|e| failed(db_message(&e)))
}

/// The connection of a store of either kind.
pub fn store_connection(store: &Store) -> &SharedConnection {
    match store {
        Store::Books(books) => books,
        Store::Notes(notes) => notes,
    }
}

/// A name no other eval of this server uses at the same time: the process id and a counter.
fn next_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "toolgate_eval_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `url` naming the database `name` instead of its own (its user, password, host, port and
/// parameters kept).
fn with_database(url: &str, name: &str) -> Result<String, EvalDatabaseError> {
    let rest = url
        .strip_prefix("postgres://")
        .map(|r| ("postgres://", r))
        .or_else(|| {
            url.strip_prefix("postgresql://")
                .map(|r| ("postgresql://", r))
        });
    let Some((scheme, rest)) = rest else {
        return Err(EvalDatabaseError::BadUrl {
            detail: "it does not begin with postgres://".into(),
        });
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let authority = before_query.split('/').next().unwrap_or_default();
    let mut out = format!("{scheme}{authority}/{name}");
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    Ok(out)
}

/// `host:port/database` (never the password).
fn shown(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(name)) => name.clone(),
        Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => String::new(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config.get_dbname().unwrap_or("(the user's own)");
    format!("{host}:{port}/{database}")
}

/// The server's own message when it sent one (the error's `Display` says only "db error").
fn db_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// Creates [`SQLITE_FUNCTIONS`] in the database `sql` is on (PostgreSQL only).
pub fn install_sqlite_functions(sql: &dyn Sql) -> Result<(), SqlError> {
    sql.execute_batch(SQLITE_FUNCTIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_the_eval_database_and_keeps_the_rest() {
        assert_eq!(
            with_database(
                "postgres://u:p%2Fw@db.internal:5433/team?sslmode=disable",
                "e1"
            )
            .unwrap(),
            "postgres://u:p%2Fw@db.internal:5433/e1?sslmode=disable"
        );
        assert_eq!(
            with_database("postgresql://u@h", "e2").unwrap(),
            "postgresql://u@h/e2"
        );
        assert!(matches!(
            with_database("host=h dbname=team", "e3"),
            Err(EvalDatabaseError::BadUrl { .. })
        ));
    }

    #[test]
    fn names_differ_and_need_no_quoting() {
        let (a, b) = (next_name(), next_name());
        assert_ne!(a, b);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        );
    }
}
