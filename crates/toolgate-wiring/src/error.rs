//! Every way wiring a toolset can fail: the layers' own errors, typed, plus the two the wiring
//! itself detects (a toolset on the wrong store, no place for a default store).
//!
//! Guarantees: messages are the layers' own (wrapped transparently or with one fixed prefix),
//! so a front end can print them as they are.

use crate::toolset::{StoreKind, ToolsetName};

#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    #[error(transparent)]
    BooksStore(#[from] toolgate_books::StoreError),
    #[error(transparent)]
    NotesStore(#[from] toolgate_notes::StoreError),
    #[error("the egress configuration is refused: {0}")]
    Exits(#[from] toolgate_egress::ConfigError),
    #[error("a tool declaration is invalid: {0}")]
    Declaration(#[from] toolgate_core::tool::DeclarationError),
    #[error(transparent)]
    Registry(#[from] toolgate_core::registry::RegistryError),
    #[error(transparent)]
    Dispatcher(#[from] toolgate_core::DispatcherError),
    #[error(transparent)]
    ToolSearch(#[from] toolgate_core::tool_search::ToolSearchError),
    #[error("toolset {toolset} does not work on a {store:?} store")]
    WrongStore {
        toolset: ToolsetName,
        store: StoreKind,
    },
    #[error(
        "[phases] ungated names {unknown}, which this toolset does not serve; its tools are: {known}"
    )]
    UnknownUngated { unknown: String, known: String },
    #[error(transparent)]
    Sandbox(#[from] toolgate_sandbox::SandboxError),
    #[error("no --db was given, none is configured, and neither XDG_DATA_HOME nor HOME is set")]
    NoDataFolder,
    #[error(transparent)]
    Shared(#[from] toolgate_store::postgres::PgError),
    #[error(transparent)]
    Audit(#[from] toolgate_store::audit::AuditError),
}
