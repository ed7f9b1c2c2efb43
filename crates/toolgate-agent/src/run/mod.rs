//! The tool-call loop.
//!
//! Guarantees: every call the model asks for goes through the dispatcher (the loop never
//! touches a handler), except an exact repeat of a read that declares `answers_repeats`
//! with nothing written since, which is answered with the earlier result under a notice and
//! traced as `repeat_answered` (see [`crate::repeat_guard`]); every call id gets exactly one
//! result, in the order asked, errors included as `is_error` results the model can act on;
//! consecutive calls to parallel-safe tools run concurrently, anything else runs alone and in
//! order; the run stops on a final answer, the round cap or the token budget, and says which.
//!
//! A run goes through these stages, each one method of [`Agent`]:
//! 1. *prepare the conversation* (`prepare_conversation`): the tool list, the deferred run's
//!    preload (`preload.rs`), the taint sources of the history (`sources.rs`) and the
//!    read-first lever's call (`read_first.rs`);
//! 2. *check the limits* (`limit_reached`): the round cap and the token budget, before each
//!    turn;
//! 3. *request a turn* (`request_turn`): one model request, observed and traced (and, with the
//!    dispatcher's telemetry on, one span under the run's: `telemetry.rs`);
//! 4. *handle a final answer* (`correct_described_call`, `retry_refused_call`): a turn without
//!    calls ends the run, unless the described-call correction or the refused-call retry gives
//!    it one more turn;
//! 5. *take the calls* (`take_calls`, in `calls.rs`): refused once tool use has ended; else
//!    the *repeat guard* answers exact repeats from memory, the rest are *dispatched*
//!    (`dispatch.rs`), each outcome is recorded, and tool use ends after repeats (a lever);
//! 6. *close the run* (`close_run`): the answer, the run's end traced (`trace.rs`), observers
//!    told (`observer.rs`).
//!
//! Tool definitions: every tool the principal may call, sent identically every round, except
//! those the policy's phases keep closed in the run (`toolgate_core::phase_gate`): after each
//! round of calls the loop reads the run's catalogue again, appends a tool a plan approved
//! opened and drops one whose plan was used (traced as `run_catalogue_changed`); a call to a
//! closed tool still goes to the dispatcher, which refuses it on the record. Past
//! [`AgentConfig::deferral`]'s threshold, when the registry offers `tool_search`, the standing
//! set (`tool_search` and the always-loaded tools) instead, and the definitions a search finds
//! are appended for later rounds, never swapped in (see [`crate::deferral`]), so each request's
//! tool list begins with every byte of the one before.
//!
//! Nine levers, each off by default (off, the loop behaves exactly as without them), each
//! aimed at a failure kind of the eval's taxonomy:
//! - [`AgentConfig::correct_described_calls`] (*wrong answer*, *no tool call*): a final answer
//!   that describes a call to an offered tool instead of making it (see
//!   [`crate::described_call`]) gets one corrective user-role turn per run, then the model is
//!   asked again; a second described answer is the final answer. No correction when no round
//!   or token budget is left (the described answer stands rather than a round-cap ending), or
//!   once tool use has ended. Traced as `described_call_corrected`, kept in
//!   [`RunResult::described_call`].
//! - [`AgentConfig::end_tools_after_repeats`] (*round cap*): an exact repeat answered from
//!   memory says plainly that the result is unchanged and to answer from it; at the run's
//!   second exact repeat of a read with nothing written since (see
//!   [`crate::repeat_guard::RepeatCount`]), tool use ends: that turn's results are followed by
//!   a notice, and every later request keeps the same tool definitions (so a cached prompt
//!   prefix can hold) with `tool_choice: None`. A call the model makes anyway is never run:
//!   it gets a `canceled` error result. Traced as `tools_ended`, kept in
//!   [`RunResult::tools_ended_round`].
//! - [`AgentConfig::first_round_must_call`] (*no tool call*): the run's first request asks
//!   for `tool_choice: Any` (a model that honours it must call a tool; the embedded engine's
//!   grammar forces one); later rounds are `Auto`. For assistants whose every question is
//!   about the user's data.
//! - [`AgentConfig::retry_refused_calls`] (*invalid arguments*): an answer that makes no call
//!   after a round whose calls were all refused with a fixable error (`invalid_argument`,
//!   `not_found`; never a policy refusal, see [`crate::refused_call`]) gets one corrective
//!   user-role turn per run, under the same conditions as the described-call correction (which
//!   goes first). Traced as `refused_call_retried`, kept in [`RunResult::refused_call`].
//!   With [`AgentConfig::retry_must_call`] the request after that turn asks for a call to the
//!   refused tool (`ToolChoice::AnyOf`, every definition still sent) and the turn asks only
//!   for the corrected call: the embedded model, told to make it, wrote the corrected call as
//!   a JSON block in its answer instead (`code-mode-failed-script-errors-sampled-embedded`,
//!   run 0 at 325 notes, twice).
//! - [`AgentConfig::read_first`] (*wrong final state* and *invalid arguments* from ids the
//!   model guessed, *wrong answer* from filters that hid the note): before the first request
//!   the loop makes one read with the user's own words (say `notes_search` with the message as
//!   its `query`) through the dispatcher, and the conversation starts with that call and its
//!   result (see `read_first.rs`).
//! - [`AgentConfig::offer_rules`] (*wrong tool* from a clip of a page the user already has,
//!   *wrong final state* from a send before any draft): a tool is withheld from the list until
//!   its rule holds (a URL in the user's message; another tool's result without error), then
//!   appended for the rest of the run; a call to it before then is refused unrun with a
//!   `forbidden` result saying why (see [`crate::phases`]). Traced as `tools_offered`.
//! - [`AgentConfig::first_round_reads`] (*wrong final state* from a write made before any
//!   read: a made-up figure in a draft, a question saved as a note): the run's first request
//!   asks for a call to one of the tools that only read (`ToolChoice::AnyOf`, every
//!   definition still sent so the cached prefix holds); a provider that cannot narrow the
//!   choice gets "must call", and a write the model asks for in that round is refused unrun.
//! - [`AgentConfig::grounded_figures`] (*wrong final state* from a made-up figure in a draft,
//!   written before any read): a call to a covered tool whose arguments state a figure that
//!   neither the user's messages nor any tool result has shown is refused unrun with
//!   `invalid_argument`, naming the figure and the tool to look it up with (see
//!   [`crate::grounding`]). Unlike a forced first read, the model keeps its plan: only the
//!   write with the made-up figure is stopped.
//! - [`AgentConfig::correct_echoed_answers`] (*echoed tool result*, *wrong answer*): a final
//!   answer that is mostly JSON copied from the run's tool results (see
//!   [`crate::echoed_answer`], the detector the eval's check uses) gets one corrective
//!   user-role turn per run asking for an answer in the model's own words, under the same
//!   conditions as the described-call correction (which goes first), also after tool use has
//!   ended. Traced as `echoed_answer_corrected`, kept in [`RunResult::echoed_answer`].
//! - [`AgentConfig::correct_unfounded_answers`] (*wrong answer*): a final answer that states
//!   no figure or name from the run's successful tool results (a polite close, a give-up while
//!   the results hold the answer; see [`crate::unfounded_answer`]) gets one corrective
//!   user-role turn per run, after the other corrections and the retry had their turn, also
//!   after tool use has ended. Traced as `unfounded_answer_corrected`, kept in
//!   [`RunResult::unfounded_answer`].

