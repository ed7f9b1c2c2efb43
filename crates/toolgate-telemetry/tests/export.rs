//! Export from `[telemetry]` to a real OTLP receiver on 127.0.0.1, over OTLP/HTTP and
//! OTLP/gRPC: spans recorded through the `Telemetry` handle (and through a real dispatcher)
//! arrive decoded with their attributes, parent links and resource, and metrics arrive; a
//! collector that is down, goes down or is slow costs counted, dropped spans and never a
//! blocked recording; a sampling ratio of 0 exports no new trace; configured headers reach
//! the collector over either protocol; the approval store's open tickets are counted. Counts
//! are asserted, never durations: a wait on the receiver only bounds how long a failure takes
//! to show.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{SpanKind, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_core::telemetry::{Telemetry, names};
use toolgate_core::{
    CallRequest, Dispatcher, Effect, Principal, Registry, Risk, Tool, ToolBuilder, ToolOutput,
};
use toolgate_otlp_receiver::{
    AttributeValue, PointValue, ReceivedMetric, ReceivedSpan, Receiver, ReceiverOptions,
    SpanKind as Kind, Transport, Until,
};
use toolgate_telemetry::config::{Protocol, TelemetryConfig};
use toolgate_telemetry::export::{METRIC_SPANS_DROPPED, SCOPE};
use toolgate_telemetry::{Exporting, TelemetryError};

/// Bound on every wait for what the exporter sent; a pass never comes near it.
const WAIT: Duration = Duration::from_secs(20);

fn config(endpoint: String, protocol: Protocol) -> TelemetryConfig {
    TelemetryConfig {
        otlp_endpoint: Some(endpoint),
        protocol,
        service_name: "toolgate-under-test".to_string(),
        export_timeout_ms: 5_000,
        ..TelemetryConfig::default()
    }
}

fn start(config: &TelemetryConfig) -> Exporting {
    toolgate_telemetry::start(config)
        .unwrap()
        .expect("an endpoint is configured")
}

/// A span with no parent, ended at once.
fn record_root(telemetry: &Telemetry, name: &str) {
    let cx = telemetry
        .start_span(
            name.to_string(),
            SpanKind::Internal,
            vec![],
            &Context::new(),
        )
        .expect("telemetry is on");
    cx.span().end();
}

/// A server span with one child carrying attributes; returns (trace id, parent id, child id).
fn record_parent_and_child(telemetry: &Telemetry) -> (String, String, String) {
    let parent = telemetry
        .start_span(
            "tools/call demo_page".to_string(),
            SpanKind::Server,
            vec![
                KeyValue::new(names::MCP_METHOD_NAME, "tools/call"),
                KeyValue::new(names::JSONRPC_REQUEST_ID, "7"),
            ],
            &Context::new(),
        )
        .unwrap();
    let child = telemetry
        .start_span(
            "execute_tool demo_page".to_string(),
            SpanKind::Internal,
            vec![
                KeyValue::new(names::GEN_AI_TOOL_NAME, "demo_page"),
                KeyValue::new(names::TOOL_VERSION, 3_i64),
                KeyValue::new(names::DUPLICATE, false),
            ],
            &parent,
        )
        .unwrap();
    let ids = (
        parent.span().span_context().trace_id().to_string(),
        parent.span().span_context().span_id().to_string(),
        child.span().span_context().span_id().to_string(),
    );
    child.span().end();
    parent.span().end();
    ids
}

fn by_name<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
}

