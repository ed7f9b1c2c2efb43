use super::*;
use serde_json::json;

fn ran(round: u32, text: &str) -> Recorded {
    Recorded::Ran {
        earlier: Earlier {
            round,
            text: text.into(),
            is_error: false,
            error: None,
        },
        rememberable: true,
    }
}

#[test]
fn an_exact_repeat_is_answered_with_the_earlier_result_whatever_the_key_order() {
    let mut guard = RepeatGuard::default();
    let first = json!({"author": "King", "limit": 5});
    guard.record(
        "books_search",
        &first,
        CallKind::AnswersRepeats,
        ran(1, "47 books"),
    );
    let reordered = json!({"limit": 5, "author": "King"});
    let answers = guard.answers(&[("books_search", &reordered, CallKind::AnswersRepeats)]);
    assert_eq!(
        answers[0].as_ref().map(|e| (e.round, e.text.as_str())),
        Some((1, "47 books"))
    );
    let text = repeat_text(answers[0].as_ref().expect("answered"));
    assert!(
        text.starts_with("[repeat]") && text.ends_with("47 books"),
        "{text}"
    );
}

#[test]
fn changed_arguments_or_another_tool_run_again() {
    let mut guard = RepeatGuard::default();
    let args = json!({"author": "King"});
    guard.record("books_search", &args, CallKind::AnswersRepeats, ran(1, "r"));
    let other = json!({"author": "King", "offset": 10});
    let answers = guard.answers(&[
        ("books_search", &other, CallKind::AnswersRepeats),
        ("books_get", &args, CallKind::AnswersRepeats),
    ]);
    assert_eq!(answers, [None, None]);
}

#[test]
fn a_read_after_a_write_always_runs_even_in_the_same_turn() {
    let mut guard = RepeatGuard::default();
    let args = json!({"status": "read"});
    guard.record(
        "books_search",
        &args,
        CallKind::AnswersRepeats,
        ran(1, "0 books"),
    );
    let write = json!({"author": "Collins", "status": "read"});
    let answers = guard.answers(&[
        ("books_search", &args, CallKind::AnswersRepeats),
        ("books_set_status", &write, CallKind::Writes),
        ("books_search", &args, CallKind::AnswersRepeats),
    ]);
    assert!(answers[0].is_some());
    assert_eq!(answers[1..], [None, None]);
    guard.record("books_set_status", &write, CallKind::Writes, ran(2, "ok"));
    let later = guard.answers(&[("books_search", &args, CallKind::AnswersRepeats)]);
    assert_eq!(later, [None]);
}

#[test]
fn reads_that_did_not_opt_in_are_never_answered_from_memory() {
    let mut guard = RepeatGuard::default();
    let args = json!({"url": "https://example.org/"});
    guard.record("web_clip", &args, CallKind::Read, ran(1, "page"));
    assert_eq!(
        guard.answers(&[("web_clip", &args, CallKind::AnswersRepeats)]),
        [None]
    );
    assert_eq!(
        guard.answers(&[("web_clip", &args, CallKind::Read)]),
        [None]
    );
}

#[test]
fn only_successes_and_errors_the_arguments_caused_are_remembered() {
    let cases = [
        (None, true),
        (Some(ErrorCode::InvalidArgument), true),
        (Some(ErrorCode::NotFound), true),
        (Some(ErrorCode::ApprovalDenied), false),
        (Some(ErrorCode::Forbidden), false),
        (Some(ErrorCode::DeadlineExceeded), false),
        (Some(ErrorCode::TransientDependency), false),
    ];
    for (code, want) in cases {
        assert_eq!(rememberable(code), want, "{code:?}");
    }
}

#[test]
fn a_retryable_failure_is_not_remembered() {
    let mut guard = RepeatGuard::default();
    let args = json!({"ids": [1]});
    let timed_out = Recorded::Ran {
        earlier: Earlier {
            round: 1,
            text: "deadline_exceeded".into(),
            is_error: true,
            error: Some("deadline_exceeded".into()),
        },
        rememberable: rememberable(Some(ErrorCode::DeadlineExceeded)),
    };
    guard.record("books_get", &args, CallKind::AnswersRepeats, timed_out);
    guard.record(
        "books_get",
        &args,
        CallKind::AnswersRepeats,
        Recorded::Answered,
    );
    assert_eq!(
        guard.answers(&[("books_get", &args, CallKind::AnswersRepeats)]),
        [None]
    );
}

#[test]
fn a_read_that_may_nest_writes_makes_later_repeats_of_its_turn_run() {
    let mut guard = RepeatGuard::default();
    let args = json!({"topic": "budget"});
    guard.record("kb_search", &args, CallKind::AnswersRepeats, ran(1, "r"));
    let script = json!({"code": "t.notes_update(id=3, title='x')"});
    let answers = guard.answers(&[
        ("kb_search", &args, CallKind::AnswersRepeats),
        ("code_execution", &script, CallKind::Read),
        ("kb_search", &args, CallKind::AnswersRepeats),
    ]);
    assert!(answers[0].is_some());
    assert_eq!(answers[1..], [None, None]);
}

#[test]
fn repeat_count_counts_exact_repeats_of_any_settled_read_until_a_write() {
    // (tool, arguments, kind, settled) in call order, and whether each is a counted repeat.
    let search = json!({"query": "design team budget"});
    let other = json!({"query": "budget", "limit": 1});
    let steps = [
        ("notes_search", &search, CallKind::Read, true, None),
        // A read that did not opt in still counts: the count serves nothing from memory.
        ("notes_search", &search, CallKind::Read, true, Some(1)),
        ("notes_search", &other, CallKind::Read, true, None),
        ("kb_search", &search, CallKind::AnswersRepeats, true, None),
        (
            "kb_search",
            &search,
            CallKind::AnswersRepeats,
            true,
            Some(1),
        ),
        // A write forgets every read: the same search after it is not a repeat.
        ("notes_tag", &other, CallKind::Writes, true, None),
        ("notes_search", &search, CallKind::Read, true, None),
        // A result that could change (a deadline) makes the next identical call a retry.
        ("web_clip", &other, CallKind::Read, false, None),
        ("web_clip", &other, CallKind::Read, true, None),
        ("web_clip", &other, CallKind::Read, true, Some(1)),
    ];
    let mut count = RepeatCount::default();
    for (i, (tool, args, kind, settled, want)) in steps.into_iter().enumerate() {
        assert_eq!(
            count.observe(tool, args, kind, settled, 1),
            want,
            "step {i}"
        );
    }
    assert_eq!(count.repeats(), 3);
}

#[test]
fn the_unchanged_notice_says_plainly_to_answer_from_the_result() {
    let earlier = Earlier {
        round: 2,
        text: "{\"result\":1}".into(),
        is_error: false,
        error: None,
    };
    let text = unchanged_repeat_text(&earlier);
    assert!(text.starts_with("[repeat] Unchanged:"), "{text}");
    assert!(text.contains("Answer the user from it."), "{text}");
    assert!(text.ends_with("{\"result\":1}"), "{text}");
    assert!(!TOOLS_ENDED_TEXT.chars().any(|c| c.is_ascii_digit()));
}
