//! `[phases]` in toolgate.toml, through the real binary: `serve --stdio --toolset notes` with
//! `gate_writes = true` lists no tool that changes something but lists `plan_propose`, refuses a
//! write called by name with `forbidden` and a hint naming `plan_propose`, and nothing is
//! written; a misspelt key and an `ungated` name that is no tool are each refused with the key
//! or the name before anything is served.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Output, Stdio};

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

/// The notes toolset's tools that change something (its risk table).
const WRITES: [&str; 7] = [
    "notes_create",
    "notes_tag",
    "notes_delete",
    "create_todos_from_meeting",
    "email_draft",
    "email_send",
    "web_clip",
];

fn write_config(dir: &Path, text: &str) -> std::path::PathBuf {
    let config = dir.join("toolgate.toml");
    std::fs::write(&config, text).unwrap();
    config
}

async fn serve_notes(dir: &Path, config: &Path) -> RunningService<RoleClient, ()> {
    common::stdio::serve_configured(dir, config, "notes", "notes.sqlite").await
}

/// `serve --stdio --toolset notes` under `config`, with no host on stdin.
fn serve_refused(dir: &Path, config: &Path) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--config")
        .arg(config)
        .args(["serve", "--stdio", "--toolset", "notes"])
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn note_count(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT count(*) FROM notes", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_host_cannot_write_before_a_plan_is_approved() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "[phases]\ngate_writes = true\n");
    let client = serve_notes(dir.path(), &config).await;

    let listed: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(listed.iter().any(|n| n == "plan_propose"), "{listed:?}");
    assert!(listed.iter().any(|n| n == "notes_search"), "{listed:?}");
    for write in WRITES {
        assert!(!listed.iter().any(|n| n == write), "{write}: {listed:?}");
    }

    let before = note_count(&dir.path().join("notes.sqlite"));
    let params = CallToolRequestParams::new("notes_create").with_arguments(
        json!({"title": "Written without a plan", "body": "x"})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let result = client.call_tool(params).await.unwrap();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let structured = result.structured_content.clone().unwrap_or(Value::Null);
    assert_eq!(structured["code"], "forbidden", "{structured}");
    let text = serde_json::to_string(&result.content).unwrap();
    assert!(
        text.contains("forbidden") && text.contains("plan_propose"),
        "{text}"
    );
    assert_eq!(note_count(&dir.path().join("notes.sqlite")), before);
    client.cancel().await.unwrap();
}

#[test]
fn a_misspelt_phases_key_is_refused_with_its_key_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "[phases]\ngate_writess = true\n");
    let out = serve_refused(dir.path(), &config);
    assert!(!out.status.success());
    let stderr = common::text(&out.stderr);
    assert!(stderr.contains("gate_writess"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing was served");
    assert!(!dir.path().join(".local").exists(), "nothing was created");
}

#[test]
fn an_ungated_name_that_is_no_tool_is_refused_with_the_name_before_anything_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[phases]\ngate_writes = true\nungated = [\"no_such_tool\"]\n",
    );
    let out = serve_refused(dir.path(), &config);
    assert!(!out.status.success());
    let stderr = common::text(&out.stderr);
    assert!(stderr.contains("no_such_tool"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing was served");
}
