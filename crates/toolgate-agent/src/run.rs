//! The tool-call loop.
//!
//! Guarantees: every call the model asks for goes through the dispatcher (the loop never
//! touches a handler), except an exact repeat of a read that declares `answers_repeats`
//! with nothing written since, which is answered with the earlier result under a notice and
//! traced as `repeat_answered` (see [`crate::repeat_guard`]); every call id gets exactly one result, in the order asked, errors
//! included as `is_error` results the model can act on; consecutive calls to parallel-safe
//! tools run concurrently, anything else runs alone and in order; the run stops on a final
//! answer, the round cap or the token budget, and says which.
//!
//! Tool definitions: every tool the principal may call, sent identically every round; past
//! [`AgentConfig::deferral`]'s threshold, when the registry offers `tool_search`, the standing
//! set (`tool_search` and the always-loaded tools) instead, and the definitions a search finds
//! are appended for later rounds, never swapped in (see [`crate::deferral`]), so each request's
//! tool list begins with every byte of the one before.
//!
//! Three levers, each off by default (off, the loop behaves exactly as without them), each
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

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};
use toolgate_core::taint::{TaintSources, UntrustedSource};
use toolgate_core::tool_search::{TOOL_SEARCH, names_in_result};
use toolgate_core::trace::{NoTrace, TraceEvent, TraceSink};
use toolgate_core::{CallOutcome, CallRequest, CallResult, Caller, Observation, Origin, Principal};
use toolgate_llm::{
    ContentBlock, LlmError, Message, Model, ModelRequest, ModelResponse, Role, StopReason,
    ToolCall, ToolChoice, ToolDefinition, ToolResult, Usage,
};

use crate::deferral::{DeferralConfig, ToolList};
use crate::described_call::{DescribedCall, correction_text, described_call};
use crate::repeat_guard::{
    CallKind, Earlier, Recorded, RepeatCount, RepeatGuard, TOOLS_ENDED_TEXT, rememberable,
    repeat_text, unchanged_repeat_text,
};

/// What the model is told before the user speaks, unless a caller says otherwise. Measured on
/// the embedded model: shorter or gentler wordings made it describe how to use the tools
/// instead of calling them or stating the answer.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are an assistant with tools. You cannot see the user's data: call a \
tool to look it up before you answer, and never guess. If a tool returns an error, fix your call and try again. \
When tool results answer the question, reply with the answer in one short sentence.";

/// Default cap on model turns per run.
pub const DEFAULT_MAX_ROUNDS: u32 = 8;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub max_rounds: u32,
    /// Stop once input + output tokens across the run exceed this.
    pub token_budget: Option<u64>,
    pub max_tokens_per_turn: u32,
    pub temperature: Option<f32>,
    pub system: Option<String>,
    /// When to send a standing set plus `tool_search` instead of every definition; `None`
    /// never defers. Only a registry that offers `tool_search` can defer.
    pub deferral: Option<DeferralConfig>,
    /// Show the model only these tools (the others stay callable by tools that call tools,
    /// such as `code_execution`'s scripts); `None` shows every tool of the principal.
    pub offered: Option<Vec<String>>,
    /// The run's sampling seed (with a `temperature` that samples); each round's request gets
    /// it plus the round number.
    pub seed: Option<u64>,
    /// Give a final answer that describes a tool call instead of making it one corrective
    /// turn per run (see the module documentation).
    pub correct_described_calls: bool,
    /// End tool use for the run at its second exact repeat of a read with nothing written
    /// since, and word the repeat notice plainly (see the module documentation).
    pub end_tools_after_repeats: bool,
    /// Ask for a tool call (`tool_choice: Any`) in the run's first round.
    pub first_round_must_call: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_rounds: DEFAULT_MAX_ROUNDS,
            token_budget: None,
            max_tokens_per_turn: 1024,
            temperature: None,
            system: Some(DEFAULT_SYSTEM_PROMPT.into()),
            deferral: Some(DeferralConfig::default()),
            offered: None,
            seed: None,
            correct_described_calls: false,
            end_tools_after_repeats: false,
            first_round_must_call: false,
        }
    }
}

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StopCause {
    FinalAnswer,
    RoundCap { rounds: u32 },
    TokenBudget { used: u64, budget: u64 },
    ModelError { message: String, retryable: bool },
}

