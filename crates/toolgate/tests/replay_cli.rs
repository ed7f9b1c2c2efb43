//! `toolgate replay`, the built binary on the committed eval runs: against the toolset that
//! recorded them nothing differs; books-v2's calls against books-v3 show v3's refusals; a copy
//! with one call's arguments changed shows exactly that call; the user's store file is never
//! written; input that is not decision records is refused by line with exit 2.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The committed eval: books-v2 and books-v3 on the dev tasks, one run each.
fn committed_runs() -> PathBuf {
    repo().join("evals/runs/books-v3-dev-embedded/runs.jsonl")
}

fn replay(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("replay")
        .args(args)
        .current_dir(dir)
        .env_remove("XDG_DATA_HOME")
        .env("HOME", dir)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn report(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(output), stderr(output)))
}

/// The calls whose difference is not `same`: (call id, kind).
fn differences(report: &Value) -> Vec<(String, String)> {
    report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["difference"]["kind"] != "same")
        .map(|c| {
            (
                c["call_id"].as_str().unwrap().to_string(),
                c["difference"]["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_committed_eval_replayed_against_its_own_toolsets_shows_no_difference() {
    let dir = tempfile::tempdir().unwrap();
    let runs = committed_runs();
    for toolset in ["books-v2", "books-v3"] {
        let output = replay(
            dir.path(),
            &[runs.to_str().unwrap(), "--toolset", toolset, "--json"],
        );
        let report = report(&output);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{toolset}: {}",
            stderr(&output)
        );
        assert_eq!(
            differences(&report),
            Vec::<(String, String)>::new(),
            "{toolset}"
        );
        assert_eq!(report["calls"].as_array().unwrap().len(), 13, "{toolset}");
    }
}

#[test]
fn books_v2_calls_against_books_v3_show_the_writes_v3_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let runs = committed_runs();
    let args = [
        runs.to_str().unwrap(),
        "--recorded",
        "books-v2",
        "--toolset",
        "books-v3",
    ];
    let output = replay(dir.path(), &args);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}{}", stderr(&output));
    assert!(
        text.contains("books_tag: now refused at validate (invalid_argument)"),
        "{text}"
    );
    assert!(text.contains("same 5, now refused 8"), "{text}");

    let json = report(&replay(dir.path(), &[&args[..], &["--json"]].concat()));
    let found = differences(&json);
    assert_eq!(found.len(), 8, "{found:?}");
    for call in json["calls"].as_array().unwrap() {
        let refused = call["difference"]["kind"] == "now_refused";
        let write = matches!(
            call["tool"].as_str(),
            Some("books_tag" | "books_set_status")
        );
        assert_eq!(refused, write, "{call}");
    }

    // Known differences accepted: the replay passes, and says which entry accepted them.
    let accept = dir.path().join("accept.json");
    std::fs::write(
        &accept,
        r#"{"accept": [
            {"tool": "books_tag", "kind": "now_refused", "reason": "v3 writes take the search's filters, not ids"},
            {"tool": "books_set_status", "kind": "now_refused", "reason": "likewise"}
        ]}"#,
    )
    .unwrap();
    let accepted = replay(
        dir.path(),
        &[&args[..], &["--accept", accept.to_str().unwrap()]].concat(),
    );
    assert_eq!(accepted.status.code(), Some(0), "{}", stdout(&accepted));
    assert!(
        stdout(&accepted).contains("(8 accepted)"),
        "{}",
        stdout(&accepted)
    );
}

