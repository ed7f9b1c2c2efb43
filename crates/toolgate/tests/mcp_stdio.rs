//! `toolgate serve --stdio` driven by a real MCP client (rmcp's), as a desktop host drives it:
//! the binary is spawned with HOME in a folder of the test's own, and every call goes through
//! the protocol. Each test is named after what it prevents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

async fn connect(dir: &Path, toolset: &str) -> RunningService<RoleClient, ()> {
    let db = dir.join(format!("{toolset}.sqlite"));
    let db = db.to_str().unwrap();
    common::stdio::session(dir, &["serve", "--stdio", "--toolset", toolset, "--db", db]).await
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> (bool, Value, String) {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    let result = client
        .call_tool(params)
        .await
        .expect("a tool result, not a protocol error");
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    (
        result.is_error.unwrap_or(false),
        result.structured_content.unwrap_or(Value::Null),
        text,
    )
}

#[tokio::test]
async fn host_sees_exactly_the_toolset_and_calls_reach_the_dispatcher() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(dir.path(), "books-v2").await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        names,
        ["books_get", "books_search", "books_set_status", "books_tag"]
    );

    let (is_error, _, text) = call(
        &client,
        "books_search",
        json!({"author": "Suzanne Collins"}),
    )
    .await;
    assert!(!is_error, "{text}");
    assert!(text.contains("Hunger Games"), "{text}");

    // Bad arguments: a tool error the model can act on, with our code; the server keeps serving.
    let (is_error, structured, text) =
        call(&client, "books_search", json!({"sort": "sideways"})).await;
    assert!(is_error, "{text}");
    assert_eq!(structured["code"], "invalid_argument");
    assert_eq!(structured["retryable"], false);

    // An unknown tool is a protocol error (the MCP spec), and the next call still works.
    let unknown = client
        .call_tool(CallToolRequestParams::new("books_delete_all"))
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    let (is_error, _, text) = call(&client, "books_get", json!({"ids": [1]})).await;
    assert!(!is_error, "{text}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn high_risk_call_from_a_host_is_denied_when_nobody_can_be_asked() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(dir.path(), "notes").await;
    let (is_error, _, text) = call(&client, "notes_search", json!({"query": "budget"})).await;
    assert!(!is_error, "{text}");
    let hit = serde_json::from_str::<Value>(&text).unwrap();
    let id = hit["result"]["hits"][0]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("a hit with an id: {text}"));
    // notes_delete is high risk: the server asks no one yet, so it is denied and nothing runs.
    let (is_error, structured, text) = call(&client, "notes_delete", json!({"note_id": id})).await;
    assert!(is_error, "{text}");
    assert_eq!(structured["code"], "approval_denied");
    let (is_error, _, text) = call(&client, "notes_get", json!({"note_id": id})).await;
    assert!(!is_error, "the note is still there: {text}");
    client.cancel().await.unwrap();
}
