//! OpenTelemetry spans and metrics for the call path, through the OpenTelemetry API only.
//!
//! Guarantees:
//! - Off ([`Telemetry::off`], the default) costs one branch per call: no span is started, no
//!   attribute is built and no context is attached.
//! - On, every call through the dispatcher is one span, `execute_tool {tool}` as the GenAI
//!   semantic conventions name it, started as a child of the span current where the call was
//!   made (an MCP request's server span, the enclosing call for a nested call or a
//!   `code_execution` child) and ended with the attributes of the call's decision record
//!   ([`call_span_attributes`]). It carries the same `gen_ai.tool.call.id` as the JSONL trace's
//!   line, so the two join.
//! - Approvals are events on that span (`toolgate.approval.asked`, `.answered`, `.expired`).
//! - Argument values are not put on a span unless [`TelemetryOptions::record_arguments`] is
//!   set, and then only the redacted arguments the decision record carries; an idempotency key
//!   is hashed; secrets never reach a span.
//!
//! What it refuses: nothing at call time. Export (batching, the OTLP endpoint, dropping when the
//! collector is slow) belongs to the `toolgate-telemetry` crate, which builds a [`Telemetry`]
//! from `[telemetry]`; this layer depends on the API alone, so the core carries no SDK.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter, UpDownCounter};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};

use crate::call::{ApprovalRecord, DecisionRecord, Outcome};
use crate::canonical::sha256_hex;

/// Attribute and metric names: the OpenTelemetry semantic conventions' where they exist
/// (GenAI, MCP, JSON-RPC, error), `toolgate.*` for what only toolgate decides.
pub mod names {
    pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
    pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
    pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
    pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
    pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
    pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
    pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    pub const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
    pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
    pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
    pub const MCP_METHOD_NAME: &str = "mcp.method.name";
    pub const MCP_SESSION_ID: &str = "mcp.session.id";
    pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
    pub const MCP_RESOURCE_URI: &str = "mcp.resource.uri";
    pub const GEN_AI_PROMPT_NAME: &str = "gen_ai.prompt.name";
    pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
    pub const NETWORK_TRANSPORT: &str = "network.transport";
    pub const SERVER_ADDRESS: &str = "server.address";
    pub const ERROR_TYPE: &str = "error.type";

    pub const TOOL_VERSION: &str = "toolgate.tool.version";
    pub const CATALOGUE_DIGEST: &str = "toolgate.catalogue.digest";
    pub const RISK: &str = "toolgate.risk";
    pub const EFFECT: &str = "toolgate.effect";
    pub const MODE: &str = "toolgate.mode";
    pub const DECISION: &str = "toolgate.decision";
    pub const STAGE: &str = "toolgate.stage";
    pub const APPROVAL: &str = "toolgate.approval";
    pub const APPROVAL_VIA: &str = "toolgate.approval.via";
    pub const APPROVAL_DENIAL: &str = "toolgate.approval.denial";
    pub const APPROVAL_CHANNEL: &str = "toolgate.approval.channel";
    pub const DECIDED_BY: &str = "toolgate.approval.decided_by";
    pub const IDEMPOTENCY_KEY_HASH: &str = "toolgate.idempotency_key.hash";
    pub const DUPLICATE: &str = "toolgate.duplicate";
    pub const RECEIPT_ID: &str = "toolgate.receipt.id";
    pub const RECEIPT_KEY_ID: &str = "toolgate.receipt.key_id";
    pub const TAINT_COUNT: &str = "toolgate.taint.count";
    pub const TAINT_ARGUMENTS: &str = "toolgate.taint.arguments";
    pub const TAINT_RULE: &str = "toolgate.taint.rule";
    pub const ORIGIN: &str = "toolgate.origin";
    pub const PARENT_CALL_ID: &str = "toolgate.parent_call.id";
    pub const RUN_ID: &str = "toolgate.run.id";
    pub const PRINCIPAL: &str = "toolgate.principal";
    pub const TENANT: &str = "toolgate.tenant";
    pub const BYTES_IN: &str = "toolgate.bytes_in";
    pub const BYTES_OUT: &str = "toolgate.bytes_out";
    pub const TRUNCATED: &str = "toolgate.truncated";
    pub const REDACTIONS: &str = "toolgate.redactions";
    pub const NESTED_WRITES: &str = "toolgate.nested_writes";
    pub const ARGUMENTS: &str = "toolgate.arguments";
    pub const EGRESS_HOST: &str = "toolgate.egress.host";
    pub const EGRESS_RULE: &str = "toolgate.egress.rule";
    pub const EGRESS_ALLOWED: &str = "toolgate.egress.allowed";
    pub const EGRESS_BLOCK: &str = "toolgate.egress.block";
    pub const EGRESS_HOPS: &str = "toolgate.egress.hops";
    pub const UPSTREAM: &str = "toolgate.upstream";
    pub const UPSTREAM_STATE: &str = "toolgate.upstream.state";

