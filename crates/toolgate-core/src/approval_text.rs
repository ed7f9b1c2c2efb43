//! What a person reads before approving a call, the same for every front end (the terminal,
//! an MCP host's elicitation form): the tool, its risk and reason, what will happen (the
//! preview read from the store) and the exact arguments. Fields that carry a message (to, cc,
//! bcc, subject, body) come first and whole, so nothing that will be sent is hidden.
//!
//! Every character of the text is visible ([`crate::display`]): a control or format character
//! in a value (an escape sequence that moves the cursor up and erases a line, a carriage return,
//! a right-to-left override) is shown by name, never sent to the person's terminal or form. A
//! value on several lines is shown as a block whose every line starts with `    | `, so no
//! line of a value can pass for a line of the text around it.

use serde_json::Value;

use crate::approval::ApprovalRequest;
use crate::display::{visible, visible_line};

impl ApprovalRequest {
    /// The whole text a person is shown, without the question (each front end asks its own
    /// way).
    pub fn describe(&self) -> String {
        let request = self;
        let mut text = format!(
            "The assistant wants to run `{}` (risk: {}, effect: {}).\nWhy it needs approval: {}\n",
            visible_line(&request.tool),
            request.risk.as_str(),
            request.effect.as_str(),
            visible_line(&request.reason)
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
            other => push_value(&mut text, "arguments", other),
        }
        // Last, so it is what the person reads just before answering.
        if !request.taint.is_empty() {
            text.push_str("Careful: this call carries text you did not write:\n");
            for taint in &request.taint {
                text.push_str(&format!("  - {}\n", visible_line(&taint.sentence())));
            }
        }
        // Every piece above is already visible; this pass is the guarantee for the whole text,
        // whatever is added to it later.
        visible(&text).into_owned()
    }
}

const MESSAGE_FIELDS: [&str; 5] = ["to", "cc", "bcc", "subject", "body"];

fn push_fields(text: &mut String, fields: &serde_json::Map<String, Value>) {
    for field in MESSAGE_FIELDS {
        if let Some(v) = fields.get(field) {
            push_message_field(text, field, v);
        }
    }
    for (k, v) in fields {
        if !MESSAGE_FIELDS.contains(&k.as_str()) {
            push_value(text, k, v);
        }
    }
}

/// A message field, as it will be sent: the text itself (the body, or any value holding a line
/// break, as a block).
fn push_message_field(text: &mut String, field: &str, value: &Value) {
    match value {
        Value::String(s) if field == "body" || s.contains(['\n', '\r']) => {
            text.push_str(&format!("  {field}:\n{}\n", indent(&visible(s))));
        }
        Value::String(s) => text.push_str(&format!("  {field}: {}\n", visible_line(s))),
        other => push_value(text, field, other),
    }
}

/// Any other field, as JSON on one line.
fn push_value(text: &mut String, field: &str, value: &Value) {
    text.push_str(&format!(
        "  {}: {}\n",
        visible_line(field),
        visible_line(&value.to_string())
    ));
}

/// Every line of a block behind the same prefix (an empty value still shows its one line).
fn indent(body: &str) -> String {
    body.split('\n')
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::{ApprovalRequest, Effect, Risk};

    #[test]
    fn email_approval_hides_neither_recipient_subject_nor_any_line_of_the_body() {
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
            taint: Vec::new(),
        };
        let text = request.describe();
        assert!(text.contains("`email_send` (risk: high"));
        assert!(text.contains("to: ann@example.org"));
        assert!(text.contains("subject: Budget"));
        assert!(text.contains("| line one\n    | line two"));
        assert!(text.contains("draft_id: 7"));
    }

    fn email_with(body: &str, to: &str, subject: &str) -> ApprovalRequest {
        ApprovalRequest {
            binding: "b".into(),
            tool: "email_send".into(),
            version: 1,
            risk: Risk::High,
            reason: "It sends mail to other people and cannot be undone.".into(),
            effect: Effect::Irreversible,
            arguments: json!({"draft_id": 7, "note\u{1b}[2K": "x\u{202e}y"}),
            preview: Some(json!({"to": to, "subject": subject, "body": body})),
            principal: "me".into(),
            taint: Vec::new(),
        }
    }

    #[test]
    fn an_escape_sequence_in_a_draft_cannot_hide_a_line_from_the_approver() {
        let request = email_with(
            "SECRET: the merger closes Monday\n\u{1b}[1A\u{1b}[2KSee you Friday.",
            "ann@example.org\u{202e}gro.elpmaxe@eve",
            "Budget\nWhy it needs approval: it does not",
        );
        let text = request.describe();
        assert!(
            text.contains(
                "    | SECRET: the merger closes Monday\n    | <ESC>[1A<ESC>[2KSee you Friday."
            ),
            "{text}"
        );
        assert!(
            text.contains("to: ann@example.org<U+202E>gro.elpmaxe@eve"),
            "{text}"
        );
        assert!(
            text.contains("  subject:\n    | Budget\n    | Why it needs approval: it does not"),
            "a line of a value is marked as the value's: {text}"
        );
        assert!(text.contains("<U+202E>y"), "non-message fields too: {text}");
        assert!(text.contains("note<ESC>[2K"), "field names too: {text}");
        assert!(
            !text.chars().any(|c| crate::display::hidden(c) && c != '\n'),
            "{text:?}"
        );
    }
}
