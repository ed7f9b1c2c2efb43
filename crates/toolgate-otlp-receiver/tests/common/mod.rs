//! What the exporter tests share: a Tokio runtime for the exporters, an HTTP client that runs
//! reqwest's async client on it, the exporters pointed at a receiver, and the spans and
//! metrics every transport must carry unchanged.
#![allow(dead_code)]

use std::time::Duration;

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Array, Context, KeyValue, Value};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{RetryPolicy, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use toolgate_otlp_receiver::{
    AttributeValue, ReceivedSpan, Receiver, SpanKind as ReceivedKind, StatusCode, Transport,
};

/// Bound on every wait for what an exporter sent; a pass never comes near it.
pub const WAIT: Duration = Duration::from_secs(20);

/// The runtime the exporters' I/O runs on; the tests themselves stay on their plain thread,
/// where the SDK's blocking calls (`force_flush`, `shutdown`) belong.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// reqwest's async client, each request spawned on the tests' runtime. The SDK's batch
/// processor and periodic reader export from threads of their own, outside any runtime, where
/// reqwest's async client cannot run by itself.
#[derive(Debug, Clone)]
pub struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl OnRuntime {
    pub fn new(runtime: &tokio::runtime::Runtime, timeout: Duration) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        OnRuntime {
            client: reqwest::Client::builder()
                .no_proxy()
                .timeout(timeout)
                .build()
                .unwrap(),
            runtime: runtime.handle().clone(),
        }
    }
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move { client.send_bytes(request).await })
            .await
            .map_err(|joined| Box::new(joined) as HttpError)?
    }
}

/// A span exporter over OTLP/HTTP to `receiver`, retries off so a refusal shows at once.
pub fn http_span_exporter(
    runtime: &tokio::runtime::Runtime,
    receiver: &Receiver,
    timeout: Duration,
) -> opentelemetry_otlp::SpanExporter {
    opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(OnRuntime::new(runtime, timeout))
        .with_endpoint(format!("{}/v1/traces", receiver.http_endpoint()))
        .with_retry_policy(RetryPolicy::disabled())
        .build()
        .unwrap()
}

/// A span exporter over OTLP/gRPC to `receiver`, built on `runtime` as tonic requires.
pub fn grpc_span_exporter(
    runtime: &tokio::runtime::Runtime,
    endpoint: String,
) -> opentelemetry_otlp::SpanExporter {
    let _entered = runtime.enter();
    opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_retry_policy(RetryPolicy::disabled())
        .build()
        .unwrap()
}

pub fn http_metric_exporter(
    runtime: &tokio::runtime::Runtime,
    receiver: &Receiver,
) -> opentelemetry_otlp::MetricExporter {
    opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_http_client(OnRuntime::new(runtime, Duration::from_secs(10)))
        .with_endpoint(format!("{}/v1/metrics", receiver.http_endpoint()))
        .with_retry_policy(RetryPolicy::disabled())
        .build()
        .unwrap()
}

pub fn grpc_metric_exporter(
    runtime: &tokio::runtime::Runtime,
    receiver: &Receiver,
) -> opentelemetry_otlp::MetricExporter {
    let _entered = runtime.enter();
    opentelemetry_otlp::MetricExporter::builder()
        .with_tonic()
        .with_endpoint(receiver.grpc_endpoint())
        .with_retry_policy(RetryPolicy::disabled())
        .build()
        .unwrap()
}

pub fn resource() -> Resource {
    Resource::builder_empty()
        .with_service_name("toolgate-under-test")
        .with_attribute(KeyValue::new("deployment.environment.name", "test"))
        .build()
}

pub fn tracer_provider(exporter: opentelemetry_otlp::SpanExporter) -> SdkTracerProvider {
    SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource())
        .build()
}

/// The ids the SDK gave the two spans, as lowercase hex.
#[derive(Debug)]
pub struct Sent {
    pub trace_id: String,
    pub parent_span_id: String,
    pub child_span_id: String,
}

pub const SCOPE: &str = "toolgate-otlp-receiver-tests";

