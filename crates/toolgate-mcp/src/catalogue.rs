//! Our tool specs as MCP tool definitions. Annotations are hints for hosts derived from our
//! policy view; the server enforces the policy itself whatever a host does with them.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value};
use toolgate_core::{Effect, ToolSpec};

/// The hints a host may show for a tool of this effect.
pub fn annotations_for(spec: &ToolSpec) -> ToolAnnotations {
    hints(spec.policy.effect, spec.writes())
}

/// `writes`: the tool records receipts, so a retry with the same arguments replays.
fn hints(effect: Effect, writes: bool) -> ToolAnnotations {
    let (read_only, destructive, open_world) = match effect {
        Effect::Read => (true, false, false),
        Effect::UndoableWrite => (false, false, false),
        Effect::Outbound => (false, false, true),
        Effect::Irreversible | Effect::CostsMoney => (false, true, true),
    };
    // Reads change nothing, and writes replay their receipt when retried with the same
    // arguments; an outbound call that records nothing may do its effect again.
    ToolAnnotations::new()
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(writes || read_only)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_never_call_a_write_read_only_nor_an_irreversible_one_harmless() {
        // (effect, records receipts, readOnly, destructive, idempotent, openWorld)
        let cases = [
            (Effect::Read, false, true, false, true, false),
            (Effect::UndoableWrite, true, false, false, true, false),
            (Effect::Outbound, false, false, false, false, true),
            (Effect::Outbound, true, false, false, true, true),
            (Effect::Irreversible, true, false, true, true, true),
            (Effect::CostsMoney, true, false, true, true, true),
        ];
        for (effect, writes, read_only, destructive, idempotent, open_world) in cases {
            let hints = hints(effect, writes);
            assert_eq!(
                (
                    hints.read_only_hint,
                    hints.destructive_hint,
                    hints.idempotent_hint,
                    hints.open_world_hint
                ),
                (
                    Some(read_only),
                    Some(destructive),
                    Some(idempotent),
                    Some(open_world)
                ),
                "{effect:?}"
            );
        }
    }
}