impl StopCause {
    pub fn describe(&self) -> String {
        match self {
            StopCause::FinalAnswer => "final answer".into(),
            StopCause::RoundCap { rounds } => {
                format!("round cap reached ({rounds} model turns) without a final answer")
            }
            StopCause::TokenBudget { used, budget } => {
                format!("token budget exhausted ({used} of {budget} tokens)")
            }
            StopCause::ModelError { message, .. } => format!("model error: {message}"),
        }
    }
}

/// One tool call as it happened.
#[derive(Debug, Clone, Serialize)]
pub struct CallSummary {
    pub round: u32,
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub is_error: bool,
    /// The error code, when it failed.
    pub error: Option<String>,
    pub result_bytes: usize,
    pub duration_us: u64,
    /// The round whose identical call answered this one (it did not run again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_from_round: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub run_id: String,
    pub answer: Option<String>,
    pub stop: StopCause,
    pub rounds: u32,
    pub usage: Usage,
    pub calls: Vec<CallSummary>,
    /// The whole conversation, for transcripts and follow-up turns.
    pub transcript: Vec<Message>,
    /// Tools whose definitions searches appended to the list, in order (empty when the run
    /// did not defer).
    pub appended_tools: Vec<String>,
    /// The described call the run corrected, when [`AgentConfig::correct_described_calls`]
    /// gave its one corrective turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub described_call: Option<DescribedCall>,
    /// The round whose repeat ended tool use, under [`AgentConfig::end_tools_after_repeats`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_ended_round: Option<u32>,
}

/// Things worth showing a person while a run goes on.
#[derive(Debug, Clone)]
pub enum AgentEvent<'a> {
    Request {
        round: u32,
        request: &'a ModelRequest,
    },
    Response {
        round: u32,
        response: &'a ModelResponse,
    },
    ToolCall {
        call: &'a ToolCall,
    },
    ToolResult {
        call: &'a ToolCall,
        outcome: &'a CallOutcome,
    },
    /// An exact repeat answered with an earlier round's result instead of running (no
    /// `ToolCall` or `ToolResult` event comes for it).
    RepeatAnswered {
        call: &'a ToolCall,
        earlier: &'a Earlier,
    },
    /// A final answer that described a call to `call.tool` instead of making it; the loop
    /// sends one corrective turn and asks again.
    DescribedCallCorrected {
        round: u32,
        call: &'a DescribedCall,
    },
    /// The run repeated a read a second time with nothing written since: tool use ends, and
    /// the model must answer.
    ToolsEnded {
        round: u32,
    },
    Finished {
        result: &'a RunResult,
    },
}

