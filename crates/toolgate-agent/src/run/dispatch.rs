//! The calls of one turn sent through the dispatcher: consecutive parallel-safe calls
//! together, any other call alone and in order, one outcome per call in the order asked (a
//! call whose task was lost gets an `internal` error outcome, never a missing result). Each
//! call's task runs under the span current here (the run's), so the call's span is its child.

use std::sync::Arc;

use toolgate_core::taint::TaintSources;
use toolgate_core::{CallOutcome, CallRequest, CallResult, Origin};
use toolgate_llm::ToolCall;

use super::{Agent, AgentEvent};

impl Agent {
    /// Runs one turn's calls: consecutive parallel-safe calls together, others alone, results
    /// in the order asked.
    pub(super) async fn dispatch_all(
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
                let task = async move { (i, caller.call(request).await) };
                // A task of its own does not inherit the current span: the run's is handed on.
                if self.caller.dispatcher().telemetry().is_on() {
                    use opentelemetry::context::FutureExt as _;
                    set.spawn(task.with_context(opentelemetry::Context::current()));
                } else {
                    set.spawn(task);
                }
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

    fn parallel_safe(&self, tool: &str) -> bool {
        self.caller
            .registry()
            .get(tool)
            .is_some_and(|t| t.spec.executor.parallel_safe)
    }
}

/// The outcome owed to a call whose result was lost (its dispatcher task panicked).
pub(super) fn lost_call(call: &ToolCall) -> CallOutcome {
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
