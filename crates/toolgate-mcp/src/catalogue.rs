//! Our tool specs as MCP tool definitions. Annotations are hints for hosts derived from our
//! policy view; the server enforces the policy itself whatever a host does with them.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value};
use toolgate_core::{Effect, ToolSpec};

/// The hints a host may show for a tool of this effect.
pub fn annotations_for(spec: &ToolSpec) -> ToolAnnotations {
    let effect = spec.policy.effect;
    let (read_only, destructive, open_world) = match effect {
        Effect::Read => (true, false, false),
        Effect::UndoableWrite => (false, false, false),
        Effect::Outbound => (false, false, true),
        Effect::Irreversible | Effect::CostsMoney => (false, true, true),
    };
    // Writes replay their receipt when retried with the same arguments.
    ToolAnnotations::new()
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(spec.writes() || read_only)
        .open_world(open_world)
}

/// The MCP definition of `spec`: its model view (name, rendered description, input schema,
/// output schema) and annotations.
pub fn mcp_tool(spec: &ToolSpec) -> Tool {
    let view = spec.model_view();
    let schema = object_of(view.input_schema);
    let mut tool = Tool::new(view.name, view.description, Arc::new(schema))
        .with_annotations(annotations_for(spec));
    if let Some(output) = view.output_schema {
        tool.output_schema = Some(Arc::new(object_of(output)));
    }
    tool
}

fn object_of(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        // Our schemas are objects by construction; anything else is shown as accepting nothing.
        _ => Map::new(),
    }
}
