//! One trace through a toolgate gateway and the toolgate server it imports from, both over
//! Streamable HTTP on 127.0.0.1, each recording into its own OpenTelemetry SDK in-memory
//! exporter: a host's `traceparent` starts it, the gateway's server span, its dispatcher span
//! for the imported tool and its CLIENT span for the upstream request follow, and the
//! upstream's server span continues the same trace as the client span's child, because the
//! request carried the client span in `_meta`. Also: a request that fails reaching the server
//! names how on its span, a call the breaker refuses sends (and traces) nothing, and the
//! server's state changes are a gauge.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "mcp_client/calls.rs"]
mod calls;
#[path = "../../toolgate-mcp/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use opentelemetry::trace::{SpanId, SpanKind, TraceId};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::trace::SpanData;
use rmcp::model::ProtocolVersion;
use serde_json::json;
use toolgate_core::telemetry::testing::{self, InMemoryTelemetry};
use toolgate_core::telemetry::{Telemetry, TelemetryOptions, names};
use toolgate_core::{Caller, Principal};
use toolgate_egress::{Egress, StaticResolver};
use toolgate_mcp::{HttpLimits, McpServer};
use toolgate_mcp_client::config::parse;
use toolgate_mcp_client::imports::{ImportOptions, Imports, open_receipts};
use toolgate_mcp_client::upstream::ConnectOptions;
use toolgate_wiring::{Assembled, ExitsConfig, Seat, Store, StoreKind, ToolsetName};

/// The host's span, as W3C `traceparent`.
const HOST: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const HOST_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const HOST_SPAN: &str = "b7ad6b7169203331";

/// Telemetry into in-memory exporters, and how many of their spans earlier looks saw.
struct Recorded {
    recorded: InMemoryTelemetry,
    seen: std::sync::Mutex<usize>,
}

impl Recorded {
    fn new() -> Recorded {
        Recorded {
            recorded: InMemoryTelemetry::new(TelemetryOptions::default()),
            seen: std::sync::Mutex::new(0),
        }
    }

    fn telemetry(&self) -> &Telemetry {
        &self.recorded.telemetry
    }

    /// The spans finished since the last look.
    fn take(&self) -> Vec<SpanData> {
        let all = self.recorded.finished_spans();
        let mut seen = self.seen.lock().unwrap();
        let new = all[*seen..].to_vec();
        *seen = all.len();
        new
    }

    /// Every data point of the metric `name`: its attributes (sorted) and its value (a
    /// gauge's) or count (a histogram's).
    fn points(&self, name: &str) -> Vec<(Vec<(String, String)>, f64)> {
        let sorted = |attributes: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
            let mut all: Vec<(String, String)> = attributes
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect();
            all.sort();
            all
        };
        let mut points = Vec::new();
        for resource in self.recorded.metrics() {
            for scope in resource.scope_metrics() {
                for metric in scope.metrics().filter(|m| m.name() == name) {
                    match metric.data() {
                        AggregatedMetrics::I64(MetricData::Gauge(gauge)) => {
                            for point in gauge.data_points() {
                                points
                                    .push((sorted(&mut point.attributes()), point.value() as f64));
                            }
                        }
                        AggregatedMetrics::F64(MetricData::Histogram(histogram)) => {
                            for point in histogram.data_points() {
                                points
                                    .push((sorted(&mut point.attributes()), point.count() as f64));
                            }
                        }
                        other => panic!("{name}: unexpected data {other:?}"),
                    }
                }
            }
        }
        points
    }
}

/// `assembled` with every call recorded through `telemetry`.
fn traced(assembled: Assembled, telemetry: &Telemetry) -> Assembled {
    let dispatcher = assembled
        .caller
        .dispatcher()
        .clone()
        .with_telemetry(telemetry.clone());
    Assembled {
        caller: Caller::new(dispatcher),
        ..assembled
    }
}

/// Our books server over HTTP on 127.0.0.1 (its calls recorded through `telemetry`), and an
/// egress exit allowing it.
async fn books_upstream(
    dir: &std::path::Path,
    telemetry: &Telemetry,
) -> (support::Spawned, Arc<Egress>) {
    let store = Store::open_or_init(StoreKind::Books, &dir.join("books.sqlite")).unwrap();
    let seat = Seat::new(Principal::local("local-user", &[]));
    let ready =
        toolgate_wiring::dispatcher(ToolsetName::BooksV2, &store, &ExitsConfig::default(), seat)
            .unwrap();
    let server = McpServer::new(traced(ready, telemetry), "upstream");
    let spawned = support::spawn(server, HttpLimits::default()).await;
    let port = url::Url::parse(&spawned.url).unwrap().port().unwrap();
    let egress = Egress::new(
        support::loopback_http_allowlist(&[port]),
        Arc::new(StaticResolver::new()),
        Arc::new(toolgate_core::trace::NoTrace),
    )
    .unwrap();
    (spawned, Arc::new(egress))
}

