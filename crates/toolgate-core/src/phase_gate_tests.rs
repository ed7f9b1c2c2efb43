use super::*;
use crate::error::ToolError;
use crate::idempotency::Receipt;
use crate::spec::Risk;
use crate::tool::{ToolBuilder, ToolOutput};
use serde_json::{Value, json};

fn spec(name: &str, effect: Effect, writes: bool) -> ToolSpec {
    let builder = ToolBuilder::<Value>::from_schema(
        name,
        1,
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    )
    .describe("Does a thing.", "you need it.", None, "what it did.")
    .policy(Risk::Medium, effect, "It does a thing.");
    let tool = if writes {
        builder.write(|_ctx, _args: Value| async move {
            Err::<Receipt, _>(ToolError::internal("never called"))
        })
    } else {
        builder.read(|_ctx, _args: Value| async move { Ok(ToolOutput::new(json!(null))) })
    };
    tool.unwrap().spec
}

fn on(ungated: &[&str]) -> PhaseConfig {
    PhaseConfig {
        gate_writes: true,
        plan_ttl_secs: Some(60),
        ungated: ungated.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn tools_that_change_something_are_closed_and_reads_stay_open() {
    let cases = [
        (
            "a read stays open",
            on(&[]),
            spec("notes_search", Effect::Read, false),
            false,
        ),
        (
            "a write is closed",
            on(&[]),
            spec("notes_create", Effect::UndoableWrite, true),
            true,
        ),
        (
            "an outbound read is closed",
            on(&[]),
            spec("web_fetch", Effect::Outbound, false),
            true,
        ),
        (
            "a write listed as ungated stays open",
            on(&["notes_create"]),
            spec("notes_create", Effect::UndoableWrite, true),
            false,
        ),
        (
            "nothing is closed when the gate is off",
            PhaseConfig::default(),
            spec("notes_send", Effect::Irreversible, true),
            false,
        ),
        (
            "the plan tool itself is never closed",
            on(&[]),
            spec(PLAN_TOOL, Effect::Outbound, false),
            false,
        ),
    ];
    for (what, config, spec, closed) in cases {
        assert_eq!(gated(&config, &spec), closed, "{what}");
    }
}

fn grant(tool: &str, version: u32, args: &str, expires: u64, used: bool) -> Grant {
    Grant {
        tool: tool.into(),
        version,
        args_hash: args.into(),
        granted_at_unix: 0,
        expires_at_unix: expires,
        used,
    }
}

#[test]
fn a_write_passes_only_with_a_live_grant_for_exactly_that_call() {
    let now = 100;
    let cases: Vec<(&str, Vec<Grant>, Admission)> = vec![
        ("no plan at all is refused", vec![], Admission::NoPlan),
        (
            "a plan for another tool does not open this one",
            vec![grant("notes_delete", 1, "h1", 200, false)],
            Admission::NoPlan,
        ),
        (
            "the exact call passes",
            vec![grant("notes_send", 1, "h1", 200, false)],
            Admission::Open(0),
        ),
        (
            "other arguments are refused",
            vec![grant("notes_send", 1, "h2", 200, false)],
            Admission::OtherCall,
        ),
        (
            "another version of the tool is refused",
            vec![grant("notes_send", 2, "h1", 200, false)],
            Admission::OtherCall,
        ),
        (
            "an expired plan is refused, at its expiry exactly too",
            vec![grant("notes_send", 1, "h1", 100, false)],
            Admission::Expired { at_unix: 100 },
        ),
        (
            "a used plan is refused (only a replay passes)",
            vec![grant("notes_send", 1, "h1", 200, true)],
            Admission::Used,
        ),
        (
            "a second live plan for the same call opens it after the first was used",
            vec![
                grant("notes_send", 1, "h1", 200, true),
                grant("notes_send", 1, "h1", 200, false),
            ],
            Admission::Open(1),
        ),
    ];
    for (what, grants, expected) in cases {
        assert_eq!(
            admission(&grants, "notes_send", 1, "h1", now),
            expected,
            "{what}"
        );
    }
}

#[test]
fn only_live_unused_grants_open_a_tool_in_the_listing() {
    let grants = vec![
        grant("notes_send", 1, "h1", 200, false),
        grant("notes_delete", 1, "h2", 200, true),
        grant("notes_create", 1, "h3", 50, false),
    ];
    let open = open_tools(&grants, 100);
    assert_eq!(open.into_iter().collect::<Vec<_>>(), vec!["notes_send"]);
}

fn call<'a>(who: &'a Principal, run: &'a str, args_hash: &str, now_unix: u64) -> PlannedCall<'a> {
    PlannedCall {
        principal: who,
        run,
        tool: "notes_send",
        version: 1,
        args_hash: args_hash.into(),
        now_unix,
    }
}

#[test]
fn a_grant_is_used_once_and_only_by_its_own_principal_and_run() {
    let gate = PhaseGate::new(on(&[]));
    let alice = Principal::local("alice", &[]);
    let bob = Principal::local("bob", &[]);
    gate.grant(&alice, "run-1", "notes_send", 1, "h1", 10);
    assert_eq!(
        gate.take(&call(&bob, "run-1", "h1", 20)),
        Err(Admission::NoPlan),
        "another principal"
    );
    assert_eq!(
        gate.take(&call(&alice, "run-2", "h1", 20)),
        Err(Admission::NoPlan),
        "another run"
    );
    assert_eq!(
        gate.open_tools(&alice, "run-1", 20)
            .into_iter()
            .collect::<Vec<_>>(),
        vec!["notes_send"]
    );
    assert!(gate.take(&call(&alice, "run-1", "h1", 20)).is_ok());
    assert_eq!(
        gate.take(&call(&alice, "run-1", "h1", 21)),
        Err(Admission::Used),
        "a second use"
    );
    assert!(gate.open_tools(&alice, "run-1", 21).is_empty());
}

#[test]
fn concurrent_takers_of_one_grant_use_it_once() {
    let gate = std::sync::Arc::new(PhaseGate::new(on(&[])));
    let alice = Principal::local("alice", &[]);
    gate.grant(&alice, "run", "notes_send", 1, "h", 0);
    let taken: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (gate, alice) = (&gate, &alice);
                scope.spawn(move || gate.take(&call(alice, "run", "h", 1)).is_ok())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum()
    });
    assert_eq!(taken, 1);
}

#[test]
fn a_misspelt_phases_key_is_refused() {
    let err = toml_like(json!({"gate_writes": true, "plan_tll_secs": 5})).unwrap_err();
    assert!(err.contains("plan_tll_secs"), "{err}");
}

fn toml_like(value: Value) -> Result<PhaseConfig, String> {
    serde_json::from_value(value).map_err(|e| e.to_string())
}
