use super::*;

fn spec(name: &str, does: &str, scopes: &[&str]) -> ToolSpec {
    ToolBuilder::<Value>::from_schema(
        name,
        1,
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    )
    .describe(does, "the task asks for it.", None, "an acknowledgement.")
    .policy(Risk::Low, Effect::Read, "It changes nothing.")
    .scopes(scopes)
    .read(|_ctx, _args: Value| async move { Ok(ToolOutput::new(json!("ok"))) })
    .unwrap()
    .spec
}

fn catalogue() -> Vec<ToolSpec> {
    vec![
        spec("email_send", "Sends an email draft to its recipients.", &[]),
        spec(
            "email_draft",
            "Writes an email draft without sending it.",
            &[],
        ),
        spec("calendar_create_event", "Creates a calendar event.", &[]),
        spec(
            "weather_forecast",
            "Gives the weather forecast for a city.",
            &[],
        ),
        spec("payroll_run", "Pays every employee's salary.", &["payroll"]),
        spec("notes_search", "Searches the user's notes by keyword.", &[]),
    ]
}

fn names(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.name.as_str()).collect()
}

#[test]
fn query_terms_keep_only_searchable_words() {
    let cases: &[(&str, &[&str])] = &[
        ("send an email", &["send", "email"]),
        ("Email, EMAIL and email_send", &["email", "send"]),
        ("the a of", &[]),
        ("", &[]),
        ("x y z", &[]),
        (
            "weather-forecast in Paris",
            &["weather", "forecast", "paris"],
        ),
        ("\"quoted\" OR NEAR(a b) *", &["quoted", "near"]),
        ("déjà vu café", &["déjà", "vu", "café"]),
    ];
    for (query, want) in cases {
        assert_eq!(query_terms(query), want.to_vec(), "{query}");
    }
}

#[test]
fn fts_syntax_in_a_query_is_never_read_as_syntax() {
    let cases: &[(&str, Option<&str>)] = &[
        ("email", Some("\"email\"")),
        ("send email", Some("\"send\" OR \"email\"")),
        (
            "email AND NOT send",
            Some("\"email\" OR \"not\" OR \"send\""),
        ),
        ("name:secret", Some("\"name\" OR \"secret\"")),
        ("\"", None),
        ("* ^ ()", None),
    ];
    for (query, want) in cases {
        assert_eq!(match_expression(query).as_deref(), *want, "{query}");
    }
}

#[test]
fn search_never_returns_a_tool_outside_the_catalogue() {
    let specs = catalogue();
    let index = ToolIndex::new(&specs).unwrap();
    let everyone = Principal::local("u", &["payroll"]);
    let cases: Vec<(&str, Principal, &str, Vec<&str>)> = vec![
        (
            "no catalogue restriction, scope held",
            everyone.clone(),
            "pay salary",
            vec!["payroll_run"],
        ),
        (
            "scope missing",
            Principal::local("u", &[]),
            "pay salary",
            vec![],
        ),
        (
            "outside the catalogue",
            everyone.clone().with_catalogue(["email_draft"]),
            "email",
            vec!["email_draft"],
        ),
        ("unauthenticated", Principal::anonymous(), "email", vec![]),
    ];
    for (label, principal, query, want) in cases {
        let hits = index.search(&principal, query, MAX_LIMIT).unwrap();
        assert_eq!(names(&hits), want, "{label}");
        for hit in &hits {
            let spec = specs.iter().find(|s| s.name == hit.name).unwrap();
            assert!(
                principal.may_see(&spec.name, &spec.policy.scopes),
                "{label}: {}",
                hit.name
            );
        }
    }
}

#[test]
fn ranking_puts_the_best_match_first_and_is_deterministic() {
    let specs = catalogue();
    let index = ToolIndex::new(&specs).unwrap();
    let p = Principal::local("u", &[]);
    let cases: &[(&str, &str)] = &[
        ("send an email", "email_send"),
        ("draft an email", "email_draft"),
        ("what's the weather in Lyon", "weather_forecast"),
        ("create an event in my calendar", "calendar_create_event"),
        ("search my notes", "notes_search"),
        ("emails", "email_draft"),
    ];
    for (query, best) in cases {
        let hits = index.search(&p, query, 3).unwrap();
        assert_eq!(
            hits.first().map(|h| h.name.as_str()),
            Some(*best),
            "{query}: {hits:?}"
        );
        assert_eq!(index.search(&p, query, 3).unwrap(), hits, "{query}");
    }
}

#[test]
fn search_respects_the_limit_and_never_lists_itself() {
    let mut specs = catalogue();
    specs.push(spec(TOOL_SEARCH, "Finds tools.", &[]));
    let index = ToolIndex::new(&specs).unwrap();
    assert_eq!(index.len(), 6);
    let p = Principal::local("u", &[]);
    for (limit, want) in [(1, 1), (2, 2), (0, 1), (50, 4)] {
        let hits = index
            .search(&p, "tools email calendar weather finds", limit)
            .unwrap();
        assert_eq!(hits.len(), want, "limit {limit}");
        assert!(hits.iter().all(|h| h.name != TOOL_SEARCH));
    }
}

#[test]
fn a_query_without_words_is_an_error_that_teaches() {
    let index = ToolIndex::new(&catalogue()).unwrap();
    let e = index
        .search(&Principal::local("u", &[]), "the of ?", 5)
        .unwrap_err();
    assert_eq!(e.code, crate::ErrorCode::InvalidArgument);
    assert_eq!(e.field.as_deref(), Some("query"));
    assert!(e.example.is_some() && e.hint.is_some());
}

#[test]
fn results_name_what_was_found_and_nothing_else() {
    let hits = vec![Hit {
        name: "email_send".into(),
        does: "Sends.".into(),
    }];
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (search_result("q", &hits), vec!["email_send"]),
        (search_result("q", &[]), vec![]),
        (json!({"error": {"code": "forbidden"}}), vec![]),
        (json!({"tools": "email_send"}), vec![]),
        (
            json!({"tools": [{"name": 3}, {"name": "a_b"}]}),
            vec!["a_b"],
        ),
    ];
    for (content, want) in cases {
        assert_eq!(names_in_result(&content), want, "{content}");
    }
}

#[test]
fn a_catalogue_that_already_has_tool_search_is_refused() {
    let tool = |name: &str| {
        ToolBuilder::<Value>::from_schema(
            name,
            1,
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
        .describe("d", "u", None, "r")
        .policy(Risk::Low, Effect::Read, "It changes nothing.")
        .read(|_ctx, _args: Value| async move { Ok(ToolOutput::new(json!("ok"))) })
        .unwrap()
    };
    assert!(matches!(
        registry_with_search(vec![tool("a_b"), tool(TOOL_SEARCH)]),
        Err(ToolSearchError::NameTaken)
    ));
    let registry = registry_with_search(vec![tool("a_b")]).unwrap();
    assert_eq!(
        registry.names().collect::<Vec<_>>(),
        vec!["a_b", TOOL_SEARCH]
    );
}
