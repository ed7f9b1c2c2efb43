//! The dispatcher's spans, read back from the OpenTelemetry SDK's own in-memory exporter: one
//! span per call, a nested call's span a child of its enclosing call's, the decision on the
//! span under the same call id the JSONL trace carries, approvals as events, and nothing at
//! all when telemetry is off. (The OTLP wire itself is tested in `toolgate-telemetry`, against
//! a real receiver.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_core::telemetry::{Telemetry, TelemetryOptions, names};
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{
    ApprovalChannel, CallRequest, DecisionRecord, Dispatcher, Effect, Origin, Principal, Registry,
    Risk, ScriptedApprover, Tool, ToolBuilder, ToolOutput,
};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MailArgs {
    to: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

fn mail_tool() -> Tool {
    ToolBuilder::<MailArgs>::new("demo_mail", 2)
        .describe("Sends mail.", "the user asks to mail someone.", None, "ok.")
        .policy(Risk::High, Effect::Outbound, "Mail cannot be called back.")
        .read(
            |_ctx, args: MailArgs| async move { Ok(ToolOutput::new(json!({"sent_to": args.to}))) },
        )
        .unwrap()
}

fn page_tool() -> Tool {
    ToolBuilder::<NoArgs>::new("demo_page", 1)
        .describe("Reads a page.", "the user names a page.", None, "the page.")
        .policy(Risk::Low, Effect::Read, "It only reads.")
        .read(|_ctx, _args: NoArgs| async move { Ok(ToolOutput::new(json!({"title": "Risotto"}))) })
        .unwrap()
}

/// A script: reads the page, then tries to mail, both as nested calls.
fn script_tool() -> Tool {
    ToolBuilder::<NoArgs>::new("demo_script", 1)
        .describe(
            "Runs a script.",
            "a task needs several calls.",
            None,
            "the outcomes.",
        )
        .policy(
            Risk::Low,
            Effect::Read,
            "Each call it makes is checked on its own.",
        )
        .read(|ctx, _args: NoArgs| async move {
            let page = ctx
                .tools
                .call(Origin::Sandbox, "demo_page", json!({}))
                .await;
            let mail = ctx
                .tools
                .call(
                    Origin::Sandbox,
                    "demo_mail",
                    json!({"to": "bob@example.org"}),
                )
                .await;
            Ok(ToolOutput::new(json!({
                "outcomes": [page.record.outcome.as_str(), mail.record.outcome.as_str()]
            })))
        })
        .unwrap()
}

struct Fixture {
    dispatcher: Dispatcher,
    trace: Arc<MemoryTrace>,
    spans: InMemorySpanExporter,
    provider: SdkTracerProvider,
    metrics: InMemoryMetricExporter,
    meters: SdkMeterProvider,
}

fn fixture(on: bool, options: TelemetryOptions) -> Fixture {
    let spans = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(spans.clone())
        .build();
    let metrics = InMemoryMetricExporter::default();
    let meters = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metrics.clone()).build())
        .build();
    let registry = Registry::new([mail_tool(), page_tool(), script_tool()]).unwrap();
    let trace = Arc::new(MemoryTrace::default());
    let mut dispatcher = Dispatcher::new(Arc::new(registry))
        .unwrap()
        .with_trace(trace.clone());
    if on {
        let tracer = opentelemetry::global::BoxedTracer::new(Box::new(provider.tracer("toolgate")));
        use opentelemetry::metrics::MeterProvider as _;
        dispatcher =
            dispatcher.with_telemetry(Telemetry::new(tracer, &meters.meter("toolgate"), options));
    }
    Fixture {
        dispatcher,
        trace,
        spans,
        provider,
        metrics,
        meters,
    }
}

fn declining() -> Arc<ScriptedApprover> {
    Arc::new(ScriptedApprover::approving(Vec::<String>::new()))
}

fn request(tool: &str) -> CallRequest {
    CallRequest::new(Principal::local("alice", &[]), "run-1", tool, json!({}))
        .with_approval(ApprovalChannel::Ask(declining()))
}

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn string(span: &SpanData, key: &str) -> String {
    attribute(span, key)
        .map(|v| v.to_string())
        .unwrap_or_default()
}

fn finished(fx: &Fixture) -> Vec<SpanData> {
    fx.provider.force_flush().unwrap();
    fx.spans.get_finished_spans().unwrap()
}

