//! `toolgate audit` on what a real server recorded: `toolgate serve --stdio` is driven by a real
//! MCP client (rmcp's) in a folder of the test's own, and records every decision in the SQLite
//! audit file (audit.sqlite beside the store file it audits); then the binary's `audit search`,
//! `show` and `export` read it back. Shows: the server records without being asked to; the
//! filters find the calls by principal, tool and outcome; `show` finds a call's record; both
//! exports hold exactly the records the search lists; hostile arguments reach the CSV inert;
//! bad filter values and a missing audit file are refused with what to do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use common::{text, toolgate};

/// Serves the notes over stdio (on `store`, args naming a file or a shared store), makes the
/// calls, and closes the session (the server exits and writes its audit out).
async fn record_calls(dir: &Path, store: &[&str]) {
    let mut args = vec!["serve", "--stdio", "--toolset", "notes"];
    args.extend_from_slice(store);
    let client = common::stdio::session(dir, &args).await;
    let calls = [
        json!({"query": "budget"}),
        json!({"query": "=HYPERLINK(\"http://evil.example\")"}),
        json!({"query": 7}),
    ];
    for arguments in calls {
        let params = CallToolRequestParams::new("notes_search".to_string())
            .with_arguments(arguments.as_object().cloned().unwrap());
        client.call_tool(params).await.expect("a tool result");
    }
    client.cancel().await.unwrap();
}

/// Runs the binary; an `audit` command reads the audit file beside the test's store unless
/// it names a shared store.
fn run_ok(dir: &Path, args: &[&str]) -> String {
    let mut args = args.to_vec();
    let file = dir.join("audit.sqlite");
    if args[0] == "audit" && !args.contains(&"--store") {
        args.extend(["--audit-db", file.to_str().unwrap()]);
    }
    let args = args.as_slice();
    let out = toolgate(args, dir);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

fn search_json(dir: &Path, filters: &[&str]) -> Vec<Value> {
    let mut args = vec!["audit", "search", "--json", "--limit", "1000"];
    args.extend_from_slice(filters);
    let page: Value = serde_json::from_str(&run_ok(dir, &args)).unwrap();
    assert!(page["next"].is_null(), "one page holds them all");
    page["entries"].as_array().unwrap().clone()
}

fn ids(entries: &[Value]) -> Vec<i64> {
    entries.iter().map(|e| e["id"].as_i64().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_serve_recorded_is_searched_shown_and_exported_by_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let db = dir.join("notes.sqlite");
    record_calls(dir, &["--db", db.to_str().unwrap()]).await;
    // The server exits once the session closes; wait for its audit file to hold the calls.
    // The audit lives beside the store file it audits.
    let audit_file = dir.join("audit.sqlite");
    let mut found = Vec::new();
    for _ in 0..100 {
        if audit_file.exists() {
            found = search_json(dir, &["--tool", "notes_search"]);
            if found.len() == 3 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found.iter().all(|e| e["principal"] == "local-user"));
    let refused = search_json(dir, &["--outcome", "invalid_argument"]);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["record"]["arguments"], json!({"query": 7}));
    assert_eq!(
        search_json(dir, &["--outcome", "ok", "--principal", "local-user"]).len(),
        2
    );
    assert!(search_json(dir, &["--principal", "someone-else"]).is_empty());
    assert!(search_json(dir, &["--since", "1d"]).len() >= 3);
    assert!(search_json(dir, &["--until", "2000-01-01"]).is_empty());

    // The table, and a page at a time.
    let table = run_ok(
        dir,
        &["audit", "search", "--tool", "notes_search", "--limit", "2"],
    );
    assert!(
        table.contains("notes_search") && table.contains("more: --after "),
        "{table}"
    );
    let cursor = table
        .lines()
        .last()
        .unwrap()
        .trim_start_matches("more: --after ");
    let rest = run_ok(
        dir,
        &[
            "audit",
            "search",
            "--tool",
            "notes_search",
            "--json",
            "--after",
            cursor,
        ],
    );
    let rest: Value = serde_json::from_str(&rest).unwrap();
    assert_eq!(ids(rest["entries"].as_array().unwrap()), ids(&found)[2..]);

    // A call's page.
    let call_id = refused[0]["call_id"].as_str().unwrap();
    let tree: Value =
        serde_json::from_str(&run_ok(dir, &["audit", "show", call_id, "--json"])).unwrap();
    assert_eq!(tree["entry"]["id"], refused[0]["id"]);
    assert_eq!(tree["children"], json!([]));
    let shown = run_ok(dir, &["audit", "show", call_id]);
    assert!(
        shown.contains("invalid_argument") && shown.contains("arguments: {\"query\":7}"),
        "{shown}"
    );

    // Both exports hold exactly the search's records.
    let everything = search_json(dir, &[]);
    let jsonl = run_ok(dir, &["audit", "export", "--format", "jsonl"]);
    let exported: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported, everything);
    let csv_path = dir.join("audit.csv");
    run_ok(
        dir,
        &[
            "audit",
            "export",
            "--format",
            "csv",
            "-o",
            csv_path.to_str().unwrap(),
        ],
    );
    let rows = common::read_csv(&std::fs::read_to_string(&csv_path).unwrap());
    assert_eq!(rows[0][0], "id");
    let rows = &rows[1..];
    let csv_ids: Vec<i64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    assert!(rows.iter().all(|r| r.len() == 17));
    assert_eq!(csv_ids, ids(&everything));
    let arguments: Vec<&str> = rows.iter().map(|r| r[16].as_str()).collect();
    assert!(
        arguments.iter().any(|a| a.contains("HYPERLINK")),
        "{arguments:?}"
    );
    for row in rows {
        for cell in row {
            assert!(
                !cell.starts_with(['=', '+', '-', '@']),
                "a formula cell: {cell:?}"
            );
        }
    }
}

#[test]
fn bad_filters_and_a_missing_audit_file_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let cases: [(&[&str], &str); 5] = [
        (
            &["audit", "search", "--outcome", "fine"],
            "is not an outcome",
        ),
        (
            &["audit", "search", "--approval", "maybe"],
            "is not an approval state",
        ),
        (
            &["audit", "search", "--since", "yesterday"],
            "is not a time",
        ),
        (&["audit", "search", "--after", "x"], "is not a page cursor"),
        (&["audit", "search"], "pass --audit-db FOLDER/audit.sqlite"),
    ];
    for (args, says) in cases {
        let out = toolgate(args, dir);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert!(
        !dir.join(".local/share/toolgate/audit.sqlite").exists(),
        "reading creates nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_shared_store_serve_records_in_its_table_and_audit_reads_it_there() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let url = toolgate_store::postgres::cluster::shared()
        .unwrap()
        .fresh_database()
        .unwrap();
    record_calls(dir, &["--store", &url]).await;
    // The server flushes its audit writer before it exits; wait for it to be gone.
    let mut found = Vec::new();
    for _ in 0..100 {
        found = search_json(dir, &["--store", &url, "--tool", "notes_search"]);
        if found.len() == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(found.len(), 3, "{found:#?}");
    let refused = search_json(dir, &["--store", &url, "--outcome", "error"]);
    assert_eq!(refused.len(), 1);
    let jsonl = run_ok(
        dir,
        &["audit", "export", "--format", "jsonl", "--store", &url],
    );
    let exported: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported, search_json(dir, &["--store", &url]));
    assert!(
        !dir.join(".local/share/toolgate/audit.sqlite").exists()
            && !dir.join("audit.sqlite").exists(),
        "with a shared store nothing goes to the file"
    );
}
