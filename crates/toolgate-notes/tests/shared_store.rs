//! The notes store as a team's shared PostgreSQL database: instances that open it together fill
//! it once, a write made through one instance is undone through another, and undo and reset
//! touch only the notes toolset's own rows and receipts, never another toolset's in the same
//! database.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use serde_json::json;
use toolgate_core::{CallRequest, Caller, Dispatcher, ManualClock, Principal, Registry};
use toolgate_notes::store::Contents;
use toolgate_notes::{NotesStore, undo_last};
use toolgate_store::postgres::{PgStore, cluster};

/// A fresh database of the test cluster.
async fn fresh_database() -> String {
    tokio::task::spawn_blocking(|| cluster::shared().unwrap().fresh_database().unwrap())
        .await
        .unwrap()
}

/// One instance's store on the database at `url` (its own connection pool).
async fn instance(url: &str) -> NotesStore {
    let pg = PgStore::connect(url, Default::default()).await.unwrap();
    NotesStore::on_postgres(pg).await.unwrap()
}

fn caller(store: &NotesStore) -> Caller {
    let registry = Registry::new(toolgate_notes::tools(store).unwrap()).unwrap();
    Caller::new(
        Dispatcher::new(Arc::new(registry))
            .unwrap()
            .with_clock(Arc::new(ManualClock::at_unix(common::NOW_UNIX))),
    )
}

fn count(store: &NotesStore, sql: &str) -> i64 {
    common::store_i64(store, sql)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_that_open_an_empty_store_together_fill_it_once() {
    let url = fresh_database().await;
    let starting: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { instance(&url).await })
        })
        .collect();
    let mut opened = Vec::new();
    for started in starting {
        opened.push(started.await.unwrap());
    }
    let sample = Contents::Sample.notes().unwrap().len() as i64;
    for store in &opened {
        assert_eq!(count(store, "SELECT count(*) FROM notes"), sample);
    }
    assert_eq!(count(&opened[0], "SELECT max(id) FROM notes"), sample);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_instance_is_undone_through_another() {
    let url = fresh_database().await;
    let (a, b) = (instance(&url).await, instance(&url).await);
    let out = caller(&a)
        .call(
            CallRequest::new(
                Principal::local("tester", &[]),
                "run-1",
                "notes_create",
                json!({"title": "Shared shopping list", "body": "oat milk"}),
            )
            .with_run("run-1"),
        )
        .await;
    let id = out.observation().unwrap().content["created"]["id"]
        .as_i64()
        .unwrap();
    assert_eq!(
        count(&b, &format!("SELECT count(*) FROM notes WHERE id = {id}")),
        1
    );
    let undone = undo_last(&b, 5).unwrap();
    assert_eq!(undone.len(), 1, "{undone:?}");
    assert_eq!(undone[0].note_ids, [id]);
    assert_eq!(
        count(&a, &format!("SELECT count(*) FROM notes WHERE id = {id}")),
        0
    );
    assert!(
        undo_last(&a, 5).unwrap().is_empty(),
        "undone once, at either instance"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_and_reset_leave_another_toolsets_receipts_alone() {
    let url = fresh_database().await;
    let store = instance(&url).await;
    let note = caller(&store)
        .call(
            CallRequest::new(
                Principal::local("tester", &[]),
                "run-1",
                "notes_create",
                json!({"title": "temp", "body": "x"}),
            )
            .with_run("run-1"),
        )
        .await;
    assert!(note.observation().is_some(), "{:?}", note.result);
    // A newer receipt of another toolset, with an undo handle the notes toolset cannot read.
    common::store_execute(
        &store,
        "INSERT INTO tool_receipts (key, tool, args_hash, result, undo, created_at)
         VALUES ('books-key', 'books_set_status', 'h', '{}', '{\"action\": \"restore_status\"}', 1)",
        &[],
    )
    .unwrap();
    let undone = undo_last(&store, 5).unwrap();
    assert_eq!(
        undone.iter().map(|u| u.tool.as_str()).collect::<Vec<_>>(),
        ["notes_create"],
        "the books receipt is neither undone nor an unreadable handle"
    );
    store.reset().unwrap();
    assert_eq!(
        count(&store, "SELECT count(*) FROM tool_receipts"),
        1,
        "reset removed the notes receipt only"
    );
    assert_eq!(
        common::store_text(&store, "SELECT tool FROM tool_receipts"),
        "books_set_status"
    );
    assert_eq!(count(&store, "SELECT count(*) FROM notes_undone"), 0);
}