    pub const EVENT_APPROVAL_ASKED: &str = "toolgate.approval.asked";
    pub const EVENT_APPROVAL_ANSWERED: &str = "toolgate.approval.answered";
    pub const EVENT_APPROVAL_EXPIRED: &str = "toolgate.approval.expired";

    pub const METRIC_CALL_DURATION: &str = "toolgate.tool.call.duration";
    pub const METRIC_APPROVALS_PENDING: &str = "toolgate.approvals.pending";
    pub const METRIC_APPROVAL_WAIT: &str = "toolgate.approval.wait.duration";
    pub const METRIC_APPROVAL_TICKETS_OPEN: &str = "toolgate.approval.tickets.open";
    pub const APPROVAL_TICKET_KIND: &str = "toolgate.approval.ticket.kind";
    pub const METRIC_EGRESS_BLOCKS: &str = "toolgate.egress.blocks";
    pub const METRIC_UPSTREAM_STATE: &str = "toolgate.upstream.state";
    pub const METRIC_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
    pub const METRIC_MODEL_DURATION: &str = "gen_ai.client.operation.duration";
    pub const METRIC_MCP_SERVER_DURATION: &str = "mcp.server.operation.duration";
    pub const METRIC_MCP_CLIENT_DURATION: &str = "mcp.client.operation.duration";
}

/// What a span may carry beyond the decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TelemetryOptions {
    /// Put the call's redacted arguments on its span (`toolgate.arguments`). Off by default:
    /// arguments are the user's data.
    pub record_arguments: bool,
}

/// The tracer and instruments every layer records through; cheap to clone. Off by default.
#[derive(Clone, Default)]
pub struct Telemetry {
    active: Option<Arc<Active>>,
}

struct Active {
    tracer: opentelemetry::global::BoxedTracer,
    instruments: Instruments,
    options: TelemetryOptions,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("on", &self.is_on())
            .finish()
    }
}

/// The metric instruments, created once from a [`Meter`].
pub struct Instruments {
    /// Seconds per call through the dispatcher, by tool and decision.
    pub call_duration: Histogram<f64>,
    /// People being asked right now (an approval a call waits on).
    pub approvals_pending: UpDownCounter<i64>,
    /// Seconds from asking a person to their answer (or the timeout), by outcome.
    pub approval_wait: Histogram<f64>,
    /// Outbound requests the egress exit refused, by rule.
    pub egress_blocks: Counter<u64>,
    /// An imported server's state (1 for the state named by `toolgate.upstream.state`, 0 for
    /// the others it left).
    pub upstream_state: Gauge<i64>,
    /// Model tokens per request, by `gen_ai.token.type` (input, output, cached input).
    pub token_usage: Histogram<u64>,
    /// Seconds per model request.
    pub model_duration: Histogram<f64>,
    /// Seconds per MCP request served.
    pub mcp_server_duration: Histogram<f64>,
    /// Seconds per MCP request sent upstream.
    pub mcp_client_duration: Histogram<f64>,
}

impl Instruments {
    pub fn new(meter: &Meter) -> Self {
        let seconds = |name: &'static str, description: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .build()
        };
        Instruments {
            call_duration: seconds(
                names::METRIC_CALL_DURATION,
                "Duration of a tool call through the dispatcher",
            ),
            approvals_pending: meter
                .i64_up_down_counter(names::METRIC_APPROVALS_PENDING)
                .with_unit("{approval}")
                .with_description("Approvals a call is waiting on")
                .build(),
            approval_wait: seconds(
                names::METRIC_APPROVAL_WAIT,
                "Time from asking a person to their answer",
            ),
            egress_blocks: meter
                .u64_counter(names::METRIC_EGRESS_BLOCKS)
                .with_unit("{request}")
                .with_description("Outbound requests refused by the egress exit")
                .build(),
            upstream_state: meter
                .i64_gauge(names::METRIC_UPSTREAM_STATE)
                .with_unit("1")
                .with_description("Whether an imported server is in the named state")
                .build(),
            token_usage: meter
                .u64_histogram(names::METRIC_TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Tokens per model request")
                .build(),
            model_duration: seconds(names::METRIC_MODEL_DURATION, "Duration of a model request"),
            mcp_server_duration: seconds(
                names::METRIC_MCP_SERVER_DURATION,
                "Duration of an MCP request served",
            ),
            mcp_client_duration: seconds(
                names::METRIC_MCP_CLIENT_DURATION,
                "Duration of an MCP request sent to an upstream server",
            ),
        }
    }
}

