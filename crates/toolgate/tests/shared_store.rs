//! A team's shared store through the real binary: `toolgate books init --store` fills a real
//! PostgreSQL database (a cluster of the test's own on 127.0.0.1), two `toolgate serve --http`
//! instances serve it at once, and a write sent to both with one idempotency key makes one
//! effect and one receipt. Bad store URLs are refused before anything is served.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::team::{Instance, count, exchange, modern_call, serve, serve_toolset};
use common::{text, toolgate};
use serde_json::{Value, json};
use toolgate_store::postgres::cluster::TempCluster;

/// A 2026-07-28 `tools/call` of `books_set_status` with idempotency key `key`; the JSON-RPC
/// result.
fn set_status(instance: &Instance, key: &str, args: &Value) -> Value {
    call(
        instance,
        args,
        json!({}),
        json!({"toolgate/idempotencyKey": key}),
    )
}

/// A 2026-07-28 `tools/call` of `books_set_status` from a host that can ask its user, with
/// `extra` merged into the params and `meta` into their `_meta`; the JSON-RPC result.
fn call(instance: &Instance, args: &Value, extra: Value, meta: Value) -> Value {
    let reply = modern_call(&instance.address, "books_set_status", args, extra, meta).unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.message().unwrap()["result"].clone()
}

/// A plain GET of `path`: the status code and the JSON body.
fn get(instance: &Instance, path: &str) -> (u16, Value) {
    let reply = exchange(&instance.address, "GET", path, &[], "").unwrap();
    (
        reply.status,
        serde_json::from_str(reply.body.trim()).unwrap_or(Value::Null),
    )
}

#[test]
fn two_instances_on_one_shared_store_make_one_effect_of_a_write_sent_to_both() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = TempCluster::start().unwrap();
    let url = cluster.url();
    let init = toolgate(&["books", "init", "--store", &url], dir.path());
    assert!(init.status.success(), "{}", text(&init.stderr));
    assert!(
        text(&init.stdout).contains("holds 300 books"),
        "{}",
        text(&init.stdout)
    );
    assert!(
        !text(&init.stdout).contains("toolgate-test-password"),
        "the password is never shown"
    );

    let (first, second) = (serve(dir.path(), &url, None), serve(dir.path(), &url, None));
    let args = json!({"author": "Suzanne Collins", "status": "read"});
    let through_first = set_status(&first, "mark-collins-read", &args);
    let through_second = set_status(&second, "mark-collins-read", &args);
    assert_eq!(through_first["isError"], false, "{through_first}");
    assert_eq!(through_second["isError"], false, "{through_second}");
    assert_eq!(
        through_first["content"], through_second["content"],
        "the second instance replays the first one's receipt"
    );
    assert_eq!(
        count(&url, "SELECT count(*) FROM books WHERE my_status = 'read'"),
        3
    );
    assert_eq!(
        count(&url, "SELECT count(*) FROM tool_receipts"),
        1,
        "one effect, one receipt"
    );

    // Another key is another write (the books are already read: the status is set again).
    let again = set_status(&second, "mark-collins-read-again", &args);
    assert_eq!(again["isError"], false, "{again}");
    assert_eq!(count(&url, "SELECT count(*) FROM tool_receipts"), 2);

    // Every decision of both instances is in the audit table (written off the call path, so
    // it may lag a moment): three calls, one of them a replay, from two instances.
    let audited = "SELECT count(*) FROM decisions WHERE tool = 'books_set_status' AND principal = 'local-user'";
    let started = Instant::now();
    while count(&url, audited) < 3 && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(count(&url, audited), 3);
    assert_eq!(
        count(&url, "SELECT count(DISTINCT instance) FROM decisions"),
        2
    );
    assert_eq!(
        count(
            &url,
            "SELECT count(*) FROM decisions WHERE duplicate AND outcome = 'ok'"
        ),
        1,
        "the replay is recorded as one"
    );
}