/// A tool call (server span) with one child (the policy decision) that carries an event and
/// an error status: every attribute type the SDK can send.
pub fn send_parent_and_child(provider: &SdkTracerProvider) -> Sent {
    let tracer = provider.tracer(SCOPE);
    let parent = tracer
        .span_builder("tools/call notes_search")
        .with_kind(SpanKind::Server)
        .with_attributes([
            KeyValue::new("gen_ai.tool.name", "notes_search"),
            KeyValue::new("toolgate.attempt", 2_i64),
            KeyValue::new("toolgate.cached", false),
            KeyValue::new("toolgate.score", 0.5_f64),
            KeyValue::new(
                "toolgate.scopes",
                Value::Array(Array::String(vec![
                    "notes:read".into(),
                    "notes:write".into(),
                ])),
            ),
        ])
        .start(&tracer);
    let parent_cx = Context::current_with_span(parent);
    let mut child = tracer
        .span_builder("policy decision")
        .with_kind(SpanKind::Internal)
        .start_with_context(&tracer, &parent_cx);
    child.set_attribute(KeyValue::new("toolgate.decision", "deny"));
    child.add_event(
        "approval asked",
        vec![KeyValue::new("toolgate.approver", "alice")],
    );
    child.set_status(Status::error("denied by policy"));
    let sent = Sent {
        trace_id: parent_cx.span().span_context().trace_id().to_string(),
        parent_span_id: parent_cx.span().span_context().span_id().to_string(),
        child_span_id: child.span_context().span_id().to_string(),
    };
    child.end();
    parent_cx.span().end();
    sent
}

/// The receiver decoded both spans exactly as sent, by `transport`.
pub fn assert_parent_and_child(spans: &[ReceivedSpan], sent: &Sent, transport: Transport) {
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let parent = spans
        .iter()
        .find(|s| s.name == "tools/call notes_search")
        .unwrap();
    let child = spans.iter().find(|s| s.name == "policy decision").unwrap();

    assert_eq!(parent.transport, transport);
    assert_eq!(child.transport, transport);
    assert_eq!(parent.trace_id, sent.trace_id);
    assert_eq!(parent.trace_id.len(), 32);
    assert_eq!(child.trace_id, sent.trace_id);
    assert_eq!(parent.span_id, sent.parent_span_id);
    assert_eq!(child.span_id, sent.child_span_id);
    assert_eq!(parent.parent_span_id, None);
    assert_eq!(
        child.parent_span_id.as_deref(),
        Some(sent.parent_span_id.as_str())
    );

    assert_eq!(parent.kind, ReceivedKind::Server);
    assert_eq!(child.kind, ReceivedKind::Internal);
    assert!(parent.start_unix_nanos > 0 && parent.start_unix_nanos <= parent.end_unix_nanos);
    assert_eq!(parent.status.code, StatusCode::Unset);
    assert_eq!(child.status.code, StatusCode::Error);
    assert_eq!(child.status.message, "denied by policy");

    assert_eq!(
        parent.attributes.get("gen_ai.tool.name"),
        Some(&AttributeValue::from("notes_search"))
    );
    assert_eq!(
        parent.attributes.get("toolgate.attempt"),
        Some(&AttributeValue::Int(2))
    );
    assert_eq!(
        parent.attributes.get("toolgate.cached"),
        Some(&AttributeValue::Bool(false))
    );
    assert_eq!(
        parent.attributes.get("toolgate.score"),
        Some(&AttributeValue::Double(0.5))
    );
    assert_eq!(
        parent.attributes.get("toolgate.scopes"),
        Some(&AttributeValue::Array(vec![
            "notes:read".into(),
            "notes:write".into()
        ]))
    );
    assert_eq!(parent.attributes.len(), 5, "{:?}", parent.attributes);
    assert_eq!(
        child.attributes.get("toolgate.decision"),
        Some(&AttributeValue::from("deny"))
    );

    assert!(parent.events.is_empty());
    assert_eq!(child.events.len(), 1);
    assert_eq!(child.events[0].name, "approval asked");
    assert_eq!(
        child.events[0].attributes.get("toolgate.approver"),
        Some(&AttributeValue::from("alice"))
    );

    for span in [parent, child] {
        assert_eq!(span.scope_name, SCOPE);
        assert_eq!(
            span.resource_attributes.get("service.name"),
            Some(&AttributeValue::from("toolgate-under-test"))
        );
        assert_eq!(
            span.resource_attributes.get("deployment.environment.name"),
            Some(&AttributeValue::from("test"))
        );
    }
}

/// A raw HTTP/1.1 answer: status, head lines, body.
#[derive(Debug)]
pub struct RawAnswer {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

/// One request on a fresh connection, written byte for byte (a client library would refuse or
/// fix some of what these tests send). `Content-Length` is the body's unless `headers` give one.
pub fn raw_http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> RawAnswer {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.set_write_timeout(Some(WAIT)).unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-length"))
    {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(&answer)));
    let head = String::from_utf8(answer[..split].to_vec()).unwrap();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap();
    RawAnswer {
        status,
        head,
        body: answer[split + 4..].to_vec(),
    }
}
