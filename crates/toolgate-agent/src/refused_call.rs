//! Refused calls left unfixed: a round whose calls were all refused with an error the model can
//! fix by changing its arguments, followed by an answer that makes no call.
//!
//! The loop's [`crate::AgentConfig::retry_refused_calls`] answers such an answer with one
//! corrective turn per run. Failure kind it targets, in the eval's taxonomy: *invalid
//! arguments* (the embedded model, told by a teaching error which field to change and how,
//! ended the run with a promise such as "I will fix my call and try again" instead of the
//! corrected call: books-v4 acted on 0 of 9 such refusals on dev).
//!
//! Guarantees: pure. Only `invalid_argument` and `not_found` count as fixable (the call must
//! change, and the error says how); a policy refusal (`unauthorized`, `forbidden`,
//! `approval_denied`) never does, so the loop never urges the model to try its way around a
//! gate, nor does a failure of the world (a dependency, a deadline, a conflict, a cancel). The
//! correction quotes nothing the model or a tool wrote: only the tool's registry name and our
//! own error code, so it adds no words a later taint check could take for the user's.

use serde::Serialize;
use toolgate_core::ErrorCode;

use crate::run::CallSummary;

/// Whether a call refused with `code` can succeed once the model changes its arguments.
pub fn fixable(code: ErrorCode) -> bool {
    code.caused_by_arguments()
}

/// A refused call the model left unfixed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedCall {
    pub tool: String,
    /// The refusal's code (`invalid_argument`, `not_found`).
    pub code: String,
}

/// The call to correct, when the calls of round `round` (the one before the answer) were all
/// refused and the first of them with a fixable code; `None` when any of them succeeded, was
/// answered from memory, or was refused for a reason the model cannot fix.
pub fn refused_call(calls: &[CallSummary], round: u32) -> Option<RefusedCall> {
    let last: Vec<&CallSummary> = calls.iter().filter(|c| c.round == round).collect();
    if last.is_empty() || last.iter().any(|c| !c.is_error) {
        return None;
    }
    last.iter().find_map(|c| {
        let code = c.error.as_deref()?;
        let fixable = ErrorCode::ALL
            .into_iter()
            .find(|known| known.as_str() == code)
            .is_some_and(fixable);
        fixable.then(|| RefusedCall {
            tool: c.tool.clone(),
            code: code.to_string(),
        })
    })
}

/// The corrective user turn for `call`; `must_call` when the next request asks for the call
/// (then there is no way out to offer).
pub fn retry_text(call: &RefusedCall, must_call: bool) -> String {
    let way_out = if must_call {
        ""
    } else {
        " Only if it cannot be done, tell me why instead."
    };
    format!(
        "Your call to {} was refused ({}), and its error says what to change. Make the corrected \
         call now.{way_out}",
        call.tool, call.code
    )
}

#[cfg(test)]
#[path = "refused_call_tests.rs"]
mod tests;
