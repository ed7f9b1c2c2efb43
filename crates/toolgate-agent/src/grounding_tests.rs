use serde_json::json;
use toolgate_llm::{ContentBlock, Role, ToolCall, ToolResult};

use super::*;

fn values(text: &str) -> Vec<String> {
    figures(text).into_iter().map(|f| f.value).collect()
}

#[test]
fn figures_are_read_as_prose_writes_them_and_compared_by_value() {
    let cases: &[(&str, &[&str])] = &[
        ("We set $15,000 for the launch.", &["15000"]),
        ("the budget is 15000", &["15000"]),
        ("about 15k in total", &["15000"]),
        ("2.5m users", &["2500000"]),
        ("$1,234.56 spent", &["1234.56"]),
        ("due 2025-12-12", &["2025", "12"]),
        ("a sentence that ends on 48,000.", &["48000"]),
        ("JSON: {\"amount\":48000,\"offset\":0}", &["48000"]),
    ];
    for (text, wanted) in cases {
        assert_eq!(values(text), *wanted, "{text}");
    }
}

#[test]
fn small_numbers_and_versions_are_not_figures() {
    for text in [
        "Q1 with 2 people",
        "at 9:05",
        "version 1.2.3",
        "0.5 of it",
        "",
    ] {
        assert_eq!(values(text), Vec::<String>::new(), "{text}");
    }
    // A unit after the number is not a multiplier: "15km" is 15, not 15,000.
    assert_eq!(values("a 15km run"), ["15"]);
}

#[test]
fn a_made_up_figure_in_a_draft_is_ungrounded() {
    let arguments = json!({
        "to": ["jonas@example.org", "farah@example.org"],
        "subject": "Spring launch budget",
        "body": "Hi both,\n\nWe set the campaign budget to $100,000.\n\nBest,\nSam",
    });
    let seen = ["Draft one email to both jonas@example.org and farah@example.org"];
    let missing = ungrounded_figures(&arguments, &seen);
    assert_eq!(
        missing,
        [Figure {
            value: "100000".into(),
            written: "100,000".into()
        }]
    );
}

#[test]
fn a_figure_a_tool_result_or_the_user_gave_is_grounded_however_it_is_written() {
    let arguments = json!({"body": "The budget is $15,000, set on 2025-11-28; 12 of us agreed."});
    let seen = [
        "Tell them the spring budget. 12 of us agreed.",
        r#"{"hits":[{"title":"Spring launch","text":"Budget 15k, decided 2025-11-28"}]}"#,
    ];
    assert_eq!(ungrounded_figures(&arguments, &seen), []);
}

#[test]
fn numbers_given_as_json_numbers_are_not_checked() {
    let arguments = json!({"draft_id": 123, "ids": [45, 67], "subject": "no figures"});
    assert_eq!(ungrounded_figures(&arguments, &[]), []);
}

#[test]
fn only_the_users_words_and_tool_results_ground_a_figure_never_the_models_own() {
    let messages = vec![
        Message::user_text("Email Ann the Q1 budget."),
        Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text {
                    text: "The budget is $99,000.".into(),
                },
                ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "notes_search".into(),
                    arguments: json!({"query": "budget 77000"}),
                }),
            ],
        },
        Message::tool_results(vec![ToolResult {
            call_id: "c1".into(),
            content: r#"{"hits":[{"text":"Q1 budget: $48,000"}]}"#.into(),
            is_error: false,
        }]),
    ];
    let seen = seen_texts(&messages);
    let arguments = json!({"body": "Q1: $48,000 (not $99,000 or 77000)"});
    let missing: Vec<String> = ungrounded_figures(&arguments, &seen)
        .into_iter()
        .map(|f| f.written)
        .collect();
    assert_eq!(missing, ["99,000", "77000"]);
}

#[test]
fn the_refusal_names_the_figures_and_the_tool_to_look_them_up_with() {
    let rule = GroundRule::new("email_draft", "notes_search");
    let error = ungrounded_error(
        &rule,
        &[Figure {
            value: "100000".into(),
            written: "100,000".into(),
        }],
    );
    assert_eq!(error.code, ErrorCode::InvalidArgument);
    let text = error
        .to_model_value(toolgate_core::ErrorStyle::Teaching)
        .to_string();
    assert!(text.contains("100,000"), "{text}");
    assert!(text.contains("notes_search"), "{text}");
    assert!(text.contains("not run"), "{text}");
}

#[test]
fn a_tool_without_a_rule_is_not_checked() {
    let rules = [GroundRule::new("email_draft", "notes_search")];
    assert!(rule_for(&rules, "email_draft").is_some());
    assert!(rule_for(&rules, "notes_create").is_none());
}
