//! The approval inbox's decisions, held end to end against both ticket stores: SQLite (a file)
//! and PostgreSQL (a real server of the test's own, migrated to V10). Each store lists the
//! waiting tickets newest first, counts the tickets open for a person (host and inbox apart),
//! records a person's decision once and only for the ticket's own binding and before its
//! expiry, says who decided, and an `InboxApprover` waiting on it gets the decision (through
//! another instance sharing the PostgreSQL store too), and closes its ticket when the waiting
//! call is cancelled.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use toolgate_core::approval::{HumanDecision, InboxApprover, holder};
use toolgate_core::{
    ApprovalAnswer, ApprovalLedger, ApprovalRequest, Approver, Denial, Effect, OpenTickets,
    Principal, Risk,
};
use toolgate_store::postgres::cluster::TempCluster;
use toolgate_store::postgres::tickets::PgTickets;
use toolgate_store::postgres::{PgSettings, PgStore};

fn request(binding: &str, to: &str) -> ApprovalRequest {
    ApprovalRequest {
        binding: binding.into(),
        tool: "email_send".into(),
        version: 1,
        risk: Risk::High,
        reason: "It sends mail.".into(),
        effect: Effect::Irreversible,
        arguments: json!({"draft_id": 7}),
        preview: Some(json!({"to": [to], "subject": "s", "body": "b"})),
        principal: "alice".into(),
        taint: Vec::new(),
    }
}

fn decision(by: &str, approved: bool, at: i64) -> HumanDecision {
    let mut bob = Principal::local(by, &[]);
    bob.tenant = "https://as.example".into();
    HumanDecision {
        decided_by: holder(&bob),
        approved,
        reason: "checked".into(),
        decided_at_unix: at,
    }
}

