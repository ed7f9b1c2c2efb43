//! The MCP server's spans, read back from the OpenTelemetry SDK's in-memory exporter: each
//! `tools/call` is one SERVER span (`tools/call {tool}`) that parents the dispatcher's
//! `execute_tool` span; a well-formed `traceparent` in the request's `_meta`, else in the HTTP
//! header, makes it the child of that remote span; a malformed one starts a new trace and the
//! call still runs; failures carry `error.type`, and the served duration is a metric. Over
//! Streamable HTTP on 127.0.0.1 (rmcp clients in both revisions, and raw requests for values
//! no typed client sends) and over the stdio transport.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::trace::SpanData;
use rmcp::model::{CallToolRequestParams, ProtocolVersion, RequestMetaObject};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use toolgate_core::telemetry::testing::{self, InMemoryTelemetry};
use toolgate_core::telemetry::{TelemetryOptions, names};
use toolgate_core::tool::{Tool, ToolBuilder, ToolOutput};
use toolgate_core::{Caller, Dispatcher, Effect, ErrorCode, Principal, Registry, Risk, ToolError};
use toolgate_mcp::{HttpLimits, McpServer};

/// A caller's span, as W3C `traceparent`: its trace and span ids.
const GIVEN: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const GIVEN_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const GIVEN_SPAN: &str = "b7ad6b7169203331";
/// Another caller's span, sent as the HTTP header.
const HEADER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const HEADER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const HEADER_SPAN: &str = "00f067aa0ba902b7";

fn echo() -> Tool {
    ToolBuilder::<Value>::from_schema(
        "demo_echo",
        1,
        json!({"type": "object", "additionalProperties": false,
               "properties": {"say": {"type": "string", "maxLength": 100}}}),
    )
    .describe("Echoes.", "you need an echo.", None, "what was said.")
    .policy(Risk::Low, Effect::Read, "It only reads.")
    .read(|_ctx, args: Value| async move { Ok(ToolOutput::new(json!({"said": args["say"]}))) })
    .unwrap()
}

fn failing() -> Tool {
    ToolBuilder::<Value>::from_schema(
        "demo_down",
        1,
        json!({"type": "object", "additionalProperties": false, "properties": {}}),
    )
    .describe("Is down.", "never.", None, "nothing.")
    .policy(Risk::Low, Effect::Read, "It only reads.")
    .read(|_ctx, _args: Value| async move {
        Err(ToolError::new(
            ErrorCode::TransientDependency,
            "the backend is down",
        ))
    })
    .unwrap()
}

/// A server whose dispatcher records into in-memory exporters.
struct Traced {
    server: McpServer,
    recorded: InMemoryTelemetry,
    /// How many finished spans earlier looks saw.
    seen: std::sync::Mutex<usize>,
}

fn traced() -> Traced {
    let recorded = InMemoryTelemetry::new(TelemetryOptions::default());
    let registry = Arc::new(Registry::new(vec![echo(), failing()]).unwrap());
    let principal = Principal::local("tester", &[]).with_catalogue(registry.names());
    let dispatcher = Dispatcher::new(Arc::clone(&registry))
        .unwrap()
        .with_telemetry(recorded.telemetry.clone());
    let server = McpServer::serving(&registry, Caller::new(dispatcher), principal, "telemetry");
    Traced {
        server,
        recorded,
        seen: std::sync::Mutex::new(0),
    }
}

impl Traced {
    /// The spans finished since the last look (each call's span ends before its answer).
    fn take(&self) -> Vec<SpanData> {
        let all = self.recorded.finished_spans();
        let mut seen = self.seen.lock().unwrap();
        let new = all[*seen..].to_vec();
        *seen = all.len();
        new
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    testing::attribute(span, key).map(|v| v.to_string())
}

/// The one server span and the one dispatcher span of a call to `tool`.
fn call_spans(spans: &[SpanData], tool: &str) -> (SpanData, SpanData) {
    let named = |name: String| {
        let found: Vec<&SpanData> = spans.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "one `{name}` span in {spans:#?}");
        found[0].clone()
    };
    (
        named(format!("tools/call {tool}")),
        named(format!("execute_tool {tool}")),
    )
}

/// Asserts the server span is the dispatcher span's parent, in the same trace.
fn parents_the_dispatcher(server: &SpanData, dispatched: &SpanData, what: &str) {
    assert_eq!(server.span_kind, SpanKind::Server, "{what}");
    assert_eq!(
        dispatched.parent_span_id,
        server.span_context.span_id(),
        "{what}"
    );
    assert_eq!(
        dispatched.span_context.trace_id(),
        server.span_context.trace_id(),
        "{what}"
    );
}

