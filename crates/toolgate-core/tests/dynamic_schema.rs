//! Tools declared from a runtime JSON Schema (`ToolBuilder::from_schema`): composition and
//! local references validate through the dispatcher with model-facing messages, and hostile
//! schemas are refused at declaration. Each test is named after what it prevents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgate_core::registry::contract_problems;
use toolgate_core::schema::{MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH, SchemaError};
use toolgate_core::tool::{DeclarationError, Tool};
use toolgate_core::{
    CallRequest, CallResult, Dispatcher, Effect, ErrorCode, Principal, Registry, Risk, Stage,
    ToolBuilder, ToolError, ToolOutput,
};

fn shape_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["shape"],
        "properties": {
            "shape": {"oneOf": [{"$ref": "#/$defs/circle"}, {"$ref": "#/$defs/rect"}]},
            "label": {"type": "string", "maxLength": 20}
        },
        "$defs": {
            "circle": {
                "type": "object",
                "additionalProperties": false,
                "required": ["kind", "radius"],
                "properties": {
                    "kind": {"const": "circle"},
                    "radius": {"type": "number", "exclusiveMinimum": 0}
                }
            },
            "rect": {
                "type": "object",
                "additionalProperties": false,
                "required": ["kind", "width", "height"],
                "properties": {
                    "kind": {"const": "rect"},
                    "width": {"type": "number", "exclusiveMinimum": 0},
                    "height": {"type": "number", "exclusiveMinimum": 0}
                }
            }
        }
    })
}

fn declare(schema: Value) -> ToolBuilder<Value> {
    ToolBuilder::from_schema("demo_area", 1, schema)
        .describe(
            "Computes the area of a shape.",
            "you need the area of a circle or a rectangle.",
            None,
            "the area.",
        )
        .policy(Risk::Low, Effect::Read, "It computes and changes nothing.")
}

fn area(args: &Value) -> Result<f64, ToolError> {
    let shape = &args["shape"];
    let num = |k: &str| {
        shape[k]
            .as_f64()
            .ok_or_else(|| ToolError::internal("not a number"))
    };
    match shape["kind"].as_str() {
        Some("circle") => Ok(std::f64::consts::PI * num("radius")?.powi(2)),
        Some("rect") => Ok(num("width")? * num("height")?),
        _ => Err(ToolError::internal(
            "validated arguments have no known kind",
        )),
    }
}

fn area_tool(calls: Arc<AtomicUsize>) -> Tool {
    declare(shape_schema())
        .example("circle", json!({"shape": {"kind": "circle", "radius": 2}}))
        .example(
            "rectangle",
            json!({"shape": {"kind": "rect", "width": 2, "height": 3}, "label": "door"}),
        )
        .read(move |_ctx, args: Value| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(ToolOutput::new(json!({"area": area(&args)?})))
            }
        })
        .unwrap()
}

/// What a bad call must produce: the field, and text the model's error must contain.
enum Want {
    Area(f64),
    Invalid {
        field: &'static str,
        says: &'static [&'static str],
    },
}

