//! Shared setup for the books tests: a fresh database file and a dispatcher over a toolset.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::sync::Arc;

use toolgate_books::{BooksStore, Toolset};
use toolgate_core::{CallOutcome, CallRequest, Dispatcher, Principal, Registry};

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub store: BooksStore,
    pub dispatcher: Dispatcher,
}

pub fn fixture(toolset: Toolset) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = BooksStore::init(&dir.path().join("books.sqlite")).unwrap();
    let registry = Registry::new(toolset.tools(&store).unwrap()).unwrap();
    Fixture {
        _dir: dir,
        store,
        dispatcher: Dispatcher::new(Arc::new(registry)).unwrap(),
    }
}

impl Fixture {
    pub async fn call(&self, tool: &str, args: serde_json::Value) -> CallOutcome {
        self.dispatcher
            .call(CallRequest::new(
                Principal::local("tester", &[]),
                "run-1",
                tool,
                args,
            ))
            .await
    }

    pub fn sql_i64(&self, sql: &str) -> i64 {
        self.store
            .with_conn(|c| c.query_row(sql, [], |r| r.get(0)).unwrap())
            .unwrap()
    }

    pub fn sql_ids(&self, sql: &str) -> Vec<i64> {
        self.store
            .with_conn(|c| {
                let mut stmt = c.prepare(sql).unwrap();
                stmt.query_map([], |r| r.get(0))
                    .unwrap()
                    .collect::<Result<Vec<i64>, _>>()
                    .unwrap()
            })
            .unwrap()
    }
}
