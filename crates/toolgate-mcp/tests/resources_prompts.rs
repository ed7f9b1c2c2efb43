//! The notes toolset's resources (`note://{id}`, listed in pages, read through `notes_get`) and
//! prompts, over Streamable HTTP with rmcp's client on both revisions, and their spans with
//! telemetry on. Each test is named after what it prevents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry_sdk::trace::SpanData;
use rmcp::model::{
    GetPromptRequestParams, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ResourceContents,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use toolgate_core::Principal;
use toolgate_core::telemetry::testing::InMemoryTelemetry;
use toolgate_core::telemetry::{TelemetryOptions, names};
use toolgate_mcp::{HttpLimits, McpServer};
use toolgate_wiring::{ExitsConfig, Seat, Store, ToolsetName};

struct Served {
    url: String,
    store: Store,
    /// Stops the server when dropped.
    _spawned: support::Spawned,
    _dir: tempfile::TempDir,
}

async fn serve(toolset: ToolsetName) -> Served {
    serve_seated(toolset, Seat::new(Principal::local("local-user", &[]))).await
}

async fn serve_seated(toolset: ToolsetName, seat: Seat) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_or_init(toolset.store(), &dir.path().join("store.sqlite")).unwrap();
    let ready =
        toolgate_wiring::dispatcher(toolset, &store, &ExitsConfig::default(), seat).unwrap();
    let spawned = support::spawn(
        McpServer::new(ready, "resources-test"),
        HttpLimits::default(),
    )
    .await;
    Served {
        url: spawned.url.clone(),
        store,
        _spawned: spawned,
        _dir: dir,
    }
}

