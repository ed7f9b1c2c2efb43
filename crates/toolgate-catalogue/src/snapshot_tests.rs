use serde_json::{Value, json};
use toolgate_core::spec::Milestone;
use toolgate_core::tool::{DeclarationError, ToolBuilder, ToolOutput};
use toolgate_core::{Effect, ErrorCode, Registry, Risk, Tool};

use super::*;

fn tool(name: &str) -> ToolBuilder<Value> {
    ToolBuilder::from_schema(
        name,
        2,
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": false}),
    )
    .describe("Finds things.", "When asked.", None, "The things.")
    .policy(Risk::Low, Effect::Read, "It only reads.")
}

fn finish(builder: ToolBuilder<Value>) -> Result<Tool, DeclarationError> {
    builder.read(|_ctx, _args| async { Ok(ToolOutput::new(json!({}))) })
}

fn snapshot() -> Snapshot {
    let old = finish(
        tool("demo_old").deprecated(Milestone::Version(2), Milestone::Date("2027-01-31".into())),
    )
    .unwrap();
    let registry = Registry::new([finish(tool("demo_find")).unwrap(), old]).unwrap();
    Snapshot::of_registry(&registry, "demo", "2026-12-05")
}

#[test]
fn a_snapshot_reads_back_as_written_with_every_part_of_the_contract() {
    let snap = snapshot();
    let read = Snapshot::from_json(&snap.to_json()).unwrap();
    assert_eq!(read, snap);
    let names: Vec<&str> = read.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["demo_find", "demo_old"]);
    let old = read.tool("demo_old").unwrap();
    assert_eq!(
        old.deprecation.as_ref().unwrap().remove_after,
        Milestone::Date("2027-01-31".into())
    );
    assert_eq!(old.error_codes.len(), ErrorCode::ALL.len());
    assert_eq!(old.deadline_ms, 10_000);
    assert!(old.approval_in.is_empty());
    let text = snap.to_json();
    for field in [
        "\"format\": 1",
        "\"input_schema\"",
        "\"risk\": \"low\"",
        "\"scopes\"",
        "\"digest\"",
    ] {
        assert!(text.contains(field), "{field} missing");
    }
}

#[test]
fn a_snapshot_from_a_newer_format_is_refused_naming_both_formats() {
    let mut value: Value = serde_json::from_str(&snapshot().to_json()).unwrap();
    value["format"] = json!(2);
    let err = Snapshot::from_json(&value.to_string()).unwrap_err();
    assert!(matches!(
        err,
        SnapshotError::Newer {
            found: 2,
            supported: 1
        }
    ));
    let text = err.to_string();
    assert!(
        text.contains("format 2") && text.contains("format 1"),
        "{text}"
    );
}

#[test]
fn unreadable_snapshots_are_refused_with_the_reason() {
    let good: Value = serde_json::from_str(&snapshot().to_json()).unwrap();
    let mut unknown_top = good.clone();
    unknown_top["signed_by"] = json!("someone");
    let mut unknown_tool = good.clone();
    unknown_tool["tools"][0]["retries"] = json!(3);
    let mut edited = good.clone();
    edited["tools"][0]["risk"] = json!("high");
    let mut twice = good.clone();
    let first = twice["tools"][0].clone();
    twice["tools"].as_array_mut().unwrap().push(first);
    let mut zero = good.clone();
    zero["format"] = json!(0);
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "a field this build does not know",
            unknown_top.to_string(),
            "unknown field",
        ),
        (
            "a tool field this build does not know",
            unknown_tool.to_string(),
            "unknown field",
        ),
        (
            "an entry edited by hand",
            edited.to_string(),
            "digest does not match",
        ),
        ("a tool listed twice", twice.to_string(), "appears twice"),
        (
            "no format",
            json!({"tools": []}).to_string(),
            "no numeric \"format\"",
        ),
        (
            "an older unknown format",
            zero.to_string(),
            "format 0 is not one",
        ),
        ("not JSON", "{ nope".into(), "not a JSON snapshot"),
    ];
    for (what, text, expected) in cases {
        let err = Snapshot::from_json(&text).unwrap_err().to_string();
        assert!(err.contains(expected), "{what}: {err}");
    }
}

#[test]
fn a_deprecation_milestone_that_is_not_a_day_is_refused_at_declaration() {
    for bad in ["next year", "2027-13-01", "2027-1-1"] {
        let refused =
            finish(tool("demo_x").deprecated(Milestone::Version(1), Milestone::Date(bad.into())));
        assert!(
            matches!(refused, Err(DeclarationError::BadDeprecation(_))),
            "{bad} accepted"
        );
    }
}

#[test]
fn stable_error_code_names_match_the_core_exactly() {
    let listed = crate::stable_error_codes();
    let core: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    for name in &listed {
        assert!(
            core.contains(name),
            "error code `{name}` is listed as stable in stable-error-codes.txt but the core no longer has it: a code callers match on was renamed or removed. Follow the deprecation process (docs/catalogue-releases.md): keep the old name until its window closes"
        );
    }
    for name in &core {
        assert!(
            listed.contains(name),
            "error code `{name}` is new in the core: add it to crates/toolgate-catalogue/stable-error-codes.txt (a stable name is never renamed afterwards)"
        );
    }
}

#[test]
fn an_earlier_version_served_beside_the_current_one_is_recorded_and_sealed() {
    let current = ToolBuilder::from_schema(
        "demo_find",
        3,
        json!({"type": "object", "properties": {"query": {"type": "string"}}, "additionalProperties": false}),
    )
    .describe("Finds things.", "When asked.", None, "The things.")
    .policy(Risk::Low, Effect::Read, "It only reads.");
    let earlier =
        tool("demo_find").deprecated(Milestone::Version(3), Milestone::Date("2027-01-31".into()));
    let registry = Registry::new([finish(current).unwrap(), finish(earlier).unwrap()]).unwrap();
    let snap = Snapshot::of_registry(&registry, "demo", "2026-12-05");
    assert_eq!(
        snap.tools.iter().map(|t| t.version).collect::<Vec<_>>(),
        [3]
    );
    assert_eq!(
        snap.earlier.iter().map(|t| t.version).collect::<Vec<_>>(),
        [2]
    );
    assert_eq!(Snapshot::from_json(&snap.to_json()).unwrap(), snap);
    let mut tampered: Value = serde_json::from_str(&snap.to_json()).unwrap();
    tampered["earlier"][0]["risk"] = json!("high");
    let err = Snapshot::from_json(&tampered.to_string()).unwrap_err();
    assert!(
        matches!(err, SnapshotError::DigestMismatch(ref n) if n == "demo_find version 2"),
        "{err}"
    );
}
