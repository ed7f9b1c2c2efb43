//! The one call path. Every call, from our loop, an MCP host or the sandbox, goes through
//! [`Dispatcher::call`], in this order:
//!
//! 1. resolve the name (unknown: `not_found` with the closest names the caller may see);
//! 2. catalogue: unauthenticated is `unauthorized`; a tool outside the caller's catalogue is
//!    `forbidden`, even when named;
//! 3. validate against the closed schema, then the tool's semantic check;
//! 4. authorize scopes;
//! 5. approval by risk and mode, bound to (tool, version, canonical arguments, principal); a
//!    write whose receipt is already recorded under its idempotency key (and whose tool lets
//!    the dispatcher read its receipts) replays that receipt instead: its handler is not called
//!    and no human is asked, because nothing will happen again;
//! 6. idempotency key for writes;
//! 7. execute under the deadline, cancellable (as is the wait for an approval);
//! 8. observation: redacted, bounded, provenance attached.
//!
//! Guarantees: exactly one decision record per call, emitted to the trace; a refused call never
//! reaches its handler (nor does one canceled before it starts); failures, a panicking handler
//! included, come back as a [`ToolError`] result, never as a panic; no secret-shaped text in the
//! arguments reaches the record or an error.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use crate::approval::{
    ApprovalAnswer, ApprovalLedger, ApprovalRequest, Approver, Mode, approval_needed, binding_hash,
    bound_value,
};
use crate::cancel::CancelToken;
use crate::canonical::{canonical_json, digest_parts};
use crate::clock::{Clock, SystemClock, unix_secs};
use crate::error::{ErrorCode, ErrorStyle, ToolError};
use crate::idempotency::{IdempotencyKey, Receipt, ReceiptLog};
use crate::observation::{self, Observation, Provenance};
use crate::principal::Principal;
use crate::registry::Registry;
use crate::schema::{self, Violation, ViolationKind};
use crate::spec::{Effect, Risk, ToolSpec};
use crate::tool::{BoxFuture, CheckFacts, ExecContext, Output, Tool, WriteOutput};
use crate::trace::{NoTrace, TraceSink};

/// One call, as the caller presents it.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The caller's id for this call (a model's `tool_use` id); echoed in the record.
    pub call_id: String,
    pub run_id: String,
    pub principal: Principal,
    pub tool: String,
    pub arguments: Value,
    /// A caller-chosen idempotency key for writes; derived from the run otherwise.
    pub idempotency_key: Option<String>,
    /// An approval issued earlier through the [`ApprovalLedger`].
    pub approval_token: Option<String>,
    pub cancel: CancelToken,
}

static CALL_COUNTER: AtomicU64 = AtomicU64::new(1);

impl CallRequest {
    pub fn new(principal: Principal, tool: &str, arguments: Value) -> Self {
        CallRequest {
            call_id: format!("call-{}", CALL_COUNTER.fetch_add(1, Ordering::Relaxed)),
            run_id: "run-default".into(),
            principal,
            tool: tool.into(),
            arguments,
            idempotency_key: None,
            approval_token: None,
            cancel: CancelToken::new(),
        }
    }

    pub fn with_run(mut self, run_id: &str) -> Self {
        self.run_id = run_id.into();
        self
    }

    pub fn with_call_id(mut self, call_id: &str) -> Self {
        self.call_id = call_id.into();
        self
    }

    pub fn with_idempotency_key(mut self, key: &str) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    pub fn with_approval_token(mut self, token: &str) -> Self {
        self.approval_token = Some(token.into());
        self
    }

    pub fn with_cancel(mut self, cancel: CancelToken) -> Self {
        self.cancel = cancel;
        self
    }
}

/// The step a call reached (where it stopped, if it failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Resolve,
    Catalogue,
    Validate,
    Authorize,
    Approval,
    Idempotency,
    Execute,
    Observe,
    Done,
}

/// How approval went for this call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ApprovalRecord {
    NotNeeded,
    /// The same call already happened (its receipt is recorded): it replays, nothing runs, and
    /// no human is asked about an effect that will not happen again.
    Replayed,
    Approved {
        via: &'static str,
    },
    Denied {
        reason: String,
    },
}

