//! Tool search in the loop: a deferred run against the scripted model, with `tool_search`
//! through the real dispatcher over a real FTS5 index, and every request rendered by the real
//! wire formats (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses) and by the
//! embedded model's own chat template (Qwen2.5, as read from its GGUF file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_agent::{Agent, AgentConfig, DeferralConfig, StopCause};
use toolgate_core::tool_search::{TOOL_SEARCH, registry_with_search};
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{
    Caller, DenyAll, Dispatcher, Effect, Principal, Risk, Tool, ToolBuilder, ToolOutput,
};
use toolgate_llm::scripted::ScriptedModel;
use toolgate_llm::{ModelRequest, anthropic, embedded, openai_chat, openai_responses};

/// The chat template in qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (`tokenizer.chat_template`).
const QWEN_TEMPLATE: &str = include_str!("data/qwen2.5-coder-chat-template.jinja");

const DOMAINS: &[(&str, &str)] = &[
    ("weather", "the weather forecast for a city"),
    ("email", "email messages in the user's mailbox"),
    ("calendar", "events in the user's calendar"),
    ("contacts", "people in the user's address book"),
    ("invoice", "invoices the user has sent to clients"),
    ("flight", "flights the user could book"),
    ("music", "songs in the user's music library"),
    ("recipe", "recipes in the user's cookbook"),
];
const VERBS: &[(&str, &str)] = &[
    ("search", "Searches"),
    ("get", "Reads one of"),
    ("create", "Creates one of"),
    ("delete", "Deletes one of"),
    ("send", "Sends one of"),
];

fn tool(name: &str, does: &str, scopes: &[&str]) -> Tool {
    ToolBuilder::<Value>::from_schema(
        name,
        1,
        json!({
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to act on."}},
            "required": ["query"],
            "additionalProperties": false
        }),
    )
    .describe(
        does,
        "the user asks for exactly this.",
        None,
        "an acknowledgement.",
    )
    .policy(Risk::Low, Effect::Read, "It only acknowledges the call.")
    .scopes(scopes)
    .read(|_ctx, args: Value| async move { Ok(ToolOutput::new(json!({"ok": args["query"]}))) })
    .unwrap()
}

/// 40 tools the caller may call, plus `payroll_run`, which it may not (missing scope), and
/// `ledger_export`, outside its catalogue.
fn catalogue() -> Vec<Tool> {
    let mut tools = Vec::new();
    for (domain, what) in DOMAINS {
        for (verb, does) in VERBS {
            tools.push(tool(
                &format!("{domain}_{verb}"),
                &format!("{does} {what}."),
                &[],
            ));
        }
    }
    tools.push(tool(
        "payroll_run",
        "Pays every employee's salary from payroll.",
        &["payroll"],
    ));
    tools.push(tool(
        "ledger_export",
        "Exports the salary ledger of payroll.",
        &[],
    ));
    tools
}

fn principal(registry: &toolgate_core::Registry) -> Principal {
    Principal::local("tester", &[])
        .with_catalogue(registry.names().filter(|n| *n != "ledger_export"))
}

const MESSAGE: &str = "What's the weather in Lyon? Then email it to Ana.";

/// Runs `turns` through a deferred (or not) loop; returns the result, the requests the model
/// saw and the trace.
async fn run(
    turns: Vec<toolgate_llm::ModelResponse>,
    deferral: Option<DeferralConfig>,
) -> (
    toolgate_agent::RunResult,
    Vec<ModelRequest>,
    Arc<MemoryTrace>,
) {
    run_asking(turns, deferral, MESSAGE).await
}

/// [`run`], asking `message`.
async fn run_asking(
    turns: Vec<toolgate_llm::ModelResponse>,
    deferral: Option<DeferralConfig>,
    message: &str,
) -> (
    toolgate_agent::RunResult,
    Vec<ModelRequest>,
    Arc<MemoryTrace>,
) {
    let registry = Arc::new(registry_with_search(catalogue()).unwrap());
    let principal = principal(&registry);
    let trace = Arc::new(MemoryTrace::default());
    let dispatcher = Dispatcher::new(registry).unwrap().with_trace(trace.clone());
    let model = Arc::new(ScriptedModel::new(turns));
    let agent = Agent::new(
        model.clone(),
        Caller::new(dispatcher).with_approver(Arc::new(DenyAll)),
        principal,
    )
    .with_config(AgentConfig {
        deferral,
        ..AgentConfig::default()
    })
    .with_trace(trace.clone());
    let result = agent.ask("run-search", message).await;
    (result, model.requests(), trace)
}

