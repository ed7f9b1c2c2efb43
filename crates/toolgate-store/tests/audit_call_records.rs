//! What a call's page reads beside its decision record, on real stores: a SQLite audit file
//! with the toolset's SQLite store file, and a PostgreSQL database of the test cluster.
//!
//! - Receipts: a write recorded by [`run_once_on`] (and a claim left by [`claim_on`]) is read
//!   back by its key through [`AuditStore::write_record`] with its fields, the same on both
//!   stores; a key with nothing under it, a hostile key and a store that never wrote read as
//!   missing; a SQLite audit given no store reads no receipts.
//! - Egress decisions: an `egress` event recorded inside a call's handler (the dispatcher's
//!   [`in_call`] scope) lands in `egress_decisions` under that call, through either writer
//!   ([`SqliteAudit`], [`PgAudit`]), and reads back by call; one recorded outside any call is
//!   kept with none, and other calls read none of them.
//! - A gateway: its imported tool's upstream leg (recorded where the dispatcher records, as
//!   the MCP client does) reads back under its call, and the calls a second dispatcher (the
//!   toolgate server behind it, another writer of the same audit) ran for it, named by the
//!   parent reference the server takes from `_meta` (`RUN/CALL/NONCE`, kept whole in the leg),
//!   hang under it in the tree; a call of another run that names the same bare call id does
//!   not, nor do forged calls another client dispatched on the server naming the gateway's
//!   call by a guessed `RUN/CALL`, or in the right form with a wrong nonce (each still found
//!   by search, under its own principal).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::idempotency::{IdempotencyKey, WriteEffect, claim_on, install, run_once_on};
use toolgate_core::sql::SqlSession;
use toolgate_core::trace::{CallScope, TraceEvent, TraceSink, in_call, record_in_call};
use toolgate_core::{
    CallRequest, Dispatcher, Effect, Principal, Registry, Risk, ToolBuilder, ToolOutput,
};
use toolgate_store::audit::upstream::{NONCE_BYTES, parent_reference};
use toolgate_store::audit::{
    AuditFilter, AuditStore, SqliteAudit, StoredClaim, StoredReceipt, WriteRecord,
};
use toolgate_store::postgres::audit::PgAudit;
use toolgate_store::postgres::sql::writer_lock;
use toolgate_store::postgres::{PgSettings, PgStore, cluster};

fn key(tool: &str, args: &str) -> IdempotencyKey {
    IdempotencyKey::derived(&Principal::local("alice", &[]), "run-1", tool, args)
}

