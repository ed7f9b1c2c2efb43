use serde_json::json;

use super::*;

fn proposal(decision: Decision, result: RecordedResult) -> Proposal {
    Proposal {
        line: 1,
        call_id: "run/1#1".into(),
        run_id: "run/1".into(),
        principal: "eval".into(),
        tenant: "local".into(),
        tool: "books_search".into(),
        arguments: json!({}),
        mode: None,
        origin: None,
        decision,
        result,
    }
}

fn refused(stage: Option<&str>, code: &str) -> Decision {
    Decision::Refused {
        stage: stage.map(str::to_string),
        code: code.into(),
    }
}

fn shape(value: serde_json::Value) -> Shape {
    Shape::of(&value)
}

#[test]
fn equal_shapes_with_different_values_are_not_a_difference() {
    let cases = [
        (json!({"n": 4}), json!({"n": 4.3})),
        (json!({"t": "a"}), json!({"t": "b"})),
        (
            json!({"books": [{"id": 1}]}),
            json!({"books": [{"id": 2}, {"id": 3}]}),
        ),
        // A field only some elements have is in the merged element shape either way.
        (
            json!({"books": [{"id": 1, "series": "x"}, {"id": 2}]}),
            json!({"books": [{"id": 3}, {"id": 4, "series": "y"}]}),
        ),
    ];
    for (before, now) in cases {
        assert_eq!(
            shape(before.clone()),
            shape(now.clone()),
            "{before} vs {now}"
        );
    }
}

#[test]
fn a_new_missing_or_retyped_key_is_a_difference_named_by_its_path() {
    let cases = [
        (
            json!({"result": {"total": 3}}),
            json!({"result": {"total": 3, "next_offset": 1}}),
            "result.next_offset: absent before, number now",
        ),
        (
            json!({"result": {"total": 3, "note": "x"}}),
            json!({"result": {"total": 3}}),
            "result.note: string before, absent now",
        ),
        (
            json!({"result": {"books": [{"id": 1}]}}),
            json!({"result": {"books": [{"id": "1"}]}}),
            "result.books[].id: number before, string now",
        ),
        (
            json!({"result": {"books": [{"id": 1}]}}),
            json!({"result": {"books": []}}),
            "result.books: a list before, an empty list now",
        ),
        (
            json!({"a": 1}),
            json!("text"),
            "the result: an object before, string now",
        ),
    ];
    for (before, now, expected) in cases {
        assert_eq!(
            shape_differences(&shape(before), &shape(now)),
            vec![expected.to_string()]
        );
    }
}

#[test]
fn text_that_is_not_json_has_the_string_shape_and_does_not_fail() {
    assert_eq!(Shape::of_text("plain words"), Shape::String);
    assert_eq!(Shape::of_text("{\"a\":1}"), shape(json!({"a": 0})));
}

#[test]
fn each_pair_of_decisions_is_classified_once() {
    let ran = || Replayed {
        decision: Decision::Ran,
        shape: shape(json!({"a": 1})),
    };
    let replay = |decision| Replayed {
        decision,
        shape: Shape::String,
    };
    let same_shape = RecordedResult::Shape(shape(json!({"a": 2})));
    let cases: Vec<(&str, Proposal, Replayed, Difference)> = vec![
        (
            "ran both, same shape",
            proposal(Decision::Ran, same_shape.clone()),
            ran(),
            Difference::Same,
        ),
        (
            "refused the same way (the eval records no stage)",
            proposal(refused(None, "invalid_argument"), same_shape.clone()),
            replay(refused(Some("validate"), "invalid_argument")),
            Difference::Same,
        ),
        (
            "refused at another stage with the same code",
            proposal(
                refused(Some("execute"), "not_found"),
                RecordedResult::NotRecorded,
            ),
            replay(refused(Some("resolve"), "not_found")),
            Difference::NowRefused {
                stage: "resolve".into(),
                code: "not_found".into(),
            },
        ),
        (
            "ran, now refused",
            proposal(Decision::Ran, same_shape.clone()),
            replay(refused(Some("catalogue"), "forbidden")),
            Difference::NowRefused {
                stage: "catalogue".into(),
                code: "forbidden".into(),
            },
        ),
        (
            "ran, now asks",
            proposal(Decision::Ran, same_shape.clone()),
            replay(Decision::AsksApproval),
            Difference::NowAsksApproval,
        ),
        (
            "asked both times (the replay never approves)",
            proposal(Decision::AsksApproval, RecordedResult::NotRecorded),
            replay(Decision::AsksApproval),
            Difference::Same,
        ),
        (
            "refused, now runs",
            proposal(refused(None, "invalid_argument"), same_shape.clone()),
            ran(),
            Difference::DifferentResult {
                what: "now runs; it refused (invalid_argument) in the record".into(),
            },
        ),
    ];
    for (name, recorded, replayed, expected) in cases {
        assert_eq!(compare(&recorded, &replayed).0, expected, "{name}");
    }
}

