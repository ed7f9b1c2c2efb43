//! Declaring a tool: one builder call per tool, typed arguments, a schema derived from the
//! argument type and checked closed, and a handler that only the dispatcher can reach. A tool
//! can instead declare its schema as JSON (`ToolBuilder::<Value>::from_schema`, for imported
//! tools and fixtures): its handler gets the arguments as JSON, and the declaration gets the
//! same checks plus those of [`schema::check_declared`]. Either way the input schema is
//! compiled once, here, and every call is validated against the compiled form.
//!
//! Guarantees: `ToolBuilder::read`/`write` refuse a declaration whose schema is open, whose
//! examples do not validate (or expect a result the output schema rules out), whose risk reason or description is missing, or whose name is not
//! a namespaced snake_case identifier; `read` also refuses a receipt log or replay view (they
//! belong to writes). Write handlers must return a [`Receipt`], which only the idempotency ledger can make,
//! so a write cannot skip idempotency.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::approval::{ApprovalChannel, Mode};
use crate::call::{CallOutcome, CallRequest, CallResult, Origin};
use crate::cancel::CancelToken;
use crate::error::{ErrorStyle, ToolError};
use crate::idempotency::{IdempotencyKey, Receipt, ReceiptLog};
pub use crate::observation::UntrustedText;
use crate::principal::Principal;
use crate::schema::{self, CompiledSchema, SchemaError};
use crate::spec::{
    Deprecation, Description, Effect, Example, ExecutorView, Expected, InputOrigin, Milestone,
    ObservationView, PolicyView, Risk, ToolSpec,
};
use crate::taint::{TaintSources, UntrustedSource};

pub use crate::future::BoxFuture;

/// What a read handler returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    pub content: Value,
    pub untrusted: Vec<UntrustedText>,
    /// Where the content came from (URLs, note ids), for provenance.
    pub sources: Vec<String>,
}

impl ToolOutput {
    pub fn new(content: Value) -> Self {
        ToolOutput {
            content,
            ..ToolOutput::default()
        }
    }
}

/// What a handler produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Read(ToolOutput),
    Write(WriteOutput),
}

/// What a write handler returns: the receipt of its effect, plus any untrusted text the model
/// should see about it (a clipped page's title and summary), kept out of the receipt's trusted
/// result.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteOutput {
    pub receipt: Receipt,
    pub untrusted: Vec<UntrustedText>,
    pub sources: Vec<String>,
}

impl From<Receipt> for WriteOutput {
    fn from(receipt: Receipt) -> Self {
        WriteOutput {
            receipt,
            untrusted: Vec::new(),
            sources: Vec::new(),
        }
    }
}

/// Facts the model lacks, available to semantic checks.
#[derive(Debug, Clone)]
pub struct CheckFacts {
    pub today: String,
}

/// What a handler may know about the call it serves.
#[derive(Debug, Clone)]
pub struct ExecContext {
    pub call_id: String,
    pub run_id: String,
    pub principal: Principal,
    /// Present for writes: the handler passes it to the idempotency ledger.
    pub idempotency_key: Option<IdempotencyKey>,
    pub cancel: CancelToken,
    pub today: String,
    /// The dispatcher clock's time, for receipts.
    pub now_unix: u64,
    /// Calls other tools back through the same dispatcher, under the same principal.
    pub tools: ToolCaller,
}

/// Runs a call through the dispatcher that runs the current one (implemented by it).
pub(crate) trait CallBack: Send + Sync {
    fn call(&self, request: CallRequest) -> BoxFuture<'static, CallOutcome>;
    /// Whether a call to `tool` would write (a tool that cannot be resolved runs nothing).
    fn writes(&self, tool: &str) -> bool;
    /// How long a person has to answer.
    fn approval_timeout(&self) -> std::time::Duration;
    /// The version of `tool` served now (`None`: no such tool).
    fn version_of(&self, tool: &str) -> Option<u32>;
    /// Whether `tool` is in `principal`'s catalogue for run `run_id` now (the phases open it,
    /// or do not close it); says nothing about scopes.
    fn in_run_catalogue(&self, principal: &Principal, run_id: &str, tool: &str) -> bool;
}