fn deferred_script() -> Vec<toolgate_llm::ModelResponse> {
    vec![
        ScriptedModel::calls(&[(
            "c1",
            TOOL_SEARCH,
            json!({"query": "weather forecast for a city"}),
        )]),
        ScriptedModel::calls(&[
            ("c2", "weather_search", json!({"query": "Lyon"})),
            (
                "c3",
                TOOL_SEARCH,
                json!({"query": "send an email message", "limit": 2}),
            ),
        ]),
        ScriptedModel::calls(&[(
            "c4",
            TOOL_SEARCH,
            json!({"query": "pay salaries payroll ledger"}),
        )]),
        ScriptedModel::calls(&[
            ("c5", "email_send", json!({"query": "forecast to Ana"})),
            ("c6", "payroll_run", json!({"query": "everyone"})),
        ]),
        ScriptedModel::answer("Sent."),
    ]
}

fn deferral() -> Option<DeferralConfig> {
    Some(DeferralConfig {
        threshold: 30,
        always_loaded: vec!["calendar_search".into()],
        preload: 0,
    })
}

fn names(request: &ModelRequest) -> Vec<&str> {
    request.tools.iter().map(|t| t.name.as_str()).collect()
}

#[tokio::test]
async fn a_deferred_run_sends_the_standing_set_then_appends_what_search_found() {
    let (result, requests, trace) = run(deferred_script(), deferral()).await;
    assert_eq!(result.stop, StopCause::FinalAnswer);
    assert_eq!(requests.len(), 5);
    assert_eq!(names(&requests[0]), vec![TOOL_SEARCH, "calendar_search"]);
    // The first search found weather tools; the best match first.
    let after_first = names(&requests[1]);
    assert_eq!(&after_first[..2], &[TOOL_SEARCH, "calendar_search"]);
    assert_eq!(after_first[2], "weather_search", "{after_first:?}");
    assert!(
        after_first[2..].iter().all(|n| n.starts_with("weather_")),
        "{after_first:?}"
    );
    // The second search (limit 2) appended email tools after them.
    let after_second = names(&requests[2]);
    assert_eq!(&after_second[..after_first.len()], &after_first[..]);
    assert!(after_second.contains(&"email_send"));
    assert_eq!(
        after_second.len(),
        after_first.len() + 2,
        "{after_second:?}"
    );
    // The payroll search found nothing the caller may call, so nothing was appended.
    assert_eq!(names(&requests[3]), after_second);
    assert_eq!(names(&requests[4]), after_second);
    for request in &requests {
        let listed = names(request);
        assert!(!listed.contains(&"payroll_run") && !listed.contains(&"ledger_export"));
        let mut unique = listed.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            listed.len(),
            "a tool is listed twice: {listed:?}"
        );
        assert_eq!(request.stable_tools, Some(2));
    }
    assert_eq!(result.appended_tools, after_second[2..].to_vec());
    // tool_search went through the dispatcher like any call; so did the forbidden one.
    let searched: Vec<&str> = result
        .calls
        .iter()
        .filter(|c| c.tool == TOOL_SEARCH)
        .map(|c| c.call_id.as_str())
        .collect();
    assert_eq!(searched, vec!["c1", "c3", "c4"]);
    let decisions = trace.of_kind("tool_call");
    for id in ["c1", "c3", "c4", "c6"] {
        assert!(
            decisions
                .iter()
                .any(|d| d.to_string().contains(&format!("\"{id}\""))),
            "no dispatcher decision for {id}: {decisions:?}"
        );
    }
    let payroll = result
        .calls
        .iter()
        .find(|c| c.tool == "payroll_run")
        .unwrap();
    assert!(
        payroll.is_error,
        "naming a tool it may not call must not run it"
    );
    let payroll_search = result
        .transcript
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|b| match b {
            toolgate_llm::ContentBlock::ToolResult(r) if r.call_id == "c4" => {
                Some(r.content.clone())
            }
            _ => None,
        });
    let payroll_search = payroll_search.unwrap();
    assert!(
        !payroll_search.contains("payroll_run") && !payroll_search.contains("ledger_export"),
        "{payroll_search}"
    );
    assert_eq!(trace.of_kind("tools_appended").len(), 2);
}

