//! `scripted`: replays recorded turns, for tests of the loop itself. It never produces an eval
//! figure: it knows nothing but its script.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::{BoxFuture, LlmError, Model, ModelRequest, ModelResponse, StopReason, ToolCall, Usage};

/// A model that answers each call with the next scripted response and records every request.
#[derive(Debug, Default)]
pub struct ScriptedModel {
    turns: Mutex<VecDeque<ModelResponse>>,
    seen: Mutex<Vec<ModelRequest>>,
}

impl ScriptedModel {
    pub fn new(turns: impl IntoIterator<Item = ModelResponse>) -> Self {
        ScriptedModel {
            turns: Mutex::new(turns.into_iter().collect()),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// A turn that calls tools: `(id, name, arguments)` each.
    pub fn calls(calls: &[(&str, &str, serde_json::Value)]) -> ModelResponse {
        ModelResponse {
            text: String::new(),
            tool_calls: calls
                .iter()
                .map(|(id, name, arguments)| ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: arguments.clone(),
                })
                .collect(),
            stop_reason: StopReason::ToolUse,
            usage: Usage {
                input_tokens: 100,
                output_tokens: 20,
                cached_input_tokens: 0,
            },
            model: "scripted".into(),
        }
    }

    /// A turn that answers in text.
    pub fn answer(text: &str) -> ModelResponse {
        ModelResponse {
            text: text.into(),
            tool_calls: Vec::new(),
            stop_reason: StopReason::EndTurn,
            usage: Usage {
                input_tokens: 100,
                output_tokens: 10,
                cached_input_tokens: 0,
            },
            model: "scripted".into(),
        }
    }
}

impl Model for ScriptedModel {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
        Box::pin(async move {
            if let Ok(mut seen) = self.seen.lock() {
                seen.push(request.clone());
            }
            self.turns
                .lock()
                .map_err(|_| LlmError::Engine("script lock poisoned".into()))?
                .pop_front()
                .ok_or_else(|| LlmError::Engine("the script has no more turns".into()))
        })
    }
}