/// One record per call: what was asked, what was decided, what happened.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionRecord {
    #[serde(rename = "gen_ai.operation.name")]
    pub operation: &'static str,
    #[serde(rename = "gen_ai.tool.call.id")]
    pub call_id: String,
    #[serde(rename = "gen_ai.tool.name")]
    pub tool: String,
    pub tool_version: Option<u32>,
    pub run_id: String,
    pub principal: String,
    pub tenant: String,
    /// The arguments, redacted.
    pub arguments: Value,
    pub args_hash: String,
    pub risk: Option<Risk>,
    pub effect: Option<Effect>,
    pub mode: Mode,
    pub stage: Stage,
    /// `ok`, or the error code.
    pub outcome: String,
    #[serde(rename = "error.type", skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorCode>,
    pub approval: ApprovalRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    pub duplicate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<Value>,
    pub duration_us: u64,
    pub result_bytes: usize,
    pub truncated: bool,
    pub redactions: usize,
}

/// What the caller gets back.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub result: Result<Observation, ToolError>,
    pub record: DecisionRecord,
    pub error_style: ErrorStyle,
}

impl CallOutcome {
    pub fn is_error(&self) -> bool {
        self.result.is_err()
    }

    /// The tool result as a model reads it (an error is an ordinary result with `is_error`).
    pub fn model_value(&self) -> Value {
        match &self.result {
            Ok(observation) => observation.to_model_value(),
            Err(error) => error.to_model_value(self.error_style),
        }
    }

    /// [`Self::model_value`] as compact text.
    pub fn model_text(&self) -> String {
        match self.model_value() {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }
}

/// How long a human has to answer, and how long an out-of-band approval stays valid.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Dispatcher {
    registry: Arc<Registry>,
    approver: Option<Arc<dyn Approver>>,
    ledger: Arc<ApprovalLedger>,
    clock: Arc<dyn Clock>,
    trace: Arc<dyn TraceSink>,
    mode: Mode,
    approval_timeout: Duration,
}

impl Dispatcher {
    /// A dispatcher in `auto` mode with no approver (so every call that needs approval is
    /// denied), the system clock and no trace.
    pub fn new(registry: Arc<Registry>) -> Self {
        Dispatcher {
            registry,
            approver: None,
            ledger: Arc::new(ApprovalLedger::new()),
            clock: Arc::new(SystemClock),
            trace: Arc::new(NoTrace),
            mode: Mode::Auto,
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
        }
    }

    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    pub fn with_trace(mut self, trace: Arc<dyn TraceSink>) -> Self {
        self.trace = trace;
        self
    }

    pub fn with_ledger(mut self, ledger: Arc<ApprovalLedger>) -> Self {
        self.ledger = ledger;
        self
    }