pub type Observer = Arc<dyn Fn(&AgentEvent<'_>) + Send + Sync>;

pub struct Agent {
    model: Arc<dyn Model>,
    caller: Caller,
    principal: Principal,
    config: AgentConfig,
    trace: Arc<dyn TraceSink>,
    observer: Option<Observer>,
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

    /// Runs one question to a stop.
    pub async fn ask(&self, run_id: &str, question: &str) -> RunResult {
        self.run(run_id, vec![Message::user_text(question)]).await
    }

    /// Continues a conversation (whose last message is the user's) to a stop.
    pub async fn run(&self, run_id: &str, history: Vec<Message>) -> RunResult {
        let mut tools = self.tool_list();
        let mut appended_tools = self.preload(run_id, &history, &mut tools).await;
        let mut sources = sources_from_history(&history);
        let mut messages = history;
        let mut usage = Usage::default();
        let mut calls = Vec::new();
        let mut guard = RepeatGuard::default();
        let mut repeats = RepeatCount::default();
        let mut tools_ended_round: Option<u32> = None;
        let mut corrected: Option<DescribedCall> = None;
        let mut round = 0;
        let stop = loop {
            if round >= self.config.max_rounds {
                break StopCause::RoundCap { rounds: round };
            }
            if let Some(budget) = self.config.token_budget {
                let used = usage.input_tokens + usage.output_tokens;
                if used >= budget {
                    break StopCause::TokenBudget { used, budget };
                }
            }
            round += 1;
            let tool_choice = if tools_ended_round.is_some() {
                ToolChoice::None
            } else if round == 1
                && self.config.first_round_must_call
                && !tools.definitions().is_empty()
            {
                ToolChoice::Any
            } else {
                ToolChoice::Auto
            };
            let request = ModelRequest {
                system: self.config.system.clone(),
                messages: messages.clone(),
                tools: tools.definitions().to_vec(),
                tool_choice,
                max_tokens: self.config.max_tokens_per_turn,
                temperature: self.config.temperature,
                parallel_tool_calls: true,
                stable_tools: tools.is_deferred().then(|| tools.standing()),
                // One seed per round, from the run's: a run with the same seed repeats.
                seed: self.config.seed.map(|s| s.wrapping_add(u64::from(round))),
            };
            self.notify(&AgentEvent::Request {
                round,
                request: &request,
            });
            let started = Instant::now();
            let response = self.model.complete(&request).await;
            self.trace_model_turn(run_id, round, &response, started);
            let response = match response {
                Ok(r) => r,
                Err(e) => break model_error(&e),
            };
            self.notify(&AgentEvent::Response {
                round,
                response: &response,
            });
            usage.input_tokens += response.usage.input_tokens;
            usage.output_tokens += response.usage.output_tokens;
            usage.cached_input_tokens += response.usage.cached_input_tokens;
            messages.push(Message::from_response(&response));
            if response.tool_calls.is_empty() {
                let open = tools_ended_round.is_none() && corrected.is_none();
                if let Some(call) = self.to_correct(&response, &tools, &usage, round, open) {
                    messages.push(Message::user_text(&correction_text(
                        &call,
                        !calls.is_empty(),
                    )));
                    self.notify(&AgentEvent::DescribedCallCorrected { round, call: &call });
                    self.trace.record(Arc::new(DescribedCallCorrected {
                        run_id: run_id.into(),
                        round,
                        call: call.clone(),
                    }));
                    corrected = Some(call);
                    continue;
                }
                break StopCause::FinalAnswer;
            }
            if tools_ended_round.is_some() {
                // Tool use has ended: nothing the model asks for runs any more.
                let (summaries, results) = refuse_after_tools_ended(round, &response.tool_calls);
                calls.extend(summaries);
                messages.push(Message::tool_results(results));
                continue;
            }
            let turn: Vec<(&str, &Value, CallKind)> = response
                .tool_calls
                .iter()
                .map(|c| (c.name.as_str(), &c.arguments, self.call_kind(&c.name)))
                .collect();
            let answered = guard.answers(&turn);
            let to_run: Vec<ToolCall> = response
                .tool_calls
                .iter()
                .zip(&answered)
                .filter(|(_, a)| a.is_none())
                .map(|(c, _)| c.clone())
                .collect();
            let mut outcomes = self
                .dispatch_all(run_id, &to_run, Arc::new(sources.clone()))
                .await
                .into_iter();
            let mut results = Vec::new();
            for ((call, &(_, _, kind)), answer) in
                response.tool_calls.iter().zip(&turn).zip(answered)
            {
                if let Some(earlier) = answer {
                    self.answer_repeat(run_id, round, call, &earlier);
                    guard.record(&call.name, &call.arguments, kind, Recorded::Answered);
                    repeats.observe(&call.name, &call.arguments, kind, true, round);
                    let text = if self.config.end_tools_after_repeats {
                        unchanged_repeat_text(&earlier)
                    } else {
                        repeat_text(&earlier)
                    };
                    calls.push(CallSummary {
                        round,
                        call_id: call.id.clone(),
                        tool: call.name.clone(),
                        arguments: call.arguments.clone(),
                        is_error: earlier.is_error,
                        error: earlier.error.clone(),
                        result_bytes: text.len(),
                        duration_us: 0,
                        answered_from_round: Some(earlier.round),
                    });
                    results.push(ToolResult {
                        call_id: call.id.clone(),
                        content: text,
                        is_error: earlier.is_error,
                    });
                    continue;
                }
                // One outcome per call sent, in order; a missing one is a lost call.
                let outcome = outcomes.next().unwrap_or_else(|| lost_call(call));
                if let Some(observation) = outcome.observation() {
                    learn_sources(&mut sources, &call.name, &call.id, observation);
                }
                if let CallResult::Failed(error) = &outcome.result {
                    learn_untrusted(&mut sources, &call.name, &call.id, &error.untrusted);
                }
                // What the call's nested calls read (a script's page) taints what follows,
                // printed or not.
                for source in &outcome.nested_untrusted {
                    sources.add_untrusted(source.clone());
                }
                if call.name == TOOL_SEARCH
                    && let Some(observation) = outcome.observation()
                {
                    let appended = tools.append_found(&names_in_result(&observation.content));
                    if !appended.is_empty() {
                        self.trace.record(Arc::new(ToolsAppended {
                            run_id: run_id.into(),
                            round,
                            tools: appended.clone(),
                        }));
                    }
                    appended_tools.extend(appended);
                }
                let text = outcome.model_text();
                let error = outcome.record.error().map(|c| c.as_str().to_string());
                // A call whose nested calls went to a writing tool (a script's) wrote.
                let kind = if outcome.record.nested_writes {
                    CallKind::Writes
                } else {
                    kind
                };
                let settled = match &outcome.result {
                    CallResult::Done(_) => rememberable(None),
                    CallResult::Failed(e) => rememberable(Some(e.code)),
                    CallResult::ApprovalRequired(_) => false,
                };
                repeats.observe(&call.name, &call.arguments, kind, settled, round);
                guard.record(
                    &call.name,
                    &call.arguments,
                    kind,
                    Recorded::Ran {
                        earlier: Earlier {
                            round,
                            text: text.clone(),
                            is_error: outcome.is_error(),
                            error: error.clone(),
                        },
                        rememberable: settled,
                    },
                );
                calls.push(CallSummary {
                    round,
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                    is_error: outcome.is_error(),
                    error,
                    result_bytes: outcome.record.result_bytes,
                    duration_us: outcome.record.duration_us,
                    answered_from_round: None,
                });
                results.push(ToolResult {
                    call_id: call.id.clone(),
                    content: text,
                    is_error: outcome.is_error(),
                });
            }
            let mut results = Message::tool_results(results);
            if self.config.end_tools_after_repeats && repeats.repeats() >= 2 {
                // Text after the results: every adapter renders it as the user's turn.
                results.content.push(ContentBlock::Text {
                    text: TOOLS_ENDED_TEXT.into(),
                });
                tools_ended_round = Some(round);
                self.notify(&AgentEvent::ToolsEnded { round });
                self.trace.record(Arc::new(ToolsEnded {
                    run_id: run_id.into(),
                    round,
                    repeats: repeats.repeats(),
                }));
            }
            messages.push(results);
        };
        let answer = match stop {
            StopCause::FinalAnswer => messages.last().map(message_text).filter(|t| !t.is_empty()),
            _ => None,
        };
        let result = RunResult {
            run_id: run_id.into(),
            answer,
            stop,
            rounds: round,
            usage,
            calls,
            transcript: messages,
            appended_tools,
            described_call: corrected,
            tools_ended_round,
        };
        self.trace.record(Arc::new(RunEnd {
            run_id: run_id.into(),
            model: self.model.name(),
            stop: result.stop.clone(),
            rounds: result.rounds,
            usage: result.usage,
            tool_calls: result.calls.len(),
        }));
        self.notify(&AgentEvent::Finished { result: &result });
        result
    }

    /// Runs one turn's calls: consecutive parallel-safe calls together, others alone, results
    /// in the order asked.
    /// Before the first request of a deferring run: the tools the `tool_search` index ranks
    /// first for the user's last message, appended after the standing set (the search goes
    /// through the dispatcher as the run's principal, so it lists only what the caller may
    /// call). Returns the names appended; none when the run does not defer, preloads nothing,
    /// or the search fails (the run then starts with the standing set, as without preload).
    async fn preload(
        &self,
        run_id: &str,
        history: &[Message],
        tools: &mut ToolList,
    ) -> Vec<String> {
        let count = self.config.deferral.as_ref().map_or(0, |d| d.preload);
        if !tools.is_deferred() || count == 0 {
            return Vec::new();
        }
        let message: Vec<&str> = history
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| {
                m.content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let message = message.join(" ");
        let Some(query) = crate::deferral::preload_query(&message) else {
            return Vec::new();
        };
        let limit = u8::try_from(count).unwrap_or(u8::MAX);
        let request = CallRequest::new(
            self.principal.clone(),
            run_id,
            TOOL_SEARCH,
            json!({"query": query, "limit": limit}),
        )
        .with_call_id("preload")
        .with_origin(Origin::Loop);
        let outcome = self.caller.call(request).await;
        let Some(observation) = outcome.observation() else {
            return Vec::new();
        };
        let appended = tools.append_found(&names_in_result(&observation.content));
        if !appended.is_empty() {
            self.trace.record(Arc::new(ToolsAppended {
                run_id: run_id.into(),
                round: 0,
                tools: appended.clone(),
            }));
        }
        appended
    }

    async fn dispatch_all(
        &self,
        run_id: &str,
        tool_calls: &[ToolCall],
        sources: Arc<TaintSources>,
    ) -> Vec<CallOutcome> {
        let mut outcomes: Vec<Option<CallOutcome>> = vec![None; tool_calls.len()];
        let mut index = 0;
        while index < tool_calls.len() {
            let group_end = if self.parallel_safe(&tool_calls[index].name) {
                tool_calls[index..]
                    .iter()
                    .position(|c| !self.parallel_safe(&c.name))
                    .map_or(tool_calls.len(), |p| index + p)
            } else {
                index + 1
            };
            let mut set = tokio::task::JoinSet::new();
            for (i, call) in tool_calls.iter().enumerate().take(group_end).skip(index) {
                self.notify(&AgentEvent::ToolCall { call });
                let caller = self.caller.clone();
                let request = CallRequest::new(
                    self.principal.clone(),
                    run_id,
                    &call.name,
                    call.arguments.clone(),
                )
                .with_call_id(&call.id)
                .with_origin(Origin::Loop)
                .with_taint_sources(Arc::clone(&sources));
                set.spawn(async move { (i, caller.call(request).await) });
            }
            while let Some(joined) = set.join_next().await {
                if let Ok((i, outcome)) = joined {
                    outcomes[i] = Some(outcome);
                }
            }
            index = group_end;
        }
        tool_calls
            .iter()
            .zip(outcomes)
            .map(|(call, outcome)| {
                // A dispatcher task that panicked still owes the model a result for its id.
                let outcome = outcome.unwrap_or_else(|| lost_call(call));
                self.notify(&AgentEvent::ToolResult {
                    call,
                    outcome: &outcome,
                });
                outcome
            })
            .collect()
    }

    /// The described call a final `response` should be corrected for: only with
    /// [`AgentConfig::correct_described_calls`], while `open` (no correction yet this run and
    /// tool use not ended), and while a round and some token budget are left for the answer
    /// after it.
    fn to_correct(
        &self,
        response: &ModelResponse,
        tools: &ToolList,
        usage: &Usage,
        round: u32,
        open: bool,
    ) -> Option<DescribedCall> {
        let budget_left = self
            .config
            .token_budget
            .is_none_or(|b| usage.input_tokens + usage.output_tokens < b);
        if !self.config.correct_described_calls
            || !open
            || round >= self.config.max_rounds
            || !budget_left
        {
            return None;
        }
        described_call(&response.text, tools.definitions())
    }

    /// How the repeat guard sees a call to `tool`.
    fn call_kind(&self, tool: &str) -> CallKind {
        match self.caller.registry().get(tool) {
            Some(t) if t.spec.executor.writes => CallKind::Writes,
            Some(t) if t.spec.executor.answers_repeats => CallKind::AnswersRepeats,
            Some(_) => CallKind::Read,
            None => CallKind::Writes,
        }
    }

    /// Tells observers and the trace that `call` was answered from `earlier`.
    fn answer_repeat(&self, run_id: &str, round: u32, call: &ToolCall, earlier: &Earlier) {
        self.notify(&AgentEvent::RepeatAnswered { call, earlier });
        self.trace.record(Arc::new(RepeatAnswered {
            run_id: run_id.into(),
            round,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            earlier_round: earlier.round,
        }));
    }

    fn parallel_safe(&self, tool: &str) -> bool {
        self.caller
            .registry()
            .get(tool)
            .is_some_and(|t| t.spec.executor.parallel_safe)
    }

    fn notify(&self, event: &AgentEvent<'_>) {
        if let Some(observer) = &self.observer {
            observer(event);
        }
    }

    fn trace_model_turn(
        &self,
        run_id: &str,
        round: u32,
        response: &Result<ModelResponse, LlmError>,
        started: Instant,
    ) {
        let turn = match response {
            Ok(r) => ModelTurn {
                run_id: run_id.into(),
                round,
                model: self.model.name(),
                duration_ms: started.elapsed().as_millis() as u64,
                outcome: Ok(TurnSummary {
                    response_model: r.model.clone(),
                    usage: r.usage,
                    finish_reason: r.stop_reason.clone(),
                    tool_calls: r.tool_calls.iter().map(|c| c.name.clone()).collect(),
                }),
            },
            Err(e) => ModelTurn {
                run_id: run_id.into(),
                round,
                model: self.model.name(),
                duration_ms: started.elapsed().as_millis() as u64,
                outcome: Err(e.to_string()),
            },
        };
        self.trace.record(Arc::new(turn));
    }
}

/// One model turn, as traced: the request's model, its token usage and what it asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTurn {
    pub run_id: String,
    pub round: u32,
    pub model: String,
    pub duration_ms: u64,
    /// What the model answered, or why the turn failed.
    pub outcome: Result<TurnSummary, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnSummary {
    pub response_model: String,
    pub usage: Usage,
    pub finish_reason: StopReason,
    pub tool_calls: Vec<String>,
}

impl TraceEvent for ModelTurn {
    fn kind(&self) -> &'static str {
        "model_turn"
    }

    fn attributes(&self) -> Value {
        let mut event = json!({
            "run_id": self.run_id,
            "round": self.round,
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self.model,
            "duration_ms": self.duration_ms,
        });
        match &self.outcome {
            Ok(r) => {
                event["gen_ai.response.model"] = json!(r.response_model);
                event["gen_ai.usage.input_tokens"] = json!(r.usage.input_tokens);
                event["gen_ai.usage.output_tokens"] = json!(r.usage.output_tokens);
                event["cached_input_tokens"] = json!(r.usage.cached_input_tokens);
                event["gen_ai.response.finish_reasons"] = json!([r.finish_reason]);
                event["tool_calls"] = json!(r.tool_calls);
            }
            Err(e) => {
                event["error.type"] = json!(e);
            }
        }
        event
    }
}

/// Definitions a tool search found, appended to the run's tool list from the next round on.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsAppended {
    pub run_id: String,
    /// The round whose search found them (0: the runtime's preload for the user's message,
    /// before the first request).
    pub round: u32,
    pub tools: Vec<String>,
}

