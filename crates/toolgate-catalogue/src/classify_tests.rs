use serde_json::{Value, json};
use toolgate_core::approval::Mode;
use toolgate_core::spec::{Deprecation, Milestone};
use toolgate_core::{Effect, ErrorCode, Risk};

use super::*;
use crate::review::{Accepted, Review};
use crate::snapshot::{FORMAT, Snapshot, ToolEntry};
use ChangeKind::{Breaking, Compatible, Policy};

fn input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "maxLength": 200, "description": "Words to find."},
            "format": {"type": "string", "enum": ["brief", "detailed"]},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "filter": {"$ref": "#/$defs/Filter"}
        },
        "required": ["query"],
        "additionalProperties": false,
        "$defs": {
            "Filter": {
                "type": "object",
                "properties": {"year": {"type": "integer"}},
                "additionalProperties": false
            }
        }
    })
}

fn output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "title": {"type": "string"}},
                "required": ["id", "title"]
            }},
            "total": {"type": "integer"}
        },
        "required": ["items", "total"]
    })
}

fn entry(name: &str) -> ToolEntry {
    let mut e = ToolEntry {
        name: name.into(),
        version: 2,
        description: "Finds things.".into(),
        input_schema: input(),
        output_schema: Some(output()),
        risk: Risk::High,
        effect: Effect::Irreversible,
        risk_reason: "It sends mail.".into(),
        scopes: vec!["mail".into()],
        approval_in: vec![Mode::Auto, Mode::Ask],
        writes: true,
        deadline_ms: 10_000,
        max_output_bytes: 8192,
        error_codes: ErrorCode::ALL
            .iter()
            .map(|c| c.as_str().to_string())
            .collect(),
        deprecation: None,
        digest: String::new(),
    };
    e.reseal();
    e
}

fn snap(day: &str, tools: Vec<ToolEntry>) -> Snapshot {
    Snapshot {
        format: FORMAT,
        source: "demo".into(),
        taken_on: day.into(),
        digest: "d".into(),
        tools,
        earlier: Vec::new(),
    }
}

fn with_earlier(mut snapshot: Snapshot, earlier: Vec<ToolEntry>) -> Snapshot {
    snapshot.earlier = earlier;
    snapshot
}

fn kinds(report: &Report) -> Vec<(ChangeKind, Rule)> {
    let mut found: Vec<(ChangeKind, Rule)> =
        report.changes.iter().map(|c| (c.kind, c.rule)).collect();
    found.sort();
    found
}

fn sorted(mut v: Vec<(ChangeKind, Rule)>) -> Vec<(ChangeKind, Rule)> {
    v.sort();
    v
}

type Edit = fn(&mut Value);

fn nothing(_: &mut Value) {}

/// (what it prevents, edit of the old schema, edit of the new one, expected changes)
fn run_schema_table(side: &str, cases: Vec<(&str, Edit, Edit, Vec<(ChangeKind, Rule)>)>) {
    for (what, old_edit, new_edit, expected) in cases {
        let (mut old, mut new) = (entry("demo_tool"), entry("demo_tool"));
        for (e, edit) in [(&mut old, old_edit), (&mut new, new_edit)] {
            match side {
                "input" => edit(&mut e.input_schema),
                _ => edit(e.output_schema.as_mut().unwrap()),
            }
            e.reseal();
        }
        let report = check(
            &snap("2026-12-05", vec![old]),
            &snap("2026-12-05", vec![new]),
        );
        assert_eq!(
            kinds(&report),
            sorted(expected),
            "{what}: {:#?}",
            report.changes
        );
    }
}

