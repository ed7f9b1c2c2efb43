//! Phases reach a host through our MCP server (issue 37 item 5), over Streamable HTTP on
//! 127.0.0.1 with rmcp's own client as the host, on both revisions: a write the phase gate
//! keeps closed is not in `tools/list` and is refused by name (a tool error `forbidden`, the
//! write never runs); `plan_propose` for it, approved by the person at the host (elicitation
//! in a 2025-11-25 session, an `input_required` round trip on 2026-07-28), puts it in the list,
//! the exact call runs once, and it leaves the list again; a call with other arguments is
//! refused throughout. A 2025-11-25 session hears `notifications/tools/list_changed` at each
//! change and at no other call. The tools are the notes toolset's own on a real SQLite file.
//! Each test is named after what it prevents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::tool_results::{error_code, params, text_of};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation, ProtocolVersion,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use toolgate_core::phase_gate::{PLAN_TOOL, PhaseConfig, PhaseGate};
use toolgate_core::plan_tool::plan_propose_tool;
use toolgate_core::{Caller, Dispatcher, Principal, Registry};
use toolgate_mcp::{HttpLimits, McpServer};
use toolgate_notes::NotesStore;

const READ: &str = "notes_search";
const WRITE: &str = "notes_create";
/// How long a step may take before the test gives up (a hang, not a measurement).
const WAIT: Duration = Duration::from_secs(30);

/// A person at the host who approves every question, and the host's ears: what was asked, and
/// how many `notifications/tools/list_changed` arrived.
#[derive(Clone)]
struct Person {
    shown: Arc<Mutex<Vec<String>>>,
    heard: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Person {
    fn new() -> Self {
        Person {
            shown: Arc::default(),
            heard: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    fn questions(&self) -> Vec<String> {
        self.shown.lock().unwrap().clone()
    }

    /// Waits (bounded, against a hang) until `count` list changes were heard; then exactly
    /// that many must have been (notifications arrive in the order they were sent, on one
    /// stream, so one sent for a call that changed nothing arrives before the awaited one).
    async fn heard(&self, count: usize, after: &str) {
        let mut heard = self.heard.subscribe();
        tokio::time::timeout(WAIT, heard.wait_for(|n| *n >= count))
            .await
            .unwrap_or_else(|_| panic!("no notifications/tools/list_changed after {after}"))
            .unwrap();
        assert_eq!(
            *self.heard.borrow(),
            count,
            "a list change was announced for a call that changed nothing (by {after})"
        );
    }
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("test-host", "0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.shown.lock().unwrap().push(message);
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true})))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.heard.send_modify(|n| *n += 1);
    }
}

struct Served {
    url: String,
    store: NotesStore,
    /// Stops the server when dropped.
    _spawned: support::Spawned,
    _dir: tempfile::TempDir,
}

/// A server over a read and a write of the notes toolset on a fresh SQLite file, with a phase
/// gate that closes writes and the plan tool over the same gate.
async fn start() -> Served {
    let dir = tempfile::tempdir().unwrap();
    let store = NotesStore::init(&dir.path().join("notes.sqlite")).unwrap();
    let mut tools: Vec<_> = toolgate_notes::tools(&store)
        .unwrap()
        .into_iter()
        .filter(|t| t.spec.name == READ || t.spec.name == WRITE)
        .collect();
    assert_eq!(tools.len(), 2);
    let gate = Arc::new(PhaseGate::new(PhaseConfig {
        gate_writes: true,
        ..PhaseConfig::default()
    }));
    let plan = plan_propose_tool(Arc::clone(&gate), tools.iter().map(|t| &t.spec)).unwrap();
    tools.push(plan);
    let registry = Arc::new(Registry::new(tools).unwrap());
    let principal = Principal::local("tester", &[]).with_catalogue(registry.names());
    let dispatcher = Dispatcher::new(Arc::clone(&registry))
        .unwrap()
        .with_phases(gate);
    let server = McpServer::serving(&registry, Caller::new(dispatcher), principal, "phases-test");
    let spawned = support::spawn(server, HttpLimits::default()).await;
    support::install_tls_provider();
    Served {
        url: spawned.url.clone(),
        store,
        _spawned: spawned,
        _dir: dir,
    }
}

async fn connect(
    served: &Served,
    person: Person,
    modern: bool,
) -> RunningService<RoleClient, Person> {
    let transport = StreamableHttpClientTransport::from_uri(served.url.clone());
    if modern {
        person
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .unwrap()
    } else {
        person.serve(transport).await.unwrap()
    }
}

fn note(title: &str) -> Value {
    json!({"title": title, "body": "From the corner shop."})
}

async fn listed(client: &RunningService<RoleClient, Person>) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