mod calls;
mod config;
mod dispatch;
mod observer;
mod preload;
mod read_first;
mod result;
mod sources;
mod telemetry;
mod trace;

use std::sync::Arc;
use std::time::Instant;

use toolgate_core::taint::TaintSources;
use toolgate_core::trace::{NoTrace, TraceSink};
use toolgate_core::{Caller, Principal};
use toolgate_llm::{
    Message, Model, ModelRequest, ModelResponse, ToolChoice, ToolDefinition, Usage,
};

pub use config::{AgentConfig, DEFAULT_MAX_ROUNDS, DEFAULT_SYSTEM_PROMPT};
pub use observer::{AgentEvent, Observer};
pub use read_first::{READ_FIRST_CALL_ID, ReadFirst, read_first_call, whole_message};
pub use result::{CallSummary, RunResult, StopCause};
pub use sources::sources_from_history;
pub use telemetry::{
    AGENT_NAME, chat_end_attributes, finish_reason, llm_error_type, provider_and_model,
    stop_error_type,
};
pub use trace::{
    DescribedCallCorrected, EchoedAnswerCorrected, ModelTurn, RefusedCallRetried, RepeatAnswered,
    RunCatalogueChanged, RunEnd, ToolsAppended, ToolsEnded, ToolsOffered, TurnSummary,
    UnfoundedAnswerCorrected,
};

