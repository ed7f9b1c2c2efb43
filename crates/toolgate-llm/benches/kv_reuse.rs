//! KV-cache reuse between rounds, measured: a fixed 3-round books-v2 conversation (the real
//! tool definitions, recorded tool calls and results) run on the embedded model with and
//! without reuse. Both modes see exactly the same prompts; only what is processed differs.
//!
//! `cargo bench -p toolgate-llm --bench kv_reuse` (needs the model: scripts/fetch-model.py).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use serde_json::json;
use toolgate_books::{BooksStore, Toolset};
use toolgate_core::{Principal, Registry};
use toolgate_llm::embedded::{EmbeddedConfig, EmbeddedModel, EngineStats, fetched_model_path};
use toolgate_llm::{
    ContentBlock, Message, Model, ModelRequest, Role, ToolCall, ToolDefinition, ToolResult,
};

const SYSTEM: &str = "You are an assistant with tools. You cannot see the user's data: call a tool to look it up \
before you answer, and never guess. When tool results answer the question, reply with the answer in one short sentence.";

fn tools() -> Vec<ToolDefinition> {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = BooksStore::init(&dir.path().join("b.sqlite")).expect("catalogue");
    let registry = Registry::new(Toolset::V2.tools(&store).expect("tools")).expect("registry");
    registry
        .model_views_for(&Principal::local("bench", &[]))
        .into_iter()
        .map(|v| ToolDefinition {
            name: v.name,
            description: v.description,
            input_schema: v.input_schema,
        })
        .collect()
}

fn assistant_call(id: &str, name: &str, arguments: serde_json::Value) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        })],
    }
}

fn result(id: &str, content: serde_json::Value) -> Message {
    Message::tool_results(vec![ToolResult {
        call_id: id.into(),
        content: content.to_string(),
        is_error: false,
    }])
}

/// The history before each of the three model turns.
fn rounds() -> Vec<Vec<Message>> {
    let question =
        Message::user_text("Mark the highest-rated Suzanne Collins book as want_to_read.");
    let call1 = assistant_call(
        "c1",
        "books_search",
        json!({"author": "Suzanne Collins", "sort": "rating_desc", "limit": 1}),
    );
    let result1 = result(
        "c1",
        json!({"result": {"total_matches": 3, "offset": 0, "books": [
        {"id": 1, "title": "The Hunger Games (The Hunger Games, #1)", "authors": "Suzanne Collins", "year": 2008, "rating": 4.34}],
        "next_offset": 1, "note": "showing 1 of 3 matches; 2 more: call again with offset 1, or narrow the filters"}}),
    );
    let call2 = assistant_call(
        "c2",
        "books_set_status",
        json!({"ids": [1], "status": "want_to_read"}),
    );
    let result2 = result(
        "c2",
        json!({"result": {"updated": 1, "books": [
        {"id": 1, "title": "The Hunger Games (The Hunger Games, #1)", "status": "want_to_read", "previous_status": null}]}}),
    );
    vec![
        vec![question.clone()],
        vec![question.clone(), call1.clone(), result1.clone()],
        vec![question, call1, result1, call2, result2],
    ]
}

fn run(reuse_kv: bool, tools: &[ToolDefinition]) -> (EngineStats, f64) {
    let path = fetched_model_path().expect("the fetched model");
    let mut config = EmbeddedConfig::new(path);
    config.n_ctx = 8192;
    config.reuse_kv = reuse_kv;
    let model = EmbeddedModel::load(config, None).expect("model loads");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let started = Instant::now();
    for history in rounds() {
        let mut request = ModelRequest::new(history, tools.to_vec());
        request.system = Some(SYSTEM.into());
        request.max_tokens = 48;
        rt.block_on(model.complete(&request)).expect("turn");
    }
    (model.stats(), started.elapsed().as_secs_f64())
}

fn main() {
    let tools = tools();
    let (without, t_without) = run(false, &tools);
    let (with, t_with) = run(true, &tools);
    println!(
        "KV reuse between rounds: 3-round books-v2 task, embedded Qwen2.5-Coder-1.5B Q4_K_M, {} threads",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<22} {:>13} {:>15} {:>10} {:>10} {:>10} {:>9}",
        "mode",
        "prompt tokens",
        "tokens prefilled",
        "generated",
        "prefill s",
        "generate s",
        "total s"
    );
    for (name, s, t) in [
        ("without reuse", without, t_without),
        ("with reuse", with, t_with),
    ] {
        println!(
            "{:<22} {:>13} {:>15} {:>10} {:>10.2} {:>10.2} {:>9.2}",
            name,
            s.prompt_tokens,
            s.prefilled_tokens,
            s.generated_tokens,
            s.prefill_seconds,
            s.generate_seconds,
            t
        );
    }
    println!(
        "with reuse: {:.2}x fewer tokens prefilled, {:.2}x less prefill time, {:.2}x faster overall",
        without.prefilled_tokens as f64 / with.prefilled_tokens.max(1) as f64,
        without.prefill_seconds / with.prefill_seconds.max(1e-9),
        t_without / t_with.max(1e-9)
    );
}
