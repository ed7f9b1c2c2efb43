//! Budgets through the dispatcher: a run's calls, writes, approvals and outbound requests end
//! with `budget_exhausted` and a record, whether the model calls directly or a script calls
//! through its handler; another run and another principal spend apart. Each test is named
//! after what it prevents.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_core::budget::{BudgetConfig, Budgets, Limits, Spend, charge_in_call};
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{
    ApprovalChannel, CallOutcome, CallRequest, DecisionRecord, Dispatcher, Effect, ErrorCode,
    Origin, Principal, Receipt, Registry, Risk, ScriptedApprover, Tool, ToolBuilder, ToolError,
    ToolOutput,
};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Times {
    n: u32,
}

fn read_tool() -> Tool {
    ToolBuilder::<NoArgs>::new("demo_read", 1)
        .describe("Reads.", "always.", None, "ok.")
        .policy(Risk::Low, Effect::Read, "It only reads.")
        .read(|_ctx, _args: NoArgs| async move { Ok(ToolOutput::new(json!({"ok": true}))) })
        .unwrap()
}

fn write_tool(ran: Arc<AtomicUsize>) -> Tool {
    ToolBuilder::<NoArgs>::new("demo_write", 1)
        .describe("Writes.", "always.", None, "ok.")
        .policy(Risk::Low, Effect::UndoableWrite, "It writes a row.")
        .write(move |_ctx, _args: NoArgs| {
            let ran = Arc::clone(&ran);
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                // Enough to count that it ran; a store is not needed to spend a write.
                Err::<Receipt, _>(ToolError::internal("the store is read-only in this test"))
            }
        })
        .unwrap()
}

fn risky_tool() -> Tool {
    ToolBuilder::<NoArgs>::new("demo_risky", 1)
        .describe("Sends.", "always.", None, "ok.")
        .policy(Risk::High, Effect::Outbound, "It cannot be called back.")
        .read(|_ctx, _args: NoArgs| async move { Ok(ToolOutput::new(json!({"sent": true}))) })
        .unwrap()
}

/// Sends `n` outbound requests, each charged as the egress exit charges them.
fn fetch_tool() -> Tool {
    ToolBuilder::<Times>::new("demo_fetch", 1)
        .describe("Fetches pages.", "always.", None, "how many were sent.")
        .policy(Risk::Low, Effect::Read, "It only reads.")
        .read(|_ctx, args: Times| async move {
            for sent in 0..args.n {
                if let Err(exhausted) = charge_in_call(Spend::Outbound) {
                    return Err(ToolError::new(
                        ErrorCode::BudgetExhausted,
                        format!("after {sent} requests: {exhausted}"),
                    ));
                }
            }
            Ok(ToolOutput::new(json!({"sent": args.n})))
        })
        .unwrap()
}

/// A script: calls `demo_read` `n` times through the dispatcher, as code mode's calls do.
fn script_tool() -> Tool {
    ToolBuilder::<Times>::new("demo_script", 1)
        .describe("Runs a script.", "always.", None, "the outcomes.")
        .policy(Risk::Low, Effect::Read, "Each call it makes is checked.")
        .read(|ctx, args: Times| async move {
            let mut outcomes = Vec::new();
            for _ in 0..args.n {
                let out = ctx
                    .tools
                    .call(Origin::Sandbox, "demo_read", json!({}))
                    .await;
                outcomes.push(out.record.outcome.as_str());
            }
            Ok(ToolOutput::new(json!({ "outcomes": outcomes })))
        })
        .unwrap()
}

struct Fixture {
    dispatcher: Dispatcher,
    trace: Arc<MemoryTrace>,
    written: Arc<AtomicUsize>,
}

fn fixture(per_run: Limits) -> Fixture {
    let written = Arc::new(AtomicUsize::new(0));
    let registry = Registry::new([
        read_tool(),
        write_tool(Arc::clone(&written)),
        risky_tool(),
        fetch_tool(),
        script_tool(),
    ])
    .unwrap();
    let trace = Arc::new(MemoryTrace::default());
    let budgets = Budgets::new(BudgetConfig {
        per_run,
        ..BudgetConfig::default()
    });
    let dispatcher = Dispatcher::new(Arc::new(registry))
        .unwrap()
        .with_trace(trace.clone())
        .with_budgets(Arc::new(budgets));
    Fixture {
        dispatcher,
        trace,
        written,
    }
}

