//! toolgate-notes: the notes assistant's toolset over one SQLite file, or a team's shared
//! PostgreSQL database ([`NotesStore::on_postgres`]; every statement is written once against
//! core's `Sql`, the search's few differences in [`search_sql`]). Domain code only: a
//! store, the tools' handlers, undo, a Markdown importer and a bundled sample notebook; this
//! crate knows nothing of models or MCP, and reaches the network only through the egress exit
//! it is handed.
//!
//! - [`store`]: [`NotesStore`] (init, init_sample, open, reset), full-text index kept in sync
//!   by triggers.
//! - [`tools`](mod@tools): `notes_search`, `notes_get`, `notes_create`, `notes_tag`, `notes_delete`,
//!   `create_todos_from_meeting`.
//! - [`web_clip`]: `web_clip`, through the egress exit ([`extract`] makes pages readable);
//!   [`notebook_words`]: `notes-v5`'s notebooks named in the user's words.
//! - [`email`]: `email_draft` and `email_send`, through the SMTP relay of the egress exit.
//! - [`undo`]: [`undo_last`] reverts the newest undoable writes.
//! - [`import`]: [`import_dir`] reads a folder of Markdown notes ([`frontmatter`] format).
//! - [`actions`]: the action-item format of meeting notes.
//! - [`offers`]: what the toolset offers besides tools: notes as resources, and prompts.
//! - [`sample`]: the bundled notebook and [`generate_notes`].
//! - [`note_ref`]: notes named by the user's words; [`writes_by_words`]: `notes-v4`'s
//!   `notes_tag` and `create_todos_from_meeting`, which take them instead of ids.
//! - [`search`]: `notes_search`'s query building and ranking; [`search_sql`]: its statements
//!   on each database (FTS5, or PostgreSQL's tsvector); [`snippet`]: its fragments centred on
//!   the matched words.

pub mod actions;
pub mod bm25;
pub mod email;
pub mod export;
pub mod extract;
pub mod frontmatter;
pub mod fts5_terms;
pub mod import;
pub mod note_ref;
pub mod notebook_index;
pub mod notebook_words;
pub mod offers;
pub mod rows;
pub mod sample;
pub mod search;
pub mod search_index;
pub mod search_sql;
pub mod snippet;
pub mod store;
pub mod tools;
pub mod undo;
pub mod web_clip;
pub mod writes_by_words;

use toolgate_core::Tool;
use toolgate_core::tool::DeclarationError;

pub use import::{ImportError, ImportReport, import_dir};
pub use rows::{Kind, NewNote, NoteRow};
pub use sample::generate_notes;
pub use search::{ResponseFormat, SearchArgs, SearchArgsV2, SearchDesign};
pub use store::{Contents, NoteTitle, NotesStore, StoreError};
pub use tools::Design;
pub use undo::{UndoError, UndoHandle, UndoneAction, undo_last};

/// The notes tools proper, bound to `store` ([`tools::notes_tools`]).
pub fn tools(store: &NotesStore) -> Result<Vec<Tool>, DeclarationError> {
    tools::notes_tools(store)
}

/// Every tool of the notes assistant: the notes tools, `web_clip` through `egress`, and the
/// email tools through `relay` (without a relay, `email_send` refuses with a clear error).
pub fn assistant_tools(
    store: &NotesStore,
    egress: std::sync::Arc<toolgate_egress::Egress>,
    relay: Option<std::sync::Arc<toolgate_egress::SmtpRelay>>,
) -> Result<Vec<Tool>, DeclarationError> {
    designed_assistant_tools(store, egress, relay, Design::V1)
}

/// [`assistant_tools`] with the notes tools in `design`.
pub fn designed_assistant_tools(
    store: &NotesStore,
    egress: std::sync::Arc<toolgate_egress::Egress>,
    relay: Option<std::sync::Arc<toolgate_egress::SmtpRelay>>,
    design: Design,
) -> Result<Vec<Tool>, DeclarationError> {
    let mut all = tools::designed_notes_tools(store, design)?;
    let clip_design = match design {
        Design::V1 | Design::V2 | Design::V4 => web_clip::ClipDesign::Plain,
        Design::V5 | Design::V8 => web_clip::ClipDesign::UsersPage,
    };
    all.extend(web_clip::designed_web_clip_tools(
        store,
        egress,
        clip_design,
    )?);
    let email_design = match design {
        Design::V1 | Design::V2 => email::EmailDesign::Saved,
        Design::V4 | Design::V5 | Design::V8 => email::EmailDesign::DraftFirst,
    };
    all.extend(email::designed_email_tools(store, relay, email_design)?);
    Ok(all)
}
