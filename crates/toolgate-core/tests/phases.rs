//! Phases through the dispatcher: a write stays out of the run's catalogue and is refused by
//! name until the person approves a plan naming exactly that call; the plan opens that one call
//! once, in that run, for that principal, before it expires, whether the model calls directly,
//! a script calls through its handler, or a host answers by ticket. Real SQLite writes; each
//! test is named after what it prevents.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::approval::{ApprovalAnswer, ApprovalRequest, Approver, ApproverError};
use toolgate_core::idempotency::{
    self, IdempotencyKey, Receipt, ReceiptLog, WriteEffect, run_once_on,
};
use toolgate_core::phase_gate::{PLAN_TOOL, PhaseConfig, PhaseGate};
use toolgate_core::plan_tool::plan_propose_tool;
use toolgate_core::sql_params;
use toolgate_core::tool::BoxFuture;
use toolgate_core::tool_search::tool_search_tool;
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{
    ApprovalChannel, ApprovalRecord, ApprovedVia, CallOutcome, CallRequest, CallResult, Dispatcher,
    Effect, ErrorCode, ManualClock, Origin, Principal, Registry, Risk, Stage, TicketAnswer, Tool,
    ToolBuilder, ToolError, ToolOutput,
};

const NOW_UNIX: u64 = 20_786 * 86_400 + 9 * 3_600;
const PLAN_TTL_SECS: u64 = 300;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoteArgs {
    #[schemars(length(min = 1, max = 100))]
    title: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    #[allow(dead_code)]
    query: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScriptArgs {
    /// Propose the write before making it.
    propose: bool,
    title: String,
}

fn open_db(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn
}

fn notes_in(path: &Path) -> Vec<String> {
    let conn = open_db(path);
    let mut stmt = conn.prepare("SELECT title FROM notes ORDER BY id").unwrap();
    stmt.query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The write's receipts, readable by the dispatcher: a retry of a done write replays.
struct Receipts(PathBuf);

impl ReceiptLog for Receipts {
    fn recorded(&self, key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError> {
        idempotency::recorded(&open_db(&self.0), key)
    }
}

fn note_add_tool(db: PathBuf, ran: Arc<AtomicUsize>) -> Tool {
    ToolBuilder::<NoteArgs>::new("demo_note_add", 1)
        .describe(
            "Adds a note.",
            "the user asks to remember something.",
            None,
            "the new note's id.",
        )
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It adds a note the user can delete.",
        )
        .approval_preview(|args: &NoteArgs| Ok(json!({"will_add_note_titled": args.title})))
        .receipts(Receipts(db.clone()))
        .write(move |ctx, args: NoteArgs| {
            ran.fetch_add(1, Ordering::SeqCst);
            let db = db.clone();
            async move {
                let key = ctx.write_key()?.clone();
                let now = ctx.now_unix;
                tokio::task::spawn_blocking(move || {
                    let mut conn = open_db(&db);
                    run_once_on(&mut conn, &key, now, |tx| {
                        let id = tx.query_i64(
                            "INSERT INTO notes (title) VALUES (?1) RETURNING id",
                            sql_params![&args.title],
                        )?;
                        Ok(WriteEffect {
                            result: json!({"note_id": id}),
                            undo: None,
                        })
                    })
                })
                .await
                .map_err(|e| ToolError::internal(e.to_string()))?
            }
        })
        .unwrap()
}

fn search_tool() -> Tool {
    ToolBuilder::<SearchArgs>::new("demo_search", 1)
        .describe("Searches notes.", "you need notes.", None, "titles.")
        .policy(Risk::Low, Effect::Read, "It only reads notes.")
        .read(|_ctx, _args: SearchArgs| async move { Ok(ToolOutput::new(json!({"hits": []}))) })
        .unwrap()
}

/// A script, as code mode's calls go: optionally proposes the write, then makes it.
fn script_tool() -> Tool {
    ToolBuilder::<ScriptArgs>::new("demo_script", 1)
        .describe("Runs a script.", "always.", None, "each call's outcome.")
        .policy(Risk::Low, Effect::Read, "Each call it makes is checked.")
        .read(|ctx, args: ScriptArgs| async move {
            let note = json!({"title": args.title});
            let mut outcomes = Vec::new();
            if args.propose {
                let plan = json!({"tool": "demo_note_add", "arguments": note});
                let out = ctx.tools.call(Origin::Sandbox, PLAN_TOOL, plan).await;
                outcomes.push(out.record.outcome.as_str());
            }
            let out = ctx
                .tools
                .call(Origin::Sandbox, "demo_note_add", note.clone())
                .await;
            outcomes.push(out.record.outcome.as_str());
            Ok(ToolOutput::new(json!({ "outcomes": outcomes })))
        })
        .unwrap()
}

/// Answers every request with `yes` and keeps what it was shown.
#[derive(Default)]
struct Person {
    yes: bool,
    seen: Mutex<Vec<ApprovalRequest>>,
}

impl Person {
    fn saying(yes: bool) -> Arc<Self> {
        Arc::new(Person {
            yes,
            seen: Mutex::default(),
        })
    }

    fn asked(&self) -> Vec<ApprovalRequest> {
        self.seen.lock().unwrap().clone()
    }
}

impl Approver for Person {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        self.seen.lock().unwrap().push(request.clone());
        let answer = if self.yes {
            ApprovalAnswer::Approve
        } else {
            ApprovalAnswer::Deny {
                reason: "not now".into(),
            }
        };
        Box::pin(async move { Ok(answer) })
    }
}

struct Fixture {
    dispatcher: Dispatcher,
    clock: Arc<ManualClock>,
    trace: Arc<MemoryTrace>,
    db: PathBuf,
    ran: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.sqlite");
    let conn = open_db(&db);
    conn.execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL);")
        .unwrap();
    idempotency::install(&conn).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(PhaseGate::new(PhaseConfig {
        gate_writes: true,
        plan_ttl_secs: Some(PLAN_TTL_SECS),
        ungated: Vec::new(),
    }));
    let mut tools = vec![
        note_add_tool(db.clone(), Arc::clone(&ran)),
        search_tool(),
        script_tool(),
    ];
    let plan = plan_propose_tool(Arc::clone(&gate), tools.iter().map(|t| &t.spec)).unwrap();
    tools.push(plan);
    let search = {
        let specs: Vec<_> = tools.iter().map(|t| t.spec.clone()).collect();
        tool_search_tool(specs.iter()).unwrap()
    };
    let registry = Registry::new(tools.into_iter().chain([search])).unwrap();
    let clock = Arc::new(ManualClock::at_unix(NOW_UNIX));
    let trace = Arc::new(MemoryTrace::default());
    let dispatcher = Dispatcher::new(Arc::new(registry))
        .unwrap()
        .with_clock(clock.clone())
        .with_trace(trace.clone())
        .with_phases(gate);
    Fixture {
        dispatcher,
        clock,
        trace,
        db,
        ran,
        _dir: dir,
    }
}

