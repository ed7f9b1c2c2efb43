//! One conversation is one trace, across processes, and the trace says what the decision
//! records say. A scripted model drives the real loop over the notes toolset with code mode
//! (bubblewrap), the SMTP exit and a tool imported from an upstream `toolgate serve --http`
//! (the real binary); its conversation makes a nested call (a script's search), a call a
//! person declines (`notes_delete`), a call the egress exit blocks (`web_clip` of an unlisted
//! host) and a gateway call to the upstream. This process exports over OTLP/gRPC, the upstream
//! over OTLP/HTTP, both to a real OTLP receiver on 127.0.0.1 that decodes what was sent; the
//! test rebuilds the span tree and compares each call's span with its JSONL decision record.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::notes_mail::NotesWithMail;
use serde_json::{Value, json};
use toolgate_agent::Agent;
use toolgate_core::approval::{ApprovalAnswer, ApprovalRequest, ApproverError};
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{Approver, BoxFuture, DecisionRecord, Principal};
use toolgate_llm::scripted::ScriptedModel;
use toolgate_otlp_receiver::{
    AttributeValue, ReceivedSpan, Receiver, ReceiverOptions, SpanKind, StatusCode, Transport, Until,
};
use toolgate_sandbox::{InitProgram, Paging, SandboxConfig};
use toolgate_telemetry::config::TelemetryConfig;
use toolgate_wiring::{CodeOptions, Seat, ToolsetName};

/// Declines every approval and keeps what it was asked.
#[derive(Default)]
struct Declining {
    seen: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Declining {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        self.seen.lock().unwrap().push(request.clone());
        Box::pin(async move {
            Ok(ApprovalAnswer::Deny {
                reason: "not this one".into(),
            })
        })
    }
}

/// The URL the blocked clip asks for; its query must reach no span.
const BLOCKED_URL: &str = "https://unlisted.example/recipes?token=s3cret-query-value";

fn upstream(dir: &Path, receiver: &Receiver) -> (common::team::Instance, PathBuf) {
    let db = dir.join("notes.sqlite");
    toolgate_notes::NotesStore::open_or_init_sample(&db).unwrap();
    let config = dir.join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[telemetry]\notlp_endpoint = \"{}\"\nprotocol = \"http/protobuf\"\n",
            receiver.http_endpoint()
        ),
    )
    .unwrap();
    let trace = dir.join("trace.jsonl");
    let (db, trace_arg) = (db.display().to_string(), trace.display().to_string());
    let instance = common::team::serve_with(
        dir,
        Some(&config),
        &["--toolset", "notes", "--db", &db, "--trace", &trace_arg],
    );
    (instance, trace)
}

fn attribute<'a>(span: &'a ReceivedSpan, key: &str) -> Option<&'a AttributeValue> {
    span.attributes.get(key)
}

fn text<'a>(span: &'a ReceivedSpan, key: &str) -> &'a str {
    attribute(span, key)
        .and_then(AttributeValue::as_str)
        .unwrap_or("")
}

fn children<'a>(spans: &'a [ReceivedSpan], parent: &ReceivedSpan) -> Vec<&'a ReceivedSpan> {
    spans
        .iter()
        .filter(|s| s.parent_span_id.as_deref() == Some(parent.span_id.as_str()))
        .collect()
}

fn only<'a>(
    spans: &'a [ReceivedSpan],
    what: &str,
    pick: impl Fn(&ReceivedSpan) -> bool,
) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "one {what}: {found:#?}");
    found[0]
}

