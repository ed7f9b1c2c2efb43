//! The described-call correction with the real embedded model (Qwen2.5-Coder-1.5B-Instruct,
//! fetched by scripts/fetch-model.py). The first two turns are replayed from the demo's greedy
//! run (issue 32): its `notes_search` call, then its answer describing that call instead of
//! answering; the search result is the one the notes eval recorded for the same call. Only the
//! turn after the loop's correction is generated, by the real model: one bounded turn. And
//! `first_round_must_call` against the engine's grammar: a question the model answers in prose
//! is a call when the first round must call a tool.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_agent::{Agent, AgentConfig, StopCause};
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{
    Caller, Dispatcher, Effect, Principal, Registry, Risk, ToolBuilder, ToolOutput,
};
use toolgate_llm::embedded::{EmbeddedConfig, EmbeddedModel, fetched_model_path};
use toolgate_llm::scripted::ScriptedModel;
use toolgate_llm::{BoxFuture, LlmError, Model, ModelRequest, ModelResponse};

const QUESTION: &str = "What budget did we settle on in the last meeting with the design team?";

/// The demo's greedy answer, as issue 32 quotes it.
const DESCRIBED: &str = "To get the budget settled in the last meeting with the design team, use \
notes_search with the query \"design team budget\", kind \"meeting\", and limit 1.";

/// What `notes_search` returned for that call (evals/runs/notes-all-sampled-embedded, run 0).
const RESULT: &str = r#"{"match":"all_words","total_matches":3,"offset":0,"hits":[{"id":5,"title":"Design team sync — Q1 budget settled","date":"2025-12-02","notebook":"Work","kind":"meeting","snippet":"…Tomás (finance), me. ## Budget The design team budget is settled. Lena's … Q1 retrospective. ## Decisions - Q1 design budget: $48,000, final. - The…"}],"next_offset":1,"note":"showing 1 of 3 matches; 2 more: call again with offset 1, or add words to narrow"}"#;

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Kind {
    /// an ordinary note
    Note,
    /// something to do, with an optional due date and a done flag
    Todo,
    /// minutes of a meeting, which may list action items
    Meeting,
    /// a page clipped from the web, always untrusted
    Clip,
}

/// `notes_search`'s arguments as the notes toolset declares them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct SearchArgs {
    /// Words to look for in titles and bodies, e.g. "design team budget".
    #[schemars(length(min = 1, max = 200))]
    query: String,
    /// Only notes of this kind, e.g. "meeting"; default any kind.
    kind: Option<Kind>,
    /// How many notes to return, 1-20; default 5.
    #[schemars(range(min = 1, max = 20))]
    limit: Option<u32>,
}

/// The engine keeps one KV cache; each test holds this for its whole conversation.
static ONE_CONVERSATION: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn embedded() -> &'static EmbeddedModel {
    static MODEL: OnceLock<EmbeddedModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        let path = fetched_model_path().expect("the fetched model");
        let mut config = EmbeddedConfig::new(path);
        config.n_ctx = 4096;
        EmbeddedModel::load(config, None).expect("the model loads")
    })
}

/// Replays its script, then hands every later turn to the real model.
struct ReplayThenLive {
    replay: Mutex<VecDeque<ModelResponse>>,
    live: &'static EmbeddedModel,
    live_turns: Mutex<Vec<String>>,
}

impl ReplayThenLive {
    fn new(replay: impl IntoIterator<Item = ModelResponse>) -> Arc<Self> {
        Arc::new(ReplayThenLive {
            replay: Mutex::new(replay.into_iter().collect()),
            live: embedded(),
            live_turns: Mutex::new(Vec::new()),
        })
    }
}

fn search_tool() -> toolgate_core::Tool {
    ToolBuilder::<SearchArgs>::new("notes_search", 1)
        .describe(
            "Searches the user's notes (titles and text) for words, best matches first, and returns a short snippet of each hit, never whole notes.",
            "to find notes about something (\"design team budget\"), or to find meetings (kind \"meeting\"); each hit's date tells which meeting was the last.",
            Some("you already have the note's id and need its whole text."),
            "match, total_matches, hits (id, title, date, notebook, kind, snippet), and next_offset with a note when more match.",
        )
        .example("what was decided about the design budget", json!({"query": "design team budget"}))
        .policy(Risk::Low, Effect::Read, "It only reads the user's local notes.")
        .read(|_ctx, _args: SearchArgs| async move {
            Ok(ToolOutput::new(serde_json::from_str::<Value>(RESULT).unwrap()))
        })
        .unwrap()
}

