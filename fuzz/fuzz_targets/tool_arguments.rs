//! Argument validation: the core schema validator (`toolgate_core::schema`) on the notes
//! tools' own compiled input schemas, and on declared schemas (what an imported server sends).
//!
//! The input is JSON (anything else is skipped). Properties:
//! - validating any value against any tool's schema never panics, and every violation names
//!   a path;
//! - a value the schema of `notes_create`, `notes_get`, `notes_tag`, `notes_delete` or
//!   `notes_search` accepts also deserializes into that tool's argument type (a schema that says
//!   less than the type would give the model a confusing error after "valid"); whole numbers
//!   beyond `i64` are a known exception (see `beyond_i64`);
//! - `[schema, value]`: a declared schema is checked without recursion or fetching, and when it
//!   compiles, validating `value` never panics.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate_core::schema::CompiledSchema;
use toolgate_notes::tools::{CreateArgs, DeleteArgs, GetArgs, TagArgs};
use toolgate_notes::{NotesStore, SearchArgs};

type Parse = fn(&Value) -> Result<(), String>;

fn parse_as<A: serde::de::DeserializeOwned>(value: &Value) -> Result<(), String> {
    A::deserialize(value).map(|_| ()).map_err(|e| e.to_string())
}

/// Each notes tool's compiled schema, and the parse of its typed arguments where it has one.
fn schemas() -> &'static Vec<(String, CompiledSchema, Option<Parse>)> {
    static SCHEMAS: OnceLock<Vec<(String, CompiledSchema, Option<Parse>)>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("toolgate-fuzz-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let store = NotesStore::open_or_init_sample(&dir.join("notes.sqlite")).expect("a store");
        let tools = toolgate_notes::tools(&store).expect("the notes tools");
        tools
            .iter()
            .map(|tool| {
                let name = tool.spec.name.clone();
                let compiled =
                    CompiledSchema::derived(&tool.spec.input_schema).expect("a tool's own schema");
                let parse: Option<Parse> = match name.as_str() {
                    "notes_create" => Some(parse_as::<CreateArgs>),
                    "notes_get" => Some(parse_as::<GetArgs>),
                    "notes_tag" => Some(parse_as::<TagArgs>),
                    "notes_delete" => Some(parse_as::<DeleteArgs>),
                    "notes_search" => Some(parse_as::<SearchArgs>),
                    _ => None,
                };
                (name, compiled, parse)
            })
            .collect()
    })
}

/// Whether `value` holds a whole number too large for an `i64` (`7e111`): the derived schemas
/// say `integer` with a minimum but no maximum, so such an id passes the schema and then fails
/// the typed parse (a clear `invalid_argument` either way). A known gap, reported in issue 13;
/// skipped so the target keeps looking for others.
fn beyond_i64(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.as_i64().is_none() && (n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0))
        }
        Value::Array(items) => items.iter().any(beyond_i64),
        Value::Object(map) => map.values().any(beyond_i64),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    for (name, schema, parse) in schemas() {
        let violations = schema.validate(&value);
        if violations.is_empty()
            && let Some(parse) = parse
            && let Err(e) = parse(&value)
            && !beyond_i64(&value)
        {
            panic!("{name}: the schema accepts {value} but the arguments do not parse: {e}");
        }
    }
    if let Value::Array(pair) = &value
        && let [schema, instance] = pair.as_slice()
        && let Ok(compiled) = CompiledSchema::declared(schema, false)
    {
        let _ = compiled.validate(instance);
    }
    toolgate_core::schema::drop_without_recursion(value);
});
