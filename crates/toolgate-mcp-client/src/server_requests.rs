//! Requests a server makes of us while our calls to it run: elicitation (a question for the
//! person) and sampling (a completion from our model).
//!
//! Guarantees:
//! - a request is answered only for a call of ours that is in flight on that session: the one
//!   whose `tools/call` carried it (2026-07-28: the `input_required` round runs in that call's
//!   task), else the only call in flight on the session (2025-11-25: the server's request
//!   names no call of ours); with none, or several and no way to tell which, it is declined:
//!   no question reaches a person who is not waiting on that server, and no answer reaches
//!   another server;
//! - elicitation goes to that call's approval channel ([`ToolCaller::ask_person`]): the person
//!   sees our name for the server and the server's words as the server's, and the answer goes
//!   back in the reply to that server's request only; when nobody can be asked it is declined;
//! - sampling is refused unless the server's `[mcp.servers.NAME]` says `sampling = "allow"`
//!   and a model is wired in ([`Sampler`]); then it runs on our model with no tools, the
//!   server's messages and system prompt passed as the server's untrusted text (never as our
//!   instructions), each request's `maxTokens` cut to what is left of the call's budget
//!   (`sampling_max_tokens`, spent across the call's requests), and bounded by the call's own
//!   deadline (the call waits on it);
//! - every request answered or refused is recorded in the call's trace ([`ServerRequest`]):
//!   which server, what it asked for, how it ended, never the answer's content.
//!
//! Refuses: image, audio and tool blocks in a sampling request, tools offered to our model,
//! and a request outside any call of ours (each with a message saying why).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;
use toolgate_core::{
    Asked, BoxFuture, QuestionAnswer, QuestionRefused, ServerQuestion, ToolCaller, TraceEvent,
};

/// What one call lets its server ask of our model.
#[derive(Clone)]
pub struct SamplingGrant {
    pub sampler: Arc<dyn Sampler>,
    /// Tokens the server may have generated across the call's requests.
    pub max_tokens: u32,
}

/// Our model, as a server's sampling request reaches it (wired in by the front end).
pub trait Sampler: Send + Sync {
    /// Runs `request` with no tools; the model's text.
    fn sample<'a>(&'a self, request: &'a SampleRequest) -> BoxFuture<'a, Result<Sampled, String>>;
}

/// A server's sampling request, as our model is given it.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRequest {
    /// Our name for the server (trusted).
    pub server: String,
    /// The server's system prompt (untrusted: passed as its text, not as ours).
    pub server_system: Option<String>,
    /// The conversation, each turn the server's text (untrusted).
    pub messages: Vec<(SampleRole, String)>,
    /// Already cut to what is left of the call's budget.
    pub max_tokens: u32,
    pub temperature: Option<f32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleRole {
    User,
    Assistant,
}

/// What our model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    pub text: String,
    /// The model's name, as the server is told it.
    pub model: String,
    /// Tokens generated (charged to the call's budget).
    pub output_tokens: u32,
    /// The answer stopped at `max_tokens`.
    pub at_limit: bool,
}

/// Why a server's sampling request is refused (the server is told this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SamplingRefused {
    #[error(
        "sampling is not allowed for this server: toolgate answers it only when `[mcp.servers.{0}] sampling = \"allow\"` is set"
    )]
    NotAllowed(String),
    #[error("the call's sampling budget of {budget} tokens is spent")]
    BudgetSpent { budget: u32 },
    #[error("toolgate passes only text to its model; this request holds {0}")]
    NotText(&'static str),
    #[error("toolgate offers its model no tools when a server samples")]
    ToolsOffered,
    #[error("the model failed: {0}")]
    Model(String),
}

/// One call of ours in flight on a session.
pub struct InFlight {
    id: u64,
    server: String,
    caller: ToolCaller,
    sampling: Option<SamplingGrant>,
    spent: Mutex<u32>,
    /// What the server asked during the call, recorded in the call's trace when it ends.
    heard: Mutex<Vec<ServerRequest>>,
}