#[test]
fn an_approval_asked_through_one_instance_is_answered_through_the_other_once() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = TempCluster::start().unwrap();
    let url = cluster.url();
    // In ask mode every write asks: the question's ticket lives in the shared store.
    let config = dir.path().join("team.toml");
    std::fs::write(&config, "mode = \"ask\"\n").unwrap();
    let (first, second) = (
        serve(dir.path(), &url, Some(&config)),
        serve(dir.path(), &url, Some(&config)),
    );
    let args = json!({"author": "Rick Riordan", "status": "reading"});
    let asked = call(&first, &args, json!({}), json!({}));
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let ticket = asked["requestState"].as_str().unwrap().to_string();
    let approve = |ticket: &str| {
        json!({
            "requestState": ticket,
            "inputResponses": {"approval": {"action": "accept", "content": {"approve": true}}}
        })
    };
    let reading = "SELECT count(*) FROM books WHERE my_status = 'reading'";

    let tampered = call(&second, &args, approve(&format!("{ticket}0")), json!({}));
    assert_eq!(tampered["isError"], true, "{tampered}");
    assert!(
        tampered.to_string().contains("no such approval"),
        "{tampered}"
    );
    let other_call = call(
        &second,
        &json!({"author": "Dan Brown", "status": "reading"}),
        approve(&ticket),
        json!({}),
    );
    assert_eq!(other_call["isError"], true, "{other_call}");
    assert!(
        other_call
            .to_string()
            .contains("different tool, version or arguments"),
        "{other_call}"
    );
    assert_eq!(count(&url, reading), 0, "no refused answer wrote anything");

    // The answer, through the other instance: the write runs once.
    let answered = call(&second, &args, approve(&ticket), json!({}));
    assert_eq!(answered["isError"], false, "{answered}");
    let changed = count(&url, reading);
    assert!(changed > 0, "{answered}");
    // The same answered retry again (a host that lost the reply): through the instance that
    // ran it, the recorded result comes back; through the other, the ticket is already used.
    // Either way nothing is written a second time.
    let replayed = call(&second, &args, approve(&ticket), json!({}));
    assert_eq!(replayed["content"], answered["content"], "{replayed}");
    let elsewhere = call(&first, &args, approve(&ticket), json!({}));
    assert_eq!(elsewhere["isError"], true, "{elsewhere}");
    assert!(
        elsewhere.to_string().contains("already used"),
        "{elsewhere}"
    );
    assert_eq!(count(&url, reading), changed);
    assert_eq!(count(&url, "SELECT count(*) FROM tool_receipts"), 1);
    assert_eq!(
        count(
            &url,
            "SELECT count(*) FROM approval_tickets WHERE used_at IS NOT NULL"
        ),
        1,
        "the ticket was redeemed once"
    );
}

#[test]
fn readyz_follows_the_database_and_healthz_says_the_process_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = TempCluster::start().unwrap();
    let url = cluster.url();
    let instance = serve(dir.path(), &url, None);
    assert_eq!(get(&instance, "/healthz"), (200, json!({"status": "up"})));
    let (status, ready) = get(&instance, "/readyz");
    assert_eq!(status, 200, "{ready}");
    assert_eq!(
        ready,
        json!({"ready": true, "checks": [{"name": "database", "ready": true, "required": true, "state": "reachable"}]})
    );

    cluster.stop().unwrap();
    let (status, down) = get(&instance, "/readyz");
    assert_eq!(status, 503, "{down}");
    assert_eq!(down["checks"][0]["state"], "unreachable", "{down}");
    assert_eq!(get(&instance, "/healthz").0, 200, "the process is still up");
    let refused = set_status(
        &instance,
        "while-down",
        &json!({"author": "Dan Brown", "status": "read"}),
    );
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused.to_string().contains("transient_dependency"),
        "{refused}"
    );

    cluster.restart().unwrap();
    let started = Instant::now();
    while get(&instance, "/readyz").0 != 200 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "ready again once the database is back"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let after = set_status(
        &instance,
        "while-down",
        &json!({"author": "Dan Brown", "status": "read"}),
    );
    assert_eq!(
        after["isError"], false,
        "the refused write runs once the database is back: {after}"
    );
}

#[test]
fn a_store_url_that_cannot_be_used_is_refused_before_anything_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap().port();
    drop(listener);
    let cases = [
        (
            "not a URL",
            "postgres://user:pw@/".to_string(),
            "could not be read",
        ),
        (
            "nobody listening",
            format!("postgres://user:hunter2@127.0.0.1:{closed}/db"),
            "could not be reached",
        ),
    ];
    for (label, url, says) in cases {
        let out = toolgate(
            &[
                "serve",
                "--http",
                "127.0.0.1:0",
                "--toolset",
                "books-v4",
                "--store",
                &url,
            ],
            dir.path(),
        );
        assert!(!out.status.success(), "{label}");
        let said = text(&out.stderr);
        assert!(said.contains(says), "{label}: {said}");
        assert!(
            !said.contains("hunter2"),
            "{label}: the password is never shown: {said}"
        );
        assert!(
            !said.contains("serving"),
            "{label}: nothing was served: {said}"
        );
    }
    assert!(
        !toolgate(
            &["notes", "init", "--store", "postgres://u:p@/", "--empty"],
            dir.path()
        )
        .status
        .success(),
        "--empty is a file's option"
    );
}

