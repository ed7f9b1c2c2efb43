use super::*;
use crate::schema::test_fixtures::search_schema;
use serde_json::json;

fn kinds(args: Value) -> Vec<(String, ViolationKind)> {
    validate(&search_schema(), &args)
        .into_iter()
        .map(|v| (v.path, v.kind))
        .collect()
}

/// (case, arguments, expected (path, kind) violations)
type ValidationCase = (&'static str, Value, Vec<(&'static str, ViolationKind)>);

#[test]
fn validation_table() {
    use ViolationKind::*;
    let cases: Vec<ValidationCase> = vec![
        ("valid minimal call passes", json!({"query": "x"}), vec![]),
        (
            "optional null is treated as absent",
            json!({"query": "x", "limit": null}),
            vec![],
        ),
        (
            "unknown field is rejected",
            json!({"query": "x", "lmit": 3}),
            vec![("lmit", UnknownField)],
        ),
        (
            "unknown nested field is rejected",
            json!({"query": "x", "filters": {"yr": 1}}),
            vec![("filters.yr", UnknownField)],
        ),
        (
            "missing required field is rejected",
            json!({}),
            vec![("query", MissingField)],
        ),
        (
            "null for a required field is missing",
            json!({"query": null}),
            vec![("query", MissingField)],
        ),
        (
            "wrong enum value is rejected",
            json!({"query": "x", "format": "full"}),
            vec![("format", NotInEnum)],
        ),
        (
            "string for integer is rejected",
            json!({"query": "x", "limit": "5"}),
            vec![("limit", WrongType)],
        ),
        (
            "fractional integer is rejected",
            json!({"query": "x", "limit": 2.5}),
            vec![("limit", WrongType)],
        ),
        (
            "integer above maximum is rejected",
            json!({"query": "x", "limit": 51}),
            vec![("limit", OutOfRange)],
        ),
        (
            "empty string below minLength is rejected",
            json!({"query": ""}),
            vec![("query", BadLength)],
        ),
        (
            "too many items are rejected",
            json!({"query": "x", "ids": [1, 2, 3, 4]}),
            vec![("ids", BadLength)],
        ),
        (
            "duplicate items are rejected",
            json!({"query": "x", "ids": [1, 1]}),
            vec![("ids", DuplicateItems)],
        ),
        (
            "bad item is reported with its index",
            json!({"query": "x", "ids": [1, 0]}),
            vec![("ids[1]", OutOfRange)],
        ),
        (
            "relative date is rejected",
            json!({"query": "x", "due": "Friday"}),
            vec![("due", BadFormat)],
        ),
        (
            "impossible date is rejected",
            json!({"query": "x", "due": "2026-02-30"}),
            vec![("due", BadFormat)],
        ),
        (
            "non-object arguments are rejected",
            json!([1]),
            vec![("$", WrongType)],
        ),
    ];
    for (name, args, expected) in cases {
        let expected: Vec<(String, ViolationKind)> = expected
            .into_iter()
            .map(|(p, k)| (p.to_string(), k))
            .collect();
        assert_eq!(kinds(args), expected, "case: {name}");
    }
}

#[test]
fn expected_text_lists_allowed_enum_values() {
    let v = validate(&search_schema(), &json!({"query": "x", "format": "full"}));
    assert_eq!(v[0].expected, r#"one of "concise", "detailed""#);
    assert_eq!(v[0].received, Some(json!("full")));
}