#[test]
fn a_changed_copy_of_the_trace_shows_exactly_the_change() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(committed_runs()).unwrap();
    // books-v2's first run (collins-count): its one books_search now asks for 0 results.
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let first = lines
        .iter_mut()
        .find(|r| r["toolset"] == "books-v2")
        .unwrap();
    let task = first["task"].as_str().unwrap().to_string();
    first["calls"][0]["arguments"]["limit"] = Value::from(0);
    let changed = dir.path().join("changed.jsonl");
    let body: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&changed, body.join("\n") + "\n").unwrap();

    let output = replay(
        dir.path(),
        &[changed.to_str().unwrap(), "--toolset", "books-v2", "--json"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = report(&output);
    assert_eq!(
        differences(&report),
        [(format!("books-v2/{task}/0#1"), "now_refused".to_string())]
    );
    let call = &report["calls"][0];
    assert_eq!(call["difference"]["stage"], "validate", "{call}");
    assert_eq!(call["difference"]["code"], "invalid_argument", "{call}");
}

#[test]
fn a_given_store_is_copied_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("mine.sqlite");
    let init = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["books", "init", "--db", store.to_str().unwrap()])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", stderr(&init));
    let before = std::fs::read(&store).unwrap();
    // books-v2's runs include writes (books_tag, books_set_status), each on a fresh copy.
    let runs = committed_runs();
    let output = replay(
        dir.path(),
        &[
            runs.to_str().unwrap(),
            "--toolset",
            "books-v2",
            "--store",
            store.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert_eq!(
        std::fs::read(&store).unwrap(),
        before,
        "the store was written"
    );
    let conn = rusqlite::Connection::open(&store).unwrap();
    let written: i64 = conn
        .query_row(
            "SELECT count(*) FROM books WHERE my_tags != '' OR my_status IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(written, 0);
}

#[test]
fn lines_that_are_not_decision_records_exit_2_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let record = r#"{"event":"tool_call","gen_ai.tool.call.id":"c1","gen_ai.tool.name":"books_get","run_id":"r1","principal":"alice","tenant":"local","arguments":{"ids":[1]},"stage":"done","outcome":"ok","approval":{"status":"not_needed"}}"#;
    let cases = [
        (format!("{record}\nthis is not json\n"), "line 2: not JSON"),
        (
            format!("{record}\n{{\"greeting\":\"hello\"}}\n"),
            "line 2: not a decision record",
        ),
        (
            r#"{"event":"tool_call","gen_ai.tool.name":"books_get"}"#.to_string(),
            "line 1: a `tool_call` line without `arguments`",
        ),
        (
            r#"{"event":"model_turn"}"#.to_string(),
            "no calls to replay",
        ),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad-{i}.jsonl"));
        std::fs::write(&path, text).unwrap();
        let output = replay(
            dir.path(),
            &[path.to_str().unwrap(), "--toolset", "books-v2"],
        );
        assert_eq!(
            output.status.code(),
            Some(2),
            "{expected}: {}",
            stdout(&output)
        );
        let err = stderr(&output);
        assert!(err.contains(expected), "{err}\n  expected: {expected}");
        assert!(err.contains(&format!("bad-{i}.jsonl")), "{err}");
    }
    // A good trace of decision records replays, compared on decisions only.
    let good = dir.path().join("good.jsonl");
    let asked = r#"{"event":"tool_call","gen_ai.tool.call.id":"c2","gen_ai.tool.name":"books_nope","run_id":"r1","principal":"alice","arguments":{},"stage":"done","outcome":"ok","approval":{"status":"not_needed"}}"#;
    std::fs::write(
        &good,
        format!("{{\"event\":\"model_turn\"}}\n{record}\n{asked}\n"),
    )
    .unwrap();
    let output = replay(
        dir.path(),
        &[good.to_str().unwrap(), "--toolset", "books-v2"],
    );
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}{}", stderr(&output));
    assert!(
        text.contains("c2 books_nope: now refused at resolve (not_found)"),
        "{text}"
    );
    assert!(
        text.contains("2 calls compared on their decision only"),
        "{text}"
    );
    assert!(text.contains("left out: 1 model_turn"), "{text}");
}

#[test]
fn a_committed_trace_of_decision_records_replays_with_its_requests_recorded_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let trace = repo().join("evals/runs/sandbox-attack-embedded/ask-code-trace.jsonl");
    let output = replay(
        dir.path(),
        &[trace.to_str().unwrap(), "--toolset", "notes-v2", "--json"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = report(&output);
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 8);
    for call in calls {
        assert_eq!(call["difference"]["kind"], "same", "{call}");
        assert_eq!(call["compared"], "decision_only", "{call}");
        let sent = call["would_send"][0].as_str().unwrap();
        assert!(sent.starts_with("GET https://en.wikipedia.org/"), "{sent}");
    }
    assert_eq!(report["skipped"]["model_turn"], 8);
}