/// `later` keeps every byte of `earlier`: each scalar field is byte-identical, each array
/// (tools, messages, input items) starts with every element of the earlier one, byte for byte.
fn assert_keeps_every_byte(format: &str, round: usize, earlier: &Value, later: &Value) {
    let (Some(earlier), Some(later)) = (earlier.as_object(), later.as_object()) else {
        panic!("{format}: bodies are objects");
    };
    for (key, before) in earlier {
        let after = later
            .get(key)
            .unwrap_or_else(|| panic!("{format} round {round}: `{key}` disappeared"));
        let (before_text, after_text) = (before.to_string(), after.to_string());
        match (before, after) {
            (Value::Array(_), Value::Array(_)) => {
                let open = before_text.trim_end_matches(']');
                assert!(
                    after_text.starts_with(open),
                    "{format} round {round}: `{key}` of the earlier request is not a byte prefix of the later one"
                );
            }
            _ => assert_eq!(
                before_text, after_text,
                "{format} round {round}: `{key}` changed"
            ),
        }
    }
}

#[tokio::test]
async fn rendered_requests_of_a_deferred_run_keep_every_earlier_byte() {
    let (_, requests, _) = run(deferred_script(), deferral()).await;
    assert_eq!(
        requests_keep_every_earlier_byte(&requests),
        2,
        "the run must append twice for this test to mean anything"
    );
}

/// Every request, rendered in each wire format, keeps every byte of the one before it, and
/// Anthropic's cache marker stays on the last standing tool. Returns how often the tool list
/// grew between requests.
fn requests_keep_every_earlier_byte(requests: &[ModelRequest]) -> usize {
    let renderings: [(&str, fn(&ModelRequest) -> Value); 3] = [
        ("anthropic", |r| {
            anthropic::build_request(r, "claude-haiku-4-5")
        }),
        ("openai chat", |r| {
            openai_chat::build_request(r, "gpt-4.1-mini")
        }),
        ("openai responses", |r| {
            openai_responses::build_request(r, "gpt-4.1-mini")
        }),
    ];
    let mut grew = 0;
    for pair in requests.windows(2) {
        let (earlier, later) = (&pair[0], &pair[1]);
        if later.tools.len() > earlier.tools.len() {
            grew += 1;
        }
        for (format, render) in &renderings {
            assert_keeps_every_byte(format, grew, &render(earlier), &render(later));
        }
        // Anthropic: the cache marker stays on the last standing tool, whatever was appended.
        let body = anthropic::build_request(later, "m");
        let marked: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t.get("cache_control").is_some())
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(marked, vec!["calendar_search"]);
    }
    grew
}

#[tokio::test]
async fn the_embedded_prompt_of_a_deferred_run_only_grows_after_the_tools_already_sent() {
    let (_, requests, _) = run(deferred_script(), deferral()).await;
    let prompts: Vec<String> = requests
        .iter()
        .map(|r| embedded::template::render(QWEN_TEMPLATE, r).unwrap())
        .collect();
    let end_of_tools = "\n</tools>";
    for (i, pair) in prompts.windows(2).enumerate() {
        let (earlier, later) = (&pair[0], &pair[1]);
        let (head_before, tail_before) = earlier.split_at(earlier.find(end_of_tools).unwrap());
        let (head_after, tail_after) = later.split_at(later.find(end_of_tools).unwrap());
        // Every tool line already sent is still there, in place; new ones follow it.
        assert!(
            head_after.starts_with(head_before),
            "round {}: a sent tool moved or changed",
            i + 1
        );
        // Everything after the tools (the conversation) keeps every earlier byte too.
        assert!(
            tail_after.starts_with(tail_before),
            "round {}: the conversation changed",
            i + 1
        );
        if requests[i].tools == requests[i + 1].tools {
            // No search result in between: the whole earlier prompt is a prefix (the KV cache
            // is reused whole).
            assert!(later.starts_with(earlier.as_str()), "round {}", i + 1);
        } else {
            // After a search, the cache is kept up to the end of the earlier tools only.
            assert!(!later.starts_with(earlier.as_str()), "round {}", i + 1);
        }
    }
}

