//! Two versions of a tool side by side, through our MCP server: the host's list shows only the
//! current version; a host written against the earlier one pins it in the call's `_meta`
//! (`toolgate/version`) and is answered by it while its deprecation window is open; a version
//! that is not served, or a pin that is not a version, is a tool error saying so. Over
//! Streamable HTTP on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::spec::Milestone;
use toolgate_core::tool::{Tool, ToolBuilder, ToolOutput};
use toolgate_core::{Caller, Dispatcher, Effect, Principal, Registry, Risk};
use toolgate_mcp::{HttpLimits, McpServer, VERSION_META};

/// `books_search` at `version`: v1 takes `author` (deprecated until 2999-12-31), v2 `query`.
fn search(version: u32) -> Tool {
    let field = if version == 1 { "author" } else { "query" };
    let builder = ToolBuilder::<Value>::from_schema(
        "books_search",
        version,
        json!({"type": "object", "additionalProperties": false, "required": [field],
               "properties": {field: {"type": "string", "maxLength": 100}}}),
    )
    .describe("Searches books.", "you need books.", None, "the books.")
    .example("search", json!({field: "Collins"}))
    .policy(Risk::Low, Effect::Read, "It only reads.");
    let builder = if version == 1 {
        builder.deprecated(Milestone::Version(2), Milestone::Date("2999-12-31".into()))
    } else {
        builder
    };
    builder
        .read(move |_ctx, _args: Value| async move {
            Ok(ToolOutput::new(json!({"answered_by_version": version})))
        })
        .unwrap()
}

/// The version that answered, from the result's text.
fn answered_by_version(result: &Value) -> Value {
    let text = result["content"][0]["text"].as_str().unwrap();
    serde_json::from_str::<Value>(text).unwrap()["result"]["answered_by_version"].clone()
}

fn pinned(id: u64, arguments: Value, version: Value) -> Value {
    let mut message = support::tools_call(id, "books_search", arguments, json!({}));
    message["params"]["_meta"][VERSION_META] = version;
    message
}

#[tokio::test]
async fn a_host_pinned_to_the_earlier_version_is_answered_by_it_and_lists_only_the_current() {
    let registry = Arc::new(Registry::new(vec![search(2), search(1)]).unwrap());
    let principal = Principal::local("tester", &[]).with_catalogue(registry.names());
    let dispatcher = Dispatcher::new(Arc::clone(&registry)).unwrap();
    let server = McpServer::serving(&registry, Caller::new(dispatcher), principal, "versions");
    let listed: Vec<(String, Value)> = server
        .tools()
        .iter()
        .map(|t| (t.name.to_string(), Value::Object((*t.input_schema).clone())))
        .collect();
    assert_eq!(listed.len(), 1);
    assert!(
        listed[0].1.to_string().contains("query"),
        "the current schema: {listed:?}"
    );
    let spawned = support::spawn(server, HttpLimits::default()).await;
    let http = support::http();

    let cases = [
        (
            "unpinned: the current version",
            support::tools_call(1, "books_search", json!({"query": "Collins"}), json!({})),
            Some(2),
        ),
        (
            "pinned to the earlier version",
            pinned(2, json!({"author": "Collins"}), json!(1)),
            Some(1),
        ),
        (
            "pinned to the current version",
            pinned(3, json!({"query": "Collins"}), json!(2)),
            Some(2),
        ),
        (
            "pinned to a version never served",
            pinned(4, json!({"author": "Collins"}), json!(7)),
            None,
        ),
        (
            "a pin that is not a version",
            pinned(5, json!({"author": "Collins"}), json!("v1")),
            None,
        ),
    ];
    for (what, message, answered_by) in cases {
        let (status, reply) = support::call(&http, &spawned.url, &message).await;
        assert_eq!(status, 200, "{what}: {reply}");
        let result = &reply["result"];
        match answered_by {
            Some(version) => {
                assert_eq!(result["isError"], false, "{what}: {result}");
                assert_eq!(answered_by_version(result), version, "{what}: {result}");
            }
            // An unknown version is answered as an unknown tool is (a JSON-RPC error naming
            // what is served); a malformed pin as a tool error.
            None => assert!(
                result["isError"] == true || reply["error"]["message"].is_string(),
                "{what}: {reply}"
            ),
        }
    }
    let (_, never) = support::call(
        &http,
        &spawned.url,
        &pinned(6, json!({"author": "x"}), json!(7)),
    )
    .await;
    assert!(never.to_string().contains("served: 2, 1"), "{never}");
    let (_, bad) = support::call(
        &http,
        &spawned.url,
        &pinned(7, json!({"author": "x"}), json!(0)),
    )
    .await;
    assert!(bad.to_string().contains(VERSION_META), "{bad}");
}
