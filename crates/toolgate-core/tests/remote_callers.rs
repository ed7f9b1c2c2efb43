//! What the core guarantees to remote callers (an MCP server for many users, imported tools,
//! code calling tools back): per-caller effect identity, remote effects under claims, approval
//! tickets that survive the process that issued them, and nested calls that keep their own
//! policy. Real SQLite files, a real tokio runtime, and real child processes where a guarantee
//! is about another process. Each test is named after what it prevents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_core::approval::ApprovalLedger;
use toolgate_core::idempotency::{
    self, Claimed, IdempotencyKey, Receipt, ReceiptLog, WriteEffect, run_once_on,
};
use toolgate_core::sql_params;
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{
    ApprovalAnswer, ApprovalChannel, ApprovalRecord, ApprovalRequest, ApprovedVia, Approver,
    ApproverError, CallOutcome, CallRequest, Clock, DecisionRecord, Denial, Dispatcher, Effect,
    ErrorCode, ManualClock, Origin, Principal, Registry, Risk, Tool, ToolBuilder, ToolError,
    ToolOutput,
};

/// 2026-11-29 09:00 UTC.
const NOW_UNIX: u64 = 20_786 * 86_400 + 9 * 3_600;
/// Set in a child process: which part it plays.
const CHILD_ROLE: &str = "TOOLGATE_TEST_CHILD_ROLE";
const CHILD_DIR: &str = "TOOLGATE_TEST_CHILD_DIR";
const CHILD_TOKEN: &str = "TOOLGATE_TEST_CHILD_TOKEN";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoteArgs {
    #[schemars(length(min = 1, max = 100))]
    title: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    #[schemars(length(min = 1, max = 100))]
    to: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct OuterArgs {
    #[schemars(length(min = 1, max = 100))]
    to: String,
}

fn open_db(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS sent (id INTEGER PRIMARY KEY, recipient TEXT NOT NULL);",
    )
    .unwrap();
    idempotency::install(&conn).unwrap();
    conn
}