impl TraceEvent for ToolsAppended {
    fn kind(&self) -> &'static str {
        "tools_appended"
    }

    fn attributes(&self) -> Value {
        json!({"run_id": self.run_id, "round": self.round, "tools": self.tools})
    }
}

/// An exact repeat the loop answered with an earlier round's result (nothing ran).
#[derive(Debug, Clone, PartialEq)]
pub struct RepeatAnswered {
    pub run_id: String,
    pub round: u32,
    pub call_id: String,
    pub tool: String,
    pub earlier_round: u32,
}

impl TraceEvent for RepeatAnswered {
    fn kind(&self) -> &'static str {
        "repeat_answered"
    }

    fn attributes(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "round": self.round,
            "gen_ai.tool.call.id": self.call_id,
            "gen_ai.tool.name": self.tool,
            "earlier_round": self.earlier_round,
        })
    }
}

/// A final answer that described a call instead of making it, answered with the run's one
/// corrective turn.
#[derive(Debug, Clone, PartialEq)]
pub struct DescribedCallCorrected {
    pub run_id: String,
    pub round: u32,
    pub call: DescribedCall,
}

impl TraceEvent for DescribedCallCorrected {
    fn kind(&self) -> &'static str {
        "described_call_corrected"
    }

    fn attributes(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "round": self.round,
            "gen_ai.tool.name": self.call.tool,
            "evidence": self.call.evidence,
        })
    }
}

