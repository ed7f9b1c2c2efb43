//! The exits shadow replay runs with send nothing, even to a relay or a host named by its
//! address: a real SMTP server on 127.0.0.1 receives the mail the normal exits send, and
//! nothing from the recording ones.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::notes_mail::NotesWithMail;
use serde_json::json;
use toolgate_core::{
    ApprovalAnswer, ApprovalRequest, Approver, ApproverError, BoxFuture, CallRequest, Principal,
};
use toolgate_wiring::{Assembled, Seat, ToolsetName};

struct Yes;

impl Approver for Yes {
    fn decide<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async { Ok(ApprovalAnswer::Approve) })
    }
}

fn seat() -> Seat {
    Seat::new(Principal::local("local-user", &[])).with_approver(Arc::new(Yes))
}

/// Drafts a mail and sends it; whether the send succeeded.
async fn draft_and_send(ready: &Assembled, run: &str) -> bool {
    let call = |tool: &str, args: serde_json::Value| {
        CallRequest::new(ready.principal.clone(), run, tool, args)
    };
    let draft = ready
        .caller
        .call(call(
            "email_draft",
            json!({"to": ["bob@example.org"], "subject": "Hi", "body": "Lunch?"}),
        ))
        .await;
    let draft_id = draft.observation().expect("drafted").content["draft_id"].clone();
    let sent = ready
        .caller
        .call(call("email_send", json!({"draft_id": draft_id})))
        .await;
    sent.observation().is_some()
}

#[tokio::test]
async fn the_recording_exits_send_nothing_to_a_relay_named_by_its_address() {
    let world = NotesWithMail::new();
    // The normal exits deliver to the real relay on 127.0.0.1: the sink works.
    let normal =
        toolgate_wiring::dispatcher(ToolsetName::Notes, &world.store, &world.exits, seat())
            .unwrap();
    assert!(draft_and_send(&normal, "run-normal").await);
    assert_eq!(world.sink.received().len(), 1);

    let (recording, recorder) = toolgate_wiring::dispatcher_recording(
        ToolsetName::Notes,
        &world.store,
        &world.exits,
        seat(),
    )
    .unwrap();
    assert!(
        !draft_and_send(&recording, "run-replay").await,
        "the send must fail"
    );
    assert_eq!(
        world.sink.received().len(),
        1,
        "nothing more reached the relay"
    );
    assert_eq!(
        recorder.asked(),
        ["127.0.0.1"],
        "the relay's address was asked for and refused"
    );
}