/// The gateway's imports of `url` as `books` (a low-risk read), in `connect`.
async fn import_books(dir: &std::path::Path, url: &str, connect: ConnectOptions) -> Imports {
    let text = json!({"mcpServers": {"books": {"type": "http", "url": url}}}).to_string();
    let parsed = parse(&text, &BTreeMap::new()).unwrap();
    let receipts = open_receipts(&dir.join("receipts.sqlite")).unwrap();
    let mut options = ImportOptions::new(parsed, dir.join("servers.lock.json"), receipts);
    options.ratings = toml::from_str("[books]\nrisk = \"low\"\neffect = \"read\"").unwrap();
    options.connect = connect;
    Imports::open(options).await.unwrap()
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    testing::attribute(span, key).map(|v| v.to_string())
}

fn the_span<'a>(spans: &'a [SpanData], name: &str, kind: SpanKind, what: &str) -> &'a SpanData {
    let found: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == name && s.span_kind == kind)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{what}: one {kind:?} span `{name}` in {spans:#?}"
    );
    found[0]
}

fn is_child(child: &SpanData, parent: &SpanData, what: &str) {
    assert_eq!(
        child.span_context.trace_id(),
        parent.span_context.trace_id(),
        "{what}: same trace"
    );
    assert_eq!(
        child.parent_span_id,
        parent.span_context.span_id(),
        "{what}: parent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstreams_server_span_continues_the_gateways_trace_as_the_client_spans_child() {
    let upstream_recorded = Recorded::new();
    let gateway_recorded = Recorded::new();
    let dir = tempfile::tempdir().unwrap();
    let (upstream, egress) = books_upstream(dir.path(), upstream_recorded.telemetry()).await;
    for revision in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let gateway_dir = tempfile::tempdir().unwrap();
        let connect = ConnectOptions {
            revision: Some(revision.clone()),
            egress: Some(Arc::clone(&egress)),
            ..ConnectOptions::default()
        };
        let imports = import_books(gateway_dir.path(), &upstream.url, connect).await;
        let ready = traced(
            calls::dispatcher(&imports, Seat::new(Principal::local("local-user", &[]))),
            gateway_recorded.telemetry(),
        );
        let gateway = McpServer::serving(
            &ready.registry,
            ready.caller.clone(),
            ready.principal.clone(),
            "gateway",
        );
        let served = support::spawn(gateway, HttpLimits::default()).await;
        upstream_recorded.take();
        gateway_recorded.take();

        // A host calls the gateway with its own span in `_meta`.
        let mut message =
            support::tools_call(1, "books__books_get", json!({"ids": [1]}), json!({}));
        message["params"]["_meta"]["traceparent"] = json!(HOST);
        let (status, reply) = support::call(&support::http(), &served.url, &message).await;
        assert_eq!(status, 200, "{revision}: {reply}");
        assert_eq!(reply["result"]["isError"], false, "{revision}: {reply}");
        assert!(reply.to_string().contains("Hunger Games"), "{reply}");

        let what = revision.to_string();
        let at_gateway = gateway_recorded.take();
        let served_span = the_span(
            &at_gateway,
            "tools/call books__books_get",
            SpanKind::Server,
            &what,
        );
        assert_eq!(
            served_span.span_context.trace_id(),
            TraceId::from_hex(HOST_TRACE).unwrap()
        );
        assert_eq!(
            served_span.parent_span_id,
            SpanId::from_hex(HOST_SPAN).unwrap()
        );
        let dispatched = the_span(
            &at_gateway,
            "execute_tool books__books_get",
            SpanKind::Internal,
            &what,
        );
        is_child(
            dispatched,
            served_span,
            &format!("{what}: gateway dispatcher"),
        );
        let client = the_span(&at_gateway, "tools/call books_get", SpanKind::Client, &what);
        is_child(client, dispatched, &format!("{what}: client span"));
        let expected = [
            (names::MCP_METHOD_NAME, "tools/call"),
            (names::GEN_AI_TOOL_NAME, "books_get"),
            (names::UPSTREAM, "books"),
            (names::SERVER_ADDRESS, "127.0.0.1"),
            (names::NETWORK_TRANSPORT, "tcp"),
        ];
        for (key, value) in expected {
            assert_eq!(
                attribute(client, key).as_deref(),
                Some(value),
                "{what}: {key}"
            );
        }
        assert_eq!(
            attribute(client, names::MCP_PROTOCOL_VERSION),
            Some(revision.to_string())
        );
        assert_eq!(attribute(client, names::ERROR_TYPE), None, "{what}");

        let at_upstream = upstream_recorded.take();
        let upstream_served = the_span(
            &at_upstream,
            "tools/call books_get",
            SpanKind::Server,
            &what,
        );
        is_child(
            upstream_served,
            client,
            &format!("{what}: upstream server span"),
        );
        assert!(upstream_served.parent_span_is_remote, "{what}");
        let upstream_dispatched = the_span(
            &at_upstream,
            "execute_tool books_get",
            SpanKind::Internal,
            &what,
        );
        is_child(
            upstream_dispatched,
            upstream_served,
            &format!("{what}: upstream dispatcher"),
        );
        // The gateway's own `_meta` (the call it forwards) still reached the upstream.
        assert!(
            attribute(upstream_dispatched, names::PARENT_CALL_ID).is_some(),
            "{what}: {upstream_dispatched:#?}"
        );

        let durations = gateway_recorded.points(names::METRIC_MCP_CLIENT_DURATION);
        assert!(
            durations.iter().any(|(attributes, count)| *count >= 1.0
                && attributes.contains(&(names::UPSTREAM.into(), "books".into()))
                && attributes.contains(&(names::GEN_AI_TOOL_NAME.into(), "books_get".into()))),
            "{what}: {durations:#?}"
        );
        imports.close().await;
    }
}

