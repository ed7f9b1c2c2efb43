//! Stage 5 of the loop: one turn's tool calls taken and answered. Once tool use has ended
//! every call is refused unrun; otherwise the repeat guard answers exact repeats from memory,
//! the rest go through the dispatcher, and each outcome is recorded (taint sources, tools a
//! search found, the repeat guard's memory, the run's call summaries). The user turn that
//! carries the results, one per call id in the order asked, ends the stage, followed by the
//! end-of-tools notice when repeats end tool use.

use std::sync::Arc;

use serde_json::Value;
use toolgate_core::tool_search::{TOOL_SEARCH, names_in_result};
use toolgate_core::{CallOutcome, CallResult, ToolError};
use toolgate_llm::{ContentBlock, Message, ToolCall, ToolChoice, ToolResult};

use super::dispatch::lost_call;
use super::sources::learn_outcome;
use super::{
    Agent, AgentEvent, CallSummary, RepeatAnswered, RunCatalogueChanged, RunState, ToolsAppended,
    ToolsEnded, ToolsOffered,
};
use crate::grounding::{rule_for, seen_texts, ungrounded_error, ungrounded_figures};
use crate::phases::{not_offered_error, outside_choice_error, withheld};
use crate::repeat_guard::{
    CallKind, Earlier, Recorded, TOOLS_ENDED_TEXT, rememberable, repeat_text, unchanged_repeat_text,
};

impl Agent {
    /// Takes one turn's calls and adds the user turn carrying their results.
    pub(super) async fn take_calls(&self, run: &mut RunState<'_>, tool_calls: &[ToolCall]) {
        if run.tools_ended_round.is_some() {
            // Tool use has ended: nothing the model asks for runs any more.
            let (summaries, results) = refuse_after_tools_ended(run.round, tool_calls);
            run.calls.extend(summaries);
            run.messages.push(Message::tool_results(results));
            return;
        }
        let turn: Vec<(&str, &Value, CallKind)> = tool_calls
            .iter()
            .map(|c| (c.name.as_str(), &c.arguments, self.call_kind(&c.name)))
            .collect();
        let answered = run.guard.answers(&turn);
        // A tool a phase rule still withholds, or one outside the round's tool choice, is never
        // run (nor answered from memory).
        // Nor is a call that states a figure nothing in the conversation has shown (see
        // `crate::grounding`): each such call gets its refusal here.
        let refused: Vec<Option<ToolError>> =
            tool_calls.iter().map(|c| self.refusal(run, c)).collect();
        let to_run: Vec<ToolCall> = tool_calls
            .iter()
            .zip(&answered)
            .zip(&refused)
            .filter(|((_, a), r)| a.is_none() && r.is_none())
            .map(|((c, _), _)| c.clone())
            .collect();
        let mut outcomes = self
            .dispatch_all(run.run_id, &to_run, Arc::new(run.sources.clone()))
            .await
            .into_iter();
        let mut results = Vec::new();
        for (((call, &(_, _, kind)), answer), refusal) in
            tool_calls.iter().zip(&turn).zip(answered).zip(refused)
        {
            let result = match (answer, refusal) {
                (_, Some(error)) => refuse_unrun(run, call, &error),
                (Some(earlier), None) => self.answer_from_memory(run, call, kind, &earlier),
                (None, None) => {
                    // One outcome per call sent, in order; a missing one is a lost call.
                    let outcome = outcomes.next().unwrap_or_else(|| lost_call(call));
                    self.record_outcome(run, call, kind, &outcome)
                }
            };
            results.push(result);
        }
        let mut results = Message::tool_results(results);
        self.end_tools_after_repeats(run, &mut results);
        run.messages.push(results);
        self.offer_released_tools(run);
        self.follow_run_catalogue(run);
    }

    /// Reads the run's catalogue again after a round of calls (a plan approved opens a tool,
    /// a plan used closes it) and traces what changed.
    fn follow_run_catalogue(&self, run: &mut RunState<'_>) {
        let (opened, closed) = run.tools.follow_catalogue(&self.closed_in_run(run.run_id));
        if !opened.is_empty() || !closed.is_empty() {
            self.trace.record(Arc::new(RunCatalogueChanged {
                run_id: run.run_id.into(),
                round: run.round,
                opened,
                closed,
            }));
        }
    }

    /// Why `call` is refused unrun, if it is: its tool is withheld by a phase rule or outside
    /// the round's choice, or its arguments state figures the conversation has not shown.
    fn refusal(&self, run: &RunState<'_>, call: &ToolCall) -> Option<ToolError> {
        match &run.choice {
            ToolChoice::AnyOf(allowed) if !allowed.contains(&call.name) => {
                return Some(outside_choice_error(allowed, &call.name));
            }
            _ if run.tools.is_withheld(&call.name) || !run.choice.allows(&call.name) => {
                return Some(not_offered_error(&self.config.offer_rules, &call.name));
            }
            _ => {}
        }
        self.ungrounded(run, call)
    }

    /// The refusal of `call` when a grounding rule covers its tool and its arguments state
    /// figures the conversation has not shown; `None` when it may run.
    fn ungrounded(&self, run: &RunState<'_>, call: &ToolCall) -> Option<ToolError> {
        let rule = rule_for(&self.config.grounded_figures, &call.name)?;
        let missing = ungrounded_figures(&call.arguments, &seen_texts(&run.messages));
        (!missing.is_empty()).then(|| ungrounded_error(rule, &missing))
    }