#[test]
fn one_conversation_is_one_trace_through_the_gateway_and_matches_the_decision_records() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let up_dir = dir.path().join("up");
    std::fs::create_dir_all(&up_dir).unwrap();
    let (up, up_trace) = upstream(&up_dir, &receiver);
    let up_port: u16 = up.address.rsplit(':').next().unwrap().parse().unwrap();

    // This side: the notes toolset with the SMTP exit, code mode, and the upstream imported.
    let NotesWithMail {
        dir: notes_dir,
        sink: _sink,
        store,
        exits,
    } = NotesWithMail::new();
    let exits = exits.allow_loopback("http", up_port);
    let trace = Arc::new(MemoryTrace::default());
    let servers = notes_dir.path().join("servers.json");
    std::fs::write(
        &servers,
        json!({"mcpServers": {"up": {"url": format!("http://{}/mcp", up.address)}}}).to_string(),
    )
    .unwrap();
    let settings: toolgate_mcp_client::imports::McpSettings = toml::from_str(&format!(
        "receipts = \"{}\"\ntokens = \"{}\"\n[servers.up]\nrisk = \"low\"\n",
        notes_dir.path().join("receipts.sqlite").display(),
        notes_dir.path().join("tokens.json").display(),
    ))
    .unwrap();
    let imports = runtime
        .block_on(toolgate_wiring::imports::open_imports(
            &settings,
            Some(&servers),
            &exits,
            trace.clone(),
        ))
        .unwrap()
        .unwrap();
    let imported = imports
        .tools
        .iter()
        .map(|t| t.spec.name.clone())
        .find(|name| name.ends_with("notes_search"))
        .expect("the upstream's notes_search is imported");

    let config: TelemetryConfig = toml::from_str(&format!(
        "otlp_endpoint = \"{}\"\nprotocol = \"grpc\"\n",
        receiver.grpc_endpoint()
    ))
    .unwrap();
    let exporting = toolgate_telemetry::export::start(&config)
        .unwrap()
        .expect("an endpoint turns telemetry on");

    let approver = Arc::new(Declining::default());
    let seat = Seat::new(Principal::local("local-user", &[]))
        .with_approver(approver.clone())
        .with_trace(trace.clone())
        .with_telemetry(exporting.telemetry());
    let mut extra = toolgate_wiring::extra_tools(&imports, false);
    extra.code = Some(CodeOptions {
        sandbox: SandboxConfig::new(InitProgram {
            path: PathBuf::from(env!("CARGO_BIN_EXE_toolgate")),
            args: vec!["sandbox-init".into()],
        }),
        export_notes: false,
        paging: Paging::ByPage,
        failed_scripts: toolgate_sandbox::FailedScripts::Reported,
    });
    let ready =
        toolgate_wiring::dispatcher_with(ToolsetName::Notes, &store, &exits, seat, extra).unwrap();
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[(
            "c1",
            "code_execution",
            json!({"code": "import toolgate_tools as t\nr = t.notes_search(query='design budget', limit=1)\nprint(r['content']['total_matches'])\n"}),
        )]),
        ScriptedModel::calls(&[("c2", "notes_delete", json!({"note_id": 1}))]),
        ScriptedModel::calls(&[("c3", "web_clip", json!({"url": BLOCKED_URL}))]),
        ScriptedModel::calls(&[(
            "c4",
            imported.as_str(),
            json!({"query": "garden", "limit": 1}),
        )]),
        ScriptedModel::answer("done"),
    ]));
    let agent = Agent::new(model.clone(), ready.caller, ready.principal);
    let result = runtime.block_on(agent.ask("run-telemetry-1", "Tidy up my notes."));
    assert_eq!(result.answer.as_deref(), Some("done"), "{result:?}");
    exporting.shutdown().unwrap();

    let records = trace.records::<DecisionRecord>();
    let upstream_records: Vec<Value> = std::fs::read_to_string(&up_trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["event"] == "tool_call")
        .collect();
    assert_eq!(upstream_records.len(), 1, "{upstream_records:#?}");

    // Everything both processes sent: ours over gRPC, the upstream's over HTTP.
    let spans = receiver
        .wait_for_spans_blocking(
            Until::condition(
                "the upstream's execute_tool span",
                |spans: &[ReceivedSpan]| {
                    spans.iter().any(|s| {
                        s.transport == Transport::Http && s.name == "execute_tool notes_search"
                    })
                },
            ),
            Duration::from_secs(30),
        )
        .unwrap();
    drop(up);

    // One trace, rooted at the run. The only spans outside it are the import's own requests
    // (its `tools/list` when it connected, before any conversation).
    let trace_id = only(&spans, "run span", |s| s.name == "invoke_agent toolgate")
        .trace_id
        .clone();
    let (spans, others): (Vec<ReceivedSpan>, Vec<ReceivedSpan>) =
        spans.into_iter().partition(|s| s.trace_id == trace_id);
    assert!(
        others
            .iter()
            .all(|s| s.parent_span_id.is_none() && s.name == "tools/list"),
        "every span of the conversation is in the run's trace: {others:#?}"
    );
    let root = only(&spans, "run span", |s| s.name == "invoke_agent toolgate");
    assert_eq!(root.parent_span_id, None);
    let chats: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert_eq!(
        chats.len(),
        model.requests().len(),
        "one chat span per model request"
    );
    assert!(
        chats
            .iter()
            .all(|c| c.parent_span_id.as_deref() == Some(root.span_id.as_str()))
    );

    // Each of our calls is one span under the run, and says what its record says.
    let ours: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.transport == Transport::Grpc && s.name.starts_with("execute_tool "))
        .collect();
    assert_eq!(ours.len(), records.len(), "one span per decision record");
    for record in &records {
        let span = ours
            .iter()
            .find(|s| text(s, "gen_ai.tool.call.id") == record.call_id)
            .unwrap_or_else(|| panic!("no span for {}", record.call_id));
        assert_eq!(span.name, format!("execute_tool {}", record.tool));
        assert_eq!(text(span, "toolgate.decision"), record.outcome.as_str());
        assert_eq!(
            text(span, "toolgate.catalogue.digest"),
            record.catalogue_digest
        );
        assert_eq!(
            attribute(span, "toolgate.bytes_out").and_then(AttributeValue::as_int),
            Some(record.result_bytes as i64)
        );
        match &record.parent_call_id {
            None => assert_eq!(span.parent_span_id.as_deref(), Some(root.span_id.as_str())),
            Some(parent) => {
                let parent_span = ours
                    .iter()
                    .find(|s| text(s, "gen_ai.tool.call.id") == parent)
                    .unwrap();
                assert_eq!(
                    span.parent_span_id.as_deref(),
                    Some(parent_span.span_id.as_str())
                );
                assert_eq!(text(span, "toolgate.origin"), "sandbox");
            }
        }
    }

    // The nested call: the script's search under the code call.
    let code = only(&spans, "code call", |s| {
        s.name == "execute_tool code_execution"
    });
    let nested: Vec<&str> = children(&spans, code)
        .iter()
        .filter(|s| s.name.starts_with("execute_tool "))
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(nested, ["execute_tool notes_search"]);

    // The declined approval: an error span, asked then answered.
    let delete = only(&spans, "delete", |s| s.name == "execute_tool notes_delete");
    assert_eq!(delete.status.code, StatusCode::Error);
    assert_eq!(text(delete, "error.type"), "approval_denied");
    assert_eq!(text(delete, "toolgate.approval.denial"), "declined");
    let events: Vec<&str> = delete.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        events,
        ["toolgate.approval.asked", "toolgate.approval.answered"]
    );
    assert_eq!(approver.seen.lock().unwrap().len(), 1);

    // The egress block: a refused egress span under the clip's call, host only.
    let clip = only(&spans, "clip", |s| s.name == "execute_tool web_clip");
    let egress = children(&spans, clip);
    assert_eq!(egress.len(), 1, "{egress:#?}");
    assert_eq!(egress[0].name, "egress unlisted.example");
    assert_eq!(
        attribute(egress[0], "toolgate.egress.allowed"),
        Some(&AttributeValue::Bool(false))
    );
    assert_eq!(egress[0].status.code, StatusCode::Error);
    let everything = format!("{spans:?}");
    assert!(
        !everything.contains("s3cret-query-value"),
        "a URL's query reaches no span"
    );

    // The gateway call: our client span, then the upstream's server span and its own call.
    let gateway_call = only(&spans, "imported call", |s| {
        s.name == format!("execute_tool {imported}")
    });
    let client = only(&spans, "client span", |s| {
        s.kind == SpanKind::Client && s.name == "tools/call notes_search"
    });
    assert_eq!(
        client.parent_span_id.as_deref(),
        Some(gateway_call.span_id.as_str())
    );
    assert_eq!(client.transport, Transport::Grpc);
    let server = only(&spans, "upstream server span", |s| {
        s.kind == SpanKind::Server
    });
    assert_eq!(
        server.transport,
        Transport::Http,
        "the upstream exported it"
    );
    assert_eq!(
        server.parent_span_id.as_deref(),
        Some(client.span_id.as_str())
    );
    assert_eq!(text(server, "mcp.method.name"), "tools/call");
    let upstream_call = only(&spans, "upstream call", |s| {
        s.transport == Transport::Http && s.name == "execute_tool notes_search"
    });
    assert_eq!(
        upstream_call.parent_span_id.as_deref(),
        Some(server.span_id.as_str())
    );
    assert_eq!(
        text(upstream_call, "gen_ai.tool.call.id"),
        upstream_records[0]["gen_ai.tool.call.id"].as_str().unwrap()
    );
    assert_eq!(
        text(upstream_call, "toolgate.decision"),
        upstream_records[0]["outcome"].as_str().unwrap()
    );
}