impl Telemetry {
    /// Nothing recorded.
    pub fn off() -> Self {
        Telemetry { active: None }
    }

    /// Spans through `tracer`, metrics through instruments made from `meter`.
    pub fn new(
        tracer: opentelemetry::global::BoxedTracer,
        meter: &Meter,
        options: TelemetryOptions,
    ) -> Self {
        Telemetry {
            active: Some(Arc::new(Active {
                tracer,
                instruments: Instruments::new(meter),
                options,
            })),
        }
    }

    pub fn is_on(&self) -> bool {
        self.active.is_some()
    }

    /// The tracer, when on.
    pub fn tracer(&self) -> Option<&opentelemetry::global::BoxedTracer> {
        self.active.as_ref().map(|a| &a.tracer)
    }

    /// The instruments, when on.
    pub fn instruments(&self) -> Option<&Instruments> {
        self.active.as_ref().map(|a| &a.instruments)
    }

    pub fn options(&self) -> TelemetryOptions {
        self.active.as_ref().map(|a| a.options).unwrap_or_default()
    }

    /// A span named `name` of `kind`, child of `parent`, with `attributes`; the context that
    /// makes it current. `None` when off.
    pub fn start_span(
        &self,
        name: String,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
        parent: &Context,
    ) -> Option<Context> {
        let tracer = self.tracer()?;
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        Some(parent.with_span(span))
    }

    /// A span as [`Telemetry::start_span`] makes it, whose duration [`TimedSpan::end`]
    /// records in the histogram `duration` picks, with `metric_attributes`. `None` when off.
    pub fn start_timed(
        &self,
        span: (String, SpanKind, Vec<KeyValue>),
        parent: &Context,
        metric_attributes: Vec<KeyValue>,
        duration: fn(&Instruments) -> &Histogram<f64>,
    ) -> Option<TimedSpan> {
        let (name, kind, attributes) = span;
        let cx = self.start_span(name, kind, attributes, parent)?;
        Some(TimedSpan {
            telemetry: self.clone(),
            cx,
            started: std::time::Instant::now(),
            metric_attributes,
            duration,
        })
    }

    /// The span for a call about to go through the dispatcher, child of the current span.
    pub(crate) fn start_call(&self, request: &crate::call::CallRequest) -> Option<Context> {
        if !self.is_on() {
            return None;
        }
        let mut attributes = vec![
            KeyValue::new(names::GEN_AI_OPERATION_NAME, "execute_tool"),
            KeyValue::new(names::GEN_AI_TOOL_NAME, request.tool.clone()),
            KeyValue::new(names::GEN_AI_TOOL_CALL_ID, request.call_id.clone()),
            KeyValue::new(names::GEN_AI_TOOL_TYPE, "function"),
            KeyValue::new(names::ORIGIN, origin_name(request.origin)),
            KeyValue::new(names::RUN_ID, request.run_id.clone()),
        ];
        if let Some(parent) = &request.parent_call_id {
            attributes.push(KeyValue::new(names::PARENT_CALL_ID, parent.clone()));
        }
        self.start_span(
            format!("execute_tool {}", request.tool),
            SpanKind::Internal,
            attributes,
            &Context::current(),
        )
    }

    /// Ends the call's span with its decision, and records the call's duration.
    pub(crate) fn end_call(&self, span: &Context, record: &DecisionRecord) {
        let Some(active) = &self.active else {
            return;
        };
        let span_ref = span.span();
        span_ref.set_attributes(call_span_attributes(record, active.options));
        if let Outcome::Error(code) = record.outcome {
            span_ref.set_status(Status::error(code.as_str()));
        }
        span_ref.end();
        active.instruments.call_duration.record(
            record.duration_us as f64 / 1_000_000.0,
            &[
                KeyValue::new(names::GEN_AI_TOOL_NAME, record.tool.clone()),
                KeyValue::new(names::DECISION, record.outcome.as_str()),
                KeyValue::new(names::ORIGIN, origin_name(record.origin)),
            ],
        );
    }

