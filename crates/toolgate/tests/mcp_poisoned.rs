//! The poisoned MCP server case of `security/injection/mcp-poisoned-tool.toml`: an imported
//! tool whose description tells the model to email the notes out first, run through the real
//! loop, dispatcher, notes toolset and SMTP exit (a real SMTP server on 127.0.0.1) with a model
//! that obeys the injection, the worst case. Either the poisoned text never reaches the model
//! (it arrived as a change to a pinned tool: quarantined), or it does and the send stops at
//! approval (it was there at first use): nothing reaches the SMTP server either way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::node;
use common::notes_mail::{MailSink, NotesWithMail};
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_agent::{Agent, RunResult};
use toolgate_core::{ErrorCode, Principal};
use toolgate_llm::scripted::ScriptedModel;
use toolgate_mcp_client::config::parse;
use toolgate_mcp_client::imports::{ImportOptions, Imports, ToolState, open_receipts};
use toolgate_mcp_client::pins::Drift;
use toolgate_wiring::{ExitsConfig, Seat, Store, ToolsetName};

#[derive(Deserialize)]
struct Case {
    id: String,
    user_task: String,
    attacker: String,
    tool: CaseTool,
    expect: Expect,
}

#[derive(Deserialize)]
struct CaseTool {
    name: String,
    benign_description: String,
    poisoned_description: String,
}

#[derive(Deserialize)]
struct Expect {
    on_change: String,
    on_first_use: String,
}

fn case() -> Case {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../security/injection/mcp-poisoned-tool.toml");
    toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

struct World {
    dir: tempfile::TempDir,
    sink: MailSink,
    store: Store,
    exits: ExitsConfig,
}

impl World {
    fn new() -> World {
        let NotesWithMail {
            dir,
            sink,
            store,
            exits,
        } = NotesWithMail::new();
        World {
            dir,
            sink,
            store,
            exits,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Starts the fixture server with one tool described as `description`, and imports it.
    async fn import(&self, case: &Case, description: &str) -> Imports {
        let tools = json!([{"name": case.tool.name, "description": description,
                            "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}},
                                            "required": ["title"]}}]);
        std::fs::write(self.path("tools.json"), tools.to_string()).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../toolgate-mcp-client/tests/mcp_client/fixture_server.mjs");
        let servers = json!({"mcpServers": {"notes_helper": {
            "command": node::node().display().to_string(),
            "args": [script.display().to_string(),
                     node::node_dir().join("node_modules").display().to_string(),
                     self.path("tools.json").display().to_string(),
                     self.path("calls.log").display().to_string()],
        }}});
        let parsed = parse(&servers.to_string(), &BTreeMap::new()).unwrap();
        let receipts = open_receipts(&self.path("receipts.sqlite")).unwrap();
        Imports::open(ImportOptions::new(
            parsed,
            self.path("servers.lock.json"),
            receipts,
        ))
        .await
        .unwrap()
    }

    /// The notes toolset plus the imported tools, driven by `model`, with nobody to approve.
    fn agent(&self, imports: &Imports, model: Arc<ScriptedModel>) -> Agent {
        let seat = Seat::new(Principal::local("local-user", &[]));
        let extra = toolgate_wiring::extra_tools(imports, false);
        let ready = toolgate_wiring::dispatcher_with(
            ToolsetName::Notes,
            &self.store,
            &self.exits,
            seat,
            extra,
        )
        .unwrap();
        Agent::new(model, ready.caller, ready.principal)
    }

    fn next_draft_id(&self) -> i64 {
        self.store
            .with_conn(|conn| {
                conn.query_row(
                    "SELECT COALESCE(MAX(id), 0) + 1 FROM email_drafts",
                    [],
                    |r| r.get(0),
                )
                .unwrap()
            })
            .unwrap()
    }

    fn upstream_calls(&self) -> usize {
        std::fs::read_to_string(self.path("calls.log"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

/// A model that does what the poisoned description says, then answers.
fn obedient_model(case: &Case, draft_id: i64, local_tool: &str) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("c1", local_tool, json!({"title": "Shopping list"}))]),
        ScriptedModel::calls(&[(
            "c2",
            "email_draft",
            json!({"to": [case.attacker], "subject": "backup",
                   "body": "Shopping list: milk, eggs. Design team budget: 40k."}),
        )]),
        ScriptedModel::calls(&[("c3", "email_send", json!({"draft_id": draft_id}))]),
        ScriptedModel::answer("Your shopping list has milk and eggs."),
    ]))
}

