//! `toolgate serve --stdio` driven by the official MCP Inspector in CLI mode (installed, pinned,
//! by `scripts/setup.sh`), in both protocol eras: `legacy` (initialize, 2025-11-25) and `modern`
//! (2026-07-28: `server/discover` and per-request `_meta`, no initialize). Each Inspector run
//! spawns the real binary with HOME and `--db` in the test's own folder and prints one JSON
//! object; the assertions are on what the tools actually returned.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::node;
use serde_json::Value;

const ERAS: [&str; 2] = ["legacy", "modern"];

/// One Inspector run: `method` (with `extra` options) against `toolset`; the parsed `result`.
fn inspect(dir: &Path, era: &str, toolset: &str, method: &str, extra: &[&str]) -> Value {
    let db = dir.join(format!("{toolset}.sqlite"));
    let tag = format!("{era}-{toolset}-{}", method.replace('/', "_"));
    let out_path = dir.join(format!("{tag}.out"));
    let err_path = dir.join(format!("{tag}.err"));
    let mut child = Command::new(node::node())
        .arg(node::inspector())
        .args(["--cli", "--format", "json", "--protocol-era", era])
        .args(["--method", method])
        .args(extra)
        .args(["-e", &format!("HOME={}", dir.display())])
        // Options before `--`, the server command after it (so our flags are not the Inspector's).
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--stdio", "--toolset", toolset, "--db"])
        .arg(&db)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .expect("node runs the Inspector");
    let status = node::wait_bounded(&mut child, Duration::from_secs(60), "the Inspector");
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    assert!(
        status.success(),
        "{era} {method} {extra:?} failed ({status}):\nstdout: {stdout}\nstderr: {stderr}"
    );
    let mut reply: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("one JSON object on stdout ({e}): {stdout}"));
    reply["result"].take()
}

fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {result}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// A successful tool result's one text block, parsed (our tools answer JSON text).
fn tool_json(result: &Value) -> Value {
    assert_eq!(result["isError"], false, "{result}");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text block: {result}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("JSON text ({e}): {text}"))
}

#[test]
fn inspector_lists_and_calls_books_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    for era in ERAS {
        let listed = inspect(dir.path(), era, "books-v2", "tools/list", &[]);
        assert_eq!(
            tool_names(&listed),
            ["books_get", "books_search", "books_set_status", "books_tag"],
            "{era}"
        );
        let get = &listed["tools"][0];
        assert_eq!(get["annotations"]["readOnlyHint"], true, "{era}: {get}");
        assert_eq!(get["inputSchema"]["required"][0], "ids", "{era}: {get}");

        let found = inspect(
            dir.path(),
            era,
            "books-v2",
            "tools/call",
            &[
                "--tool-name",
                "books_search",
                "--tool-args-json",
                r#"{"author":"Suzanne Collins","sort":"year_asc"}"#,
            ],
        );
        let found = tool_json(&found);
        assert_eq!(found["result"]["total_matches"], 3, "{era}: {found}");
        let first = &found["result"]["books"][0];
        assert_eq!(
            first["title"], "The Hunger Games (The Hunger Games, #1)",
            "{era}"
        );
        let id = first["id"].as_i64().unwrap();

        let got = inspect(
            dir.path(),
            era,
            "books-v2",
            "tools/call",
            &[
                "--tool-name",
                "books_get",
                "--tool-arg",
                &format!("ids=[{id}]"),
            ],
        );
        let got = tool_json(&got);
        let book = &got["result"]["books"][0];
        assert_eq!(book["id"], id, "{era}: {got}");
        assert_eq!(book["authors"], "Suzanne Collins", "{era}: {got}");
        assert_eq!(book["year"], 2008, "{era}: {got}");
        assert_eq!(got["result"]["not_found"], Value::Array(vec![]), "{era}");
    }
}

#[test]
fn inspector_lists_and_calls_notes_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    for era in ERAS {
        let listed = inspect(dir.path(), era, "notes", "tools/list", &[]);
        let names = tool_names(&listed);
        for tool in ["notes_create", "notes_get", "notes_search", "notes_delete"] {
            assert!(names.contains(&tool.to_string()), "{era}: {names:?}");
        }
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "{era}: the list is in name order");

        // A write through the Inspector, then a search and a get that find exactly it.
        let title = format!("Inspector {era} checklist");
        let created = inspect(
            dir.path(),
            era,
            "notes",
            "tools/call",
            &[
                "--tool-name",
                "notes_create",
                "--tool-args-json",
                &serde_json::json!({"title": title, "body": "zanzibar quokka", "notebook": "Work"})
                    .to_string(),
            ],
        );
        let created = tool_json(&created);
        let note = &created["result"]["created"];
        assert_eq!(note["title"], title.as_str(), "{era}: {created}");
        assert_eq!(note["notebook"], "Work", "{era}: {created}");
        let id = note["id"].as_i64().unwrap();

        let found = inspect(
            dir.path(),
            era,
            "notes",
            "tools/call",
            &[
                "--tool-name",
                "notes_search",
                "--tool-arg",
                &format!("query={era} zanzibar"),
            ],
        );
        let found = tool_json(&found);
        assert_eq!(found["result"]["total_matches"], 1, "{era}: {found}");
        assert_eq!(found["result"]["hits"][0]["id"], id, "{era}: {found}");

        let got = inspect(
            dir.path(),
            era,
            "notes",
            "tools/call",
            &[
                "--tool-name",
                "notes_get",
                "--tool-arg",
                &format!("note_id={id}"),
            ],
        );
        let got = tool_json(&got);
        assert_eq!(got["result"]["id"], id, "{era}: {got}");
        assert_eq!(got["result"]["body"], "zanzibar quokka", "{era}: {got}");
        assert_eq!(got["result"]["title"], title.as_str(), "{era}: {got}");
    }
}
