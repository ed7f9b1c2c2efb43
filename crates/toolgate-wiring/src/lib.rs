//! toolgate-wiring: the one place that knows which toolsets exist and how each is put
//! together. Library code below every front end (the CLI's commands, the eval runner, and next
//! the MCP server), above the toolsets and the egress exit.
//!
//! - [`toolset`]: [`ToolsetName`] (`books-v1` to `books-v6`, `notes`, `notes-v2` to
//!   `notes-v10`) and the [`StoreKind`] each works on.
//! - [`store`]: [`Store`], the book catalogue or the notebook: open, open-or-init, reset, and
//!   direct connection access; [`StoreConfig`] says where a store lives.
//! - [`exits`]: [`ExitsConfig`] -> [`Exits`], the egress exit and optional SMTP relay, built
//!   from configuration in one way.
//! - [`dispatch`]: [`tools`] and [`dispatcher`]: a toolset's tools on its store with its exits,
//!   and a ready [`Dispatcher`](toolgate_core::Dispatcher) for a principal ([`Seat`]) whose
//!   catalogue is exactly the toolset's tools.
//! - [`examples`]: [`examples::check_toolset`], every example a toolset's tools declare run on
//!   a throwaway store and compared with the result it says it returns (`toolgate tools --check`).
//! - [`audit`]: the SQLite audit file every front end records into without a shared store
//!   ([`audit::FileAudit`]), `audit.sqlite` in the data folder.
//! - [`shared`]: [`SharedStore`], a team's PostgreSQL database: the books store in it and the
//!   approval tickets every instance shares.
//! - [`imports`]: [`open_imports`]: the configured MCP servers' tools, reached through the
//!   egress exit [`ExitsConfig`] builds, and [`extra_tools`] to hand them to a dispatcher.
//! - [`sampling`]: the front end's model as the servers allowed to sample reach it.
//! - [`wrap`]: one MCP server from the command line made into a one-server import
//!   (`toolgate wrap`).
//! - [`host_config`]: the hosts' MCP configuration files (Claude Desktop, Claude Code, Cursor,
//!   VS Code) read, changed to put toolgate in front, shown as a diff, backed up and restored
//!   (`toolgate mcp install` / `uninstall`).
//!
//! Guarantees: every toolset name parses from and prints as one string; a toolset is only ever
//! bound to the store kind it works on ([`WiringError::WrongStore`] otherwise); a toolset gets
//! exits only if it uses them, and only the configured ones. Refuses nothing that the layers
//! below accept: their errors come back typed in [`WiringError`].

pub mod audit;
pub mod code;
pub mod dispatch;
pub mod error;
pub mod examples;
pub mod exits;
pub mod host_config;
pub mod imports;
pub mod notify;
pub mod sampling;
pub mod shared;
pub mod store;
pub mod toolset;
pub mod wrap;

pub use code::CodeOptions;
pub use dispatch::{
    Assembled, ExtraTools, Seat, assemble, assemble_with, dispatcher, dispatcher_recording,
    dispatcher_with, tools, tools_resolving,
};
pub use error::WiringError;
pub use exits::{Exits, ExitsConfig, RecordingResolver};
pub use imports::{OpenImportsError, Placement, extra_tools, open_imports, open_imports_placed};
pub use shared::SharedStore;
pub use store::{Store, StoreConfig, data_folder};
pub use toolset::{StoreKind, ToolsetName, UnknownToolset};
