//! The loop's OpenTelemetry spans and metrics, through the telemetry of the loop's dispatcher
//! (`Dispatcher::telemetry`), so a conversation is one trace.
//!
//! Guarantees:
//! - Off (the dispatcher's telemetry off), each place below is one branch and nothing is built:
//!   no span, no attribute, no context attached; the loop runs exactly as without telemetry.
//! - On, a run is one `INTERNAL` span, `invoke_agent toolgate` as the GenAI semantic
//!   conventions name an agent's invocation, with `gen_ai.conversation.id` the run id, child of
//!   the span current where the run was asked for. Every model request and every call through
//!   the dispatcher (the preload, the read-first call, each turn's calls, those run in parallel
//!   on tasks of their own included) runs under its context, so their spans are its children.
//! - Each model request is one `CLIENT` span, `chat {model}`, whose attributes after the answer
//!   are made from the same [`ModelTurn`] the `model_turn` trace line is made from
//!   ([`chat_end_attributes`]): the response model, the token usage (cached input tokens when
//!   the adapter reports any), the finish reason; a failed request ends with `error.type`
//!   ([`llm_error_type`]) and an error status. Tokens per request (input and output, by
//!   `gen_ai.token.type`) and each request's duration are recorded as the GenAI client
//!   metrics.
//! - A run that stops without a final answer ends its span with `error.type` naming the stop
//!   ([`stop_error_type`]).
//!
//! What it refuses: the conversation's text (the prompt, the answer, tool arguments and
//! results) is never put on a span.

use std::time::Duration;

use opentelemetry::trace::{SpanKind, Status, TraceContextExt};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use toolgate_core::telemetry::{Telemetry, names};
use toolgate_llm::{LlmError, StopReason};

use super::result::StopCause;
use super::trace::ModelTurn;
use super::{Agent, RunResult};

/// The agent's name in span names (`invoke_agent toolgate`).
pub const AGENT_NAME: &str = "toolgate";

/// A model's provider and model, from the name it gives itself (`anthropic:claude-…`,
/// `openai-responses:gpt-…`, `embedded:qwen2.5-coder-1.5b`): the provider as the GenAI
/// conventions name it where they do (both OpenAI APIs are `openai`), else the adapter's own
/// prefix; a name with no prefix is both. Pure.
pub fn provider_and_model(name: &str) -> (String, String) {
    let (prefix, model) = name.split_once(':').unwrap_or((name, name));
    let provider = match prefix {
        "openai" | "openai-responses" => "openai",
        other => other,
    };
    (provider.to_string(), model.to_string())
}

/// The class of a failed model request, for `error.type`: the HTTP status when the provider
/// answered with one, else the kind of failure. Never the error's text. Pure.
pub fn llm_error_type(error: &LlmError) -> String {
    match error {
        LlmError::Status { status, .. } => status.to_string(),
        LlmError::Transport(_) => "transport".into(),
        LlmError::Decode(_) => "decode".into(),
        LlmError::Config(_) => "config".into(),
        LlmError::Engine(_) => "engine".into(),
    }
}

/// The finish reason as the `model_turn` trace line writes it (a reason this crate does not
/// know, verbatim). Pure.
pub fn finish_reason(reason: &StopReason) -> String {
    match reason {
        StopReason::EndTurn => "end_turn".into(),
        StopReason::ToolUse => "tool_use".into(),
        StopReason::MaxTokens => "max_tokens".into(),
        StopReason::StopSequence => "stop_sequence".into(),
        StopReason::Refusal => "refusal".into(),
        StopReason::Other(other) => other.clone(),
    }
}

/// `error.type` of a run that stopped without a final answer; `None` for a final answer. Pure.
pub fn stop_error_type(stop: &StopCause) -> Option<&'static str> {
    match stop {
        StopCause::FinalAnswer => None,
        StopCause::RoundCap { .. } => Some("round_cap"),
        StopCause::TokenBudget { .. } => Some("token_budget"),
        StopCause::BudgetExhausted { .. } => Some("budget_exhausted"),
        StopCause::ModelError { .. } => Some("model_error"),
    }
}

/// The attributes a chat span ends with, from the turn the trace line records. Pure.
pub fn chat_end_attributes(turn: &ModelTurn) -> Vec<KeyValue> {
    let Ok(summary) = &turn.outcome else {
        return Vec::new();
    };
    let mut attributes = vec![
        KeyValue::new(
            names::GEN_AI_USAGE_INPUT_TOKENS,
            summary.usage.input_tokens as i64,
        ),
        KeyValue::new(
            names::GEN_AI_USAGE_OUTPUT_TOKENS,
            summary.usage.output_tokens as i64,
        ),
        KeyValue::new(
            names::GEN_AI_RESPONSE_FINISH_REASONS,
            Value::Array(Array::String(vec![StringValue::from(finish_reason(
                &summary.finish_reason,
            ))])),
        ),
    ];
    if !summary.response_model.is_empty() {
        attributes.push(KeyValue::new(
            names::GEN_AI_RESPONSE_MODEL,
            summary.response_model.clone(),
        ));
    }
    if summary.usage.cached_input_tokens > 0 {
        attributes.push(KeyValue::new(
            names::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
            summary.usage.cached_input_tokens as i64,
        ));
    }
    attributes
}

