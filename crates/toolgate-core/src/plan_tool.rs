//! The plan tool ([`PLAN_TOOL`]): how a model asks for a change the policy's phases keep
//! closed ([`crate::phase_gate`]).
//!
//! Contract:
//! - its model view names every tool a plan can open, with what each does, and its input
//!   schema is `{tool, arguments}` where `tool` is one of those names and `arguments` matches
//!   one of their input schemas (`anyOf`, each closed; a schema's `$defs` are moved up under the
//!   tool's name so its references still resolve), so a model in the explore phase knows what
//!   it may propose and how, although the tools themselves are not in its list;
//! - the dispatcher does the asking: it validates the proposed call against exactly the named
//!   tool's schema and check, refuses a tool the caller may not call or that needs no plan,
//!   shows the person the proposed tool's own preview and asks (the tool is high risk, so it
//!   asks in every mode; taint rules are the proposed call's);
//! - this handler runs only after a yes: it records the grant, bound to the caller, its run,
//!   the tool, the version served now and the digest of the canonical arguments, and tells the
//!   model what it may now do.
//!
//! Refuses to be declared when no tool would be closed (a plan tool with nothing to propose).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::canonical::{canonical_json, digest_parts};
use crate::error::ToolError;
use crate::phase_gate::{PLAN_TOOL, PhaseGate};
use crate::spec::{Effect, Risk, ToolSpec};
use crate::tool::{DeclarationError, Tool, ToolBuilder, ToolOutput};

/// The plan tool over `gate` (the dispatcher's own gate, see
/// [`crate::Dispatcher::with_phases`]), for the tools in `specs` the gate closes.
pub fn plan_propose_tool<'a>(
    gate: Arc<PhaseGate>,
    specs: impl IntoIterator<Item = &'a ToolSpec>,
) -> Result<Tool, DeclarationError> {
    let closed: Vec<&ToolSpec> = specs.into_iter().filter(|s| gate.gates(s)).collect();
    if closed.is_empty() {
        return Err(DeclarationError::Missing {
            tool: PLAN_TOOL.into(),
            what: "a tool the phases close (nothing to propose)",
        });
    }
    let minutes = gate.config().plan_ttl_secs().div_ceil(60);
    let proposable: Vec<String> = closed
        .iter()
        .map(|s| {
            format!(
                "`{}` ({})",
                s.name,
                s.description.does.trim_end_matches('.')
            )
        })
        .collect();
    let builder = ToolBuilder::<Value>::from_schema(PLAN_TOOL, 1, plan_schema(&closed));
    // An example from a closed tool's own examples, so it is a call that tool accepts.
    let example = closed
        .iter()
        .find_map(|s| s.examples.first().map(|e| (&s.name, &e.arguments)));
    let builder = match example {
        Some((name, arguments)) => builder.example(
            &format!("propose a call to {name}"),
            json!({"tool": name, "arguments": arguments}),
        ),
        None => builder,
    };
    builder
        .describe(
            &format!(
                "Asks the user to approve one change before you make it. Changes you can propose: {}.",
                proposable.join(", ")
            ),
            &format!(
                "the task needs one of those changes: they are not in your tool list until the user approves. Propose the exact call here; once approved, that tool is in your list and you make exactly that call, once, within {minutes} minutes."
            ),
            Some("you only need to read: the reading tools are always in your list."),
            "whether the user approved, and which call you may now make.",
        )
        .policy(
            Risk::High,
            Effect::Read,
            "Approving a plan lets the exact call it names run once without asking again.",
        )
        .deadline(Duration::from_secs(5))
        .read(move |ctx, args: Value| {
            let gate = Arc::clone(&gate);
            async move {
                let tool = args.get("tool").and_then(Value::as_str).unwrap_or("");
                let Some(version) = ctx.tools.tool_version(tool) else {
                    return Err(ToolError::not_found(format!(
                        "there is no tool named `{tool}`"
                    )));
                };
                let arguments = args.get("arguments").cloned().unwrap_or(Value::Null);
                let args_hash = digest_parts(&[&canonical_json(&arguments)]);
                let grant = gate.grant(
                    &ctx.principal,
                    &ctx.run_id,
                    tool,
                    version,
                    &args_hash,
                    ctx.now_unix,
                );
                Ok(ToolOutput::new(json!({
                    "approved": true,
                    "tool": grant.tool,
                    "valid_for_secs": grant.expires_at_unix.saturating_sub(grant.granted_at_unix),
                    "next": format!(
                        "The user approved this plan. `{}` is now in your tool list: call it with exactly the arguments you proposed, once.",
                        grant.tool
                    ),
                })))
            }
        })
}

