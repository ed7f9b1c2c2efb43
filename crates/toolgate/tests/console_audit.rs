//! The audit console end to end, every part real: `toolgate serve --http` on 127.0.0.1 behind
//! `[serve.auth]` with `[console]` (alice and bob approve, carol audits), oidc-provider's real
//! login pages, aiosmtpd as the relay, rmcp's MCP client over Streamable HTTP, a real
//! `code_execution` in the sandbox (bubblewrap) recorded into the same audit file, and Debian's
//! headless chromium driven by the pinned playwright-core (`tests/browser/steps.mjs`).
//!
//! - carol finds the MCP client's `notes_search` calls by principal and tool (the form sent
//!   from the keyboard, its fields labelled); the recorded
//!   argument holding `<script>` and `<img onerror>` is shown as text and nothing runs (no
//!   script, no dialog, no page error, no console error); the JSON Lines and CSV exports the
//!   page links hold exactly the records of the same search.
//! - The `email_send` alice approved in the inbox shows, in the audit, who approved it, and its
//!   receipt as the notes store keeps it (what was sent, the key, when) and the egress exit's
//!   decision on the mail it handed to the relay; a `web_clip` of an unlisted host shows the
//!   exit's block under that call.
//! - A `code_execution` call's page shows the calls its script made as a tree under it.
//! - alice, signed in but not an auditor, gets 403 for the audit and its export.
//!
//! With `TOOLGATE_SCREENSHOTS=DIR`, the walks also save `console-inbox.png`,
//! `console-ticket.png`, `console-audit-search.png` and `console-audit-tree.png` into DIR
//! (scripts/console-screenshots.sh).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[allow(clippy::duplicate_mod)]
#[path = "common/console.rs"]
mod console;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::mail_sink::MailSink;
use common::team::exchange;
use console::{
    ConsoleConfig, HOSTILE, McpSession, ServeOptions, Server, console_errors, last_status, payload,
    reads, sign_in, walk,
};
use serde_json::{Value, json};
use toolgate_core::{CallRequest, Principal};
use toolgate_sandbox::{InitProgram, Paging, SandboxConfig};
use toolgate_store::audit::{AuditFilter, AuditStore, SqliteAudit};
use toolgate_wiring::{CodeOptions, ExitsConfig, ExtraTools, Seat, Store, StoreKind, ToolsetName};

const RECIPIENT: &str = "mallory@evil.example";

struct Deployment {
    server: Server,
    auth: console::oidc::AuthServer,
    sink: MailSink,
    note_id: i64,
    dir: tempfile::TempDir,
}

impl Deployment {
    fn start() -> Deployment {
        let dir = tempfile::tempdir().unwrap();
        let sink = MailSink::start();
        let address = format!("127.0.0.1:{}", console::free_port());
        let auth = console::start_auth(&address, &[]);
        let db = dir.path().join("notes.sqlite");
        let note_id = console::seed_hostile_note(&db, RECIPIENT);
        let config = ConsoleConfig {
            head: "[policy]\ntainted_high = \"ask\"\n\n",
            ports: format!("{}, {}", console::auth_port(&auth), sink.port()),
            smtp: sink.port(),
            issuer: auth.issuer(),
            resource: console::resource(&address),
            console: r#"client_id = "public-client"
ticket_secs = 90
sign_in_scopes = ["approvals"]
[console.approvers]
subjects = ["alice", "bob"]
[console.auditors]
subjects = ["carol"]
"#
            .into(),
        }
        .write(dir.path());
        let server = console::serve(dir.path(), &config, &address, &db, &ServeOptions::default());
        Deployment {
            server,
            auth,
            sink,
            note_id,
            dir,
        }
    }

    fn origin(&self) -> String {
        format!("http://{}", self.server.address)
    }

    /// The audit file serve records into: beside the store it audits.
    fn audit_file(&self) -> PathBuf {
        self.dir.path().join("audit.sqlite")
    }

    fn requester_token(&self) -> String {
        console::client_token(
            &self.auth,
            "client-a",
            "secret-a",
            &format!("{}/mcp", self.origin()),
        )
    }
}