fn assert_parent_and_child(
    spans: &[ReceivedSpan],
    (trace_id, parent_id, child_id): &(String, String, String),
    transport: Transport,
) {
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let parent = by_name(spans, "tools/call demo_page");
    let child = by_name(spans, "execute_tool demo_page");
    for span in [parent, child] {
        assert_eq!(span.transport, transport);
        assert_eq!(&span.trace_id, trace_id);
        assert_eq!(span.scope_name, SCOPE);
        assert_eq!(
            span.resource_attributes.get("service.name"),
            Some(&AttributeValue::from("toolgate-under-test"))
        );
        assert_eq!(
            span.resource_attributes.get("service.version"),
            Some(&AttributeValue::from(env!("CARGO_PKG_VERSION")))
        );
    }
    assert_eq!(&parent.span_id, parent_id);
    assert_eq!(parent.parent_span_id, None);
    assert_eq!(parent.kind, Kind::Server);
    assert_eq!(
        parent.attributes.get(names::MCP_METHOD_NAME),
        Some(&AttributeValue::from("tools/call"))
    );
    assert_eq!(&child.span_id, child_id);
    assert_eq!(child.parent_span_id.as_ref(), Some(parent_id));
    assert_eq!(child.kind, Kind::Internal);
    assert_eq!(
        child.attributes.get(names::GEN_AI_TOOL_NAME),
        Some(&AttributeValue::from("demo_page"))
    );
    assert_eq!(
        child.attributes.get(names::TOOL_VERSION),
        Some(&AttributeValue::Int(3))
    );
    assert_eq!(
        child.attributes.get(names::DUPLICATE),
        Some(&AttributeValue::Bool(false))
    );
}

fn has_metrics(wanted: &'static [&'static str]) -> Until<ReceivedMetric> {
    Until::condition(
        format!("metrics {wanted:?}"),
        move |metrics: &[ReceivedMetric]| {
            wanted
                .iter()
                .all(|name| metrics.iter().any(|m| m.name == *name))
        },
    )
}

/// Spans and a call duration through the handle, over `protocol`, to a receiver.
fn spans_and_metrics_arrive(protocol: Protocol) {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let (endpoint, transport) = match protocol {
        Protocol::HttpProtobuf => (receiver.http_endpoint(), Transport::Http),
        Protocol::Grpc => (receiver.grpc_endpoint(), Transport::Grpc),
    };
    let exporting = start(&config(endpoint, protocol));
    let telemetry = exporting.telemetry();
    assert!(telemetry.is_on());

    let sent = record_parent_and_child(&telemetry);
    telemetry.instruments().unwrap().call_duration.record(
        0.25,
        &[
            KeyValue::new(names::GEN_AI_TOOL_NAME, "demo_page"),
            KeyValue::new(names::DECISION, "ok"),
        ],
    );
    exporting.flush().unwrap();

    let spans = receiver
        .wait_for_spans_blocking(Until::count(2), WAIT)
        .unwrap();
    assert_parent_and_child(&spans, &sent, transport);

    let metrics = receiver
        .wait_for_metrics_blocking(
            has_metrics(&[names::METRIC_CALL_DURATION, METRIC_SPANS_DROPPED]),
            WAIT,
        )
        .unwrap();
    let duration = metrics
        .iter()
        .find(|m| m.name == names::METRIC_CALL_DURATION)
        .unwrap();
    assert_eq!(duration.transport, transport);
    assert_eq!(duration.unit, "s");
    assert_eq!(duration.scope_name, SCOPE);
    assert_eq!(
        duration.data_points[0].attributes.get(names::DECISION),
        Some(&AttributeValue::from("ok")),
        "{duration:#?}"
    );
    assert_eq!(
        duration.resource_attributes.get("service.name"),
        Some(&AttributeValue::from("toolgate-under-test"))
    );

    exporting.shutdown().unwrap();
    assert_eq!(exporting.spans_exported(), 2);
    assert_eq!(exporting.spans_dropped(), 0);
}

#[test]
fn spans_and_metrics_arrive_over_http_with_their_attributes_and_parent_links() {
    spans_and_metrics_arrive(Protocol::HttpProtobuf);
}