async fn clients(served: &Served) -> Vec<RunningService<RoleClient, ()>> {
    support::install_tls_provider();
    let modern = ()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(served.url.clone()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    let legacy =
        ().serve(StreamableHttpClientTransport::from_uri(served.url.clone()))
            .await
            .unwrap();
    vec![modern, legacy]
}

fn note_count(store: &Store) -> usize {
    store
        .with_conn(|c| c.query_row("SELECT count(*) FROM notes", [], |r| r.get::<_, i64>(0)))
        .unwrap()
        .unwrap() as usize
}

#[tokio::test]
async fn every_note_is_listed_once_across_pages_and_reads_through_notes_get() {
    let served = serve(ToolsetName::Notes).await;
    let total = note_count(&served.store);
    assert!(
        total > 50,
        "the sample notebook must span pages; it has {total}"
    );
    for client in clients(&served).await {
        let mut uris = Vec::new();
        let mut cursor = None;
        let mut pages = 0;
        loop {
            pages += 1;
            assert!(pages < 100, "pagination does not end");
            let page = client
                .list_resources(Some(PaginatedRequestParams::default().with_cursor(cursor)))
                .await
                .unwrap();
            uris.extend(page.resources.iter().map(|r| r.uri.clone()));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert!(pages >= 2);
        let distinct: BTreeSet<_> = uris.iter().collect();
        assert_eq!(distinct.len(), total, "a note is missing or listed twice");

        let read = client
            .read_resource(ReadResourceRequestParams::new(uris[0].clone()))
            .await
            .unwrap();
        let ResourceContents::TextResourceContents { text, uri, .. } = &read.contents[0] else {
            panic!("a note reads as text");
        };
        assert_eq!(uri, &uris[0]);
        let value: Value = serde_json::from_str(text).unwrap();
        // What notes_get returns, with its provenance: the same call a model makes.
        assert!(value["result"]["title"].is_string(), "{value}");

        let templates = client.list_resource_templates(None).await.unwrap();
        assert_eq!(templates.resource_templates[0].uri_template, "note://{id}");
    }
}

#[tokio::test]
async fn a_uri_or_cursor_the_server_did_not_give_reads_nothing() {
    let served = serve(ToolsetName::Notes).await;
    for client in clients(&served).await {
        for uri in [
            "note://999999",
            "note://1/../2",
            "file:///etc/passwd",
            "note://0",
        ] {
            let error = client
                .read_resource(ReadResourceRequestParams::new(uri))
                .await
                .expect_err(uri);
            let text = error.to_string();
            assert!(
                text.contains("-32002") || text.contains("-32602"),
                "{uri}: {text}"
            );
        }
        let error = client
            .list_resources(Some(
                PaginatedRequestParams::default().with_cursor(Some("after:zzz".into())),
            ))
            .await
            .expect_err("a forged cursor");
        assert!(error.to_string().contains("cursor"), "{error}");
    }
}

#[tokio::test]
async fn prompts_fill_in_their_arguments_and_refuse_missing_ones() {
    let served = serve(ToolsetName::Notes).await;
    for client in clients(&served).await {
        let names: Vec<String> = client
            .list_prompts(None)
            .await
            .unwrap()
            .prompts
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, ["todos_from_meeting", "email_a_note"]);
        let prompt = client
            .get_prompt(
                GetPromptRequestParams::new("todos_from_meeting").with_arguments(
                    json!({"meeting": "design review"})
                        .as_object()
                        .cloned()
                        .unwrap(),
                ),
            )
            .await
            .unwrap();
        let text = serde_json::to_string(&prompt.messages).unwrap();
        assert!(text.contains("design review"), "{text}");
        assert!(
            client
                .get_prompt(GetPromptRequestParams::new("email_a_note"))
                .await
                .is_err(),
            "a prompt without its required arguments"
        );
    }
}

#[tokio::test]
async fn a_toolset_without_resources_offers_none() {
    let served = serve(ToolsetName::BooksV2).await;
    for client in clients(&served).await {
        let info = client.peer_info().map(|i| i.capabilities.clone());
        if let Some(capabilities) = info {
            assert!(capabilities.resources.is_none());
            assert!(capabilities.prompts.is_none());
        }
        assert!(client.list_resources(None).await.is_err());
        assert!(client.list_prompts(None).await.is_err());
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

/// With telemetry on, each resources and prompts request is a SERVER span named as the MCP
/// conventions name it: a prompt by its name, a read with its URI as an attribute only (never
/// in the name, so a backend's span names stay few), the read's `notes_get` call its child, and
/// a failed request with its JSON-RPC error code.
#[tokio::test]
async fn resources_and_prompts_requests_are_server_spans_that_keep_uris_out_of_their_names() {
    let recorded = InMemoryTelemetry::new(TelemetryOptions::default());
    let seat =
        Seat::new(Principal::local("local-user", &[])).with_telemetry(recorded.telemetry.clone());
    let served = serve_seated(ToolsetName::Notes, seat).await;
    let client = clients(&served).await.remove(0);
    let page = client.list_resources(None).await.unwrap();
    let uri = page.resources[0].uri.clone();
    client
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap();
    client.list_resource_templates(None).await.unwrap();
    client.list_prompts(None).await.unwrap();
    let arguments = json!({"meeting": "design review"}).as_object().cloned();
    client
        .get_prompt(
            GetPromptRequestParams::new("todos_from_meeting").with_arguments(arguments.unwrap()),
        )
        .await
        .unwrap();
    client
        .get_prompt(GetPromptRequestParams::new("email_a_note"))
        .await
        .expect_err("a prompt without its required arguments");

    let spans = recorded.finished_spans();
    let server: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.span_kind == SpanKind::Server)
        .collect();
    let names: Vec<&str> = server.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "resources/list",
            "resources/read",
            "resources/templates/list",
            "prompts/list",
            "prompts/get todos_from_meeting",
            "prompts/get email_a_note",
        ]
    );
    let read = server[1];
    assert_eq!(attribute(read, names::MCP_RESOURCE_URI), Some(uri.clone()));
    assert_eq!(
        attribute(read, names::MCP_METHOD_NAME).as_deref(),
        Some("resources/read")
    );
    let child = spans
        .iter()
        .find(|s| s.name == "execute_tool notes_get")
        .expect("the read is a notes_get call");
    assert_eq!(child.parent_span_id, read.span_context.span_id());
    assert_eq!(
        attribute(server[4], names::GEN_AI_PROMPT_NAME).as_deref(),
        Some("todos_from_meeting")
    );
    assert_eq!(server[4].status, Status::Unset);
    assert!(
        attribute(server[5], names::ERROR_TYPE).is_some_and(|code| code.starts_with('-')),
        "{:?}",
        server[5].attributes
    );
    assert!(matches!(server[5].status, Status::Error { .. }));
    for span in &server {
        assert!(!span.name.contains("note://"), "{}", span.name);
    }
}
