//! Budgets reach a host through our MCP server: the calls past a principal's budget are
//! answered as a tool error `budget_exhausted` (never run), over Streamable HTTP, whatever
//! the session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgate_core::budget::{BudgetConfig, Budgets, Limits};
use toolgate_core::tool::{Tool, ToolBuilder, ToolOutput};
use toolgate_core::{Caller, Dispatcher, Effect, Principal, Registry, Risk};
use toolgate_mcp::{HttpLimits, McpServer};

fn counted_echo(ran: Arc<AtomicUsize>) -> Tool {
    ToolBuilder::<Value>::from_schema(
        "echo_text",
        1,
        json!({"type": "object", "additionalProperties": false, "required": ["text"],
               "properties": {"text": {"type": "string", "maxLength": 100}}}),
    )
    .describe("Echoes its text.", "testing.", None, "the text.")
    .policy(Risk::Low, Effect::Read, "It changes nothing.")
    .read(move |_ctx, args: Value| {
        ran.fetch_add(1, Ordering::SeqCst);
        async move { Ok(ToolOutput::new(json!({"echo": args["text"]}))) }
    })
    .unwrap()
}

#[tokio::test]
async fn a_hosts_calls_past_the_principals_budget_are_refused_and_never_run() {
    let ran = Arc::new(AtomicUsize::new(0));
    let registry = Arc::new(Registry::new(vec![counted_echo(Arc::clone(&ran))]).unwrap());
    let principal = Principal::local("tester", &[]).with_catalogue(registry.names());
    let budgets = Budgets::new(BudgetConfig {
        per_principal: Limits {
            calls: Some(2),
            ..Limits::default()
        },
        ..BudgetConfig::default()
    });
    let dispatcher = Dispatcher::new(Arc::clone(&registry))
        .unwrap()
        .with_budgets(Arc::new(budgets));
    let server = McpServer::serving(&registry, Caller::new(dispatcher), principal, "budget-test");
    let spawned = support::spawn(server, HttpLimits::default()).await;
    let http = support::http();

    let mut answers = Vec::new();
    for id in 1..=3 {
        let (status, message) = support::call(
            &http,
            &spawned.url,
            &support::tools_call(id, "echo_text", json!({"text": "hi"}), json!({})),
        )
        .await;
        assert_eq!(status, 200, "{message}");
        answers.push(message);
    }
    assert_eq!(answers[0]["result"]["isError"], false, "{}", answers[0]);
    assert_eq!(answers[1]["result"]["isError"], false, "{}", answers[1]);
    let refused = &answers[2]["result"];
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused.to_string().contains("budget_exhausted"),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .contains("principal's budget of 2 calls"),
        "{refused}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 2, "the third call never ran");
}