#[test]
fn spans_and_metrics_arrive_over_grpc_with_their_attributes_and_parent_links() {
    spans_and_metrics_arrive(Protocol::Grpc);
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

fn page_tool() -> Tool {
    ToolBuilder::<NoArgs>::new("demo_page", 1)
        .describe("Reads a page.", "the user names a page.", None, "the page.")
        .policy(Risk::Low, Effect::Read, "It only reads.")
        .read(|_ctx, _args: NoArgs| async move { Ok(ToolOutput::new(json!({"title": "Risotto"}))) })
        .unwrap()
}

#[tokio::test]
async fn a_dispatcher_call_arrives_as_a_child_of_the_request_span() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let exporting = start(&config(receiver.http_endpoint(), Protocol::HttpProtobuf));
    let telemetry = exporting.telemetry();
    let dispatcher = Dispatcher::new(Arc::new(Registry::new([page_tool()]).unwrap()))
        .unwrap()
        .with_telemetry(telemetry.clone());

    let request_span = telemetry
        .start_span(
            "tools/call demo_page".to_string(),
            SpanKind::Server,
            vec![],
            &Context::new(),
        )
        .unwrap();
    let out = dispatcher
        .call(CallRequest::new(
            Principal::local("alice", &[]),
            "run-1",
            "demo_page",
            json!({}),
        ))
        .with_context(request_span.clone())
        .await;
    request_span.span().end();
    assert_eq!(out.record.outcome.as_str(), "ok");

    let spans = receiver
        .wait_for_spans(Until::count(2), WAIT)
        .await
        .unwrap();
    let server = by_name(&spans, "tools/call demo_page");
    let call = by_name(&spans, "execute_tool demo_page");
    assert_eq!(call.parent_span_id.as_ref(), Some(&server.span_id));
    assert_eq!(call.trace_id, server.trace_id);
    assert_eq!(
        call.attributes.get(names::GEN_AI_TOOL_CALL_ID),
        Some(&AttributeValue::from(out.record.call_id.as_str()))
    );
    assert_eq!(
        call.attributes.get(names::DECISION),
        Some(&AttributeValue::from("ok"))
    );
    assert_eq!(
        call.attributes.get(names::GEN_AI_OPERATION_NAME),
        Some(&AttributeValue::from("execute_tool"))
    );
    exporting.shutdown().unwrap();
    assert_eq!(exporting.spans_exported(), 2);
}

/// How many spans each no-collector test records: far more than the queue holds.
const RECORDED: u64 = 2_000;
const SMALL_QUEUE: usize = 8;

#[test]
fn a_collector_that_is_not_there_costs_counted_dropped_spans_not_a_blocked_call() {
    // A port that was bound and released: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for protocol in [Protocol::HttpProtobuf, Protocol::Grpc] {
        let exporting = start(&TelemetryConfig {
            queue_capacity: SMALL_QUEUE,
            export_timeout_ms: 500,
            ..config(format!("http://127.0.0.1:{port}"), protocol)
        });
        let telemetry = exporting.telemetry();
        for i in 0..RECORDED {
            record_root(&telemetry, &format!("span {i}"));
        }
        assert!(
            exporting.spans_dropped() > 0,
            "{protocol:?}: more spans than the queue holds were recorded"
        );
        let shut = exporting.shutdown();
        assert!(
            matches!(shut, Err(TelemetryError::Shutdown(_))),
            "{protocol:?}: shutdown says what was lost: {shut:?}"
        );
        assert_eq!(exporting.spans_exported(), 0, "{protocol:?}");
        assert_eq!(exporting.spans_dropped(), RECORDED, "{protocol:?}");
    }
}

#[test]
fn a_collector_that_goes_down_costs_counted_dropped_spans_not_a_blocked_call() {
    let mut receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let exporting = start(&TelemetryConfig {
        queue_capacity: SMALL_QUEUE,
        export_timeout_ms: 500,
        ..config(receiver.grpc_endpoint(), Protocol::Grpc)
    });
    let telemetry = exporting.telemetry();
    for i in 0..3 {
        record_root(&telemetry, &format!("before {i}"));
    }
    exporting.flush().unwrap();
    assert_eq!(receiver.spans().len(), 3);

    receiver.stop();
    for i in 0..RECORDED {
        record_root(&telemetry, &format!("after {i}"));
    }
    assert!(exporting.spans_dropped() > 0);
    assert!(exporting.shutdown().is_err());
    assert_eq!(exporting.spans_exported(), 3);
    assert_eq!(exporting.spans_dropped(), RECORDED);
    assert_eq!(
        receiver.spans().len(),
        3,
        "nothing arrived after it stopped"
    );
}