/// A handler's way to call other tools: every call goes back through the dispatcher, under the
/// caller's principal, run, approval channel and mode, with the current call as its parent, so
/// it keeps its own risk level and approvals (a high-risk nested call still asks a human, and
/// the enclosing call's deadline pauses while it waits). Canceling the enclosing call cancels
/// nested ones.
///
/// Nested calls carry the enclosing call's taint sources, grown by the untrusted text each
/// earlier nested call returned, so a value a script read from a page and passes to a
/// high-risk tool is refused or flagged exactly as it would be in a direct call. A caller that
/// gave no sources gets none here either. Whether any nested call went to a writing tool is
/// recorded in the enclosing call's record ([`DecisionRecord::nested_writes`]).
///
/// [`DecisionRecord::nested_writes`]: crate::call::DecisionRecord::nested_writes
#[derive(Clone)]
pub struct ToolCaller {
    pub(crate) back: std::sync::Arc<dyn CallBack>,
    pub(crate) parent: CallRequest,
    pub(crate) waits: Arc<crate::waits::HumanWaits>,
    pub(crate) nested: Arc<Nested>,
}

/// What the nested calls of one call share.
#[derive(Debug, Default)]
pub(crate) struct Nested {
    /// The enclosing call's sources and what nested calls have read since (`None`: the caller
    /// gave none, and no taint rule applies).
    sources: std::sync::Mutex<Option<Arc<TaintSources>>>,
    /// Every untrusted text nested calls returned, for the enclosing call's caller.
    read: std::sync::Mutex<Vec<UntrustedSource>>,
    wrote: std::sync::atomic::AtomicBool,
}