#[tokio::test]
async fn below_the_threshold_every_tool_is_sent_and_tool_search_is_not() {
    let script = vec![
        ScriptedModel::calls(&[("c1", "weather_search", json!({"query": "Lyon"}))]),
        ScriptedModel::answer("Sunny."),
    ];
    for (label, deferral) in [
        (
            "threshold above the catalogue",
            Some(DeferralConfig {
                threshold: 100,
                always_loaded: vec![],
                preload: 0,
            }),
        ),
        ("deferral off", None),
    ] {
        let (result, requests, _) = run(script.clone(), deferral).await;
        assert_eq!(result.stop, StopCause::FinalAnswer, "{label}");
        assert_eq!(
            requests[0].tools.len(),
            40,
            "{label}: {:?}",
            names(&requests[0])
        );
        assert!(!names(&requests[0]).contains(&TOOL_SEARCH), "{label}");
        assert_eq!(requests[0].tools, requests[1].tools, "{label}");
        assert_eq!(requests[0].stable_tools, None, "{label}");
        assert!(result.appended_tools.is_empty(), "{label}");
    }
}

#[tokio::test]
async fn the_default_config_defers_only_past_its_threshold() {
    let config = AgentConfig::default().deferral.unwrap();
    assert!(
        config.threshold >= 10,
        "small toolsets must never defer by default"
    );
    let (_, requests, _) = run(
        vec![ScriptedModel::answer("Hi.")],
        Some(DeferralConfig {
            always_loaded: vec![],
            ..config.clone()
        }),
    )
    .await;
    let deferred = names(&requests[0]).contains(&TOOL_SEARCH);
    assert_eq!(deferred, 40 > config.threshold);
}

fn preloading(preload: usize) -> Option<DeferralConfig> {
    Some(DeferralConfig {
        preload,
        ..deferral().unwrap()
    })
}

/// What the `tool_search` index ranks first for `message`, as the runtime's preload asks it
/// (the same query and limit, through a dispatcher, as the same principal).
async fn ranked_for(message: &str, limit: usize) -> Vec<String> {
    let registry = Arc::new(registry_with_search(catalogue()).unwrap());
    let principal = principal(&registry);
    ranked_as(registry, principal, message, limit).await
}

async fn ranked_as(
    registry: Arc<toolgate_core::Registry>,
    principal: Principal,
    message: &str,
    limit: usize,
) -> Vec<String> {
    let caller = Caller::new(Dispatcher::new(registry).unwrap());
    let query = toolgate_agent::deferral::preload_query(message).unwrap();
    let outcome = caller
        .call(toolgate_core::CallRequest::new(
            principal,
            "ranking",
            TOOL_SEARCH,
            json!({"query": query, "limit": limit}),
        ))
        .await;
    toolgate_core::tool_search::names_in_result(&outcome.observation().unwrap().content)
}

fn assert_listed_once(request: &ModelRequest) {
    let listed = names(request);
    let mut unique = listed.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        listed.len(),
        "a tool is listed twice: {listed:?}"
    );
}

fn preload_events(trace: &MemoryTrace) -> Vec<String> {
    trace
        .of_kind("tools_appended")
        .iter()
        .map(Value::to_string)
        .filter(|line| line.contains("\"round\":0"))
        .collect()
}

#[tokio::test]
async fn the_first_request_already_holds_what_the_index_ranks_first_after_the_standing_set() {
    let (result, requests, trace) = run(deferred_script(), preloading(3)).await;
    assert_eq!(result.stop, StopCause::FinalAnswer);
    let ranked = ranked_for(MESSAGE, 3).await;
    // calendar_search is already standing, so it is not appended again.
    let expected: Vec<&str> = ranked
        .iter()
        .map(String::as_str)
        .filter(|n| *n != "calendar_search")
        .collect();
    assert!(
        expected.iter().any(|n| n.starts_with("weather_")),
        "the message asks about the weather: {ranked:?}"
    );
    let first = names(&requests[0]);
    assert_eq!(&first[..2], &[TOOL_SEARCH, "calendar_search"]);
    assert_eq!(&first[2..], &expected[..], "{first:?}");
    assert_eq!(requests[0].stable_tools, Some(2));
    // The model's own searches append after the preloaded tools; what is there stays.
    let after_search = names(&requests[1]);
    assert_eq!(&after_search[..first.len()], &first[..]);
    assert!(after_search.len() > first.len(), "{after_search:?}");
    for request in &requests {
        assert_listed_once(request);
        let listed = names(request);
        assert!(!listed.contains(&"payroll_run") && !listed.contains(&"ledger_export"));
    }
    assert_eq!(&result.appended_tools[..expected.len()], &expected[..]);
    let preloads = preload_events(&trace);
    assert_eq!(preloads.len(), 1, "{preloads:?}");
    for name in &expected {
        assert!(preloads[0].contains(name), "{preloads:?}");
    }
}