use crate::conversation::{tool_results, user_texts};
use crate::deferral::ToolList;
use crate::described_call::{DescribedCall, correction_text, described_call};
use crate::echoed_answer::{CORRECTION as ECHO_CORRECTION, Echo, echoed_tool_output};
use crate::phases::{PhaseState, withheld};
use crate::refused_call::{RefusedCall, refused_call, retry_text};
use crate::repeat_guard::{CallKind, RepeatCount, RepeatGuard};
use crate::unfounded_answer::{CORRECTION as UNFOUNDED_CORRECTION, Unfounded, unfounded_answer};
use result::model_error;
use toolgate_core::budget::Spend;

pub struct Agent {
    model: Arc<dyn Model>,
    caller: Caller,
    principal: Principal,
    config: AgentConfig,
    trace: Arc<dyn TraceSink>,
    observer: Option<Observer>,
}

/// What a run carries from one round to the next.
struct RunState<'a> {
    run_id: &'a str,
    /// The definitions sent, with what searches appended.
    tools: ToolList,
    /// Tools whose definitions searches appended, in order.
    appended_tools: Vec<String>,
    /// Where the conversation's text came from, for the taint checks of later calls.
    sources: TaintSources,
    messages: Vec<Message>,
    usage: Usage,
    calls: Vec<CallSummary>,
    guard: RepeatGuard,
    repeats: RepeatCount,
    tools_ended_round: Option<u32>,
    corrected: Option<DescribedCall>,
    /// The refused call the run's one retry turn was for.
    retried: Option<RefusedCall>,
    /// The round whose request must call the refused tool again
    /// ([`AgentConfig::retry_must_call`]).
    retry_round: Option<u32>,
    /// The echoed answer the run's one correction was for.
    echo_corrected: Option<Echo>,
    /// The unfounded answer the run's one correction was for.
    unfounded_corrected: Option<Unfounded>,
    /// What the phase rules are decided on (see [`crate::phases`]).
    phases: PhaseState,
    /// The tool choice of the round's request: a call outside it is refused unrun (a
    /// provider that cannot narrow a choice may still make one).
    choice: ToolChoice,
    /// Model turns requested so far.
    round: u32,
}

impl Agent {
    /// A loop whose calls go through `caller` as `principal`, with the caller's approval
    /// channel and mode (a terminal approver for `toolgate ask`, none for an eval).
    pub fn new(model: Arc<dyn Model>, caller: Caller, principal: Principal) -> Self {
        Agent {
            model,
            caller,
            principal,
            config: AgentConfig::default(),
            trace: Arc::new(NoTrace),
            observer: None,
        }
    }

    pub fn with_config(mut self, config: AgentConfig) -> Self {
        self.config = config;
        self
    }

    /// The trace for model turns and run events (tool calls are traced by the dispatcher).
    pub fn with_trace(mut self, trace: Arc<dyn TraceSink>) -> Self {
        self.trace = trace;
        self
    }