    pub fn with_approval_timeout(mut self, timeout: Duration) -> Self {
        self.approval_timeout = timeout;
        self
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn ledger(&self) -> &ApprovalLedger {
        &self.ledger
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The approval binding a call would need, for issuing an out-of-band approval.
    pub fn binding_for(
        &self,
        principal: &Principal,
        tool: &str,
        arguments: &Value,
    ) -> Option<String> {
        let tool = self.registry.get(tool)?;
        let preview = tool.handler.preview(arguments).ok()?;
        Some(binding_hash(
            &tool.spec.name,
            tool.spec.version,
            &bound_value(arguments, preview.as_ref()),
            &principal.id,
        ))
    }

    /// Runs one call through every step; see the module documentation.
    pub async fn call(&self, request: CallRequest) -> CallOutcome {
        let started = Instant::now();
        let mut arguments = request.arguments.clone();
        observation::redact_value(&mut arguments);
        let canonical = canonical_json(&request.arguments);
        let mut record = DecisionRecord {
            operation: "execute_tool",
            call_id: request.call_id.clone(),
            tool: request.tool.clone(),
            tool_version: None,
            run_id: request.run_id.clone(),
            principal: request.principal.id.clone(),
            tenant: request.principal.tenant.clone(),
            arguments,
            args_hash: digest_parts(&[&canonical]),
            risk: None,
            effect: None,
            mode: self.mode,
            stage: Stage::Resolve,
            outcome: String::new(),
            error: None,
            approval: ApprovalRecord::NotNeeded,
            idempotency_key: None,
            duplicate: false,
            undo: None,
            duration_us: 0,
            result_bytes: 0,
            truncated: false,
            redactions: 0,
        };
        let tool = self.registry.get(&request.tool);
        let error_style = tool.map_or(ErrorStyle::Teaching, |t| t.spec.observation.error_style);
        let mut result = self.run(&request, tool, &canonical, &mut record).await;
        if let Err(error) = &mut result {
            // Errors quote what they were given (received values, examples, handler messages),
            // and what they were given can be a secret.
            record.redactions += redact_error(error);
        }
        record.duration_us = started.elapsed().as_micros() as u64;
        match &result {
            Ok(obs) => {
                record.stage = Stage::Done;
                record.outcome = "ok".into();
                record.truncated = obs.truncated.is_some();
                record.redactions += obs.redactions;
            }
            Err(error) => {
                record.outcome = error.code.as_str().into();
                record.error = Some(error.code);
            }
        }
        record.result_bytes = match &result {
            Ok(observation) => observation.model_text_len(),
            Err(error) => match error.to_model_value(error_style) {
                Value::String(s) => s.len(),
                other => observation::serialized_len(&other),
            },
        };
        self.trace.emit(
            "tool_call",
            serde_json::to_value(&record).unwrap_or(Value::Null),
        );
        CallOutcome {
            result,
            record,
            error_style,
        }
    }

    async fn run(
        &self,
        request: &CallRequest,
        tool: Option<&Tool>,
        canonical: &str,
        record: &mut DecisionRecord,
    ) -> Result<Observation, ToolError> {
        // 1. Resolve.
        let Some(tool) = tool else {
            return Err(self.unknown_tool(&request.tool, &request.principal));
        };
        let spec = &tool.spec;
        record.tool_version = Some(spec.version);
        record.risk = Some(spec.policy.risk);
        record.effect = Some(spec.policy.effect);

        // 2. Catalogue.
        record.stage = Stage::Catalogue;
        if !request.principal.is_authenticated() {
            return Err(ToolError::new(
                ErrorCode::Unauthorized,
                "the caller is not authenticated; no tool can be called",
            ));
        }
        if !request.principal.in_catalogue(&spec.name) {
            return Err(ToolError::new(
                ErrorCode::Forbidden,
                format!("tool `{}` is not in this caller's catalogue", spec.name),
            )
            .with_hint("call only the tools you were given"));
        }

        // 3. Validate.
        record.stage = Stage::Validate;
        let today = self.clock.today();
        let mut violations = schema::validate(&spec.input_schema, &request.arguments);
        if !violations.is_empty() {
            // Redact before the values are quoted: a sentence cuts long values, and a secret cut
            // in half no longer looks like a secret.
            for violation in &mut violations {
                if let Some(received) = &mut violation.received {
                    record.redactions += observation::redact_value(received);
                }
            }
            return Err(violations_error(spec, &violations, &today));
        }
        let facts = CheckFacts {
            today: today.clone(),
        };
        catch_panic(|| tool.handler.check(&request.arguments, &facts))?;

        // 4. Authorize.
        record.stage = Stage::Authorize;
        let missing = request.principal.missing_scopes(&spec.policy.scopes);
        if !missing.is_empty() {
            return Err(ToolError::new(
                ErrorCode::Forbidden,
                format!(
                    "tool `{}` needs the scope(s) {}",
                    spec.name,
                    missing.join(", ")
                ),
            ));
        }

        // The key is derived before approval (it is pure) so that a call whose receipt already
        // exists replays instead of asking a human about an effect that will not happen again.
        let key = spec.writes().then(|| match &request.idempotency_key {
            Some(given) => {
                IdempotencyKey::given(given, &request.principal.id, &spec.name, canonical)
            }
            None => IdempotencyKey::derived(&request.run_id, &spec.name, canonical),
        });

        // 5. Approval.
        record.stage = Stage::Approval;
        let replay = match (&tool.receipts, &key) {
            (Some(log), Some(key)) => recorded_receipt(Arc::clone(log), key.clone()).await?,
            _ => None,
        };
        if approval_needed(spec.policy.risk, self.mode) {
            if replay.is_some() {
                record.approval = ApprovalRecord::Replayed;
            } else {
                let preview = catch_panic(|| tool.handler.preview(&request.arguments))?;
                // A caller that gives up stops the wait for a human; nothing has run yet.
                record.approval = tokio::select! {
                    decided = self.seek_approval(spec, request, preview) => decided,
                    () = request.cancel.canceled() => return Err(canceled()),
                };
            }
            if let ApprovalRecord::Denied { reason } = &record.approval {
                return Err(ToolError::new(
                    ErrorCode::ApprovalDenied,
                    format!("a human did not approve this call: {reason}"),
                )
                .with_hint(
                    "do not retry the same call; tell the user what you wanted to do and why",
                ));
            }
        }

        // 6. Idempotency.
        record.stage = Stage::Idempotency;
        record.idempotency_key = key.as_ref().map(|k| k.key.clone());

        // 7. Execute.
        record.stage = Stage::Execute;
        if request.cancel.is_canceled() {
            // Checked here because a select between a ready handler and a ready cancellation
            // may start the handler, and a started write can land after the caller gave up.
            return Err(canceled());
        }
        let ctx = ExecContext {
            call_id: request.call_id.clone(),
            run_id: request.run_id.clone(),
            principal: request.principal.clone(),
            idempotency_key: key.clone(),
            cancel: request.cancel.clone(),
            today,
            now_unix: unix_secs(self.clock.now()),
        };
        let output = match (replay, &tool.replay) {
            (Some(receipt), None) => Output::Write(receipt.into()),
            (Some(receipt), Some(view)) => {
                let key = receipt.key.clone();
                let shown = catch_panic(|| Ok(view(receipt)))?;
                let mut shown = bounded(spec, shown).await?;
                // The receipt is the recorded one whatever the view did with it.
                shown.receipt.key = key;
                shown.receipt.duplicate = true;
                Output::Write(shown)
            }
            (None, _) => self.execute(spec, tool, ctx, request).await?,
        };

        // 8. Observation.
        record.stage = Stage::Observe;
        let tool_output = match output {
            Output::Read(out) => out,
            Output::Write(written) => {
                let receipt = written.receipt;
                let expected = key.as_ref().map(|k| k.key.as_str());
                if expected != Some(receipt.key.as_str()) {
                    return Err(ToolError::internal(
                        "the write was not recorded under its idempotency key",
                    ));
                }
                record.duplicate = receipt.duplicate;
                record.undo = receipt.undo.clone();
                crate::tool::ToolOutput {
                    content: receipt.result,
                    untrusted: written.untrusted,
                    sources: written.sources,
                }
            }
        };
        let mut content = tool_output.content;
        let mut untrusted = tool_output.untrusted;
        let mut redactions = observation::redact_value(&mut content);
        for text in &mut untrusted {
            let (clean, n) = observation::redact_text(&text.text);
            text.text = clean;
            redactions += n;
        }
        let (content, untrusted, truncated) = observation::bound(
            content,
            untrusted,
            spec.observation.max_bytes,
            &spec.observation.more_hint,
        );
        Ok(Observation {
            content,
            untrusted,
            provenance: Provenance {
                tool: spec.name.clone(),
                version: spec.version,
                sources: tool_output.sources,
            },
            truncated,
            redactions,
        })
    }

    /// Step 7 proper: the handler, under its deadline and the caller's cancellation.
    async fn execute(
        &self,
        spec: &ToolSpec,
        tool: &Tool,
        ctx: ExecContext,
        request: &CallRequest,
    ) -> Result<Output, ToolError> {
        let arguments = request.arguments.clone();
        let handler_future = CatchPanic(catch_panic(|| Ok(tool.handler.call(ctx, arguments)))?);
        tokio::select! {
            out = handler_future => out,
            () = tokio::time::sleep(spec.executor.deadline) => {
                request.cancel.cancel();
                Err(ToolError::new(
                    ErrorCode::DeadlineExceeded,
                    format!("`{}` did not finish within {} ms", spec.name, spec.executor.deadline.as_millis()),
                ))
            }
            () = request.cancel.canceled() => Err(canceled()),
        }
    }

    async fn seek_approval(
        &self,
        spec: &ToolSpec,
        request: &CallRequest,
        preview: Option<Value>,
    ) -> ApprovalRecord {
        let binding = binding_hash(
            &spec.name,
            spec.version,
            &bound_value(&request.arguments, preview.as_ref()),
            &request.principal.id,
        );
        if let Some(token) = &request.approval_token {
            return match self.ledger.redeem(token, &binding, self.clock.now()) {
                Ok(()) => ApprovalRecord::Approved {
                    via: "approval_token",
                },
                Err(e) => ApprovalRecord::Denied {
                    reason: e.to_string(),
                },
            };
        }
        let Some(approver) = &self.approver else {
            return ApprovalRecord::Denied {
                reason: "no approver is configured, so nothing that needs approval can run".into(),
            };
        };
        let ask = ApprovalRequest {
            binding,
            tool: spec.name.clone(),
            version: spec.version,
            risk: spec.policy.risk,
            reason: spec.policy.reason.clone(),
            effect: spec.policy.effect,
            arguments: request.arguments.clone(),
            preview,
            principal: request.principal.id.clone(),
        };
        match tokio::time::timeout(self.approval_timeout, approver.decide(&ask)).await {
            Ok(Ok(ApprovalAnswer::Approve)) => ApprovalRecord::Approved { via: "approver" },
            Ok(Ok(ApprovalAnswer::Deny { reason })) => ApprovalRecord::Denied { reason },
            Ok(Err(e)) => ApprovalRecord::Denied {
                reason: e.to_string(),
            },
            Err(_) => ApprovalRecord::Denied {
                reason: format!("no answer within {} ms", self.approval_timeout.as_millis()),
            },
        }
    }

    fn unknown_tool(&self, name: &str, principal: &Principal) -> ToolError {
        let visible: Vec<&str> = self
            .registry
            .visible_to(principal)
            .map(|s| s.name.as_str())
            .collect();
        let near = schema::closest(name, visible.iter().copied(), 3);
        let hint = if near.is_empty() {
            format!("the tools you can call are: {}", visible.join(", "))
        } else {
            format!(
                "did you mean {}?",
                near.iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )
        };
        ToolError::not_found(format!("there is no tool named `{name}`"))
            .with_received(Value::String(name.into()))
            .with_hint(hint)
    }
}

/// A replay view, under the tool's deadline.
async fn bounded(
    spec: &ToolSpec,
    view: BoxFuture<'static, Result<WriteOutput, ToolError>>,
) -> Result<WriteOutput, ToolError> {
    tokio::time::timeout(spec.executor.deadline, CatchPanic(view))
        .await
        .map_err(|_| {
            ToolError::new(
                ErrorCode::DeadlineExceeded,
                format!(
                    "replaying `{}` did not finish within {} ms",
                    spec.name,
                    spec.executor.deadline.as_millis()
                ),
            )
        })?
}

/// Reads a write's receipt log off the async threads (SQLite blocks).
async fn recorded_receipt(
    log: Arc<dyn ReceiptLog>,
    key: IdempotencyKey,
) -> Result<Option<Receipt>, ToolError> {
    tokio::task::spawn_blocking(move || log.recorded(&key))
        .await
        .map_err(|_| ToolError::internal("reading the receipt log failed"))?
}

fn canceled() -> ToolError {
    ToolError::new(ErrorCode::Canceled, "the call was canceled")
}

/// What the model reads when a handler panics: no panic text, which can quote data or paths.
fn panic_error() -> ToolError {
    ToolError::internal("the tool failed unexpectedly; this is a fault in the tool, not the call")
}

/// Runs synchronous handler code, turning a panic into an `internal` error.
fn catch_panic<T>(f: impl FnOnce() -> Result<T, ToolError>) -> Result<T, ToolError> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(panic_error()))
}

