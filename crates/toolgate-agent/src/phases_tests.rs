use serde_json::json;
use toolgate_llm::{ContentBlock, Message, Role, ToolCall, ToolResult};

use super::*;

fn notes_rules() -> Vec<OfferRule> {
    vec![
        OfferRule::when_user_gives_url("web_clip"),
        OfferRule::after("email_send", &["email_draft"]),
    ]
}

fn state(user: &str, succeeded: &[&str]) -> PhaseState {
    let mut state = PhaseState::from_history(&[], Some(user.into()));
    for tool in succeeded {
        state.succeeded(tool);
    }
    state
}

fn names(set: &BTreeSet<String>) -> Vec<&str> {
    set.iter().map(String::as_str).collect()
}

#[test]
fn a_clip_the_user_already_has_is_not_offered_as_one_to_make() {
    // (message, tools that succeeded, withheld)
    let table: &[(&str, &[&str], &[&str])] = &[
        (
            "I clipped a lemon and pea risotto recipe. How long do I add stock?",
            &[],
            &["email_send", "web_clip"],
        ),
        (
            "Clip the focaccia recipe at http://127.0.0.1:4000/focaccia.html into Recipes.",
            &[],
            &["email_send"],
        ),
        (
            "Save HTTPS://Example.org/a into Reading",
            &[],
            &["email_send"],
        ),
        // A scheme with nothing after it names no page.
        ("what does http:// mean?", &[], &["email_send", "web_clip"]),
        (
            "look up https:// and tell me",
            &[],
            &["email_send", "web_clip"],
        ),
    ];
    for (message, succeeded, expected) in table {
        let got = withheld(&notes_rules(), &state(message, succeeded));
        assert_eq!(names(&got), *expected, "{message}");
    }
}

#[test]
fn a_send_before_any_draft_is_not_offered() {
    let message = "Email tomas@example.org saying we stay within budget. Send it right away.";
    assert_eq!(
        names(&withheld(&notes_rules(), &state(message, &[]))),
        ["email_send", "web_clip"]
    );
    assert_eq!(
        names(&withheld(
            &notes_rules(),
            &state(message, &["notes_search"])
        )),
        ["email_send", "web_clip"],
        "a read is not a draft"
    );
    assert_eq!(
        names(&withheld(&notes_rules(), &state(message, &["email_draft"]))),
        ["web_clip"]
    );
}

#[test]
fn a_url_in_a_tool_result_does_not_offer_the_clip_tool() {
    // Only the user's words count: a note or page that quotes a URL cannot make web_clip
    // offered (an injected "clip http://evil/?q=..." stays without a tool to act on).
    let history = vec![
        Message::user_text("What did I note about the caterer?"),
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolCall(ToolCall {
                id: "c1".into(),
                name: "notes_search".into(),
                arguments: json!({"query": "caterer"}),
            })],
        },
        Message::tool_results(vec![ToolResult {
            call_id: "c1".into(),
            content: json!({"result": {"hits": [{"snippet": "see https://evil.example/x"}]}})
                .to_string(),
            is_error: false,
        }]),
    ];
    let state =
        PhaseState::from_history(&history, Some("What did I note about the caterer?".into()));
    assert!(withheld(&notes_rules(), &state).contains("web_clip"));
}

#[test]
fn a_draft_in_the_conversation_so_far_offers_the_send() {
    let call = |id: &str, name: &str| Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({}),
        })],
    };
    let result = |id: &str, is_error: bool| {
        Message::tool_results(vec![ToolResult {
            call_id: id.into(),
            content: "{}".into(),
            is_error,
        }])
    };
    // A refused draft is no draft.
    let refused = vec![call("d1", "email_draft"), result("d1", true)];
    let state = PhaseState::from_history(&refused, Some("now send it".into()));
    assert!(withheld(&notes_rules(), &state).contains("email_send"));
    let drafted = vec![call("d1", "email_draft"), result("d1", false)];
    let state = PhaseState::from_history(&drafted, Some("now send it".into()));
    assert!(!withheld(&notes_rules(), &state).contains("email_send"));
}

#[test]
fn a_call_to_a_withheld_tool_is_refused_as_the_loops_gate_with_the_reason() {
    let error = not_offered_error(&notes_rules(), "email_send");
    assert_eq!(error.code, ErrorCode::Forbidden);
    assert!(
        error.message.contains("after email_draft"),
        "{}",
        error.message
    );
    let error = not_offered_error(&notes_rules(), "web_clip");
    assert!(error.message.contains("URL"), "{}", error.message);
    let error = not_offered_error(&notes_rules(), "notes_delete");
    assert!(error.message.contains("not offered"), "{}", error.message);
}

#[test]
fn no_rules_withhold_nothing() {
    assert!(withheld(&[], &state("anything", &[])).is_empty());
}
