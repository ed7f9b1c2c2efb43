//! The fixture toolset the MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16)
//! calls by name, as a test-only registry: these tools exist only here, never in a real toolset.
//!
//! Each tool is declared from the schema and answers what the scenario reads in the suite's
//! `dist/index.js` (see `README.md` beside this file). Every tool runs through the dispatcher
//! like any other, so what the server does with its result (one text block; `isError` with our
//! code for a tool error) is what the suite sees. Tools whose scenario needs what a handler here
//! cannot do (send notifications, ask the client for sampling or for a free-form elicitation,
//! return image, audio or embedded-resource content) are not declared: their scenarios are in
//! `baseline.yml`.
//!
//! Resources ([`FixtureResources`]) are read, as every resource of ours, through a tool call
//! (`test_read_resource`), so their contents are text: `test://static-text` and the template
//! `test://template/{id}/data`; `test://static-binary` (a blob) is not offered.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::offers::{
    OfferError, Offers, Page, Prompt, PromptArgument, ReadCall, ResourceEntry, ResourceSource,
    ResourceTemplate,
};
use toolgate_core::{Effect, Registry, Risk, ToolBuilder, ToolError, ToolOutput, tool::Tool};

/// The fixture's tool names, in name order (the registry's order).
pub const TOOL_NAMES: [&str; 6] = [
    "add_numbers",
    "json_schema_2020_12_tool",
    "test_elicitation",
    "test_error_handling",
    "test_read_resource",
    "test_simple_text",
];

/// Text of `test://static-text` (resources-read-text).
pub const STATIC_TEXT: &str = "This is the content of the static text resource.";

const STATIC_URI: &str = "test://static-text";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";

/// Text `test_simple_text` answers (tools-call-simple-text).
pub const SIMPLE_TEXT: &str = "This is a simple text response for testing.";

/// Message `test_error_handling` fails with (tools-call-error).
pub const ERROR_TEXT: &str = "This tool intentionally returns an error for testing";

fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

fn read_only(name: &str, schema: Value, does: &str) -> ToolBuilder<Value> {
    ToolBuilder::from_schema(name, 1, schema)
        .describe(
            does,
            "the MCP conformance suite calls it by this name.",
            None,
            "what the suite's scenario expects.",
        )
        .policy(
            Risk::Low,
            Effect::Read,
            "A conformance fixture: it changes nothing.",
        )
}

fn simple_text() -> Tool {
    read_only(
        "test_simple_text",
        no_arguments(),
        "Returns a fixed sentence of text.",
    )
    .read(|_ctx, _args: Value| async { Ok(ToolOutput::new(json!(SIMPLE_TEXT))) })
    .expect("test_simple_text declares")
}

fn error_handling() -> Tool {
    read_only(
        "test_error_handling",
        no_arguments(),
        "Always fails, to show how a tool error is reported.",
    )
    .read(|_ctx, _args: Value| async { Err(ToolError::internal(ERROR_TEXT)) })
    .expect("test_error_handling declares")
}

fn add_numbers() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "number", "description": "First number"},
            "b": {"type": "number", "description": "Second number"}
        },
        "required": ["a", "b"],
        "additionalProperties": false
    });
    read_only("add_numbers", schema, "Adds two numbers together.")
        .read(|_ctx, args: Value| async move {
            let a = args["a"].as_f64().unwrap_or_default();
            let b = args["b"].as_f64().unwrap_or_default();
            Ok(ToolOutput::new(json!(format!(
                "The sum of {a} and {b} is {}",
                a + b
            ))))
        })
        .expect("add_numbers declares")
}

/// json-schema-2020-12 (SEP-1613): `$schema`, `$defs` and `additionalProperties` must reach the
/// tool list unchanged. Our declarations close every object, so `address` is closed too.
fn json_schema_2020_12() -> Tool {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "city": {"type": "string"}
                },
                "additionalProperties": false
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"}
        },
        "additionalProperties": false
    });
    read_only(
        "json_schema_2020_12_tool",
        schema,
        "Takes a name and an address, declared with JSON Schema 2020-12 keywords.",
    )
    .read(|_ctx, args: Value| async move { Ok(ToolOutput::new(json!({"received": args}))) })
    .expect("json_schema_2020_12_tool declares")
}

