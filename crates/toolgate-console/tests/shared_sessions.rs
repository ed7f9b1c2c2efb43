//! The console's sessions and sign-ins under way in a shared PostgreSQL database (a real
//! server of the test's own, started with initdb and pg_ctl on 127.0.0.1 and stopped when the
//! test ends), seen through two store handles as two instances behind a load balancer see
//! them: a session opened at one is found at the other, a sign-in is taken once across both,
//! an expired session and a signed-out one are found by neither, the database holds only
//! digests of the secrets, and a database that cannot be reached signs nobody in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use toolgate_console::sessions::{SessionError, SessionRecords, record_key};
use toolgate_console::shared_sessions::SharedSessions;
use toolgate_core::Principal;
use toolgate_store::SharedConnection;
use toolgate_store::postgres::cluster::TempCluster;
use toolgate_store::postgres::{PgSettings, PgStore};

fn cluster() -> TempCluster {
    TempCluster::start().unwrap_or_else(|e| panic!("a PostgreSQL cluster of the test's own: {e}"))
}

fn settings() -> PgSettings {
    PgSettings {
        max_connections: 4,
        connect_timeout: Duration::from_secs(2),
        wait_timeout: Duration::from_secs(2),
    }
}

/// One instance's handle on the database: a pool of its own.
async fn instance(url: &str, lifetime: Duration) -> (PgStore, SharedSessions) {
    let store = PgStore::connect(url, settings()).await.unwrap();
    let conn = SharedConnection::postgres(store.clone(), "console sessions");
    (store, SharedSessions::on(conn, lifetime).unwrap())
}

fn carol() -> Principal {
    let mut p = Principal::local("carol", &["toolgate:approve"]);
    p.tenant = "acme".into();
    p
}

async fn column_values(store: &PgStore, sql: &str) -> Vec<String> {
    let client = store.client().await.unwrap();
    let rows = client.query(sql, &[]).await.unwrap();
    rows.iter()
        .flat_map(|row| (0..row.len()).map(move |i| row.get::<_, String>(i)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_on_one_database_share_sessions_and_sign_ins() {
    let pg = cluster();
    let url = pg.fresh_database().unwrap();
    let hour = Duration::from_secs(3600);
    let (store_a, a) = instance(&url, hour).await;
    let (_store_b, b) = instance(&url, hour).await;

    // A sign-in started at one instance is finished at the other, once.
    let binder = a.start_login("state-1", "verifier-1").await.unwrap();
    assert_eq!(
        b.finish_login("state-1", Some(&binder)).await.as_deref(),
        Some("verifier-1"),
        "a callback that reaches another instance"
    );
    assert_eq!(
        a.finish_login("state-1", Some(&binder)).await,
        None,
        "replayed at the first"
    );
    assert_eq!(
        b.finish_login("state-1", Some(&binder)).await,
        None,
        "replayed at the second"
    );

    // Taken by one callback however many race for it.
    let binder = a.start_login("state-race", "verifier-race").await.unwrap();
    let (x, y) = tokio::join!(
        a.finish_login("state-race", Some(&binder)),
        b.finish_login("state-race", Some(&binder))
    );
    assert_eq!(
        [x, y].iter().flatten().count(),
        1,
        "exactly one of two racing callbacks"
    );

    // A sign-in finished from another browser is refused and spent.
    let victims = a.start_login("state-v", "verifier-v").await.unwrap();
    // (Both are spent by the refused callbacks below.)
    let _attackers = a.start_login("state-a", "verifier-a").await.unwrap();
    assert_eq!(b.finish_login("state-a", Some(&victims)).await, None);
    assert_eq!(
        b.finish_login("state-v", None).await,
        None,
        "no login cookie"
    );
    assert_eq!(
        a.finish_login("state-v", Some(&victims)).await,
        None,
        "spent by the refused callback"
    );

    // A session opened at one instance is found at the other, with the same CSRF token.
    let id = a.open(carol()).await.unwrap();
    let at_a = a.find(&id).await.unwrap();
    let at_b = b.find(&id).await.unwrap();
    assert_eq!(at_b.principal, carol());
    assert_eq!(at_b.csrf, at_a.csrf);
    assert_eq!(at_b.csrf.len(), 64);
    assert!(b.find("not-a-session").await.is_none());
    assert!(
        b.find(&record_key(&id)).await.is_none(),
        "the stored digest is not a session id"
    );

    // The database holds digests, never the id, the state, the binder or its key's source.
    let stored = column_values(&store_a, "SELECT id_hash, csrf FROM console_sessions").await;
    assert!(stored.contains(&record_key(&id)));
    assert!(!stored.iter().any(|v| v.contains(&id)), "a raw session id");
    let kept = a.start_login("state-kept", "verifier-kept").await.unwrap();
    let logins = column_values(
        &store_a,
        "SELECT state_hash, verifier, binder_hash FROM console_logins",
    )
    .await;
    assert!(logins.contains(&record_key("state-kept")));
    assert!(logins.contains(&record_key(&kept)));
    assert!(!logins.iter().any(|v| v == "state-kept"), "a raw state");
    assert!(
        !logins.iter().any(|v| v.contains(&kept)),
        "a raw login binder"
    );

    // Sign-out at one instance is seen at the other.
    b.close(&id).await.unwrap();
    assert!(
        a.find(&id).await.is_none(),
        "signed out at the other instance"
    );
    assert!(b.find(&id).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_is_found_nowhere_and_is_purged() {
    let pg = cluster();
    let url = pg.fresh_database().unwrap();
    let (store_a, a) = instance(&url, Duration::ZERO).await;
    let (_, b) = instance(&url, Duration::from_secs(3600)).await;
    let expired = a.open(carol()).await.unwrap();
    assert!(
        a.find(&expired).await.is_none(),
        "expired where it was opened"
    );
    assert!(
        b.find(&expired).await.is_none(),
        "expired at another instance"
    );
    // The next session written purges the expired row.
    let live = b.open(carol()).await.unwrap();
    let stored = column_values(&store_a, "SELECT id_hash FROM console_sessions").await;
    assert_eq!(stored, vec![record_key(&live)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_cannot_be_reached_signs_nobody_in() {
    let pg = cluster();
    let url = pg.fresh_database().unwrap();
    let (_, a) = instance(&url, Duration::from_secs(3600)).await;
    let id = a.open(carol()).await.unwrap();
    let binder = a.start_login("state-1", "verifier-1").await.unwrap();
    pg.stop().unwrap();
    assert!(
        a.find(&id).await.is_none(),
        "not signed in, rather than signed in"
    );
    assert_eq!(a.finish_login("state-1", Some(&binder)).await, None);
    assert_eq!(a.open(carol()).await, Err(SessionError::Store));
    assert_eq!(
        a.start_login("state-2", "verifier-2").await,
        Err(SessionError::Store)
    );
    assert_eq!(a.close(&id).await, Err(SessionError::Store));
}
