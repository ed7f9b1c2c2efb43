//! `[budgets]` in toolgate.toml, through the real binary: `serve --stdio` refuses a host's
//! calls past the run's budget with `budget_exhausted`, and a misspelt limit is refused with
//! the key named before anything starts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Stdio;

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

async fn serve_books(dir: &Path, config: &Path) -> RunningService<RoleClient, ()> {
    common::stdio::serve_configured(dir, config, "books-v2", "books.sqlite").await
}

async fn search(client: &RunningService<RoleClient, ()>) -> (bool, Value) {
    let params = CallToolRequestParams::new("books_search").with_arguments(
        json!({"author": "Suzanne Collins"})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let result = client.call_tool(params).await.unwrap();
    (
        result.is_error.unwrap_or(false),
        result.structured_content.unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn a_hosts_calls_past_the_configured_budget_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("budgets.toml");
    std::fs::write(&config, "[budgets.per_run]\ncalls = 2\n").unwrap();
    let client = serve_books(dir.path(), &config).await;
    assert!(!search(&client).await.0);
    assert!(!search(&client).await.0);
    let (is_error, structured) = search(&client).await;
    assert!(is_error, "{structured}");
    assert_eq!(structured["code"], "budget_exhausted", "{structured}");
    assert_eq!(structured["retryable"], false, "{structured}");
    client.cancel().await.unwrap();
}

#[test]
fn a_misspelt_limit_is_refused_with_its_key_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("budgets.toml");
    std::fs::write(&config, "[budgets.per_run]\ncallz = 2\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("--config")
        .arg(&config)
        .args(["serve", "--stdio", "--toolset", "books-v2"])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("callz"), "{stderr}");
    assert!(!dir.path().join(".local").exists(), "nothing was created");
}