#[tokio::test]
async fn one_of_with_ref_teaches_the_model_which_shape_to_use() {
    let calls = Arc::new(AtomicUsize::new(0));
    let registry = Arc::new(Registry::new([area_tool(Arc::clone(&calls))]).unwrap());
    let d = Dispatcher::new(registry).unwrap();
    let alice = Principal::local("alice", &[]);
    let cases: Vec<(&str, Value, Want)> = vec![
        (
            "a circle through its $ref is accepted",
            json!({"shape": {"kind": "circle", "radius": 1}}),
            Want::Area(std::f64::consts::PI),
        ),
        (
            "a rectangle through its $ref is accepted",
            json!({"shape": {"kind": "rect", "width": 2, "height": 3}, "label": "door"}),
            Want::Area(6.0),
        ),
        (
            "a circle without its radius names both shapes and the missing field",
            json!({"shape": {"kind": "circle"}}),
            Want::Invalid {
                field: "shape",
                says: &[
                    "matches none of the allowed shapes",
                    r#"(1) an object {kind: "circle", radius: a number}"#,
                    r#"(2) an object {kind: "rect""#,
                    "`shape.radius` is required but missing",
                ],
            },
        ),
        (
            "an unknown kind lists the kinds there are",
            json!({"shape": {"kind": "triangle", "side": 3}}),
            Want::Invalid {
                field: "shape",
                says: &[r#"kind: "circle""#, r#"kind: "rect""#],
            },
        ),
        (
            "a negative radius is out of range in the shape it meant",
            json!({"shape": {"kind": "circle", "radius": -1}}),
            Want::Invalid {
                field: "shape",
                says: &["`shape.radius` is out of range", "(got -1)"],
            },
        ),
        (
            "a shape that is not an object says what shapes are",
            json!({"shape": "circle"}),
            Want::Invalid {
                field: "shape",
                says: &["matches none of the allowed shapes", r#"(got "circle")"#],
            },
        ),
        (
            "a long label is rejected outside the composition as before",
            json!({"shape": {"kind": "circle", "radius": 1}, "label": "x".repeat(21)}),
            Want::Invalid {
                field: "label",
                says: &["`label` has the wrong length", "at most 20 characters"],
            },
        ),
        (
            "an unknown top-level field is rejected with the fields there are",
            json!({"shape": {"kind": "circle", "radius": 1}, "colour": "red"}),
            Want::Invalid {
                field: "colour",
                says: &["is not a field of this tool", "label, shape"],
            },
        ),
    ];
    let mut accepted = 0;
    for (name, args, want) in cases {
        let out = d
            .call(CallRequest::new(alice.clone(), "run-1", "demo_area", args))
            .await;
        match (&out.result, want) {
            (CallResult::Done(obs), Want::Area(expected)) => {
                accepted += 1;
                let got = obs.content["area"].as_f64().unwrap();
                assert!((got - expected).abs() < 1e-9, "{name}: {got}");
            }
            (CallResult::Failed(e), Want::Invalid { field, says }) => {
                assert_eq!(e.code, ErrorCode::InvalidArgument, "{name}");
                assert_eq!(e.field.as_deref(), Some(field), "{name}");
                assert_eq!(out.record.stage, Stage::Validate, "{name}");
                // An unknown field has no example of its own; every other field has one.
                assert!(
                    e.example.is_some() || field == "colour",
                    "{name}: no example"
                );
                // The error's own text, unescaped (the model reads it inside JSON).
                let text = format!("{} {}", e.message, e.hint.as_deref().unwrap_or_default());
                for fragment in says {
                    assert!(
                        text.contains(fragment),
                        "{name}: `{fragment}` not in {text}"
                    );
                }
            }
            (got, _) => panic!("{name}: unexpected {got:?}"),
        }
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        accepted,
        "bad calls reached the handler"
    );
}

#[tokio::test]
async fn unknown_field_inside_a_referenced_shape_suggests_the_real_one() {
    let registry = Arc::new(Registry::new([area_tool(Arc::new(AtomicUsize::new(0)))]).unwrap());
    let d = Dispatcher::new(registry).unwrap();
    let args = json!({"shape": {"kind": "circle", "radius": 1, "radus": 2}});
    let out = d
        .call(CallRequest::new(
            Principal::local("alice", &[]),
            "run-1",
            "demo_area",
            args,
        ))
        .await;
    let e = out.error().unwrap();
    let text = format!("{} {}", e.message, e.hint.as_deref().unwrap_or_default());
    assert!(
        text.contains("`shape.radus` is not a field of this tool"),
        "{text}"
    );
    assert!(text.contains("did you mean `radius`?"), "{text}");
}

fn refusal(result: Result<Tool, DeclarationError>) -> SchemaError {
    match result {
        Err(DeclarationError::Schema { source, .. }) => source,
        other => panic!("expected a schema refusal, got {other:?}"),
    }
}

fn read(builder: ToolBuilder<Value>) -> Result<Tool, DeclarationError> {
    builder.read(|_ctx, args: Value| async move { Ok(ToolOutput::new(args)) })
}

fn closed(properties: Value) -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": properties})
}

#[test]
fn network_ref_in_schema_is_refused() {
    for reference in [
        "https://evil.example/schema.json",
        "http://169.254.169.254/latest/meta-data",
        "file:///etc/passwd",
        "other.json#/definitions/x",
        "//evil.example/x",
    ] {
        let schema = closed(json!({"a": {"$ref": reference}}));
        match refusal(read(declare(schema))) {
            SchemaError::NonLocalRef {
                path,
                reference: got,
            } => {
                assert_eq!(path, "#/properties/a", "{reference}");
                assert_eq!(got, reference);
            }
            other => panic!("{reference}: refused for the wrong reason: {other}"),
        }
    }
    let remote_meta = json!({
        "$schema": "https://evil.example/meta",
        "type": "object", "additionalProperties": false, "properties": {}
    });
    let e = refusal(read(declare(remote_meta)));
    assert!(matches!(e, SchemaError::NonLocalRef { .. }), "{e}");
    assert!(e.to_string().contains("nothing is fetched"), "{e}");
}

fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// Builds `levels` nested schemas without recursion, each level wrapped by `wrap`.
fn nested(levels: usize, wrap: impl Fn(Value) -> Value) -> Value {
    let mut schema = json!({"type": "string"});
    for _ in 0..levels {
        schema = wrap(schema);
    }
    schema
}

#[test]
fn deeply_nested_schema_is_refused_without_overflowing_the_stack() {
    // Building and refusing must not recurse; the big stack is only for what a failing
    // assertion would drop on the way out.
    let worker = std::thread::Builder::new()
        .stack_size(256 * 1024 * 1024)
        .spawn(|| {
            // Built by moving values, never with `json!` around `inner` (which would copy it,
            // recursively, at every level).
            let wraps: [(&str, fn(Value) -> Value); 3] = [
                ("properties", |inner| {
                    let mut schema = closed(json!({}));
                    schema["properties"]["a"] = inner;
                    schema
                }),
                ("allOf", |inner| {
                    object([("allOf", Value::Array(vec![inner]))])
                }),
                ("items", |inner| {
                    object([("type", json!("array")), ("items", inner)])
                }),
            ];
            for (name, wrap) in wraps {
                let schema = nested(10_000, wrap);
                match refusal(read(declare(schema))) {
                    SchemaError::TooDeep { limit, .. } => assert_eq!(limit, MAX_SCHEMA_DEPTH),
                    other => panic!("{name}: refused for the wrong reason: {other}"),
                }
            }
        })
        .unwrap();
    worker.join().unwrap();
}

#[test]
fn ten_megabyte_schema_is_refused() {
    let huge_text = "x".repeat(10 * 1024 * 1024);
    let many_fields: serde_json::Map<String, Value> = (0..400_000)
        .map(|i| (format!("f{i}"), json!({"type": "string"})))
        .collect();
    for (name, schema) in [
        (
            "one huge description",
            closed(json!({"a": {"type": "string", "description": huge_text}})),
        ),
        ("many fields", closed(Value::Object(many_fields))),
    ] {
        let e = refusal(read(declare(schema)));
        assert_eq!(
            e,
            SchemaError::TooLarge {
                limit: MAX_SCHEMA_BYTES
            },
            "{name}"
        );
        assert!(e.to_string().contains("262144 bytes"), "{name}: {e}");
    }
}

#[test]
fn exponential_and_looping_references_are_refused() {
    let mut defs = serde_json::Map::new();
    defs.insert("a0".into(), json!({"type": "string"}));
    for i in 1..40 {
        let prev = format!("#/$defs/a{}", i - 1);
        defs.insert(
            format!("a{i}"),
            json!({"allOf": [{"$ref": prev}, {"$ref": prev}]}),
        );
    }
    let laughs = json!({
        "type": "object", "additionalProperties": false,
        "properties": {"x": {"$ref": "#/$defs/a39"}},
        "$defs": defs
    });
    let e = refusal(read(declare(laughs)));
    assert!(matches!(e, SchemaError::TooManySubschemas { .. }), "{e}");

    let looping = json!({
        "type": "object", "additionalProperties": false,
        "properties": {"x": {"$ref": "#/$defs/p"}},
        "$defs": {"p": {"allOf": [{"$ref": "#/$defs/q"}]}, "q": {"anyOf": [{"$ref": "#/$defs/p"}]}}
    });
    let e = refusal(read(declare(looping)));
    assert!(matches!(e, SchemaError::RefLoop { .. }), "{e}");

    // Recursion through a property consumes the value, so it ends: a tree is fine.
    let tree = json!({
        "type": "object", "additionalProperties": false,
        "properties": {"root": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {
            "type": "object", "additionalProperties": false,
            "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}
        }}
    });
    read(declare(tree)).unwrap();
}

#[test]
fn declared_schema_keeps_the_declaration_rules() {
    let open = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let cases: Vec<(&str, Result<Tool, DeclarationError>, Option<&str>)> = vec![
        (
            "a closed declared schema is accepted",
            read(declare(shape_schema())),
            None,
        ),
        (
            "an open object is refused by default",
            read(declare(open.clone())),
            Some("is open"),
        ),
        (
            "a misspelled keyword the validator would ignore is refused",
            read(declare(closed(
                json!({"a": {"type": "string", "minLenght": 3}}),
            ))),
            Some("`minLenght`"),
        ),
        (
            "an unknown format is refused, not ignored",
            read(declare(closed(
                json!({"a": {"type": "string", "format": "ipv5"}}),
            ))),
            Some("ipv5"),
        ),
        (
            "an example that does not validate is refused",
            read(declare(shape_schema()).example("bad", json!({"shape": {"kind": "circle"}}))),
            Some("does not validate"),
        ),
        (
            "a missing description is refused",
            read(
                ToolBuilder::from_schema("demo_area", 1, shape_schema()).policy(
                    Risk::Low,
                    Effect::Read,
                    "r",
                ),
            ),
            Some("description"),
        ),
        (
            "a JSON-typed tool without a declared schema is refused",
            read(
                ToolBuilder::<Value>::new("demo_any", 1)
                    .describe("a", "b", None, "c")
                    .policy(Risk::Low, Effect::Read, "r"),
            ),
            Some("schema"),
        ),
    ];
    for (name, result, want_error) in cases {
        match (result, want_error) {
            (Ok(_), None) => {}
            (Err(e), Some(fragment)) => assert!(e.to_string().contains(fragment), "{name}: {e}"),
            (got, want) => panic!("{name}: got {got:?}, want error {want:?}"),
        }
    }
}

#[test]
fn open_schema_opt_in_is_recorded_and_reported_by_the_contract_check() {
    let open = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let tool = read(
        declare(open)
            .allow_open_schema()
            .example("a", json!({"a": "x", "extra": 1})),
    )
    .unwrap();
    let problems = contract_problems([&tool.spec]);
    assert!(
        problems.contains(&"demo_area: input schema is not closed".to_string()),
        "{problems:?}"
    );
    let closed_tool = area_tool(Arc::new(AtomicUsize::new(0)));
    assert!(contract_problems([&closed_tool.spec]).is_empty());
}