    /// Appends the withheld tools whose phase rule now holds, for the next rounds, and traces
    /// them.
    pub(super) fn offer_released_tools(&self, run: &mut RunState<'_>) {
        if self.config.offer_rules.is_empty() {
            return;
        }
        let still = withheld(&self.config.offer_rules, &run.phases);
        let offered = run.tools.release(&still);
        if !offered.is_empty() {
            self.trace.record(Arc::new(ToolsOffered {
                run_id: run.run_id.into(),
                round: run.round,
                tools: offered,
            }));
        }
    }

    /// The result of an exact repeat the repeat guard answers with `earlier`'s (nothing runs),
    /// observed, traced and remembered.
    fn answer_from_memory(
        &self,
        run: &mut RunState<'_>,
        call: &ToolCall,
        kind: CallKind,
        earlier: &Earlier,
    ) -> ToolResult {
        self.answer_repeat(run.run_id, run.round, call, earlier);
        run.guard
            .record(&call.name, &call.arguments, kind, Recorded::Answered);
        run.repeats
            .observe(&call.name, &call.arguments, kind, true, run.round);
        let text = if self.config.end_tools_after_repeats {
            unchanged_repeat_text(earlier)
        } else {
            repeat_text(earlier)
        };
        run.calls.push(CallSummary {
            round: run.round,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            is_error: earlier.is_error,
            error: earlier.error.clone(),
            result_bytes: text.len(),
            duration_us: 0,
            answered_from_round: Some(earlier.round),
        });
        ToolResult {
            call_id: call.id.clone(),
            content: text,
            is_error: earlier.is_error,
        }
    }

    /// The result of a call that went through the dispatcher, with what it taught the run:
    /// its taint sources, the tools a search found, and the repeat guard's memory of it.
    pub(super) fn record_outcome(
        &self,
        run: &mut RunState<'_>,
        call: &ToolCall,
        kind: CallKind,
        outcome: &CallOutcome,
    ) -> ToolResult {
        learn_outcome(&mut run.sources, call, outcome);
        if !outcome.is_error() {
            run.phases.succeeded(&call.name);
        }
        if call.name == TOOL_SEARCH {
            self.append_found_tools(run, outcome);
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
        run.repeats
            .observe(&call.name, &call.arguments, kind, settled, run.round);
        run.guard.record(
            &call.name,
            &call.arguments,
            kind,
            Recorded::Ran {
                earlier: Earlier {
                    round: run.round,
                    text: text.clone(),
                    is_error: outcome.is_error(),
                    error: error.clone(),
                },
                rememberable: settled,
            },
        );
        run.calls.push(CallSummary {
            round: run.round,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            is_error: outcome.is_error(),
            error,
            result_bytes: outcome.record.result_bytes,
            duration_us: outcome.record.duration_us,
            answered_from_round: None,
        });
        ToolResult {
            call_id: call.id.clone(),
            content: text,
            is_error: outcome.is_error(),
        }
    }

    /// Appends the definitions a `tool_search` found to the run's tool list, for later rounds.
    fn append_found_tools(&self, run: &mut RunState<'_>, outcome: &CallOutcome) {
        let Some(observation) = outcome.observation() else {
            return;
        };
        let appended = run
            .tools
            .append_found(&names_in_result(&observation.content));
        if !appended.is_empty() {
            self.trace.record(Arc::new(ToolsAppended {
                run_id: run.run_id.into(),
                round: run.round,
                tools: appended.clone(),
            }));
        }
        run.appended_tools.extend(appended);
    }

    /// Under [`super::AgentConfig::end_tools_after_repeats`], at the run's second exact repeat:
    /// tool use ends, with a notice after this turn's `results`, observed and traced.
    fn end_tools_after_repeats(&self, run: &mut RunState<'_>, results: &mut Message) {
        if !self.config.end_tools_after_repeats || run.repeats.repeats() < 2 {
            return;
        }
        // Text after the results: every adapter renders it as the user's turn.
        results.content.push(ContentBlock::Text {
            text: TOOLS_ENDED_TEXT.into(),
        });
        run.tools_ended_round = Some(run.round);
        self.notify(&AgentEvent::ToolsEnded { round: run.round });
        self.trace.record(Arc::new(ToolsEnded {
            run_id: run.run_id.into(),
            round: run.round,
            repeats: run.repeats.repeats(),
        }));
    }

    /// How the repeat guard sees a call to `tool`.
    pub(super) fn call_kind(&self, tool: &str) -> CallKind {
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
}

/// The result of a call refused unrun with `error`, summarised for the run.
fn refuse_unrun(run: &mut RunState<'_>, call: &ToolCall, error: &ToolError) -> ToolResult {
    let text = error
        .to_model_value(toolgate_core::ErrorStyle::Teaching)
        .to_string();
    run.calls.push(CallSummary {
        round: run.round,
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: call.arguments.clone(),
        is_error: true,
        error: Some(error.code.as_str().to_string()),
        result_bytes: text.len(),
        duration_us: 0,
        answered_from_round: None,
    });
    ToolResult {
        call_id: call.id.clone(),
        content: text,
        is_error: true,
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