#[test]
fn a_result_the_record_does_not_hold_is_never_claimed_compared() {
    let ran = Replayed {
        decision: Decision::Ran,
        shape: Shape::String,
    };
    let cut = proposal(Decision::Ran, RecordedResult::Cut);
    assert_eq!(
        compare(&cut, &ran),
        (Difference::Same, Compared::DecisionOnlyResultCut)
    );
    let trace = proposal(Decision::Ran, RecordedResult::NotRecorded);
    assert_eq!(
        compare(&trace, &ran),
        (Difference::Same, Compared::DecisionOnly)
    );
}

#[test]
fn lines_that_are_not_decision_records_are_refused_by_line() {
    let record = r#"{"event":"tool_call","gen_ai.tool.call.id":"c1","gen_ai.tool.name":"books_get","run_id":"r","principal":"p","arguments":{},"stage":"done","outcome":"ok","approval":{"status":"not_needed"}}"#;
    let cases = [
        (format!("{record}\nnot json"), "line 2: not JSON"),
        (
            format!("{record}\n[1,2]"),
            "line 2: a JSON array, not an object",
        ),
        (
            format!("{record}\n{{\"hello\":1}}"),
            "line 2: not a decision record",
        ),
        (
            r#"{"event":"tool_call","gen_ai.tool.name":"books_get"}"#.to_string(),
            "line 1: a `tool_call` line without `arguments`",
        ),
        (
            r#"{"event":"model_turn"}"#.to_string(),
            "no calls to replay",
        ),
        (
            r#"{"toolset":"books-v2","task":"t","index":0,"calls":[{"tool":"x"}]}"#.to_string(),
            "line 1: a `eval call` line without `arguments`",
        ),
    ];
    for (text, expected) in cases {
        let error = parse_recording(&text).unwrap_err().to_string();
        assert!(
            error.starts_with(expected),
            "{error}\n  expected: {expected}"
        );
    }
}

#[test]
fn other_trace_events_and_nested_calls_are_skipped_not_replayed() {
    let text = [
        r#"{"event":"model_turn","round":1}"#,
        r#"{"event":"tool_call","gen_ai.tool.call.id":"c1","gen_ai.tool.name":"code_execution","run_id":"r","principal":"alice","tenant":"t","arguments":{"code":"x"},"stage":"done","outcome":"ok","approval":{"status":"not_needed"},"mode":"ask"}"#,
        r#"{"event":"tool_call","gen_ai.tool.call.id":"c2","parent_call_id":"c1","gen_ai.tool.name":"books_get","run_id":"r","principal":"alice","arguments":{},"stage":"done","outcome":"ok","approval":{"status":"not_needed"}}"#,
        r#"{"event":"tool_call","gen_ai.tool.call.id":"c3","gen_ai.tool.name":"email_send","run_id":"r","principal":"alice","arguments":{"id":1},"stage":"approval","outcome":"approval_denied","approval":{"status":"denied","denial":"no_channel"}}"#,
        "",
    ]
    .join("\n");
    let recording = parse_recording(&text).unwrap();
    assert_eq!(recording.runs.len(), 1);
    let calls = &recording.runs[0].calls;
    assert_eq!(calls.len(), 2);
    // The same record as an audit export line holds it.
    let record: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    let exported = json!({"id": 7, "call_id": "c1", "tool": "code_execution", "record": record});
    let from_audit = parse_recording(&exported.to_string()).unwrap();
    assert_eq!(from_audit.runs[0].calls[0].call_id, "c1");
    assert_eq!(from_audit.runs[0].calls[0].mode.as_deref(), Some("ask"));
    assert_eq!(
        (calls[0].principal.as_str(), calls[0].tenant.as_str()),
        ("alice", "t")
    );
    assert_eq!(calls[0].mode.as_deref(), Some("ask"));
    assert_eq!(calls[1].decision, Decision::AsksApproval);
    assert_eq!(calls[1].line, 4);
    assert_eq!(recording.skipped.get("model_turn"), Some(&1));
    assert_eq!(recording.skipped.get("nested tool_call"), Some(&1));
}