/// Repeats ended tool use for the rest of the run: later requests say `tool_choice: None`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsEnded {
    pub run_id: String,
    /// The round whose repeat ended them.
    pub round: u32,
    /// Exact repeats counted by then.
    pub repeats: u32,
}

impl TraceEvent for ToolsEnded {
    fn kind(&self) -> &'static str {
        "tools_ended"
    }

    fn attributes(&self) -> Value {
        json!({"run_id": self.run_id, "round": self.round, "repeats": self.repeats})
    }
}

/// The end of a run, as traced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    pub run_id: String,
    pub model: String,
    pub stop: StopCause,
    pub rounds: u32,
    pub usage: Usage,
    pub tool_calls: usize,
}

impl TraceEvent for RunEnd {
    fn kind(&self) -> &'static str {
        "run_end"
    }

    fn attributes(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "gen_ai.request.model": self.model,
            "stop": self.stop,
            "rounds": self.rounds,
            "gen_ai.usage.input_tokens": self.usage.input_tokens,
            "gen_ai.usage.output_tokens": self.usage.output_tokens,
            "cached_input_tokens": self.usage.cached_input_tokens,
            "tool_calls": self.tool_calls,
        })
    }
}

fn model_error(e: &LlmError) -> StopCause {
    StopCause::ModelError {
        message: e.to_string(),
        retryable: e.retryable(),
    }
}

