//! The approval ledger's contract, held end to end against both stores: SQLite (in memory and
//! a file) and PostgreSQL (a real server of the test's own, started with initdb and pg_ctl on
//! 127.0.0.1 and stopped when the test ends). Then what only a shared store must show: a ticket
//! issued through one instance and redeemed through another, once, however many race; and the
//! ways a PostgreSQL store is refused or fails, each typed and closed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use toolgate_core::{ApprovalLedger, Denial, Principal};
use toolgate_store::postgres::cluster::TempCluster;
use toolgate_store::postgres::migrate::{HISTORY_TABLE, known_version};
use toolgate_store::postgres::tickets::PgTickets;
use toolgate_store::postgres::{PgError, PgSettings, PgStore};

fn user(tenant: &str, id: &str) -> Principal {
    let mut p = Principal::local(id, &[]);
    p.tenant = tenant.into();
    p
}

fn cluster() -> TempCluster {
    TempCluster::start().unwrap_or_else(|e| panic!("a PostgreSQL cluster of the test's own: {e}"))
}

async fn pg_ledger(url: &str) -> ApprovalLedger {
    let store = PgStore::connect(url, PgSettings::default()).await.unwrap();
    ApprovalLedger::on(PgTickets::new(store))
}

/// The ledger table every store must give: each refusal typed, one use, expiry, a declined
/// ticket spent.
async fn holds_the_ledger_contract(ledger: &ApprovalLedger, store: &str) {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let ttl = Duration::from_secs(60);
    let alice = user("acme", "alice");
    let token = ledger.issue("bind-a", &alice, t0, ttl).await.unwrap();
    let cases = [
        (
            "an unknown token",
            "nope",
            "bind-a",
            alice.clone(),
            Err(Denial::UnknownTicket),
        ),
        (
            "another caller",
            &token,
            "bind-a",
            user("acme", "mallory"),
            Err(Denial::OtherCaller),
        ),
        (
            "the same name in another tenant",
            &token,
            "bind-a",
            user("globex", "alice"),
            Err(Denial::OtherCaller),
        ),
        (
            "tenant and id run together",
            &token,
            "bind-a",
            user("", "acmealice"),
            Err(Denial::OtherCaller),
        ),
        (
            "another call",
            &token,
            "bind-b",
            alice.clone(),
            Err(Denial::BoundToOtherCall),
        ),
        ("the right call", &token, "bind-a", alice.clone(), Ok(())),
        (
            "a second use",
            &token,
            "bind-a",
            alice.clone(),
            Err(Denial::AlreadyUsed),
        ),
    ];
    for (label, token, binding, principal, want) in cases {
        assert_eq!(
            ledger.redeem(token, binding, &principal, t0).await,
            want,
            "{store}: {label}"
        );
    }
    let late = ledger.issue("bind-a", &alice, t0, ttl).await.unwrap();
    assert_eq!(
        ledger.redeem(&late, "bind-a", &alice, t0 + ttl).await,
        Err(Denial::Expired),
        "{store}: at its expiry"
    );
    assert_ne!(
        token, late,
        "{store}: tokens are unique for the same binding and time"
    );
    let declined = ledger.issue("bind-a", &alice, t0, ttl).await.unwrap();
    ledger.spend(&declined, t0).await.unwrap();
    assert_eq!(
        ledger.redeem(&declined, "bind-a", &alice, t0).await,
        Err(Denial::AlreadyUsed),
        "{store}: a declined ticket cannot be redeemed with a yes later"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ledger_refuses_the_same_tickets_sqlite_and_postgres() {
    holds_the_ledger_contract(&ApprovalLedger::in_memory().unwrap(), "SQLite in memory").await;
    let dir = tempfile::tempdir().unwrap();
    let file = ApprovalLedger::open(&dir.path().join("approvals.sqlite")).unwrap();
    holds_the_ledger_contract(&file, "SQLite file").await;
    let pg = cluster();
    holds_the_ledger_contract(&pg_ledger(&pg.url()).await, "PostgreSQL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_issued_through_one_instance_is_redeemed_through_another_exactly_once() {
    let pg = cluster();
    // Two instances: two pools, each migrating at start (one after the other, under the lock).
    let url = pg.url();
    let (first, second) = tokio::join!(pg_ledger(&url), pg_ledger(&url));
    let (first, second) = (Arc::new(first), Arc::new(second));
    let now = SystemTime::now();
    let alice = user("acme", "alice");
    for round in 0..5 {
        let binding = format!("bind-{round}");
        let token = first
            .issue(&binding, &alice, now, Duration::from_secs(60))
            .await
            .unwrap();
        // Sixteen redeemers at once, half through each instance.
        let racers: Vec<_> = (0..16)
            .map(|i| {
                let ledger = Arc::clone(if i % 2 == 0 { &first } else { &second });
                let (token, binding, alice) = (token.clone(), binding.clone(), alice.clone());
                tokio::spawn(async move { ledger.redeem(&token, &binding, &alice, now).await })
            })
            .collect();
        let mut outcomes = Vec::new();
        for racer in racers {
            outcomes.push(racer.await.unwrap());
        }
        let redeemed = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(redeemed, 1, "round {round}: {outcomes:?}");
        assert!(
            outcomes
                .iter()
                .all(|o| matches!(o, Ok(()) | Err(Denial::AlreadyUsed))),
            "round {round}: {outcomes:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_store_urls_are_refused_with_what_to_fix_and_never_the_password() {
    let pg = cluster();
    let settings = PgSettings {
        connect_timeout: Duration::from_secs(3),
        ..PgSettings::default()
    };
    let refused = PgStore::connect(&pg.url_with_wrong_password(), settings)
        .await
        .unwrap_err();
    assert!(matches!(refused, PgError::Refused { .. }), "{refused:?}");
    let missing = PgStore::connect(&pg.url_of("no_such_database"), settings)
        .await
        .unwrap_err();
    assert!(matches!(missing, PgError::NoDatabase { .. }), "{missing:?}");
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        PgStore::connect(
            &format!("postgres://toolgate:secret-word@127.0.0.1:{port}/toolgate"),
            settings,
        )
        .await
        .unwrap_err()
    };
    assert!(matches!(closed, PgError::Unreachable { .. }), "{closed:?}");
    for url in [
        "postgres://toolgate:secret-word@/",
        "postgres://toolgate:secret-word@127.0.0.1:notaport/db",
        "mysql://x",
    ] {
        let bad = PgStore::connect(url, settings).await.unwrap_err();
        assert!(matches!(bad, PgError::BadUrl { .. }), "{url}: {bad:?}");
    }
    for error in [refused, missing, closed] {
        let shown = error.to_string();
        assert!(
            !shown.contains("not-the-password") && !shown.contains("secret-word"),
            "{shown}"
        );
        assert!(shown.contains("127.0.0.1:"), "names the server: {shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_newer_than_the_binary_is_refused_and_left_as_it_is() {
    let pg = cluster();
    let store = PgStore::connect(&pg.url(), PgSettings::default())
        .await
        .unwrap();
    let newer = known_version() + 1;
    {
        let client = store.client().await.unwrap();
        client
            .execute(
                &format!(
                    "INSERT INTO {HISTORY_TABLE} (version, name, applied_on, checksum) VALUES ($1, 'from_a_newer_toolgate', '2026-12-05T00:00:00Z', '0')"
                ),
                &[&(newer as i32)],
            )
            .await
            .unwrap();
        client
            .execute("CREATE TABLE made_by_the_newer_toolgate (x int)", &[])
            .await
            .unwrap();
    }
    let refused = PgStore::connect(&pg.url(), PgSettings::default())
        .await
        .unwrap_err();
    match &refused {
        PgError::SchemaNewer { found, known, .. } => {
            assert_eq!((*found, *known), (newer, known_version()));
        }
        other => panic!("{other:?}"),
    }
    assert!(refused.to_string().contains("left as it is"), "{refused}");
    let client = store.client().await.unwrap();
    let versions: i64 = client
        .query_one(&format!("SELECT count(*) FROM {HISTORY_TABLE}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        versions,
        known_version() + 1,
        "no migration was removed or added"
    );
    let table: bool = client
        .query_one(
            "SELECT to_regclass('public.made_by_the_newer_toolgate') IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(table, "the newer binary's table is untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_goes_away_denies_approvals_and_they_recover_when_it_returns() {
    let pg = cluster();
    let settings = PgSettings {
        connect_timeout: Duration::from_secs(2),
        wait_timeout: Duration::from_secs(3),
        ..PgSettings::default()
    };
    let ledger = ApprovalLedger::on(PgTickets::new(
        PgStore::connect(&pg.url(), settings).await.unwrap(),
    ));
    let alice = user("acme", "alice");
    let now = SystemTime::now();
    let before = ledger
        .issue("bind-a", &alice, now, Duration::from_secs(600))
        .await
        .unwrap();
    pg.stop().unwrap();
    let down = ledger.redeem(&before, "bind-a", &alice, now).await;
    assert!(matches!(down, Err(Denial::LedgerFailed { .. })), "{down:?}");
    let issue_down = ledger
        .issue("bind-b", &alice, now, Duration::from_secs(600))
        .await;
    assert!(
        matches!(issue_down, Err(Denial::LedgerFailed { .. })),
        "{issue_down:?}"
    );
    pg.restart().unwrap();
    // The pool drops the dead connections and opens new ones.
    let mut back = Err(Denial::UnknownTicket);
    for _ in 0..20 {
        back = ledger.redeem(&before, "bind-a", &alice, now).await;
        if !matches!(back, Err(Denial::LedgerFailed { .. })) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        back,
        Ok(()),
        "the ticket issued before the outage is redeemed once, after it"
    );
    assert_eq!(
        ledger.redeem(&before, "bind-a", &alice, now).await,
        Err(Denial::AlreadyUsed)
    );
}
