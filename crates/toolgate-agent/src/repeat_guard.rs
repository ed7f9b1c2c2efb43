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
//!
//! [`RepeatCount`] serves the loop's [`crate::AgentConfig::end_tools_after_repeats`]: it counts
//! the run's exact repeats of any read (opted in or not) with no write since whose earlier
//! result was settled (see [`rememberable`]); at the second, the loop ends tool use for the
//! run. Counting reads that did not opt in is safe because counting serves no result from
//! memory (such a repeat still runs, fresh): it only ends the calls, so the model answers from
//! results it was given. It is needed because the notes eval's failing reads repeated
//! `notes_search`, which does not opt in, to the round cap. A retry after a result that could
//! change (a deadline, an unavailable dependency, a denial) is not a repeat. A toolset whose
//! reads are polled for a change (a job's status) should leave that option off.

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
    error.is_none_or(ErrorCode::caused_by_arguments)
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

/// [`repeat_text`] as [`crate::AgentConfig::end_tools_after_repeats`] words it: plainly that
/// the result is unchanged and the model should answer from it.
pub fn unchanged_repeat_text(earlier: &Earlier) -> String {
    format!(
        "[repeat] Unchanged: you made this exact call in round {} and nothing has changed since, so it was not run again. Its result is below. Answer the user from it.\n{}",
        earlier.round, earlier.text
    )
}

/// What the loop tells the model when repeats end tool use (free of any value, so it adds
/// nothing to what the user is taken to have said).
pub const TOOLS_ENDED_TEXT: &str = "You repeated a call whose result cannot have changed, so tool use has ended for this run. Answer the user now from the tool results above.";

/// A run's exact repeats of reads with no write since (see the module documentation).
#[derive(Debug, Default)]
pub struct RepeatCount {
    /// Settled reads since the last write, by tool and canonical arguments: the round each
    /// first ran.
    seen: HashMap<(String, String), u32>,
    repeats: u32,
}

impl RepeatCount {
    /// Takes in one call, in call order (`kind` as the guard records it: a call whose nested
    /// calls wrote is a write; `settled` when its result could not change on a rerun); returns
    /// the round of the earlier identical call when this one is a counted repeat.
    pub fn observe(
        &mut self,
        tool: &str,
        arguments: &Value,
        kind: CallKind,
        settled: bool,
        round: u32,
    ) -> Option<u32> {
        if kind == CallKind::Writes {
            self.seen.clear();
            return None;
        }
        let key = key(tool, arguments);
        let earlier = self.seen.get(&key).copied();
        if earlier.is_some() {
            self.repeats += 1;
        }
        if settled {
            self.seen.entry(key).or_insert(round);
        } else {
            self.seen.remove(&key);
        }
        earlier
    }

    /// How many repeats were counted so far.
    pub fn repeats(&self) -> u32 {
        self.repeats
    }
}

#[cfg(test)]
#[path = "repeat_guard_tests.rs"]
mod tests;