fn agent(model: Arc<ReplayThenLive>, config: AgentConfig, trace: Arc<MemoryTrace>) -> Agent {
    let registry = Arc::new(Registry::new(vec![search_tool()]).unwrap());
    let dispatcher = Caller::new(Dispatcher::new(registry).unwrap());
    Agent::new(model, dispatcher, Principal::local("tester", &[]))
        .with_config(config)
        .with_trace(trace)
}

impl Model for ReplayThenLive {
    fn name(&self) -> String {
        self.live.name()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
        Box::pin(async move {
            let next = self.replay.lock().unwrap().pop_front();
            match next {
                Some(turn) => Ok(turn),
                None => {
                    let turn = self.live.complete(request).await?;
                    self.live_turns.lock().unwrap().push(turn.text.clone());
                    Ok(turn)
                }
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demos_described_call_is_turned_into_the_answer_by_one_correction() {
    let _alone = ONE_CONVERSATION.lock().await;
    let model = ReplayThenLive::new([
        ScriptedModel::calls(&[(
            "call_1_1",
            "notes_search",
            json!({"query": "design team budget", "kind": "meeting", "limit": 1}),
        )]),
        ScriptedModel::answer(DESCRIBED),
    ]);
    let trace = Arc::new(MemoryTrace::default());
    let config = AgentConfig {
        max_rounds: 6,
        max_tokens_per_turn: 96,
        correct_described_calls: true,
        ..AgentConfig::default()
    };
    let result = agent(model.clone(), config, trace.clone())
        .ask("demo-budget", QUESTION)
        .await;
    let live = model.live_turns.lock().unwrap().clone();
    eprintln!(
        "live turns after the correction: {live:?}; answer: {:?}",
        result.answer
    );
    assert_eq!(result.stop, StopCause::FinalAnswer, "{:?}", result.stop);
    assert_eq!(trace.of_kind("described_call_corrected").len(), 1);
    assert!(!live.is_empty(), "the real model answered the correction");
    let answer = result.answer.unwrap_or_default();
    assert!(
        answer.contains("48,000") || answer.contains("48000"),
        "the answer after the correction: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_round_that_must_call_is_a_call_even_for_a_prose_question() {
    let _alone = ONE_CONVERSATION.lock().await;
    let ask = |must_call: bool| async move {
        let config = AgentConfig {
            max_rounds: 1,
            max_tokens_per_turn: 64,
            first_round_must_call: must_call,
            ..AgentConfig::default()
        };
        agent(ReplayThenLive::new([]), config, Arc::default())
            .ask("hello", "Say hello in one word.")
            .await
    };
    let free = ask(false).await;
    eprintln!(
        "free: {:?} {:?}",
        free.answer,
        free.calls.first().map(|c| &c.arguments)
    );
    assert_eq!(
        free.stop,
        StopCause::FinalAnswer,
        "the control answers in prose"
    );
    assert!(free.calls.is_empty());
    let forced = ask(true).await;
    eprintln!("forced: {:?}", forced.calls.first().map(|c| &c.arguments));
    assert_eq!(forced.calls.len(), 1, "{:?}", forced.answer);
    assert_eq!(forced.calls[0].tool, "notes_search");
    assert!(
        !forced.calls[0].is_error,
        "the grammar keeps the call valid"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_repeats_end_tool_use_the_model_answers_from_the_result() {
    // The notes eval's failing reads: the same search again and again to the round cap.
    let _alone = ONE_CONVERSATION.lock().await;
    let call = |id: &str| {
        ScriptedModel::calls(&[(
            id,
            "notes_search",
            json!({"query": "design team budget", "kind": "meeting", "limit": 1}),
        )])
    };
    let model = ReplayThenLive::new([call("c1"), call("c2"), call("c3")]);
    let trace = Arc::new(MemoryTrace::default());
    let config = AgentConfig {
        max_rounds: 8,
        max_tokens_per_turn: 96,
        end_tools_after_repeats: true,
        ..AgentConfig::default()
    };
    let result = agent(model.clone(), config, trace.clone())
        .ask("demo-budget-repeats", QUESTION)
        .await;
    let live = model.live_turns.lock().unwrap().clone();
    let turns = trace.of_kind("model_turn");
    eprintln!(
        "live turns after tools ended: {live:?}; last turn: {}",
        turns.last().unwrap()
    );
    assert_eq!(result.tools_ended_round, Some(3));
    assert_eq!(result.stop, StopCause::FinalAnswer, "{:?}", result.stop);
    assert_eq!(live.len(), 1, "one real turn: the answer");
    let answer = result.answer.unwrap_or_default();
    assert!(
        answer.contains("48,000") || answer.contains("48000"),
        "the answer after tools ended: {answer}"
    );
}