#[test]
fn input_schema_changes_are_classified_by_what_callers_may_send() {
    run_schema_table(
        "input",
        vec![
            (
                "an unchanged schema reported as a change",
                nothing,
                nothing,
                vec![],
            ),
            (
                "an enum widened blocking the release",
                nothing,
                |s| {
                    s["properties"]["format"]["enum"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!("full"))
                },
                vec![(Compatible, Rule::InputWidened)],
            ),
            (
                "an enum narrowed slipping through",
                nothing,
                |s| s["properties"]["format"]["enum"] = json!(["brief"]),
                vec![(Breaking, Rule::InputNarrowed)],
            ),
            (
                "a new required field slipping through",
                nothing,
                |s| {
                    s["properties"]["owner"] = json!({"type": "string"});
                    s["required"] = json!(["query", "owner"]);
                },
                vec![(Breaking, Rule::NewRequiredField)],
            ),
            (
                "a new optional field blocking the release",
                nothing,
                |s| s["properties"]["owner"] = json!({"type": "string"}),
                vec![(Compatible, Rule::NewOptionalField)],
            ),
            (
                "an existing field made required slipping through",
                nothing,
                |s| s["required"] = json!(["query", "limit"]),
                vec![(Breaking, Rule::InputNarrowed)],
            ),
            (
                "a required field made optional blocking the release",
                nothing,
                |s| s["required"] = json!([]),
                vec![(Compatible, Rule::InputWidened)],
            ),
            (
                "an input field removed slipping through",
                nothing,
                |s| {
                    s["properties"].as_object_mut().unwrap().remove("limit");
                },
                vec![(Breaking, Rule::InputFieldRemoved)],
            ),
            (
                "a field removed after its deprecation blocking the release",
                |s| s["properties"]["limit"]["deprecated"] = json!(true),
                |s| {
                    s["properties"].as_object_mut().unwrap().remove("limit");
                },
                vec![(Compatible, Rule::DeprecatedFieldRemoved)],
            ),
            (
                "integer widened to number blocking the release",
                nothing,
                |s| s["properties"]["limit"]["type"] = json!("number"),
                vec![(Compatible, Rule::InputWidened)],
            ),
            (
                "a type swapped slipping through as a widening",
                nothing,
                |s| s["properties"]["limit"]["type"] = json!("string"),
                vec![
                    (Breaking, Rule::InputNarrowed),
                    (Compatible, Rule::InputWidened),
                ],
            ),
            (
                "a maximum lowered slipping through",
                nothing,
                |s| s["properties"]["limit"]["maximum"] = json!(20),
                vec![(Breaking, Rule::InputNarrowed)],
            ),
            (
                "a maximum raised blocking the release",
                nothing,
                |s| s["properties"]["limit"]["maximum"] = json!(100),
                vec![(Compatible, Rule::InputWidened)],
            ),
            (
                "a minimum raised slipping through",
                nothing,
                |s| s["properties"]["limit"]["minimum"] = json!(5),
                vec![(Breaking, Rule::InputNarrowed)],
            ),
            (
                "a length bound tightened slipping through",
                nothing,
                |s| s["properties"]["query"]["maxLength"] = json!(20),
                vec![(Breaking, Rule::InputNarrowed)],
            ),
            (
                "a const added slipping through",
                nothing,
                |s| s["properties"]["format"]["const"] = json!("brief"),
                vec![(Breaking, Rule::InputNarrowed)],
            ),
            (
                "array items narrowed slipping through",
                nothing,
                |s| s["properties"]["ids"]["items"]["minimum"] = json!(1),
                vec![(Breaking, Rule::InputNarrowed)],
            ),
            (
                "a closed object opened slipping through as a widening",
                nothing,
                |s| {
                    s.as_object_mut().unwrap().remove("additionalProperties");
                },
                vec![(Breaking, Rule::InputObjectOpened)],
            ),
            (
                "a closed object behind a $ref opened slipping through",
                nothing,
                |s| s["$defs"]["Filter"]["additionalProperties"] = json!(true),
                vec![(Breaking, Rule::InputObjectOpened)],
            ),
            (
                "a $ref retargeted to a narrower definition slipping through",
                nothing,
                |s| {
                    s["$defs"]["Filter2"] = json!({"type": "object",
                        "properties": {"year": {"type": "integer", "minimum": 1900}},
                        "additionalProperties": false});
                    s["properties"]["filter"]["$ref"] = json!("#/$defs/Filter2");
                },
                vec![(Breaking, Rule::InputNarrowed)],
            ),
            (
                "a $ref renamed to an identical definition reported as a change",
                nothing,
                |s| {
                    let filter = s["$defs"]["Filter"].clone();
                    s["$defs"] = json!({"YearFilter": filter});
                    s["properties"]["filter"]["$ref"] = json!("#/$defs/YearFilter");
                },
                vec![],
            ),
            (
                "a definition changed in place going unseen behind its $ref",
                nothing,
                |s| s["$defs"]["Filter"]["properties"]["year"]["type"] = json!("string"),
                vec![
                    (Breaking, Rule::InputNarrowed),
                    (Compatible, Rule::InputWidened),
                ],
            ),
            (
                "a $ref that points nowhere passing uncompared",
                nothing,
                |s| s["properties"]["filter"]["$ref"] = json!("#/$defs/Gone"),
                vec![(Breaking, Rule::InputChanged)],
            ),
            (
                "a keyword the walk does not model passing uncompared",
                nothing,
                |s| s["properties"]["query"]["not"] = json!({"const": ""}),
                vec![(Breaking, Rule::InputChanged)],
            ),
            (
                "a description edit blocking the release",
                nothing,
                |s| s["properties"]["query"]["description"] = json!("The words to look for."),
                vec![(Compatible, Rule::SchemaAnnotationEdited)],
            ),
        ],
    );
}