/// Results for calls made after tool use ended: none ran; each gets a `canceled` error.
fn refuse_after_tools_ended(
    round: u32,
    tool_calls: &[ToolCall],
) -> (Vec<CallSummary>, Vec<ToolResult>) {
    let error = toolgate_core::ToolError::new(
        toolgate_core::ErrorCode::Canceled,
        "not run: tool use has ended for this run; answer the user from the tool results you already have",
    );
    let text = error
        .to_model_value(toolgate_core::ErrorStyle::Teaching)
        .to_string();
    tool_calls
        .iter()
        .map(|call| {
            let summary = CallSummary {
                round,
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
                is_error: true,
                error: Some(toolgate_core::ErrorCode::Canceled.as_str().to_string()),
                result_bytes: text.len(),
                duration_us: 0,
                answered_from_round: None,
            };
            let result = ToolResult {
                call_id: call.id.clone(),
                content: text.clone(),
                is_error: true,
            };
            (summary, result)
        })
        .unzip()
}

fn lost_call(call: &ToolCall) -> CallOutcome {
    // Built through the public path so the record is complete: an unknown-tool call against an
    // empty registry would lie about the tool; a dedicated internal error is honest.
    let error = toolgate_core::ToolError::internal(
        "the call was lost before it finished; it may not have run",
    );
    CallOutcome {
        result: CallResult::Failed(error),
        record: Arc::new(toolgate_core::DecisionRecord::lost(&call.id, &call.name)),
        error_style: toolgate_core::ErrorStyle::Teaching,
        nested_untrusted: Vec::new(),
    }
}