    pub fn with_observer(mut self, observer: Observer) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The tool list a run starts with: every visible tool, or the standing set when the run
    /// defers.
    pub fn tool_list(&self) -> ToolList {
        ToolList::plan(self.tool_definitions(), self.config.deferral.as_ref())
    }

    /// The tools this principal may see, as the model is shown them (`tool_search` among them
    /// when the registry offers it).
    pub fn tool_definitions(&self) -> Vec<ToolDefinition> {
        self.caller
            .registry()
            .model_views_for(&self.principal)
            .into_iter()
            .filter(|v| {
                self.config
                    .offered
                    .as_ref()
                    .is_none_or(|offered| offered.contains(&v.name))
            })
            .map(|v| ToolDefinition {
                name: v.name,
                description: v.description,
                input_schema: v.input_schema,
            })
            .collect()
    }

    /// The tools this principal may see that the policy's phases keep closed in run `run_id`
    /// now (none without phases): the dispatcher's own listing decides, so the list the model
    /// gets and the calls the dispatcher admits agree.
    fn closed_in_run(&self, run_id: &str) -> std::collections::BTreeSet<String> {
        let dispatcher = self.caller.dispatcher();
        if dispatcher.phases().is_none() {
            return std::collections::BTreeSet::new();
        }
        let open: std::collections::BTreeSet<&str> = dispatcher
            .run_catalogue(&self.principal, run_id)
            .into_iter()
            .map(|spec| spec.name.as_str())
            .collect();
        self.caller
            .registry()
            .visible_to(&self.principal)
            .filter(|spec| !open.contains(spec.name.as_str()))
            .map(|spec| spec.name.clone())
            .collect()
    }

    /// Runs one question to a stop.
    pub async fn ask(&self, run_id: &str, question: &str) -> RunResult {
        self.run(run_id, vec![Message::user_text(question)]).await
    }

    /// Continues a conversation (whose last message is the user's) to a stop. With the
    /// dispatcher's telemetry on, the run is one span and everything it does runs under it
    /// (see `telemetry.rs`).
    pub async fn run(&self, run_id: &str, history: Vec<Message>) -> RunResult {
        use opentelemetry::context::FutureExt as _;
        match self.start_run_span(run_id) {
            None => self.run_conversation(run_id, history).await,
            Some(cx) => {
                let result = self
                    .run_conversation(run_id, history)
                    .with_context(cx.clone())
                    .await;
                self.end_run_span(&cx, &result);
                result
            }
        }
    }

    async fn run_conversation(&self, run_id: &str, history: Vec<Message>) -> RunResult {
        let mut run = self.prepare_conversation(run_id, history).await;
        let stop = loop {
            if let Some(stop) = self.limit_reached(&run) {
                break stop;
            }
            let response = match self.request_turn(&mut run).await {
                Ok(response) => response,
                Err(stop) => break stop,
            };
            if response.tool_calls.is_empty() {
                if self.correct_described_call(&mut run, &response)
                    || self.correct_echoed_answer(&mut run, &response)
                    || self.retry_refused_call(&mut run)
                    || self.correct_unfounded_answer(&mut run, &response)
                {
                    continue;
                }
                break StopCause::FinalAnswer;
            }
            self.take_calls(&mut run, &response.tool_calls).await;
        };
        self.close_run(run, stop)
    }

