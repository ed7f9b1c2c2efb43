//! Input schemas derived from Rust argument types.
//!
//! Guarantees: [`schema_for`] returns what schemars derives for the type under JSON Schema
//! 2020-12, with every subschema inlined (no `$ref`), without the type's own title and doc
//! comment (the tool's description says what the arguments are for), and passed through
//! [`normalize`], so it is plain and every object in it is closed.
//!
//! Refuses: a type whose derived schema normalization refuses (an open object, a keyword or
//! `format` outside the plain set, an invalid `pattern`), with the [`SchemaError`] saying where.

use serde_json::Value;

use super::SchemaError;
use super::normalize::normalize;

/// The input schema of `T`, derived with schemars, normalized and checked closed.
pub fn schema_for<T: schemars::JsonSchema>() -> Result<Value, SchemaError> {
    let generated = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = generated.to_value();
    if let Value::Object(root) = &mut value {
        // The tool's own description says what the arguments are for; the Rust type name and
        // doc comment of the argument struct are not part of the contract.
        root.remove("title");
        root.remove("description");
    }
    normalize(value)
}
