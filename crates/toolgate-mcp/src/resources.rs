//! Resources a server offers beside its tools. A source lists its resources (pages with an
//! opaque cursor) and names, for each URI, the tool call that reads it: the server makes that
//! call through the dispatcher like any `tools/call`, so a resource read gets the same
//! catalogue check, bounds, redaction, untrusted marking and trace as the tool.
//!
//! [`NotesResources`] offers every note as `note://{id}`, read with `notes_get`.
//!
//! Refuses: a cursor this source did not hand out (`-32602`), a URI it does not serve
//! (resource not found).

use rmcp::ErrorData;
use rmcp::model::{Resource, ResourceTemplate};
use serde_json::{Value, json};
use toolgate_notes::NotesStore;

/// One page of a listing.
pub struct Page {
    pub resources: Vec<Resource>,
    /// The cursor of the next page, when there is one.
    pub next: Option<String>,
}

/// The call that reads a resource.
pub struct ReadCall {
    pub tool: String,
    pub arguments: Value,
    pub mime_type: String,
}

/// What a server offers as resources.
pub trait ResourceSource: Send + Sync {
    /// The tool every read goes through; the source is offered only to a principal who may
    /// call it.
    fn read_tool(&self) -> &str;
    fn templates(&self) -> Vec<ResourceTemplate>;
    fn list(&self, cursor: Option<&str>) -> Result<Page, ErrorData>;
    fn read_call(&self, uri: &str) -> Result<ReadCall, ErrorData>;
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
        vec![
            ResourceTemplate::new("note://{id}", "note")
                .with_description("One note of the notebook, by id, as notes_get returns it.")
                .with_mime_type("application/json"),
        ]
    }

    fn list(&self, cursor: Option<&str>) -> Result<Page, ErrorData> {
        let after = match cursor {
            None => 0,
            Some(cursor) => parse_cursor(cursor)?,
        };
        let titles = self
            .store
            .titles_after(after, PAGE)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let next = (titles.len() == PAGE as usize)
            .then(|| titles.last().map(|t| format!("after:{}", t.id)))
            .flatten();
        let resources = titles
            .into_iter()
            .map(|t| {
                Resource::new(format!("{NOTE_SCHEME}{}", t.id), t.title)
                    .with_description(format!("a {} note", t.kind))
                    .with_mime_type("application/json")
            })
            .collect();
        Ok(Page { resources, next })
    }

    fn read_call(&self, uri: &str) -> Result<ReadCall, ErrorData> {
        let id = note_id(uri).ok_or_else(|| {
            ErrorData::resource_not_found(
                format!("no such resource: {uri} (notes are note://ID, e.g. note://3)"),
                None,
            )
        })?;
        Ok(ReadCall {
            tool: self.read_tool().into(),
            arguments: json!({"note_id": id}),
            mime_type: "application/json".into(),
        })
    }
}

fn parse_cursor(cursor: &str) -> Result<i64, ErrorData> {
    cursor
        .strip_prefix("after:")
        .and_then(|id| id.parse::<i64>().ok())
        .filter(|id| *id >= 0)
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!("unknown cursor {cursor:?}: pass back a nextCursor this server gave"),
                None,
            )
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

#[cfg(test)]
mod tests {
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
}