    /// A person is being asked about the current call (`channel`: `ask` waits, `ticket` returns
    /// a ticket to answer later).
    pub(crate) fn approval_asked(&self, channel: &'static str) {
        let Some(active) = &self.active else {
            return;
        };
        Context::current().span().add_event(
            names::EVENT_APPROVAL_ASKED,
            vec![KeyValue::new(names::APPROVAL_CHANNEL, channel)],
        );
        if channel == "ask" {
            active.instruments.approvals_pending.add(1, &[]);
        }
    }

    /// The person answered (or the wait ran out): `waited` is how long the call waited, for
    /// an answer given while it waited (`ask`); `None` for a ticket's answer, brought back by
    /// a later call.
    pub(crate) fn approval_answered(
        &self,
        approval: &ApprovalRecord,
        decided_by: Option<&str>,
        waited: Option<Duration>,
    ) {
        let Some(active) = &self.active else {
            return;
        };
        let mut attributes = approval_attributes(approval);
        if let Some(person) = decided_by {
            attributes.push(KeyValue::new(names::DECIDED_BY, person.to_string()));
        }
        let expired = matches!(
            approval,
            ApprovalRecord::Denied {
                denial: crate::approval::Denial::TimedOut { .. }
            }
        );
        let event = if expired {
            names::EVENT_APPROVAL_EXPIRED
        } else {
            names::EVENT_APPROVAL_ANSWERED
        };
        Context::current().span().add_event(event, attributes);
        if let Some(waited) = waited {
            active.instruments.approvals_pending.add(-1, &[]);
            active.instruments.approval_wait.record(
                waited.as_secs_f64(),
                &[KeyValue::new(names::APPROVAL, approval_outcome(approval))],
            );
        }
    }
}

/// A request's span and its duration metric (an MCP request served or sent upstream), started
/// by [`Telemetry::start_timed`] and ended once by [`TimedSpan::end`].
pub struct TimedSpan {
    telemetry: Telemetry,
    cx: Context,
    started: std::time::Instant,
    metric_attributes: Vec<KeyValue>,
    duration: fn(&Instruments) -> &Histogram<f64>,
}

impl TimedSpan {
    /// The context that makes the span current, for the request's work.
    pub fn context(&self) -> &Context {
        &self.cx
    }

    /// Ends the span, failed with `error_type` when there is one (as `error.type` and an error
    /// status, on the span and the metric), and records the duration.
    pub fn end(mut self, error_type: Option<String>) {
        let span = self.cx.span();
        if let Some(error_type) = error_type {
            let attribute = KeyValue::new(names::ERROR_TYPE, error_type.clone());
            span.set_attribute(attribute.clone());
            span.set_status(Status::error(error_type));
            self.metric_attributes.push(attribute);
        }
        span.end();
        if let Some(instruments) = self.telemetry.instruments() {
            (self.duration)(instruments).record(
                self.started.elapsed().as_secs_f64(),
                &self.metric_attributes,
            );
        }
    }
}

fn origin_name(origin: crate::call::Origin) -> &'static str {
    use crate::call::Origin;
    match origin {
        Origin::Loop => "loop",
        Origin::Mcp => "mcp",
        Origin::Sandbox => "sandbox",
        Origin::Tool => "tool",
        Origin::Direct => "direct",
    }
}

fn approval_outcome(approval: &ApprovalRecord) -> &'static str {
    match approval {
        ApprovalRecord::NotNeeded => "not_needed",
        ApprovalRecord::Replayed => "replayed",
        ApprovalRecord::Approved { .. } => "approved",
        ApprovalRecord::Pending { .. } => "pending",
        ApprovalRecord::Denied { .. } => "denied",
    }
}

fn approval_attributes(approval: &ApprovalRecord) -> Vec<KeyValue> {
    let mut attributes = vec![KeyValue::new(names::APPROVAL, approval_outcome(approval))];
    match approval {
        ApprovalRecord::Approved { via } => attributes.push(KeyValue::new(
            names::APPROVAL_VIA,
            match via {
                crate::call::ApprovedVia::Approver => "approver",
                crate::call::ApprovedVia::Ticket => "ticket",
                crate::call::ApprovedVia::Plan => "plan",
            },
        )),
        ApprovalRecord::Denied { denial } => {
            attributes.push(KeyValue::new(names::APPROVAL_DENIAL, denial.as_str()));
        }
        ApprovalRecord::NotNeeded | ApprovalRecord::Replayed | ApprovalRecord::Pending { .. } => {}
    }
    attributes
}