/// The `toolgate.upstream.state` gauge's value for `books` in `state` as last exported, if
/// recorded (the exporter keeps every export, oldest first).
fn books_state(recorded: &Recorded, state: &str) -> Option<f64> {
    recorded
        .points(names::METRIC_UPSTREAM_STATE)
        .into_iter()
        .rfind(|(attributes, _)| {
            attributes.contains(&(names::UPSTREAM.into(), "books".into()))
                && attributes.contains(&(names::UPSTREAM_STATE.into(), state.into()))
        })
        .map(|(_, value)| value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_going_down_fails_its_client_spans_and_moves_its_state_gauge_to_open() {
    let upstream_recorded = Recorded::new();
    let gateway_recorded = Recorded::new();
    let dir = tempfile::tempdir().unwrap();
    let (mut upstream, egress) = books_upstream(dir.path(), upstream_recorded.telemetry()).await;
    let mut connect = ConnectOptions {
        revision: Some(ProtocolVersion::V_2026_07_28),
        egress: Some(egress),
        ..ConnectOptions::default()
    };
    connect.breaker.failures_to_open = 2;
    let imports = import_books(dir.path(), &upstream.url, connect).await;
    let ready = traced(
        calls::dispatcher(&imports, Seat::new(Principal::local("local-user", &[]))),
        gateway_recorded.telemetry(),
    );
    let get = json!({"ids": [1]});
    let first = calls::call(&ready, "books__books_get", get.clone()).await;
    assert!(calls::untrusted_text(&first).contains("Hunger Games"));
    assert_eq!(books_state(&gateway_recorded, "closed"), Some(1.0));
    gateway_recorded.take();

    upstream.stop.take().unwrap().send(()).unwrap();
    upstream.served.await.unwrap().unwrap();
    for attempt in 1..=2 {
        let failed = calls::call(&ready, "books__books_get", get.clone()).await;
        assert!(failed.error().is_some(), "attempt {attempt}");
        let spans = gateway_recorded.take();
        let client = the_span(
            &spans,
            "tools/call books_get",
            SpanKind::Client,
            &format!("attempt {attempt}"),
        );
        let error_type = attribute(client, names::ERROR_TYPE);
        assert!(
            error_type.is_some() && error_type.as_deref() != Some("tool_error"),
            "attempt {attempt}: how it failed to reach the server: {error_type:?}"
        );
    }
    assert_eq!(books_state(&gateway_recorded, "open"), Some(1.0));
    assert_eq!(books_state(&gateway_recorded, "closed"), Some(0.0));

    // The breaker refuses the next call: nothing is sent, so there is no client span.
    let refused = calls::call(&ready, "books__books_get", get).await;
    assert!(refused.error().unwrap().message.contains("is unavailable"));
    let spans = gateway_recorded.take();
    assert!(
        !spans.iter().any(|s| s.span_kind == SpanKind::Client),
        "{spans:#?}"
    );
    assert!(
        spans
            .iter()
            .any(|s| s.name == "execute_tool books__books_get"),
        "the refused call is still the dispatcher's span: {spans:#?}"
    );
    imports.close().await;
}