/// A model request's span, begun.
pub(super) struct ChatSpan {
    cx: Context,
    provider: String,
    model: String,
}

impl ChatSpan {
    /// The context the request runs under.
    pub(super) fn context(&self) -> Context {
        self.cx.clone()
    }
}

impl Agent {
    fn telemetry(&self) -> &Telemetry {
        self.caller.dispatcher().telemetry()
    }

    /// The run's span, child of the current span; `None` when off.
    pub(super) fn start_run_span(&self, run_id: &str) -> Option<Context> {
        let telemetry = self.telemetry();
        if !telemetry.is_on() {
            return None;
        }
        let (provider, model) = provider_and_model(&self.model.name());
        telemetry.start_span(
            format!("invoke_agent {AGENT_NAME}"),
            SpanKind::Internal,
            vec![
                KeyValue::new(names::GEN_AI_OPERATION_NAME, "invoke_agent"),
                KeyValue::new(names::GEN_AI_CONVERSATION_ID, run_id.to_string()),
                KeyValue::new(names::GEN_AI_PROVIDER_NAME, provider),
                KeyValue::new(names::GEN_AI_REQUEST_MODEL, model),
            ],
            &Context::current(),
        )
    }

    /// Ends the run's span with the run's token usage and, without a final answer, its stop.
    pub(super) fn end_run_span(&self, cx: &Context, result: &RunResult) {
        let span = cx.span();
        span.set_attributes([
            KeyValue::new(
                names::GEN_AI_USAGE_INPUT_TOKENS,
                result.usage.input_tokens as i64,
            ),
            KeyValue::new(
                names::GEN_AI_USAGE_OUTPUT_TOKENS,
                result.usage.output_tokens as i64,
            ),
        ]);
        if let Some(kind) = stop_error_type(&result.stop) {
            span.set_attribute(KeyValue::new(names::ERROR_TYPE, kind));
            span.set_status(Status::error(kind));
        }
        span.end();
    }

    /// A model request's span, child of the current span (the run's); `None` when off.
    pub(super) fn start_chat_span(&self) -> Option<ChatSpan> {
        let telemetry = self.telemetry();
        if !telemetry.is_on() {
            return None;
        }
        let (provider, model) = provider_and_model(&self.model.name());
        let cx = telemetry.start_span(
            format!("chat {model}"),
            SpanKind::Client,
            vec![
                KeyValue::new(names::GEN_AI_OPERATION_NAME, "chat"),
                KeyValue::new(names::GEN_AI_PROVIDER_NAME, provider.clone()),
                KeyValue::new(names::GEN_AI_REQUEST_MODEL, model.clone()),
            ],
            &Context::current(),
        )?;
        Some(ChatSpan {
            cx,
            provider,
            model,
        })
    }

    /// Ends a model request's span from its traced turn, and records its tokens and duration.
    pub(super) fn end_chat_span(
        &self,
        chat: ChatSpan,
        turn: &ModelTurn,
        error: Option<&LlmError>,
        elapsed: Duration,
    ) {
        let Some(instruments) = self.telemetry().instruments() else {
            return;
        };
        let span = chat.cx.span();
        span.set_attributes(chat_end_attributes(turn));
        let mut common = vec![
            KeyValue::new(names::GEN_AI_OPERATION_NAME, "chat"),
            KeyValue::new(names::GEN_AI_PROVIDER_NAME, chat.provider),
            KeyValue::new(names::GEN_AI_REQUEST_MODEL, chat.model),
        ];
        if let Some(error) = error {
            let kind = llm_error_type(error);
            span.set_attribute(KeyValue::new(names::ERROR_TYPE, kind.clone()));
            span.set_status(Status::error(kind.clone()));
            common.push(KeyValue::new(names::ERROR_TYPE, kind));
        }
        span.end();
        instruments
            .model_duration
            .record(elapsed.as_secs_f64(), &common);
        if let Ok(summary) = &turn.outcome {
            for (kind, tokens) in [
                ("input", summary.usage.input_tokens),
                ("output", summary.usage.output_tokens),
            ] {
                let mut attributes = common.clone();
                attributes.push(KeyValue::new(names::GEN_AI_TOKEN_TYPE, kind));
                instruments.token_usage.record(tokens, &attributes);
            }
        }
    }
}

#[cfg(test)]
#[path = "telemetry_tests.rs"]
mod tests;