static IN_FLIGHT_IDS: AtomicU64 = AtomicU64::new(1);

tokio::task_local! {
    /// The call whose task runs now: set around a forwarded call, so a 2026-07-28
    /// `input_required` round (run in that task) finds exactly its own call.
    static RUNNING: Arc<InFlight>;
}

impl InFlight {
    pub fn new(server: &str, caller: ToolCaller, sampling: Option<SamplingGrant>) -> Arc<Self> {
        Arc::new(InFlight {
            id: IN_FLIGHT_IDS.fetch_add(1, Ordering::Relaxed),
            server: server.to_string(),
            caller,
            sampling,
            spent: Mutex::new(0),
            heard: Mutex::new(Vec::new()),
        })
    }

    /// `future` run as this call's task (see [`RUNNING`]).
    pub async fn run<F: std::future::Future>(self: &Arc<Self>, future: F) -> F::Output {
        RUNNING.scope(Arc::clone(self), future).await
    }

    /// What the server asked during the call, for its trace.
    pub fn heard(&self) -> Vec<ServerRequest> {
        match self.heard.lock() {
            Ok(heard) => heard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn note(&self, request: ServerRequest) {
        match self.heard.lock() {
            Ok(mut heard) => heard.push(request),
            Err(poisoned) => poisoned.into_inner().push(request),
        }
    }

    /// Asks the person on this call's channel; anything but an answer is a decline.
    pub async fn elicit(&self, message: String, asked: Asked) -> QuestionAnswer {
        let kind = match &asked {
            Asked::Form { .. } => "elicitation (form)",
            Asked::Url { .. } => "elicitation (url)",
        };
        let question = ServerQuestion {
            server: self.server.clone(),
            message,
            asked,
        };
        let answered = self.caller.ask_person(&question).await;
        let (outcome, answer) = match answered {
            Ok(answer) => (answer.action().to_string(), answer),
            Err(refused) => (refused_outcome(&refused), QuestionAnswer::Decline),
        };
        self.note(ServerRequest {
            server: self.server.clone(),
            request: kind,
            outcome,
            tokens: None,
        });
        answer
    }

    /// Runs a sampling request on our model within the call's budget.
    pub async fn sample(&self, mut request: SampleRequest) -> Result<Sampled, SamplingRefused> {
        let answer = self.sample_within_budget(&mut request).await;
        self.note(ServerRequest {
            server: self.server.clone(),
            request: "sampling",
            outcome: match &answer {
                Ok(_) => "answered".into(),
                Err(refused) => format!("refused: {refused}"),
            },
            tokens: answer.as_ref().ok().map(|s| s.output_tokens),
        });
        answer
    }

    async fn sample_within_budget(
        &self,
        request: &mut SampleRequest,
    ) -> Result<Sampled, SamplingRefused> {
        let Some(grant) = &self.sampling else {
            return Err(SamplingRefused::NotAllowed(self.server.clone()));
        };
        let spent = *self.spent.lock().unwrap_or_else(|p| p.into_inner());
        let left = remaining(grant.max_tokens, spent);
        if left == 0 {
            return Err(SamplingRefused::BudgetSpent {
                budget: grant.max_tokens,
            });
        }
        request.max_tokens = request.max_tokens.clamp(1, left);
        request.server = self.server.clone();
        let sampled = grant
            .sampler
            .sample(request)
            .await
            .map_err(SamplingRefused::Model)?;
        let mut spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        // At least one token a request, so requests that generate nothing still run out.
        *spent = spent.saturating_add(sampled.output_tokens.max(1));
        Ok(sampled)
    }
}

/// What is left of a budget of `budget` tokens after `spent`.
pub fn remaining(budget: u32, spent: u32) -> u32 {
    budget.saturating_sub(spent)
}

fn refused_outcome(refused: &QuestionRefused) -> String {
    let why = match refused {
        QuestionRefused::NoChannel => "no channel",
        QuestionRefused::TicketsOnly => "tickets only",
        QuestionRefused::NotShown(_) => "not shown",
        QuestionRefused::Unavailable(_) => "unavailable",
        QuestionRefused::TimedOut { .. } => "timed out",
    };
    format!("declined ({why})")
}

/// The calls in flight on one session.
#[derive(Clone, Default)]
pub struct InFlightCalls {
    calls: Arc<Mutex<Vec<Arc<InFlight>>>>,
}

/// Keeps a call listed as in flight until dropped.
pub struct Listed {
    calls: InFlightCalls,
    id: u64,
}

impl Drop for Listed {
    fn drop(&mut self) {
        let mut calls = self.calls.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.retain(|call| call.id != self.id);
    }
}

/// Why a server's request found no call of ours to answer for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unrouted {
    #[error("no call of toolgate's is in flight on this session")]
    NoCall,
    #[error(
        "{0} calls of toolgate's are in flight on this session and the request names none of them"
    )]
    Ambiguous(usize),
}

