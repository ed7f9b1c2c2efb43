//! The egress exit's OpenTelemetry span and metric, made from the same [`EgressDecision`] the
//! `egress` trace line is made from, so the span and the JSONL line cannot disagree.
//!
//! Guarantees:
//! - Outside a dispatcher call, or with that call's telemetry off
//!   ([`toolgate_core::trace::current_telemetry`]), [`start`] is one branch and nothing is built:
//!   no span, no attribute, no timestamp.
//! - On, every decision is one span named `egress {host}`, a child of the span current where the
//!   request was made (the `execute_tool` span of the call whose handler asked). It is `CLIENT`
//!   when the exit let the request out and `INTERNAL` when it refused it; it starts when the
//!   request was asked for and ends when the final response's headers arrived, or when the
//!   request was refused or failed.
//! - Its attributes ([`span_attributes`]) are the decision's: the host, the rule, whether it was
//!   allowed, the block (when refused), the hop chain as hosts, and `error.type` with an error
//!   status when refused or failed.
//! - A refused request adds one to `toolgate.egress.blocks`, by rule.
//!
//! What it refuses: a path, a query, userinfo, a resolved address, a recipient or a failure's
//! text never reach a span or a metric (URLs and mail can carry the user's data); hosts only.

use std::time::SystemTime;

use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use toolgate_core::telemetry::{Telemetry, names};

use crate::fetch::raw_host_of;
use crate::trace_event::{Decision, EgressDecision, Request};

/// A decision's span, begun: where and when the request was asked for. Built only with
/// telemetry on.
#[derive(Debug)]
pub(crate) struct EgressSpan {
    telemetry: Telemetry,
    parent: Context,
    started: SystemTime,
    answered: Option<SystemTime>,
}

/// The span of a request being asked for now, when the current call's telemetry is on.
pub(crate) fn start() -> Option<EgressSpan> {
    let telemetry = toolgate_core::trace::current_telemetry();
    if !telemetry.is_on() {
        return None;
    }
    Some(EgressSpan {
        telemetry,
        parent: Context::current(),
        started: SystemTime::now(),
        answered: None,
    })
}

impl EgressSpan {
    /// A response's headers arrived (the last call before [`EgressSpan::end`] is the final
    /// response's).
    pub(crate) fn answered(&mut self) {
        self.answered = Some(SystemTime::now());
    }

    /// Records the span of `decision` and, for a refusal, counts the block.
    pub(crate) fn end(self, decision: &EgressDecision) {
        let (Some(tracer), Some(instruments)) =
            (self.telemetry.tracer(), self.telemetry.instruments())
        else {
            return;
        };
        let succeeded = decision.decision == Decision::Allowed && decision.error.is_none();
        let ended = match self.answered {
            Some(at) if succeeded => at,
            _ => SystemTime::now(),
        };
        let builder = tracer
            .span_builder(span_name(decision))
            .with_kind(span_kind(decision))
            .with_start_time(self.started)
            .with_attributes(span_attributes(decision));
        let mut span = tracer.build_with_context(builder, &self.parent);
        if let Some(kind) = error_type(decision) {
            span.set_status(Status::error(kind.to_string()));
        }
        span.end_with_timestamp(ended);
        if decision.decision == Decision::Blocked {
            let rule = decision.rule.clone().unwrap_or_default();
            instruments
                .egress_blocks
                .add(1, &[KeyValue::new(names::EGRESS_RULE, rule)]);
        }
    }
}

/// The host the decision is about: the last hop's for a web request, the relay's for mail.
fn host_of(decision: &EgressDecision) -> Option<&str> {
    match &decision.request {
        Request::Http { host, .. } => host.as_deref(),
        Request::Smtp { host, .. } => Some(host),
    }
}

/// `egress {host}`; just `egress` for a URL with no host to name. Pure.
pub fn span_name(decision: &EgressDecision) -> String {
    match host_of(decision) {
        Some(host) => format!("egress {host}"),
        None => "egress".to_string(),
    }
}

/// `CLIENT` when the exit let the request out, `INTERNAL` when it refused it. Pure.
pub fn span_kind(decision: &EgressDecision) -> SpanKind {
    match decision.decision {
        Decision::Allowed => SpanKind::Client,
        Decision::Blocked => SpanKind::Internal,
    }
}

/// The rule that refused the request, or the kind of failure of one let out. Pure.
pub fn error_type(decision: &EgressDecision) -> Option<&str> {
    match decision.decision {
        Decision::Blocked => Some(decision.rule.as_deref().unwrap_or("blocked")),
        Decision::Allowed => decision.error.as_ref().map(|e| e.kind.as_str()),
    }
}

/// The span's attributes: what the decision records, hosts only. Pure.
pub fn span_attributes(decision: &EgressDecision) -> Vec<KeyValue> {
    let allowed = decision.decision == Decision::Allowed;
    let mut attributes = vec![KeyValue::new(names::EGRESS_ALLOWED, allowed)];
    if let Some(host) = host_of(decision) {
        attributes.push(KeyValue::new(names::EGRESS_HOST, host.to_string()));
    }
    if let Some(rule) = &decision.rule {
        attributes.push(KeyValue::new(names::EGRESS_RULE, rule.clone()));
        if !allowed {
            attributes.push(KeyValue::new(names::EGRESS_BLOCK, rule.clone()));
        }
    }
    if let Request::Http { hops, .. } = &decision.request {
        let hosts: Vec<StringValue> = hops
            .iter()
            .filter_map(|hop| raw_host_of(hop))
            .map(StringValue::from)
            .collect();
        attributes.push(KeyValue::new(
            names::EGRESS_HOPS,
            Value::Array(Array::String(hosts)),
        ));
    }
    if let Some(kind) = error_type(decision) {
        attributes.push(KeyValue::new(names::ERROR_TYPE, kind.to_string()));
    }
    attributes
}

#[cfg(test)]
#[path = "telemetry_tests.rs"]
mod tests;
