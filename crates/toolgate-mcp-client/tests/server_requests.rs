//! What an upstream asks of us while our call to it runs, against the real npm
//! server-everything (pinned by set-up): its form put to the person of the call that sent the
//! request (our dispatcher's approval channel, and through our own MCP server to the host's
//! person), its decline when nobody can be asked, and its sampling run on the real embedded
//! model only where `[mcp.servers.NAME] sampling = "allow"`, within the call's budget.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "mcp_client/calls.rs"]
mod calls;
use calls::{call, untrusted_text};

#[path = "../../toolgate/tests/common/node.rs"]
#[allow(dead_code)]
mod node_install;
#[path = "../../toolgate-mcp/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::ProtocolVersion;
use serde_json::{Map, Value, json};
use toolgate_core::{
    ApprovalAnswer, ApprovalRequest, Approver, ApproverError, Asked, BoxFuture, MemoryTrace,
    Principal, QuestionAnswer, QuestionRefused, ServerQuestion,
};
use toolgate_mcp::{HttpLimits, McpServer};
use toolgate_mcp_client::config::parse;
use toolgate_mcp_client::imports::{ImportOptions, Imports, open_receipts};
use toolgate_mcp_client::plan::ServerRatings;
use toolgate_mcp_client::server_requests::Sampler;
use toolgate_mcp_client::upstream::ConnectOptions;
use toolgate_wiring::sampling::ModelSampler;
use toolgate_wiring::{Assembled, Seat};

const EVERYTHING: &str = "@modelcontextprotocol/server-everything";
const ELICIT: &str = "everything__trigger_elicitation_request";
const SAMPLE: &str = "everything__trigger_sampling_request";
/// Both tools rated low, so the call itself needs nobody and only the server's question does.
const LOW: &str = "[everything.tools.trigger-elicitation-request]\nrisk = \"low\"\neffect = \"read\"\n\
                   [everything.tools.trigger-sampling-request]\nrisk = \"low\"\neffect = \"read\"\n";

/// The person at the call: approves nothing, answers the server's form with `answer`, and
/// remembers every question.
struct Person {
    answer: QuestionAnswer,
    asked: Mutex<Vec<ServerQuestion>>,
}

impl Person {
    fn answering(answer: QuestionAnswer) -> Arc<Person> {
        Arc::new(Person {
            answer,
            asked: Mutex::new(Vec::new()),
        })
    }

    fn asked(&self) -> Vec<ServerQuestion> {
        self.asked.lock().unwrap().clone()
    }
}

impl Approver for Person {
    fn decide<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async {
            Ok(ApprovalAnswer::Deny {
                reason: "no call needs approving here".into(),
            })
        })
    }

    fn ask<'a>(
        &'a self,
        question: &'a ServerQuestion,
    ) -> BoxFuture<'a, Result<QuestionAnswer, QuestionRefused>> {
        self.asked.lock().unwrap().push(question.clone());
        Box::pin(async move { Ok(self.answer.clone()) })
    }
}

fn ada() -> Map<String, Value> {
    json!({"name": "Ada Lovelace", "check": true, "integer": 7})
        .as_object()
        .cloned()
        .unwrap()
}

fn everything_entry() -> Value {
    let package = node_install::node_dir()
        .join("node_modules")
        .join(EVERYTHING)
        .join("dist/index.js");
    let script = node_install::installed(package, EVERYTHING);
    json!({"command": node_install::node().display().to_string(),
           "args": [script.display().to_string(), "stdio"]})
}

async fn open(
    dir: &tempfile::TempDir,
    ratings: &str,
    revision: Option<ProtocolVersion>,
    sampler: Option<Arc<dyn Sampler>>,
) -> Imports {
    let text = json!({"mcpServers": {"everything": everything_entry()}}).to_string();
    let servers = parse(&text, &BTreeMap::new()).unwrap();
    let receipts = open_receipts(&dir.path().join("receipts.sqlite")).unwrap();
    let mut options = ImportOptions::new(servers, dir.path().join("lock.json"), receipts);
    options.ratings = toml::from_str::<BTreeMap<String, ServerRatings>>(ratings).unwrap();
    options.connect = ConnectOptions {
        revision,
        ..ConnectOptions::default()
    };
    options.sampler = sampler;
    Imports::open(options).await.unwrap()
}