fn alice() -> Principal {
    Principal::local("alice", &[])
}

impl Fixture {
    async fn call(&self, run: &str, tool: &str, args: serde_json::Value) -> CallOutcome {
        self.dispatcher
            .call(CallRequest::new(alice(), run, tool, args))
            .await
    }
}

fn code(outcome: &CallOutcome) -> Option<ErrorCode> {
    outcome.error().map(|e| e.code)
}

#[tokio::test]
async fn a_run_cannot_call_past_its_budget_and_the_refusal_is_recorded() {
    let fx = fixture(Limits {
        calls: Some(2),
        ..Limits::default()
    });
    assert_eq!(code(&fx.call("run-1", "demo_read", json!({})).await), None);
    assert_eq!(code(&fx.call("run-1", "demo_read", json!({})).await), None);
    let refused = fx.call("run-1", "demo_read", json!({})).await;
    assert_eq!(code(&refused), Some(ErrorCode::BudgetExhausted));
    let message = &refused.error().unwrap().message;
    assert!(message.contains("run's budget of 2 calls"), "{message}");
    let records = fx.trace.records::<DecisionRecord>();
    assert_eq!(
        records.last().unwrap().outcome.as_str(),
        "budget_exhausted",
        "{:?}",
        records.last()
    );
    // Another run starts from zero.
    assert_eq!(code(&fx.call("run-2", "demo_read", json!({})).await), None);
}

#[tokio::test]
async fn a_write_past_the_write_budget_never_runs() {
    let fx = fixture(Limits {
        writes: Some(1),
        ..Limits::default()
    });
    let first = fx.call("run-1", "demo_write", json!({})).await;
    assert_eq!(code(&first), Some(ErrorCode::Internal));
    let refused = fx.call("run-1", "demo_write", json!({})).await;
    assert_eq!(code(&refused), Some(ErrorCode::BudgetExhausted));
    assert_eq!(fx.written.load(Ordering::SeqCst), 1);
    // Reads still run.
    assert_eq!(code(&fx.call("run-1", "demo_read", json!({})).await), None);
}

#[tokio::test]
async fn a_script_cannot_spend_past_its_runs_budget() {
    let fx = fixture(Limits {
        calls: Some(3),
        ..Limits::default()
    });
    // The script's own call is one; two nested calls fit, the rest are refused.
    let outcome = fx.call("run-1", "demo_script", json!({"n": 4})).await;
    let observation = outcome.observation().expect("the script ran");
    assert_eq!(
        observation.content["outcomes"],
        json!(["ok", "ok", "budget_exhausted", "budget_exhausted"])
    );
    assert_eq!(
        code(&fx.call("run-1", "demo_read", json!({})).await),
        Some(ErrorCode::BudgetExhausted)
    );
}

#[tokio::test]
async fn nobody_is_asked_past_the_approval_budget() {
    let fx = fixture(Limits {
        approvals: Some(1),
        ..Limits::default()
    });
    let approver = Arc::new(ScriptedApprover::approving(Vec::<String>::new()));
    let ask = |run: &str| {
        CallRequest::new(alice(), run, "demo_risky", json!({}))
            .with_approval(ApprovalChannel::Ask(approver.clone()))
    };
    let first = fx.dispatcher.call(ask("run-1")).await;
    assert_eq!(code(&first), Some(ErrorCode::ApprovalDenied));
    let second = fx.dispatcher.call(ask("run-1")).await;
    assert_eq!(code(&second), Some(ErrorCode::BudgetExhausted));
    assert_eq!(approver.seen().len(), 1, "the person was asked once");
}

#[tokio::test]
async fn outbound_requests_are_charged_to_the_call_that_sends_them() {
    let fx = fixture(Limits {
        outbound: Some(3),
        ..Limits::default()
    });
    assert_eq!(
        code(&fx.call("run-1", "demo_fetch", json!({"n": 2})).await),
        None
    );
    let refused = fx.call("run-1", "demo_fetch", json!({"n": 2})).await;
    assert_eq!(code(&refused), Some(ErrorCode::BudgetExhausted));
    let message = &refused.error().unwrap().message;
    assert!(message.starts_with("after 1 requests"), "{message}");
    assert_eq!(
        code(&fx.call("run-2", "demo_fetch", json!({"n": 3})).await),
        None
    );
}

#[test]
fn outside_a_call_nothing_is_charged() {
    assert!(charge_in_call(Spend::Outbound).is_ok());
}
