//! Shared setup for the notes tests: a fresh sample store, a manual clock, and the real
//! dispatcher over the notes tools. A store is a SQLite file, or, inside [`on_both_stores`]'s
//! second run, a fresh database of a real PostgreSQL server (the test process's own cluster).

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::Value;
use toolgate_core::{
    Approver, CallOutcome, CallRequest, Caller, Dispatcher, ManualClock, Principal, Registry,
};
use toolgate_notes::NotesStore;

/// The tests' today: three days after the last design-team meeting.
pub const TODAY: &str = "2025-12-05";
/// 2025-12-05 10:00 UTC.
pub const NOW_UNIX: u64 = 20_427 * 86_400 + 10 * 3_600;

#[allow(unused_imports)] // not every test binary runs on both stores
pub use toolgate_store::postgres::both::{on_both_stores, on_postgres};

/// A store holding the sample notebook: a new SQLite file in the returned folder, or a fresh
/// PostgreSQL database filled by `NotesStore::on_postgres`.
pub fn sample_store() -> (tempfile::TempDir, NotesStore) {
    let dir = tempfile::tempdir().unwrap();
    if !on_postgres() {
        let store = NotesStore::init_sample(&dir.path().join("notes.sqlite")).unwrap();
        return (dir, store);
    }
    let store = toolgate_store::postgres::both::fresh_store(|pg| async move {
        NotesStore::on_postgres(pg).await.unwrap()
    });
    (dir, store)
}

/// A store with no notes (ids from 1), on the database of this run.
pub fn empty_store() -> (tempfile::TempDir, NotesStore) {
    if !on_postgres() {
        let dir = tempfile::tempdir().unwrap();
        let store = NotesStore::init(&dir.path().join("notes.sqlite")).unwrap();
        return (dir, store);
    }
    let (dir, store) = sample_store();
    store
        .with_sql(|c| Ok(c.execute_batch("TRUNCATE notes RESTART IDENTITY")?))
        .unwrap();
    (dir, store)
}

/// The first column of the first row of `sql` on `store`, as an integer.
pub fn store_i64(store: &NotesStore, sql: &str) -> i64 {
    store.with_sql(|c| Ok(c.query_i64(sql, &[])?)).unwrap()
}

/// The first column of the first row of `sql` on `store`, as text (NULL as "").
pub fn store_text(store: &NotesStore, sql: &str) -> String {
    store
        .with_sql(|c| Ok(c.query_opt(sql, &[])?.unwrap().opt_text(0)?))
        .unwrap()
        .unwrap_or_default()
}

/// Runs the statement `sql` with `params` on `store`: how many rows changed, or why not.
pub fn store_execute(
    store: &NotesStore,
    sql: &str,
    params: &[toolgate_core::sql::SqlValue],
) -> Result<u64, toolgate_core::sql::SqlError> {
    store.with_sql(|c| Ok(c.execute(sql, params))).unwrap()
}

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub store: NotesStore,
    pub clock: Arc<ManualClock>,
    pub registry: Arc<Registry>,
    pub caller: Caller,
}

pub fn fixture() -> Fixture {
    fixture_in(toolgate_notes::Design::V1)
}

/// The fixture with the notes tools in `design`.
pub fn fixture_in(design: toolgate_notes::Design) -> Fixture {
    let (dir, store) = sample_store();
    let tools = toolgate_notes::tools::designed_notes_tools(&store, design).unwrap();
    let registry = Arc::new(Registry::new(tools).unwrap());
    let clock = Arc::new(ManualClock::at_unix(NOW_UNIX));
    let caller = Caller::new(
        Dispatcher::new(Arc::clone(&registry))
            .unwrap()
            .with_clock(clock.clone()),
    );
    Fixture {
        _dir: dir,
        store,
        clock,
        registry,
        caller,
    }
}

impl Fixture {
    /// A dispatcher like the fixture's, with `approver` attached.
    pub fn dispatcher_with(&self, approver: Arc<dyn Approver>) -> Caller {
        self.caller.clone().with_approver(approver)
    }

    pub async fn call(&self, tool: &str, args: Value) -> CallOutcome {
        self.call_in_run("run-1", tool, args).await
    }

    pub async fn call_in_run(&self, run: &str, tool: &str, args: Value) -> CallOutcome {
        self.caller
            .call(
                CallRequest::new(Principal::local("tester", &[]), "run-1", tool, args)
                    .with_run(run),
            )
            .await
    }

    pub fn sql_i64(&self, sql: &str) -> i64 {
        store_i64(&self.store, sql)
    }

    pub fn sql_text(&self, sql: &str) -> String {
        store_text(&self.store, sql)
    }

    pub fn id_of(&self, title_prefix: &str) -> i64 {
        self.store
            .with_sql(|c| {
                Ok(c.query_i64(
                    "SELECT id FROM notes WHERE title LIKE ?1 ORDER BY id LIMIT 1",
                    toolgate_core::sql_params![format!("{title_prefix}%")],
                )?)
            })
            .unwrap()
    }

    pub fn count_notes(&self) -> i64 {
        self.sql_i64("SELECT count(*) FROM notes")
    }

    /// The search index matches the notes table: FTS5's own check on SQLite; on PostgreSQL,
    /// every note's stored tsvector is the one its title and body make now.
    pub fn fts_in_sync(&self) -> bool {
        self.store
            .with_sql(|c| {
                if on_postgres() {
                    return Ok(c.query_i64(
                        "SELECT count(*) FROM notes WHERE search IS DISTINCT FROM
                         (setweight(to_tsvector('english', title), 'A')
                          || setweight(to_tsvector('english', body), 'D'))",
                        &[],
                    )? == 0);
                }
                Ok(c.execute(
                    "INSERT INTO notes_fts (notes_fts, rank) VALUES ('integrity-check', 1)",
                    &[],
                )
                .is_ok())
            })
            .unwrap()
    }
}

pub fn content(outcome: &CallOutcome) -> &Value {
    &outcome
        .observation()
        .unwrap_or_else(|| panic!("call failed: {:?}", outcome.result))
        .content
}