fn dispatcher(
    imports: &Imports,
    person: Option<Arc<Person>>,
    trace: Arc<MemoryTrace>,
) -> Assembled {
    let mut seat = Seat::new(Principal::local("local-user", &[])).with_trace(trace);
    if let Some(person) = person {
        seat = seat.with_approver(person);
    }
    calls::dispatcher(imports, seat)
}

#[tokio::test]
async fn an_upstreams_form_goes_to_the_calls_person_and_their_answer_back_to_it() {
    // 2025-11-25: the server's own `elicitation/create` during the call; the default: the
    // newest revision both speak.
    for revision in [Some(ProtocolVersion::V_2025_11_25), None] {
        let dir = tempfile::tempdir().unwrap();
        let imports = open(&dir, LOW, revision.clone(), None).await;
        let person = Person::answering(QuestionAnswer::Accept(ada()));
        let trace = Arc::new(MemoryTrace::default());
        let ready = dispatcher(&imports, Some(Arc::clone(&person)), Arc::clone(&trace));

        let outcome = call(&ready, ELICIT, json!({})).await;
        let text = untrusted_text(&outcome);
        assert!(
            text.contains("User provided the requested information"),
            "{revision:?}: {text}"
        );
        assert!(text.contains("Name: Ada Lovelace"), "{text}");

        let asked = person.asked();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert_eq!(asked[0].server, "everything");
        assert_eq!(
            asked[0].message,
            "Please provide inputs for the following fields:"
        );
        let Asked::Form { schema } = &asked[0].asked else {
            panic!("not a form: {:?}", asked[0]);
        };
        assert_eq!(schema["required"], json!(["name"]), "{schema}");
        assert!(schema["properties"]["email"].is_object(), "{schema}");

        let heard = trace.of_kind("server_request");
        assert_eq!(heard.len(), 1, "{heard:?}");
        assert_eq!(heard[0]["server"], "everything");
        assert_eq!(heard[0]["request"], "elicitation (form)");
        assert_eq!(heard[0]["outcome"], "accept");
        assert!(
            !heard[0].to_string().contains("Ada"),
            "the answer is not traced: {}",
            heard[0]
        );
        imports.close().await;
    }
}

#[tokio::test]
async fn with_nobody_to_ask_the_upstream_hears_a_decline_and_nothing_is_answered_for_anyone() {
    let dir = tempfile::tempdir().unwrap();
    let imports = open(&dir, LOW, None, None).await;
    let trace = Arc::new(MemoryTrace::default());
    let ready = dispatcher(&imports, None, Arc::clone(&trace));

    let text = untrusted_text(&call(&ready, ELICIT, json!({})).await);
    assert!(text.contains("User declined"), "{text}");
    assert!(
        !text.contains("provided the requested information"),
        "{text}"
    );
    let heard = trace.of_kind("server_request");
    assert_eq!(heard[0]["outcome"], "declined (no channel)", "{heard:?}");
    imports.close().await;
}

#[tokio::test]
async fn a_server_not_allowed_to_sample_is_never_offered_our_model() {
    let dir = tempfile::tempdir().unwrap();
    // Allowed in its ratings, but no model is wired in: still not offered.
    for (ratings, sampler) in [
        (LOW.to_string(), None),
        (format!("[everything]\nsampling = \"allow\"\n{LOW}"), None),
    ] {
        let imports = open(&dir, &ratings, None, sampler).await;
        let catalogue = imports.catalogue("everything").unwrap();
        let names: Vec<&str> = catalogue
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        // server-everything offers its sampling tool only to clients that declare sampling.
        assert!(!names.contains(&"trigger-sampling-request"), "{names:?}");
        assert!(names.contains(&"trigger-elicitation-request"), "{names:?}");
        imports.close().await;
    }
}

fn embedded() -> Arc<dyn Sampler> {
    use toolgate_llm::embedded::{EmbeddedConfig, EmbeddedModel, fetched_model_path};
    static MODEL: OnceLock<Arc<EmbeddedModel>> = OnceLock::new();
    let model = MODEL.get_or_init(|| {
        let mut config = EmbeddedConfig::new(fetched_model_path().expect("the fetched model"));
        config.n_ctx = 2048;
        Arc::new(EmbeddedModel::load(config, None).expect("the model loads"))
    });
    Arc::new(ModelSampler::new(
        Arc::clone(model) as Arc<dyn toolgate_llm::Model>
    ))
}

