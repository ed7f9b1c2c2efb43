//! Tool input schemas: derivation from Rust types, normalization, checks on declared
//! (runtime) schemas, and validation with the `jsonschema` crate, compiled once per tool.
//!
//! Guarantees:
//! - A derived schema accepted by [`normalize`] uses only the plain keywords small models and
//!   providers handle, and every object in it is closed (`additionalProperties: false`).
//! - A declared schema ([`check_declared`], used by `ToolBuilder::from_schema`) is refused,
//!   before the validator sees it and without recursion, when it is larger than
//!   [`MAX_SCHEMA_BYTES`], nests deeper than [`MAX_SCHEMA_DEPTH`], expands through its
//!   references to more than [`MAX_EXPANDED_SUBSCHEMAS`] subschemas, loops through references
//!   without descending into the value, refers outside itself (`$ref` other than `#` or
//!   `#/...`, a `$schema` the validator does not bundle), or leaves an object open (unless the
//!   tool opts in). Nothing is ever fetched: the validator's retriever refuses every URI.
//! - Keyword allowlist: kept for declared schemas too. The validator enforces every standard
//!   keyword, but it silently ignores keywords it does not know (a misspelled `minLenght`, a
//!   vendor extension, `$dynamicRef` we do not support), and an ignored keyword is a constraint
//!   the schema's author believes in that nobody checks; so anything outside the 2020-12
//!   assertions, applicators, local references and annotations is refused, and an unknown
//!   `format` is refused by the validator. `pattern`s use the linear-time `regex` engine.
//! - [`CompiledSchema::validate`] is pure, costs one pass of the compiled validator for a valid
//!   value, and reports every violation with its path (`filters.year`, `ids[2]`), what was
//!   expected in words, and what was received; a `oneOf`/`anyOf` failure lists the
//!   alternatives and why the nearest one failed. For derived schemas an optional field given
//!   as `null` is absent (serde reads it as `None`); declared schemas keep JSON Schema's
//!   meaning of `null`.
//!
//! One file per job, each with its own contract:
//! - `derive`: [`schema_for`], the schema of a Rust argument type;
//! - `normalize`: [`normalize`], which makes a derived schema plain and closed;
//! - `declared`: [`check_declared`] and its limits, the guards on a schema a tool brings;
//! - `violations`: [`CompiledSchema`], [`validate`] and the [`Violation`]s they report;
//! - `describe`: [`describe`], [`describe_in`] and [`fields_at`], a schema in words;
//! - `formats` ([`is_iso_date`]), `suggest` ([`closest`], [`edit_distance`]) and `structure`
//!   ([`is_closed`] and the tree walks the others share).

mod declared;
mod derive;
mod describe;
mod formats;
mod normalize;
mod structure;
mod suggest;
#[cfg(test)]
mod test_fixtures;
mod violations;

pub use declared::{
    MAX_EXPANDED_SUBSCHEMAS, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH, check_declared,
    drop_without_recursion,
};
pub use derive::schema_for;
pub use describe::{describe, describe_in, fields_at};
pub use formats::is_iso_date;
pub use normalize::normalize;
pub use structure::is_closed;
pub use suggest::{closest, edit_distance};
pub use violations::{CompiledSchema, Violation, ViolationKind, validate};

/// Why a schema cannot serve as a tool's input contract.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    #[error("object at `{0}` is open: it must say \"additionalProperties\": false")]
    OpenObject(String),
    #[error("keyword `{keyword}` at `{path}` is not supported by the validator")]
    UnsupportedKeyword { path: String, keyword: String },
    #[error("schema at `{path}` is malformed: {reason}")]
    Malformed { path: String, reason: String },
    #[error("schema is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("schema nests deeper than {limit} levels at `{path}`")]
    TooDeep { path: String, limit: usize },
    #[error("schema expands to more than {limit} subschemas through its references")]
    TooManySubschemas { limit: u64 },
    #[error(
        "`$ref` or `$schema` at `{path}` points outside the schema (`{reference}`): only local references (`#` or `#/...`) are allowed, and nothing is fetched"
    )]
    NonLocalRef { path: String, reference: String },
    #[error("schema at `{path}` refers back to itself without descending into the value")]
    RefLoop { path: String },
}