/// tools-call-elicitation: the suite checks that the server sends `elicitation/create` during
/// the call and that the result has content. Our server asks the client only to approve a call,
/// so this tool is high risk: the dispatcher needs a human's yes, and the server asks for it
/// over elicitation. The suite's answer (`username`, `email`) carries no `approve: true`, so the
/// call is denied (`approval_denied`, a text result) and the handler never runs.
fn elicitation() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "The message to show the user"}
        },
        "required": ["message"],
        "additionalProperties": false
    });
    ToolBuilder::from_schema("test_elicitation", 1, schema)
        .describe(
            "Shows a message, once a person approves the call.",
            "the MCP conformance suite calls it by this name.",
            None,
            "the message, if approved.",
        )
        .policy(
            Risk::High,
            Effect::Read,
            "A conformance fixture: high risk only so that a person is asked.",
        )
        .read(|_ctx, args: Value| async move {
            Ok(ToolOutput::new(
                json!({"approved_message": args["message"]}),
            ))
        })
        .expect("test_elicitation declares")
}

/// The id in `test://template/{id}/data`, when it is a non-empty run of letters and digits.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix(TEMPLATE_PREFIX)?
        .strip_suffix(TEMPLATE_SUFFIX)?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(id)
}

/// The read tool behind [`FixtureResources`]: the contents of one fixture URI.
fn read_resource() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {"uri": {"type": "string", "description": "A test:// URI."}},
        "required": ["uri"],
        "additionalProperties": false
    });
    read_only(
        "test_read_resource",
        schema,
        "Reads one of the conformance fixture's test:// resources.",
    )
    .read(|_ctx, args: Value| async move {
        let uri = args["uri"].as_str().unwrap_or_default();
        if uri == STATIC_URI {
            return Ok(ToolOutput::new(json!(STATIC_TEXT)));
        }
        match template_id(uri) {
            Some(id) => Ok(ToolOutput::new(json!({
                "id": id, "templateTest": true, "data": format!("Data for ID: {id}")
            }))),
            None => Err(ToolError::not_found(format!("no fixture resource {uri}"))),
        }
    })
    .expect("test_read_resource declares")
}

/// The suite's resources: one static text resource and one template, read by
/// `test_read_resource`.
pub struct FixtureResources;

impl ResourceSource for FixtureResources {
    fn read_tool(&self) -> &str {
        "test_read_resource"
    }

    fn templates(&self) -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            uri_template: "test://template/{id}/data".into(),
            name: "template-data".into(),
            description: Some("Data for one id, as JSON.".into()),
            mime_type: Some("application/json".into()),
        }]
    }

    fn list(&self, cursor: Option<&str>) -> Result<Page, OfferError> {
        if let Some(cursor) = cursor {
            return Err(OfferError::BadCursor {
                cursor: cursor.into(),
                remedy: "the fixture has one page".into(),
            });
        }
        Ok(Page {
            entries: vec![ResourceEntry {
                uri: STATIC_URI.into(),
                name: "static-text".into(),
                description: Some("A fixed sentence of text.".into()),
                mime_type: Some("text/plain".into()),
            }],
            next: None,
        })
    }

    fn read_call(&self, uri: &str) -> Result<ReadCall, OfferError> {
        let mime_type = if uri == STATIC_URI {
            "text/plain"
        } else if template_id(uri).is_some() {
            "application/json"
        } else {
            return Err(OfferError::UnknownResource {
                uri: uri.into(),
                served: format!(
                    "the fixture serves {STATIC_URI} and {TEMPLATE_PREFIX}ID{TEMPLATE_SUFFIX}"
                ),
            });
        };
        Ok(ReadCall {
            tool: self.read_tool().into(),
            arguments: json!({"uri": uri}),
            mime_type: mime_type.into(),
        })
    }
}

/// The fixture registry.
pub fn registry() -> Arc<Registry> {
    Arc::new(
        Registry::new([
            add_numbers(),
            json_schema_2020_12(),
            elicitation(),
            error_handling(),
            read_resource(),
            simple_text(),
        ])
        .expect("the fixture tools form a registry"),
    )
}

/// The suite's resources and its prompts.
pub fn offers() -> Offers {
    Offers {
        resources: Some(Arc::new(FixtureResources)),
        prompts: prompts(),
    }
}

/// The prompts the suite gets by name: `test_simple_prompt` (no arguments) and
/// `test_prompt_with_arguments` (both arguments appear in the message).
fn prompts() -> Vec<Prompt> {
    vec![
        Prompt::new("test_simple_prompt", "A prompt without arguments.", |_| {
            "This is a simple prompt for testing.".to_string()
        }),
        Prompt::new(
            "test_prompt_with_arguments",
            "A prompt with two required arguments.",
            |args| {
                let arg = |k: &str| {
                    args.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    arg("arg1"),
                    arg("arg2")
                )
            },
        )
        .with_argument(PromptArgument::new("arg1").required())
        .with_argument(PromptArgument::new("arg2").required()),
    ]
}
