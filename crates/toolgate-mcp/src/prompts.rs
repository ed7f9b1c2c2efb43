//! Prompts over MCP: the protocol's side of a toolset's [`Prompt`]s, the ready-made requests a
//! host shows its user ("to-dos from a meeting"). A prompt only fills a user message in; whatever the model then
//! does goes through the dispatcher like any call, approvals included.
//!
//! Refuses: an unknown prompt, and a prompt without a required argument (both `-32602`).

use rmcp::ErrorData;
use rmcp::model::{self, GetPromptResult, PromptMessage, Role};
use toolgate_core::offers::{Prompt, PromptArguments};

use crate::resources::error_data;

/// `prompt` as MCP lists it.
pub fn listed(prompt: &Prompt) -> model::Prompt {
    let arguments = prompt
        .arguments
        .iter()
        .map(|argument| {
            let mut listed = model::PromptArgument::new(&argument.name);
            if let Some(description) = &argument.description {
                listed = listed.with_description(description);
            }
            if argument.required {
                listed = listed.with_required(true);
            }
            listed
        })
        .collect::<Vec<_>>();
    let listed = model::Prompt::new(
        &prompt.name,
        Some(&prompt.description),
        (!arguments.is_empty()).then_some(arguments),
    );
    match &prompt.title {
        Some(title) => listed.with_title(title),
        None => listed,
    }
}

/// The prompt named `name` among `prompts`, rendered for `arguments`.
pub fn get(
    prompts: &[Prompt],
    name: &str,
    arguments: &PromptArguments,
) -> Result<GetPromptResult, ErrorData> {
    let prompt = prompts
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| ErrorData::invalid_params(format!("no prompt named {name:?}"), None))?;
    let text = prompt.render(arguments).map_err(error_data)?;
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(prompt.description.clone()),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_core::offers::PromptArgument;

    use super::*;

    fn email() -> Prompt {
        Prompt::new("email_a_note", "Draft an email.", |a| {
            format!(
                "email {}",
                a.get("to").and_then(|v| v.as_str()).unwrap_or("")
            )
        })
        .with_title("Email a note")
        .with_argument(PromptArgument::new("to").required())
        .with_argument(PromptArgument::new("cc").with_description("Copy to."))
    }

    #[test]
    fn a_prompt_is_listed_with_its_title_and_arguments_and_none_when_it_has_none() {
        assert_eq!(
            serde_json::to_value(listed(&email())).unwrap(),
            json!({
                "name": "email_a_note", "title": "Email a note", "description": "Draft an email.",
                "arguments": [
                    {"name": "to", "required": true},
                    {"name": "cc", "description": "Copy to."}
                ]
            })
        );
        let bare = Prompt::new("simple", "No arguments.", |_| String::new());
        assert_eq!(
            serde_json::to_value(listed(&bare)).unwrap(),
            json!({"name": "simple", "description": "No arguments."})
        );
    }

    #[test]
    fn an_unknown_prompt_or_a_missing_argument_is_invalid_params() {
        let prompts = [email()];
        let args = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
        for (name, given) in [
            ("nope", json!({"to": "a@b.example"})),
            ("email_a_note", json!({})),
        ] {
            let error = get(&prompts, name, &args(given)).unwrap_err();
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{name}");
        }
        let got = get(
            &prompts,
            "email_a_note",
            &args(json!({"to": "a@b.example"})),
        )
        .unwrap();
        assert_eq!(got.description.as_deref(), Some("Draft an email."));
        let text = serde_json::to_string(&got.messages).unwrap();
        assert!(text.contains("email a@b.example"), "{text}");
    }
}
