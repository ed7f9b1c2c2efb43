use serde_json::json;

use super::*;

#[test]
fn a_long_message_never_makes_a_query_the_search_refuses() {
    let long = "word ".repeat(100);
    let cases: [(&str, &str, Option<usize>); 4] = [
        (
            "a short question is the query",
            "convert 20 euros to dollars",
            Some(27),
        ),
        (
            "a long message is cut at a word within the limit",
            &long,
            Some(199),
        ),
        ("blank text searches nothing", "  \n\t ", None),
        (
            "one word longer than the limit is not cut mid-word",
            &"x".repeat(300),
            None,
        ),
    ];
    for (name, message, chars) in cases {
        let query = preload_query(message);
        assert_eq!(query.as_ref().map(|q| q.chars().count()), chars, "{name}");
        if let Some(q) = query {
            assert!(q.chars().count() <= PRELOAD_QUERY_CHARS, "{name}");
        }
    }
}

fn def(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: format!("{name} does things."),
        input_schema: json!({"type": "object", "properties": {}}),
    }
}

fn catalogue(n: usize, with_search: bool) -> Vec<ToolDefinition> {
    let mut tools: Vec<ToolDefinition> = (0..n).map(|i| def(&format!("t{i:03}"))).collect();
    if with_search {
        tools.push(def(TOOL_SEARCH));
    }
    tools
}

fn names(tools: &[ToolDefinition]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

fn config(threshold: usize, always: &[&str]) -> DeferralConfig {
    DeferralConfig {
        threshold,
        always_loaded: always.iter().map(|s| s.to_string()).collect(),
        preload: 0,
    }
}

#[test]
fn deferral_is_off_below_the_threshold_and_without_tool_search() {
    let cases: Vec<(&str, usize, bool, Option<DeferralConfig>, bool, usize)> = vec![
        (
            "below the threshold",
            10,
            true,
            Some(config(30, &[])),
            false,
            10,
        ),
        (
            "at the threshold",
            30,
            true,
            Some(config(30, &[])),
            false,
            30,
        ),
        (
            "above the threshold",
            31,
            true,
            Some(config(30, &["t001"])),
            true,
            2,
        ),
        (
            "no tool_search in the registry",
            200,
            false,
            Some(config(30, &[])),
            false,
            200,
        ),
        ("deferral switched off", 200, true, None, false, 200),
    ];
    for (label, n, with_search, config, deferred, sent) in cases {
        let list = ToolList::plan(catalogue(n, with_search), config.as_ref());
        assert_eq!(list.is_deferred(), deferred, "{label}");
        assert_eq!(list.definitions().len(), sent, "{label}");
        assert_eq!(list.standing(), sent, "{label}");
        let has_search = names(list.definitions()).contains(&TOOL_SEARCH);
        assert_eq!(
            has_search, deferred,
            "{label}: tool_search is sent only when deferring"
        );
    }
}

#[test]
fn the_standing_set_is_tool_search_then_the_always_loaded_tools_the_caller_can_see() {
    let list = ToolList::plan(
        catalogue(40, true),
        Some(&config(5, &["t007", "not_visible", "t002", "t007"])),
    );
    assert_eq!(names(list.definitions()), vec![TOOL_SEARCH, "t007", "t002"]);
}

#[test]
fn appending_never_moves_or_changes_a_tool_already_sent() {
    let mut list = ToolList::plan(catalogue(60, true), Some(&config(5, &["t000"])));
    let searches: &[&[&str]] = &[
        &["t010", "t011"],
        &["t011", "t000", "t012"],
        &[],
        &["t013", "t010", "t013"],
    ];
    let mut before = list.definitions().to_vec();
    for found in searches {
        let found: Vec<String> = found.iter().map(|s| s.to_string()).collect();
        let appended = list.append_found(&found);
        let after = list.definitions();
        assert_eq!(&after[..before.len()], &before[..], "{found:?}");
        assert_eq!(names(&after[before.len()..]), appended, "{found:?}");
        before = after.to_vec();
    }
    assert_eq!(
        names(list.definitions()),
        vec![TOOL_SEARCH, "t000", "t010", "t011", "t012", "t013"]
    );
    assert_eq!(list.standing(), 2);
}

#[test]
fn a_found_name_the_caller_cannot_call_is_never_listed() {
    let mut list = ToolList::plan(catalogue(40, true), Some(&config(5, &[])));
    let appended = list.append_found(&[
        "payroll_run".to_string(),
        TOOL_SEARCH.to_string(),
        "t003".to_string(),
    ]);
    assert_eq!(appended, vec!["t003"]);
    assert_eq!(names(list.definitions()), vec![TOOL_SEARCH, "t003"]);
}

#[test]
fn a_run_that_does_not_defer_never_grows() {
    let mut list = ToolList::plan(catalogue(5, true), Some(&config(30, &[])));
    assert!(list.append_found(&["t001".to_string()]).is_empty());
    assert_eq!(list.definitions().len(), 5);
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_closed_tool_is_never_sent_and_an_opened_one_is_appended_after_the_standing_list() {
    let mut list = ToolList::plan(
        vec![def("notes_create"), def("notes_search"), def(PLAN)],
        None,
    );
    let (opened, closed) = list.follow_catalogue(&set(&["notes_create"]));
    assert_eq!((opened, closed), (vec![], vec!["notes_create".to_string()]));
    assert_eq!(names(list.definitions()), ["notes_search", PLAN]);
    assert_eq!(
        list.standing(),
        2,
        "the first request's list is the standing list"
    );
    let unchanged = list.follow_catalogue(&set(&["notes_create"]));
    assert_eq!(
        unchanged,
        (vec![], vec![]),
        "nothing changed, nothing reported"
    );
    let (opened, _) = list.follow_catalogue(&set(&[]));
    assert_eq!(opened, ["notes_create"]);
    assert_eq!(
        names(list.definitions()),
        ["notes_search", PLAN, "notes_create"]
    );
    assert_eq!(
        list.standing(),
        2,
        "the prefix before the opened tool never changes"
    );
    let (_, closed) = list.follow_catalogue(&set(&["notes_create"]));
    assert_eq!(
        closed,
        ["notes_create"],
        "a used plan closes the tool again"
    );
    assert_eq!(names(list.definitions()), ["notes_search", PLAN]);
}

#[test]
fn a_search_never_appends_a_closed_tool() {
    let config = DeferralConfig {
        threshold: 1,
        ..DeferralConfig::default()
    };
    let visible = vec![def(TOOL_SEARCH), def("notes_create"), def("notes_search")];
    let mut list = ToolList::plan(visible, Some(&config));
    list.follow_catalogue(&set(&["notes_create"]));
    let found = ["notes_create".to_string(), "notes_search".to_string()];
    assert_eq!(list.append_found(&found), ["notes_search"]);
}

const PLAN: &str = "plan_propose";
