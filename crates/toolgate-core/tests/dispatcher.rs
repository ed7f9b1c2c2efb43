//! The dispatcher end to end: real SQLite files, a real tokio runtime, demo tools declared with
//! `ToolBuilder`. Each test is named after what it prevents.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::approval::{ApprovalAnswer, ApprovalRequest, Approver, ApproverError};
use toolgate_core::idempotency::{
    self, IdempotencyKey, Receipt, ReceiptLog, WriteEffect, run_once_on, store_error,
};
use toolgate_core::sql_params;
use toolgate_core::tool::{BoxFuture, Tool};
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{
    ApprovalChannel, ApprovalRecord, ApprovedVia, CallOutcome, CallRequest, CancelToken, Clock,
    Denial, DenyAll, Dispatcher, Effect, ErrorCode, ManualClock, Mode, Principal, Registry, Risk,
    ScriptedApprover, Stage, ToolBuilder, ToolError, ToolOutput,
};

/// 2026-11-29 09:00 UTC.
const NOW_UNIX: u64 = 20_786 * 86_400 + 9 * 3_600;
const TODAY: &str = "2026-11-29";
/// A fake OpenAI project key: the prefix plus 30 characters.
const FAKE_KEY: &str = "sk-proj-Zq7Kx2Lm9Wv4Tr8Yp3Hn6Bc1Df5Gs0";
/// A slice of the key's random part: if this shows up anywhere, some of the key leaked.
const FAKE_KEY_TAIL: &str = "Zq7Kx2Lm";
const SLOW_TOOL_DEADLINE: Duration = Duration::from_millis(200);
/// Long enough that on a loaded machine a cancellation still arrives before the deadline.
const PATIENT_TOOL_DEADLINE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Demo tools
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Detail {
    #[default]
    Concise,
    Detailed,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Words to look for.
    #[schemars(length(min = 1, max = 100))]
    query: String,
    /// How many results to return.
    #[schemars(range(min = 1, max = 50))]
    limit: Option<u32>,
    #[serde(default)]
    format: Detail,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoteAddArgs {
    #[schemars(length(min = 1, max = 200))]
    title: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EmailSendArgs {
    #[schemars(extend("format" = "email"))]
    to: String,
    #[schemars(length(min = 1, max = 200))]
    subject: String,
    #[schemars(length(min = 1, max = 5_000))]
    body: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SlowArgs {
    #[schemars(range(max = 60_000))]
    millis: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[schemars(range(min = 1, max = 10_000))]
    count: u32,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoteArgs {
    #[schemars(length(min = 1, max = 500))]
    note: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RemindArgs {
    /// The day to be reminded, written YYYY-MM-DD.
    #[schemars(extend("format" = "date"))]
    due: String,
    #[schemars(length(min = 1, max = 200))]
    text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// How many times each handler was entered, so a test can prove a refused call never ran.
#[derive(Debug, Default)]
struct Runs {
    search: AtomicUsize,
    note_add: AtomicUsize,
    email_send: AtomicUsize,
    audit: AtomicUsize,
}

fn open_db(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    Ok(conn)
}

fn create_db(path: &Path) {
    let conn = open_db(path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL);
         CREATE TABLE outbox (id INTEGER PRIMARY KEY, recipient TEXT NOT NULL,
                              subject TEXT NOT NULL, body TEXT NOT NULL);",
    )
    .unwrap();
    idempotency::install(&conn).unwrap();
}

/// Runs a SQLite write off the async threads, as a real toolset must.
async fn blocking_write<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::internal(format!("the write task failed: {e}")))?
}

fn search_tool(runs: Arc<Runs>) -> Tool {
    ToolBuilder::<SearchArgs>::new("demo_search", 1)
        .describe(
            "Searches the demo notes by words.",
            "you need notes matching some words.",
            Some("you know the note id; use demo_list instead"),
            "matching note titles.",
        )
        .example(
            "search",
            json!({"query": "milk", "limit": 5, "format": "concise"}),
        )
        .policy(Risk::Low, Effect::Read, "It only reads notes.")
        .read(move |_ctx, args: SearchArgs| {
            runs.search.fetch_add(1, Ordering::SeqCst);
            async move {
                Ok(ToolOutput::new(json!({
                    "query": args.query,
                    "limit": args.limit.unwrap_or(10),
                    "format": format!("{:?}", args.format).to_lowercase(),
                    "hits": [],
                })))
            }
        })
        .unwrap()
}

fn note_add_tool(db: PathBuf, runs: Arc<Runs>) -> Tool {
    ToolBuilder::<NoteAddArgs>::new("demo_note_add", 1)
        .describe(
            "Adds a note.",
            "the user asks to remember something.",
            Some("the note exists; use demo_search to find it"),
            "the new note's id and title.",
        )
        .example("add", json!({"title": "Buy milk"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It adds a note the user can delete.",
        )
        .write(move |ctx, args: NoteAddArgs| {
            runs.note_add.fetch_add(1, Ordering::SeqCst);
            let db = db.clone();
            async move {
                let key = ctx.write_key()?.clone();
                let now = ctx.now_unix;
                blocking_write(move || {
                    let mut conn = open_db(&db).map_err(store_error)?;
                    run_once_on(&mut conn, &key, now, |tx| {
                        let id = tx.query_i64(
                            "INSERT INTO notes (title) VALUES (?1) RETURNING id",
                            sql_params![&args.title],
                        )?;
                        Ok(WriteEffect {
                            result: json!({"note_id": id, "title": args.title}),
                            undo: Some(json!({"delete_note": id})),
                        })
                    })
                })
                .await
            }
        })
        .unwrap()
}

/// The demo database's receipts, read the way the dispatcher reads a toolset's.
struct DemoReceipts(PathBuf);

impl ReceiptLog for DemoReceipts {
    fn recorded(&self, key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError> {
        let conn = open_db(&self.0).map_err(store_error)?;
        idempotency::recorded(&conn, key)
    }
}

fn email_send_tool(db: PathBuf, runs: Arc<Runs>) -> Tool {
    ToolBuilder::<EmailSendArgs>::new("demo_email_send", 1)
        .describe(
            "Sends an email.",
            "the user asked to send a message.",
            Some("the user only wants a draft; use demo_note_add"),
            "the outbox id.",
        )
        .example(
            "send",
            json!({"to": "bob@example.org", "subject": "Hi", "body": "Lunch?"}),
        )
        .policy(
            Risk::High,
            Effect::Irreversible,
            "A sent email cannot be taken back and other people read it.",
        )
        .receipts(DemoReceipts(db.clone()))
        .write(move |ctx, args: EmailSendArgs| {
            runs.email_send.fetch_add(1, Ordering::SeqCst);
            let db = db.clone();
            async move {
                let key = ctx.write_key()?.clone();
                let now = ctx.now_unix;
                blocking_write(move || {
                    let mut conn = open_db(&db).map_err(store_error)?;
                    run_once_on(&mut conn, &key, now, |tx| {
                        let id = tx.query_i64(
                            "INSERT INTO outbox (recipient, subject, body) VALUES (?1, ?2, ?3) RETURNING id",
                            sql_params![&args.to, &args.subject, &args.body],
                        )?;
                        Ok(WriteEffect {
                            result: json!({"outbox_id": id}),
                            undo: None,
                        })
                    })
                })
                .await
            }
        })
        .unwrap()
}

fn slow_tool(name: &str, deadline: Duration) -> Tool {
    ToolBuilder::<SlowArgs>::new(name, 1)
        .describe(
            "Waits, then answers.",
            "testing deadlines.",
            None,
            "how long it waited.",
        )
        .example("wait", json!({"millis": 10}))
        .policy(Risk::Low, Effect::Read, "It changes nothing.")
        .deadline(deadline)
        .read(|_ctx, args: SlowArgs| async move {
            tokio::time::sleep(Duration::from_millis(args.millis)).await;
            Ok(ToolOutput::new(json!({"waited_ms": args.millis})))
        })
        .unwrap()
}

fn list_tool() -> Tool {
    ToolBuilder::<ListArgs>::new("demo_list", 1)
        .describe(
            "Lists notes.",
            "you need every note.",
            Some("you have words to match; use demo_search"),
            "notes, newest first.",
        )
        .example("ten", json!({"count": 10}))
        .policy(Risk::Low, Effect::Read, "It only reads notes.")
        .more_hint("pass a smaller count, or page with offset")
        .read(|_ctx, args: ListArgs| async move {
            let items: Vec<Value> = (0..args.count)
                .map(|i| json!({"id": i, "title": format!("note number {i} with some padding text")}))
                .collect();
            Ok(ToolOutput::new(json!({"total": args.count, "items": items})))
        })
        .unwrap()
}

fn secret_tool() -> Tool {
    ToolBuilder::<NoteArgs>::new("demo_secret_note", 1)
        .describe(
            "Reads a note that happens to hold a credential.",
            "testing redaction.",
            None,
            "the note text.",
        )
        .example("read", json!({"note": "config"}))
        .policy(Risk::Low, Effect::Read, "It only reads a note.")
        .read(|_ctx, args: NoteArgs| async move {
            Ok(ToolOutput::new(json!({
                "note": args.note,
                "text": format!("the deploy key is {FAKE_KEY}, keep it safe"),
            })))
        })
        .unwrap()
}

fn remind_tool() -> Tool {
    ToolBuilder::<RemindArgs>::new("demo_remind", 1)
        .describe(
            "Checks a reminder date.",
            "the user wants a reminder on a day.",
            None,
            "the reminder as stored.",
        )
        .example("remind", json!({"due": "2026-12-01", "text": "call mom"}))
        .policy(Risk::Low, Effect::Read, "It changes nothing.")
        .read(|_ctx, args: RemindArgs| async move {
            Ok(ToolOutput::new(json!({"due": args.due, "text": args.text})))
        })
        .unwrap()
}

fn failing_tool() -> Tool {
    ToolBuilder::<NoArgs>::new("demo_broken", 1)
        .describe("Always fails.", "testing failures.", None, "nothing.")
        .policy(Risk::Low, Effect::Read, "It changes nothing.")
        .read(|_ctx, _args: NoArgs| async move {
            Err(ToolError::internal("the backing store is gone"))
        })
        .unwrap()
}

fn panicking_tool() -> Tool {
    ToolBuilder::<NoArgs>::new("demo_panics", 1)
        .describe("Panics.", "testing failures.", None, "nothing.")
        .policy(Risk::Low, Effect::Read, "It changes nothing.")
        .read(|_ctx, _args: NoArgs| async move {
            let rows: Vec<u32> = Vec::new();
            // An out-of-bounds index: the kind of bug a handler really has.
            let first = rows[rows.len()];
            Ok(ToolOutput::new(json!(first)))
        })
        .unwrap()
}

fn audit_tool(runs: Arc<Runs>) -> Tool {
    ToolBuilder::<NoArgs>::new("demo_audit_read", 1)
        .describe("Reads the audit log.", "an admin asks.", None, "log lines.")
        .policy(Risk::Low, Effect::Read, "It only reads the log.")
        .scopes(&["audit.read"])
        .read(move |_ctx, _args: NoArgs| {
            runs.audit.fetch_add(1, Ordering::SeqCst);
            async move { Ok(ToolOutput::new(json!(["line 1"]))) }
        })
        .unwrap()
}

/// The same scope requirement, declared before the policy.
fn audit_tool_scopes_first() -> Tool {
    ToolBuilder::<NoArgs>::new("demo_audit_export", 1)
        .describe(
            "Exports the audit log.",
            "an admin asks.",
            None,
            "log lines.",
        )
        .scopes(&["audit.read"])
        .policy(Risk::Low, Effect::Read, "It only reads the log.")
        .read(|_ctx, _args: NoArgs| async move { Ok(ToolOutput::new(json!(["line 1"]))) })
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Fixture and helpers
// ---------------------------------------------------------------------------------------------

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    clock: Arc<ManualClock>,
    trace: Arc<MemoryTrace>,
    registry: Arc<Registry>,
    runs: Arc<Runs>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("demo.sqlite");
        create_db(&db);
        let runs = Arc::new(Runs::default());
        let registry = Registry::new([
            search_tool(Arc::clone(&runs)),
            note_add_tool(db.clone(), Arc::clone(&runs)),
            email_send_tool(db.clone(), Arc::clone(&runs)),
            slow_tool("demo_slow", SLOW_TOOL_DEADLINE),
            slow_tool("demo_patient", PATIENT_TOOL_DEADLINE),
            list_tool(),
            secret_tool(),
            remind_tool(),
            failing_tool(),
            panicking_tool(),
            audit_tool(Arc::clone(&runs)),
            audit_tool_scopes_first(),
        ])
        .unwrap();
        Fixture {
            _dir: dir,
            db,
            clock: Arc::new(ManualClock::at_unix(NOW_UNIX)),
            trace: Arc::new(MemoryTrace::default()),
            registry: Arc::new(registry),
            runs,
        }
    }

    /// Auto mode, no approval channel, the manual clock and the memory trace.
    fn dispatcher(&self) -> Front {
        Front {
            d: Dispatcher::new(Arc::clone(&self.registry))
                .unwrap()
                .with_clock(self.clock.clone())
                .with_trace(self.trace.clone()),
            channel: ApprovalChannel::None,
        }
    }

    fn rows(&self, table: &str) -> i64 {
        let conn = open_db(&self.db).unwrap();
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    fn tool_call_events(&self) -> Vec<Value> {
        self.trace.of_kind("tool_call")
    }
}

/// A front end as `toolgate ask` is one: one dispatcher, and one approval channel it gives every
/// call that does not bring its own.
#[derive(Clone)]
struct Front {
    d: Dispatcher,
    channel: ApprovalChannel,
}

impl Front {
    fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.channel = ApprovalChannel::Ask(approver);
        self
    }

    fn with_mode(mut self, mode: Mode) -> Self {
        self.d = self.d.with_mode(mode);
        self
    }

    fn with_approval_timeout(mut self, timeout: Duration) -> Self {
        self.d = self.d.with_approval_timeout(timeout);
        self
    }

    fn binding_for(&self, principal: &Principal, tool: &str, args: &Value) -> Option<String> {
        self.d.binding_for(principal, tool, args)
    }

    fn ledger(&self) -> &toolgate_core::ApprovalLedger {
        self.d.ledger()
    }

    async fn call(&self, mut request: CallRequest) -> CallOutcome {
        if matches!(request.approval, ApprovalChannel::None) {
            request.approval = self.channel.clone();
        }
        self.d.call(request).await
    }
}

fn alice() -> Principal {
    Principal::local("alice", &["audit.read"])
}

fn email_to(to: &str) -> Value {
    json!({"to": to, "subject": "Lunch", "body": "Noon at the usual place?"})
}

async fn call(d: &Front, principal: Principal, tool: &str, args: Value) -> CallOutcome {
    d.call(CallRequest::new(principal, "run-1", tool, args))
        .await
}

/// The error of a call that must have failed.
fn error_of(outcome: &CallOutcome) -> &ToolError {
    match outcome.error() {
        Some(e) => e,
        None => panic!(
            "expected an error, got {:?}; record {:?}",
            outcome.result, outcome.record
        ),
    }
}

/// The result content of a call that must have succeeded.
fn content_of(outcome: &CallOutcome) -> &Value {
    match outcome.observation() {
        Some(obs) => &obs.content,
        None => panic!(
            "expected success, got {:?}; record {:?}",
            outcome.result, outcome.record
        ),
    }
}

fn denial_reason(outcome: &CallOutcome) -> String {
    match &outcome.record.approval {
        ApprovalRecord::Denied { denial } => denial.to_string(),
        other => panic!("expected a denial, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Validation: errors that teach
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_field_is_rejected() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    // (misspelled field, the real field the hint must name)
    let cases = [("limt", "limit"), ("qurey", "query"), ("formt", "format")];
    for (wrong, near) in cases {
        let mut args = json!({"query": "milk"});
        args[wrong] = json!(3);
        let out = call(&d, alice(), "demo_search", args).await;
        let e = error_of(&out);
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{wrong}");
        assert_eq!(e.field.as_deref(), Some(wrong));
        assert_eq!(out.record.stage, Stage::Validate);
        let hint = e.hint.as_deref().unwrap_or_default();
        assert!(hint.contains(&format!("`{near}`")), "{wrong}: hint {hint}");
        assert!(out.model_text().contains(wrong));
    }
    assert_eq!(fx.runs.search.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn wrong_enum_value_is_rejected_with_allowed_values_listed() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    for wrong in [json!("full"), json!("CONCISE"), json!(1)] {
        let out = call(
            &d,
            alice(),
            "demo_search",
            json!({"query": "x", "format": wrong}),
        )
        .await;
        let e = error_of(&out);
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{wrong}");
        assert_eq!(e.field.as_deref(), Some("format"));
        let expected = e.expected.as_deref().unwrap_or_default();
        assert!(
            expected.contains(r#""concise""#) && expected.contains(r#""detailed""#),
            "{wrong}: {expected}"
        );
        assert_eq!(e.received.as_ref(), Some(&wrong));
        assert_eq!(e.example, Some(json!({"format": "concise"})));
        assert_eq!(out.model_value()["error"]["retryable"], false);
    }
    assert_eq!(fx.runs.search.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn out_of_bounds_values_are_rejected_before_the_handler() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    let cases = [
        (
            "limit below minimum",
            json!({"query": "x", "limit": 0}),
            "limit",
        ),
        (
            "limit above maximum",
            json!({"query": "x", "limit": 51}),
            "limit",
        ),
        (
            "limit as text",
            json!({"query": "x", "limit": "5"}),
            "limit",
        ),
        ("empty query", json!({"query": ""}), "query"),
        ("missing query", json!({"limit": 5}), "query"),
        ("arguments not an object", json!(["x"]), "$"),
    ];
    for (name, args, field) in cases {
        let out = call(&d, alice(), "demo_search", args).await;
        let e = error_of(&out);
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{name}");
        assert_eq!(e.field.as_deref(), Some(field), "{name}");
        assert!(e.expected.is_some(), "{name}");
    }
    assert_eq!(fx.runs.search.load(Ordering::SeqCst), 0);
    let ok = call(
        &d,
        alice(),
        "demo_search",
        json!({"query": "x", "limit": 50}),
    )
    .await;
    assert_eq!(content_of(&ok)["limit"], 50);
}

#[tokio::test]
async fn relative_date_is_rejected_with_todays_date() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    assert_eq!(fx.clock.today(), TODAY);
    for relative in [
        "Friday",
        "tomorrow",
        "next week",
        "29/11/2026",
        "2026-02-30",
    ] {
        let out = call(
            &d,
            alice(),
            "demo_remind",
            json!({"due": relative, "text": "call mom"}),
        )
        .await;
        let e = error_of(&out);
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{relative}");
        assert_eq!(e.field.as_deref(), Some("due"));
        let hint = e.hint.as_deref().unwrap_or_default();
        assert!(
            hint.contains(&format!("today is {TODAY}")),
            "{relative}: {hint}"
        );
        assert!(
            e.expected
                .as_deref()
                .unwrap_or_default()
                .contains("YYYY-MM-DD")
        );
    }
    let ok = call(
        &d,
        alice(),
        "demo_remind",
        json!({"due": "2026-12-04", "text": "call mom"}),
    )
    .await;
    assert_eq!(content_of(&ok)["due"], "2026-12-04");
}

#[tokio::test]
async fn a_withheld_name_is_refused_with_its_reason_and_never_listed() {
    let registry = Registry::new([list_tool()]).unwrap().withholding(
        [
            (
                "remote__lookup".to_string(),
                "it changed since it was pinned".to_string(),
            ),
            // A withheld name that is also a tool stays a tool.
            ("demo_list".to_string(), "stale".to_string()),
        ]
        .into(),
    );
    assert_eq!(
        registry.withheld("remote__lookup"),
        Some("it changed since it was pinned")
    );
    assert_eq!(registry.withheld("demo_list"), None);
    assert_eq!(registry.names().collect::<Vec<_>>(), ["demo_list"]);
    let d = Front {
        d: Dispatcher::new(Arc::new(registry)).unwrap(),
        channel: ApprovalChannel::None,
    };
    let refused = call(&d, alice(), "remote__lookup", json!({})).await;
    let e = error_of(&refused);
    assert_eq!(e.code, ErrorCode::Forbidden);
    assert_eq!(
        e.message,
        "tool `remote__lookup` is withheld: it changed since it was pinned"
    );
    assert_eq!(refused.record.stage, Stage::Resolve);
    let listed = call(&d, alice(), "demo_list", json!({"count": 2})).await;
    assert!(listed.observation().is_some(), "{:?}", listed.result);
}

#[tokio::test]
async fn unknown_tool_gets_closest_real_names() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    let narrow = alice().with_catalogue(["demo_list", "demo_note_add"]);
    // (caller, misspelled name, must be suggested, must not be suggested)
    let cases = [
        (alice(), "demo_serch", Some("demo_search"), None),
        (alice(), "search", Some("demo_search"), None),
        (narrow.clone(), "demo_serch", None, Some("demo_search")),
        (narrow, "demo_lst", Some("demo_list"), Some("demo_search")),
    ];
    for (principal, name, wanted, hidden) in cases {
        let out = call(&d, principal, name, json!({})).await;
        let e = error_of(&out);
        assert_eq!(e.code, ErrorCode::NotFound, "{name}");
        assert_eq!(out.record.stage, Stage::Resolve);
        assert_eq!(out.record.tool_version, None);
        let hint = e.hint.as_deref().unwrap_or_default();
        if let Some(wanted) = wanted {
            assert!(
                hint.starts_with(&format!("did you mean `{wanted}`")),
                "{name}: {hint}"
            );
        }
        if let Some(hidden) = hidden {
            assert!(
                !out.model_text().contains(hidden),
                "{name} leaked {hidden}: {hint}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Approval
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn high_risk_call_with_no_approval_channel_is_denied_with_the_typed_reason() {
    let fx = Fixture::new();
    for mode in [Mode::Auto, Mode::Ask] {
        let d = fx.dispatcher().with_mode(mode);
        let out = call(&d, alice(), "demo_email_send", email_to("bob@example.org")).await;
        let e = error_of(&out);
        assert_eq!(e.code, ErrorCode::ApprovalDenied, "{mode:?}");
        assert!(!e.retryable());
        assert_eq!(out.record.stage, Stage::Approval);
        assert_eq!(
            out.record.approval,
            ApprovalRecord::Denied {
                denial: Denial::NoChannel
            }
        );
        assert!(denial_reason(&out).contains("no way to ask a human"));
        assert_eq!(
            out.record.idempotency_key, None,
            "no key is made for a refused write"
        );
    }
    assert_eq!(fx.rows("outbox"), 0);
    assert_eq!(fx.rows("tool_receipts"), 0);
    assert_eq!(fx.runs.email_send.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn high_risk_call_is_asked_even_in_auto_mode() {
    for mode in [Mode::Auto, Mode::Ask] {
        let fx = Fixture::new();
        let args = email_to("bob@example.org");
        let probe = fx.dispatcher();
        let binding = probe
            .binding_for(&alice(), "demo_email_send", &args)
            .unwrap();
        let approver = Arc::new(ScriptedApprover::approving([binding.clone()]));
        let d = fx
            .dispatcher()
            .with_mode(mode)
            .with_approver(approver.clone());
        let out = call(&d, alice(), "demo_email_send", args.clone()).await;
        assert!(content_of(&out)["outbox_id"].is_i64(), "{mode:?}");
        assert_eq!(
            out.record.approval,
            ApprovalRecord::Approved {
                via: ApprovedVia::Approver
            }
        );
        let seen = approver.seen();
        assert_eq!(seen.len(), 1, "{mode:?}: asked exactly once");
        // The human saw the exact recipient and body, not a paraphrase.
        assert_eq!(seen[0].arguments, args);
        assert_eq!(seen[0].binding, binding);
        assert_eq!(
            (seen[0].risk, seen[0].principal.as_str()),
            (Risk::High, "alice")
        );
        assert!(seen[0].reason.contains("cannot be taken back"));
        assert_eq!(fx.rows("outbox"), 1);
    }
}

#[tokio::test]
async fn medium_risk_runs_in_auto_mode_and_asks_in_ask_mode() {
    enum Asker {
        Nobody,
        Deny,
        ApproveThisCall,
    }
    // (mode, approver, runs, asked)
    let cases = [
        (Mode::Auto, Asker::Nobody, true, false),
        (Mode::Auto, Asker::Deny, true, false),
        (Mode::Ask, Asker::Nobody, false, false),
        (Mode::Ask, Asker::Deny, false, false),
        (Mode::Ask, Asker::ApproveThisCall, true, true),
    ];
    for (mode, asker, runs, asked) in cases {
        let fx = Fixture::new();
        let args = json!({"title": "Buy milk"});
        let binding = fx
            .dispatcher()
            .binding_for(&alice(), "demo_note_add", &args)
            .unwrap();
        let scripted = Arc::new(ScriptedApprover::approving([binding]));
        let mut d = fx.dispatcher().with_mode(mode);
        d = match asker {
            Asker::Nobody => d,
            Asker::Deny => d.with_approver(Arc::new(DenyAll)),
            Asker::ApproveThisCall => d.with_approver(scripted.clone()),
        };
        let out = call(&d, alice(), "demo_note_add", args).await;
        let label = format!("{mode:?} runs={runs}");
        assert_eq!(out.is_error(), !runs, "{label}: {:?}", out.result);
        assert_eq!(fx.rows("notes"), i64::from(runs), "{label}");
        assert_eq!(scripted.seen().len(), usize::from(asked), "{label}");
        if runs {
            // Auto mode logs an undo handle for the write it did not ask about.
            assert_eq!(out.record.undo, Some(json!({"delete_note": 1})), "{label}");
        } else {
            assert_eq!(error_of(&out).code, ErrorCode::ApprovalDenied, "{label}");
            assert_eq!(fx.runs.note_add.load(Ordering::SeqCst), 0, "{label}");
        }
        if mode == Mode::Auto {
            assert_eq!(out.record.approval, ApprovalRecord::NotNeeded, "{label}");
        }
    }
}

#[tokio::test]
async fn low_risk_never_asks_even_in_ask_mode() {
    let fx = Fixture::new();
    let approver = Arc::new(ScriptedApprover::default());
    let d = fx
        .dispatcher()
        .with_mode(Mode::Ask)
        .with_approver(approver.clone());
    let out = call(&d, alice(), "demo_search", json!({"query": "milk"})).await;
    assert!(!out.is_error());
    assert!(approver.seen().is_empty());
}

#[tokio::test]
async fn approval_for_one_argument_set_does_not_authorize_another() {
    let fx = Fixture::new();
    let to_bob = email_to("bob@example.org");
    let to_mallory = email_to("mallory@evil.example");
    let mut body_changed = to_bob.clone();
    body_changed["body"] = json!("Wire the money to account 1234.");
    let bob_binding = fx
        .dispatcher()
        .binding_for(&alice(), "demo_email_send", &to_bob)
        .unwrap();

    // Through an approver that approved Bob's email only.
    let approver = Arc::new(ScriptedApprover::approving([bob_binding.clone()]));
    let d = fx.dispatcher().with_approver(approver.clone());
    for other in [&to_mallory, &body_changed] {
        let out = call(&d, alice(), "demo_email_send", other.clone()).await;
        assert_eq!(error_of(&out).code, ErrorCode::ApprovalDenied);
    }
    let seen: Vec<Value> = approver.seen().into_iter().map(|r| r.arguments).collect();
    assert_eq!(seen, [to_mallory.clone(), body_changed.clone()]);
    // Another caller sending Bob's exact email is not covered by Alice's approval.
    let eve = Principal::local("eve", &[]);
    let out = call(&d, eve, "demo_email_send", to_bob.clone()).await;
    assert_eq!(error_of(&out).code, ErrorCode::ApprovalDenied);
    assert_eq!(fx.rows("outbox"), 0);

    // Through a token issued out of band for Bob's email.
    let d = fx.dispatcher();
    let token = d
        .ledger()
        .issue(
            &bob_binding,
            &alice(),
            fx.clock.now(),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    for other in [&to_mallory, &body_changed] {
        let request = CallRequest::new(alice(), "run-1", "demo_email_send", other.clone())
            .with_approval_token(&token);
        let out = d.call(request).await;
        assert_eq!(error_of(&out).code, ErrorCode::ApprovalDenied);
        assert!(
            denial_reason(&out).contains("different"),
            "{:?}",
            out.record
        );
    }
    assert_eq!(fx.rows("outbox"), 0);
    assert_eq!(fx.runs.email_send.load(Ordering::SeqCst), 0);
    // A mismatched presentation does not burn the token: Bob's email still goes.
    let request =
        CallRequest::new(alice(), "run-1", "demo_email_send", to_bob).with_approval_token(&token);
    let out = d.call(request).await;
    assert!(!out.is_error(), "{:?}", out.result);
    assert_eq!(
        out.record.approval,
        ApprovalRecord::Approved {
            via: ApprovedVia::Ticket
        }
    );
    let recipient: String = open_db(&fx.db)
        .unwrap()
        .query_row("SELECT recipient FROM outbox", [], |r| r.get(0))
        .unwrap();
    assert_eq!(recipient, "bob@example.org");
}

#[tokio::test]
async fn approval_token_cannot_be_used_twice() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    let args = email_to("bob@example.org");
    let binding = d.binding_for(&alice(), "demo_email_send", &args).unwrap();
    let token = d
        .ledger()
        .issue(&binding, &alice(), fx.clock.now(), Duration::from_secs(60))
        .await
        .unwrap();
    // Different runs, so the second call would be a fresh send, not an idempotent repeat.
    let first = CallRequest::new(alice(), "run-1", "demo_email_send", args.clone())
        .with_run("run-1")
        .with_approval_token(&token);
    let second = CallRequest::new(alice(), "run-1", "demo_email_send", args)
        .with_run("run-2")
        .with_approval_token(&token);
    let first = d.call(first).await;
    assert!(!first.is_error(), "{:?}", first.result);
    let second = d.call(second).await;
    assert_eq!(error_of(&second).code, ErrorCode::ApprovalDenied);
    assert!(denial_reason(&second).contains("already used"));
    assert_eq!(fx.rows("outbox"), 1);
    assert_eq!(fx.runs.email_send.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn retry_of_an_approved_send_replays_without_asking_or_sending_again() {
    let fx = Fixture::new();
    let args = email_to("bob@example.org");
    let binding = fx
        .dispatcher()
        .binding_for(&alice(), "demo_email_send", &args)
        .unwrap();
    // One approval only: a second question would be denied.
    let approver = Arc::new(ScriptedApprover::approving([binding]));
    let d = fx.dispatcher().with_approver(approver.clone());
    let send =
        || CallRequest::new(alice(), "run-1", "demo_email_send", args.clone()).with_run("run-1");

    let first = d.call(send()).await;
    let retry = d.call(send()).await;
    assert_eq!(
        first.record.approval,
        ApprovalRecord::Approved {
            via: ApprovedVia::Approver
        }
    );
    assert_eq!(retry.record.approval, ApprovalRecord::Replayed);
    assert_eq!(content_of(&retry), content_of(&first), "the first receipt");
    assert!(retry.record.duplicate && !first.record.duplicate);
    assert_eq!(approver.seen().len(), 1, "the human was asked once");
    assert_eq!(fx.runs.email_send.load(Ordering::SeqCst), 1);
    assert_eq!(fx.rows("outbox"), 1);

    // The same email in another run is a new send: it is asked about (and denied here).
    let other_run =
        CallRequest::new(alice(), "run-1", "demo_email_send", args.clone()).with_run("run-2");
    let out = d.call(other_run).await;
    assert_eq!(error_of(&out).code, ErrorCode::ApprovalDenied);
    assert_eq!(approver.seen().len(), 2);
    assert_eq!(fx.rows("outbox"), 1);
}

#[tokio::test]
async fn reused_key_with_other_arguments_is_a_conflict_before_any_human_is_asked() {
    let fx = Fixture::new();
    let to_bob = email_to("bob@example.org");
    let binding = fx
        .dispatcher()
        .binding_for(&alice(), "demo_email_send", &to_bob)
        .unwrap();
    let approver = Arc::new(ScriptedApprover::approving([binding]));
    let d = fx.dispatcher().with_approver(approver.clone());
    let first =
        CallRequest::new(alice(), "run-1", "demo_email_send", to_bob).with_idempotency_key("k-1");
    assert!(!d.call(first).await.is_error());

    let other = CallRequest::new(
        alice(),
        "run-1",
        "demo_email_send",
        email_to("mallory@evil.example"),
    )
    .with_idempotency_key("k-1");
    let out = d.call(other).await;
    assert_eq!(error_of(&out).code, ErrorCode::Conflict);
    assert_eq!(out.record.stage, Stage::Approval);
    assert_eq!(
        approver.seen().len(),
        1,
        "the conflict was not put to a human"
    );
    assert_eq!(fx.rows("outbox"), 1);
}

#[tokio::test]
async fn approval_token_expires() {
    let ttl = Duration::from_secs(60);
    // (time between issue and use, honoured)
    let cases = [
        (Duration::from_secs(59), true),
        (ttl, false),
        (Duration::from_secs(61), false),
        (Duration::from_secs(86_400), false),
    ];
    for (wait, honoured) in cases {
        let fx = Fixture::new();
        let d = fx.dispatcher();
        let args = email_to("bob@example.org");
        let binding = d.binding_for(&alice(), "demo_email_send", &args).unwrap();
        let token = d
            .ledger()
            .issue(&binding, &alice(), fx.clock.now(), ttl)
            .await
            .unwrap();
        fx.clock.advance(wait);
        let out = d
            .call(
                CallRequest::new(alice(), "run-1", "demo_email_send", args)
                    .with_approval_token(&token),
            )
            .await;
        assert_eq!(out.is_error(), !honoured, "after {wait:?}");
        assert_eq!(fx.rows("outbox"), i64::from(honoured), "after {wait:?}");
        if !honoured {
            assert_eq!(error_of(&out).code, ErrorCode::ApprovalDenied);
            assert!(denial_reason(&out).contains("expired"), "after {wait:?}");
        }
    }
}

/// An approver that never answers in time.
struct SilentApprover;

impl Approver for SilentApprover {
    fn decide<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(ApprovalAnswer::Approve)
        })
    }
}

/// An approver whose human answers in free text (a UI, a chat reply), parsed as JSON.
struct TextApprover(&'static str);

impl Approver for TextApprover {
    fn decide<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async move {
            serde_json::from_str::<ApprovalAnswer>(self.0)
                .map_err(|e| ApproverError::Unreadable(e.to_string()))
        })
    }
}

#[tokio::test]
async fn approver_that_times_out_is_a_denial() {
    let fx = Fixture::new();
    let d = fx
        .dispatcher()
        .with_approver(Arc::new(SilentApprover))
        .with_approval_timeout(Duration::from_millis(50));
    let started = Instant::now();
    let out = call(&d, alice(), "demo_email_send", email_to("bob@example.org")).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(error_of(&out).code, ErrorCode::ApprovalDenied);
    let reason = denial_reason(&out);
    assert!(reason.contains("no answer within 50 ms"), "{reason}");
    assert_eq!(fx.rows("outbox"), 0);
    assert_eq!(fx.runs.email_send.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn canceling_while_a_human_is_asked_ends_the_wait_and_sends_nothing() {
    let fx = Fixture::new();
    // The approver would answer "approve" after 30 s; the caller gives up after 30 ms.
    let d = fx.dispatcher().with_approver(Arc::new(SilentApprover));
    let cancel = CancelToken::new();
    let canceler = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        canceler.cancel();
    });
    let request = CallRequest::new(
        alice(),
        "run-1",
        "demo_email_send",
        email_to("bob@example.org"),
    )
    .with_cancel(cancel);
    let out = d.call(request).await;
    // Without the cancellation the approver's late "approve" would have sent the email.
    assert_eq!(error_of(&out).code, ErrorCode::Canceled);
    assert_eq!(out.record.stage, Stage::Approval);
    assert_eq!(fx.rows("outbox"), 0);
    assert_eq!(fx.runs.email_send.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn approver_with_unreadable_answer_is_a_denial() {
    // (what the human's side sent back, approved)
    let cases = [
        ("", false),
        ("yes", false),
        ("Approve", false),
        (r#"{"answer": "maybe"}"#, false),
        (r#"{"answer": "deny"}"#, false),
        (r#"{"answer": "approve""#, false),
        (r#"{"answer": "approve"}"#, true),
    ];
    for (answer, approved) in cases {
        let fx = Fixture::new();
        let d = fx
            .dispatcher()
            .with_approver(Arc::new(TextApprover(answer)));
        let out = call(&d, alice(), "demo_email_send", email_to("bob@example.org")).await;
        assert_eq!(out.is_error(), !approved, "answer {answer:?}");
        assert_eq!(fx.rows("outbox"), i64::from(approved), "answer {answer:?}");
        if !approved {
            assert_eq!(error_of(&out).code, ErrorCode::ApprovalDenied);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Catalogue and authorization
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn tool_outside_catalogue_is_forbidden_even_when_named() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    let reader = alice().with_catalogue(["demo_search"]);
    for (tool, args) in [
        ("demo_note_add", json!({"title": "sneaky"})),
        ("demo_list", json!({"count": 1})),
        ("demo_audit_read", json!({})),
    ] {
        let out = call(&d, reader.clone(), tool, args).await;
        assert_eq!(error_of(&out).code, ErrorCode::Forbidden, "{tool}");
        assert_eq!(out.record.stage, Stage::Catalogue, "{tool}");
    }
    assert_eq!(fx.rows("notes"), 0);
    assert_eq!(fx.runs.note_add.load(Ordering::SeqCst), 0);
    assert_eq!(fx.runs.audit.load(Ordering::SeqCst), 0);
    let allowed = call(&d, reader, "demo_search", json!({"query": "milk"})).await;
    assert!(!allowed.is_error());
}

#[tokio::test]
async fn unauthenticated_caller_is_unauthorized() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    let mut nameless = Principal::local("", &["audit.read"]);
    nameless.catalogue = None;
    for principal in [Principal::anonymous(), nameless] {
        for tool in ["demo_search", "demo_note_add"] {
            let out = call(
                &d,
                principal.clone(),
                tool,
                json!({"query": "x", "title": "x"}),
            )
            .await;
            assert_eq!(error_of(&out).code, ErrorCode::Unauthorized, "{tool}");
            assert_eq!(out.record.stage, Stage::Catalogue);
        }
    }
    assert_eq!(fx.runs.search.load(Ordering::SeqCst), 0);
    assert_eq!(fx.rows("notes"), 0);
}

#[tokio::test]
async fn missing_scope_is_forbidden() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    let bob = Principal::local("bob", &["notes.read"]);
    for tool in ["demo_audit_read", "demo_audit_export"] {
        let denied = call(&d, bob.clone(), tool, json!({})).await;
        let e = error_of(&denied);
        assert_eq!(e.code, ErrorCode::Forbidden, "{tool}");
        assert!(e.message.contains("audit.read"), "{tool}: {}", e.message);
        assert_eq!(denied.record.stage, Stage::Authorize, "{tool}");
        let allowed = call(&d, alice(), tool, json!({})).await;
        assert!(!allowed.is_error(), "{tool}: {:?}", allowed.result);
    }
    assert_eq!(fx.runs.audit.load(Ordering::SeqCst), 1);
}

#[test]
fn scopes_declared_before_policy_are_not_dropped() {
    let fx = Fixture::new();
    for tool in ["demo_audit_read", "demo_audit_export"] {
        let spec = &fx.registry.get(tool).unwrap().spec;
        assert_eq!(spec.policy.scopes, ["audit.read"], "{tool}");
    }
}

// ---------------------------------------------------------------------------------------------
// Idempotency
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn duplicate_write_with_same_key_returns_same_receipt_and_one_effect() {
    struct Attempt {
        run: &'static str,
        key: Option<&'static str>,
        title: &'static str,
    }
    const fn at(run: &'static str, key: Option<&'static str>, title: &'static str) -> Attempt {
        Attempt { run, key, title }
    }
    // (case, two attempts, rows after, second is a duplicate, second's error)
    let cases = [
        (
            "caller-given key, retried from another run",
            [
                at("run-1", Some("k-1"), "milk"),
                at("run-2", Some("k-1"), "milk"),
            ],
            1,
            true,
            None,
        ),
        (
            "derived key: same run, same arguments",
            [at("run-1", None, "milk"), at("run-1", None, "milk")],
            1,
            true,
            None,
        ),
        (
            "derived key: another run is another write",
            [at("run-1", None, "milk"), at("run-2", None, "milk")],
            2,
            false,
            None,
        ),
        (
            "derived key: other arguments are another write",
            [at("run-1", None, "milk"), at("run-1", None, "eggs")],
            2,
            false,
            None,
        ),
        (
            "caller-given key reused for other arguments",
            [
                at("run-1", Some("k-1"), "milk"),
                at("run-1", Some("k-1"), "eggs"),
            ],
            1,
            false,
            Some(ErrorCode::Conflict),
        ),
    ];
    for (name, attempts, rows, duplicate, second_error) in cases {
        let fx = Fixture::new();
        let d = fx.dispatcher();
        let mut outcomes = Vec::new();
        for a in &attempts {
            let mut request =
                CallRequest::new(alice(), "run-1", "demo_note_add", json!({"title": a.title}))
                    .with_run(a.run);
            if let Some(key) = a.key {
                request = request.with_idempotency_key(key);
            }
            outcomes.push(d.call(request).await);
        }
        let [first, second] = &outcomes[..] else {
            unreachable!()
        };
        assert!(!first.record.duplicate, "{name}");
        assert_eq!(fx.rows("notes"), rows, "{name}");
        match second_error {
            Some(code) => assert_eq!(error_of(second).code, code, "{name}"),
            None => {
                assert_eq!(second.record.duplicate, duplicate, "{name}");
                let same_receipt = content_of(first) == content_of(second)
                    && first.record.idempotency_key == second.record.idempotency_key;
                assert_eq!(same_receipt, duplicate, "{name}");
            }
        }
        assert_eq!(fx.rows("tool_receipts"), rows, "{name}");
    }
}

#[derive(Debug, Clone, Copy)]
enum Racers {
    /// Tokio tasks on one multi-thread runtime.
    TokioTasks,
    /// OS threads, each with its own runtime, sharing the dispatcher.
    Threads,
}

fn race(racers: Racers, key: Option<&'static str>) -> (Fixture, Vec<CallOutcome>) {
    const RACERS: usize = 16;
    let fx = Fixture::new();
    let d = Arc::new(fx.dispatcher());
    let request = move || {
        let request = CallRequest::new(alice(), "run-1", "demo_note_add", json!({"title": "once"}))
            .with_run("run-r");
        match key {
            Some(key) => request.with_idempotency_key(key),
            None => request,
        }
    };
    let outcomes = match racers {
        Racers::TokioTasks => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(4)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let start = Arc::new(tokio::sync::Barrier::new(RACERS));
                let tasks: Vec<_> = (0..RACERS)
                    .map(|_| {
                        let d = Arc::clone(&d);
                        let start = Arc::clone(&start);
                        tokio::spawn(async move {
                            start.wait().await;
                            d.call(request()).await
                        })
                    })
                    .collect();
                let mut outcomes = Vec::new();
                for task in tasks {
                    outcomes.push(task.await.unwrap());
                }
                outcomes
            })
        }
        Racers::Threads => {
            let start = Arc::new(std::sync::Barrier::new(RACERS));
            let threads: Vec<_> = (0..RACERS)
                .map(|_| {
                    let d = Arc::clone(&d);
                    let start = Arc::clone(&start);
                    std::thread::spawn(move || {
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .unwrap();
                        start.wait();
                        rt.block_on(d.call(request()))
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        }
    };
    (fx, outcomes)
}

#[test]
fn sixteen_racing_duplicates_leave_one_effect() {
    for racers in [Racers::TokioTasks, Racers::Threads] {
        for key in [Some("client-key-7"), None] {
            let label = format!("{racers:?} key={key:?}");
            let (fx, outcomes) = race(racers, key);
            assert_eq!(outcomes.len(), 16, "{label}");
            let first = content_of(&outcomes[0]).clone();
            for out in &outcomes {
                assert_eq!(
                    content_of(out),
                    &first,
                    "{label}: every receipt is the same"
                );
                assert_eq!(
                    out.record.idempotency_key, outcomes[0].record.idempotency_key,
                    "{label}"
                );
            }
            let performed = outcomes.iter().filter(|o| !o.record.duplicate).count();
            assert_eq!(performed, 1, "{label}: exactly one call did the write");
            assert_eq!(fx.rows("notes"), 1, "{label}");
            assert_eq!(fx.rows("tool_receipts"), 1, "{label}");
            assert_eq!(fx.tool_call_events().len(), 16, "{label}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Execution: deadlines, cancellation, failures
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn handler_overrunning_its_deadline_is_deadline_exceeded() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    let started = Instant::now();
    let out = call(&d, alice(), "demo_slow", json!({"millis": 10_000})).await;
    let waited = started.elapsed();
    let e = error_of(&out);
    assert_eq!(e.code, ErrorCode::DeadlineExceeded);
    assert!(e.retryable());
    assert_eq!(out.model_value()["error"]["retryable"], true);
    assert_eq!(out.record.stage, Stage::Execute);
    assert!(waited >= SLOW_TOOL_DEADLINE, "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    // Within the deadline the same tool answers.
    let fast = call(&d, alice(), "demo_slow", json!({"millis": 1})).await;
    assert_eq!(content_of(&fast)["waited_ms"], 1);
}

#[tokio::test]
async fn cancel_token_cancels_the_call() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    let cancel = CancelToken::new();
    let canceler = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        canceler.cancel();
    });
    let started = Instant::now();
    let request = CallRequest::new(alice(), "run-1", "demo_patient", json!({"millis": 60_000}))
        .with_cancel(cancel);
    let out = d.call(request).await;
    assert!(
        started.elapsed() < PATIENT_TOOL_DEADLINE / 2,
        "{:?}",
        started.elapsed()
    );
    let e = error_of(&out);
    assert_eq!(e.code, ErrorCode::Canceled);
    assert!(!e.retryable());
    assert_eq!(out.record.stage, Stage::Execute);
}

#[tokio::test]
async fn call_canceled_before_it_starts_never_reaches_the_handler() {
    // Repeated because which ready branch wins a race is the kind of thing that is random.
    for attempt in 0..20 {
        let fx = Fixture::new();
        let d = fx.dispatcher();
        let cancel = CancelToken::new();
        cancel.cancel();
        let request = CallRequest::new(alice(), "run-1", "demo_note_add", json!({"title": "late"}))
            .with_cancel(cancel);
        let out = d.call(request).await;
        assert_eq!(
            error_of(&out).code,
            ErrorCode::Canceled,
            "attempt {attempt}"
        );
        // Give a write that escaped time to land.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            fx.runs.note_add.load(Ordering::SeqCst),
            0,
            "attempt {attempt}"
        );
        assert_eq!(fx.rows("notes"), 0, "attempt {attempt}");
    }
}

#[tokio::test]
async fn errors_reach_the_model_as_results_not_panics() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    for tool in ["demo_broken", "demo_panics"] {
        let out = call(&d, alice(), tool, json!({})).await;
        assert!(out.is_error(), "{tool}");
        let e = error_of(&out);
        assert_eq!(e.code, ErrorCode::Internal, "{tool}");
        assert!(!e.retryable());
        assert_eq!(out.record.stage, Stage::Execute, "{tool}");
        let model = out.model_value();
        assert_eq!(model["error"]["code"], "internal", "{tool}");
        assert_eq!(model["error"]["retryable"], false, "{tool}");
        let text = out.model_text();
        for leak in ["panicked", "index out of bounds", "src/", ".rs:"] {
            assert!(!text.contains(leak), "{tool} leaked {leak}: {text}");
        }
    }
    // The dispatcher still serves calls afterwards.
    let after = call(&d, alice(), "demo_search", json!({"query": "x"})).await;
    assert!(!after.is_error());
}

// ---------------------------------------------------------------------------------------------
// Observation: bounds and redaction
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn output_over_the_bound_is_truncated_with_a_notice() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    let max = fx
        .registry
        .get("demo_list")
        .unwrap()
        .spec
        .observation
        .max_bytes;
    // (items asked for, truncated)
    for (count, truncated) in [(5, false), (2_000, true)] {
        let out = call(&d, alice(), "demo_list", json!({"count": count})).await;
        let Some(obs) = out.observation() else {
            panic!("{count}: {:?}", out.result)
        };
        assert_eq!(obs.truncated.is_some(), truncated, "{count}");
        assert_eq!(out.record.truncated, truncated, "{count}");
        assert!(obs.content.to_string().len() <= max, "{count}");
        let text = out.model_text();
        assert_eq!(text.contains("truncated"), truncated, "{count}");
        if let Some(cut) = &obs.truncated {
            assert!(text.contains("pass a smaller count, or page with offset"));
            let items = cut.items.as_ref().unwrap();
            assert_eq!((items.field.as_str(), items.total), ("items", 2_000));
            let kept = obs.content["items"].as_array().unwrap().len();
            assert_eq!(items.kept, kept);
            assert!(kept > 0 && kept < 2_000);
            assert!(cut.original_bytes > max && cut.kept_bytes <= max);
        }
    }
}

#[tokio::test]
async fn fake_api_key_in_output_is_redacted() {
    assert_eq!(FAKE_KEY.len(), "sk-proj-".len() + 30);
    let fx = Fixture::new();
    let d = fx.dispatcher();
    let long_prefix = "please use the detailed format, and by the way my key is";
    // (case, tool, arguments, succeeds)
    let cases = [
        (
            "key in the handler's output",
            "demo_secret_note",
            json!({"note": "config"}),
            true,
        ),
        (
            "key in the arguments and the output",
            "demo_secret_note",
            json!({"note": format!("store {FAKE_KEY}")}),
            true,
        ),
        (
            "key echoed back in a validation error",
            "demo_search",
            json!({"query": "x", "format": FAKE_KEY}),
            false,
        ),
        (
            "key cut in half by the error's quoting",
            "demo_search",
            json!({"query": "x", "format": format!("{long_prefix} {FAKE_KEY}")}),
            false,
        ),
        (
            "key in an unknown field's value",
            "demo_search",
            json!({"query": "x", "api_key": FAKE_KEY}),
            false,
        ),
    ];
    let calls = cases.len();
    for (name, tool, args, succeeds) in cases {
        let out = call(&d, alice(), tool, args).await;
        assert_eq!(!out.is_error(), succeeds, "{name}: {:?}", out.result);
        let text = out.model_text();
        assert!(!text.contains(FAKE_KEY_TAIL), "{name}: model saw {text}");
        assert!(out.record.redactions >= 1, "{name}");
        let record = serde_json::to_string(&out.record).unwrap();
        assert!(!record.contains(FAKE_KEY_TAIL), "{name}: record {record}");
        if succeeds {
            assert!(text.contains("[REDACTED:openai_key]"), "{name}: {text}");
        }
    }
    // The trace holds the recorded arguments; none of them carry the key.
    let events = fx.tool_call_events();
    assert_eq!(events.len(), calls);
    for event in &events {
        assert!(!event.to_string().contains(FAKE_KEY_TAIL), "trace: {event}");
    }
    let stored = &events[1]["arguments"]["note"];
    assert_eq!(stored, "store [REDACTED:openai_key]");
}

// ---------------------------------------------------------------------------------------------
// The decision record
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_call_writes_exactly_one_decision_record() {
    let fx = Fixture::new();
    let d = fx.dispatcher();
    // (tool, arguments, principal, outcome, stage)
    let cases = [
        (
            "demo_search",
            json!({"query": "milk"}),
            alice(),
            "ok",
            Stage::Done,
        ),
        (
            "demo_serch",
            json!({"query": "milk"}),
            alice(),
            "not_found",
            Stage::Resolve,
        ),
        (
            "demo_search",
            json!({"query": "milk"}),
            Principal::anonymous(),
            "unauthorized",
            Stage::Catalogue,
        ),
        (
            "demo_list",
            json!({"count": 1}),
            alice().with_catalogue(["demo_search"]),
            "forbidden",
            Stage::Catalogue,
        ),
        (
            "demo_search",
            json!({"qry": "milk"}),
            alice(),
            "invalid_argument",
            Stage::Validate,
        ),
        (
            "demo_audit_read",
            json!({}),
            Principal::local("bob", &[]),
            "forbidden",
            Stage::Authorize,
        ),
        (
            "demo_email_send",
            email_to("bob@example.org"),
            alice(),
            "approval_denied",
            Stage::Approval,
        ),
        (
            "demo_slow",
            json!({"millis": 5_000}),
            alice(),
            "deadline_exceeded",
            Stage::Execute,
        ),
        (
            "demo_broken",
            json!({}),
            alice(),
            "internal",
            Stage::Execute,
        ),
        (
            "demo_note_add",
            json!({"title": "milk"}),
            alice(),
            "ok",
            Stage::Done,
        ),
        (
            "demo_note_add",
            json!({"title": "milk"}),
            alice(),
            "ok",
            Stage::Done,
        ),
    ];
    for (i, (tool, args, principal, outcome, stage)) in cases.iter().enumerate() {
        let call_id = format!("toolu_{i:02}");
        let request =
            CallRequest::new(principal.clone(), "run-1", tool, args.clone()).with_call_id(&call_id);
        let out = d.call(request).await;
        assert_eq!(out.record.outcome.as_str(), *outcome, "{tool} #{i}");
        assert_eq!(out.record.stage, *stage, "{tool} #{i}");
        let events = fx.tool_call_events();
        assert_eq!(events.len(), i + 1, "{tool} #{i}: one record per call");
        let event = &events[i];
        assert_eq!(event["gen_ai.tool.name"], *tool);
        assert_eq!(event["gen_ai.tool.call.id"], call_id.as_str());
        assert_eq!(event["gen_ai.operation.name"], "execute_tool");
        assert_eq!(event["outcome"], *outcome);
        assert_eq!(event["stage"], serde_json::to_value(stage).unwrap());
        assert_eq!(event["principal"], principal.id.as_str());
        assert_eq!(event["result_bytes"], out.model_text().len());
        if *outcome == "ok" {
            assert!(event.get("error.type").is_none());
        } else {
            assert_eq!(event["error.type"], *outcome);
        }
    }
    let events = fx.tool_call_events();
    assert_eq!(events[9]["duplicate"], false);
    assert_eq!(events[10]["duplicate"], true);
    assert_eq!(events[9]["idempotency_key"], events[10]["idempotency_key"]);
    assert_eq!(
        fx.trace.events().len(),
        cases.len(),
        "no other event kinds were emitted"
    );
    assert_eq!(fx.rows("notes"), 1);
}
