//! toolgate-books: the goodbooks-10k catalogue (300 rows) in SQLite and two toolsets over it:
//! `books-v1`, a straight CRUD wrapper, and `books-v2`, designed for a model. Domain code only:
//! this crate knows nothing of models, MCP or the network.

pub mod data;
pub mod rows;
pub mod store;
pub mod v1;
pub mod v2;

use toolgate_core::Tool;
use toolgate_core::tool::DeclarationError;

pub use store::{BooksStore, StoreError};

/// The two designs of the catalogue's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Toolset {
    V1,
    V2,
}

impl Toolset {
    pub const ALL: [Toolset; 2] = [Toolset::V1, Toolset::V2];

    pub fn name(self) -> &'static str {
        match self {
            Toolset::V1 => "books-v1",
            Toolset::V2 => "books-v2",
        }
    }

    pub fn from_name(name: &str) -> Option<Toolset> {
        Toolset::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The toolset's tools, bound to `store`.
    pub fn tools(self, store: &BooksStore) -> Result<Vec<Tool>, DeclarationError> {
        match self {
            Toolset::V1 => v1::tools(store),
            Toolset::V2 => v2::tools(store),
        }
    }
}
