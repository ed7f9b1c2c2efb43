//! Approvers a human can stand behind: a terminal prompt that shows exactly what will run, and
//! (from core) deny-all, the default when no terminal is attached, and a scripted approver for
//! tests.
//!
//! Guarantees: the terminal approver approves only on an explicit `y` or `yes`; anything else,
//! including end of input or an unreadable line, is a denial or an error (which the dispatcher
//! treats as a denial).

use std::io::{BufRead, IsTerminal, Write};

use serde_json::Value;
use toolgate_core::tool::BoxFuture;
use toolgate_core::{ApprovalAnswer, ApprovalRequest, Approver, ApproverError};

/// What the human reads before answering: the tool, its risk and reason, and the exact
/// arguments. Fields that carry a message (to, cc, subject, body) are shown first and whole.
pub fn approval_prompt(request: &ApprovalRequest) -> String {
    let mut text = format!(
        "The assistant wants to run `{}` (risk: {}, effect: {}).\nWhy it needs approval: {}\n",
        request.tool,
        request.risk.as_str(),
        request.effect.as_str(),
        request.reason
    );
    // What will happen comes first and whole: the preview (read from the store) and then the
    // message fields of the arguments; everything else follows.
    if let Some(Value::Object(preview)) = &request.preview {
        text.push_str("What will happen:\n");
        push_fields(&mut text, preview);
        text.push_str("Arguments:\n");
    }
    match &request.arguments {
        Value::Object(args) => push_fields(&mut text, args),
        other => text.push_str(&format!("  arguments: {other}\n")),
    }
    text.push_str("Approve this exact call? [y/N] ");
    text
}

const MESSAGE_FIELDS: [&str; 5] = ["to", "cc", "bcc", "subject", "body"];

fn push_fields(text: &mut String, fields: &serde_json::Map<String, Value>) {
    for field in MESSAGE_FIELDS {
        if let Some(v) = fields.get(field) {
            let shown = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if field == "body" {
                text.push_str(&format!("  {field}:\n{}\n", indent(&shown)));
            } else {
                text.push_str(&format!("  {field}: {shown}\n"));
            }
        }
    }
    for (k, v) in fields {
        if !MESSAGE_FIELDS.contains(&k.as_str()) {
            text.push_str(&format!("  {k}: {v}\n"));
        }
    }
}

fn indent(body: &str) -> String {
    body.lines()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
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
    fn email_approval_shows_recipient_subject_and_whole_body() {
        let request = ApprovalRequest {
            binding: "b".into(),
            tool: "email_send".into(),
            version: 1,
            risk: Risk::High,
            reason: "It sends mail to other people and cannot be undone.".into(),
            effect: Effect::Irreversible,
            arguments: json!({"draft_id": 7}),
            preview: Some(
                json!({"to": "ann@example.org", "subject": "Budget", "body": "line one\nline two"}),
            ),
            principal: "me".into(),
        };
        let prompt = approval_prompt(&request);
        assert!(prompt.contains("`email_send` (risk: high"));
        assert!(prompt.contains("to: ann@example.org"));
        assert!(prompt.contains("subject: Budget"));
        assert!(prompt.contains("| line one\n    | line two"));
        assert!(prompt.contains("draft_id: 7"));
        assert!(prompt.ends_with("[y/N] "));
    }
}