#[tokio::test]
async fn a_nested_call_is_a_child_span_and_each_span_carries_its_records_call_id() {
    let fx = fixture(true, TelemetryOptions::default());
    fx.dispatcher.call(request("demo_script")).await;
    let spans = finished(&fx);
    let records = fx.trace.records::<DecisionRecord>();
    assert_eq!(spans.len(), 3, "one span per call: {spans:#?}");
    assert_eq!(records.len(), 3);

    let by_tool = |tool: &str| {
        spans
            .iter()
            .find(|s| string(s, names::GEN_AI_TOOL_NAME) == tool)
            .unwrap()
    };
    let script = by_tool("demo_script");
    let page = by_tool("demo_page");
    let mail = by_tool("demo_mail");
    assert_eq!(script.name, "execute_tool demo_script");
    assert_eq!(script.span_kind, SpanKind::Internal);
    for child in [page, mail] {
        assert_eq!(
            child.parent_span_id,
            script.span_context.span_id(),
            "{}",
            child.name
        );
        assert_eq!(
            child.span_context.trace_id(),
            script.span_context.trace_id()
        );
        assert_eq!(string(child, names::ORIGIN), "sandbox");
    }
    // The span and the JSONL line join on the call id, and agree on the decision.
    for record in &records {
        let span = by_tool(&record.tool);
        assert_eq!(string(span, names::GEN_AI_TOOL_CALL_ID), record.call_id);
        assert_eq!(string(span, names::GEN_AI_OPERATION_NAME), "execute_tool");
        assert_eq!(string(span, names::DECISION), record.outcome.as_str());
        assert_eq!(
            string(span, names::CATALOGUE_DIGEST),
            record.catalogue_digest
        );
        assert_eq!(
            attribute(span, names::BYTES_OUT),
            Some(Value::I64(record.result_bytes as i64))
        );
        assert_eq!(
            attribute(span, names::BYTES_IN),
            Some(Value::I64(
                serde_json::to_string(&record.arguments).unwrap().len() as i64
            )),
            "bytes in: the canonical arguments (these hold no secret to redact)"
        );
        assert_eq!(
            string(span, names::PARENT_CALL_ID),
            record.parent_call_id.clone().unwrap_or_default()
        );
    }
}

#[tokio::test]
async fn a_declined_approval_is_an_error_span_with_its_asked_and_answered_events() {
    let fx = fixture(true, TelemetryOptions::default());
    let out = fx.dispatcher.call(request("demo_script")).await;
    assert_eq!(out.record.outcome.as_str(), "ok", "the script itself ran");
    let spans = finished(&fx);
    let mail = spans
        .iter()
        .find(|s| s.name == "execute_tool demo_mail")
        .unwrap();
    assert_eq!(string(mail, names::DECISION), "approval_denied");
    assert_eq!(string(mail, names::ERROR_TYPE), "approval_denied");
    assert_eq!(mail.status, Status::error("approval_denied"));
    assert_eq!(string(mail, names::APPROVAL), "denied");
    assert_eq!(string(mail, names::APPROVAL_DENIAL), "declined");
    assert_eq!(string(mail, names::RISK), "high");
    assert_eq!(string(mail, names::EFFECT), "outbound");
    assert_eq!(attribute(mail, names::TOOL_VERSION), Some(Value::I64(2)));
    let events: Vec<&str> = mail.events.iter().map(|e| e.name.as_ref()).collect();
    assert_eq!(
        events,
        [names::EVENT_APPROVAL_ASKED, names::EVENT_APPROVAL_ANSWERED]
    );
    assert!(
        mail.events.events[1]
            .attributes
            .contains(&KeyValue::new(names::APPROVAL_DENIAL, "declined")),
        "{:?}",
        mail.events
    );
}

#[tokio::test]
async fn argument_values_stay_off_spans_unless_configured() {
    let call = || {
        CallRequest::new(
            Principal::local("alice", &[]),
            "run-1",
            "demo_mail",
            json!({"to": "carol@example.org"}),
        )
        .with_approval(ApprovalChannel::Ask(declining()))
    };
    let quiet = fixture(true, TelemetryOptions::default());
    quiet.dispatcher.call(call()).await;
    let spans = finished(&quiet);
    let text = format!("{spans:?}");
    assert!(!text.contains("carol@example.org"), "{text}");
    assert_eq!(attribute(&spans[0], names::ARGUMENTS), None);

    let verbose = fixture(
        true,
        TelemetryOptions {
            record_arguments: true,
        },
    );
    verbose.dispatcher.call(call()).await;
    let spans = finished(&verbose);
    assert!(string(&spans[0], names::ARGUMENTS).contains("carol@example.org"));
}

#[tokio::test]
async fn telemetry_off_makes_no_span_and_no_metric() {
    let fx = fixture(false, TelemetryOptions::default());
    fx.dispatcher.call(request("demo_script")).await;
    assert!(finished(&fx).is_empty());
    fx.meters.force_flush().unwrap();
    let exported = fx.metrics.get_finished_metrics().unwrap();
    assert!(
        exported
            .iter()
            .all(|rm| rm.scope_metrics().all(|sm| sm.metrics().next().is_none())),
        "{exported:?}"
    );
    assert_eq!(
        fx.trace.records::<DecisionRecord>().len(),
        3,
        "the JSONL trace is unchanged"
    );
}

#[tokio::test]
async fn call_durations_are_recorded_by_tool_and_decision() {
    let fx = fixture(true, TelemetryOptions::default());
    fx.dispatcher.call(request("demo_script")).await;
    fx.meters.force_flush().unwrap();
    let exported = fx.metrics.get_finished_metrics().unwrap();
    let names_seen: Vec<String> = exported
        .iter()
        .flat_map(|rm| rm.scope_metrics())
        .flat_map(|sm| sm.metrics())
        .map(|m| m.name().to_string())
        .collect();
    assert!(
        names_seen.contains(&names::METRIC_CALL_DURATION.to_string()),
        "{names_seen:?}"
    );
    assert!(
        names_seen.contains(&names::METRIC_APPROVAL_WAIT.to_string()),
        "{names_seen:?}"
    );
    let text = format!("{exported:?}");
    assert!(
        text.contains("approval_denied"),
        "the mail call's decision is a metric attribute"
    );
}