/// A written note's receipt and a mail's unsettled claim, on one session of either store.
fn write_both(session: &mut dyn SqlSession) -> (IdempotencyKey, IdempotencyKey) {
    let written = key("notes_create", r#"{"title":"<b>x</b>"}"#);
    run_once_on(session, &written, 1_796_461_200, |_| {
        Ok(WriteEffect {
            result: json!({"note_id": 7, "title": "<script>alert(1)</script>"}),
            undo: Some(json!({"tool": "notes_delete", "arguments": {"note_id": 7}})),
        })
    })
    .unwrap();
    let claimed = key("email_send", r#"{"draft_id":3}"#);
    claim_on(
        session,
        &claimed,
        1_796_461_260,
        "check the relay's log",
        |_| Ok(()),
    )
    .unwrap();
    (written, claimed)
}

async fn reads_both(store: &AuditStore, written: &IdempotencyKey, claimed: &IdempotencyKey) {
    let cases = [
        (
            written.key.clone(),
            WriteRecord::Receipt(StoredReceipt {
                key: written.key.clone(),
                tool: "notes_create".into(),
                result: json!({"note_id": 7, "title": "<script>alert(1)</script>"}),
                undo: Some(json!({"tool": "notes_delete", "arguments": {"note_id": 7}})),
                created_at_unix: 1_796_461_200,
            }),
        ),
        (
            claimed.key.clone(),
            WriteRecord::Claimed(StoredClaim {
                key: claimed.key.clone(),
                tool: "email_send".into(),
                what_to_check: "check the relay's log".into(),
                claimed_at_unix: 1_796_461_260,
            }),
        ),
        ("no-such-key".into(), WriteRecord::Missing),
        (format!("{}' OR '1'='1", written.key), WriteRecord::Missing),
    ];
    for (key, expected) in cases {
        assert_eq!(
            store.write_record(&key).await.unwrap(),
            Some(expected),
            "{} {key}",
            store.shown()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writes_receipt_is_read_by_its_key_on_sqlite_and_postgres() {
    // SQLite: the audit file and, beside it, the toolset's store file the receipts are in.
    let dir = tempfile::tempdir().unwrap();
    let audit_file = dir.path().join("audit.sqlite");
    drop(SqliteAudit::open(&audit_file, "test/file".into()).unwrap());
    let store_file = dir.path().join("notes.sqlite");
    let mut conn = rusqlite::Connection::open(&store_file).unwrap();
    install(&conn).unwrap();
    let (written, claimed) = write_both(&mut conn);
    drop(conn);
    let store = AuditStore::open_file(&audit_file)
        .unwrap()
        .with_receipts_file(&store_file);
    reads_both(&store, &written, &claimed).await;

    // Without a store file, receipts are not read; a store that never wrote holds none.
    let bare = AuditStore::open_file(&audit_file).unwrap();
    assert_eq!(bare.write_record(&written.key).await.unwrap(), None);
    let empty_file = dir.path().join("empty.sqlite");
    drop(rusqlite::Connection::open(&empty_file).unwrap());
    let empty = AuditStore::open_file(&audit_file)
        .unwrap()
        .with_receipts_file(&empty_file);
    assert_eq!(
        empty.write_record(&written.key).await.unwrap(),
        Some(WriteRecord::Missing)
    );

    // PostgreSQL: the audit table and the receipts share the team's database.
    let url = cluster::shared().unwrap().fresh_database().unwrap();
    let pg = PgStore::connect(&url, PgSettings::default()).await.unwrap();
    let (written, claimed) = pg
        .blocking(writer_lock("test"), |session| Ok(write_both(session)))
        .await
        .unwrap();
    reads_both(&AuditStore::on_postgres(pg), &written, &claimed).await;
}

/// An `egress` event as the exit writes it (its attributes are the audit's contract).
#[derive(Debug)]
struct EgressEvent(Value);

impl TraceEvent for EgressEvent {
    fn kind(&self) -> &'static str {
        "egress"
    }

    fn attributes(&self) -> Value {
        self.0.clone()
    }
}

const HOSTILE_HOST: &str = "<img src=x onerror=alert(1)>.example";

/// A blocked fetch inside call `c1`, an allowed mail inside `c1`, and a session check outside
/// any call, recorded into `sink`.
async fn record_egress(sink: Arc<dyn TraceSink>) {
    let inside = Arc::clone(&sink);
    in_call(
        CallScope {
            call_id: "c1".into(),
            run_id: "run-1".into(),
        },
        Arc::clone(&sink),
        async move {
            inside.record(Arc::new(EgressEvent(json!({
                "method": "GET", "url": format!("https://{HOSTILE_HOST}/"), "host": HOSTILE_HOST,
                "decision": "blocked", "rule": "not_allowlisted",
                "reason": format!("{HOSTILE_HOST} is not on the allowlist"), "error": null,
            }))));
            inside.record(Arc::new(EgressEvent(json!({
                "scheme": "smtp", "host": "127.0.0.1", "port": 2525,
                "recipients": ["ann@example.org"], "decision": "allowed", "rule": "allow[0]",
            }))));
        },
    )
    .await;
    sink.record(Arc::new(EgressEvent(json!({
        "url": "https://mcp.example/mcp", "host": "mcp.example", "decision": "allowed",
    }))));
}

async fn reads_egress(store: &AuditStore) {
    let found = store.egress("c1", "run-1").await.unwrap();
    let shown: Vec<(&str, Option<&str>, Option<&str>, Option<i64>, Option<&str>)> = found
        .iter()
        .map(|e| {
            (
                e.decision.as_str(),
                e.method.as_deref(),
                e.host.as_deref(),
                e.port,
                e.reason.as_deref(),
            )
        })
        .collect();
    let reason = format!("{HOSTILE_HOST} is not on the allowlist");
    assert_eq!(
        shown,
        vec![
            (
                "blocked",
                Some("GET"),
                Some(HOSTILE_HOST),
                None,
                Some(reason.as_str())
            ),
            ("allowed", Some("SMTP"), Some("127.0.0.1"), Some(2525), None),
        ],
        "{}",
        store.shown()
    );
    assert!(found.iter().all(|e| e.call_id.as_deref() == Some("c1")));
    assert!(store.egress("c2", "run-1").await.unwrap().is_empty());
    assert!(store.egress("c1", "run-2").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn egress_decisions_land_under_the_call_that_made_them_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let audit_file = dir.path().join("audit.sqlite");
    let writer = SqliteAudit::open(&audit_file, "test/file".into()).unwrap();
    record_egress(Arc::new(writer.clone())).await;
    tokio::task::spawn_blocking(move || writer.flush())
        .await
        .unwrap();
    reads_egress(&AuditStore::open_file(&audit_file).unwrap()).await;
    let conn = rusqlite::Connection::open(&audit_file).unwrap();
    let outside: i64 = conn
        .query_row(
            "SELECT count(*) FROM egress_decisions WHERE call_id IS NULL AND host = 'mcp.example'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        outside, 1,
        "a request made outside any call is kept with none"
    );

    let url = cluster::shared().unwrap().fresh_database().unwrap();
    let pg = PgStore::connect(&url, PgSettings::default()).await.unwrap();
    let writer = PgAudit::start(pg.clone(), "test/pg".into());
    record_egress(Arc::new(writer.clone())).await;
    writer.flush().await;
    reads_egress(&AuditStore::on_postgres(pg)).await;
}

// ---- A gateway call's upstream legs, and the calls a toolgate server behind it dispatched ----

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct QueryArgs {
    /// What to look for.
    query: String,
}

/// The upstream server's own tool.
fn upstream_search() -> toolgate_core::Tool {
    ToolBuilder::<QueryArgs>::new("docs_search", 1)
        .describe("Searches docs.", "you need a doc.", None, "hits.")
        .policy(Risk::Low, Effect::Read, "It only reads.")
        .read(|_ctx, args: QueryArgs| async move {
            Ok(ToolOutput::new(json!({"hits": [args.query]})))
        })
        .unwrap()
}

/// The nonce the test gateway sends (an imported tool draws a fresh one from the CSPRNG).
const NONCE: [u8; NONCE_BYTES] = [0x5a; NONCE_BYTES];

/// The gateway's imported tool: it records its upstream leg, with the reference it sent, where
/// the dispatcher records (as an imported tool does) and calls the upstream dispatcher naming
/// itself as the parent by that reference (as the MCP server does with the one in `_meta`).
fn gateway_search(upstream: Arc<Dispatcher>) -> toolgate_core::Tool {
    ToolBuilder::<QueryArgs>::new("docs__docs_search", 1)
        .describe("Searches docs upstream.", "you need a doc.", None, "hits.")
        .policy(Risk::Low, Effect::Read, "It only reads.")
        .read(move |ctx, args: QueryArgs| {
            let upstream = Arc::clone(&upstream);
            async move {
                let mut request = CallRequest::new(
                    Principal::local("gateway", &[]),
                    "upstream-run",
                    "docs_search",
                    json!({"query": args.query}),
                );
                let reference = parent_reference(&ctx.run_id, &ctx.call_id, &NONCE).unwrap();
                request.parent_call_id = Some(reference.clone());
                let outcome = upstream.call(request).await;
                record_in_call(Arc::new(Leg(json!({
                    "server": "docs", "tool": format!("docs_search{HOSTILE_HOST}"),
                    "outcome": if outcome.is_error() { "error" } else { "ok" },
                    "duration_ms": 7, "reference": reference,
                }))));
                Ok(ToolOutput::new(json!({"forwarded": true})))
            }
        })
        .unwrap()
}

#[derive(Debug)]
struct Leg(Value);

impl TraceEvent for Leg {
    fn kind(&self) -> &'static str {
        "upstream_call"
    }

    fn attributes(&self) -> Value {
        self.0.clone()
    }
}

/// A gateway call, its upstream leg and the upstream's call under it, on one store.
async fn gateway_tree(gateway_sink: Arc<dyn TraceSink>, upstream_sink: Arc<dyn TraceSink>) {
    let upstream = Arc::new(
        Dispatcher::new(Arc::new(Registry::new(vec![upstream_search()]).unwrap()))
            .unwrap()
            .with_trace(upstream_sink),
    );
    let gateway = Dispatcher::new(Arc::new(
        Registry::new(vec![gateway_search(Arc::clone(&upstream))]).unwrap(),
    ))
    .unwrap()
    .with_trace(gateway_sink);
    let call = CallRequest::new(
        Principal::local("alice", &[]),
        "gateway-run",
        "docs__docs_search",
        json!({"query": "risotto"}),
    )
    .with_call_id("g1");
    assert!(!gateway.call(call).await.is_error());
    // The same call id in another run is another call: never taken for g1's child.
    let mut stranger = CallRequest::new(
        Principal::local("bob", &[]),
        "other-run",
        "docs__docs_search",
        json!({"query": "x"}),
    );
    stranger.parent_call_id = Some("g1".into());
    let _ = gateway.call(stranger).await;
    // Mallory, another client of the upstream server, names the gateway's call as the parent
    // of hers: by a guessed `RUN/CALL`, and in the right form with a wrong nonce (what the
    // server records from a valid `_meta`).
    for forged in [
        "gateway-run/g1".to_string(),
        parent_reference("gateway-run", "g1", &[0xa5; NONCE_BYTES]).unwrap(),
    ] {
        let mut request = CallRequest::new(
            Principal::local("mallory", &[]),
            "mallory-run",
            "docs_search",
            json!({"query": "forged"}),
        );
        request.parent_call_id = Some(forged);
        assert!(!upstream.call(request).await.is_error());
    }
}

async fn reads_gateway_tree(store: &AuditStore) {
    let reference = parent_reference("gateway-run", "g1", &NONCE).unwrap();
    let tree = store
        .tree("g1", Some("gateway-run"))
        .await
        .unwrap()
        .unwrap();
    let shape: Vec<(String, String, Option<String>)> = tree
        .entries()
        .iter()
        .map(|e| (e.tool.clone(), e.run_id.clone(), e.parent_call_id.clone()))
        .collect();
    assert_eq!(
        shape,
        vec![
            ("docs__docs_search".into(), "gateway-run".into(), None),
            (
                "docs_search".into(),
                "upstream-run".into(),
                Some(reference.clone())
            ),
        ],
        "{}: only the call the gateway's leg sent the reference for",
        store.shown()
    );
    // The forged calls are still in the audit, found by search under their own principal.
    let mallory = store
        .search(
            &AuditFilter {
                principal: Some("mallory".into()),
                ..AuditFilter::default()
            },
            None,
            10,
        )
        .await
        .unwrap();
    let forged: Vec<Option<String>> = mallory
        .entries
        .iter()
        .map(|e| e.parent_call_id.clone())
        .collect();
    assert_eq!(
        forged,
        vec![
            parent_reference("gateway-run", "g1", &[0xa5; NONCE_BYTES]),
            Some("gateway-run/g1".into()),
        ],
        "{}: newest first",
        store.shown()
    );
    let legs = store
        .upstream_legs("gateway-run", vec!["g1".into()])
        .await
        .unwrap();
    let legs: Vec<(&str, &str, &str, i64, Option<&str>)> = legs
        .iter()
        .map(|l| {
            (
                l.server.as_str(),
                l.tool.as_str(),
                l.outcome.as_str(),
                l.duration_ms,
                l.reference.as_deref(),
            )
        })
        .collect();
    let tool = format!("docs_search{HOSTILE_HOST}");
    assert_eq!(
        legs,
        vec![("docs", tool.as_str(), "ok", 7, Some(reference.as_str()))],
        "{}",
        store.shown()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_calls_upstream_leg_and_the_upstreams_calls_hang_under_it_on_sqlite_and_postgres()
{
    // Two processes' writers (the gateway's and the upstream server's) into one audit file.
    let dir = tempfile::tempdir().unwrap();
    let audit_file = dir.path().join("audit.sqlite");
    let gateway = SqliteAudit::open(&audit_file, "gateway/1".into()).unwrap();
    let upstream = SqliteAudit::open(&audit_file, "upstream/2".into()).unwrap();
    gateway_tree(Arc::new(gateway.clone()), Arc::new(upstream.clone())).await;
    tokio::task::spawn_blocking(move || {
        upstream.flush();
        gateway.flush();
    })
    .await
    .unwrap();
    reads_gateway_tree(&AuditStore::open_file(&audit_file).unwrap()).await;

    let url = cluster::shared().unwrap().fresh_database().unwrap();
    let pg = PgStore::connect(&url, PgSettings::default()).await.unwrap();
    let gateway = PgAudit::start(pg.clone(), "gateway/1".into());
    let upstream = PgAudit::start(pg.clone(), "upstream/2".into());
    gateway_tree(Arc::new(gateway.clone()), Arc::new(upstream.clone())).await;
    upstream.flush().await;
    gateway.flush().await;
    reads_gateway_tree(&AuditStore::on_postgres(pg)).await;
}