/// A handler future whose panics become an `internal` error instead of unwinding through the
/// caller's loop. It is not polled again after a panic: the dispatcher drops it.
struct CatchPanic<F>(F);

impl<T, F: Future<Output = Result<T, ToolError>> + Unpin> Future for CatchPanic<F> {
    type Output = Result<T, ToolError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx)))
            .unwrap_or_else(|_| Poll::Ready(Err(panic_error())))
    }
}

/// Redacts every part of an error that can quote input; returns how many secrets it replaced.
fn redact_error(error: &mut ToolError) -> usize {
    let mut count = 0;
    for text in [
        Some(&mut error.message),
        error.expected.as_mut(),
        error.hint.as_mut(),
    ]
    .into_iter()
    .flatten()
    {
        let (clean, n) = observation::redact_text(text);
        if n > 0 {
            *text = clean;
            count += n;
        }
    }
    for value in [error.received.as_mut(), error.example.as_mut()]
        .into_iter()
        .flatten()
    {
        count += observation::redact_value(value);
    }
    count
}

/// Turns schema violations into one error a model can act on: the first violation's field,
/// expectation, received value and an example, with every violation listed in the message.
pub fn violations_error(spec: &ToolSpec, violations: &[Violation], today: &str) -> ToolError {
    let Some(first) = violations.first() else {
        return ToolError::internal("validation failed without a reason");
    };
    let sentences: Vec<String> = violations.iter().take(5).map(violation_sentence).collect();
    let more = violations.len().saturating_sub(5);
    let mut message = sentences.join("; ");
    if more > 0 {
        message.push_str(&format!("; and {more} more problem(s)"));
    }
    let mut error =
        ToolError::invalid(first.path.clone(), message).with_expected(first.expected.clone());
    if let Some(received) = &first.received {
        error = error.with_received(received.clone());
    }
    if let Some(example) = example_for(spec, &first.path) {
        error = error.with_example(example);
    }
    let mut hints = Vec::new();
    if first.kind == ViolationKind::UnknownField {
        let field = first.path.rsplit('.').next().unwrap_or(&first.path);
        let allowed = allowed_fields_at(&spec.input_schema, &first.path);
        let near = schema::closest(field, allowed.iter().map(String::as_str), 1);
        if let Some(n) = near.first() {
            hints.push(format!("did you mean `{n}`?"));
        }
    }
    if violations
        .iter()
        .any(|v| v.kind == ViolationKind::BadFormat && v.expected.contains("YYYY-MM-DD"))
    {
        hints.push(format!(
            "dates must be written YYYY-MM-DD; relative dates such as \"Friday\" are not accepted; today is {today}"
        ));
    }
    if !hints.is_empty() {
        error = error.with_hint(hints.join(" "));
    }
    error
}