#[test]
fn output_schema_changes_are_classified_by_what_callers_may_read() {
    run_schema_table(
        "output",
        vec![
            (
                "an output field removed slipping through",
                nothing,
                |s| {
                    s["properties"].as_object_mut().unwrap().remove("total");
                    s["required"] = json!(["items"]);
                },
                vec![(Breaking, Rule::OutputFieldRemoved)],
            ),
            (
                "a nested output field removed slipping through",
                nothing,
                |s| {
                    let item = &mut s["properties"]["items"]["items"];
                    item["properties"].as_object_mut().unwrap().remove("title");
                    item["required"] = json!(["id"]);
                },
                vec![(Breaking, Rule::OutputFieldRemoved)],
            ),
            (
                "an output field added blocking the release",
                nothing,
                |s| s["properties"]["page"] = json!({"type": "integer"}),
                vec![(Compatible, Rule::OutputFieldAdded)],
            ),
            (
                "an output type widened slipping through as compatible",
                nothing,
                |s| s["properties"]["total"]["type"] = json!(["integer", "null"]),
                vec![(Breaking, Rule::OutputWidened)],
            ),
            (
                "an output field no longer always present slipping through",
                nothing,
                |s| s["required"] = json!(["items"]),
                vec![(Breaking, Rule::OutputWidened)],
            ),
            (
                "an output narrowed blocking the release",
                nothing,
                |s| s["properties"]["total"]["minimum"] = json!(0),
                vec![(Compatible, Rule::OutputNarrowed)],
            ),
        ],
    );
}

type EntryEdit = fn(&mut ToolEntry);

#[test]
fn tool_and_policy_changes_are_classified() {
    let cases: Vec<(&str, EntryEdit, Vec<(ChangeKind, Rule)>)> = vec![
        (
            "a risk lowered (and with it approval) passing without review",
            |e| {
                e.risk = Risk::Medium;
                e.approval_in = vec![Mode::Ask];
            },
            vec![(Policy, Rule::RiskLowered), (Policy, Rule::ApprovalDropped)],
        ),
        (
            "a risk lowered to low passing without review",
            |e| {
                e.risk = Risk::Low;
                e.approval_in = vec![];
            },
            vec![
                (Policy, Rule::RiskLowered),
                (Policy, Rule::ApprovalDropped),
                (Policy, Rule::ApprovalDropped),
            ],
        ),
        (
            "an effect lowered passing without review",
            |e| e.effect = Effect::UndoableWrite,
            vec![(Policy, Rule::EffectLowered)],
        ),
        (
            "a scope removed passing without review",
            |e| e.scopes = vec![],
            vec![(Policy, Rule::ScopeRemoved)],
        ),
        (
            "a scope added slipping through (callers without it lose the tool)",
            |e| e.scopes.push("admin".into()),
            vec![(Breaking, Rule::ScopeAdded)],
        ),
        (
            "a write turned into a read passing without review",
            |e| e.writes = false,
            vec![(Policy, Rule::WritesChanged)],
        ),
        (
            "an error code removed slipping through",
            |e| {
                e.error_codes.retain(|c| c != "conflict");
            },
            vec![(Breaking, Rule::ErrorCodeRemoved)],
        ),
        (
            "an error code renamed slipping through",
            |e| {
                e.error_codes.retain(|c| c != "conflict");
                e.error_codes.push("clash".into());
            },
            vec![
                (Breaking, Rule::ErrorCodeRemoved),
                (Compatible, Rule::ErrorCodeAdded),
            ],
        ),
        (
            "a shorter deadline slipping through",
            |e| e.deadline_ms = 2_000,
            vec![(Breaking, Rule::DeadlineShortened)],
        ),
        (
            "a smaller result bound slipping through",
            |e| e.max_output_bytes = 1024,
            vec![(Breaking, Rule::OutputBoundLowered)],
        ),
        (
            "a description edit or version bump blocking the release",
            |e| {
                e.description = "Finds things fast.".into();
                e.version = 3;
            },
            vec![
                (Compatible, Rule::DescriptionEdited),
                (Compatible, Rule::VersionChanged),
            ],
        ),
        (
            "a version bump excusing a breaking change",
            |e| {
                e.version = 3;
                e.output_schema = None;
            },
            vec![
                (Breaking, Rule::OutputSchemaRemoved),
                (Compatible, Rule::VersionChanged),
            ],
        ),
        (
            "a declared deprecation going unannounced",
            |e| {
                e.deprecation = Some(Deprecation {
                    deprecated_since: Milestone::Version(2),
                    remove_after: Milestone::Date("2027-06-30".into()),
                })
            },
            vec![(Compatible, Rule::DeprecationDeclared)],
        ),
    ];
    for (what, edit, expected) in cases {
        let old = entry("demo_tool");
        let mut new = entry("demo_tool");
        edit(&mut new);
        new.reseal();
        let report = check(
            &snap("2026-12-05", vec![old]),
            &snap("2026-12-05", vec![new]),
        );
        assert_eq!(
            kinds(&report),
            sorted(expected),
            "{what}: {:#?}",
            report.changes
        );
    }
    // Raising is compatible: the reverse of the lowering above.
    let mut low = entry("demo_tool");
    low.risk = Risk::Medium;
    low.approval_in = vec![Mode::Ask];
    low.reseal();
    let report = check(&snap("d", vec![low]), &snap("d", vec![entry("demo_tool")]));
    assert_eq!(
        kinds(&report),
        sorted(vec![
            (Compatible, Rule::RiskRaised),
            (Compatible, Rule::ApprovalAdded)
        ])
    );
}