#[test]
fn eval_runs_keep_their_toolset_run_id_and_result_shape() {
    let text = [
        r#"{"toolset":"books-v2","task":"king","index":0,"calls":[{"round":1,"tool":"books_search","arguments":{"author":"King"},"is_error":false,"error":null,"result":"{\"result\":{\"total_matches\":7}}"},{"round":2,"tool":"books_get","arguments":{"ids":[]},"is_error":true,"error":"invalid_argument","result":"{\"error\":{}}"}]}"#,
        r#"{"toolset":"books-v3","task":"king","index":0,"calls":[{"round":1,"tool":"books_search","arguments":{},"is_error":false,"error":null,"result":"abc… (4000 chars)"}]}"#,
    ]
    .join("\n");
    let recording = parse_recording(&text).unwrap();
    assert_eq!(recording.toolsets(), ["books-v2", "books-v3"]);
    let v2 = recording.clone().recorded_with("books-v2");
    assert_eq!(v2.runs.len(), 1);
    let calls = &v2.runs[0].calls;
    assert_eq!(calls[0].call_id, "books-v2/king/0#1");
    assert_eq!(calls[0].principal, EVAL_PRINCIPAL);
    assert_eq!(
        calls[0].result,
        RecordedResult::Shape(shape(json!({"result": {"total_matches": 0}})))
    );
    assert_eq!(calls[1].decision, refused(None, "invalid_argument"));
    let v3 = recording.recorded_with("books-v3");
    assert_eq!(v3.runs[0].calls[0].result, RecordedResult::Cut);
}

#[test]
fn calls_the_loop_answered_itself_are_not_replayed_as_dispatcher_calls() {
    let call = |result: &str| json!({"tool": "books_get", "arguments": {}, "is_error": false, "error": null, "result": result});
    let run = json!({"toolset": "books-v3", "task": "t", "index": 0, "calls": [
        call("{\"result\":{}}"),
        call("[repeat] You made this exact call in round 1 ...\n{\"result\":{}}"),
        call("{\"error\":{\"code\":\"forbidden\",\"message\":\"not run: web_clip is only for a URL\"}}"),
    ]});
    let recording = parse_recording(&run.to_string()).unwrap();
    assert_eq!(recording.call_count(), 1);
    assert_eq!(recording.skipped.get(LOOP_ANSWERED), Some(&2));
}

#[test]
fn an_accept_entry_accepts_only_what_it_names() {
    let file = AcceptFile::parse(
        r#"{"accept":[{"call":"r#2","reason":"known"},{"tool":"books_search","kind":"different_result","reason":"pages"}]}"#,
    )
    .unwrap();
    let different = Difference::DifferentResult { what: "x".into() };
    let refused = Difference::NowRefused {
        stage: "validate".into(),
        code: "invalid_argument".into(),
    };
    assert_eq!(file.accepting("r#2", "books_get", &refused), Some(0));
    assert_eq!(file.accepting("r#1", "books_search", &different), Some(1));
    assert_eq!(file.accepting("r#1", "books_search", &refused), None);
    assert_eq!(file.accepting("r#1", "books_get", &different), None);
    assert_eq!(file.accepting("r#2", "books_get", &Difference::Same), None);
}

#[test]
fn an_accept_file_that_would_accept_everything_or_says_no_reason_is_refused() {
    let cases = [
        (
            r#"{"accept":[{"kind":"now_refused","reason":"x"}]}"#,
            "names neither",
        ),
        (
            r#"{"accept":[{"tool":"t","reason":" "}]}"#,
            "gives no reason",
        ),
        (
            r#"{"accept":[{"tool":"t","reason":"x","calls":"y"}]}"#,
            "not valid",
        ),
        (
            r#"{"accept":[{"tool":"t","kind":"other","reason":"x"}]}"#,
            "not valid",
        ),
    ];
    for (text, expected) in cases {
        let error = AcceptFile::parse(text).unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
    }
}

#[test]
fn a_catalogue_without_the_tool_a_narrower_schema_or_an_approval_mode_stops_the_call_first() {
    use toolgate_core::Mode;
    let schema = json!({
        "type": "object",
        "properties": {"ids": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
        "required": ["ids"],
        "additionalProperties": false
    });
    let gate = CatalogueGate {
        source: "books-v2".into(),
        tools: [
            (
                "books_get".to_string(),
                GateTool {
                    input_schema: schema.clone(),
                    approval_in: Vec::new(),
                },
            ),
            (
                "books_tag".to_string(),
                GateTool {
                    input_schema: json!({"type": "object"}),
                    approval_in: vec![Mode::Ask],
                },
            ),
        ]
        .into_iter()
        .collect(),
    };
    let cases = [
        ("books_get", json!({"ids": [1]}), Mode::Auto, None),
        (
            "books_get",
            json!({"ids": [1, 2, 3]}),
            Mode::Auto,
            Some(refused(Some("validate"), "invalid_argument")),
        ),
        (
            "books_removed",
            json!({}),
            Mode::Auto,
            Some(refused(Some("resolve"), "not_found")),
        ),
        ("books_tag", json!({}), Mode::Auto, None),
        (
            "books_tag",
            json!({}),
            Mode::Ask,
            Some(Decision::AsksApproval),
        ),
    ];
    for (tool, arguments, mode, expected) in cases {
        assert_eq!(
            gate.decide(tool, &arguments, mode),
            expected,
            "{tool} {arguments}"
        );
    }
}