async fn call(
    client: &RunningService<RoleClient, Person>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    client.call_tool(params(tool, args)).await.unwrap()
}

fn titles(served: &Served) -> Vec<String> {
    served
        .store
        .titles_after(0, 100)
        .unwrap()
        .into_iter()
        .map(|t| t.title)
        .collect()
}

/// A call the phases refuse: a tool error `forbidden` whose text says how to open it.
fn assert_refused(result: &CallToolResult, why: &str) {
    assert_eq!(result.is_error, Some(true), "{}", text_of(result));
    assert_eq!(
        error_code(result).as_deref(),
        Some("forbidden"),
        "{}",
        text_of(result)
    );
    assert!(text_of(result).contains(why), "{}", text_of(result));
    assert!(text_of(result).contains(PLAN_TOOL), "{}", text_of(result));
}

/// The whole story on one revision, against a server of its own.
async fn one_plan_one_call(modern: bool) {
    let served = start().await;
    let person = Person::new();
    let client = connect(&served, person.clone(), modern).await;
    let exploring = vec![READ.to_string(), PLAN_TOOL.to_string()];

    // Exploring: the write is not offered, and naming it runs nothing.
    assert_eq!(listed(&client).await, exploring);
    let named = call(&client, WRITE, note("Buy oat milk")).await;
    assert_refused(&named, "not in this run's catalogue");
    let read = call(&client, READ, json!({"query": "milk"})).await;
    assert_ne!(read.is_error, Some(true), "{}", text_of(&read));
    assert!(titles(&served).is_empty(), "a closed write ran");
    assert!(
        person.questions().is_empty(),
        "nobody is asked for a refused call"
    );

    // The plan, approved by the person at the host, opens exactly that call.
    let proposed = call(
        &client,
        PLAN_TOOL,
        json!({"tool": WRITE, "arguments": note("Buy oat milk")}),
    )
    .await;
    assert_ne!(proposed.is_error, Some(true), "{}", text_of(&proposed));
    let questions = person.questions();
    assert_eq!(questions.len(), 1, "{questions:?}");
    assert!(questions[0].contains("Buy oat milk"), "{}", questions[0]);
    if !modern {
        person.heard(1, "the approved plan").await;
    }
    let open = vec![WRITE.to_string(), READ.to_string(), PLAN_TOOL.to_string()];
    assert_eq!(listed(&client).await, open);

    // Other arguments are not the approved call: refused, and the plan stays open.
    let other = call(&client, WRITE, note("Buy cream")).await;
    assert_refused(&other, "names other arguments");
    assert!(titles(&served).is_empty(), "an unapproved write ran");
    assert_eq!(listed(&client).await, open);

    // The exact call runs once, asking nobody again, and closes the write.
    let made = call(&client, WRITE, note("Buy oat milk")).await;
    assert_ne!(made.is_error, Some(true), "{}", text_of(&made));
    assert_eq!(titles(&served), vec!["Buy oat milk"]);
    assert_eq!(person.questions().len(), 1, "the plan was the approval");
    if !modern {
        person.heard(2, "the planned call").await;
    }
    assert_eq!(listed(&client).await, exploring);

    // Closed again: other arguments are refused as before any plan.
    let after = call(&client, WRITE, note("Buy cream")).await;
    assert_refused(&after, "not in this run's catalogue");
    assert_eq!(titles(&served), vec!["Buy oat milk"]);

    if !modern {
        // A further plan is the next change heard: nothing was announced in between.
        let again = call(
            &client,
            PLAN_TOOL,
            json!({"tool": WRITE, "arguments": note("Buy bread")}),
        )
        .await;
        assert_ne!(again.is_error, Some(true), "{}", text_of(&again));
        person.heard(3, "the second plan").await;
    }
}

#[tokio::test]
async fn a_closed_write_is_neither_listed_nor_run_until_a_plan_opens_that_one_call_once_2025_session()
 {
    one_plan_one_call(false).await;
}

#[tokio::test]
async fn a_closed_write_is_neither_listed_nor_run_until_a_plan_opens_that_one_call_once_2026_stateless()
 {
    one_plan_one_call(true).await;
}

#[tokio::test]
async fn a_stateless_host_is_never_told_to_cache_a_list_the_next_call_may_change() {
    let served = start().await;
    let http = support::http();
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                         "params": {"_meta": support::modern_meta(true)}});
    let response = support::post(&http, &served.url, "tools/list", None, message.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let answer = support::message_of(&response.text().await.unwrap());
    assert_eq!(answer["result"]["ttlMs"], 0, "{answer}");
    let names: Vec<&str> = answer["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, vec![READ, PLAN_TOOL]);
}
