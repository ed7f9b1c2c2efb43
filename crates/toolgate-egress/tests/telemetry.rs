//! The egress exit's spans and block counter, read back from the OpenTelemetry SDK's in-memory
//! exporters: a tool called through a real dispatcher fetches from real servers on 127.0.0.1,
//! and each decision is one span under the call's span that says what the `egress` trace line
//! says, hosts only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::IpAddr;
use std::sync::Arc;

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::trace::SpanData;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use support::{HttpServer, Route, SmtpSink};
use toolgate_core::telemetry::testing::{InMemoryTelemetry, attribute, text as string};
use toolgate_core::telemetry::{TelemetryOptions, names};
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{
    CallRequest, Dispatcher, Effect, Principal, Registry, Risk, Tool, ToolBuilder, ToolOutput,
};
use toolgate_egress::{
    AllowEntry, Egress, EgressConfig, OutgoingEmail, SmtpConfig, SmtpRelay, SmtpSecurity,
    StaticResolver,
};

/// What a URL can carry that must never reach a span.
const SECRET: &str = "token=s3cr3t-diagnosis";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FetchArgs {
    url: String,
}

/// A tool whose handler fetches through the exit, as every toolset's fetching tool does.
fn fetch_tool(egress: Arc<Egress>) -> Tool {
    ToolBuilder::<FetchArgs>::new("demo_fetch", 1)
        .describe(
            "Fetches a page.",
            "the user names a URL.",
            None,
            "the page.",
        )
        .policy(Risk::Low, Effect::Read, "It only reads a page.")
        .read(move |_ctx, args: FetchArgs| {
            let egress = Arc::clone(&egress);
            async move {
                match egress.get(&args.url).await {
                    Ok(page) => Ok(ToolOutput::new(json!({"status": page.status}))),
                    Err(e) => Err(e.to_tool_error()),
                }
            }
        })
        .unwrap()
}