fn alice() -> Principal {
    Principal::local("alice", &[])
}

fn note(title: &str) -> Value {
    json!({"title": title})
}

fn plan(title: &str) -> Value {
    json!({"tool": "demo_note_add", "arguments": note(title)})
}

impl Fixture {
    async fn call(
        &self,
        who: &Principal,
        run: &str,
        tool: &str,
        args: Value,
        person: &Arc<Person>,
    ) -> CallOutcome {
        let request = CallRequest::new(who.clone(), run, tool, args)
            .with_approval(ApprovalChannel::Ask(person.clone()));
        self.dispatcher.call(request).await
    }

    fn catalogue(&self, who: &Principal, run: &str) -> Vec<String> {
        self.dispatcher
            .run_catalogue(who, run)
            .into_iter()
            .map(|s| s.name.clone())
            .collect()
    }
}

fn refused_code(outcome: &CallOutcome) -> Option<ErrorCode> {
    match &outcome.result {
        CallResult::Failed(error) => Some(error.code),
        CallResult::Done(_) | CallResult::ApprovalRequired(_) => None,
    }
}

#[tokio::test]
async fn a_write_named_from_an_old_transcript_is_refused_until_a_plan_is_approved() {
    let f = fixture();
    let person = Person::saying(true);
    assert_eq!(
        f.catalogue(&alice(), "run-1"),
        ["demo_script", "demo_search", PLAN_TOOL, "tool_search"],
        "the write is not listed"
    );
    let out = f
        .call(
            &alice(),
            "run-1",
            "demo_note_add",
            note("Buy milk"),
            &person,
        )
        .await;
    assert_eq!(refused_code(&out), Some(ErrorCode::Forbidden));
    assert_eq!(out.record.stage, Stage::Catalogue);
    let error = out.result.model_text(out.error_style);
    assert!(
        error.contains(PLAN_TOOL),
        "the refusal says what opens it: {error}"
    );
    assert_eq!(f.ran.load(Ordering::SeqCst), 0, "the handler never ran");
    assert!(person.asked().is_empty(), "nobody was asked");
    assert!(notes_in(&f.db).is_empty());
}

