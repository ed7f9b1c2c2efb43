//! The audit search on real stores: a SQLite audit file written by [`SqliteAudit`] and a
//! PostgreSQL database of the test cluster written by [`PgAudit`], filled through a real
//! dispatcher (and with records of approvals a person answered), then searched through
//! [`AuditStore`]: each filter finds the same calls on both stores, pages join up to the whole
//! search, a script's nested calls form its tree, and both exports hold exactly the search's
//! rows. On SQLite, each search reads the index made for it, and the sink never holds up a call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::approval::Denial;
use toolgate_core::call::{ApprovalRecord, ApprovedVia, DecisionRecord, Outcome};
use toolgate_core::trace::TraceSink;
use toolgate_core::{
    CallRequest, Dispatcher, Effect, ErrorCode, Origin, Principal, Registry, Risk, ToolBuilder,
    ToolError, ToolOutput,
};
use toolgate_store::audit::query::{self, AuditFilter, OutcomeFilter};
use toolgate_store::audit::{
    ApprovalFilter, AuditEntry, AuditStore, CallTree, ExportFormat, SqliteAudit,
};
use toolgate_store::postgres::audit::PgAudit;
use toolgate_store::postgres::{PgSettings, PgStore, cluster};

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// The text to echo.
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScriptArgs {
    /// How many nested echoes.
    times: u8,
}

fn echo() -> toolgate_core::Tool {
    ToolBuilder::<EchoArgs>::new("demo_echo", 1)
        .describe("Echoes a text.", "you want a text back.", None, "the text.")
        .example("echo", json!({"text": "hi"}))
        .policy(Risk::Low, Effect::Read, "It only echoes.")
        .read(|_ctx, args: EchoArgs| async move { Ok(ToolOutput::new(json!({"text": args.text}))) })
        .unwrap()
}

/// A `code_execution`-like tool: its calls go back through the dispatcher as its children.
fn script() -> toolgate_core::Tool {
    ToolBuilder::<ScriptArgs>::new("demo_script", 1)
        .describe(
            "Runs a script.",
            "a task needs several calls.",
            None,
            "outcomes.",
        )
        .policy(Risk::Low, Effect::Read, "Each call it makes is checked.")
        .read(|ctx, args: ScriptArgs| async move {
            for i in 0..args.times {
                let out = ctx
                    .tools
                    .call(
                        Origin::Sandbox,
                        "demo_echo",
                        json!({"text": format!("n{i}")}),
                    )
                    .await;
                if out.is_error() {
                    return Err(ToolError::internal("a nested call failed"));
                }
            }
            Ok(ToolOutput::new(json!({"ran": args.times})))
        })
        .unwrap()
}

/// High risk: without an approval channel every call is denied.
fn mail() -> toolgate_core::Tool {
    ToolBuilder::<EchoArgs>::new("demo_mail", 1)
        .describe("Sends mail.", "the user asks to mail.", None, "ok.")
        .policy(Risk::High, Effect::Outbound, "Mail cannot be called back.")
        .read(|_ctx, _args: EchoArgs| async move { Ok(ToolOutput::new(json!({"sent": true}))) })
        .unwrap()
}

enum Writer {
    File(SqliteAudit),
    Pg(PgAudit),
}

impl Writer {
    fn sink(&self) -> Arc<dyn TraceSink> {
        match self {
            Writer::File(a) => Arc::new(a.clone()),
            Writer::Pg(a) => Arc::new(a.clone()),
        }
    }

    async fn flush(&self) {
        match self {
            Writer::File(a) => {
                let a = a.clone();
                tokio::task::spawn_blocking(move || a.flush())
                    .await
                    .unwrap();
            }
            Writer::Pg(a) => a.flush().await,
        }
    }
}

async fn sqlite_store(dir: &std::path::Path) -> (Writer, AuditStore) {
    let path = dir.join("audit.sqlite");
    let audit = SqliteAudit::open(&path, "test/file".into()).unwrap();
    (Writer::File(audit), AuditStore::open_file(&path).unwrap())
}