#[test]
fn a_failing_collector_is_not_sent_to_again_until_its_backoff_ends() {
    for (protocol, transport) in [
        (Protocol::HttpProtobuf, Transport::Http),
        (Protocol::Grpc, Transport::Grpc),
    ] {
        let receiver = Receiver::start(ReceiverOptions::default().failing()).unwrap();
        let endpoint = match protocol {
            Protocol::HttpProtobuf => receiver.http_endpoint(),
            Protocol::Grpc => receiver.grpc_endpoint(),
        };
        let exporting = start(&TelemetryConfig {
            // No periodic metric export during the test: every request counted is a batch.
            metrics_interval_ms: 600_000,
            ..config(endpoint, protocol)
        });
        let telemetry = exporting.telemetry();
        for i in 0..3 {
            record_root(&telemetry, &format!("refused {i}"));
        }
        // The batch goes out after its delay and is refused, once: no retry of our own or
        // the exporter's.
        wait_until("the refused batch is counted", || {
            exporting.spans_dropped() == 3
        });
        assert!(exporting.backing_off(), "{protocol:?}");

        // Meanwhile spans are dropped where they end: nothing is queued, nothing is sent.
        for i in 0..RECORDED {
            record_root(&telemetry, &format!("while backing off {i}"));
        }
        assert_eq!(exporting.spans_dropped(), 3 + RECORDED, "{protocol:?}");
        let sent = receiver.request_counts(transport);
        assert_eq!(sent.failed_on_purpose, 1, "{protocol:?}: {sent:?}");
        assert_eq!(sent.total(), 1, "{protocol:?}: {sent:?}");

        // The collector recovers; once the backoff ends, spans go out again.
        receiver.set_failing(false);
        wait_until("the backoff ends", || !exporting.backing_off());
        record_root(&telemetry, "after the backoff");
        exporting.flush().unwrap();
        let names: Vec<String> = receiver.spans().into_iter().map(|span| span.name).collect();
        assert_eq!(names, ["after the backoff"], "{protocol:?}");
        exporting.shutdown().unwrap();
        assert_eq!(exporting.spans_exported(), 1, "{protocol:?}");
        assert_eq!(exporting.spans_dropped(), 3 + RECORDED, "{protocol:?}");
    }
}

/// Polls `done` every 10 ms until it holds; panics naming `what` after [`WAIT`].
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "waited {WAIT:?} for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_slow_collector_costs_counted_dropped_spans_not_a_blocked_call() {
    // Each answer waits; an export takes at least this long, while recording goes on.
    let receiver =
        Receiver::start(ReceiverOptions::default().with_delay(Duration::from_millis(300))).unwrap();
    let exporting = start(&TelemetryConfig {
        queue_capacity: SMALL_QUEUE,
        ..config(receiver.http_endpoint(), Protocol::HttpProtobuf)
    });
    let telemetry = exporting.telemetry();
    for i in 0..RECORDED {
        record_root(&telemetry, &format!("span {i}"));
    }
    assert!(exporting.spans_dropped() > 0);
    exporting.shutdown().unwrap_or_else(|error| {
        // Only dropped spans may make the shutdown report an error.
        assert!(exporting.spans_dropped() > 0, "{error}");
    });
    let exported = exporting.spans_exported();
    assert!(exported > 0, "the slow collector accepted what it was sent");
    assert_eq!(exporting.spans_dropped() + exported, RECORDED);
    assert_eq!(receiver.spans().len() as u64, exported);
    // The last metric export, at shutdown after the spans', carries the final dropped count.
    let dropped = receiver
        .metrics()
        .into_iter()
        .rev()
        .find(|m| m.name == METRIC_SPANS_DROPPED)
        .expect("the dropped-span counter was exported at shutdown");
    assert_eq!(
        dropped.data_points[0].value,
        PointValue::Int(exporting.spans_dropped() as i64),
        "{dropped:#?}"
    );
}