/// `{tool, arguments}`: `tool` one of the closed tools' names, `arguments` one of their input
/// schemas, with each schema's `$defs` moved up under its tool's name.
fn plan_schema(closed: &[&ToolSpec]) -> Value {
    let mut defs = Map::new();
    let branches: Vec<Value> = closed
        .iter()
        .map(|spec| hoist_defs(&spec.name, &spec.input_schema, &mut defs))
        .collect();
    let names: Vec<&str> = closed.iter().map(|s| s.name.as_str()).collect();
    let mut schema = json!({
        "type": "object",
        "properties": {
            "tool": {
                "type": "string",
                "enum": names,
                "description": "The tool you will call."
            },
            "arguments": {
                "anyOf": branches,
                "description": "The exact arguments you will pass to that tool."
            }
        },
        "required": ["tool", "arguments"],
        "additionalProperties": false
    });
    if !defs.is_empty()
        && let Some(object) = schema.as_object_mut()
    {
        object.insert("$defs".into(), Value::Object(defs));
    }
    schema
}

/// `schema` without its `$defs`, which go into `defs` as `<tool>__<name>`, and every
/// `#/$defs/<name>` reference in it rewritten to match. A `#` reference (the schema itself)
/// becomes a reference to its own entry in `defs`.
fn hoist_defs(tool: &str, schema: &Value, defs: &mut Map<String, Value>) -> Value {
    let mut body = schema.clone();
    let own = body
        .as_object_mut()
        .and_then(|o| o.remove("$defs"))
        .and_then(|d| match d {
            Value::Object(map) => Some(map),
            _ => None,
        })
        .unwrap_or_default();
    let mut self_referenced = false;
    rewrite_refs(tool, &mut body, &mut self_referenced);
    for (name, mut def) in own {
        rewrite_refs(tool, &mut def, &mut self_referenced);
        defs.insert(format!("{tool}__{name}"), def);
    }
    if self_referenced {
        defs.insert(format!("{tool}__"), body.clone());
    }
    body
}

fn rewrite_refs(tool: &str, value: &mut Value, self_referenced: &mut bool) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get_mut("$ref") {
                if let Some(name) = reference.strip_prefix("#/$defs/") {
                    *reference = format!("#/$defs/{tool}__{name}");
                } else if reference == "#" {
                    *self_referenced = true;
                    *reference = format!("#/$defs/{tool}__");
                }
            }
            for child in map.values_mut() {
                rewrite_refs(tool, child, self_referenced);
            }
        }
        Value::Array(items) => {
            for child in items {
                rewrite_refs(tool, child, self_referenced);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_own_definitions_keep_resolving_once_moved_up() {
        let schema = json!({
            "type": "object",
            "properties": {"when": {"$ref": "#/$defs/Date"}},
            "additionalProperties": false,
            "$defs": {"Date": {"type": "string", "format": "date"}}
        });
        let mut defs = Map::new();
        let body = hoist_defs("notes_remind", &schema, &mut defs);
        assert_eq!(
            body["properties"]["when"]["$ref"],
            "#/$defs/notes_remind__Date"
        );
        assert!(body.get("$defs").is_none());
        assert_eq!(
            defs["notes_remind__Date"],
            json!({"type": "string", "format": "date"})
        );
    }

    #[test]
    fn two_tools_with_a_definition_of_the_same_name_do_not_collide() {
        let schema = |ty: &str| json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}, "additionalProperties": false, "$defs": {"X": {"type": ty}}});
        let mut defs = Map::new();
        hoist_defs("a_tool", &schema("string"), &mut defs);
        hoist_defs("b_tool", &schema("integer"), &mut defs);
        assert_eq!(defs["a_tool__X"]["type"], "string");
        assert_eq!(defs["b_tool__X"]["type"], "integer");
    }
}