fn violation_sentence(v: &Violation) -> String {
    let what = match v.kind {
        ViolationKind::UnknownField => "is not a field of this tool",
        ViolationKind::MissingField => "is required but missing",
        ViolationKind::WrongType => "has the wrong type",
        ViolationKind::NotInEnum => "is not an allowed value",
        ViolationKind::OutOfRange => "is out of range",
        ViolationKind::BadLength => "has the wrong length",
        ViolationKind::PatternMismatch => "does not match the required pattern",
        ViolationKind::BadFormat => "is not in the required format",
        ViolationKind::DuplicateItems => "has duplicate items",
    };
    let received = v.received.as_ref().map(|r| {
        let text = r.to_string();
        let short: String = text.chars().take(60).collect();
        if short.len() < text.len() {
            format!(" (got {short}…)")
        } else {
            format!(" (got {text})")
        }
    });
    format!(
        "`{}` {what}: expected {}{}",
        v.path,
        v.expected,
        received.unwrap_or_default()
    )
}

/// The value of `path`'s top-level field in the first example that has it.
fn example_for(spec: &ToolSpec, path: &str) -> Option<Value> {
    let top = path.split(['.', '[']).next().unwrap_or(path);
    if top == "$" {
        return spec.examples.first().map(|e| e.arguments.clone());
    }
    spec.examples
        .iter()
        .find_map(|e| e.arguments.get(top).cloned())
        .map(|v| json!({ top: v }))
}