#[tokio::test]
async fn an_allowed_server_samples_the_embedded_model_within_the_calls_budget() {
    let dir = tempfile::tempdir().unwrap();
    let ratings = format!("[everything]\nsampling = \"allow\"\nsampling_max_tokens = 4\n{LOW}");
    let imports = open(&dir, &ratings, None, Some(embedded())).await;
    let trace = Arc::new(MemoryTrace::default());
    let ready = dispatcher(&imports, None, Arc::clone(&trace));

    // The server asks for up to 100 tokens of a long answer; the call's budget is 4.
    let outcome = call(&ready, SAMPLE, json!({"prompt": "Count from one to thirty in words, separated by commas.", "maxTokens": 100})).await;
    let text = untrusted_text(&outcome);
    assert!(text.contains("LLM sampling result"), "{text}");
    assert!(
        text.contains("\"model\": \"qwen2.5-coder"),
        "the server hears which model: {text}"
    );
    let heard = trace.of_kind("server_request");
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0]["request"], "sampling");
    assert_eq!(heard[0]["outcome"], "answered");
    let tokens = heard[0]["tokens"].as_u64().unwrap();
    assert!(
        (1..=4).contains(&tokens),
        "generated {tokens} tokens on a budget of 4"
    );
    assert!(
        text.contains("\"stopReason\": \"maxTokens\""),
        "cut at the budget: {text}"
    );
    imports.close().await;
}

/// A host's person behind our MCP server: answers any form with Grace Hopper's name and
/// remembers what it was shown.
#[derive(Clone, Default)]
struct Host {
    shown: Arc<Mutex<Vec<(String, Value)>>>,
}

impl rmcp::ClientHandler for Host {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder()
                .enable_elicitation()
                .build(),
            rmcp::model::Implementation::new("test-host", "0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
        if let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        {
            let schema = serde_json::to_value(requested_schema).unwrap();
            self.shown.lock().unwrap().push((message, schema));
        }
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({"name": "Grace Hopper"})))
    }
}

#[tokio::test]
async fn a_host_behind_our_server_answers_the_upstreams_form_and_a_ticket_host_is_not_asked() {
    use rmcp::ServiceExt;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;

    let dir = tempfile::tempdir().unwrap();
    let imports = open(&dir, LOW, None, None).await;
    let ready = dispatcher(&imports, None, Arc::new(MemoryTrace::default()));
    let gateway = McpServer::serving(
        &ready.registry,
        ready.caller.clone(),
        ready.principal.clone(),
        "gateway",
    );
    let spawned = support::spawn(gateway, HttpLimits::default()).await;
    support::install_tls_provider();

    for modern in [false, true] {
        let host = Host::default();
        let transport = StreamableHttpClientTransport::from_uri(spawned.url.clone());
        let session = if modern {
            let mode = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            host.clone()
                .serve_with_lifecycle(transport, mode)
                .await
                .unwrap()
        } else {
            host.clone().serve(transport).await.unwrap()
        };
        let params = rmcp::model::CallToolRequestParams::new(ELICIT);
        let result = session.call_tool(params).await.unwrap();
        let text = serde_json::to_string(&result.content).unwrap();
        let shown = host.shown.lock().unwrap().clone();
        if modern {
            // Its person answers by retried call, which a waiting server cannot have.
            assert!(shown.is_empty(), "{shown:?}");
            assert!(text.contains("User declined"), "{text}");
        } else {
            assert_eq!(shown.len(), 1, "{shown:?}");
            let (message, schema) = &shown[0];
            assert!(
                message.starts_with("The MCP server `everything` asks you, in its own words (not toolgate's): Please provide inputs"),
                "{message}"
            );
            assert_eq!(schema["required"], json!(["name"]), "{schema}");
            assert!(text.contains("Name: Grace Hopper"), "{text}");
        }
        session.cancel().await.unwrap();
    }
    imports.close().await;
}