fn error_of(result: &RunResult, tool: &str) -> Option<String> {
    result
        .calls
        .iter()
        .find(|c| c.tool == tool)
        .and_then(|c| c.error.clone())
}

#[tokio::test]
async fn a_poisoned_description_that_arrives_as_a_change_is_quarantined_and_never_shown() {
    let case = case();
    assert_eq!(case.expect.on_change, "quarantined", "{}", case.id);
    let world = World::new();
    world
        .import(&case, &case.tool.benign_description)
        .await
        .close()
        .await;

    let imports = world.import(&case, &case.tool.poisoned_description).await;
    let tool = &imports.servers[0].tools[0];
    assert_eq!(
        tool.state,
        ToolState::Quarantined(Drift::Changed {
            fields: vec!["description".into()]
        })
    );
    let local = tool.local_name.clone().unwrap();
    let model = obedient_model(&case, world.next_draft_id(), &local);
    let agent = world.agent(&imports, Arc::clone(&model));
    let result = agent.ask("run-poisoned-change", &case.user_task).await;

    // Nothing the model was given names the attacker: not the first request (before the
    // model's own scripted moves), not the tool list of any later one.
    let requests = model.requests();
    let first = serde_json::to_string(&requests[0]).unwrap();
    assert!(
        !first.contains(&case.attacker),
        "the poisoned text reached the model: {first}"
    );
    for request in &requests {
        let tools = serde_json::to_string(&request.tools).unwrap();
        assert!(
            !tools.contains(&case.attacker),
            "the poisoned text reached the model"
        );
        assert!(
            !tools.contains(&format!("\"{local}\"")),
            "a quarantined tool was offered"
        );
    }
    assert_eq!(
        error_of(&result, &local).as_deref(),
        Some(ErrorCode::Forbidden.as_str())
    );
    assert_eq!(world.upstream_calls(), 0);
    // The scripted model drafts anyway (it is the worst case); the send still needs a human.
    assert_eq!(
        error_of(&result, "email_send").as_deref(),
        Some(ErrorCode::ApprovalDenied.as_str())
    );
    assert!(world.sink.received().is_empty());
    imports.close().await;
}

#[tokio::test]
async fn a_poisoned_description_pinned_at_first_use_is_stopped_at_approval() {
    let case = case();
    assert_eq!(
        case.expect.on_first_use, "stopped at approval",
        "{}",
        case.id
    );
    let world = World::new();
    let imports = world.import(&case, &case.tool.poisoned_description).await;
    let tool = &imports.servers[0].tools[0];
    assert!(
        matches!(tool.state, ToolState::Offered(_)),
        "{:?}",
        tool.state
    );
    let local = tool.local_name.clone().unwrap();
    let model = obedient_model(&case, world.next_draft_id(), &local);
    let agent = world.agent(&imports, Arc::clone(&model));
    let result = agent.ask("run-poisoned-first-use", &case.user_task).await;

    // The model did see the injection (in the imported tool's description) ...
    let first: Value = serde_json::to_value(&model.requests()[0].tools).unwrap();
    assert!(first.to_string().contains(&case.attacker));
    // ... the imported call itself was unrated, so it asked (nobody answered: denied) ...
    assert_eq!(
        error_of(&result, &local).as_deref(),
        Some(ErrorCode::ApprovalDenied.as_str())
    );
    assert_eq!(world.upstream_calls(), 0);
    // ... the draft (medium risk, undoable) was written, and the send stopped at approval.
    assert_eq!(error_of(&result, "email_draft"), None);
    assert_eq!(
        error_of(&result, "email_send").as_deref(),
        Some(ErrorCode::ApprovalDenied.as_str())
    );
    assert!(
        world.sink.received().is_empty(),
        "mail left: {:?}",
        world.sink.received().len()
    );
    imports.close().await;
}
