use super::*;
use serde_json::json;
use std::sync::Arc;

fn alice() -> Principal {
    Principal::local("alice", &[])
}

fn open(path: &std::path::Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    conn.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE IF NOT EXISTS effects (n INTEGER);")
        .unwrap();
    install(&conn).unwrap();
    conn
}

fn add_effect(tx: &dyn crate::sql::Sql) -> Result<WriteEffect, ToolError> {
    tx.execute("INSERT INTO effects (n) VALUES (1)", &[])?;
    Ok(WriteEffect {
        result: json!({"added": 1}),
        undo: None,
    })
}

#[test]
fn sixteen_racing_duplicates_on_separate_connections_leave_one_effect() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("race.sqlite"));
    drop(open(&path));
    let key = IdempotencyKey::derived(&alice(), "run-1", "demo_add", "{}");
    let handles: Vec<_> = (0..16)
        .map(|_| {
            let path = Arc::clone(&path);
            let key = key.clone();
            std::thread::spawn(move || {
                let mut conn = open(&path);
                run_once_on(&mut conn, &key, 1, add_effect).unwrap()
            })
        })
        .collect();
    let receipts: Vec<Receipt> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let firsts = receipts.iter().filter(|r| !r.duplicate).count();
    assert_eq!(firsts, 1, "exactly one call performs the effect");
    assert!(
        receipts
            .iter()
            .all(|r| r.result == json!({"added": 1}) && r.key == key.key)
    );
    let conn = open(&path);
    let n: i64 = conn
        .query_row("SELECT count(*) FROM effects", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn failed_effect_records_neither_effect_nor_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("f.sqlite"));
    let key = IdempotencyKey::derived(&alice(), "run", "demo_add", "{}");
    let failed = run_once_on(&mut conn, &key, 1, |tx| {
        add_effect(tx)?;
        Err(ToolError::invalid("x", "refused after writing"))
    });
    assert_eq!(failed.unwrap_err().code, ErrorCode::InvalidArgument);
    let rows: i64 = conn
        .query_row(
            "SELECT (SELECT count(*) FROM effects) + (SELECT count(*) FROM tool_receipts)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 0);
    let retried = run_once_on(&mut conn, &key, 2, add_effect).unwrap();
    assert!(!retried.duplicate);
}

#[test]
fn reusing_a_given_key_for_other_arguments_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("c.sqlite"));
    let first = IdempotencyKey::given("k1", &alice(), "demo_add", r#"{"n":1}"#);
    let second = IdempotencyKey::given("k1", &alice(), "demo_add", r#"{"n":2}"#);
    run_once_on(&mut conn, &first, 1, add_effect).unwrap();
    let err = run_once_on(&mut conn, &second, 2, add_effect).unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
}

#[test]
fn same_write_by_two_principals_gets_two_keys() {
    let bob = Principal::local("bob", &[]);
    let mut other_tenant = alice();
    other_tenant.tenant = "acme".into();
    let base = IdempotencyKey::derived(&alice(), "run", "demo_add", "{}");
    for other in [
        IdempotencyKey::derived(&bob, "run", "demo_add", "{}"),
        IdempotencyKey::derived(&other_tenant, "run", "demo_add", "{}"),
        IdempotencyKey::derived(&alice(), "run-2", "demo_add", "{}"),
    ] {
        assert_ne!(base.key, other.key);
    }
    assert_ne!(
        IdempotencyKey::given("k", &alice(), "demo_add", "{}").key,
        IdempotencyKey::given("k", &bob, "demo_add", "{}").key
    );
}

fn claimed(conn: &mut Connection, key: &IdempotencyKey) -> Result<Claimed<()>, ToolError> {
    claim_on(conn, key, 1, "the demo effects table", |_| Ok(()))
}

#[test]
fn remote_effect_that_failed_before_it_started_releases_its_claim_and_a_retry_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("r.sqlite"));
    let key = IdempotencyKey::derived(&alice(), "run", "demo_send", "{}");
    let Claimed::New(first, ()) = claimed(&mut conn, &key).unwrap() else {
        panic!("a fresh key is claimed");
    };
    // The relay refused before anything was sent.
    release_on(&mut conn, first, |_| Ok(())).unwrap();
    let Claimed::New(second, ()) = claimed(&mut conn, &key).unwrap() else {
        panic!("a released key can be claimed again");
    };
    let receipt = settle_on(&mut conn, second, 2, add_effect).unwrap();
    assert!(!receipt.duplicate());
    match claimed(&mut conn, &key).unwrap() {
        Claimed::Recorded(again) => {
            assert!(again.duplicate());
            assert_eq!(again.result(), receipt.result());
        }
        Claimed::New(..) => panic!("a settled key replays its receipt"),
    }
    let n: i64 = conn
        .query_row("SELECT count(*) FROM effects", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1, "the effect was recorded once");
}

#[test]
fn unsettled_claim_refuses_a_second_attempt_and_says_what_to_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("u.sqlite"));
    let key = IdempotencyKey::derived(&alice(), "run", "demo_send", "{}");
    let Claimed::New(_in_flight, ()) = claimed(&mut conn, &key).unwrap() else {
        panic!("a fresh key is claimed");
    };
    for attempt in [
        claimed(&mut conn, &key).map(|_| ()),
        run_once_on(&mut conn, &key, 3, add_effect).map(|_| ()),
    ] {
        let refused = attempt.unwrap_err();
        assert_eq!(refused.code, ErrorCode::Conflict);
        assert!(
            refused
                .hint
                .as_deref()
                .is_some_and(|h| h.contains("the demo effects table")),
            "{refused:?}"
        );
    }
}

#[test]
fn claimed_key_reused_for_other_arguments_is_a_conflict_about_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("k.sqlite"));
    let first = IdempotencyKey::given("k1", &alice(), "demo_send", r#"{"n":1}"#);
    let second = IdempotencyKey::given("k1", &alice(), "demo_send", r#"{"n":2}"#);
    let Claimed::New(_c, ()) = claimed(&mut conn, &first).unwrap() else {
        panic!("claimed");
    };
    let err = claimed(&mut conn, &second).unwrap_err();
    assert!(err.message.contains("different call"), "{err:?}");
}