fn deprecated(since: Milestone, until: Milestone) -> ToolEntry {
    let mut e = entry("demo_old");
    e.deprecation = Some(Deprecation {
        deprecated_since: since,
        remove_after: until,
    });
    e.reseal();
    e
}

#[test]
fn removals_are_allowed_only_once_a_deprecation_has_shipped() {
    let day = |d: &str| Milestone::Date(d.into());
    let cases: Vec<(&str, ToolEntry, &str, (ChangeKind, Rule))> = vec![
        (
            "a tool removed with no window slipping through",
            entry("demo_old"),
            "2026-12-05",
            (Breaking, Rule::ToolRemoved),
        ),
        (
            "a removal inside the window blocking the release",
            deprecated(Milestone::Version(2), day("2027-06-30")),
            "2026-12-05",
            (Compatible, Rule::ToolRemovedInWindow),
        ),
        (
            "a removal after the window blocking the release",
            deprecated(day("2026-01-01"), day("2026-06-30")),
            "2026-12-05",
            (Compatible, Rule::ToolRemovedInWindow),
        ),
        (
            "a removal before the deprecation's day slipping through",
            deprecated(day("2027-01-01"), day("2027-06-30")),
            "2026-12-05",
            (Breaking, Rule::ToolRemovedBeforeDeprecation),
        ),
        (
            "a removal before the deprecating version shipped slipping through",
            deprecated(Milestone::Version(3), Milestone::Version(4)),
            "2026-12-05",
            (Breaking, Rule::ToolRemovedBeforeDeprecation),
        ),
    ];
    for (what, old_tool, new_day, expected) in cases {
        let old = snap("2026-06-01", vec![entry("demo_tool"), old_tool]);
        let new = snap(new_day, vec![entry("demo_tool")]);
        let report = check(&old, &new);
        assert_eq!(kinds(&report), vec![expected], "{what}");
        let change = &report.changes[0];
        assert_eq!(
            (change.tool.as_str(), change.path.as_str()),
            ("demo_old", "tool")
        );
        if expected.1 == Rule::ToolRemovedInWindow {
            assert!(change.reason.starts_with("notice:"), "{}", change.reason);
        }
    }
    let added = check(&snap("d", vec![]), &snap("d", vec![entry("demo_new")]));
    assert_eq!(kinds(&added), vec![(Compatible, Rule::ToolAdded)]);
}

