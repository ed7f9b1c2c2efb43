//! toolgate-notes: the notes assistant's toolset over one SQLite file. Domain code only: a
//! store, the tools' handlers, undo, a Markdown importer and a bundled sample notebook; this
//! crate knows nothing of models, MCP or the network.
//!
//! - [`store`]: [`NotesStore`] (init, init_sample, open, reset), full-text index kept in sync
//!   by triggers.
//! - [`tools`]: `notes_search`, `notes_get`, `notes_create`, `notes_tag`, `notes_delete`,
//!   `create_todos_from_meeting`.
//! - [`undo`]: [`undo_last`] reverts the newest undoable writes.
//! - [`import`]: [`import_dir`] reads a folder of Markdown notes ([`frontmatter`] format).
//! - [`actions`]: the action-item format of meeting notes.
//! - [`sample`]: the bundled notebook and [`generate_notes`].

pub mod actions;
pub mod frontmatter;
pub mod import;
pub mod rows;
pub mod sample;
pub mod search;
pub mod store;
pub mod tools;
pub mod undo;

use toolgate_core::Tool;
use toolgate_core::tool::DeclarationError;

pub use import::{ImportError, ImportReport, import_dir};
pub use rows::{Kind, NewNote, NoteRow};
pub use sample::generate_notes;
pub use search::{ResponseFormat, SearchArgs};
pub use store::{Contents, NotesStore, StoreError};
pub use undo::{UndoError, UndoHandle, UndoneAction, undo_last};

/// Every tool of the notes assistant, bound to `store`.
///
/// Today these are the notes tools proper ([`tools::notes_tools`]). The web-clip and email
/// tools belong to the same assistant and will join here from their own modules (each with
/// its own `*_tools(store, ...)` function), so that callers keep one entry point.
pub fn tools(store: &NotesStore) -> Result<Vec<Tool>, DeclarationError> {
    tools::notes_tools(store)
}