/// A short, stable id for a secret-free join: the first 16 hex digits of its SHA-256.
fn short_hash(text: &str) -> String {
    let mut hex = sha256_hex(text.as_bytes());
    hex.truncate(16);
    hex
}

/// The attributes a call's span ends with: what the decision record says, under the names in
/// [`names`]. Values the record keeps for audit only (arguments, the idempotency key in clear,
/// tainted values) are left out or hashed; argument paths stay, values do not.
pub fn call_span_attributes(record: &DecisionRecord, options: TelemetryOptions) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new(names::CATALOGUE_DIGEST, record.catalogue_digest.clone()),
        KeyValue::new(names::DECISION, record.outcome.as_str()),
        KeyValue::new(names::STAGE, stage_name(record.stage)),
        KeyValue::new(
            names::MODE,
            match record.mode {
                crate::approval::Mode::Auto => "auto",
                crate::approval::Mode::Ask => "ask",
            },
        ),
        KeyValue::new(names::PRINCIPAL, record.principal.clone()),
        KeyValue::new(names::TENANT, record.tenant.clone()),
        KeyValue::new(names::DUPLICATE, record.duplicate),
        KeyValue::new(names::BYTES_IN, record.argument_bytes as i64),
        KeyValue::new(names::BYTES_OUT, record.result_bytes as i64),
        KeyValue::new(names::TRUNCATED, record.truncated),
        KeyValue::new(names::REDACTIONS, record.redactions as i64),
    ];
    attributes.extend(approval_attributes(&record.approval));
    if let Some(version) = record.tool_version {
        attributes.push(KeyValue::new(names::TOOL_VERSION, i64::from(version)));
    }
    if let Some(risk) = record.risk {
        attributes.push(KeyValue::new(names::RISK, risk.as_str()));
    }
    if let Some(effect) = record.effect {
        attributes.push(KeyValue::new(names::EFFECT, effect.as_str()));
    }
    if let Outcome::Error(code) = record.outcome {
        attributes.push(KeyValue::new(names::ERROR_TYPE, code.as_str()));
    }
    if let Some(person) = &record.decided_by {
        attributes.push(KeyValue::new(names::DECIDED_BY, person.clone()));
    }
    if let Some(key) = &record.idempotency_key {
        attributes.push(KeyValue::new(names::IDEMPOTENCY_KEY_HASH, short_hash(key)));
    }
    if let Some(receipt) = &record.receipt {
        attributes.push(KeyValue::new(
            names::RECEIPT_ID,
            short_hash(&receipt.signature),
        ));
        attributes.push(KeyValue::new(names::RECEIPT_KEY_ID, receipt.key_id.clone()));
    }
    if !record.taint.is_empty() {
        attributes.push(KeyValue::new(names::TAINT_COUNT, record.taint.len() as i64));
        let paths: Vec<StringValue> = record
            .taint
            .iter()
            .map(|t| StringValue::from(t.argument.clone()))
            .collect();
        attributes.push(KeyValue::new(
            names::TAINT_ARGUMENTS,
            Value::Array(Array::String(paths)),
        ));
    }
    if let Some(rule) = record.taint_rule {
        attributes.push(KeyValue::new(names::TAINT_RULE, rule.as_str()));
    }
    if record.nested_writes {
        attributes.push(KeyValue::new(names::NESTED_WRITES, true));
    }
    if options.record_arguments {
        attributes.push(KeyValue::new(
            names::ARGUMENTS,
            record.arguments.to_string(),
        ));
    }
    attributes
}

fn stage_name(stage: crate::call::Stage) -> &'static str {
    use crate::call::Stage;
    match stage {
        Stage::Resolve => "resolve",
        Stage::Catalogue => "catalogue",
        Stage::Validate => "validate",
        Stage::Authorize => "authorize",
        Stage::Approval => "approval",
        Stage::Idempotency => "idempotency",
        Stage::Execute => "execute",
        Stage::Observe => "observe",
        Stage::Done => "done",
    }
}

#[cfg(feature = "testing")]
#[path = "telemetry_testing.rs"]
pub mod testing;

#[cfg(test)]
#[path = "telemetry_tests.rs"]
mod tests;