fn count(db: &Path, table: &str) -> i64 {
    open_db(db)
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

struct Receipts(PathBuf);

impl ReceiptLog for Receipts {
    fn recorded(&self, key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError> {
        idempotency::recorded(&open_db(&self.0), key)
    }
}

/// A medium-risk local write: one row per effect.
fn note_tool(db: PathBuf) -> Tool {
    ToolBuilder::<NoteArgs>::new("demo_note_add", 1)
        .describe(
            "Adds a note.",
            "the user asks to remember something.",
            Some("to send something use demo_send"),
            "the note id.",
        )
        .example("add", json!({"title": "Buy milk"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It adds a note the user can delete.",
        )
        .receipts(Receipts(db.clone()))
        .write(move |ctx, args: NoteArgs| {
            let db = db.clone();
            async move {
                let key = ctx.write_key()?.clone();
                let principal = ctx.principal.id.clone();
                tokio::task::spawn_blocking(move || {
                    run_once_on(&mut open_db(&db), &key, ctx.now_unix, |tx| {
                        let id = tx.query_i64(
                            "INSERT INTO notes (title) VALUES (?1) RETURNING id",
                            sql_params![&args.title],
                        )?;
                        Ok(WriteEffect {
                            result: json!({"note_id": id, "by": principal}),
                            undo: None,
                        })
                    })
                })
                .await
                .map_err(|_| ToolError::internal("task failed"))?
            }
        })
        .unwrap()
}

/// How the demo's remote effect behaves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Remote {
    Delivers,
    /// Refused before anything left (the relay said no at once).
    RefusedBeforeStart,
    /// Hangs after the claim, as a process does that is killed mid-send.
    Hangs,
}

/// A high-risk send whose effect happens outside the database, under a claim.
fn send_tool(db: PathBuf, remote: Remote, attempts: Arc<AtomicUsize>) -> Tool {
    ToolBuilder::<SendArgs>::new("demo_send", 1)
        .describe(
            "Sends a message to someone.",
            "the user asked to send a message.",
            Some("to keep a note use demo_note_add"),
            "the send id.",
        )
        .example("send", json!({"to": "bob@example.org"}))
        .policy(
            Risk::High,
            Effect::Irreversible,
            "A sent message cannot be taken back.",
        )
        .receipts(Receipts(db.clone()))
        .write(move |ctx, args: SendArgs| {
            let db = db.clone();
            let attempts = Arc::clone(&attempts);
            async move {
                let key = ctx.write_key()?.clone();
                let now = ctx.now_unix;
                let claim_db = db.clone();
                let claimed = tokio::task::spawn_blocking(move || {
                    idempotency::claim_on(
                        &mut open_db(&claim_db),
                        &key,
                        now,
                        "the demo outbox",
                        |_| Ok(()),
                    )
                })
                .await
                .map_err(|_| ToolError::internal("task failed"))??;
                let claim = match claimed {
                    Claimed::Recorded(receipt) => return Ok(receipt),
                    Claimed::New(claim, ()) => claim,
                };
                attempts.fetch_add(1, Ordering::SeqCst);
                match remote {
                    Remote::Hangs => {
                        println!("claimed");
                        std::future::pending::<()>().await;
                        Err(ToolError::internal("unreachable"))
                    }
                    Remote::RefusedBeforeStart => {
                        tokio::task::spawn_blocking(move || {
                            idempotency::release_on(&mut open_db(&db), claim, |_| Ok(()))
                        })
                        .await
                        .map_err(|_| ToolError::internal("task failed"))??;
                        Err(ToolError::new(
                            ErrorCode::TransientDependency,
                            "the relay refused the connection; nothing was sent",
                        ))
                    }
                    Remote::Delivers => tokio::task::spawn_blocking(move || {
                        idempotency::settle_on(&mut open_db(&db), claim, now, |tx| {
                            let id = tx.query_i64(
                                "INSERT INTO sent (recipient) VALUES (?1) RETURNING id",
                                sql_params![&args.to],
                            )?;
                            Ok(WriteEffect {
                                result: json!({"sent_id": id}),
                                undo: None,
                            })
                        })
                    })
                    .await
                    .map_err(|_| ToolError::internal("task failed"))?,
                }
            }
        })
        .unwrap()
}

/// A low-risk tool with a short deadline whose handler sends through a nested call.
fn outer_tool() -> Tool {
    ToolBuilder::<OuterArgs>::new("demo_outer", 1)
        .describe(
            "Runs a small program that sends a message.",
            "the user asked for the program.",
            Some("to send directly use demo_send"),
            "what the nested send returned.",
        )
        .example("run", json!({"to": "bob@example.org"}))
        .policy(
            Risk::Low,
            Effect::Read,
            "It only calls other tools, which keep their own policy.",
        )
        .deadline(Duration::from_millis(300))
        .read(|ctx, args: OuterArgs| async move {
            let nested = ctx
                .tools
                .call(Origin::Sandbox, "demo_send", json!({"to": args.to}))
                .await;
            Ok(ToolOutput::new(nested.model_value()))
        })
        .unwrap()
}

struct Fixture {
    /// The folder of the database and the approval ledger, shared with child processes.
    dir: PathBuf,
    /// Removes the folder when the test that made it ends (a child's folder is its parent's).
    _owned: Option<tempfile::TempDir>,
    db: PathBuf,
    ledger_path: PathBuf,
    clock: Arc<ManualClock>,
    trace: Arc<MemoryTrace>,
    attempts: Arc<AtomicUsize>,
}

impl Fixture {
    fn new() -> Self {
        let owned = tempfile::tempdir().unwrap();
        let mut fx = Fixture::in_folder(owned.path());
        fx._owned = Some(owned);
        fx
    }

    /// The fixture over the files in `dir` (a child process's view of its parent's fixture).
    fn in_folder(dir: &Path) -> Self {
        let db = dir.join("demo.sqlite");
        drop(open_db(&db));
        Fixture {
            dir: dir.to_path_buf(),
            _owned: None,
            ledger_path: dir.join("approvals.sqlite"),
            db,
            clock: Arc::new(ManualClock::at_unix(NOW_UNIX)),
            trace: Arc::new(MemoryTrace::default()),
            attempts: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn dispatcher(&self, remote: Remote) -> Dispatcher {
        let registry = Registry::new([
            note_tool(self.db.clone()),
            send_tool(self.db.clone(), remote, Arc::clone(&self.attempts)),
            outer_tool(),
        ])
        .unwrap();
        let ledger = ApprovalLedger::open(&self.ledger_path).unwrap();
        Dispatcher::new(Arc::new(registry))
            .unwrap()
            .with_clock(self.clock.clone())
            .with_trace(self.trace.clone())
            .with_ledger(Arc::new(ledger))
    }

    fn records(&self) -> Vec<DecisionRecord> {
        self.trace.records::<DecisionRecord>()
    }
}

fn alice() -> Principal {
    Principal::local("alice", &[])
}

fn send(to: &str) -> CallRequest {
    CallRequest::new(alice(), "run-1", "demo_send", json!({"to": to}))
}

fn denial(outcome: &CallOutcome) -> Denial {
    match &outcome.record.approval {
        ApprovalRecord::Denied { denial } => denial.clone(),
        other => panic!("expected a denial, got {other:?} ({:?})", outcome.result),
    }
}

/// Asks for a ticket for `to`, as a stateless server does, and returns its token.
async fn ticket_for(d: &Dispatcher, to: &str) -> String {
    let out = d
        .call(send(to).with_approval(ApprovalChannel::Ticket))
        .await;
    let ticket = out.ticket().unwrap_or_else(|| panic!("{:?}", out.result));
    ticket.token.clone()
}

// ---------------------------------------------------------------------------------------------
// Effect identity
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn same_write_by_two_principals_makes_two_effects() {
    let fx = Fixture::new();
    let d = fx.dispatcher(Remote::Delivers);
    let note = |who: &str| {
        CallRequest::new(
            Principal::local(who, &[]),
            "run-shared",
            "demo_note_add",
            json!({"title": "Buy milk"}),
        )
    };
    let by_alice = d.call(note("alice")).await;
    let by_bob = d.call(note("bob")).await;
    let again_by_alice = d.call(note("alice")).await;
    assert_eq!(count(&fx.db, "notes"), 2, "one note each, not one shared");
    let content = |o: &CallOutcome| o.observation().unwrap().content.clone();
    assert_eq!(content(&by_alice)["by"], "alice");
    assert_eq!(
        content(&by_bob)["by"],
        "bob",
        "bob is not shown alice's receipt"
    );
    assert!(!by_bob.record.duplicate);
    assert!(again_by_alice.record.duplicate, "alice's own retry replays");
    assert_ne!(
        by_alice.record.idempotency_key,
        by_bob.record.idempotency_key
    );
}

#[tokio::test]
async fn request_without_run_id_is_refused() {
    let fx = Fixture::new();
    let d = fx.dispatcher(Remote::Delivers);
    for run in ["", "  "] {
        let out = d
            .call(CallRequest::new(
                alice(),
                run,
                "demo_note_add",
                json!({"title": "x"}),
            ))
            .await;
        let error = out
            .error()
            .unwrap_or_else(|| panic!("{run:?}: {:?}", out.result));
        assert_eq!(error.code, ErrorCode::InvalidArgument);
        assert!(error.message.contains("run"), "{error:?}");
    }
    assert_eq!(count(&fx.db, "notes"), 0);
}

// ---------------------------------------------------------------------------------------------
// Remote effects
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn remote_effect_that_fails_before_it_starts_releases_its_claim_and_a_retry_runs_once() {
    let fx = Fixture::new();
    let ticket_free = async |d: &Dispatcher, to: &str| {
        let token = d
            .ledger()
            .issue(
                &d.binding_for(&alice(), "demo_send", &json!({"to": to}))
                    .unwrap(),
                &alice(),
                fx.clock.now(),
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        send(to).with_approval_token(&token)
    };
    let refusing = fx.dispatcher(Remote::RefusedBeforeStart);
    let failed = refusing
        .call(ticket_free(&refusing, "bob@example.org").await)
        .await;
    assert_eq!(failed.error().unwrap().code, ErrorCode::TransientDependency);
    assert_eq!(count(&fx.db, "sent"), 0);

    let delivering = fx.dispatcher(Remote::Delivers);
    let retried = delivering
        .call(ticket_free(&delivering, "bob@example.org").await)
        .await;
    assert!(!retried.is_error(), "{:?}", retried.result);
    let again = delivering.call(send("bob@example.org")).await;
    assert_eq!(again.record.approval, ApprovalRecord::Replayed);
    assert!(again.record.duplicate);
    assert_eq!(
        count(&fx.db, "sent"),
        1,
        "sent once, after the refused attempt"
    );
    assert_eq!(
        fx.attempts.load(Ordering::SeqCst),
        2,
        "the replay made no attempt"
    );
}

/// The child's part: claim a send and hang inside the effect until killed.
#[test]
fn child_claims_a_send_and_hangs() {
    let Some((dir, token)) = child_part("claim-and-hang") else {
        return;
    };
    let fx = Fixture::in_folder(&dir);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let d = fx.dispatcher(Remote::Hangs);
        d.call(send("bob@example.org").with_approval_token(&token))
            .await;
    });
}

/// In a child process playing `role`: the parent's folder and the token it passed; `None` in
/// an ordinary test run, where the child's test does nothing.
fn child_part(role: &str) -> Option<(PathBuf, String)> {
    if std::env::var(CHILD_ROLE).as_deref() != Ok(role) {
        return None;
    }
    let dir = PathBuf::from(std::env::var(CHILD_DIR).unwrap());
    Some((dir, std::env::var(CHILD_TOKEN).unwrap()))
}

fn spawn_child(role: &str, test: &str, dir: &Path, token: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ROLE, role)
        .env(CHILD_DIR, dir)
        .env(CHILD_TOKEN, token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn claim_left_unsettled_by_a_killed_process_is_refused_and_never_run_again() {
    let fx = Fixture::new();
    let d = fx.dispatcher(Remote::Delivers);
    let args = json!({"to": "bob@example.org"});
    let binding = d.binding_for(&alice(), "demo_send", &args).unwrap();
    let child_token = d
        .ledger()
        .issue(&binding, &alice(), fx.clock.now(), Duration::from_secs(600))
        .await
        .unwrap();
    let mut child = spawn_child(
        "claim-and-hang",
        "child_claims_a_send_and_hangs",
        &fx.dir,
        &child_token,
    );
    // Wait until the child has claimed (it prints after the claim committed), then kill it
    // between claim and settle.
    let stdout = child.stdout.take().unwrap();
    let claimed = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .take(50)
            .any(|line| line.is_ok_and(|l| l.trim_end().ends_with("claimed")))
    });
    let claimed = tokio::time::timeout(Duration::from_secs(60), claimed)
        .await
        .expect("the child claimed within a minute")
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(claimed, "the child reported its claim");

    let my_token = d
        .ledger()
        .issue(&binding, &alice(), fx.clock.now(), Duration::from_secs(600))
        .await
        .unwrap();
    let retry = d
        .call(send("bob@example.org").with_approval_token(&my_token))
        .await;
    let error = retry
        .error()
        .unwrap_or_else(|| panic!("{:?}", retry.result));
    assert_eq!(error.code, ErrorCode::Conflict);
    assert!(
        error.message.contains("may already have happened"),
        "{error:?}"
    );
    assert!(
        error
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("the demo outbox")),
        "the error says what to check: {error:?}"
    );
    assert_eq!(
        count(&fx.db, "sent"),
        0,
        "the effect was not run a second time"
    );
    assert_eq!(fx.attempts.load(Ordering::SeqCst), 0);
}

// ---------------------------------------------------------------------------------------------
// Approval tickets
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn ticket_carries_the_exact_call_and_a_yes_redeems_it_once() {
    let fx = Fixture::new();
    let d = fx.dispatcher(Remote::Delivers);
    let first = d
        .call(send("bob@example.org").with_approval(ApprovalChannel::Ticket))
        .await;
    let ticket = first.ticket().unwrap().clone();
    assert_eq!(first.record.outcome.as_str(), "approval_required");
    assert_eq!(ticket.request.arguments, json!({"to": "bob@example.org"}));
    assert_eq!(
        (
            ticket.request.tool.as_str(),
            ticket.request.principal.as_str()
        ),
        ("demo_send", "alice")
    );
    assert_eq!(count(&fx.db, "sent"), 0, "nothing runs before the answer");

    let approved = d
        .call(send("bob@example.org").with_ticket_answer(&ticket.token, true))
        .await;
    assert!(!approved.is_error(), "{:?}", approved.result);
    assert_eq!(
        approved.record.approval,
        ApprovalRecord::Approved {
            via: ApprovedVia::Ticket
        }
    );
    assert_eq!(count(&fx.db, "sent"), 1);
}

#[tokio::test]
async fn ticket_redeemed_twice_late_by_another_caller_or_for_other_arguments_is_denied() {
    let fx = Fixture::new();
    let d = fx.dispatcher(Remote::Delivers);
    let mallory = Principal::local("mallory", &[]);
    let cases: Vec<(&str, CallRequest, Denial)> = vec![
        (
            "other arguments",
            send("mallory@evil.example"),
            Denial::BoundToOtherCall,
        ),
        (
            "another caller",
            CallRequest::new(
                mallory,
                "run-1",
                "demo_send",
                json!({"to": "bob@example.org"}),
            ),
            Denial::OtherCaller,
        ),
    ];
    for (label, request, want) in cases {
        let token = ticket_for(&d, "bob@example.org").await;
        let out = d.call(request.with_ticket_answer(&token, true)).await;
        assert_eq!(denial(&out), want, "{label}");
    }
    // Twice: the second presentation, in another run so it is not a replay, is refused.
    let token = ticket_for(&d, "bob@example.org").await;
    let once = d
        .call(send("bob@example.org").with_ticket_answer(&token, true))
        .await;
    assert!(!once.is_error(), "{:?}", once.result);
    let twice = d
        .call(
            send("bob@example.org")
                .with_run("run-2")
                .with_ticket_answer(&token, true),
        )
        .await;
    assert_eq!(denial(&twice), Denial::AlreadyUsed);
    // Late.
    let token = ticket_for(&d, "carol@example.org").await;
    fx.clock.advance(Duration::from_secs(3_600));
    let late = d
        .call(send("carol@example.org").with_ticket_answer(&token, true))
        .await;
    assert_eq!(denial(&late), Denial::Expired);
    // A no spends the ticket: a later yes with it does nothing.
    let token = ticket_for(&d, "dave@example.org").await;
    let no = d
        .call(send("dave@example.org").with_ticket_answer(&token, false))
        .await;
    assert!(matches!(denial(&no), Denial::Declined { .. }));
    let yes_after_no = d
        .call(send("dave@example.org").with_ticket_answer(&token, true))
        .await;
    assert_eq!(denial(&yes_after_no), Denial::AlreadyUsed);
    assert_eq!(
        count(&fx.db, "sent"),
        1,
        "only the one approved send happened"
    );
}

/// Two tenants each have a user called "alice": a ticket issued to one is not the other's,
/// through the dispatcher and through the SQLite ledger file both use.
#[tokio::test]
async fn a_ticket_of_one_tenants_alice_is_not_another_tenants_alice() {
    let fx = Fixture::new();
    let d = fx.dispatcher(Remote::Delivers);
    let in_tenant = |tenant: &str| {
        let mut p = alice();
        p.tenant = tenant.into();
        p
    };
    let (acme, globex) = (in_tenant("acme"), in_tenant("globex"));
    let args = json!({"to": "bob@example.org"});
    let asked = d
        .call(
            CallRequest::new(acme.clone(), "run-1", "demo_send", args.clone())
                .with_approval(ApprovalChannel::Ticket),
        )
        .await;
    let token = asked.ticket().unwrap().token.clone();
    assert_ne!(
        d.binding_for(&acme, "demo_send", &args),
        d.binding_for(&globex, "demo_send", &args),
        "the binding names the tenant"
    );

    let by_globex = d
        .call(
            CallRequest::new(globex.clone(), "run-1", "demo_send", args.clone())
                .with_ticket_answer(&token, true),
        )
        .await;
    assert_eq!(denial(&by_globex), Denial::OtherCaller);
    assert_eq!(
        count(&fx.db, "sent"),
        0,
        "nothing was sent for the other tenant"
    );
    // Straight at the ledger file, with the binding acme's alice's call has.
    let ledger = ApprovalLedger::open(&fx.ledger_path).unwrap();
    let binding = d.binding_for(&acme, "demo_send", &args).unwrap();
    assert_eq!(
        ledger
            .redeem(&token, &binding, &globex, fx.clock.now())
            .await,
        Err(Denial::OtherCaller)
    );

    let by_acme = d
        .call(CallRequest::new(acme, "run-1", "demo_send", args).with_ticket_answer(&token, true))
        .await;
    assert!(!by_acme.is_error(), "{:?}", by_acme.result);
    assert_eq!(count(&fx.db, "sent"), 1);
}

/// The child's part: redeem the ticket named in the environment and print the denial, if any.
#[test]
fn child_redeems_a_ticket() {
    let Some((dir, token_and_binding)) = child_part("redeem") else {
        return;
    };
    let ledger = ApprovalLedger::open(&dir.join("approvals.sqlite")).unwrap();
    let parts: Vec<&str> = token_and_binding.split(' ').collect();
    let now = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(NOW_UNIX);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    match runtime.block_on(ledger.redeem(parts[0], parts[1], &alice(), now)) {
        Ok(()) => println!("redeemed"),
        Err(denial) => println!("denied {}", denial.as_str()),
    }
}

#[tokio::test]
async fn ticket_is_single_use_across_processes_sharing_the_ledger() {
    let fx = Fixture::new();
    let d = fx.dispatcher(Remote::Delivers);
    let args = json!({"to": "bob@example.org"});
    let binding = d.binding_for(&alice(), "demo_send", &args).unwrap();
    let child_says = |token: &str, binding: &str| {
        let child = spawn_child(
            "redeem",
            "child_redeems_a_ticket",
            &fx.dir,
            &format!("{token} {binding}"),
        );
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        // libtest prints the child's line after its own "test name ... ".
        let said = ["redeemed", "denied already_used", "denied "]
            .iter()
            .find_map(|word| text.find(word).map(|at| &text[at..]));
        said.and_then(|s| s.lines().next())
            .unwrap_or_else(|| panic!("child said: {text}"))
            .trim()
            .to_string()
    };
    // Redeemed here first: the other process is refused.
    let token = ticket_for(&d, "bob@example.org").await;
    let here = d
        .call(send("bob@example.org").with_ticket_answer(&token, true))
        .await;
    assert!(!here.is_error(), "{:?}", here.result);
    assert_eq!(child_says(&token, &binding), "denied already_used");
    // Redeemed in the other process first: this one is refused, and nothing is sent.
    let erin = json!({"to": "erin@example.org"});
    let erin_binding = d.binding_for(&alice(), "demo_send", &erin).unwrap();
    let token = ticket_for(&d, "erin@example.org").await;
    assert_eq!(child_says(&token, &erin_binding), "redeemed");
    let after = d
        .call(send("erin@example.org").with_ticket_answer(&token, true))
        .await;
    assert_eq!(denial(&after), Denial::AlreadyUsed);
    // And a ticket survives the dispatcher that issued it: a new one on the same file redeems it.
    let token = ticket_for(&d, "carol@example.org").await;
    drop(d);
    let restarted = fx.dispatcher(Remote::Delivers);
    let redeemed = restarted
        .call(send("carol@example.org").with_ticket_answer(&token, true))
        .await;
    assert!(!redeemed.is_error(), "{:?}", redeemed.result);
    assert_eq!(count(&fx.db, "sent"), 2);
}

// ---------------------------------------------------------------------------------------------
// Nested calls
// ---------------------------------------------------------------------------------------------

/// Approves after a pause longer than the outer tool's deadline.
struct SlowYes {
    asked: AtomicUsize,
}

impl Approver for SlowYes {
    fn decide<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> toolgate_core::tool::BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async move {
            self.asked.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(900)).await;
            Ok(ApprovalAnswer::Approve)
        })
    }
}

