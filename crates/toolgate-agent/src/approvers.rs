//! Approvers a human can stand behind: a terminal prompt that shows exactly what will run, and
//! (from core) deny-all, the default when no terminal is attached, and a scripted approver for
//! tests; and, for measuring only, the fatigued approver, which approves everything.
//!
//! Guarantees: the terminal approver approves only on an explicit `y` or `yes`; anything else,
//! including end of input or an unreadable line, is a denial or an error (which the dispatcher
//! treats as a denial).

use std::io::{BufRead, IsTerminal, Write};

use toolgate_core::tool::BoxFuture;
use toolgate_core::{ApprovalAnswer, ApprovalRequest, Approver, ApproverError};

/// What the human reads before answering: [`ApprovalRequest::describe`] and the question.
pub fn approval_prompt(request: &ApprovalRequest) -> String {
    format!("{}Approve this exact call? [y/N] ", request.describe())
}

/// Whether an answer line approves.
pub fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Asks on the terminal (prompt on stderr, answer from stdin). Construct it only when stdin is
/// a terminal; see [`TerminalApprover::if_terminal`].
#[derive(Debug, Default)]
pub struct TerminalApprover {
    // One question at a time, even when calls run in parallel.
    asking: tokio::sync::Mutex<()>,
}

impl TerminalApprover {
    /// A terminal approver when stdin is a terminal, else `None` (use deny-all).
    pub fn if_terminal() -> Option<Self> {
        std::io::stdin()
            .is_terminal()
            .then(TerminalApprover::default)
    }
}

impl Approver for TerminalApprover {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        let prompt = approval_prompt(request);
        Box::pin(async move {
            let _one_at_a_time = self.asking.lock().await;
            let line = tokio::task::spawn_blocking(move || -> Result<String, ApproverError> {
                let mut err = std::io::stderr();
                write!(err, "\n{prompt}")
                    .and_then(|()| err.flush())
                    .map_err(|e| ApproverError::Unavailable(e.to_string()))?;
                let mut line = String::new();
                let read = std::io::stdin()
                    .lock()
                    .read_line(&mut line)
                    .map_err(|e| ApproverError::Unreadable(e.to_string()))?;
                if read == 0 {
                    return Err(ApproverError::Unreadable("end of input".into()));
                }
                Ok(line)
            })
            .await
            .map_err(|e| ApproverError::Unavailable(e.to_string()))??;
            if is_yes(&line) {
                Ok(ApprovalAnswer::Approve)
            } else {
                Ok(ApprovalAnswer::Deny {
                    reason: "the user answered no".into(),
                })
            }
        })
    }
}

/// Approves every call it is asked about, as a tired person clicking "yes" does. It exists to
/// measure what the layers other than approval stop (the injection suite runs every case with
/// it and with deny-all); never offer it to a person as a choice.
#[derive(Debug, Default)]
pub struct FatiguedApprover {
    asked: std::sync::atomic::AtomicUsize,
}

impl FatiguedApprover {
    /// How many calls it approved.
    pub fn approved(&self) -> usize {
        self.asked.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Approver for FatiguedApprover {
    fn decide<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::pin(async { Ok(ApprovalAnswer::Approve) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgate_core::{Effect, Risk};

    #[test]
    fn only_explicit_yes_approves() {
        for (answer, yes) in [
            ("y", true),
            ("YES\n", true),
            (" yes ", true),
            ("", false),
            ("n", false),
            ("sure", false),
            ("yy", false),
        ] {
            assert_eq!(is_yes(answer), yes, "{answer:?}");
        }
    }

    #[test]
    fn terminal_prompt_ends_with_the_question() {
        let request = ApprovalRequest {
            binding: "b".into(),
            tool: "notes_delete".into(),
            version: 1,
            risk: Risk::High,
            reason: "It removes a note.".into(),
            effect: Effect::UndoableWrite,
            arguments: json!({"id": 3}),
            preview: None,
            principal: "me".into(),
            taint: Vec::new(),
        };
        let prompt = approval_prompt(&request);
        assert!(prompt.starts_with(&request.describe()));
        assert!(prompt.ends_with("Approve this exact call? [y/N] "));
    }
}
