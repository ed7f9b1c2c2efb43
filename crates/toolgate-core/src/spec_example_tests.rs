use serde_json::{Value, json};

use super::*;
use crate::error::ErrorCode;
use crate::tool::{DeclarationError, ToolBuilder, ToolOutput};

fn content() -> Value {
    json!({"total": 2, "rating": 4.5, "notes": [{"id": 3, "title": "Budget"}], "next_offset": null})
}

#[test]
fn example_result_table() {
    let c = content();
    let ok = ActualResult::Content(&c);
    let failed = ActualResult::Error("not_found");
    // (what it prevents, expected, actual, problems mentioning these words; empty: passes)
    let cases: Vec<(&str, Expected, &ActualResult<'_>, Vec<&str>)> = vec![
        (
            "a result with the declared keys and types passes",
            Expected::shape(&[
                ("/total", JsonType::Integer),
                ("/notes/0/title", JsonType::String),
                ("/next_offset", JsonType::Null),
            ]),
            &ok,
            vec![],
        ),
        (
            "a missing key is not taken for a pass",
            Expected::shape(&[("/count", JsonType::Integer)]),
            &ok,
            vec!["`/count` is missing"],
        ),
        (
            "a key of another type is not taken for a pass",
            Expected::shape(&[("/notes", JsonType::Object)]),
            &ok,
            vec!["`/notes` is array, expected object"],
        ),
        (
            "a whole number is also a number",
            Expected::shape(&[("/total", JsonType::Number)]),
            &ok,
            vec![],
        ),
        (
            "a fraction is not taken for an integer",
            Expected::shape(&[("/rating", JsonType::Integer)]),
            &ok,
            vec!["`/rating` is number, expected integer"],
        ),
        (
            "exact values pass, 2 and 2.0 the same number",
            Expected::values(&[("/total", json!(2.0)), ("/notes/0/id", json!(3))]),
            &ok,
            vec![],
        ),
        (
            "a wrong value is not taken for a pass",
            Expected::values(&[("/notes/0/title", json!("Groceries"))]),
            &ok,
            vec!["`/notes/0/title` is \"Budget\", expected \"Groceries\""],
        ),
        (
            "every wrong place is reported, not only the first",
            Expected::values(&[("/total", json!(3)), ("/missing", json!(1))]),
            &ok,
            vec!["`/total`", "`/missing` is missing"],
        ),
        (
            "an error result does not pass an expected shape",
            Expected::shape(&[("/total", JsonType::Integer)]),
            &failed,
            vec!["failed with `not_found`"],
        ),
        (
            "an expected error code passes",
            Expected::error(ErrorCode::NotFound),
            &failed,
            vec![],
        ),
        (
            "another error code is not taken for the expected one",
            Expected::error(ErrorCode::Conflict),
            &failed,
            vec!["expected error `conflict`, got error `not_found`"],
        ),
        (
            "a success is not taken for an expected error",
            Expected::error(ErrorCode::NotFound),
            &ok,
            vec!["the call succeeded"],
        ),
    ];
    for (prevents, expected, actual, words) in cases {
        let got = check_example_result(&expected, actual);
        match (&got, words.is_empty()) {
            (Ok(()), true) => {}
            (Err(problems), false) => {
                let text = problems.join("; ");
                for w in &words {
                    assert!(text.contains(w), "{prevents}: {text} lacks {w}");
                }
            }
            _ => panic!("{prevents}: {got:?}"),
        }
    }
}

#[test]
fn example_expectations_against_an_output_schema_table() {
    let schema = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "total": {"type": "integer"},
            "rating": {"type": "number"},
            "notes": {"type": "array", "items": {"type": "object", "properties": {"title": {"type": "string"}}}}
        }
    });
    let cases: Vec<(&str, Expected, Vec<&str>)> = vec![
        (
            "a place the schema declares with that type is accepted",
            Expected::shape(&[
                ("/total", JsonType::Integer),
                ("/notes/0/title", JsonType::String),
            ]),
            vec![],
        ),
        (
            "an integer value where the schema says number is accepted",
            Expected::values(&[("/rating", json!(4))]),
            vec![],
        ),
        (
            "a key a closed schema does not have is refused",
            Expected::shape(&[("/count", JsonType::Integer)]),
            vec!["`/count` is not in the output schema"],
        ),
        (
            "a value of a type the schema rules out is refused",
            Expected::values(&[("/total", json!("two"))]),
            vec!["`/total` is integer in the output schema, expected string"],
        ),
        (
            "a key under an open object is not judged",
            Expected::shape(&[("/notes/0/anything", JsonType::Boolean)]),
            vec![],
        ),
        (
            "a place that is not a JSON pointer is refused",
            Expected::shape(&[("total", JsonType::Integer)]),
            vec!["not a JSON pointer"],
        ),
        (
            "an expected error needs no output schema",
            Expected::error(ErrorCode::NotFound),
            vec![],
        ),
    ];
    for (prevents, expected, words) in cases {
        let problems = check_expected_against_schema(&expected, &schema).join("; ");
        assert_eq!(
            problems.is_empty(),
            words.is_empty(),
            "{prevents}: {problems}"
        );
        for w in &words {
            assert!(problems.contains(w), "{prevents}: {problems} lacks {w}");
        }
    }
}

fn counter(expected: Expected) -> Result<crate::tool::Tool, DeclarationError> {
    ToolBuilder::<Value>::from_schema(
        "demo_count",
        1,
        json!({"type": "object", "additionalProperties": false, "properties": {"q": {"type": "string"}}}),
    )
    .describe("Counts.", "you need a count.", None, "the count.")
    .policy(Risk::Low, Effect::Read, "It reads nothing.")
    .output_schema(json!({"type": "object", "additionalProperties": false, "properties": {"count": {"type": "integer"}}}))
    .example_returns("count q", json!({"q": "a"}), expected)
    .read(|_ctx, _args: Value| async move { Ok(ToolOutput::new(json!({"count": 1}))) })
}

#[test]
fn an_example_expecting_a_result_outside_the_output_schema_refuses_the_declaration() {
    let refused = counter(Expected::shape(&[("/total", JsonType::Integer)]));
    match refused {
        Err(e @ DeclarationError::ExampleResultOutsideSchema { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("demo_count") && text.contains("count q"),
                "{text}"
            );
            assert!(text.contains("/total"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    let tool = counter(Expected::values(&[("/count", json!(1))])).unwrap();
    assert!(tool.spec.examples[0].expected.is_some());
}

#[test]
fn an_expected_example_result_is_not_shown_to_the_model() {
    let tool = counter(Expected::values(&[("/count", json!(12345))])).unwrap();
    let description = tool.spec.rendered_description();
    assert!(description.contains("count q"), "{description}");
    assert!(!description.contains("12345"), "{description}");
}