fn local(host: &str, port: u16) -> AllowEntry {
    AllowEntry {
        host: host.into(),
        schemes: vec!["http".into()],
        ports: Some(vec![port]),
        allow_private: true,
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

struct Fixture {
    dispatcher: Dispatcher,
    egress_trace: Arc<MemoryTrace>,
    recorded: InMemoryTelemetry,
}

fn fixture(on: bool, allow: Vec<AllowEntry>) -> Fixture {
    let lo = [ip("127.0.0.1")];
    let resolver = StaticResolver::new()
        .with("allowed.test", &lo)
        .with("evil.test", &lo);
    let egress_trace = Arc::new(MemoryTrace::default());
    let egress = Egress::new(
        EgressConfig {
            allow,
            ..EgressConfig::default()
        },
        Arc::new(resolver),
        egress_trace.clone(),
    )
    .unwrap();
    let mut fx = traced(on, vec![fetch_tool(Arc::new(egress))]);
    fx.egress_trace = egress_trace;
    fx
}

/// A dispatcher over `tools` whose telemetry (when `on`) goes to in-memory exporters.
fn traced(on: bool, tools: Vec<Tool>) -> Fixture {
    let recorded = InMemoryTelemetry::new(TelemetryOptions::default());
    let registry = Registry::new(tools).unwrap();
    let mut dispatcher = Dispatcher::new(Arc::new(registry)).unwrap();
    if on {
        dispatcher = dispatcher.with_telemetry(recorded.telemetry.clone());
    }
    Fixture {
        dispatcher,
        egress_trace: Arc::new(MemoryTrace::default()),
        recorded,
    }
}

impl Fixture {
    async fn fetch(&self, url: &str) {
        self.call("demo_fetch", json!({"url": url})).await;
    }

    async fn call(&self, tool: &str, arguments: serde_json::Value) {
        let request = CallRequest::new(Principal::local("alice", &[]), "run-1", tool, arguments);
        self.dispatcher.call(request).await;
    }

    fn finished(&self) -> Vec<SpanData> {
        self.recorded.finished_spans()
    }

    /// The call's span and its one egress span, checked to be parent and child.
    fn call_and_egress(&self) -> (SpanData, SpanData) {
        let spans = self.finished();
        assert_eq!(spans.len(), 2, "a call span and an egress span: {spans:#?}");
        let call = spans
            .iter()
            .find(|s| s.name.starts_with("execute_tool"))
            .unwrap()
            .clone();
        let egress = spans
            .iter()
            .find(|s| s.name.starts_with("egress"))
            .unwrap()
            .clone();
        assert_eq!(egress.parent_span_id, call.span_context.span_id());
        assert_eq!(egress.span_context.trace_id(), call.span_context.trace_id());
        (call, egress)
    }

    /// The counter's value for `rule` (0 when never counted).
    fn blocks(&self, rule: &str) -> u64 {
        let exported = self.recorded.metrics();
        let Some(last) = exported.last() else {
            return 0;
        };
        let wanted = KeyValue::new(names::EGRESS_RULE, rule.to_string());
        last.scope_metrics()
            .flat_map(|sm| sm.metrics())
            .filter(|m| m.name() == names::METRIC_EGRESS_BLOCKS)
            .map(|m| match m.data() {
                AggregatedMetrics::U64(MetricData::Sum(sum)) => sum
                    .data_points()
                    .filter(|p| p.attributes().any(|kv| *kv == wanted))
                    .map(|p| p.value())
                    .sum::<u64>(),
                other => panic!("the blocks counter is a u64 sum: {other:?}"),
            })
            .sum()
    }
}

fn hops(span: &SpanData) -> Vec<String> {
    match attribute(span, names::EGRESS_HOPS) {
        Some(Value::Array(opentelemetry::Array::String(hosts))) => {
            hosts.iter().map(|h| h.as_str().to_string()).collect()
        }
        other => panic!("the hop chain is an array of strings: {other:?}"),
    }
}

/// Neither the path nor the query of any URL is on any span.
fn assert_hosts_only(spans: &[SpanData]) {
    let shown = format!("{spans:?}");
    for leak in ["s3cr3t", "token=", "/page", "/start"] {
        assert!(!shown.contains(leak), "`{leak}` reached a span: {shown}");
    }
}

#[tokio::test]
async fn an_allowed_fetch_is_a_client_span_under_its_call_with_the_host_and_rule_of_its_trace_line()
{
    let server = HttpServer::start(vec![("/page", Route::html("<h1>Budget</h1>"))]);
    let port = server.port();
    let fx = fixture(true, vec![local("allowed.test", port)]);

    fx.fetch(&format!("http://allowed.test:{port}/page?{SECRET}"))
        .await;
    assert_eq!(server.targets().len(), 1, "the request went out");
    let (_, egress) = fx.call_and_egress();
    let line = &fx.egress_trace.of_kind("egress")[0];

    assert_eq!(egress.name, "egress allowed.test");
    assert_eq!(egress.span_kind, SpanKind::Client);
    assert_eq!(egress.status, Status::Unset);
    assert_eq!(line["decision"], "allowed");
    assert_eq!(attribute(&egress, names::EGRESS_ALLOWED), Some(true.into()));
    assert_eq!(string(&egress, names::EGRESS_HOST), line["host"]);
    assert_eq!(string(&egress, names::EGRESS_RULE), line["rule"]);
    assert_eq!(string(&egress, names::EGRESS_RULE), "allow[0]:allowed.test");
    assert_eq!(attribute(&egress, names::EGRESS_BLOCK), None);
    assert_eq!(attribute(&egress, names::ERROR_TYPE), None);
    assert_eq!(hops(&egress), ["allowed.test"]);
    assert!(egress.start_time <= egress.end_time);
    assert_hosts_only(&fx.finished());
    assert_eq!(fx.blocks("unlisted_host"), 0);
}

#[tokio::test]
async fn an_unlisted_host_is_an_internal_error_span_with_its_block_and_is_counted() {
    let server = HttpServer::start(vec![("/page", Route::html("secret"))]);
    let port = server.port();
    let fx = fixture(true, vec![local("allowed.test", port)]);

    fx.fetch(&format!("http://evil.test:{port}/page?{SECRET}"))
        .await;
    assert!(server.targets().is_empty(), "nothing went out");
    let (call, egress) = fx.call_and_egress();
    let line = &fx.egress_trace.of_kind("egress")[0];

    assert_eq!(egress.name, "egress evil.test");
    assert_eq!(egress.span_kind, SpanKind::Internal);
    assert_eq!(egress.status, Status::error("unlisted_host"));
    assert_eq!(line["decision"], "blocked");
    assert_eq!(
        attribute(&egress, names::EGRESS_ALLOWED),
        Some(false.into())
    );
    assert_eq!(string(&egress, names::EGRESS_HOST), line["host"]);
    assert_eq!(string(&egress, names::EGRESS_RULE), line["rule"]);
    assert_eq!(string(&egress, names::EGRESS_BLOCK), "unlisted_host");
    assert_eq!(string(&egress, names::ERROR_TYPE), "unlisted_host");
    assert_eq!(hops(&egress), ["evil.test"]);
    // The refusal reached the model as a forbidden result: the call's span says so too.
    assert_eq!(string(&call, names::ERROR_TYPE), "forbidden");
    assert_hosts_only(&fx.finished());
    assert_eq!(fx.blocks("unlisted_host"), 1);
}

#[tokio::test]
async fn a_redirect_to_an_unlisted_host_is_refused_with_its_hop_chain_and_is_counted() {
    let server = HttpServer::start(vec![
        (
            "/start",
            Route::redirect(&format!("http://evil.test:{{port}}/x?{SECRET}")),
        ),
        ("/x", Route::html("should never be served")),
    ]);
    let port = server.port();
    let fx = fixture(true, vec![local("allowed.test", port)]);

    fx.fetch(&format!("http://allowed.test:{port}/start?{SECRET}"))
        .await;
    assert_eq!(server.targets(), vec![format!("/start?{SECRET}")]);
    let (_, egress) = fx.call_and_egress();
    let line = &fx.egress_trace.of_kind("egress")[0];

    assert_eq!(egress.name, "egress evil.test");
    assert_eq!(egress.span_kind, SpanKind::Internal);
    assert_eq!(egress.status, Status::error("unlisted_host"));
    assert_eq!(string(&egress, names::EGRESS_BLOCK), "unlisted_host");
    assert_eq!(string(&egress, names::EGRESS_RULE), line["rule"]);
    assert_eq!(hops(&egress), ["allowed.test", "evil.test"]);
    assert_eq!(
        line["hops"].as_array().map(Vec::len),
        Some(2),
        "the trace line has the same two hops, as URLs"
    );
    assert_hosts_only(&fx.finished());
    assert_eq!(fx.blocks("unlisted_host"), 1);
}

#[tokio::test]
async fn with_telemetry_off_the_exit_makes_no_span_and_still_writes_its_trace_line() {
    let server = HttpServer::start(vec![("/page", Route::html("<h1>Budget</h1>"))]);
    let port = server.port();
    let fx = fixture(false, vec![local("allowed.test", port)]);

    fx.fetch(&format!("http://allowed.test:{port}/page")).await;
    fx.fetch(&format!("http://evil.test:{port}/page")).await;
    assert!(fx.finished().is_empty());
    assert_eq!(fx.blocks("unlisted_host"), 0);
    let lines = fx.egress_trace.of_kind("egress");
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["decision"], "allowed");
    assert_eq!(lines[1]["decision"], "blocked");
}

#[tokio::test]
async fn outside_any_call_the_exit_makes_no_span() {
    let server = HttpServer::start(vec![("/page", Route::html("<h1>Budget</h1>"))]);
    let port = server.port();
    let fx = fixture(true, vec![local("allowed.test", port)]);
    let lo = [ip("127.0.0.1")];
    let egress = Egress::new(
        EgressConfig {
            allow: vec![local("allowed.test", port)],
            ..EgressConfig::default()
        },
        Arc::new(StaticResolver::new().with("allowed.test", &lo)),
        fx.egress_trace.clone(),
    )
    .unwrap();
    egress
        .get(&format!("http://allowed.test:{port}/page"))
        .await
        .unwrap();
    assert!(fx.finished().is_empty());
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MailArgs {
    to: String,
}

/// A tool whose handler sends mail through the relay.
fn mail_tool(relay: Arc<SmtpRelay>) -> Tool {
    ToolBuilder::<MailArgs>::new("demo_mail", 1)
        .describe("Sends mail.", "the user asks to mail someone.", None, "ok.")
        .policy(Risk::Low, Effect::Read, "A test relay only.")
        .read(move |_ctx, args: MailArgs| {
            let relay = Arc::clone(&relay);
            async move {
                let email = OutgoingEmail {
                    to: vec![args.to],
                    subject: "Budget".into(),
                    body: "We settled on 40k.".into(),
                };
                match relay.send(&email).await {
                    Ok(id) => Ok(ToolOutput::new(json!({"message_id": id}))),
                    Err(e) => Err(e.to_tool_error()),
                }
            }
        })
        .unwrap()
}

#[tokio::test]
async fn mail_through_the_relay_is_a_client_span_naming_the_relay_and_never_a_recipient() {
    let sink = SmtpSink::start();
    let port = sink.port();
    let relay_trace = Arc::new(MemoryTrace::default());
    let relay_entry = AllowEntry {
        host: "relay.test".into(),
        schemes: vec!["smtp".into()],
        ports: Some(vec![port]),
        allow_private: true,
    };
    let policy = EgressConfig {
        allow: vec![relay_entry],
        ..EgressConfig::default()
    }
    .validate()
    .unwrap();
    let relay = SmtpRelay::new(
        SmtpConfig {
            host: "relay.test".into(),
            port,
            security: SmtpSecurity::None,
            from: "assistant@example.org".into(),
            timeout_secs: 10,
            hello_name: None,
        },
        &policy,
        Arc::new(StaticResolver::new().with("relay.test", &[ip("127.0.0.1")])),
        relay_trace.clone(),
    )
    .unwrap();
    let fx = traced(true, vec![mail_tool(Arc::new(relay))]);

    fx.call("demo_mail", json!({"to": "carol.secret@example.org"}))
        .await;
    assert_eq!(sink.received().len(), 1, "the mail went out");
    let (_, egress) = fx.call_and_egress();
    let line = &relay_trace.of_kind("egress")[0];
    assert_eq!(line["decision"], "allowed");
    assert_eq!(egress.name, "egress relay.test");
    assert_eq!(egress.span_kind, SpanKind::Client);
    assert_eq!(string(&egress, names::EGRESS_RULE), line["rule"]);
    assert_eq!(
        attribute(&egress, names::EGRESS_HOPS),
        None,
        "mail has no hops"
    );
    let shown = format!("{:?}", fx.finished());
    assert!(!shown.contains("carol.secret"), "{shown}");
    assert!(!shown.contains("40k"), "{shown}");
}