/// Asserts `server` is a child of the remote span `trace`/`span`.
fn joins(server: &SpanData, trace: &str, span: &str, what: &str) {
    assert_eq!(
        server.span_context.trace_id(),
        TraceId::from_hex(trace).unwrap(),
        "{what}"
    );
    assert_eq!(
        server.parent_span_id,
        SpanId::from_hex(span).unwrap(),
        "{what}"
    );
    assert!(server.parent_span_is_remote, "{what}");
}

/// Asserts `server` starts a trace of its own.
fn is_a_new_root(server: &SpanData, what: &str) {
    assert_eq!(server.parent_span_id, SpanId::INVALID, "{what}");
    let trace = server.span_context.trace_id();
    assert_ne!(trace, TraceId::from_hex(GIVEN_TRACE).unwrap(), "{what}");
    assert_ne!(trace, TraceId::from_hex(HEADER_TRACE).unwrap(), "{what}");
}

/// An rmcp host at `url` in `revision`, sending `traceparent` as an HTTP header when given.
async fn host(
    url: &str,
    revision: &ProtocolVersion,
    header: Option<&str>,
) -> RunningService<RoleClient, ()> {
    support::install_tls_provider();
    let mut headers = HashMap::new();
    if let Some(header) = header {
        headers.insert(
            http::HeaderName::from_static("traceparent"),
            http::HeaderValue::from_str(header).unwrap(),
        );
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    let transport = StreamableHttpClientTransport::from_config(config);
    if *revision == ProtocolVersion::V_2026_07_28 {
        ().serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap()
    } else {
        ().serve(transport).await.unwrap()
    }
}

/// Calls `demo_echo` through `host`, with `traceparent` in `_meta` when given.
async fn echo_through(host: &RunningService<RoleClient, ()>, traceparent: Option<&str>) {
    let mut arguments = Map::new();
    arguments.insert("say".into(), json!("hello"));
    let mut params = CallToolRequestParams::new("demo_echo").with_arguments(arguments);
    if let Some(traceparent) = traceparent {
        let mut meta = RequestMetaObject::new();
        meta.insert("traceparent".into(), json!(traceparent));
        params.meta = Some(meta);
    }
    let result = host.call_tool(params).await.unwrap();
    let result = serde_json::to_value(result).unwrap();
    assert_ne!(result["isError"], json!(true), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_in_both_revisions_the_server_span_parents_the_dispatchers_and_joins_the_callers_trace()
 {
    let traced = traced();
    let spawned = support::spawn(traced.server.clone(), HttpLimits::default()).await;
    for revision in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let plain = host(&spawned.url, &revision, None).await;
        traced.take();

        echo_through(&plain, None).await;
        let what = format!("{revision}, no traceparent");
        let (server, dispatched) = call_spans(&traced.take(), "demo_echo");
        parents_the_dispatcher(&server, &dispatched, &what);
        is_a_new_root(&server, &what);
        let expected = [
            (names::MCP_METHOD_NAME, "tools/call".to_string()),
            (names::GEN_AI_TOOL_NAME, "demo_echo".to_string()),
            (names::GEN_AI_OPERATION_NAME, "execute_tool".to_string()),
            (names::NETWORK_TRANSPORT, "tcp".to_string()),
            (names::MCP_PROTOCOL_VERSION, revision.to_string()),
        ];
        for (key, value) in expected {
            assert_eq!(
                attribute(&server, key).as_deref(),
                Some(value.as_str()),
                "{what}: {key}"
            );
        }
        let id = server
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == names::JSONRPC_REQUEST_ID)
            .map(|kv| kv.value.clone());
        assert!(
            matches!(id, Some(opentelemetry::Value::String(_))),
            "{what}: the request id is a string: {id:?}"
        );
        // Only a 2025-11-25 session has an id.
        assert_eq!(
            attribute(&server, names::MCP_SESSION_ID).is_some(),
            revision == ProtocolVersion::V_2025_11_25,
            "{what}"
        );
        assert_eq!(attribute(&server, names::ERROR_TYPE), None, "{what}");

        echo_through(&plain, Some(GIVEN)).await;
        let what = format!("{revision}, traceparent in _meta");
        let (server, dispatched) = call_spans(&traced.take(), "demo_echo");
        parents_the_dispatcher(&server, &dispatched, &what);
        joins(&server, GIVEN_TRACE, GIVEN_SPAN, &what);
        plain.cancel().await.unwrap();

        let with_header = host(&spawned.url, &revision, Some(HEADER)).await;
        traced.take();
        echo_through(&with_header, None).await;
        let what = format!("{revision}, traceparent header");
        let (server, dispatched) = call_spans(&traced.take(), "demo_echo");
        parents_the_dispatcher(&server, &dispatched, &what);
        joins(&server, HEADER_TRACE, HEADER_SPAN, &what);

        echo_through(&with_header, Some(GIVEN)).await;
        let what = format!("{revision}, _meta and header: _meta wins");
        let (server, _) = call_spans(&traced.take(), "demo_echo");
        joins(&server, GIVEN_TRACE, GIVEN_SPAN, &what);
        with_header.cancel().await.unwrap();
    }
}

/// Values no W3C parser should read as a parent.
fn hostile_traceparents() -> Vec<(&'static str, Value)> {
    vec![
        ("empty", json!("")),
        (
            "no flags",
            json!("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"),
        ),
        (
            "a trace id one digit short",
            json!("00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01"),
        ),
        (
            "a trace id one digit long",
            json!("00-0af7651916cd43dd8448eb211c80319c0-b7ad6b7169203331-01"),
        ),
        (
            "a span id one digit short",
            json!("00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01"),
        ),
        (
            "upper case",
            json!("00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01"),
        ),
        (
            "not hex",
            json!("00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01"),
        ),
        (
            "an all-zero trace id",
            json!("00-00000000000000000000000000000000-b7ad6b7169203331-01"),
        ),
        (
            "an all-zero span id",
            json!("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"),
        ),
        (
            "version ff",
            json!("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        ),
        (
            "version 00 with more fields",
            json!(format!("{GIVEN}-extra")),
        ),
        ("10 kB", json!(format!("00-{}", "a".repeat(10_000)))),
        ("a number", json!(42)),
        ("a boolean", json!(true)),
        ("null", Value::Null),
        ("an object", json!({"traceparent": GIVEN})),
        ("an array", json!([GIVEN])),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_traceparent_in_meta_or_header_starts_a_new_trace_and_the_call_still_runs() {
    let traced = traced();
    let spawned = support::spawn(traced.server.clone(), HttpLimits::default()).await;
    let http = support::http();
    for (id, (what, value)) in (1u64..).zip(hostile_traceparents()) {
        // In `_meta`.
        let mut message = support::tools_call(id, "demo_echo", json!({"say": "hi"}), json!({}));
        message["params"]["_meta"]["traceparent"] = value.clone();
        let (status, reply) = support::call(&http, &spawned.url, &message).await;
        assert_eq!(status, 200, "{what} in _meta: {reply}");
        assert_eq!(
            reply["result"]["isError"], false,
            "{what} in _meta: {reply}"
        );
        let (server, dispatched) = call_spans(&traced.take(), "demo_echo");
        parents_the_dispatcher(&server, &dispatched, what);
        is_a_new_root(&server, &format!("{what} in _meta"));

        // As the header, where it can be one.
        let Some(text) = value.as_str() else {
            continue;
        };
        if http::HeaderValue::from_str(text).is_err() {
            continue;
        }
        let message = support::tools_call(id, "demo_echo", json!({"say": "hi"}), json!({}));
        let response = support::post(
            &http,
            &spawned.url,
            "tools/call",
            Some("demo_echo"),
            message.to_string(),
        )
        .header("traceparent", text)
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), 200, "{what} as header");
        let reply = support::message_of(&response.text().await.unwrap());
        assert_eq!(
            reply["result"]["isError"], false,
            "{what} as header: {reply}"
        );
        let (server, _) = call_spans(&traced.take(), "demo_echo");
        is_a_new_root(&server, &format!("{what} as header"));
    }

    // A malformed `_meta` value does not hide a well-formed header.
    let mut message = support::tools_call(99, "demo_echo", json!({"say": "hi"}), json!({}));
    message["params"]["_meta"]["traceparent"] = json!(42);
    let response = support::post(
        &http,
        &spawned.url,
        "tools/call",
        Some("demo_echo"),
        message.to_string(),
    )
    .header("traceparent", HEADER)
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let (server, _) = call_spans(&traced.take(), "demo_echo");
    joins(
        &server,
        HEADER_TRACE,
        HEADER_SPAN,
        "malformed _meta, good header",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_calls_and_lists_are_pipe_spans_that_join_the_callers_trace() {
    use std::io::Write as _;
    use tokio::io::AsyncBufReadExt as _;
    let traced = traced();
    let (reader, mut writer) = std::io::pipe().unwrap();
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(toolgate_mcp::serve_io_until(
        traced.server.clone(),
        reader,
        theirs,
        async move {
            let _ = stopped.await;
        },
    ));
    let mut lines = tokio::io::BufReader::new(ours).lines();
    let mut ask = async |message: Value| -> Value {
        writeln!(writer, "{message}").unwrap();
        let id = message["id"].clone();
        if id.is_null() {
            return Value::Null;
        }
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == id {
                return answer;
            }
        }
    };
    ask(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}),
    )
    .await;
    ask(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    traced.take();

    // A list is a span too, with nothing to execute under it.
    let listed = ask(json!({"jsonrpc": "2.0", "id": 100, "method": "tools/list",
                            "params": {"_meta": {"traceparent": GIVEN}}}))
    .await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let spans = traced.take();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(spans[0].name, "tools/list");
    assert_eq!(spans[0].span_kind, SpanKind::Server);
    assert_eq!(
        attribute(&spans[0], names::MCP_METHOD_NAME).as_deref(),
        Some("tools/list")
    );
    joins(&spans[0], GIVEN_TRACE, GIVEN_SPAN, "tools/list");

    let cases = [
        ("no traceparent", json!({}), None),
        (
            "traceparent in _meta",
            json!({"_meta": {"traceparent": GIVEN}}),
            Some((GIVEN_TRACE, GIVEN_SPAN)),
        ),
        (
            "a malformed traceparent",
            json!({"_meta": {"traceparent": "00-bad"}}),
            None,
        ),
    ];
    for (id, (what, extra, parent)) in (1u64..).zip(cases) {
        let mut params = json!({"name": "demo_echo", "arguments": {"say": "hi"}});
        if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
            p.extend(e);
        }
        let answer = ask(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                                "params": params}))
        .await;
        assert_eq!(answer["result"]["isError"], false, "{what}: {answer}");
        let (server, dispatched) = call_spans(&traced.take(), "demo_echo");
        parents_the_dispatcher(&server, &dispatched, what);
        assert_eq!(
            attribute(&server, names::NETWORK_TRANSPORT).as_deref(),
            Some("pipe"),
            "{what}"
        );
        assert_eq!(
            attribute(&server, names::MCP_PROTOCOL_VERSION).as_deref(),
            Some("2025-11-25"),
            "{what}"
        );
        assert_eq!(
            attribute(&server, names::JSONRPC_REQUEST_ID),
            Some(id.to_string()),
            "{what}"
        );
        assert_eq!(attribute(&server, names::MCP_SESSION_ID), None, "{what}");
        match parent {
            Some((trace, span)) => joins(&server, trace, span, what),
            None => is_a_new_root(&server, what),
        }
    }
}