#[test]
fn a_sampling_ratio_of_zero_exports_no_new_trace_but_keeps_a_sampled_parents() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let exporting = start(&TelemetryConfig {
        sampling_ratio: 0.0,
        ..config(receiver.http_endpoint(), Protocol::HttpProtobuf)
    });
    let telemetry = exporting.telemetry();
    for i in 0..50 {
        record_root(&telemetry, &format!("unsampled {i}"));
    }
    // A request whose caller sampled its trace: the call follows its parent's decision.
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    let remote = toolgate_telemetry::propagation::context_from_headers(&headers).unwrap();
    let child = telemetry
        .start_span(
            "tools/call demo_page".to_string(),
            SpanKind::Server,
            vec![],
            &remote,
        )
        .unwrap();
    child.span().end();
    exporting.flush().unwrap();

    let spans = receiver.spans();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(spans[0].trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(spans[0].parent_span_id.as_deref(), Some("00f067aa0ba902b7"));
    assert_eq!(receiver.trace_requests().len(), 1);
    exporting.shutdown().unwrap();
    assert_eq!(exporting.spans_exported(), 1);
    assert_eq!(exporting.spans_dropped(), 0);
}

/// The headers `[telemetry] headers` names reach the collector with every trace export: as
/// HTTP headers over OTLP/HTTP, as metadata over gRPC.
fn configured_headers_reach_the_collector(protocol: Protocol) {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let (endpoint, transport) = match protocol {
        Protocol::HttpProtobuf => (receiver.http_endpoint(), Transport::Http),
        Protocol::Grpc => (receiver.grpc_endpoint(), Transport::Grpc),
    };
    let mut config = config(endpoint, protocol);
    config
        .headers
        .insert("x-api-key".to_string(), "k-123".to_string());
    let exporting = start(&config);
    record_root(&exporting.telemetry(), "with a key");
    exporting.flush().unwrap();
    receiver
        .wait_for_spans_blocking(Until::count(1), WAIT)
        .unwrap();
    let sent = receiver.trace_request_headers();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, transport);
    assert!(
        sent[0]
            .1
            .contains(&("x-api-key".to_string(), "k-123".to_string())),
        "{sent:?}"
    );
    exporting.shutdown().unwrap();
    assert_eq!(exporting.spans_exported(), 1);
}

#[test]
fn configured_headers_reach_the_collector_over_http() {
    configured_headers_reach_the_collector(Protocol::HttpProtobuf);
}

