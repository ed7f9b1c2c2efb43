//! The loop's answer to a model that repeats itself: an exact repeat of an earlier call to a
//! read that declares `answers_repeats` (same tool, same arguments, canonical JSON) with no
//! write since is answered with the earlier result under a notice, instead of running again.
//!
//! Guarantees: only reads that opt in are ever answered from memory; any call to a tool that
//! writes (or that the registry does not know) forgets everything remembered, in call order,
//! so a read after a write always runs; so does a call whose nested calls went to a writing
//! tool (a script's `notes_update`: the loop records such a call as a write, from its decision
//! record). Within one turn, a read that did not opt in (which may make nested calls, as
//! `code_execution` does, whose writes are known only once it ran) makes the later calls of
//! the turn run. A result is remembered only if running it again could not change it: a
//! success, or an error only changed arguments can fix (invalid argument, not found). Anything
//! else (a deadline, an unavailable dependency, a denial, a refusal by policy) goes to the
//! dispatcher again. Pure: the loop decides and dispatches.

use std::collections::HashMap;

use serde_json::Value;
use toolgate_core::ErrorCode;
use toolgate_core::canonical::canonical_json;

/// What an earlier call returned to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Earlier {
    pub round: u32,
    pub text: String,
    pub is_error: bool,
    /// The error code, when it failed.
    pub error: Option<String>,
}

/// How the loop sees one call's tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// A read whose exact repeats may be answered from memory.
    AnswersRepeats,
    /// A read that always runs; it may make nested calls that write, so later calls of the
    /// same turn run too.
    Read,
    /// A write, or a tool the registry does not know: forgets every remembered result.
    Writes,
}

/// The results remembered in one run.
#[derive(Debug, Default)]
pub struct RepeatGuard {
    earlier: HashMap<(String, String), Earlier>,
}

impl RepeatGuard {
    /// For each call of a turn, in order, the earlier result that answers it, or `None` when
    /// it must run. A write, or a read that may write through nested calls, earlier in the
    /// same turn makes later reads run.
    pub fn answers(&self, calls: &[(&str, &Value, CallKind)]) -> Vec<Option<Earlier>> {
        let mut written = false;
        calls
            .iter()
            .map(|(tool, arguments, kind)| match kind {
                CallKind::Writes | CallKind::Read => {
                    written = true;
                    None
                }
                CallKind::AnswersRepeats if written => None,
                CallKind::AnswersRepeats => self.earlier.get(&key(tool, arguments)).cloned(),
            })
            .collect()
    }

    /// Takes in a turn's outcomes, in call order.
    pub fn record(&mut self, tool: &str, arguments: &Value, kind: CallKind, outcome: Recorded) {
        match kind {
            CallKind::Writes => self.earlier.clear(),
            CallKind::Read => {}
            CallKind::AnswersRepeats => {
                if let Recorded::Ran {
                    earlier,
                    rememberable: true,
                } = outcome
                {
                    self.earlier.insert(key(tool, arguments), earlier);
                }
            }
        }
    }
}

/// What happened to a call, for [`RepeatGuard::record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// It went to the dispatcher; `rememberable` when running it again could not change the
    /// result (see [`rememberable`]).
    Ran {
        earlier: Earlier,
        rememberable: bool,
    },
    /// It was itself answered from memory.
    Answered,
}

/// Whether a result with this error code (`None`: a success) would come back the same from an
/// unchanged call with nothing written in between.
pub fn rememberable(error: Option<ErrorCode>) -> bool {
    match error {
        None | Some(ErrorCode::InvalidArgument | ErrorCode::NotFound) => true,
        Some(
            ErrorCode::Unauthorized
            | ErrorCode::Forbidden
            | ErrorCode::Conflict
            | ErrorCode::RateLimited
            | ErrorCode::TransientDependency
            | ErrorCode::PermanentDependency
            | ErrorCode::DeadlineExceeded
            | ErrorCode::Canceled
            | ErrorCode::Internal
            | ErrorCode::ApprovalDenied,
        ) => false,
    }
}

fn key(tool: &str, arguments: &Value) -> (String, String) {
    (tool.to_string(), canonical_json(arguments))
}

/// What the model reads instead of a second run: the notice, then the earlier result.
pub fn repeat_text(earlier: &Earlier) -> String {
    format!(
        "[repeat] You made this exact call in round {} and nothing has changed since, so it was not run again; its result is below. Answer from it, or call with different arguments.\n{}",
        earlier.round, earlier.text
    )
}

#[cfg(test)]
mod tests {
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
}