#[tokio::test]
async fn an_approved_plan_opens_exactly_that_call_once_without_asking_twice() {
    let f = fixture();
    let person = Person::saying(true);
    let proposed = f
        .call(&alice(), "run-1", PLAN_TOOL, plan("Buy milk"), &person)
        .await;
    assert!(proposed.observation().is_some(), "{:?}", proposed.result);
    let asked = person.asked();
    assert_eq!(asked.len(), 1);
    let shown = asked[0].preview.clone().unwrap();
    assert_eq!(shown["plan"]["tool"], "demo_note_add");
    assert_eq!(shown["plan"]["arguments"], note("Buy milk"));
    assert_eq!(
        shown["plan"]["preview"],
        json!({"will_add_note_titled": "Buy milk"}),
        "the person sees the write's own preview"
    );
    assert!(
        f.catalogue(&alice(), "run-1")
            .contains(&"demo_note_add".to_string())
    );

    let other = f
        .call(
            &alice(),
            "run-1",
            "demo_note_add",
            note("Buy beer"),
            &person,
        )
        .await;
    assert_eq!(
        refused_code(&other),
        Some(ErrorCode::Forbidden),
        "other arguments"
    );

    let made = f
        .call(
            &alice(),
            "run-1",
            "demo_note_add",
            note("Buy milk"),
            &person,
        )
        .await;
    assert!(made.observation().is_some(), "{:?}", made.result);
    assert_eq!(
        made.record.approval,
        ApprovalRecord::Approved {
            via: ApprovedVia::Plan
        }
    );
    assert_eq!(person.asked().len(), 1, "the plan was the approval");
    assert!(
        !f.catalogue(&alice(), "run-1")
            .contains(&"demo_note_add".to_string()),
        "a used plan closes the tool again"
    );

    // The same call again replays its receipt: nothing happens twice, nobody is asked.
    let again = f
        .call(
            &alice(),
            "run-1",
            "demo_note_add",
            note("Buy milk"),
            &person,
        )
        .await;
    assert!(again.observation().is_some(), "{:?}", again.result);
    assert_eq!(f.ran.load(Ordering::SeqCst), 1);
    // Another write needs its own plan.
    let next = f
        .call(
            &alice(),
            "run-1",
            "demo_note_add",
            note("Buy eggs"),
            &person,
        )
        .await;
    assert_eq!(refused_code(&next), Some(ErrorCode::Forbidden));
    assert_eq!(notes_in(&f.db), ["Buy milk"]);
}

#[tokio::test]
async fn a_plan_opens_nothing_for_another_run_or_another_principal() {
    let f = fixture();
    let person = Person::saying(true);
    let bob = Principal::local("bob", &[]);
    f.call(&alice(), "run-1", PLAN_TOOL, plan("Buy milk"), &person)
        .await;
    for (who, run) in [(&alice(), "run-2"), (&bob, "run-1")] {
        assert!(!f.catalogue(who, run).contains(&"demo_note_add".to_string()));
        let out = f
            .call(who, run, "demo_note_add", note("Buy milk"), &person)
            .await;
        assert_eq!(
            refused_code(&out),
            Some(ErrorCode::Forbidden),
            "{} {run}",
            who.id
        );
    }
    assert!(notes_in(&f.db).is_empty());
}

#[tokio::test]
async fn an_expired_plan_is_refused() {
    let f = fixture();
    let person = Person::saying(true);
    f.call(&alice(), "run-1", PLAN_TOOL, plan("Buy milk"), &person)
        .await;
    f.clock.advance(Duration::from_secs(PLAN_TTL_SECS));
    assert!(
        !f.catalogue(&alice(), "run-1")
            .contains(&"demo_note_add".to_string())
    );
    let out = f
        .call(
            &alice(),
            "run-1",
            "demo_note_add",
            note("Buy milk"),
            &person,
        )
        .await;
    assert_eq!(refused_code(&out), Some(ErrorCode::Forbidden));
    assert!(
        out.result.model_text(out.error_style).contains("expired"),
        "{:?}",
        out.result
    );
    assert!(notes_in(&f.db).is_empty());
}

#[tokio::test]
async fn a_declined_plan_opens_nothing() {
    let f = fixture();
    let no = Person::saying(false);
    let out = f
        .call(&alice(), "run-1", PLAN_TOOL, plan("Buy milk"), &no)
        .await;
    assert_eq!(refused_code(&out), Some(ErrorCode::ApprovalDenied));
    assert!(
        !f.catalogue(&alice(), "run-1")
            .contains(&"demo_note_add".to_string())
    );
    let yes = Person::saying(true);
    let out = f
        .call(&alice(), "run-1", "demo_note_add", note("Buy milk"), &yes)
        .await;
    assert_eq!(refused_code(&out), Some(ErrorCode::Forbidden));
    assert!(yes.asked().is_empty());
}

