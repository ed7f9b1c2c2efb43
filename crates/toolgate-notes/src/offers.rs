//! What the notes assistant offers besides its tools ([`offers`]): every note as a resource
//! `note://{id}` ([`NotesResources`], listed by id in pages, read with `notes_get`), and the
//! prompts a host shows its user ([`notes_prompts`]). Protocol-neutral: a front end turns them
//! into its protocol's messages.
//!
//! Refuses: a cursor this source did not hand out, a URI that is not `note://` and a plain
//! positive id, and a prompt without a required argument (each an [`OfferError`]).

use std::sync::Arc;

use serde_json::json;
use toolgate_core::offers::{
    OfferError, Offers, Page, Prompt, PromptArgument, PromptArguments, ReadCall, ResourceEntry,
    ResourceSource, ResourceTemplate,
};

use crate::NotesStore;

/// The notes store's resources and the notes prompts.
pub fn offers(store: &NotesStore) -> Offers {
    Offers {
        resources: Some(Arc::new(NotesResources::new(store.clone()))),
        prompts: notes_prompts(),
    }
}

/// Notes listed by id, `PAGE` at a time.
#[derive(Clone)]
pub struct NotesResources {
    store: NotesStore,
}

const NOTE_SCHEME: &str = "note://";
const PAGE: u32 = 50;

impl NotesResources {
    pub fn new(store: NotesStore) -> Self {
        NotesResources { store }
    }
}

impl ResourceSource for NotesResources {
    fn read_tool(&self) -> &str {
        "notes_get"
    }

    fn templates(&self) -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            uri_template: "note://{id}".into(),
            name: "note".into(),
            description: Some("One note of the notebook, by id, as notes_get returns it.".into()),
            mime_type: Some("application/json".into()),
        }]
    }

    fn list(&self, cursor: Option<&str>) -> Result<Page, OfferError> {
        let after = match cursor {
            None => 0,
            Some(cursor) => parse_cursor(cursor)?,
        };
        let titles = self
            .store
            .titles_after(after, PAGE)
            .map_err(|e| OfferError::Store(Box::new(e)))?;
        let next = (titles.len() == PAGE as usize)
            .then(|| titles.last().map(|t| format!("after:{}", t.id)))
            .flatten();
        let entries = titles
            .into_iter()
            .map(|t| ResourceEntry {
                uri: format!("{NOTE_SCHEME}{}", t.id),
                name: t.title,
                description: Some(format!("a {} note", t.kind)),
                mime_type: Some("application/json".into()),
            })
            .collect();
        Ok(Page { entries, next })
    }

    fn read_call(&self, uri: &str) -> Result<ReadCall, OfferError> {
        let id = note_id(uri).ok_or_else(|| OfferError::UnknownResource {
            uri: uri.to_string(),
            served: "notes are note://ID, e.g. note://3".into(),
        })?;
        Ok(ReadCall {
            tool: self.read_tool().into(),
            arguments: json!({"note_id": id}),
            mime_type: "application/json".into(),
        })
    }
}

fn parse_cursor(cursor: &str) -> Result<i64, OfferError> {
    cursor
        .strip_prefix("after:")
        .and_then(|id| id.parse::<i64>().ok())
        .filter(|id| *id >= 0)
        .ok_or_else(|| OfferError::BadCursor {
            cursor: cursor.to_string(),
            remedy: "pass back a nextCursor this server gave".into(),
        })
}

/// The id in `note://ID`, when it is a positive number and nothing else.
fn note_id(uri: &str) -> Option<i64> {
    let id = uri.strip_prefix(NOTE_SCHEME)?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse::<i64>().ok().filter(|id| *id > 0)
}

/// The trimmed text of `name` (empty when absent: only optional arguments can be).
fn arg<'a>(arguments: &'a PromptArguments, name: &str) -> &'a str {
    arguments
        .get(name)
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
        .trim()
}

/// The notes assistant's prompts.
pub fn notes_prompts() -> Vec<Prompt> {
    vec![
        Prompt::new(
            "todos_from_meeting",
            "Turn a meeting note's open action items into to-dos.",
            |a| {
                format!(
                    "Find my meeting note about \"{}\" (search notes of kind meeting), then create \
                     a to-do for each of its open action items. Tell me which to-dos were created \
                     and which already existed.",
                    arg(a, "meeting")
                )
            },
        )
        .with_title("To-dos from a meeting")
        .with_argument(
            PromptArgument::new("meeting")
                .with_description("The meeting's title or a few words from it.")
                .required(),
        ),
        Prompt::new(
            "email_a_note",
            "Draft an email that summarises a note; it is sent only after you approve.",
            |a| {
                format!(
                    "Find my note about \"{}\", draft a short email to {} that summarises it, and \
                     show me the draft. Send it only if I approve the exact email.",
                    arg(a, "note"),
                    arg(a, "to")
                )
            },
        )
        .with_title("Email a note")
        .with_argument(
            PromptArgument::new("note")
                .with_description("The note's title or a few words from it.")
                .required(),
        )
        .with_argument(
            PromptArgument::new("to")
                .with_description("The recipient's address.")
                .required(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn only_plain_note_ids_name_a_note() {
        let cases = [
            ("note://3", Some(3)),
            ("note://120", Some(120)),
            ("note://0", None),
            ("note://-1", None),
            ("note://3/../4", None),
            ("note://+3", None),
            ("note://", None),
            ("note:3", None),
            ("file:///etc/passwd", None),
            ("note://99999999999999999999", None),
        ];
        for (uri, id) in cases {
            assert_eq!(note_id(uri), id, "{uri}");
        }
    }

    #[test]
    fn a_cursor_this_server_did_not_give_is_refused() {
        assert_eq!(parse_cursor("after:50").unwrap(), 50);
        for bad in ["", "50", "after:", "after:-3", "after:x", "before:3"] {
            assert!(parse_cursor(bad).is_err(), "{bad:?}");
        }
    }

    fn args(value: Value) -> PromptArguments {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_prompt_without_its_required_argument_is_refused() {
        let prompts = notes_prompts();
        let email = prompts.iter().find(|p| p.name == "email_a_note").unwrap();
        assert!(email.render(&args(json!({"note": "budget"}))).is_err());
        assert!(
            email
                .render(&args(json!({"note": "budget", "to": "  "})))
                .is_err()
        );
        let text = email
            .render(&args(json!({"note": "budget", "to": "ann@example.org"})))
            .unwrap();
        assert!(
            text.contains("budget") && text.contains("ann@example.org"),
            "{text}"
        );
    }
}
