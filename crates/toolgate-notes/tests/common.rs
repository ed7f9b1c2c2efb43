//! Shared setup for the notes tests: a fresh sample database file, a manual clock, and the real
//! dispatcher over the notes tools.

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
    let dir = tempfile::tempdir().unwrap();
    let store = NotesStore::init_sample(&dir.path().join("notes.sqlite")).unwrap();
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
        self.store
            .with_conn(|c| c.query_row(sql, [], |r| r.get(0)).unwrap())
            .unwrap()
    }

    pub fn sql_text(&self, sql: &str) -> String {
        self.store
            .with_conn(|c| c.query_row(sql, [], |r| r.get(0)).unwrap())
            .unwrap()
    }

    pub fn id_of(&self, title_prefix: &str) -> i64 {
        self.store
            .with_conn(|c| {
                c.query_row(
                    "SELECT id FROM notes WHERE title LIKE ?1 || '%' ORDER BY id LIMIT 1",
                    [title_prefix],
                    |r| r.get(0),
                )
                .unwrap()
            })
            .unwrap()
    }

    pub fn count_notes(&self) -> i64 {
        self.sql_i64("SELECT count(*) FROM notes")
    }

    /// FTS5's own check that the index matches the notes table.
    pub fn fts_in_sync(&self) -> bool {
        self.store
            .with_conn(|c| {
                c.execute(
                    "INSERT INTO notes_fts (notes_fts, rank) VALUES ('integrity-check', 1)",
                    [],
                )
                .is_ok()
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
