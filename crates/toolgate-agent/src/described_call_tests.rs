use super::*;
use serde_json::json;

fn tool(name: &str, properties: &[&str], required: &[&str]) -> ToolDefinition {
    let properties: Map<String, Value> = properties
        .iter()
        .map(|p| ((*p).to_string(), json!({"type": "string"})))
        .collect();
    ToolDefinition {
        name: name.into(),
        description: String::new(),
        input_schema: json!({"type": "object", "properties": properties, "required": required}),
    }
}

fn notes_tools() -> Vec<ToolDefinition> {
    vec![
        tool(
            "notes_search",
            &["query", "kind", "limit", "offset", "response_format"],
            &["query"],
        ),
        tool("notes_get", &["id"], &["id"]),
        tool("web_clip", &["url", "notebook"], &["url"]),
        tool("search", &["q"], &["q"]),
    ]
}

fn verdict(answer: &str) -> Option<(String, Evidence)> {
    described_call(answer, &notes_tools()).map(|c| (c.tool, c.evidence))
}

#[test]
fn answers_that_describe_a_call_instead_of_making_it_are_caught() {
    // The first five are the embedded model's own answers, from the issue and the notes
    // eval's committed runs.
    let cases = [
        (
            "To get the budget settled in the last meeting with the design team, use notes_search with the query \"design team budget\", kind \"meeting\", and limit 1.",
            "notes_search",
            Evidence::Named,
        ),
        (
            "To do this, call the \"notes_search\" function with the arguments: {\"query\": \"design team budget\", \"kind\": \"meeting\", \"limit\": 1}.",
            "notes_search",
            Evidence::Named,
        ),
        (
            "To find the budget decision for Q1, you can use the `notes_search` function with the query \"design team budget settled\".",
            "notes_search",
            Evidence::Named,
        ),
        (
            "To get the standing desk review summary: `{\"name\": \"web_clip\", \"arguments\": {\"url\": \"https://www.example.com/r\", \"notebook\": \"Clips\"}}`",
            "web_clip",
            Evidence::Named,
        ),
        (
            "you would call the function with\nweb_clip{\"url\": \"http://127.0.0.1:42705/maps.html\"}",
            "web_clip",
            Evidence::Named,
        ),
        (
            "Here is the call:\n```json\n{\"query\": \"design team budget\", \"kind\": \"meeting\"}\n```",
            "notes_search",
            Evidence::Arguments,
        ),
        (
            "Run {\"id\": 5} to read it.",
            "notes_get",
            Evidence::Arguments,
        ),
        (
            "Call `search` with q set to budget.",
            "search",
            Evidence::Named,
        ),
        ("Try search(\"budget\").", "search", Evidence::Named),
    ];
    for (answer, tool, evidence) in cases {
        assert_eq!(
            verdict(answer),
            Some((tool.to_string(), evidence)),
            "{answer}"
        );
    }
}

#[test]
fn real_answers_are_not_taken_for_described_calls() {
    let cases = [
        "The Q1 design budget is $48,000.",
        "",
        // A tool's name inside a longer identifier or word.
        "Use mynotes_search or notes_search_v2 for that.",
        "notes_searching is not a thing.",
        // Words, not the identifier.
        "The web clip function cannot be called because the host is not on the allowlist.",
        // A plain-word tool name used as a word.
        "I could not search your notes for that; the budget is $48,000.",
        // A record quoted as JSON: `title` is no argument of any tool here.
        "The note is {\"id\": 5, \"title\": \"Design team sync\"}.",
        // Only optional arguments: no tool's call.
        "Filtered by {\"kind\": \"meeting\", \"limit\": 1}.",
        // An empty object, and braces that are not JSON.
        "Sets look like {} or {a, b}.",
    ];
    for answer in cases {
        assert_eq!(verdict(answer), None, "{answer}");
    }
}

#[test]
fn the_correction_points_at_results_the_run_has_and_otherwise_asks_for_the_call() {
    let call = DescribedCall {
        tool: "notes_search".into(),
        evidence: Evidence::Named,
    };
    let with = correction_text(&call, true);
    assert!(with.contains("described a call to notes_search instead of answering"));
    assert!(with.contains("answer my question from them now"));
    let without = correction_text(&call, false);
    assert!(without.contains("described a call to notes_search instead of making it"));
    assert!(without.contains("Make the call now"));
}