async fn postgres_store() -> (Writer, AuditStore) {
    let url = cluster::shared().unwrap().fresh_database().unwrap();
    let pg = PgStore::connect(&url, PgSettings::default()).await.unwrap();
    (
        Writer::Pg(PgAudit::start(pg.clone(), "test/pg".into())),
        AuditStore::on_postgres(pg),
    )
}

/// A record of a call a person answered (the console's path, which names the person).
fn answered(call_id: &str, principal: &str, approved: bool, by: &str) -> DecisionRecord {
    let mut record = DecisionRecord::lost(call_id, "demo_mail");
    record.run_id = "run-console".into();
    record.principal = principal.into();
    record.decided_by = Some(by.into());
    if approved {
        record.outcome = Outcome::Ok;
        record.approval = ApprovalRecord::Approved {
            via: ApprovedVia::Ticket,
        };
    } else {
        record.outcome = Outcome::Error(ErrorCode::ApprovalDenied);
        record.approval = ApprovalRecord::Denied {
            denial: Denial::Declined {
                reason: "not this one".into(),
            },
        };
    }
    record
}

/// Fills the audit; returns the script call's id, and the time between the two halves.
async fn fill(writer: &Writer) -> (String, i64) {
    let dispatcher = Dispatcher::new(Arc::new(Registry::new([echo(), script(), mail()]).unwrap()))
        .unwrap()
        .with_trace(writer.sink());
    let alice = Principal::local("alice", &[]);
    let bob = Principal::local("bob", &[]);
    for i in 0..5 {
        let call = CallRequest::new(
            alice.clone(),
            "run-a",
            "demo_echo",
            json!({"text": format!("a{i}")}),
        );
        assert!(!dispatcher.call(call).await.is_error());
    }
    let refused = CallRequest::new(alice.clone(), "run-a", "demo_echo", json!({}));
    assert!(dispatcher.call(refused).await.is_error());
    writer.flush().await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let middle = now_ms();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let script_call = CallRequest::new(bob.clone(), "run-b", "demo_script", json!({"times": 2}));
    let script_id = script_call.call_id.clone();
    assert!(!dispatcher.call(script_call).await.is_error());
    let denied = dispatcher
        .call(CallRequest::new(
            bob.clone(),
            "run-b",
            "demo_mail",
            json!({"text": "=1+1"}),
        ))
        .await;
    assert_eq!(
        denied.error().map(|e| e.code),
        Some(ErrorCode::ApprovalDenied)
    );
    let sink = writer.sink();
    sink.record(Arc::new(answered("console-1", "erin", true, "carol")));
    sink.record(Arc::new(answered("console-2", "erin", false, "dave")));
    writer.flush().await;
    (script_id, middle)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// What a search found, comparable across stores (row ids and times differ).
fn summary(entries: &[AuditEntry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| {
            format!(
                "{} {} {} {} {} {}",
                e.principal,
                e.tool,
                e.origin,
                e.outcome,
                e.approval,
                e.decided_by.as_deref().unwrap_or("-")
            )
        })
        .collect()
}

async fn all(store: &AuditStore, filter: &AuditFilter) -> Vec<AuditEntry> {
    store
        .search(filter, None, query::MAX_PAGE)
        .await
        .unwrap()
        .entries
}

/// Every check on one store; returns the summaries of each filter for comparing stores.
async fn check_store(writer: Writer, store: AuditStore) -> Vec<Vec<String>> {
    let (script_id, middle) = fill(&writer).await;
    let everything = all(&store, &AuditFilter::default()).await;
    // 5 echoes + 1 refused, the script + 2 nested echoes, 1 denied mail, 2 answered.
    assert_eq!(everything.len(), 12, "{:#?}", summary(&everything));
    let order: Vec<(i64, i64)> = everything.iter().map(|e| (e.time_unix_ms, e.id)).collect();
    let mut newest_first = order.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(order, newest_first, "newest first");

    let filters: Vec<(AuditFilter, usize)> = vec![
        (
            AuditFilter {
                principal: Some("alice".into()),
                ..Default::default()
            },
            6,
        ),
        (
            AuditFilter {
                tool: Some("demo_echo".into()),
                ..Default::default()
            },
            8,
        ),
        (
            AuditFilter {
                tool: Some("demo_echo".into()),
                principal: Some("bob".into()),
                ..Default::default()
            },
            2,
        ),
        (
            AuditFilter {
                outcome: Some(OutcomeFilter::Ok),
                ..Default::default()
            },
            9,
        ),
        (
            AuditFilter {
                outcome: Some(OutcomeFilter::AnyError),
                ..Default::default()
            },
            2 + 1,
        ),
        (
            AuditFilter {
                outcome: Some(OutcomeFilter::Error(ErrorCode::InvalidArgument)),
                ..Default::default()
            },
            1,
        ),
        (
            AuditFilter {
                approval: Some(ApprovalFilter::Denied),
                ..Default::default()
            },
            2,
        ),
        (
            AuditFilter {
                approval: Some(ApprovalFilter::Declined),
                ..Default::default()
            },
            1,
        ),
        (
            AuditFilter {
                approval: Some(ApprovalFilter::Approved),
                ..Default::default()
            },
            1,
        ),
        (
            AuditFilter {
                decided_by: Some("carol".into()),
                ..Default::default()
            },
            1,
        ),
        (
            AuditFilter {
                since_ms: Some(middle),
                ..Default::default()
            },
            6,
        ),
        (
            AuditFilter {
                until_ms: Some(middle),
                ..Default::default()
            },
            6,
        ),
        (
            AuditFilter {
                outcome: Some(OutcomeFilter::Ok),
                until_ms: Some(middle),
                ..Default::default()
            },
            5,
        ),
        (
            AuditFilter {
                principal: Some("x' OR '1'='1".into()),
                ..Default::default()
            },
            0,
        ),
    ];
    let mut summaries = Vec::new();
    for (filter, expected) in &filters {
        let found = all(&store, filter).await;
        assert_eq!(found.len(), *expected, "{filter:?}: {:#?}", summary(&found));
        summaries.push(summary(&found));
    }
    let alice = all(&store, &filters[0].0).await;
    assert!(alice.iter().all(|e| e.principal == "alice"));
    let declined = all(&store, &filters[7].0).await;
    assert_eq!(declined[0].decided_by.as_deref(), Some("dave"));
    assert_eq!(declined[0].denial.as_deref(), Some("declined"));
    let before_middle = all(&store, &filters[11].0).await;
    assert!(before_middle.iter().all(|e| e.time_unix_ms < middle));

    // Pages of two join up to the whole search, each row once.
    let mut paged = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = store
            .search(&AuditFilter::default(), after, 2)
            .await
            .unwrap();
        assert!(page.entries.len() <= 2);
        pages += 1;
        paged.extend(page.entries.iter().map(|e| e.id));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 6);
    assert_eq!(paged, everything.iter().map(|e| e.id).collect::<Vec<_>>());

    // The script's tree: itself and its two nested echoes, made from inside it.
    let tree: CallTree = store.tree(&script_id, None).await.unwrap().unwrap();
    assert_eq!(tree.entry.tool, "demo_script");
    assert_eq!(tree.children.len(), 2, "{tree:#?}");
    for child in &tree.children {
        assert_eq!(child.entry.tool, "demo_echo");
        assert_eq!(child.entry.origin, "sandbox");
        assert_eq!(
            child.entry.parent_call_id.as_deref(),
            Some(script_id.as_str())
        );
    }
    let arguments: Vec<&Value> = tree
        .children
        .iter()
        .map(|c| &c.entry.record["arguments"])
        .collect();
    assert_eq!(
        arguments,
        [&json!({"text": "n0"}), &json!({"text": "n1"})],
        "oldest first"
    );
    assert!(store.tree("no-such-call", None).await.unwrap().is_none());
    let leaf = &tree.children[0].entry;
    let leaf_tree = store
        .tree(&leaf.call_id, Some(&leaf.run_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(leaf_tree.len(), 1);

    // Each export holds exactly the search's rows, in its order.
    let filter = AuditFilter {
        principal: Some("bob".into()),
        ..Default::default()
    };
    let searched: Vec<i64> = all(&store, &filter).await.iter().map(|e| e.id).collect();
    assert_eq!(searched.len(), 4);
    let mut jsonl = Vec::new();
    assert_eq!(
        store
            .export(&filter, ExportFormat::Jsonl, &mut jsonl)
            .await
            .unwrap(),
        4
    );
    let exported: Vec<AuditEntryIds> = String::from_utf8(jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported.iter().map(|e| e.id).collect::<Vec<_>>(), searched);
    let mut csv_bytes = Vec::new();
    store
        .export(&filter, ExportFormat::Csv, &mut csv_bytes)
        .await
        .unwrap();
    let mut reader = csv::Reader::from_reader(csv_bytes.as_slice());
    let ids: Vec<i64> = reader
        .records()
        .map(|r| r.unwrap()[0].parse().unwrap())
        .collect();
    assert_eq!(ids, searched);
    // The hostile argument reached the CSV as data, not as a formula.
    assert!(
        !String::from_utf8_lossy(&csv_bytes)
            .lines()
            .any(|l| l.contains(",=1+1"))
    );
    summaries
}

#[derive(serde::Deserialize)]
struct AuditEntryIds {
    id: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_search_finds_the_same_calls_on_sqlite_and_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, store) = sqlite_store(dir.path()).await;
    let on_file = check_store(writer, store).await;
    let (writer, store) = postgres_store().await;
    let on_pg = check_store(writer, store).await;
    assert_eq!(on_file, on_pg);
}

/// SQLite's plan for a statement.
fn plan(conn: &rusqlite::Connection, statement: &query::Statement) -> String {
    let sql = format!("EXPLAIN QUERY PLAN {}", statement.sql);
    let mut stmt = conn.prepare(&sql).unwrap();
    let params = statement.params.iter().map(|p| match p {
        toolgate_core::sql::SqlValue::Integer(v) => rusqlite::types::Value::Integer(*v),
        toolgate_core::sql::SqlValue::Text(v) => rusqlite::types::Value::Text(v.clone()),
        toolgate_core::sql::SqlValue::Real(v) => rusqlite::types::Value::Real(*v),
        toolgate_core::sql::SqlValue::Null => rusqlite::types::Value::Null,
    });
    stmt.query_map(rusqlite::params_from_iter(params), |row| {
        row.get::<_, String>(3)
    })
    .unwrap()
    .map(Result::unwrap)
    .collect::<Vec<_>>()
    .join("; ")
}

#[test]
fn each_sqlite_search_reads_the_index_made_for_it_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let conn = toolgate_store::audit::sqlite::open_file(&dir.path().join("audit.sqlite")).unwrap();
    let cursor = Some(query::Cursor {
        time_unix_ms: 5,
        id: 9,
    });
    let cases: Vec<(query::Statement, &str)> = vec![
        (
            query::search(
                &AuditFilter {
                    principal: Some("a".into()),
                    ..Default::default()
                },
                cursor,
                50,
            ),
            "decisions_by_principal_time",
        ),
        (
            query::search(
                &AuditFilter {
                    tool: Some("t".into()),
                    ..Default::default()
                },
                cursor,
                50,
            ),
            "decisions_by_tool_time",
        ),
        (
            query::search(
                &AuditFilter {
                    outcome: Some(OutcomeFilter::Error(ErrorCode::Forbidden)),
                    since_ms: Some(1),
                    until_ms: Some(9),
                    ..Default::default()
                },
                None,
                50,
            ),
            "decisions_by_outcome_time",
        ),
        (
            query::search(
                &AuditFilter {
                    approval: Some(ApprovalFilter::Pending),
                    ..Default::default()
                },
                cursor,
                50,
            ),
            "decisions_by_approval_time",
        ),
        (
            query::search(
                &AuditFilter {
                    decided_by: Some("c".into()),
                    ..Default::default()
                },
                None,
                50,
            ),
            "decisions_by_decider_time",
        ),
        (
            query::search(&AuditFilter::default(), cursor, 50),
            "decisions_by_time",
        ),
        (
            query::children("r", "i", &["c".into()], 10),
            "decisions_by_parent",
        ),
        (query::call("c", None), "decisions_by_call"),
    ];
    for (statement, index) in cases {
        let plan = plan(&conn, &statement);
        assert!(plan.contains(index), "{index}: {plan}");
        assert!(
            !plan.contains("TEMP B-TREE FOR ORDER BY")
                || index == "decisions_by_call"
                || index == "decisions_by_parent",
            "{index}: {plan}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_on_while_the_audit_file_is_locked_and_every_record_lands_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.sqlite");
    let audit = SqliteAudit::open(&path, "test/lock".into()).unwrap();
    let dispatcher = Dispatcher::new(Arc::new(Registry::new([echo()]).unwrap()))
        .unwrap()
        .with_trace(Arc::new(audit.clone()));
    let principal = Principal::local("alice", &[]);
    // Another writer holds the file for longer than the sink's busy timeout: the sink's batch
    // fails, waits and is written again later.
    let mut locker = rusqlite::Connection::open(&path).unwrap();
    let tx = locker
        .transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)
        .unwrap();
    let started = std::time::Instant::now();
    for i in 0..200 {
        let call = CallRequest::new(
            principal.clone(),
            "run-1",
            "demo_echo",
            json!({"text": format!("{i}")}),
        )
        .with_call_id(&format!("seq-{i:03}"));
        assert!(!dispatcher.call(call).await.is_error());
    }
    let calls_took = started.elapsed();
    assert!(
        !audit.flush_within(Duration::from_millis(300)),
        "the file is locked"
    );
    tokio::time::sleep(Duration::from_secs(6)).await;
    tx.rollback().unwrap();
    drop(locker);
    let flushed = audit.clone();
    assert!(
        tokio::task::spawn_blocking(move || flushed.flush_within(Duration::from_secs(60)))
            .await
            .unwrap()
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    let ids: Vec<String> = conn
        .prepare("SELECT call_id FROM decisions ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let expected: Vec<String> = (0..200).map(|i| format!("seq-{i:03}")).collect();
    assert_eq!(ids, expected, "once each, in order");
    eprintln!("200 calls took {calls_took:?} while the audit file was locked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_longer_than_a_page_holds_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, store) = sqlite_store(dir.path()).await;
    let total = 2 * query::MAX_PAGE as usize + 345;
    let sink = writer.sink();
    for i in 0..total {
        sink.record(Arc::new(DecisionRecord::lost(
            &format!("c{i}"),
            "demo_echo",
        )));
    }
    writer.flush().await;
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .search(&AuditFilter::default(), after, query::MAX_PAGE)
            .await
            .unwrap();
        paged.extend(page.entries.iter().map(|e| e.id));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(paged.len(), total, "every page was read");
    let mut jsonl = Vec::new();
    let written = store
        .export(&AuditFilter::default(), ExportFormat::Jsonl, &mut jsonl)
        .await
        .unwrap();
    assert_eq!(written, total);
    let exported: Vec<i64> = String::from_utf8(jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<AuditEntryIds>(l).unwrap().id)
        .collect();
    assert_eq!(exported, paged);
    let mut unique = exported.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), total, "each record once");
}