/// What every store must give the inbox.
async fn holds_the_inbox_contract(ledger: &ApprovalLedger, store: &str) {
    let now = SystemTime::now();
    let now_unix = i64::try_from(
        now.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    let mut alice = Principal::local("alice", &[]);
    alice.tenant = "https://as.example".into();
    let ttl = Duration::from_secs(60);
    let first = ledger
        .open_inbox_ticket(&request("bind-1", "ann@example.org"), &alice, now, ttl)
        .await
        .unwrap();
    // Opened a second later, so "newest first" is decided by the opening time.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = ledger
        .open_inbox_ticket(
            &request("bind-2", "bob@example.org"),
            &alice,
            SystemTime::now(),
            ttl,
        )
        .await
        .unwrap();
    let expired = ledger
        .open_inbox_ticket(
            &request("bind-3", "eve@example.org"),
            &alice,
            now - Duration::from_secs(120),
            ttl,
        )
        .await
        .unwrap();

    // A ticket answered through the host (the protocol's ticket channel) is not the inbox's.
    let protocol = ledger
        .open_ticket(&request("bind-4", "host@example.org"), &alice, now, ttl)
        .await
        .unwrap();

    let pending = ledger.pending(SystemTime::now()).await.unwrap();
    let tokens: Vec<&str> = pending.iter().map(|t| t.token.as_str()).collect();
    assert_eq!(
        tokens,
        [second.token.as_str(), first.token.as_str()],
        "{store}: newest first, the expired one and the host's ticket left out"
    );
    assert_eq!(
        pending[0].request.preview,
        request("bind-2", "bob@example.org").preview
    );
    assert_eq!(pending[0].holder, holder(&alice), "{store}");

    // Waiting for a person: both open inbox tickets and the host's one, not the expired one.
    assert_eq!(
        ledger.open_tickets(SystemTime::now()).await.unwrap(),
        OpenTickets { host: 1, inbox: 2 },
        "{store}: open tickets"
    );

    let bob = decision("bob", true, now_unix);
    let cases = [
        (
            "a tampered ticket id",
            "0".repeat(32),
            "bind-1",
            Err(Denial::UnknownTicket),
        ),
        (
            "a form for another call",
            first.token.clone(),
            "bind-2",
            Err(Denial::BoundToOtherCall),
        ),
        (
            "an expired ticket",
            expired.token.clone(),
            "bind-3",
            Err(Denial::Expired),
        ),
        (
            "a ticket the host answers",
            protocol.token.clone(),
            "bind-4",
            Err(Denial::UnknownTicket),
        ),
        (
            "the ticket's own binding",
            first.token.clone(),
            "bind-1",
            Ok(()),
        ),
        (
            "a ticket already decided",
            first.token.clone(),
            "bind-1",
            Err(Denial::AlreadyUsed),
        ),
    ];
    for (label, token, binding, want) in cases {
        assert_eq!(
            ledger.decide(&token, binding, &bob).await,
            want,
            "{store}: {label}"
        );
    }
    let decided = ledger.ticket(&first.token).await.unwrap().unwrap();
    assert_eq!(decided.decision, Some(bob.clone()), "{store}: who decided");
    let pending = ledger.pending(SystemTime::now()).await.unwrap();
    assert_eq!(
        pending.len(),
        1,
        "{store}: a decided ticket leaves the inbox"
    );
    // A decided ticket waits for nobody; nor does a used one.
    ledger
        .spend(&protocol.token, SystemTime::now())
        .await
        .unwrap();
    assert_eq!(
        ledger.open_tickets(SystemTime::now()).await.unwrap(),
        OpenTickets { host: 0, inbox: 1 },
        "{store}: open tickets once one is decided and one used"
    );
    assert!(ledger.ticket("nope").await.unwrap().is_none());
}

/// An approver waiting on `waiting` gets the decline recorded through `deciding` (another
/// instance on the same store, or the same ledger).
async fn a_waiting_call_gets_the_decision(waiting: Arc<ApprovalLedger>, deciding: &ApprovalLedger) {
    let approver = InboxApprover::new(waiting, "https://as.example", Duration::from_secs(30));
    let ask = request("bind-wait", "ann@example.org");
    let asked = tokio::spawn(async move { approver.decide(&ask).await });
    let mut rounds = 0;
    let ticket = loop {
        rounds += 1;
        assert!(rounds < 400, "the ticket never appeared in the inbox");
        if let Some(t) = deciding
            .pending(SystemTime::now())
            .await
            .unwrap()
            .into_iter()
            .find(|t| t.binding == "bind-wait")
        {
            break t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let now_unix = i64::try_from(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    deciding
        .decide(
            &ticket.token,
            "bind-wait",
            &decision("bob", false, now_unix),
        )
        .await
        .unwrap();
    let answer = asked.await.unwrap().unwrap();
    assert!(
        matches!(&answer, ApprovalAnswer::Deny { reason } if reason.contains("bob") && reason.contains("checked")),
        "{answer:?}"
    );
    // Spent once read: nothing can redeem it afterwards.
    let spent = deciding.ticket(&ticket.token).await.unwrap().unwrap();
    assert!(spent.used_at_unix.is_some());
}

/// A call cancelled while it waits (its future dropped) closes its ticket: it leaves the inbox
/// and a decision posted after is refused.
async fn a_cancelled_wait_closes_its_ticket(
    waiting: Arc<ApprovalLedger>,
    deciding: &ApprovalLedger,
) {
    let approver = InboxApprover::new(waiting, "https://as.example", Duration::from_secs(30));
    let ask = request("bind-cancel", "ann@example.org");
    let asked = tokio::spawn(async move { approver.decide(&ask).await });
    let mut rounds = 0;
    let ticket = loop {
        rounds += 1;
        assert!(rounds < 400, "the ticket never appeared in the inbox");
        let pending = deciding.pending(SystemTime::now()).await.unwrap();
        if let Some(t) = pending.into_iter().find(|t| t.binding == "bind-cancel") {
            break t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    asked.abort();
    let _ = asked.await;
    for round in 0.. {
        assert!(round < 400, "the cancelled wait never closed its ticket");
        let now = deciding.ticket(&ticket.token).await.unwrap().unwrap();
        if now.used_at_unix.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let at = i64::try_from(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    assert_eq!(
        deciding
            .decide(&ticket.token, "bind-cancel", &decision("bob", true, at))
            .await,
        Err(Denial::AlreadyUsed)
    );
}

/// An inbox ticket's token reaches the host (the page's URL, `requestState`): the host's own
/// "approve" with it redeems nothing until a person approved in the inbox, and then only once;
/// the client the call came from is read back.
async fn only_a_persons_yes_redeems_an_inbox_ticket(ledger: &ApprovalLedger, store: &str) {
    let mut alice = Principal::local("alice", &[]);
    alice.tenant = "https://as.example".into();
    let now = SystemTime::now();
    let ticket = ledger
        .open_inbox_ticket_from(
            &request("bind-host", "ann@example.org"),
            &alice,
            (now, Duration::from_secs(60)),
            Some("claude-desktop"),
        )
        .await
        .unwrap();
    assert_eq!(
        ledger.client_of(&ticket.token).await.unwrap().as_deref(),
        Some("claude-desktop"),
        "{store}"
    );
    let refused = ledger
        .redeem(&ticket.token, "bind-host", &alice, SystemTime::now())
        .await;
    assert!(
        matches!(refused, Err(Denial::Declined { .. })),
        "{store}: {refused:?}"
    );
    let now_unix = i64::try_from(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    ledger
        .decide(&ticket.token, "bind-host", &decision("bob", true, now_unix))
        .await
        .unwrap();
    ledger
        .redeem(&ticket.token, "bind-host", &alice, SystemTime::now())
        .await
        .unwrap_or_else(|e| panic!("{store}: {e}"));
    assert_eq!(
        ledger
            .redeem(&ticket.token, "bind-host", &alice, SystemTime::now())
            .await,
        Err(Denial::AlreadyUsed),
        "{store}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_ledger_keeps_the_inbox_contract() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Arc::new(ApprovalLedger::open(&dir.path().join("tickets.sqlite")).unwrap());
    holds_the_inbox_contract(&ledger, "sqlite").await;
    only_a_persons_yes_redeems_an_inbox_ticket(&ledger, "sqlite").await;
    a_waiting_call_gets_the_decision(Arc::clone(&ledger), &ledger).await;
    a_cancelled_wait_closes_its_ticket(Arc::clone(&ledger), &ledger).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_ledger_keeps_the_inbox_contract_across_instances() {
    let cluster = TempCluster::start().unwrap_or_else(|e| panic!("a PostgreSQL cluster: {e}"));
    let connect = || async {
        let store = PgStore::connect(&cluster.url(), PgSettings::default())
            .await
            .unwrap();
        ApprovalLedger::on(PgTickets::new(store))
    };
    let one = Arc::new(connect().await);
    let other = connect().await;
    holds_the_inbox_contract(&one, "postgres").await;
    only_a_persons_yes_redeems_an_inbox_ticket(&other, "postgres").await;
    a_waiting_call_gets_the_decision(Arc::clone(&one), &other).await;
    a_cancelled_wait_closes_its_ticket(one, &other).await;
}
