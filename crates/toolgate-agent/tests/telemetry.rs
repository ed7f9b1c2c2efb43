//! The loop's spans and GenAI metrics, read back from the OpenTelemetry SDK's in-memory
//! exporters: a scripted model (no real API) drives a conversation through a real dispatcher,
//! and the conversation is one trace: an `invoke_agent` root, a `chat` span per model request
//! with the scripted usage, and each call's `execute_tool` span under the run's span.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::trace::SpanData;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_agent::{Agent, AgentConfig, RunResult, StopCause};
use toolgate_core::telemetry::testing::{InMemoryTelemetry, attribute, text as string};
use toolgate_core::telemetry::{TelemetryOptions, names};
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{
    Caller, Dispatcher, Effect, Principal, Registry, Risk, Tool, ToolBuilder, ToolOutput,
};
use toolgate_llm::scripted::ScriptedModel;
use toolgate_llm::{ModelResponse, StopReason, ToolCall, Usage};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Lookup {
    /// What to look up.
    topic: String,
}

fn lookup_tool(name: &str) -> Tool {
    ToolBuilder::<Lookup>::new(name, 1)
        .describe("Looks up a topic.", "you need a fact.", None, "the fact.")
        .policy(Risk::Low, Effect::Read, "It only reads.")
        .parallel_safe()
        .read(|_ctx, args: Lookup| async move {
            Ok(ToolOutput::new(
                json!({"topic": args.topic, "fact": "it is 42"}),
            ))
        })
        .unwrap()
}

/// A turn that calls both lookups at once, with usage that reports cached input tokens.
fn two_calls() -> ModelResponse {
    ModelResponse {
        text: String::new(),
        tool_calls: vec![
            ToolCall {
                id: "call-a".into(),
                name: "kb_lookup".into(),
                arguments: json!({"topic": "budget"}),
            },
            ToolCall {
                id: "call-b".into(),
                name: "kb_history".into(),
                arguments: json!({"topic": "budget"}),
            },
        ],
        stop_reason: StopReason::ToolUse,
        usage: Usage {
            input_tokens: 120,
            output_tokens: 30,
            cached_input_tokens: 80,
        },
        model: "scripted-2026-01".into(),
    }
}

fn answer() -> ModelResponse {
    ModelResponse {
        text: "The budget is 42.".into(),
        tool_calls: Vec::new(),
        stop_reason: StopReason::EndTurn,
        usage: Usage {
            input_tokens: 200,
            output_tokens: 12,
            cached_input_tokens: 0,
        },
        model: "scripted-2026-01".into(),
    }
}

struct Fixture {
    agent: Agent,
    trace: Arc<MemoryTrace>,
    recorded: InMemoryTelemetry,
}

fn fixture(on: bool, turns: Vec<ModelResponse>) -> Fixture {
    let recorded = InMemoryTelemetry::new(TelemetryOptions::default());
    let registry = Registry::new([lookup_tool("kb_lookup"), lookup_tool("kb_history")]).unwrap();
    let trace = Arc::new(MemoryTrace::default());
    let mut dispatcher = Dispatcher::new(Arc::new(registry))
        .unwrap()
        .with_trace(trace.clone());
    if on {
        dispatcher = dispatcher.with_telemetry(recorded.telemetry.clone());
    }
    let agent = Agent::new(
        Arc::new(ScriptedModel::new(turns)),
        Caller::new(dispatcher),
        Principal::local("tester", &[]),
    )
    .with_config(AgentConfig::default())
    .with_trace(trace.clone());
    Fixture {
        agent,
        trace,
        recorded,
    }
}

impl Fixture {
    async fn ask(&self) -> RunResult {
        self.agent.ask("run-42", "what is the budget?").await
    }

    fn finished(&self) -> Vec<SpanData> {
        self.recorded.finished_spans()
    }

