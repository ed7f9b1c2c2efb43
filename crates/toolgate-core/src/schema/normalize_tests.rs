use super::*;
use crate::schema::is_closed;
use crate::schema::test_fixtures::search_schema;
use serde_json::json;

#[test]
fn normalization_table() {
    let cases: Vec<(&str, Value, Result<(), &str>)> = vec![
        (
            "open object is refused",
            json!({"type": "object", "properties": {}}),
            Err("open"),
        ),
        (
            "nested open object is refused",
            json!({"type": "object", "additionalProperties": false, "properties": {"f": {"type": "object"}}}),
            Err("open"),
        ),
        (
            "unsupported keyword is refused",
            json!({"type": "object", "additionalProperties": false, "oneOf": []}),
            Err("oneOf"),
        ),
        (
            "unknown format is refused",
            json!({"type": "string", "format": "ipv4"}),
            Err("ipv4"),
        ),
        (
            "invalid pattern is refused",
            json!({"type": "string", "pattern": "("}),
            Err("pattern"),
        ),
        (
            "closed object is accepted",
            json!({"type": "object", "additionalProperties": false, "properties": {"a": {"type": "string"}}}),
            Ok(()),
        ),
    ];
    for (name, schema, expected) in cases {
        match (normalize(schema), expected) {
            (Ok(s), Ok(())) => assert!(is_closed(&s), "case: {name}"),
            (Err(e), Err(fragment)) => {
                assert!(e.to_string().contains(fragment), "case: {name}: {e}")
            }
            (got, want) => panic!("case {name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn optional_enum_with_variant_notes_becomes_a_plain_enum() {
    let derived = json!({
        "description": "Reading status.",
        "anyOf": [
            {"oneOf": [
                {"type": "string", "enum": ["reading", "read"]},
                {"type": "string", "const": "none", "description": "No status set."}
            ]},
            {"type": "null"}
        ]
    });
    assert_eq!(
        normalize(derived).unwrap(),
        json!({"description": "Reading status (none: No status set.)", "type": "string", "enum": ["reading", "read", "none"]})
    );
}

#[test]
fn normalization_drops_null_types_and_width_formats() {
    let s = search_schema();
    assert_eq!(
        s["properties"]["limit"],
        json!({"type": "integer", "minimum": 1, "maximum": 50})
    );
    assert_eq!(
        s["properties"]["format"]["enum"],
        json!(["concise", "detailed"])
    );
}
