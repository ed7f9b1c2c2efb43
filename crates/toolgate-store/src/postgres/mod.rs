//! PostgreSQL as a team's shared store: one database that any number of toolgate instances
//! use at once (`--store postgres://...`), with SQLite staying the embedded default.
//!
//! - [`PgStore`]: a bounded pool of connections ([`deadpool_postgres`] over
//!   [`tokio_postgres`]), opened only on a database whose schema this binary knows: the versioned
//!   migrations in `crates/toolgate-store/migrations/` are applied at start ([`refinery`]), one
//!   instance at a time, and a database whose schema is newer than the binary is refused, never
//!   altered ([`migrate`]).
//! - [`sql`]: the stores' statements ([`toolgate_core::sql::Sql`]) on a pooled connection, with
//!   write transactions that serialize a store's writers across instances.
//! - [`tickets`]: the approval ledger's tickets, so a ticket issued through one instance is
//!   redeemed through another, once.
//! - [`audit`]: the decision records of every instance as a queryable table, written off the
//!   call path.
//! - [`both`]: a store test run on SQLite and then on PostgreSQL.
//! - [`cluster`]: a throwaway cluster of its own for tests and benchmarks.
//!
//! Guarantees: every way of not getting a working store at start is a typed [`PgError`] that
//! says what to fix and never prints the password; a store that goes away later makes each
//! call fail with a typed error (a tool call's `transient_dependency`, an approval's
//! `ledger_failed`) and the pool reconnects when it returns; waiting for a connection is
//! bounded in time.

pub mod audit;
pub mod both;
pub mod cluster;
mod error;
pub mod migrate;
pub mod sql;
pub mod tickets;

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

pub use error::{PgError, unreachable_store};

/// How many connections an instance may hold, and how long it waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgSettings {
    /// At most this many connections from this instance (PostgreSQL's own default limit is
    /// 100 for all clients together).
    pub max_connections: usize,
    /// How long opening one connection may take.
    pub connect_timeout: Duration,
    /// How long a call waits for a free connection before it fails.
    pub wait_timeout: Duration,
}

impl Default for PgSettings {
    fn default() -> Self {
        PgSettings {
            max_connections: 16,
            connect_timeout: Duration::from_secs(5),
            wait_timeout: Duration::from_secs(10),
        }
    }
}

/// A pool of connections to a database with a schema this binary knows.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// `host:port/database`, for messages (never the password).
    shown: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("database", &self.shown)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`),
    /// checks that it answers, and brings its schema up to this binary's (or refuses a newer
    /// one).
    pub async fn connect(url: &str, settings: PgSettings) -> Result<PgStore, PgError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| PgError::BadUrl {
            detail: format!("{e}"),
        })?;
        if config.get_hosts().is_empty() {
            return Err(PgError::BadUrl {
                detail: "it names no host (postgres://user:password@host:port/database)".into(),
            });
        }
        config.connect_timeout(settings.connect_timeout);
        config.application_name("toolgate");
        let shown = shown(&config);
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(settings.wait_timeout))
            .create_timeout(Some(settings.connect_timeout))
            .build()
            .map_err(|e| PgError::Pool {
                detail: e.to_string(),
            })?;
        let store = PgStore { pool, shown };
        let mut client = store
            .pool
            .get()
            .await
            .map_err(|e| PgError::from_pool(&store.shown, e))?;
        migrate::bring_up_to_date(&mut client, &store.shown).await?;
        Ok(store)
    }

    /// A connection from the pool, for one unit of work; a store that cannot be reached is a
    /// `transient_dependency` tool error.
    pub async fn client(&self) -> Result<deadpool_postgres::Object, toolgate_core::ToolError> {
        self.pool
            .get()
            .await
            .map_err(|e| unreachable_store(&self.shown, &e.to_string()))
    }

    /// `host:port/database` (never the password).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// How many connections the pool holds now, and how many of them are idle.
    pub fn pool_status(&self) -> (usize, usize) {
        let status = self.pool.status();
        (status.size, status.available)
    }
}

fn shown(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_default();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config.get_dbname().unwrap_or("(the user's own)");
    format!("{host}:{port}/{database}")
}

/// The database as a required dependency of an instance: reachable when `SELECT 1` answers
/// within two seconds.
impl toolgate_core::health::HealthCheck for PgStore {
    fn check(&self) -> toolgate_core::BoxFuture<'_, toolgate_core::health::Check> {
        Box::pin(async move {
            let answered = tokio::time::timeout(Duration::from_secs(2), async {
                let client = self.pool.get().await.ok()?;
                client.query_one("SELECT 1", &[]).await.ok()
            })
            .await;
            let ready = matches!(answered, Ok(Some(_)));
            toolgate_core::health::Check {
                name: "database".into(),
                ready,
                required: true,
                state: if ready { "reachable" } else { "unreachable" }.into(),
            }
        })
    }
}
