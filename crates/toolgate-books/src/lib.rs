//! toolgate-books: the goodbooks-10k catalogue (300 rows) in SQLite and five toolsets over
//! it: `books-v1`, a straight CRUD wrapper; `books-v2`, designed for a model; `books-v3`, v2
//! changed where the embedded model's runs failed (writes by filter, repeats answered);
//! `books-v4`, v3 changed where its runs failed (placeholder filters left out, years in the
//! user's words, empty matches that say what to drop); `books-v6`, v4 whose writes name their
//! books first (a required `books` object before the change). Domain code only: this crate knows
//! nothing of models, MCP or the network.

pub mod data;
pub mod filter;
pub mod rows;
pub mod store;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;
pub mod v6;
mod writes;

use toolgate_core::Tool;
use toolgate_core::tool::DeclarationError;

pub use store::{BooksStore, StoreError};

/// The designs of the catalogue's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Toolset {
    V1,
    V2,
    V3,
    V4,
    /// books-v4's search; writes that take their books in a `books` object, first.
    V6,
}

impl Toolset {
    pub const ALL: [Toolset; 5] = [
        Toolset::V1,
        Toolset::V2,
        Toolset::V3,
        Toolset::V4,
        Toolset::V6,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Toolset::V1 => "books-v1",
            Toolset::V2 => "books-v2",
            Toolset::V3 => "books-v3",
            Toolset::V4 => "books-v4",
            Toolset::V6 => "books-v6",
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
            Toolset::V3 => v3::tools(store),
            Toolset::V4 => v4::tools(store),
            Toolset::V6 => v6::tools(store),
        }
    }
}
