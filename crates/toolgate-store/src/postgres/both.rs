//! For the toolsets' store tests: one test body run twice, on a SQLite file and then on a fresh
//! database of the test process's own PostgreSQL cluster ([`super::cluster::shared`]), so the
//! same contract is held on both stores.
//!
//! A test calls [`on_both_stores`]; its fixture asks [`on_postgres`] which run it is in and, in
//! the PostgreSQL run, opens its store with [`fresh_store`]. Test code: a cluster that cannot
//! be started, or a store that cannot be opened, panics with the reason.

use std::future::Future;

use super::{PgSettings, PgStore};

tokio::task_local! {
    /// Set while a test body runs on PostgreSQL.
    static ON_POSTGRES: bool;
}

/// Whether the current test body is [`on_both_stores`]'s PostgreSQL run.
pub fn on_postgres() -> bool {
    ON_POSTGRES.try_with(|on| *on).unwrap_or(false)
}

/// Runs a store contract test twice: on SQLite files, then on PostgreSQL. Needs tokio's
/// multi-thread runtime (a store's synchronous calls wait on PostgreSQL from the calling
/// thread).
pub async fn on_both_stores<F, Fut>(test: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    test().await;
    eprintln!("-- the same test on PostgreSQL");
    ON_POSTGRES.scope(true, test()).await;
}

/// A toolset's store opened by `open` on a fresh database of the shared test cluster, from
/// synchronous fixture code running on tokio's multi-thread runtime.
pub fn fresh_store<T, Fut>(open: impl FnOnce(PgStore) -> Fut) -> T
where
    Fut: Future<Output = T>,
{
    let handle = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| {
        handle.block_on(async {
            let cluster = match super::cluster::shared() {
                Ok(cluster) => cluster,
                Err(e) => panic!("the test cluster: {e}"),
            };
            let url = match cluster.fresh_database() {
                Ok(url) => url,
                Err(e) => panic!("a fresh database: {e}"),
            };
            match PgStore::connect(&url, PgSettings::default()).await {
                Ok(pg) => open(pg).await,
                Err(e) => panic!("connecting to the fresh database: {e}"),
            }
        })
    })
}