/// Where the text of a conversation so far came from: the user's text blocks, and the trusted
/// and untrusted parts of earlier tool results (as the model read them: the `result` and
/// `untrusted_content` of an observation's JSON). An error result is neither: it quotes what
/// the model wrote.
pub fn sources_from_history(history: &[Message]) -> TaintSources {
    let mut sources = TaintSources::new();
    let mut tools = std::collections::HashMap::new();
    for message in history {
        for block in &message.content {
            match block {
                ContentBlock::Text { text } if message.role == Role::User => sources.add_user(text),
                ContentBlock::Text { .. } => {}
                ContentBlock::ToolCall(call) => {
                    tools.insert(call.id.clone(), call.name.clone());
                }
                ContentBlock::ToolResult(result) if !result.is_error => {
                    let Ok(view) = serde_json::from_str::<Value>(&result.content) else {
                        continue;
                    };
                    let tool = tools.get(&result.call_id).map_or("a tool", String::as_str);
                    if let Some(trusted) = view.get("result") {
                        sources.add_trusted(&trusted.to_string());
                    }
                    let untrusted = view.get("untrusted_content");
                    learn_untrusted_json(&mut sources, untrusted, tool, &result.call_id);
                }
                // An error's own words are ours, but a remote server's words it carries
                // (`error.untrusted_content`) are untrusted like any result's.
                ContentBlock::ToolResult(result) => {
                    let Ok(view) = serde_json::from_str::<Value>(&result.content) else {
                        continue;
                    };
                    let tool = tools.get(&result.call_id).map_or("a tool", String::as_str);
                    let carried = view.pointer("/error/untrusted_content");
                    learn_untrusted_json(&mut sources, carried, tool, &result.call_id);
                }
            }
        }
    }
    sources
}

