//! Receipts and claims held to one contract on both stores: a SQLite file and PostgreSQL (a
//! server of the test's own). Then what only a shared store must show: the same write sent by
//! many callers through three instances makes one effect (and two principals make two), and a
//! database that goes away mid-run fails the write typed, with nothing half-written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolgate_core::idempotency::{
    Claimed, IdempotencyKey, WriteEffect, claim_on, install, release_on, run_once_on, settle_on,
};
use toolgate_core::sql::{Sql, SqlSession};
use toolgate_core::{ErrorCode, Principal, ToolError, sql_params};
use toolgate_store::postgres::cluster::TempCluster;
use toolgate_store::postgres::sql::writer_lock;
use toolgate_store::postgres::{PgSettings, PgStore};

const EFFECTS: &str = "CREATE TABLE IF NOT EXISTS effects (who TEXT NOT NULL, n BIGINT NOT NULL)";

fn principal(id: &str) -> Principal {
    Principal::local(id, &[])
}

fn add_effect(who: &'static str) -> impl FnOnce(&dyn Sql) -> Result<WriteEffect, ToolError> {
    move |tx| {
        tx.execute(
            "INSERT INTO effects (who, n) VALUES (?1, 1)",
            sql_params![who],
        )?;
        Ok(WriteEffect {
            result: json!({"added": who}),
            undo: Some(json!({"remove": who})),
        })
    }
}

fn effects(conn: &dyn Sql) -> i64 {
    conn.query_i64("SELECT count(*) FROM effects", &[]).unwrap()
}

/// The contract, on one session of either store.
fn holds_the_receipts_contract(session: &mut dyn SqlSession, store: &str) {
    let key = IdempotencyKey::derived(&principal("alice"), "run-1", "demo_add", "{}");
    let first = run_once_on(session, &key, 10, add_effect("alice")).unwrap();
    assert!(!first.duplicate(), "{store}");
    let again = run_once_on(session, &key, 11, add_effect("alice")).unwrap();
    assert!(again.duplicate(), "{store}: a retry replays the receipt");
    assert_eq!(again.result(), &json!({"added": "alice"}), "{store}");
    assert_eq!(again.undo(), Some(&json!({"remove": "alice"})), "{store}");
    assert_eq!(again.created_at_unix(), 10, "{store}");
    assert_eq!(effects(session), 1, "{store}: one effect");

    let other_args = IdempotencyKey::given("k", &principal("alice"), "demo_add", "{\"a\":1}");
    run_once_on(session, &other_args, 12, add_effect("alice")).unwrap();
    let reused = IdempotencyKey::given("k", &principal("alice"), "demo_add", "{\"a\":2}");
    let conflict = run_once_on(session, &reused, 13, add_effect("alice")).unwrap_err();
    assert_eq!(
        conflict.code,
        ErrorCode::Conflict,
        "{store}: a key reused for other arguments"
    );

    let failing = IdempotencyKey::derived(&principal("alice"), "run-2", "demo_add", "{}");
    let failed = run_once_on(session, &failing, 14, |tx| {
        add_effect("alice")(tx)?;
        Err(ToolError::internal(
            "the effect failed after its first statement",
        ))
    });
    assert!(failed.is_err(), "{store}");
    assert_eq!(
        effects(session),
        2,
        "{store}: a failed effect leaves nothing"
    );
    let retried = run_once_on(session, &failing, 15, add_effect("alice")).unwrap();
    assert!(
        !retried.duplicate(),
        "{store}: a failed effect leaves no key either"
    );

    let remote = IdempotencyKey::derived(&principal("alice"), "run-3", "demo_send", "{}");
    let Claimed::New(claim, ()) = claim_on(session, &remote, 20, "the outbox", |_| Ok(())).unwrap()
    else {
        panic!("{store}: a fresh key is claimed");
    };
    let unsettled = claim_on(session, &remote, 21, "the outbox", |_| Ok(())).unwrap_err();
    assert_eq!(unsettled.code, ErrorCode::Conflict, "{store}");
    assert!(
        unsettled
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("the outbox"),
        "{store}: says what to check: {unsettled:?}"
    );
    release_on(session, claim, |_| Ok(())).unwrap();
    let Claimed::New(claim, ()) = claim_on(session, &remote, 22, "the outbox", |_| Ok(())).unwrap()
    else {
        panic!("{store}: a released key is claimed again");
    };
    let settled = settle_on(session, claim, 23, add_effect("sent")).unwrap();
    assert!(!settled.duplicate(), "{store}");
    match claim_on(session, &remote, 24, "the outbox", |_| Ok(())).unwrap() {
        Claimed::Recorded(receipt) => assert!(receipt.duplicate(), "{store}"),
        Claimed::New(..) => panic!("{store}: a settled key is never claimed again"),
    }
}

