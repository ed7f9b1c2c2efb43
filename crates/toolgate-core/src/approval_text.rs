//! What a person reads before approving a call, the same for every front end (the terminal,
//! an MCP host's elicitation form): the tool, its risk and reason, what will happen (the
//! preview read from the store) and the exact arguments. Fields that carry a message (to, cc,
//! bcc, subject, body) come first and whole, so nothing that will be sent is hidden.

use serde_json::Value;

use crate::approval::ApprovalRequest;

impl ApprovalRequest {
    /// The whole text a person is shown, without the question (each front end asks its own
    /// way).
    pub fn describe(&self) -> String {
        let request = self;
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
        // Last, so it is what the person reads just before answering.
        if !request.taint.is_empty() {
            text.push_str("Careful: this call carries text you did not write:\n");
            for taint in &request.taint {
                text.push_str(&format!("  - {}\n", taint.sentence()));
            }
        }
        text
    }
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
}