    /// Stage 1: the run's tool list (with what the preload appended) and the taint sources of
    /// the history it continues.
    async fn prepare_conversation<'a>(
        &self,
        run_id: &'a str,
        history: Vec<Message>,
    ) -> RunState<'a> {
        let mut tools = self.tool_list();
        // Withheld before the preload, so a search cannot append what a phase keeps back.
        let phases = PhaseState::from_history(&history, read_first::last_user_text(&history));
        tools.withhold(&withheld(&self.config.offer_rules, &phases));
        // The policy's phases: what this run may reach now (a continued conversation's run may
        // already hold an approved plan).
        tools.follow_catalogue(&self.closed_in_run(run_id));
        let appended_tools = self.preload(run_id, &history, &mut tools).await;
        let sources = sources_from_history(&history);
        let mut run = RunState {
            run_id,
            tools,
            appended_tools,
            sources,
            messages: history,
            usage: Usage::default(),
            calls: Vec::new(),
            guard: RepeatGuard::default(),
            repeats: RepeatCount::default(),
            tools_ended_round: None,
            corrected: None,
            retried: None,
            retry_round: None,
            echo_corrected: None,
            unfounded_corrected: None,
            phases,
            choice: ToolChoice::Auto,
            round: 0,
        };
        self.read_first(&mut run).await;
        // The loop's own read may already make a phase rule hold.
        self.offer_released_tools(&mut run);
        run
    }

    /// Stage 2: the stop when no turn is left: the round cap, or the token budget spent.
    fn limit_reached(&self, run: &RunState<'_>) -> Option<StopCause> {
        if run.round >= self.config.max_rounds {
            return Some(StopCause::RoundCap { rounds: run.round });
        }
        // The policy's budget (`[budgets]`), shared with the run's calls and the principal's
        // other runs: nothing is added, only whether tokens are left is asked.
        if let Err(exhausted) =
            self.caller
                .dispatcher()
                .charge(&self.principal, run.run_id, Spend::Tokens(0))
        {
            return Some(StopCause::BudgetExhausted {
                detail: exhausted.to_string(),
            });
        }
        let budget = self.config.token_budget?;
        let used = run.usage.input_tokens + run.usage.output_tokens;
        (used >= budget).then_some(StopCause::TokenBudget { used, budget })
    }

    /// Stage 3: the next round's request, answered, observed, traced, counted and added to the
    /// conversation; a failed request is the run's stop.
    async fn request_turn(&self, run: &mut RunState<'_>) -> Result<ModelResponse, StopCause> {
        run.round += 1;
        let round = run.round;
        let request = self.turn_request(run);
        run.choice = request.tool_choice.clone();
        self.notify(&AgentEvent::Request {
            round,
            request: &request,
        });
        let chat = self.start_chat_span();
        let started = Instant::now();
        let response = match &chat {
            None => self.model.complete(&request).await,
            Some(chat) => {
                use opentelemetry::context::FutureExt as _;
                self.model
                    .complete(&request)
                    .with_context(chat.context())
                    .await
            }
        };
        let elapsed = started.elapsed();
        let turn = self.model_turn(run.run_id, round, &response, elapsed);
        if let Some(chat) = chat {
            self.end_chat_span(chat, &turn, response.as_ref().err(), elapsed);
        }
        self.trace.record(Arc::new(turn));
        let response = response.map_err(|e| model_error(&e))?;
        self.notify(&AgentEvent::Response {
            round,
            response: &response,
        });
        run.usage.input_tokens += response.usage.input_tokens;
        run.usage.output_tokens += response.usage.output_tokens;
        run.usage.cached_input_tokens += response.usage.cached_input_tokens;
        // Counted after the turn that used them; the next turn is refused once they run out.
        // A turn that finds them already spent by another run of the principal keeps its
        // answer: the check before the next turn stops the run.
        let _ = self.caller.dispatcher().charge(
            &self.principal,
            run.run_id,
            Spend::Tokens(response.usage.input_tokens + response.usage.output_tokens),
        );
        run.messages.push(Message::from_response(&response));
        Ok(response)
    }

    /// The request of the run's current round.
    fn turn_request(&self, run: &RunState<'_>) -> ModelRequest {
        let first_reads = (run.round == 1 && self.config.first_round_reads)
            .then(|| self.reads_offered(run))
            .filter(|reads| !reads.is_empty());
        let retry = run
            .retried
            .as_ref()
            .filter(|_| run.retry_round == Some(run.round));
        let tool_choice = if run.tools_ended_round.is_some() {
            ToolChoice::None
        } else if let Some(reads) = first_reads {
            ToolChoice::AnyOf(reads)
        } else if let Some(retry) = retry {
            ToolChoice::AnyOf(vec![retry.tool.clone()])
        } else if run.round == 1
            && self.config.first_round_must_call
            && !run.tools.definitions().is_empty()
        {
            ToolChoice::Any
        } else {
            ToolChoice::Auto
        };
        ModelRequest {
            system: self.config.system.clone(),
            messages: run.messages.clone(),
            tools: run.tools.definitions().to_vec(),
            tool_choice,
            max_tokens: self.config.max_tokens_per_turn,
            temperature: self.config.temperature,
            parallel_tool_calls: true,
            stable_tools: run.tools.is_deferred().then(|| run.tools.standing()),
            // One seed per round, from the run's: a run with the same seed repeats.
            seed: self
                .config
                .seed
                .map(|s| s.wrapping_add(u64::from(run.round))),
        }
    }

    /// The tools of the run's list that only read (the first round's set under
    /// [`AgentConfig::first_round_reads`]).
    fn reads_offered(&self, run: &RunState<'_>) -> Vec<String> {
        run.tools
            .definitions()
            .iter()
            .filter(|d| !matches!(self.call_kind(&d.name), CallKind::Writes))
            .map(|d| d.name.clone())
            .collect()
    }

    /// Stage 4, for a turn without calls: whether it gets the run's one described-call
    /// correction (a corrective user turn, observed and traced) instead of being the final
    /// answer.
    fn correct_described_call(&self, run: &mut RunState<'_>, response: &ModelResponse) -> bool {
        let Some(call) = self.to_correct(response, run) else {
            return false;
        };
        run.messages.push(Message::user_text(&correction_text(
            &call,
            !run.calls.is_empty(),
        )));
        self.notify(&AgentEvent::DescribedCallCorrected {
            round: run.round,
            call: &call,
        });
        self.trace.record(Arc::new(DescribedCallCorrected {
            run_id: run.run_id.into(),
            round: run.round,
            call: call.clone(),
        }));
        run.corrected = Some(call);
        true
    }

    /// The described call a final `response` should be corrected for: only with
    /// [`AgentConfig::correct_described_calls`], while the run is open to it (no correction yet
    /// and tool use not ended), and while a round and some token budget are left for the
    /// answer after it.
    fn to_correct(&self, response: &ModelResponse, run: &RunState<'_>) -> Option<DescribedCall> {
        let open = run.tools_ended_round.is_none() && run.corrected.is_none();
        if !self.config.correct_described_calls
            || !open
            || run.round >= self.config.max_rounds
            || !self.budget_left(run)
        {
            return None;
        }
        described_call(&response.text, run.tools.definitions())
    }

    /// Stage 4, for a turn without calls that was not a described call: whether it is an
    /// echo of the tool results that gets the run's one echo correction (a corrective user
    /// turn, observed and traced) instead of being the final answer.
    fn correct_echoed_answer(&self, run: &mut RunState<'_>, response: &ModelResponse) -> bool {
        if !self.may_correct_answer(
            run,
            self.config.correct_echoed_answers,
            run.echo_corrected.is_some(),
        ) {
            return false;
        }
        let results = tool_results(&run.messages, true);
        let Some(echo) = echoed_tool_output(&response.text, &results, &[]) else {
            return false;
        };
        run.messages.push(Message::user_text(ECHO_CORRECTION));
        self.notify(&AgentEvent::EchoedAnswerCorrected {
            round: run.round,
            echo: &echo,
        });
        self.trace.record(Arc::new(EchoedAnswerCorrected {
            run_id: run.run_id.into(),
            round: run.round,
            echo: echo.clone(),
        }));
        run.echo_corrected = Some(echo);
        true
    }

    /// Whether an answer correction whose lever is `enabled` and which is not yet `done` may
    /// send its one corrective turn: a round and some token budget are left for the answer
    /// after it. Tool use having ended does not close it (the answer needs no tools).
    fn may_correct_answer(&self, run: &RunState<'_>, enabled: bool, done: bool) -> bool {
        enabled && !done && run.round < self.config.max_rounds && self.budget_left(run)
    }

    /// Stage 4, for a turn without calls that no other correction took: whether it states
    /// nothing from the run's successful tool results and gets the run's one unfounded-answer
    /// correction (a corrective user turn, observed and traced) instead of being the final
    /// answer.
    fn correct_unfounded_answer(&self, run: &mut RunState<'_>, response: &ModelResponse) -> bool {
        if !self.may_correct_answer(
            run,
            self.config.correct_unfounded_answers,
            run.unfounded_corrected.is_some(),
        ) {
            return false;
        }
        let results = tool_results(&run.messages, false);
        let users = user_texts(&run.messages);
        let Some(unfounded) = unfounded_answer(&response.text, &users, &results) else {
            return false;
        };
        run.messages.push(Message::user_text(UNFOUNDED_CORRECTION));
        self.notify(&AgentEvent::UnfoundedAnswerCorrected {
            round: run.round,
            unfounded: &unfounded,
        });
        self.trace.record(Arc::new(UnfoundedAnswerCorrected {
            run_id: run.run_id.into(),
            round: run.round,
            unfounded: unfounded.clone(),
        }));
        run.unfounded_corrected = Some(unfounded);
        true
    }

    /// Stage 4, for a turn without calls that was not a described call: whether it gets the
    /// run's one retry of a refused call (a corrective user turn, observed and traced) instead of
    /// being the final answer.
    fn retry_refused_call(&self, run: &mut RunState<'_>) -> bool {
        let open = run.tools_ended_round.is_none() && run.retried.is_none();
        if !self.config.retry_refused_calls
            || !open
            || run.round >= self.config.max_rounds
            || !self.budget_left(run)
        {
            return false;
        }
        let Some(call) = refused_call(&run.calls, run.round.saturating_sub(1)) else {
            return false;
        };
        let must_call = self.config.retry_must_call;
        run.messages
            .push(Message::user_text(&retry_text(&call, must_call)));
        if must_call {
            run.retry_round = Some(run.round + 1);
        }
        self.notify(&AgentEvent::RefusedCallRetried {
            round: run.round,
            call: &call,
        });
        self.trace.record(Arc::new(RefusedCallRetried {
            run_id: run.run_id.into(),
            round: run.round,
            call: call.clone(),
        }));
        run.retried = Some(call);
        true
    }

    /// Whether some of the token budget is left (always, without one).
    fn budget_left(&self, run: &RunState<'_>) -> bool {
        self.config
            .token_budget
            .is_none_or(|b| run.usage.input_tokens + run.usage.output_tokens < b)
    }

    /// Stage 6: the run's result (the answer is the last message's text, after a final
    /// answer), its end traced, observers told.
    fn close_run(&self, run: RunState<'_>, stop: StopCause) -> RunResult {
        let answer = match stop {
            StopCause::FinalAnswer => run
                .messages
                .last()
                .map(Message::text)
                .filter(|t| !t.is_empty()),
            _ => None,
        };
        let result = RunResult {
            run_id: run.run_id.into(),
            answer,
            stop,
            rounds: run.round,
            usage: run.usage,
            calls: run.calls,
            transcript: run.messages,
            appended_tools: run.appended_tools,
            described_call: run.corrected,
            tools_ended_round: run.tools_ended_round,
            refused_call: run.retried,
            echoed_answer: run.echo_corrected,
            unfounded_answer: run.unfounded_corrected,
        };
        self.trace.record(Arc::new(RunEnd {
            run_id: run.run_id.into(),
            model: self.model.name(),
            stop: result.stop.clone(),
            rounds: result.rounds,
            usage: result.usage,
            tool_calls: result.calls.len(),
        }));
        self.notify(&AgentEvent::Finished { result: &result });
        result
    }

    fn notify(&self, event: &AgentEvent<'_>) {
        if let Some(observer) = &self.observer {
            observer(event);
        }
    }
}