/// The `mcp.server.operation.duration` data points: each one's attributes and count.
fn served_durations(traced: &Traced) -> Vec<(Vec<(String, String)>, u64)> {
    let mut points = Vec::new();
    for resource in traced.recorded.metrics() {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics() {
                if metric.name() != names::METRIC_MCP_SERVER_DURATION {
                    continue;
                }
                let AggregatedMetrics::F64(MetricData::Histogram(histogram)) = metric.data() else {
                    panic!("not a histogram: {metric:?}");
                };
                for point in histogram.data_points() {
                    let mut attributes: Vec<(String, String)> = point
                        .attributes()
                        .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                        .collect();
                    attributes.sort();
                    points.push((attributes, point.count()));
                }
            }
        }
    }
    points
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_call_names_its_error_type_on_the_span_and_in_the_served_duration() {
    let traced = traced();
    let spawned = support::spawn(traced.server.clone(), HttpLimits::default()).await;
    let http = support::http();
    let cases = [
        ("a tool error", "demo_down", "transient_dependency"),
        ("an unknown tool", "demo_missing", "-32602"),
    ];
    for (id, (what, tool, error_type)) in (1u64..).zip(cases) {
        let message = support::tools_call(id, tool, json!({}), json!({}));
        let (status, reply) = support::call(&http, &spawned.url, &message).await;
        assert_eq!(status, 200, "{what}: {reply}");
        let spans = traced.take();
        let server = spans
            .iter()
            .find(|s| s.name == format!("tools/call {tool}"))
            .unwrap_or_else(|| panic!("{what}: {spans:#?}"));
        assert_eq!(
            attribute(server, names::ERROR_TYPE).as_deref(),
            Some(error_type),
            "{what}"
        );
        assert!(
            matches!(server.status, Status::Error { .. }),
            "{what}: {:?}",
            server.status
        );
    }
    let message = support::tools_call(9, "demo_echo", json!({"say": "hi"}), json!({}));
    support::call(&http, &spawned.url, &message).await;

    let points = served_durations(&traced);
    let failed_with = |error_type: &str| {
        points.iter().any(|(attributes, count)| {
            *count == 1
                && attributes.contains(&(names::ERROR_TYPE.into(), error_type.into()))
                && attributes.contains(&(names::MCP_METHOD_NAME.into(), "tools/call".into()))
        })
    };
    assert!(failed_with("transient_dependency"), "{points:#?}");
    assert!(failed_with("-32602"), "{points:#?}");
    let succeeded = points.iter().any(|(attributes, _)| {
        attributes.contains(&(names::GEN_AI_TOOL_NAME.into(), "demo_echo".into()))
            && !attributes.iter().any(|(key, _)| key == names::ERROR_TYPE)
    });
    assert!(
        succeeded,
        "a call that succeeded has no error.type: {points:#?}"
    );
}