/// A `code_execution` call by `coder`, as `toolgate ask --code` makes it (the real sandbox),
/// recorded into the same audit file by a writer of its own (as another command's would be).
/// Its script searches the notes three times.
fn record_code_call(audit_file: &Path, dir: &Path) {
    let audit = SqliteAudit::open(audit_file, "ask/test".into()).unwrap();
    let store = Store::open_or_init(StoreKind::Notes, &dir.join("code-notes.sqlite")).unwrap();
    let exits = ExitsConfig::new(toolgate_egress::EgressConfig::default(), None);
    let seat = Seat::new(Principal::local("coder", &[])).with_trace(Arc::new(audit.clone()));
    let extra = ExtraTools {
        code: Some(CodeOptions {
            sandbox: SandboxConfig::new(InitProgram {
                path: PathBuf::from(env!("CARGO_BIN_EXE_toolgate")),
                args: vec!["sandbox-init".into()],
            }),
            export_notes: true,
            paging: Paging::ByPage,
            failed_scripts: toolgate_sandbox::FailedScripts::Reported,
        }),
        ..ExtraTools::default()
    };
    let ready =
        toolgate_wiring::dispatcher_with(ToolsetName::Notes, &store, &exits, seat, extra).unwrap();
    let script = "import toolgate_tools as t\n\
                  for q in ['budget', 'design', 'garden']:\n    t.notes_search(query=q, limit=2)\n";
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime.block_on(
        ready.caller.call(
            CallRequest::new(
                ready.principal.clone(),
                "code-run-1",
                "code_execution",
                json!({ "code": script }),
            )
            .with_call_id("code-1"),
        ),
    );
    assert!(!outcome.is_error(), "{}", outcome.model_text());
    drop(ready);
    audit.flush();
}