    /// Every data point of the histogram `name`, as (attributes, count, sum).
    fn histogram(&self, name: &str) -> Vec<(Vec<KeyValue>, u64, f64)> {
        let exported = self.recorded.metrics();
        let Some(last) = exported.last() else {
            return Vec::new();
        };
        last.scope_metrics()
            .flat_map(|sm| sm.metrics())
            .filter(|m| m.name() == name)
            .flat_map(|m| match m.data() {
                AggregatedMetrics::U64(MetricData::Histogram(h)) => h
                    .data_points()
                    .map(|p| (p.attributes().cloned().collect(), p.count(), p.sum() as f64))
                    .collect::<Vec<_>>(),
                AggregatedMetrics::F64(MetricData::Histogram(h)) => h
                    .data_points()
                    .map(|p| (p.attributes().cloned().collect(), p.count(), p.sum()))
                    .collect(),
                other => panic!("{name} is a histogram: {other:?}"),
            })
            .collect()
    }
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_is_one_trace_under_its_invoke_agent_span() {
    let fx = fixture(true, vec![two_calls(), answer()]);
    let result = fx.ask().await;
    assert_eq!(result.stop, StopCause::FinalAnswer);
    let spans = fx.finished();
    assert_eq!(spans.len(), 5, "a run, two requests, two calls: {spans:#?}");

    let run = named(&spans, "invoke_agent toolgate");
    assert_eq!(run.len(), 1);
    let run = run[0];
    assert_eq!(run.parent_span_id, SpanId::INVALID, "the run is the root");
    assert_eq!(run.span_kind, SpanKind::Internal);
    assert_eq!(string(run, names::GEN_AI_OPERATION_NAME), "invoke_agent");
    assert_eq!(string(run, names::GEN_AI_CONVERSATION_ID), "run-42");
    assert_eq!(string(run, names::GEN_AI_PROVIDER_NAME), "scripted");
    assert_eq!(
        attribute(run, names::GEN_AI_USAGE_INPUT_TOKENS),
        Some(Value::I64(320))
    );
    assert_eq!(run.status, Status::Unset);
    let trace_id = run.span_context.trace_id();
    for span in &spans {
        assert_eq!(span.span_context.trace_id(), trace_id, "{}", span.name);
    }

    // The tool calls, made on tasks of their own, are still the run's children.
    for tool in ["kb_lookup", "kb_history"] {
        let call = named(&spans, &format!("execute_tool {tool}"));
        assert_eq!(call.len(), 1, "{tool}");
        assert_eq!(call[0].parent_span_id, run.span_context.span_id(), "{tool}");
    }
    let call_ids: Vec<String> = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool"))
        .map(|s| string(s, names::GEN_AI_TOOL_CALL_ID))
        .collect();
    assert!(call_ids.contains(&"call-a".to_string()), "{call_ids:?}");
    assert!(call_ids.contains(&"call-b".to_string()), "{call_ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_model_request_is_a_client_chat_span_with_the_usage_it_reported() {
    let fx = fixture(true, vec![two_calls(), answer()]);
    fx.ask().await;
    let spans = fx.finished();
    let run = named(&spans, "invoke_agent toolgate")[0];
    let mut chats = named(&spans, "chat scripted");
    chats.sort_by_key(|s| s.start_time);
    assert_eq!(chats.len(), 2);
    for chat in &chats {
        assert_eq!(chat.span_kind, SpanKind::Client);
        assert_eq!(chat.parent_span_id, run.span_context.span_id());
        assert_eq!(string(chat, names::GEN_AI_OPERATION_NAME), "chat");
        assert_eq!(string(chat, names::GEN_AI_PROVIDER_NAME), "scripted");
        assert_eq!(string(chat, names::GEN_AI_REQUEST_MODEL), "scripted");
        assert_eq!(
            string(chat, names::GEN_AI_RESPONSE_MODEL),
            "scripted-2026-01"
        );
        assert_eq!(chat.status, Status::Unset);
    }
    let (first, second) = (chats[0], chats[1]);
    assert_eq!(
        attribute(first, names::GEN_AI_USAGE_INPUT_TOKENS),
        Some(Value::I64(120))
    );
    assert_eq!(
        attribute(first, names::GEN_AI_USAGE_OUTPUT_TOKENS),
        Some(Value::I64(30))
    );
    assert_eq!(
        attribute(first, names::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        Some(Value::I64(80))
    );
    assert_eq!(
        string(first, names::GEN_AI_RESPONSE_FINISH_REASONS),
        "[\"tool_use\"]"
    );
    assert_eq!(
        attribute(second, names::GEN_AI_USAGE_INPUT_TOKENS),
        Some(Value::I64(200))
    );
    assert_eq!(
        attribute(second, names::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        None,
        "no cached tokens reported, none claimed"
    );
    assert_eq!(
        string(second, names::GEN_AI_RESPONSE_FINISH_REASONS),
        "[\"end_turn\"]"
    );

    // The span and the `model_turn` line say the same.
    let turns = fx.trace.of_kind("model_turn");
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["gen_ai.usage.input_tokens"], 120);
    assert_eq!(turns[0]["gen_ai.response.model"], "scripted-2026-01");
    // The conversation's text stays off every span.
    let shown = format!("{spans:?}");
    for text in ["what is the budget", "The budget is 42", "it is 42"] {
        assert!(!shown.contains(text), "`{text}` reached a span");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_recorded_by_type_and_each_request_by_its_duration() {
    let fx = fixture(true, vec![two_calls(), answer()]);
    fx.ask().await;
    let tokens = fx.histogram(names::METRIC_TOKEN_USAGE);
    let of_type = |kind: &'static str| {
        let wanted = KeyValue::new(names::GEN_AI_TOKEN_TYPE, kind);
        let points: Vec<_> = tokens
            .iter()
            .filter(|(a, _, _)| a.contains(&wanted))
            .collect();
        assert_eq!(points.len(), 1, "{kind}: {tokens:?}");
        let (attributes, count, sum) = points[0];
        assert!(attributes.contains(&KeyValue::new(names::GEN_AI_REQUEST_MODEL, "scripted")));
        assert!(attributes.contains(&KeyValue::new(names::GEN_AI_PROVIDER_NAME, "scripted")));
        (*count, *sum)
    };
    assert_eq!(of_type("input"), (2, 320.0));
    assert_eq!(of_type("output"), (2, 42.0));
    let durations = fx.histogram(names::METRIC_MODEL_DURATION);
    assert_eq!(
        durations.iter().map(|(_, c, _)| c).sum::<u64>(),
        2,
        "{durations:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_model_request_is_an_error_span_and_the_run_names_its_stop() {
    // The script has one turn: the second request fails.
    let fx = fixture(true, vec![two_calls()]);
    let result = fx.ask().await;
    assert!(
        matches!(result.stop, StopCause::ModelError { .. }),
        "{:?}",
        result.stop
    );
    let spans = fx.finished();
    let mut chats = named(&spans, "chat scripted");
    chats.sort_by_key(|s| s.start_time);
    let failed = chats[1];
    assert_eq!(string(failed, names::ERROR_TYPE), "engine");
    assert_eq!(failed.status, Status::error("engine"));
    assert_eq!(attribute(failed, names::GEN_AI_USAGE_INPUT_TOKENS), None);
    let run = named(&spans, "invoke_agent toolgate")[0];
    assert_eq!(string(run, names::ERROR_TYPE), "model_error");
    assert_eq!(run.status, Status::error("model_error"));
    let durations = fx.histogram(names::METRIC_MODEL_DURATION);
    assert!(
        durations
            .iter()
            .any(|(a, c, _)| *c == 1 && a.contains(&KeyValue::new(names::ERROR_TYPE, "engine"))),
        "{durations:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_telemetry_off_a_run_makes_no_span_and_no_metric_and_its_trace_is_unchanged() {
    let off = fixture(false, vec![two_calls(), answer()]);
    let on = fixture(true, vec![two_calls(), answer()]);
    let (quiet, traced) = (off.ask().await, on.ask().await);
    assert!(off.finished().is_empty());
    assert!(off.histogram(names::METRIC_TOKEN_USAGE).is_empty());
    assert!(off.histogram(names::METRIC_MODEL_DURATION).is_empty());
    assert_eq!(quiet.stop, traced.stop);
    assert_eq!(quiet.answer, traced.answer);
    assert_eq!(quiet.usage, traced.usage);
    let kinds = |fx: &Fixture| -> Vec<String> {
        fx.trace
            .events()
            .iter()
            .map(|l| l["event"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(
        kinds(&off),
        kinds(&on),
        "the JSONL trace is the same either way"
    );
}
