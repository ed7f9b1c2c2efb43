use super::*;
use serde_json::json;

fn call(round: u32, tool: &str, error: Option<&str>) -> CallSummary {
    CallSummary {
        round,
        call_id: format!("{tool}-{round}"),
        tool: tool.into(),
        arguments: json!({}),
        is_error: error.is_some(),
        error: error.map(str::to_string),
        result_bytes: 10,
        duration_us: 1,
        answered_from_round: None,
    }
}

#[test]
fn only_refusals_the_model_can_fix_by_changing_its_call_count() {
    for code in ErrorCode::ALL {
        let expected = matches!(code, ErrorCode::InvalidArgument | ErrorCode::NotFound);
        assert_eq!(fixable(code), expected, "{}", code.as_str());
    }
}

#[test]
fn a_policy_refusal_is_never_pushed_to_be_tried_again() {
    for code in ["forbidden", "unauthorized", "approval_denied"] {
        let calls = [call(1, "email_send", Some(code))];
        assert_eq!(refused_call(&calls, 1), None, "{code}");
    }
}

#[test]
fn which_rounds_get_a_retry() {
    let refused = Some(RefusedCall {
        tool: "books_update".into(),
        code: "invalid_argument".into(),
    });
    let cases: Vec<(&str, Vec<CallSummary>, u32, Option<RefusedCall>)> = vec![
        (
            "the last round's only call was refused with invalid_argument",
            vec![call(1, "books_update", Some("invalid_argument"))],
            1,
            refused.clone(),
        ),
        (
            "an earlier round's refusal, fixed since",
            vec![
                call(1, "books_update", Some("invalid_argument")),
                call(2, "books_update", None),
            ],
            2,
            None,
        ),
        (
            "a refusal beside a success in the same round",
            vec![
                call(1, "books_search", None),
                call(1, "books_update", Some("invalid_argument")),
            ],
            1,
            None,
        ),
        (
            "a dependency failure beside a fixable refusal: the fixable one is named",
            vec![
                call(1, "web_clip", Some("transient_dependency")),
                call(1, "books_update", Some("invalid_argument")),
            ],
            1,
            refused.clone(),
        ),
        (
            "only failures of the world",
            vec![call(1, "web_clip", Some("transient_dependency"))],
            1,
            None,
        ),
        ("no call at all", vec![], 1, None),
        (
            "an unknown code is not fixable",
            vec![call(1, "books_update", Some("something_new"))],
            1,
            None,
        ),
        (
            "not_found (a guessed id) is fixable",
            vec![call(3, "notes_tag", Some("not_found"))],
            3,
            Some(RefusedCall {
                tool: "notes_tag".into(),
                code: "not_found".into(),
            }),
        ),
    ];
    for (what, calls, round, expected) in cases {
        assert_eq!(refused_call(&calls, round), expected, "{what}");
    }
}

#[test]
fn the_retry_names_only_the_tool_and_our_code_and_offers_no_way_out_when_a_call_is_required() {
    let call = RefusedCall {
        tool: "books_update".into(),
        code: "invalid_argument".into(),
    };
    for must_call in [false, true] {
        let text = retry_text(&call, must_call);
        assert!(
            text.contains("books_update") && text.contains("invalid_argument"),
            "{text}"
        );
        assert!(text.contains("Make the corrected call now"), "{text}");
        assert_eq!(text.contains("tell me why instead"), !must_call, "{text}");
    }
}