/// The value of the console's session cookie the walk ended with.
fn session_cookie(report: &Value) -> String {
    console::session_cookie(report)["value"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A screenshot step into `$TOOLGATE_SCREENSHOTS/name`, when screenshots are asked for.
fn screenshot(name: &str) -> Option<Value> {
    let dir = std::env::var_os("TOOLGATE_SCREENSHOTS").filter(|d| !d.is_empty())?;
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = std::fs::canonicalize(&dir).unwrap().join(name);
    Some(json!({ "screenshot": path.display().to_string() }))
}

/// Nothing a record carried ran in the page.
fn assert_inert(report: &Value) {
    assert_eq!(report["evals"]["inert"], json!(true), "{report:#}");
    assert_eq!(report["dialogs"], json!([]), "{report:#}");
    assert_eq!(report["page_errors"], json!([]), "{report:#}");
    let errors = console_errors(report);
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

/// The audit's rows for `filter`, newest first, once the server's writer has `at_least`.
fn audit_rows(file: &Path, filter: &AuditFilter, at_least: usize) -> Vec<Value> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Ok(store) = AuditStore::open_file(file) {
            let mut out = Vec::new();
            runtime
                .block_on(store.export(
                    filter,
                    toolgate_store::audit::ExportFormat::Jsonl,
                    &mut out,
                ))
                .unwrap();
            let rows: Vec<Value> = String::from_utf8(out)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            if rows.len() >= at_least {
                return rows;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the audit did not get {at_least} rows for {filter:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn get(address: &str, path: &str, cookie: &str) -> common::team::Reply {
    let cookie = format!("toolgate_console={cookie}");
    exchange(address, "GET", path, &[("cookie", cookie.as_str())], "").unwrap()
}

#[test]
fn an_auditor_finds_a_call_by_principal_and_tool_sees_its_tree_and_exports_the_same_records() {
    let deployment = Deployment::start();
    let origin = deployment.origin();
    let address = deployment.server.address.clone();

    // Calls through the MCP server: a search whose argument is hostile markup, and a mail
    // that waits in the inbox.
    let mut session = McpSession::open(&address, &deployment.requester_token());
    // A clip of a page on a host the allowlist does not list: the egress exit blocks it.
    let clipped = session.call(
        "web_clip",
        json!({ "url": "https://unlisted.example/page" }),
    );
    assert_eq!(clipped["isError"], json!(true), "{clipped}");
    for query in [HOSTILE, "budget"] {
        let found = session.call("notes_search", json!({ "query": query, "limit": 3 }));
        assert_ne!(found["isError"], json!(true), "{found}");
    }
    let note = session.call("notes_get", json!({"note_id": deployment.note_id}));
    assert_ne!(note["isError"], json!(true), "{note}");
    let draft = session.call(
        "email_draft",
        json!({"to": RECIPIENT, "subject": "Booking", "body": format!("As the note says: {HOSTILE}")}),
    );
    let draft_id = payload(&draft)["draft_id"].as_i64().unwrap();
    let waiting =
        std::thread::spawn(move || session.call("email_send", json!({"draft_id": draft_id})));

    // A code_execution call with children, recorded into the same audit file.
    record_code_call(&deployment.audit_file(), deployment.dir.path());

    // alice approves the mail in the inbox; the audit is not hers to read.
    let mut steps = sign_in(&origin, "alice");
    steps.push(json!({"reload_until": "a.ticket", "seconds": 30}));
    steps.extend(screenshot("console-inbox.png"));
    steps.push(json!({"click": "a.ticket"}));
    steps.extend(screenshot("console-ticket.png"));
    steps.extend([
        json!({"fill": "#decision-reason", "value": "recipient checked with the organiser"}),
        json!({"click": "#approve"}),
        json!({"text": "#state", "as": "state"}),
        json!({"goto": format!("{origin}/console/audit?principal=client-a")}),
        json!({"text": "#message", "as": "refusal"}),
    ]);
    let alice = walk(&Value::from(steps));
    assert!(
        reads(&alice, "state")[0].contains("approved by alice"),
        "{alice:#}"
    );
    assert_eq!(last_status(&alice), json!(403), "{alice:#}");
    assert!(
        reads(&alice, "refusal")[0].contains("not an auditor"),
        "{alice:#}"
    );
    let alice_cookie = session_cookie(&alice);
    let refused = get(
        &address,
        "/console/audit/export?format=jsonl&principal=client-a",
        &alice_cookie,
    );
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(!refused.body.contains("notes_search"), "{refused:?}");
    let sent = waiting.join().unwrap();
    assert_ne!(sent["isError"], json!(true), "{sent}");
    assert_eq!(deployment.sink.received().len(), 1);

    // What the server recorded, read from the file as `toolgate audit` reads it.
    let searched = AuditFilter {
        principal: Some("client-a".into()),
        tool: Some("notes_search".into()),
        ..AuditFilter::default()
    };
    let expected = audit_rows(&deployment.audit_file(), &searched, 2);
    assert_eq!(expected.len(), 2, "{expected:#?}");
    audit_rows(
        &deployment.audit_file(),
        &AuditFilter {
            tool: Some("email_send".into()),
            approval: Some(toolgate_store::audit::ApprovalFilter::Approved),
            ..AuditFilter::default()
        },
        1,
    );

    // carol, an auditor who approves nothing, lands on the audit and searches it.
    let inert = console::INERT;
    let mut steps = sign_in(&origin, "carol");
    steps.extend([
        json!({"eval": "location.pathname", "as": "landed"}),
        json!({"fill": "#f-principal", "value": "client-a"}),
        json!({"fill": "#f-tool", "value": "notes_search"}),
        json!({"eval": "document.querySelector('label[for=f-principal]').textContent", "as": "label"}),
        // By keyboard: Enter in a field submits the search.
        json!({"press": "#f-tool", "key": "Enter", "navigates": true}),
        json!({"text": "#results tbody tr", "as": "found"}),
    ]);
    steps.extend(screenshot("console-audit-search.png"));
    steps.extend([
        json!({"eval": "document.querySelector('#export-jsonl').getAttribute('href')", "as": "jsonl"}),
        json!({"eval": "document.querySelector('#export-csv').getAttribute('href')", "as": "csv"}),
        // The older of the two: the search whose argument is the hostile markup.
        json!({"click": "#results tbody tr:last-child a.call"}),
        json!({"text": "#arguments", "as": "arguments"}),
        json!({"html": "#arguments", "as": "markup"}),
        json!({"text": "#principal", "as": "principal"}),
        json!({"eval": inert, "as": "inert"}),
        json!({"goto": format!("{origin}/console/audit?tool=email_send&approval=approved")}),
        json!({"click": "a.call"}),
        json!({"text": "#approval", "as": "approval"}),
        json!({"text": "#receipt", "as": "receipt"}),
        json!({"text": "#taint", "as": "taint"}),
        json!({"text": "#receipt-key", "as": "receipt_key"}),
        json!({"text": "#receipt-written", "as": "receipt_written"}),
        json!({"text": "#receipt-time", "as": "receipt_time"}),
        json!({"text": "#egress-table tbody tr", "as": "send_egress"}),
        json!({"goto": format!("{origin}/console/audit?tool=web_clip")}),
        json!({"click": "a.call"}),
        json!({"text": "#egress-table tbody tr", "as": "clip_egress"}),
        json!({"goto": format!("{origin}/console/audit?principal=coder&tool=code_execution")}),
        json!({"click": "a.call"}),
        json!({"text": "#tree a.node", "as": "tree"}),
        json!({"eval": "document.querySelectorAll('#tree > li > ul > li').length", "as": "children"}),
    ]);
    steps.extend(screenshot("console-audit-tree.png"));
    steps.extend([
        json!({"click": "#tree > li > ul > li a.node"}),
        json!({"text": "#origin", "as": "child_origin"}),
        json!({"eval": "!!document.querySelector('#parent')", "as": "has_parent"}),
    ]);
    let carol = walk(&Value::from(steps));
    assert_eq!(
        carol["evals"]["landed"],
        json!("/console/audit"),
        "{carol:#}"
    );
    assert_eq!(carol["evals"]["label"], json!("Principal"));
    let found = reads(&carol, "found");
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found
            .iter()
            .all(|row| row.contains("notes_search") && row.contains("client-a")),
        "{found:?}"
    );
    let arguments = reads(&carol, "arguments").join("");
    assert!(
        arguments.contains("<script>window.pwned=1</script><img src=x onerror="),
        "shown as written (as JSON text): {arguments}"
    );
    let markup = reads(&carol, "markup").join("");
    assert!(
        markup.contains("&lt;script&gt;")
            && !markup.contains("<script")
            && !markup.contains("<img"),
        "escaped in the page: {markup}"
    );
    assert!(reads(&carol, "principal")[0].contains("client-a"));
    assert_inert(&carol);
    let approval = reads(&carol, "approval")[0].clone();
    assert!(
        approval.starts_with("approved") && approval.contains("alice"),
        "who approved: {approval}"
    );
    assert!(
        !reads(&carol, "receipt")[0].starts_with("none"),
        "the send's receipt key: {carol:#}"
    );
    // The send's receipt, as the store keeps it under the key the record names.
    let receipt_key = reads(&carol, "receipt_key")[0].clone();
    assert!(
        !receipt_key.is_empty() && reads(&carol, "receipt")[0].starts_with(&receipt_key),
        "{carol:#}"
    );
    assert!(
        reads(&carol, "receipt_written")[0].contains("\"sent\": true"),
        "what was written: {carol:#}"
    );
    assert!(
        reads(&carol, "receipt_time")[0].ends_with(" UTC"),
        "{carol:#}"
    );
    // The egress exit's decisions, under the calls that made them: the mail handed to the
    // relay, and the clip the allowlist refused.
    let send_egress = reads(&carol, "send_egress");
    assert_eq!(send_egress.len(), 1, "{send_egress:?}");
    assert!(
        send_egress[0].contains("allowed")
            && send_egress[0].contains("SMTP")
            && send_egress[0].contains("127.0.0.1"),
        "{send_egress:?}"
    );
    let clip_egress = reads(&carol, "clip_egress");
    assert_eq!(clip_egress.len(), 1, "{clip_egress:?}");
    assert!(
        clip_egress[0].contains("blocked")
            && clip_egress[0].contains("GET")
            && clip_egress[0].contains("unlisted.example"),
        "{clip_egress:?}"
    );
    assert!(
        reads(&carol, "taint")[0].contains(RECIPIENT),
        "the recipient came from the note: {carol:#}"
    );
    // The code call's tree: the script's three searches under it.
    let tree = reads(&carol, "tree");
    assert_eq!(tree[0], "code_execution", "{tree:?}");
    assert_eq!(
        tree[1..],
        ["notes_search", "notes_search", "notes_search"],
        "{tree:?}"
    );
    assert_eq!(carol["evals"]["children"], json!(3), "{carol:#}");
    assert_eq!(reads(&carol, "child_origin"), ["sandbox"]);
    assert_eq!(carol["evals"]["has_parent"], json!(true));

    // The exports the page links hold exactly the records of the same search.
    let cookie = session_cookie(&carol);
    let jsonl = get(&address, carol["evals"]["jsonl"].as_str().unwrap(), &cookie);
    assert_eq!(jsonl.status, 200, "{jsonl:?}");
    assert!(
        jsonl
            .header("content-disposition")
            .is_some_and(|d| d.starts_with("attachment")),
        "{jsonl:?}"
    );
    let exported: Vec<Value> = jsonl
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported, expected);
    let csv = get(&address, carol["evals"]["csv"].as_str().unwrap(), &cookie);
    assert_eq!(csv.status, 200, "{csv:?}");
    let rows = common::read_csv(&csv.body);
    assert_eq!(rows[0][0], "id");
    let ids: Vec<i64> = rows[1..].iter().map(|r| r[0].parse().unwrap()).collect();
    let expected_ids: Vec<i64> = expected.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, expected_ids);

    // Signed out: sent to sign in, nothing shown. A filter outside its closed form, or an
    // export in no format, is refused with what was wrong.
    let signed_out = exchange(
        &address,
        "GET",
        "/console/audit/export?format=jsonl",
        &[],
        "",
    )
    .unwrap();
    assert_eq!(signed_out.status, 303, "{signed_out:?}");
    assert!(!signed_out.body.contains("notes_search"));
    let bad = get(&address, "/console/audit?outcome=fine", &cookie);
    assert_eq!(bad.status, 400, "{bad:?}");
    assert!(bad.body.contains("is not an outcome"), "{}", bad.body);
    let bad = get(&address, "/console/audit/export?format=xlsx", &cookie);
    assert_eq!(bad.status, 400, "{bad:?}");
}