#[tokio::test]
async fn nested_call_keeps_its_own_risk_and_is_recorded_with_origin_and_parent() {
    let fx = Fixture::new();
    let d = fx.dispatcher(Remote::Delivers);
    let outer = |channel: ApprovalChannel, to: &str| {
        CallRequest::new(alice(), "run-1", "demo_outer", json!({"to": to}))
            .with_call_id("outer-1")
            .with_origin(Origin::Loop)
            .with_approval(channel)
    };
    // No channel: the outer tool is low risk, but the nested send is high and is denied.
    let denied = d
        .call(outer(ApprovalChannel::None, "bob@example.org"))
        .await;
    let content = &denied.observation().unwrap().content;
    assert!(content.to_string().contains("approval_denied"), "{content}");
    assert_eq!(count(&fx.db, "sent"), 0);

    // A human who takes longer than the outer deadline: the outer call waits for them.
    let approver = Arc::new(SlowYes {
        asked: AtomicUsize::new(0),
    });
    let approved = d
        .call(outer(
            ApprovalChannel::Ask(approver.clone()),
            "carol@example.org",
        ))
        .await;
    assert!(!approved.is_error(), "{:?}", approved.result);
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    assert_eq!(count(&fx.db, "sent"), 1);

    let records = fx.records();
    let nested: Vec<&DecisionRecord> = records.iter().filter(|r| r.tool == "demo_send").collect();
    assert_eq!(nested.len(), 2);
    for record in &nested {
        assert_eq!(record.origin, Origin::Sandbox);
        assert_eq!(record.parent_call_id.as_deref(), Some("outer-1"));
        assert_eq!(record.principal, "alice");
        assert_eq!(record.risk, Some(Risk::High));
    }
    assert_eq!(
        nested[0].approval,
        ApprovalRecord::Denied {
            denial: Denial::NoChannel
        }
    );
    assert_eq!(
        nested[1].approval,
        ApprovalRecord::Approved {
            via: ApprovedVia::Approver
        }
    );
    let outers: Vec<&DecisionRecord> = records.iter().filter(|r| r.tool == "demo_outer").collect();
    assert!(
        outers
            .iter()
            .all(|r| r.origin == Origin::Loop && r.parent_call_id.is_none())
    );
    assert!(
        outers[1].duration_us > 300_000,
        "the outer call outlived its 300 ms deadline while the human decided"
    );
}

#[tokio::test]
async fn outer_deadline_still_stops_a_handler_that_hangs_on_its_own() {
    // The pause covers only time a human is asked: a nested call that is not asking anyone does
    // not stop the outer clock.
    let fx = Fixture::new();
    let d = fx.dispatcher(Remote::Hangs);
    struct Yes;
    impl Approver for Yes {
        fn decide<'a>(
            &'a self,
            _request: &'a ApprovalRequest,
        ) -> toolgate_core::tool::BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
            Box::pin(async { Ok(ApprovalAnswer::Approve) })
        }
    }
    let out = d
        .call(
            CallRequest::new(
                alice(),
                "run-1",
                "demo_outer",
                json!({"to": "bob@example.org"}),
            )
            .with_approval(ApprovalChannel::Ask(Arc::new(Yes))),
        )
        .await;
    assert_eq!(out.error().unwrap().code, ErrorCode::DeadlineExceeded);
}