fn allowed_fields_at(schema: &Value, path: &str) -> Vec<String> {
    let mut cursor = schema;
    let parts: Vec<&str> = path.split('.').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        let name = part.split('[').next().unwrap_or(part);
        match cursor.get("properties").and_then(|p| p.get(name)) {
            Some(next) => {
                cursor = if part.contains('[') {
                    next.get("items").unwrap_or(next)
                } else {
                    next
                }
            }
            None => return Vec::new(),
        }
    }
    cursor
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

impl DecisionRecord {
    /// The record of a call whose task was lost before the dispatcher could answer (the
    /// caller still owes the model one result per call id).
    pub fn lost(call_id: &str, tool: &str) -> Self {
        DecisionRecord {
            operation: "execute_tool",
            call_id: call_id.into(),
            tool: tool.into(),
            tool_version: None,
            run_id: String::new(),
            principal: String::new(),
            tenant: String::new(),
            arguments: Value::Null,
            args_hash: String::new(),
            risk: None,
            effect: None,
            mode: Mode::Auto,
            stage: Stage::Execute,
            outcome: ErrorCode::Internal.as_str().into(),
            error: Some(ErrorCode::Internal),
            approval: ApprovalRecord::NotNeeded,
            idempotency_key: None,
            duplicate: false,
            undo: None,
            duration_us: 0,
            result_bytes: 0,
            truncated: false,
            redactions: 0,
        }
    }
}
