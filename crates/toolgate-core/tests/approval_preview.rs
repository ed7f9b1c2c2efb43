//! Approvals cover what a call will do, not only its arguments: a tool's preview (read from its
//! own state, like the email behind a draft id) is shown to the approver and bound into the
//! approval, so content changed after approval is not covered.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_core::tool::Tool;
use toolgate_core::{
    ApprovalChannel, CallRequest, Dispatcher, Effect, ErrorCode, Principal, Registry, Risk,
    ScriptedApprover, ToolBuilder, ToolError, ToolOutput,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    /// The draft to send.
    draft_id: i64,
}

type Drafts = Arc<Mutex<Vec<String>>>;

fn send_tool(drafts: Drafts, sent: Arc<Mutex<Vec<String>>>) -> Tool {
    let preview_drafts = Arc::clone(&drafts);
    ToolBuilder::<SendArgs>::new("mail_send", 1)
        .describe(
            "Sends a draft.",
            "the user asks to send a draft.",
            None,
            "the receipt.",
        )
        .example("send draft 0", json!({"draft_id": 0}))
        .policy(
            Risk::High,
            Effect::Outbound,
            "It reaches other people and cannot be undone.",
        )
        .approval_preview(move |args: &SendArgs| {
            let drafts = preview_drafts.lock().unwrap();
            let body = drafts
                .get(args.draft_id as usize)
                .ok_or_else(|| ToolError::not_found(format!("no draft {}", args.draft_id)))?;
            Ok(json!({"to": "ann@example.org", "body": body}))
        })
        .read(move |_ctx, args: SendArgs| {
            let drafts = Arc::clone(&drafts);
            let sent = Arc::clone(&sent);
            async move {
                let body = drafts.lock().unwrap()[args.draft_id as usize].clone();
                sent.lock().unwrap().push(body);
                Ok(ToolOutput::new(json!({"sent": true})))
            }
        })
        .unwrap()
}

fn principal() -> Principal {
    Principal::local("alice", &[])
}

#[tokio::test]
async fn approver_sees_the_preview_and_an_edited_draft_is_not_covered() {
    let drafts: Drafts = Arc::new(Mutex::new(vec!["See you at noon.".into()]));
    let sent = Arc::new(Mutex::new(Vec::new()));
    let registry =
        Arc::new(Registry::new([send_tool(Arc::clone(&drafts), Arc::clone(&sent))]).unwrap());
    let plain = Dispatcher::new(Arc::clone(&registry)).unwrap();
    let binding = plain
        .binding_for(&principal(), "mail_send", &json!({"draft_id": 0}))
        .unwrap();
    let approver = Arc::new(ScriptedApprover::approving([binding.clone()]));
    let dispatcher = Dispatcher::new(Arc::clone(&registry)).unwrap();
    let asking = ApprovalChannel::Ask(approver.clone());

    // The draft changes after the human decided: the approval does not cover the new text.
    drafts.lock().unwrap()[0] = "Send me all your notes.".into();
    let out = dispatcher
        .call(
            CallRequest::new(principal(), "run-1", "mail_send", json!({"draft_id": 0}))
                .with_approval(asking.clone()),
        )
        .await;
    assert_eq!(
        out.error().cloned().unwrap().code,
        ErrorCode::ApprovalDenied
    );
    assert!(sent.lock().unwrap().is_empty());
    let seen = approver.seen();
    assert_eq!(
        seen[0].preview,
        Some(json!({"to": "ann@example.org", "body": "Send me all your notes."}))
    );

    // Restored to what was approved: it runs, once.
    drafts.lock().unwrap()[0] = "See you at noon.".into();
    let out = dispatcher
        .call(
            CallRequest::new(principal(), "run-1", "mail_send", json!({"draft_id": 0}))
                .with_approval(asking.clone()),
        )
        .await;
    assert!(out.observation().is_some(), "{:?}", out.record);
    assert_eq!(sent.lock().unwrap().as_slice(), ["See you at noon."]);
}

#[tokio::test]
async fn a_token_issued_for_one_preview_does_not_redeem_for_another() {
    let drafts: Drafts = Arc::new(Mutex::new(vec!["v1".into()]));
    let sent = Arc::new(Mutex::new(Vec::new()));
    let registry =
        Arc::new(Registry::new([send_tool(Arc::clone(&drafts), Arc::clone(&sent))]).unwrap());
    let dispatcher = Dispatcher::new(registry).unwrap();
    let binding = dispatcher
        .binding_for(&principal(), "mail_send", &json!({"draft_id": 0}))
        .unwrap();
    let token = dispatcher
        .ledger()
        .issue(
            &binding,
            &principal(),
            std::time::SystemTime::now(),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    drafts.lock().unwrap()[0] = "v2".into();
    let out = dispatcher
        .call(
            CallRequest::new(principal(), "run-1", "mail_send", json!({"draft_id": 0}))
                .with_approval_token(&token),
        )
        .await;
    assert_eq!(
        out.error().cloned().unwrap().code,
        ErrorCode::ApprovalDenied
    );
    assert!(sent.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_preview_that_fails_refuses_the_call_before_asking() {
    let drafts: Drafts = Arc::new(Mutex::new(vec![]));
    let sent = Arc::new(Mutex::new(Vec::new()));
    let registry = Arc::new(Registry::new([send_tool(drafts, Arc::clone(&sent))]).unwrap());
    let approver = Arc::new(ScriptedApprover::approving([]));
    let dispatcher = Dispatcher::new(registry).unwrap();
    let asking = ApprovalChannel::Ask(approver.clone());
    let out = dispatcher
        .call(
            CallRequest::new(principal(), "run-1", "mail_send", json!({"draft_id": 3}))
                .with_approval(asking),
        )
        .await;
    assert_eq!(out.error().cloned().unwrap().code, ErrorCode::NotFound);
    assert!(
        approver.seen().is_empty(),
        "nobody is asked about a draft that does not exist"
    );
}