fn cluster() -> TempCluster {
    TempCluster::start().unwrap_or_else(|e| panic!("a PostgreSQL cluster of the test's own: {e}"))
}

async fn pg(url: &str) -> PgStore {
    PgStore::connect(url, PgSettings::default()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_and_claims_keep_one_contract_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let mut sqlite = rusqlite::Connection::open(dir.path().join("store.sqlite")).unwrap();
    install(&sqlite).unwrap();
    Sql::execute_batch(&sqlite, EFFECTS).unwrap();
    holds_the_receipts_contract(&mut sqlite, "SQLite");

    let server = cluster();
    let store = pg(&server.url()).await;
    store
        .blocking(writer_lock("test"), |session| {
            session.execute_batch(EFFECTS)?;
            holds_the_receipts_contract(session, "PostgreSQL");
            Ok(())
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_write_sent_through_three_instances_makes_one_effect_and_two_principals_make_two() {
    let server = cluster();
    let url = server.url();
    let (a, b, c) = tokio::join!(pg(&url), pg(&url), pg(&url));
    let instances = [a, b, c];
    instances[0]
        .blocking(writer_lock("test"), |s| Ok(s.execute_batch(EFFECTS)?))
        .await
        .unwrap();
    let mut calls = Vec::new();
    for i in 0..24 {
        // Each principal's write, sent 12 times, spread over the three instances.
        let who: &'static str = if i % 2 == 0 { "alice" } else { "bob" };
        let store = instances[i % 3].clone();
        let key = IdempotencyKey::given("once", &principal(who), "demo_add", "{}");
        calls.push(tokio::spawn(async move {
            store
                .blocking(writer_lock("test"), move |s| {
                    run_once_on(s, &key, 1, add_effect(who))
                })
                .await
        }));
    }
    let mut firsts = 0;
    for call in calls {
        let receipt = call.await.unwrap().unwrap();
        if !receipt.duplicate() {
            firsts += 1;
        }
    }
    assert_eq!(firsts, 2, "one first receipt per principal");
    let per_principal = instances[1]
        .blocking(writer_lock("test"), |s| {
            Ok(s.query(
                "SELECT who, count(*) FROM effects GROUP BY who ORDER BY who",
                &[],
            )?)
        })
        .await
        .unwrap();
    let counts: Vec<(String, i64)> = per_principal
        .iter()
        .map(|r| (r.text(0).unwrap(), r.i64(1).unwrap()))
        .collect();
    assert_eq!(counts, [("alice".to_string(), 1), ("bob".to_string(), 1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_goes_away_fails_writes_typed_with_nothing_half_written() {
    let server = cluster();
    let store = PgStore::connect(
        &server.url(),
        PgSettings {
            connect_timeout: Duration::from_secs(2),
            wait_timeout: Duration::from_secs(3),
            ..PgSettings::default()
        },
    )
    .await
    .unwrap();
    store
        .blocking(writer_lock("test"), |s| Ok(s.execute_batch(EFFECTS)?))
        .await
        .unwrap();
    let key = IdempotencyKey::derived(&principal("alice"), "run-1", "demo_add", "{}");
    let store = Arc::new(store);
    server.stop().unwrap();
    let down = {
        let key = key.clone();
        store
            .blocking(writer_lock("test"), move |s| {
                run_once_on(s, &key, 1, add_effect("alice"))
            })
            .await
            .unwrap_err()
    };
    assert_eq!(down.code, ErrorCode::TransientDependency, "{down:?}");
    server.restart().unwrap();
    let mut back = Err(down);
    for _ in 0..20 {
        let key = key.clone();
        back = store
            .blocking(writer_lock("test"), move |s| {
                run_once_on(s, &key, 2, add_effect("alice"))
            })
            .await;
        if back.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let receipt = back.unwrap();
    assert!(
        !receipt.duplicate(),
        "the write refused while the database was down never happened"
    );
    let n = store
        .blocking(writer_lock("test"), |s| {
            Ok(s.query_i64("SELECT count(*) FROM effects", &[])?)
        })
        .await
        .unwrap();
    assert_eq!(n, 1);
}