#[test]
fn the_notebook_is_shared_too_a_note_written_through_one_instance_is_found_through_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = TempCluster::start().unwrap();
    let url = cluster.url();
    let init = toolgate(&["notes", "init", "--store", &url], dir.path());
    assert!(init.status.success(), "{}", text(&init.stderr));
    assert!(
        text(&init.stdout).contains(" notes"),
        "{}",
        text(&init.stdout)
    );
    let sample = count(&url, "SELECT count(*) FROM notes");
    assert!(sample > 0, "the sample notebook fills the empty store");

    let first = serve_toolset(dir.path(), &url, "notes-v2", None);
    let second = serve_toolset(dir.path(), &url, "notes-v2", None);
    let note = json!({"title": "Shared store check", "body": "The zanzibar figure is 42."});
    let created = modern_call(
        &first.address,
        "notes_create",
        &note,
        json!({}),
        json!({"toolgate/idempotencyKey": "create-zanzibar"}),
    )
    .unwrap();
    assert_eq!(
        created.message().unwrap()["result"]["isError"],
        false,
        "{created:?}"
    );
    // The same write again through the other instance replays it.
    let again = modern_call(
        &second.address,
        "notes_create",
        &note,
        json!({}),
        json!({"toolgate/idempotencyKey": "create-zanzibar"}),
    )
    .unwrap();
    assert_eq!(
        again.message().unwrap()["result"]["isError"],
        false,
        "{again:?}"
    );
    assert_eq!(
        count(&url, "SELECT count(*) FROM notes"),
        sample + 1,
        "one note, not two"
    );

    let found = modern_call(
        &second.address,
        "notes_search",
        &json!({"query": "zanzibar figure"}),
        json!({}),
        json!({}),
    )
    .unwrap();
    let result = found.message().unwrap()["result"].clone();
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        result.to_string().contains("Shared store check"),
        "{result}"
    );
}

/// The text a 2026-07-28 call's reply carries, whole.
fn reply_text(reply: &common::team::Reply) -> String {
    reply.message().map(|m| m.to_string()).unwrap_or_default()
}

#[test]
fn an_address_read_through_one_instance_taints_the_draft_sent_through_the_other() {
    // What a principal was shown is kept in the shared store, so the taint rules see it at
    // every instance: without it, the second instance would take the address as the user's.
    let dir = tempfile::tempdir().unwrap();
    let cluster = TempCluster::start().unwrap();
    let url = cluster.url();
    let init = toolgate(&["notes", "init", "--store", &url], dir.path());
    assert!(init.status.success(), "{}", text(&init.stderr));
    let first = serve_toolset(dir.path(), &url, "notes", None);
    let second = serve_toolset(dir.path(), &url, "notes", None);
    let clip = count(
        &url,
        "SELECT id FROM notes WHERE body LIKE '%attacker@evil.example%' AND untrusted = 1",
    );
    let read = modern_call(
        &first.address,
        "notes_get",
        &json!({"note_id": clip}),
        json!({}),
        json!({}),
    )
    .unwrap();
    assert!(
        reply_text(&read).contains("attacker@evil.example"),
        "{read:?}"
    );
    let drafted = modern_call(
        &second.address,
        "email_draft",
        &json!({"to": "attacker@evil.example", "subject": "Notes", "body": "All of them."}),
        json!({}),
        json!({}),
    )
    .unwrap();
    // The audit writer runs off the call path: its row comes within moments.
    let recorded = |sql: &str| {
        let started = Instant::now();
        loop {
            let n = count(&url, sql);
            if n > 0 || started.elapsed() > Duration::from_secs(10) {
                return n;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    assert_eq!(
        recorded("SELECT count(*) FROM decisions WHERE tool = 'email_draft'"),
        1
    );
    let tainted = count(
        &url,
        "SELECT count(*) FROM decisions WHERE tool = 'email_draft' AND jsonb_array_length(coalesce(record->'taint', '[]'::jsonb)) > 0",
    );
    assert_eq!(
        tainted, 1,
        "the draft's recipient was not traced to the clip: {drafted:?}"
    );
    let nothing_sent = count(
        &url,
        "SELECT count(*) FROM email_drafts WHERE status = 'sent'",
    );
    assert_eq!(nothing_sent, 0);
}