#[test]
fn against_a_catalogue_with_one_tool_removed_exactly_that_tools_calls_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let runs = committed_runs();
    let released = repo().join("catalogue/releases/books-v2.json");
    let own = replay(
        dir.path(),
        &[
            runs.to_str().unwrap(),
            "--toolset",
            "books-v2",
            "--against",
            released.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(own.status.code(), Some(0), "{}", stderr(&own));
    assert_eq!(differences(&report(&own)), Vec::<(String, String)>::new());

    let mut snapshot: Value =
        serde_json::from_str(&std::fs::read_to_string(&released).unwrap()).unwrap();
    snapshot["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "books_tag");
    let changed = dir.path().join("without-tag.json");
    std::fs::write(&changed, snapshot.to_string()).unwrap();
    let output = replay(
        dir.path(),
        &[
            runs.to_str().unwrap(),
            "--toolset",
            "books-v2",
            "--against",
            changed.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = report(&output);
    let calls = report["calls"].as_array().unwrap();
    let tag_calls = calls.iter().filter(|c| c["tool"] == "books_tag").count();
    assert!(tag_calls > 0);
    for call in calls {
        let expected = if call["tool"] == "books_tag" {
            serde_json::json!({"kind": "now_refused", "stage": "resolve", "code": "not_found"})
        } else {
            serde_json::json!({"kind": "same"})
        };
        assert_eq!(call["difference"], expected, "{call}");
    }

    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"tools\": []}").unwrap();
    let output = replay(
        dir.path(),
        &[
            runs.to_str().unwrap(),
            "--toolset",
            "books-v2",
            "--against",
            broken.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--against"), "{}", stderr(&output));
}

/// A trace a real `serve --stdio` writes now: its records carry the result's shape, so its
/// replay compares decision and shape; a copy whose one record says otherwise differs there.
#[tokio::test]
async fn a_trace_serve_writes_now_replays_on_decision_and_shape() {
    use rmcp::model::CallToolRequestParams;
    let dir = tempfile::tempdir().unwrap();
    let (db, trace) = (
        dir.path().join("books.sqlite"),
        dir.path().join("trace.jsonl"),
    );
    let (db_arg, trace_arg) = (db.to_str().unwrap(), trace.to_str().unwrap());
    let args = [
        "serve",
        "--stdio",
        "--toolset",
        "books-v2",
        "--db",
        db_arg,
        "--trace",
        trace_arg,
    ];
    let client = common::stdio::session(dir.path(), &args).await;
    for (tool, arguments) in [
        (
            "books_search",
            serde_json::json!({"author": "Suzanne Collins"}),
        ),
        ("books_get", serde_json::json!({"ids": [1]})),
    ] {
        let params = CallToolRequestParams::new(tool)
            .with_arguments(arguments.as_object().cloned().unwrap());
        let result = client.call_tool(params).await.unwrap();
        assert_eq!(result.is_error, Some(false), "{result:?}");
    }
    client.cancel().await.unwrap();

    let same = replay(
        dir.path(),
        &[
            trace_arg,
            "--toolset",
            "books-v2",
            "--store",
            db_arg,
            "--json",
        ],
    );
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    let replayed = report(&same);
    let calls = replayed["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{replayed}");
    for call in calls {
        assert_eq!(call["compared"], "decision_and_shape", "{call}");
        assert_eq!(call["difference"]["kind"], "same", "{call}");
    }

    // A copy whose books_get record says the result had one more key: exactly that call
    // differs, and on its result.
    let text = std::fs::read_to_string(&trace).unwrap();
    let changed: Vec<String> = text
        .lines()
        .map(|line| {
            let mut event: Value = serde_json::from_str(line).unwrap();
            if event["gen_ai.tool.name"] == "books_get" {
                event["result_shape"]["object"]["extra"] = Value::String("string".into());
            }
            event.to_string()
        })
        .collect();
    let copy = dir.path().join("changed.jsonl");
    std::fs::write(&copy, changed.join("\n")).unwrap();
    let output = replay(
        dir.path(),
        &[
            copy.to_str().unwrap(),
            "--toolset",
            "books-v2",
            "--store",
            db_arg,
            "--json",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = report(&output);
    let differing: Vec<&Value> = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["difference"]["kind"] != "same")
        .collect();
    assert_eq!(differing.len(), 1, "{report}");
    assert_eq!(differing[0]["tool"], "books_get", "{report}");
    assert_eq!(
        differing[0]["difference"]["kind"], "different_result",
        "{report}"
    );
    assert!(differing[0].to_string().contains("extra"), "{report}");
}