impl Nested {
    pub(crate) fn new(sources: Option<Arc<TaintSources>>) -> Self {
        Nested {
            sources: std::sync::Mutex::new(sources),
            read: std::sync::Mutex::new(Vec::new()),
            wrote: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The untrusted texts nested calls returned so far.
    pub(crate) fn read(&self) -> Vec<UntrustedSource> {
        match self.read.lock() {
            Ok(read) => read.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Whether a nested call went to a writing tool.
    pub(crate) fn wrote(&self) -> bool {
        self.wrote.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn mark_written(&self) {
        self.wrote.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn sources(&self) -> Option<Arc<TaintSources>> {
        // A poisoned lock still holds the sources; losing them would drop the taint rules.
        match self.sources.lock() {
            Ok(held) => held.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Adds what a nested call returned to the sources the next nested calls carry, and its
    /// untrusted texts (its result's, its error's, and what its own nested calls read) to what
    /// the enclosing call reports.
    fn learn(&self, tool: &str, outcome: &CallOutcome) {
        let call_id = &outcome.record.call_id;
        let carried = match &outcome.result {
            CallResult::Done(observation) => observation.untrusted.as_slice(),
            CallResult::Failed(error) => error.untrusted.as_slice(),
            CallResult::ApprovalRequired(_) => &[],
        };
        let mut found: Vec<UntrustedSource> = carried
            .iter()
            .map(|text| UntrustedSource::new(&text.source, &text.text, tool, call_id))
            .collect();
        found.extend(outcome.nested_untrusted.iter().cloned());
        {
            let mut held = match self.sources.lock() {
                Ok(held) => held,
                Err(poisoned) => poisoned.into_inner(),
            };
            if let Some(sources) = held.as_mut() {
                let sources = Arc::make_mut(sources);
                if let Some(observation) = outcome.observation() {
                    sources.add_trusted(&observation.content.to_string());
                }
                for source in &found {
                    sources.add_untrusted(source.clone());
                }
            }
        }
        match self.read.lock() {
            Ok(mut read) => read.extend(found),
            Err(poisoned) => poisoned.into_inner().extend(found),
        }
    }
}

impl std::fmt::Debug for ToolCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCaller")
            .field("parent", &self.parent.call_id)
            .finish_non_exhaustive()
    }
}

static NESTED_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl ToolCaller {
    /// Calls `tool` with `arguments`, recorded with `origin` and this call as its parent.
    pub async fn call(&self, origin: Origin, tool: &str, arguments: Value) -> CallOutcome {
        let parent = &self.parent;
        let n = NESTED_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut request =
            CallRequest::new(parent.principal.clone(), &parent.run_id, tool, arguments)
                .with_call_id(&format!("{}.{n}", parent.call_id))
                .with_origin(origin)
                .with_approval(parent.approval.clone())
                .with_cancel(parent.cancel.clone());
        request.mode = parent.mode;
        request.parent_call_id = Some(parent.call_id.clone());
        request.waits = Some(Arc::clone(&self.waits));
        request.taint_sources = self.nested.sources();
        // Marked before the call: a write that is refused, canceled or cut off by a deadline
        // may still have happened, and forgetting too much only costs a read run again.
        if self.back.writes(tool) {
            self.nested.mark_written();
        }
        let outcome = self.back.call(request).await;
        if outcome.record.nested_writes {
            self.nested.mark_written();
        }
        self.nested.learn(tool, &outcome);
        outcome
    }

    /// Asks the person on this call's approval channel a question the server this call is
    /// talking to put (see [`crate::question`]): the enclosing calls' deadlines pause while
    /// they decide, for at most the dispatcher's approval timeout.
    pub async fn ask_person(
        &self,
        question: &crate::question::ServerQuestion,
    ) -> Result<crate::question::QuestionAnswer, crate::question::QuestionRefused> {
        use crate::question::QuestionRefused;
        let approver = match &self.parent.approval {
            ApprovalChannel::None => return Err(QuestionRefused::NoChannel),
            ApprovalChannel::Ticket => return Err(QuestionRefused::TicketsOnly),
            ApprovalChannel::Ask(approver) => Arc::clone(approver),
        };
        let _waiting = self.waits.begin();
        let timeout = self.back.approval_timeout();
        match tokio::time::timeout(timeout, approver.ask(question)).await {
            Ok(answer) => answer,
            Err(_) => Err(QuestionRefused::TimedOut {
                after_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// The version of `tool` the dispatcher serves now (`None`: no such tool).
    pub fn tool_version(&self, tool: &str) -> Option<u32> {
        self.back.version_of(tool)
    }

    /// Whether the policy's phases let this call's run reach `tool` now (always, without
    /// phases); scopes are asked separately ([`Principal::may_see`]).
    pub fn open_in_run(&self, tool: &str) -> bool {
        self.back
            .in_run_catalogue(&self.parent.principal, &self.parent.run_id, tool)
    }

    /// The approval channel nested calls use.
    pub fn approval(&self) -> &ApprovalChannel {
        &self.parent.approval
    }

    pub fn mode(&self) -> Option<Mode> {
        self.parent.mode
    }
}

impl ExecContext {
    /// The key a write must record its effect under.
    pub fn write_key(&self) -> Result<&IdempotencyKey, ToolError> {
        self.idempotency_key
            .as_ref()
            .ok_or_else(|| ToolError::internal("write called without an idempotency key"))
    }
}

/// A type-erased handler: only the dispatcher calls it.
pub(crate) trait ErasedHandler: Send + Sync {
    fn check(&self, arguments: &Value, facts: &CheckFacts) -> Result<(), ToolError>;
    /// What a human must see to approve the call, beyond its arguments (`None`: nothing).
    fn preview(&self, arguments: &Value) -> Result<Option<Value>, ToolError>;
    fn call(
        &self,
        ctx: ExecContext,
        arguments: &Value,
    ) -> BoxFuture<'static, Result<Output, ToolError>>;
}

type CheckFn<A> = Arc<dyn Fn(&A, &CheckFacts) -> Result<(), ToolError> + Send + Sync>;
type PreviewFn<A> = Arc<dyn Fn(&A) -> Result<Value, ToolError> + Send + Sync>;
type CallFn<A> =
    Arc<dyn Fn(ExecContext, A) -> BoxFuture<'static, Result<Output, ToolError>> + Send + Sync>;
/// Rebuilds what a replayed write shows beside its receipt (untrusted text, sources).
pub(crate) type ReplayFn =
    Arc<dyn Fn(Receipt) -> BoxFuture<'static, Result<WriteOutput, ToolError>> + Send + Sync>;

struct TypedHandler<A> {
    check: Option<CheckFn<A>>,
    preview: Option<PreviewFn<A>>,
    call: CallFn<A>,
}

fn parse<A: DeserializeOwned>(arguments: &Value) -> Result<A, ToolError> {
    // The schema validated first; a failure here is a schema that says less than the type.
    A::deserialize(arguments)
        .map_err(|e| ToolError::invalid("$", format!("arguments do not fit the tool: {e}")))
}

impl<A: DeserializeOwned + Send + 'static> ErasedHandler for TypedHandler<A> {
    fn check(&self, arguments: &Value, facts: &CheckFacts) -> Result<(), ToolError> {
        let args: A = parse(arguments)?;
        match &self.check {
            Some(check) => check(&args, facts),
            None => Ok(()),
        }
    }

    fn preview(&self, arguments: &Value) -> Result<Option<Value>, ToolError> {
        match &self.preview {
            Some(preview) => preview(&parse::<A>(arguments)?).map(Some),
            None => Ok(None),
        }
    }

    fn call(
        &self,
        ctx: ExecContext,
        arguments: &Value,
    ) -> BoxFuture<'static, Result<Output, ToolError>> {
        match parse::<A>(arguments) {
            Ok(args) => (self.call)(ctx, args),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }
}

/// A declared tool: its spec and its handler.
#[derive(Clone)]
pub struct Tool {
    pub spec: ToolSpec,
    /// `spec.input_schema`, compiled once at declaration; every call validates against it.
    pub(crate) validator: Arc<CompiledSchema>,
    pub(crate) handler: Arc<dyn ErasedHandler>,
    /// Where a write records its receipts, when the dispatcher may read them.
    pub(crate) receipts: Option<Arc<dyn ReceiptLog>>,
    /// What a replayed call shows beside its receipt; the bare receipt when `None`.
    pub(crate) replay: Option<ReplayFn>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// Why a declaration was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DeclarationError {
    #[error("tool `{tool}`: {source}")]
    Schema { tool: String, source: SchemaError },
    #[error("tool `{tool}`: example `{label}` does not validate: {problems}")]
    InvalidExample {
        tool: String,
        label: String,
        problems: String,
    },
    #[error(
        "tool `{tool}`: example `{label}` expects a result its output schema rules out: {problems}"
    )]
    ExampleResultOutsideSchema {
        tool: String,
        label: String,
        problems: String,
    },
    #[error("tool `{tool}`: {what} is missing")]
    Missing { tool: String, what: &'static str },
    #[error("tool name `{0}` must be lower snake_case, start with a letter, at most 64 characters")]
    BadName(String),
    #[error("tool `{tool}`: effect `{effect}` writes, declare it with `write`, not `read`")]
    EffectMismatch { tool: String, effect: &'static str },
    #[error("tool `{0}` only reads: a receipt log or replay view belongs to a `write` tool")]
    ReceiptsOnRead(String),
    #[error("tool `{0}` writes: only a read can answer an exact repeat from its earlier result")]
    RepeatsOnWrite(String),
    #[error("tool `{0}`: a deprecation milestone is a version number or a day written YYYY-MM-DD")]
    BadDeprecation(String),
}

/// Builds a [`Tool`] whose arguments deserialize into `A`.
pub struct ToolBuilder<A> {
    name: String,
    version: u32,
    description: Option<Description>,
    examples: Vec<Example>,
    output_schema: Option<Value>,
    policy: Option<PolicyView>,
    /// Kept apart from `policy` so that the order of builder calls cannot drop a scope.
    scopes: Vec<String>,
    deadline: Duration,
    parallel_safe: bool,
    answers_repeats: bool,
    observation: ObservationView,
    check: Option<CheckFn<A>>,
    preview: Option<PreviewFn<A>>,
    receipts: Option<Arc<dyn ReceiptLog>>,
    replay: Option<ReplayFn>,
    /// A schema declared as JSON ([`ToolBuilder::from_schema`]) instead of derived from `A`.
    declared_schema: Option<Value>,
    allow_open: bool,
    deprecation: Option<Deprecation>,
    _args: PhantomData<fn() -> A>,
}

/// Default bound on what a tool may return to the model (about 2,000 tokens of JSON).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 8 * 1024;
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);

impl<A: JsonSchema + DeserializeOwned + Send + 'static> ToolBuilder<A> {
    pub fn new(name: impl Into<String>, version: u32) -> Self {
        ToolBuilder {
            name: name.into(),
            version,
            description: None,
            examples: Vec::new(),
            output_schema: None,
            policy: None,
            scopes: Vec::new(),
            deadline: DEFAULT_DEADLINE,
            parallel_safe: false,
            answers_repeats: false,
            observation: ObservationView {
                max_bytes: DEFAULT_MAX_OUTPUT_BYTES,
                error_style: ErrorStyle::Teaching,
                more_hint: "narrow the request".into(),
            },
            check: None,
            preview: None,
            receipts: None,
            replay: None,
            declared_schema: None,
            allow_open: false,
            deprecation: None,
            _args: PhantomData,
        }
    }

    pub fn describe(
        mut self,
        does: &str,
        use_when: &str,
        avoid_when: Option<&str>,
        returns: &str,
    ) -> Self {
        self.description = Some(Description {
            does: does.into(),
            use_when: use_when.into(),
            avoid_when: avoid_when.map(Into::into),
            returns: returns.into(),
        });
        self
    }

    pub fn example(mut self, label: &str, arguments: Value) -> Self {
        self.examples.push(Example {
            label: label.into(),
            arguments,
            expected: None,
        });
        self
    }

    /// An example with what its call returns on the toolset's seeded store: a shape, exact
    /// values, or an error code ([`Expected`]). Checked against the output schema here, when
    /// the tool declares one, and by running it in `toolgate tools --check`.
    pub fn example_returns(mut self, label: &str, arguments: Value, expected: Expected) -> Self {
        self.examples.push(Example {
            label: label.into(),
            arguments,
            expected: Some(expected),
        });
        self
    }

    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    pub fn policy(mut self, risk: Risk, effect: Effect, reason: &str) -> Self {
        self.policy = Some(PolicyView {
            risk,
            reason: reason.into(),
            effect,
            scopes: Vec::new(),
        });
        self
    }

    pub fn scopes(mut self, scopes: &[&str]) -> Self {
        self.scopes = scopes.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    pub fn parallel_safe(mut self) -> Self {
        self.parallel_safe = true;
        self
    }

    /// Lets a loop answer an exact repeat of an earlier call (same arguments, nothing written
    /// since) with the earlier result and a notice instead of running it again: for reads
    /// whose answer only a write can change. A `write` tool refuses it.
    pub fn answers_repeats(mut self) -> Self {
        self.answers_repeats = true;
        self
    }

    pub fn max_output_bytes(mut self, max_bytes: usize) -> Self {
        self.observation.max_bytes = max_bytes;
        self
    }

    pub fn error_style(mut self, style: ErrorStyle) -> Self {
        self.observation.error_style = style;
        self
    }

    pub fn more_hint(mut self, hint: &str) -> Self {
        self.observation.more_hint = hint.into();
        self
    }

    /// Marks the tool deprecated from `since` (one of its versions or a `YYYY-MM-DD` day) and
    /// kept at least until `remove_after`: the catalogue check then allows its removal.
    pub fn deprecated(mut self, since: Milestone, remove_after: Milestone) -> Self {
        self.deprecation = Some(Deprecation {
            deprecated_since: since,
            remove_after,
        });
        self
    }

    /// A semantic check run after schema validation and before approval (so a human is never
    /// asked to approve a call that would fail anyway).
    pub fn check(
        mut self,
        check: impl Fn(&A, &CheckFacts) -> Result<(), ToolError> + Send + Sync + 'static,
    ) -> Self {
        self.check = Some(Arc::new(check));
        self
    }

    /// What the approver must see besides the arguments, read from the tool's own store (the
    /// recipient, subject and body of the draft an `email_send {draft_id}` would send). The
    /// preview is bound into the approval with the arguments, so an approval never covers
    /// content that changed after the human saw it.
    pub fn approval_preview(
        mut self,
        preview: impl Fn(&A) -> Result<Value, ToolError> + Send + Sync + 'static,
    ) -> Self {
        self.preview = Some(Arc::new(preview));
        self
    }

    /// Where the write handler records its receipts (the log `run_once` writes to), so that a
    /// retry of a call that already happened replays its receipt without asking a human again.
    pub fn receipts(mut self, log: impl ReceiptLog + 'static) -> Self {
        self.receipts = Some(Arc::new(log));
        self
    }

    /// What a replayed call shows beside its receipt, rebuilt from the store (a clip's
    /// untrusted summary, say): a replay never runs the handler, so it cannot produce it.
    pub fn replay_view<F, Fut>(mut self, view: F) -> Self
    where
        F: Fn(Receipt) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<WriteOutput, ToolError>> + Send + 'static,
    {
        self.replay = Some(Arc::new(move |receipt| Box::pin(view(receipt))));
        self
    }

    /// Finishes a tool that does not change state.
    pub fn read<F, Fut>(self, handler: F) -> Result<Tool, DeclarationError>
    where
        F: Fn(ExecContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        if let Some(policy) = &self.policy
            && policy.effect.writes()
        {
            return Err(DeclarationError::EffectMismatch {
                tool: self.name.clone(),
                effect: policy.effect.as_str(),
            });
        }
        let call: CallFn<A> = Arc::new(move |ctx, args| {
            let fut = handler(ctx, args);
            Box::pin(async move { fut.await.map(Output::Read) })
        });
        self.finish(call, false)
    }

    /// Finishes a tool that changes state. The handler must record its effect through the
    /// idempotency ledger with `ctx.write_key()` and return the receipt (or a [`WriteOutput`]
    /// carrying it).
    pub fn write<F, Fut, W>(mut self, handler: F) -> Result<Tool, DeclarationError>
    where
        F: Fn(ExecContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<W, ToolError>> + Send + 'static,
        W: Into<WriteOutput> + 'static,
    {
        // A writing tool cannot claim to only read; an outbound effect stays as declared.
        if let Some(policy) = &mut self.policy
            && policy.effect == Effect::Read
        {
            policy.effect = Effect::UndoableWrite;
        }
        let call: CallFn<A> = Arc::new(move |ctx, args| {
            let fut = handler(ctx, args);
            Box::pin(async move { fut.await.map(|w| Output::Write(w.into())) })
        });
        self.finish(call, true)
    }

    fn finish(self, call: CallFn<A>, writes: bool) -> Result<Tool, DeclarationError> {
        let tool = self.name.clone();
        if !valid_tool_name(&tool) {
            return Err(DeclarationError::BadName(tool));
        }
        if !writes && (self.receipts.is_some() || self.replay.is_some()) {
            return Err(DeclarationError::ReceiptsOnRead(tool));
        }
        if writes && self.answers_repeats {
            return Err(DeclarationError::RepeatsOnWrite(tool));
        }
        if let Some(d) = &self.deprecation
            && !(d.deprecated_since.is_well_formed() && d.remove_after.is_well_formed())
        {
            return Err(DeclarationError::BadDeprecation(tool));
        }
        let description = self.description.ok_or(DeclarationError::Missing {
            tool: tool.clone(),
            what: "description",
        })?;
        for (what, text) in [
            ("description: what it does", &description.does),
            ("description: when to use it", &description.use_when),
            ("description: what it returns", &description.returns),
        ] {
            if text.trim().is_empty() {
                return Err(DeclarationError::Missing { tool, what });
            }
        }
        let mut policy = self.policy.ok_or(DeclarationError::Missing {
            tool: tool.clone(),
            what: "policy (risk, effect, reason)",
        })?;
        policy.scopes = self.scopes;
        if policy.reason.trim().is_empty() {
            return Err(DeclarationError::Missing {
                tool,
                what: "risk reason",
            });
        }
        let schema_error = |source| DeclarationError::Schema {
            tool: tool.clone(),
            source,
        };
        let (input_schema, input_origin, validator) = match self.declared_schema {
            Some(declared) => {
                let origin = if self.allow_open {
                    InputOrigin::DeclaredOpen
                } else {
                    InputOrigin::Declared
                };
                match CompiledSchema::declared(&declared, self.allow_open) {
                    Ok(compiled) => (declared, origin, compiled),
                    Err(source) => {
                        // A refused schema can be 10,000 levels deep: dropping it the usual
                        // way would recurse once per level.
                        schema::drop_without_recursion(declared);
                        return Err(schema_error(source));
                    }
                }
            }
            None => {
                let derived = schema::schema_for::<A>().map_err(schema_error)?;
                if derived.get("properties").is_none() && derived.get("type").is_none() {
                    return Err(schema_error(SchemaError::Malformed {
                        path: "$".into(),
                        reason: "the argument type accepts any JSON; declare its schema with `ToolBuilder::from_schema`".into(),
                    }));
                }
                let compiled = CompiledSchema::derived(&derived).map_err(schema_error)?;
                (derived, InputOrigin::Derived, compiled)
            }
        };
        for example in &self.examples {
            let problems = validator.validate(&example.arguments);
            let typed = serde_json::from_value::<A>(example.arguments.clone());
            if !problems.is_empty() || typed.is_err() {
                let mut text: Vec<String> = problems
                    .iter()
                    .map(|p| format!("{}: expected {}", p.path, p.expected))
                    .collect();
                if let Err(e) = typed {
                    text.push(e.to_string());
                }
                return Err(DeclarationError::InvalidExample {
                    tool,
                    label: example.label.clone(),
                    problems: text.join("; "),
                });
            }
            if let (Some(expected), Some(output)) = (&example.expected, &self.output_schema) {
                let problems = crate::spec::check_expected_against_schema(expected, output);
                if !problems.is_empty() {
                    return Err(DeclarationError::ExampleResultOutsideSchema {
                        tool,
                        label: example.label.clone(),
                        problems: problems.join("; "),
                    });
                }
            }
        }
        let handler = TypedHandler {
            check: self.check,
            preview: self.preview,
            call,
        };
        Ok(Tool {
            spec: ToolSpec {
                name: tool,
                version: self.version,
                description,
                examples: self.examples,
                input_schema,
                input_origin,
                output_schema: self.output_schema,
                policy,
                executor: ExecutorView {
                    deadline: self.deadline,
                    writes,
                    parallel_safe: self.parallel_safe,
                    answers_repeats: self.answers_repeats,
                    receipts_visible: self.receipts.is_some(),
                },
                observation: self.observation,
                deprecation: self.deprecation,
            },
            validator: Arc::new(validator),
            handler: Arc::new(handler),
            receipts: self.receipts,
            replay: self.replay,
        })
    }
}

impl ToolBuilder<Value> {
    /// A tool whose arguments are declared by a JSON Schema value (an imported tool, a test
    /// fixture) rather than derived from a Rust type; its handler receives the arguments as
    /// JSON. Every other builder method works as for a typed tool, and the declaration gets the
    /// same checks, plus those of [`schema::check_declared`]: bounded size and depth, local
    /// references only, keywords the validator enforces, and every object closed unless
    /// [`Self::allow_open_schema`] says otherwise.
    pub fn from_schema(name: impl Into<String>, version: u32, schema: Value) -> Self {
        let mut builder = ToolBuilder::new(name, version);
        builder.declared_schema = Some(schema);
        builder
    }

    /// Accepts objects that allow fields they do not name. Recorded in the spec
    /// ([`InputOrigin::DeclaredOpen`]), and reported by `contract_problems`.
    pub fn allow_open_schema(mut self) -> Self {
        self.allow_open = true;
        self
    }
}

/// Tool names: lower snake_case, starting with a letter, 1-64 characters (what every provider
/// accepts).
pub fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
#[path = "tool_tests.rs"]
mod tests;