#[tokio::test]
async fn a_plan_nobody_could_run_is_refused_before_anyone_is_asked() {
    let f = fixture();
    let person = Person::saying(true);
    let cases = [
        (
            "arguments the write's schema refuses",
            json!({"tool": "demo_note_add", "arguments": {"title": ""}}),
            ErrorCode::InvalidArgument,
        ),
        (
            "a read needs no plan",
            json!({"tool": "demo_search", "arguments": {"query": "milk"}}),
            ErrorCode::InvalidArgument,
        ),
        (
            "a tool that does not exist",
            json!({"tool": "demo_note_delete", "arguments": {}}),
            ErrorCode::InvalidArgument,
        ),
    ];
    for (what, args, code) in cases {
        let out = f.call(&alice(), "run-1", PLAN_TOOL, args, &person).await;
        assert_eq!(refused_code(&out), Some(code), "{what}");
        assert_eq!(out.record.stage, Stage::Validate, "{what}");
    }
    assert!(person.asked().is_empty());
    let scoped = Principal::local("carol", &[]);
    let mut only_reads = scoped.clone();
    only_reads.catalogue = Some(Arc::new(
        ["demo_search", PLAN_TOOL]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    ));
    let out = f
        .call(&only_reads, "run-1", PLAN_TOOL, plan("Buy milk"), &person)
        .await;
    assert_eq!(
        refused_code(&out),
        Some(ErrorCode::Forbidden),
        "a plan cannot reach outside the caller's catalogue"
    );
    assert!(person.asked().is_empty());
}

#[tokio::test]
async fn a_script_cannot_write_without_a_plan() {
    let f = fixture();
    let person = Person::saying(true);
    let out = f
        .call(
            &alice(),
            "run-1",
            "demo_script",
            json!({"propose": false, "title": "Buy milk"}),
            &person,
        )
        .await;
    assert_eq!(
        out.observation().unwrap().content["outcomes"],
        json!(["forbidden"]),
    );
    assert!(notes_in(&f.db).is_empty());
    let out = f
        .call(
            &alice(),
            "run-1",
            "demo_script",
            json!({"propose": true, "title": "Buy milk"}),
            &person,
        )
        .await;
    assert_eq!(
        out.observation().unwrap().content["outcomes"],
        json!(["ok", "ok"]),
        "the script's own plan, approved by the person, opens its write"
    );
    assert_eq!(person.asked().len(), 1);
    assert_eq!(notes_in(&f.db), ["Buy milk"]);
}

#[tokio::test]
async fn a_plan_approved_by_ticket_opens_the_call() {
    let f = fixture();
    let ask = |answer: Option<TicketAnswer>| {
        let mut request = CallRequest::new(alice(), "run-1", PLAN_TOOL, plan("Buy milk"))
            .with_approval(ApprovalChannel::Ticket);
        request.ticket_answer = answer;
        f.dispatcher.call(request)
    };
    let pending = ask(None).await;
    let CallResult::ApprovalRequired(ticket) = &pending.result else {
        panic!("expected a ticket: {:?}", pending.result);
    };
    assert_eq!(
        ticket.request.preview.as_ref().unwrap()["plan"]["tool"],
        "demo_note_add"
    );
    let token = ticket.token.clone();
    let answered = ask(Some(TicketAnswer {
        token,
        approved: true,
    }))
    .await;
    assert!(answered.observation().is_some(), "{:?}", answered.result);
    let made = f
        .dispatcher
        .call(
            CallRequest::new(alice(), "run-1", "demo_note_add", note("Buy milk"))
                .with_approval(ApprovalChannel::Ticket),
        )
        .await;
    assert!(made.observation().is_some(), "{:?}", made.result);
    assert_eq!(notes_in(&f.db), ["Buy milk"]);
}

#[tokio::test]
async fn a_search_never_offers_a_closed_tool() {
    let f = fixture();
    let person = Person::saying(true);
    let found = |out: &CallOutcome| -> Vec<String> {
        out.observation().unwrap().content["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let search = json!({"query": "adds a note"});
    let before = f
        .call(&alice(), "run-1", "tool_search", search.clone(), &person)
        .await;
    assert!(
        !found(&before).contains(&"demo_note_add".to_string()),
        "{:?}",
        found(&before)
    );
    f.call(&alice(), "run-1", PLAN_TOOL, plan("Buy milk"), &person)
        .await;
    let after = f
        .call(&alice(), "run-1", "tool_search", search, &person)
        .await;
    assert!(
        found(&after).contains(&"demo_note_add".to_string()),
        "{:?}",
        found(&after)
    );
    // Every call above left one decision record.
    assert_eq!(f.trace.records::<toolgate_core::DecisionRecord>().len(), 3);
}