/// Adds each `{"source", "text"}` of an `untrusted_content` array as the model read it.
fn learn_untrusted_json(
    sources: &mut TaintSources,
    texts: Option<&Value>,
    tool: &str,
    call_id: &str,
) {
    for text in texts.and_then(Value::as_array).into_iter().flatten() {
        let origin = text.get("source").and_then(Value::as_str).unwrap_or("");
        let body = text.get("text").and_then(Value::as_str).unwrap_or("");
        sources.add_untrusted(UntrustedSource::new(origin, body, tool, call_id));
    }
}

/// Adds what one observation told the model: its trusted result and each untrusted text.
fn learn_sources(sources: &mut TaintSources, tool: &str, call_id: &str, observation: &Observation) {
    sources.add_trusted(&observation.content.to_string());
    learn_untrusted(sources, tool, call_id, &observation.untrusted);
}

/// Adds the untrusted texts a failed call carried (a remote server's error words).
fn learn_untrusted(
    sources: &mut TaintSources,
    tool: &str,
    call_id: &str,
    texts: &[toolgate_core::observation::UntrustedText],
) {
    for text in texts {
        sources.add_untrusted(UntrustedSource::new(
            &text.source,
            &text.text,
            tool,
            call_id,
        ));
    }
}

/// The text of a message's text blocks.
pub fn message_text(message: &Message) -> String {
    message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