#[test]
fn an_earlier_version_served_beside_the_current_one_is_a_pinned_callers_contract() {
    let day = |d: &str| Milestone::Date(d.into());
    let kept = deprecated(Milestone::Version(1), day("2027-06-30"));
    let mut edited = kept.clone();
    edited.description.push_str(" Edited.");
    edited.reseal();
    let mut too_soon = deprecated(day("2027-01-01"), day("2027-06-30"));
    too_soon.reseal();
    let base = || vec![entry("demo_tool")];
    let cases: Vec<(
        &str,
        Vec<ToolEntry>,
        Vec<ToolEntry>,
        Vec<(ChangeKind, Rule)>,
    )> = vec![
        (
            "keeping an earlier version blocking the release",
            vec![],
            vec![kept.clone()],
            vec![(Compatible, Rule::EarlierVersionKept)],
        ),
        (
            "an unchanged earlier version reported",
            vec![kept.clone()],
            vec![kept.clone()],
            vec![],
        ),
        (
            "an earlier version edited under its pinned callers slipping through",
            vec![kept.clone()],
            vec![edited],
            vec![(Breaking, Rule::EarlierVersionChanged)],
        ),
        (
            "an earlier version dropped inside its window blocking the release",
            vec![kept.clone()],
            vec![],
            vec![(Compatible, Rule::ToolRemovedInWindow)],
        ),
        (
            "an earlier version dropped before its deprecation began slipping through",
            vec![too_soon],
            vec![],
            vec![(Breaking, Rule::ToolRemovedBeforeDeprecation)],
        ),
    ];
    for (what, before, after, expected) in cases {
        let old = with_earlier(snap("2026-06-01", base()), before);
        let new = with_earlier(snap("2026-12-05", base()), after);
        let report = check(&old, &new);
        assert_eq!(kinds(&report), expected, "{what}");
        for change in &report.changes {
            assert_eq!(change.tool, "demo_old", "{what}");
            assert!(
                change.path.starts_with("version "),
                "{what}: {}",
                change.path
            );
        }
    }
}

fn lowered() -> (Snapshot, Snapshot) {
    let mut new = entry("demo_tool");
    new.effect = Effect::UndoableWrite;
    new.reseal();
    (snap("d", vec![entry("demo_tool")]), snap("d", vec![new]))
}

#[test]
fn a_review_passes_exactly_the_reviewed_policy_change_and_nothing_else() {
    let (old, new) = lowered();
    let report = check(&old, &new);
    let digest = new.tools[0].digest.clone();
    let accept = |tool: &str, rule: Rule, digest: &str| Review {
        format: 1,
        accepted: vec![Accepted {
            tool: tool.into(),
            rule,
            digest: digest.into(),
            note: None,
        }],
    };
    assert!(!report.verdict(&Review::none()).passes());
    assert!(
        report
            .verdict(&accept("demo_tool", Rule::EffectLowered, &digest))
            .passes()
    );
    let cases = [
        (
            "an acceptance of another definition",
            accept("demo_tool", Rule::EffectLowered, "0ld"),
        ),
        (
            "an acceptance of another rule",
            accept("demo_tool", Rule::RiskLowered, &digest),
        ),
        (
            "an acceptance of another tool",
            accept("demo_other", Rule::EffectLowered, &digest),
        ),
    ];
    for (what, review) in cases {
        assert!(!report.verdict(&review).passes(), "{what} passed it");
    }
    // A breaking change cannot be reviewed away.
    let gone = check(&old, &snap("d", vec![]));
    let review = accept("demo_tool", Rule::ToolRemoved, &digest);
    assert_eq!(gone.verdict(&review).breaking, 1);
    assert!(!gone.verdict(&review).passes());
}

#[test]
fn review_files_of_another_format_or_with_unknown_fields_are_refused() {
    let cases = [
        (r#"{"format": 2, "accepted": []}"#, "format 2"),
        (
            r#"{"format": 1, "accepted": [], "all": true}"#,
            "unknown field",
        ),
        (
            r#"{"format": 1, "accepted": [{"tool": "x", "rule": "risk_lowered"}]}"#,
            "digest",
        ),
        (r#"{"accepted": []}"#, "no numeric"),
    ];
    for (text, expected) in cases {
        let err = Review::from_json(text).unwrap_err().to_string();
        assert!(err.contains(expected), "{text}: {err}");
    }
}

#[test]
fn the_table_and_json_say_what_changed_and_what_to_accept() {
    let (old, new) = lowered();
    let report = check(&old, &new);
    let table = report.to_table(&Review::none());
    assert!(table.contains("policy (unreviewed)"), "{table}");
    assert!(table.contains("effect_lowered"), "{table}");
    assert!(table.contains("FAILS"), "{table}");
    let json = report.to_json(&Review::none());
    assert_eq!(json["verdict"]["passes"], false);
    assert_eq!(
        json["unreviewed_policy_changes"][0]["rule"],
        "effect_lowered"
    );
    assert_eq!(
        json["unreviewed_policy_changes"][0]["digest"],
        new.tools[0].digest.as_str()
    );
    let clean = check(&old, &old);
    assert!(clean.to_table(&Review::none()).contains("no differences"));
    assert_eq!(clean.to_json(&Review::none())["verdict"]["passes"], true);
}