impl InFlightCalls {
    /// Lists `call` as in flight until the guard drops.
    pub fn list(&self, call: &Arc<InFlight>) -> Listed {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::clone(call));
        Listed {
            calls: self.clone(),
            id: call.id,
        }
    }

    /// The call a request of the server's belongs to (see the module doc).
    pub fn asking(&self) -> Result<Arc<InFlight>, Unrouted> {
        if let Ok(running) = RUNNING.try_with(Arc::clone) {
            return Ok(running);
        }
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        pick(&calls).cloned()
    }
}

/// The only call in flight, or why there is none to pick.
fn pick<T>(calls: &[T]) -> Result<&T, Unrouted> {
    match calls {
        [] => Err(Unrouted::NoCall),
        [only] => Ok(only),
        many => Err(Unrouted::Ambiguous(many.len())),
    }
}

/// A request a server made of us during a call, as the trace records it (never its content).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerRequest {
    pub server: String,
    /// `elicitation (form)`, `elicitation (url)`, `sampling`.
    pub request: &'static str,
    /// `accept`, `decline`, `cancel`, `declined (why)`, `answered`, `refused: why`.
    pub outcome: String,
    /// Tokens our model generated for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u32>,
}

impl TraceEvent for ServerRequest {
    fn kind(&self) -> &'static str {
        "server_request"
    }

    fn attributes(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_answered_only_for_the_one_call_it_can_belong_to() {
        let table: [(&[u32], Result<u32, Unrouted>); 3] = [
            (&[], Err(Unrouted::NoCall)),
            (&[7], Ok(7)),
            (&[7, 8], Err(Unrouted::Ambiguous(2))),
        ];
        for (calls, expected) in table {
            assert_eq!(pick(calls).copied(), expected, "{calls:?}");
        }
    }

    #[test]
    fn a_spent_budget_leaves_nothing_and_never_wraps() {
        for (budget, spent, left) in [(100, 0, 100), (100, 60, 40), (100, 100, 0), (100, 250, 0)] {
            assert_eq!(remaining(budget, spent), left, "{budget} - {spent}");
        }
    }

    #[test]
    fn every_refusal_is_recorded_as_a_decline_that_says_why() {
        for (refused, shown) in [
            (QuestionRefused::NoChannel, "declined (no channel)"),
            (QuestionRefused::TicketsOnly, "declined (tickets only)"),
            (
                QuestionRefused::NotShown("x".into()),
                "declined (not shown)",
            ),
            (
                QuestionRefused::Unavailable("x".into()),
                "declined (unavailable)",
            ),
            (
                QuestionRefused::TimedOut { after_ms: 5 },
                "declined (timed out)",
            ),
        ] {
            assert_eq!(refused_outcome(&refused), shown);
        }
    }
}
