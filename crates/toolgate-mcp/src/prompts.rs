//! Prompts a host shows its user as ready-made requests ("to-dos from a meeting"). A prompt
//! only fills a user message in; whatever the model then does goes through the dispatcher
//! like any call, approvals included.
//!
//! Refuses: an unknown prompt, and a prompt without a required argument (both `-32602`).

use rmcp::ErrorData;
use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};
use serde_json::{Map, Value};

/// One prompt: what a host lists, and how its arguments become the user's message.
#[derive(Clone)]
pub struct PromptDef {
    pub prompt: Prompt,
    render: fn(&Map<String, Value>) -> String,
}

impl PromptDef {
    /// A prompt whose user message `render` writes from the (checked) arguments.
    pub fn new(prompt: Prompt, render: fn(&Map<String, Value>) -> String) -> Self {
        PromptDef { prompt, render }
    }

    /// The message for `arguments`, once every required argument is there.
    pub fn get(&self, arguments: &Map<String, Value>) -> Result<GetPromptResult, ErrorData> {
        for argument in self.prompt.arguments.iter().flatten() {
            let given = arguments
                .get(&argument.name)
                .and_then(Value::as_str)
                .is_some_and(|v| !v.trim().is_empty());
            if argument.required == Some(true) && !given {
                return Err(ErrorData::invalid_params(
                    format!(
                        "prompt {} needs the argument {:?}",
                        self.prompt.name, argument.name
                    ),
                    None,
                ));
            }
        }
        let text = (self.render)(arguments);
        let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]);
        if let Some(description) = &self.prompt.description {
            result = result.with_description(description.clone());
        }
        Ok(result)
    }
}

fn arg<'a>(arguments: &'a Map<String, Value>, name: &str) -> &'a str {
    arguments
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
}

/// The notes assistant's prompts.
pub fn notes_prompts() -> Vec<PromptDef> {
    vec![
        PromptDef {
            prompt: Prompt::new(
                "todos_from_meeting",
                Some("Turn a meeting note's open action items into to-dos."),
                Some(vec![
                    PromptArgument::new("meeting")
                        .with_description("The meeting's title or a few words from it.")
                        .with_required(true),
                ]),
            )
            .with_title("To-dos from a meeting"),
            render: |a| {
                format!(
                    "Find my meeting note about \"{}\" (search notes of kind meeting), then create \
                     a to-do for each of its open action items. Tell me which to-dos were created \
                     and which already existed.",
                    arg(a, "meeting")
                )
            },
        },
        PromptDef {
            prompt: Prompt::new(
                "email_a_note",
                Some("Draft an email that summarises a note; it is sent only after you approve."),
                Some(vec![
                    PromptArgument::new("note")
                        .with_description("The note's title or a few words from it.")
                        .with_required(true),
                    PromptArgument::new("to")
                        .with_description("The recipient's address.")
                        .with_required(true),
                ]),
            )
            .with_title("Email a note"),
            render: |a| {
                format!(
                    "Find my note about \"{}\", draft a short email to {} that summarises it, and \
                     show me the draft. Send it only if I approve the exact email.",
                    arg(a, "note"),
                    arg(a, "to")
                )
            },
        },
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_prompt_without_its_required_argument_is_refused() {
        let prompts = notes_prompts();
        let email = prompts
            .iter()
            .find(|p| p.prompt.name == "email_a_note")
            .unwrap();
        assert!(email.get(&args(json!({"note": "budget"}))).is_err());
        assert!(
            email
                .get(&args(json!({"note": "budget", "to": "  "})))
                .is_err()
        );
        let got = email
            .get(&args(json!({"note": "budget", "to": "ann@example.org"})))
            .unwrap();
        let text = serde_json::to_string(&got.messages).unwrap();
        assert!(
            text.contains("budget") && text.contains("ann@example.org"),
            "{text}"
        );
    }
}