#[tokio::test]
async fn rendered_requests_of_a_preloaded_run_keep_every_earlier_byte() {
    let (_, requests, _) = run(deferred_script(), preloading(3)).await;
    assert!(requests[0].tools.len() > 2, "the run must preload");
    assert!(
        requests_keep_every_earlier_byte(&requests) >= 1,
        "a model search must append after the preload for this test to mean anything"
    );
}

#[tokio::test]
async fn the_preload_lists_only_tools_the_principal_may_call() {
    let message = "Run payroll: pay every employee's salary and export the salary ledger.";
    // The index ranks both among the first five for a principal that may call them; the
    // run's principal may call neither (payroll_run lacks a scope, ledger_export is outside
    // its catalogue).
    let registry = Arc::new(registry_with_search(catalogue()).unwrap());
    let everything =
        Principal::local("payroll-clerk", &["payroll"]).with_catalogue(registry.names());
    let unrestricted = ranked_as(registry, everything, message, 5).await;
    assert!(
        unrestricted.iter().any(|n| n == "payroll_run")
            && unrestricted.iter().any(|n| n == "ledger_export"),
        "the test needs a message the index ranks them for: {unrestricted:?}"
    );
    let (_, requests, trace) = run_asking(
        vec![ScriptedModel::answer("I cannot.")],
        preloading(5),
        message,
    )
    .await;
    let first = names(&requests[0]);
    assert!(
        !first.contains(&"payroll_run") && !first.contains(&"ledger_export"),
        "{first:?}"
    );
    assert_eq!(&first[..2], &[TOOL_SEARCH, "calendar_search"]);
    assert_listed_once(&requests[0]);
    for line in preload_events(&trace) {
        assert!(
            !line.contains("payroll_run") && !line.contains("ledger_export"),
            "{line}"
        );
    }
}

#[tokio::test]
async fn preload_zero_or_a_run_that_does_not_defer_is_unchanged() {
    let script = deferred_script;
    // Preload 0: exactly the deferred run without preload.
    let (_, with_zero, trace) = run(script(), preloading(0)).await;
    assert_eq!(names(&with_zero[0]), vec![TOOL_SEARCH, "calendar_search"]);
    assert!(preload_events(&trace).is_empty());
    // A run below the threshold: every tool, no tool_search, whatever the preload.
    let below = |preload| {
        Some(DeferralConfig {
            threshold: 100,
            always_loaded: vec![],
            preload,
        })
    };
    let simple = || {
        vec![
            ScriptedModel::calls(&[("c1", "weather_search", json!({"query": "Lyon"}))]),
            ScriptedModel::answer("Sunny."),
        ]
    };
    let (_, plain, _) = run(simple(), below(0)).await;
    for deferral in [below(5), None] {
        let (result, requests, trace) = run(simple(), deferral.clone()).await;
        assert_eq!(requests.len(), plain.len(), "{deferral:?}");
        for (a, b) in requests.iter().zip(&plain) {
            assert_eq!(a.tools, b.tools, "{deferral:?}");
        }
        assert_eq!(requests[0].tools.len(), 40, "{deferral:?}");
        assert!(result.appended_tools.is_empty(), "{deferral:?}");
        assert!(preload_events(&trace).is_empty(), "{deferral:?}");
    }
}

#[tokio::test]
async fn a_message_with_nothing_searchable_preloads_nothing() {
    for message in ["", "   \n\t ", "?! ... --"] {
        let (result, requests, trace) = run_asking(
            vec![ScriptedModel::answer("Hello.")],
            preloading(5),
            message,
        )
        .await;
        assert_eq!(
            names(&requests[0]),
            vec![TOOL_SEARCH, "calendar_search"],
            "{message:?}"
        );
        assert!(result.appended_tools.is_empty(), "{message:?}");
        assert!(preload_events(&trace).is_empty(), "{message:?}");
    }
}