#[test]
fn configured_headers_reach_the_collector_over_grpc_as_metadata() {
    configured_headers_reach_the_collector(Protocol::Grpc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_export_inside_a_runtime_with_spans_held_neither_panics_nor_hangs() {
    // A slow collector, spans still held, and no shutdown: Drop flushes within its bound, and
    // stops the runtime it owns without waiting (dropping one inside another would panic).
    let receiver =
        Receiver::start(ReceiverOptions::default().with_delay(Duration::from_millis(200))).unwrap();
    let exporting = start(&TelemetryConfig {
        queue_capacity: SMALL_QUEUE,
        export_timeout_ms: 1_000,
        ..config(receiver.http_endpoint(), Protocol::HttpProtobuf)
    });
    let telemetry = exporting.telemetry();
    for i in 0..100 {
        record_root(&telemetry, &format!("span {i}"));
    }
    drop(exporting);
    // The handle outlives the export: recording through it is a no-op, not a crash.
    record_root(&telemetry, "after");
    assert!(!receiver.spans().iter().any(|s| s.name == "after"));
}

fn ticket_request(binding: &str) -> toolgate_core::ApprovalRequest {
    toolgate_core::ApprovalRequest {
        binding: binding.into(),
        tool: "email_send".into(),
        version: 1,
        risk: Risk::High,
        reason: "It sends mail.".into(),
        effect: Effect::Irreversible,
        arguments: json!({"draft_id": 7}),
        preview: None,
        principal: "alice".into(),
        taint: Vec::new(),
    }
}

/// The points of the newest `toolgate.approval.tickets.open` received, by ticket kind.
fn open_ticket_points(metrics: &[ReceivedMetric]) -> Vec<(String, PointValue)> {
    let newest = metrics
        .iter()
        .rev()
        .find(|m| m.name == names::METRIC_APPROVAL_TICKETS_OPEN)
        .expect("the open tickets were exported");
    assert_eq!(newest.kind, toolgate_otlp_receiver::MetricKind::Gauge);
    assert_eq!(newest.unit, "{ticket}");
    let mut points: Vec<(String, PointValue)> = newest
        .data_points
        .iter()
        .map(|p| {
            let kind = p.attributes.get(names::APPROVAL_TICKET_KIND).unwrap();
            (kind.as_str().unwrap().to_string(), p.value.clone())
        })
        .collect();
    points.sort_by(|a, b| a.0.cmp(&b.0));
    points
}

/// Tickets that wait for a person are read from the approval store at each export, host and
/// inbox tickets apart: one decided or used leaves the count, an expired one is not in it, and
/// a store that cannot be read sends no point rather than a zero.
#[test]
fn open_approval_tickets_are_counted_from_the_store_at_each_export() {
    use toolgate_core::approval::HumanDecision;
    use toolgate_core::{ApprovalLedger, Principal};

    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let exporting = start(&TelemetryConfig {
        // No periodic export during the test: each export is a flush.
        metrics_interval_ms: 600_000,
        ..config(receiver.http_endpoint(), Protocol::HttpProtobuf)
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("approvals.db");
    let ledger = Arc::new(ApprovalLedger::open(&path).unwrap());
    let alice = Principal::local("alice", &[]);
    let (now, ttl) = (std::time::SystemTime::now(), Duration::from_secs(600));
    let (host_1, _host_2, inbox, _expired) = runtime.block_on(async {
        (
            ledger
                .open_ticket(&ticket_request("b1"), &alice, now, ttl)
                .await
                .unwrap(),
            ledger
                .open_ticket(&ticket_request("b2"), &alice, now, ttl)
                .await
                .unwrap(),
            ledger
                .open_inbox_ticket(&ticket_request("b3"), &alice, now, ttl)
                .await
                .unwrap(),
            ledger
                .open_inbox_ticket(
                    &ticket_request("b4"),
                    &alice,
                    now - Duration::from_secs(1_200),
                    ttl,
                )
                .await
                .unwrap(),
        )
    });
    exporting.observe_open_tickets(Arc::clone(&ledger), runtime.handle().clone());

    let exported = |wanted: &'static [&'static str]| {
        exporting.flush().unwrap();
        let metrics = receiver
            .wait_for_metrics_blocking(has_metrics(wanted), WAIT)
            .unwrap();
        receiver.clear();
        metrics
    };
    let tickets_open = &[names::METRIC_APPROVAL_TICKETS_OPEN];
    assert_eq!(
        open_ticket_points(&exported(tickets_open)),
        [
            ("host".to_string(), PointValue::Int(2)),
            ("inbox".to_string(), PointValue::Int(1)),
        ]
    );

    runtime.block_on(async {
        let decision = HumanDecision {
            decided_by: "bob".into(),
            approved: false,
            reason: "not now".into(),
            decided_at_unix: 1,
        };
        ledger.decide(&inbox.token, "b3", &decision).await.unwrap();
        ledger
            .spend(&host_1.token, std::time::SystemTime::now())
            .await
            .unwrap();
    });
    assert_eq!(
        open_ticket_points(&exported(tickets_open)),
        [
            ("host".to_string(), PointValue::Int(1)),
            ("inbox".to_string(), PointValue::Int(0)),
        ]
    );

    // The store breaks: the export still goes out, without a count.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE approval_tickets")
        .unwrap();
    let metrics = exported(&[METRIC_SPANS_DROPPED]);
    let sent: Vec<&ReceivedMetric> = metrics
        .iter()
        .filter(|m| m.name == names::METRIC_APPROVAL_TICKETS_OPEN)
        .filter(|m| !m.data_points.is_empty())
        .collect();
    assert!(sent.is_empty(), "a count was made up: {sent:#?}");
    exporting.shutdown().unwrap();
}
