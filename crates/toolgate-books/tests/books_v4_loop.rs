//! books-v4 through the real loop with a scripted model that replays calls the embedded model
//! made in the books-v3 runs (`evals/runs/books-v3-dev-sampled-embedded`), written with v4's
//! argument names: what each result tells the model, and the store it leaves.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::fixture;
use serde_json::{Value, json};
use toolgate_agent::{Agent, AgentConfig, RunResult, StopCause};
use toolgate_books::Toolset;
use toolgate_core::{Caller, DenyAll, Dispatcher, Principal, Registry};
use toolgate_llm::scripted::ScriptedModel;
use toolgate_llm::{ContentBlock, Model, Role};

// Through the loop, with books-v4's loop settings (toolgate-wiring's `agent_config`).

fn v4_config() -> AgentConfig {
    AgentConfig {
        correct_described_calls: true,
        end_tools_after_repeats: true,
        first_round_must_call: true,
        ..AgentConfig::default()
    }
}

fn agent(f: &common::Fixture, model: Arc<dyn Model>) -> Agent {
    let registry = Arc::new(Registry::new(Toolset::V4.tools(&f.store).unwrap()).unwrap());
    let caller = Caller::new(Dispatcher::new(registry).unwrap()).with_approver(Arc::new(DenyAll));
    Agent::new(model, caller, Principal::local("tester", &[])).with_config(v4_config())
}

/// Asks `question` of books-v4 through the loop with `model`'s script; the run must end with
/// a final answer.
async fn ask(
    f: &common::Fixture,
    model: &Arc<ScriptedModel>,
    run_id: &str,
    question: &str,
) -> RunResult {
    let result = agent(f, model.clone()).ask(run_id, question).await;
    assert_eq!(result.stop, StopCause::FinalAnswer, "{run_id}");
    result
}

/// The first tool result the model was sent in request `n` (0-based), parsed.
fn first_result(model: &ScriptedModel, n: usize) -> Value {
    serde_json::from_str(&results_in(model, n)[0]).unwrap()
}

/// The tool results' text the model was sent in request `n` (0-based).
fn results_in(model: &ScriptedModel, n: usize) -> Vec<String> {
    let request = &model.requests()[n];
    let last = request.messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    last.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) => Some(r.content.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn through_the_loop_a_placeholder_write_tags_the_right_books_and_names_what_it_ignored() {
    let f = fixture(Toolset::V4);
    // spanish-tag #0 of books-v3-dev-sampled-embedded, with v4's names.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[(
            "c1",
            "books_tag",
            json!({"author": "none", "title": "none", "min_rating": 0, "max_rating": 5, "language": "spa", "current_status": "no_status", "has_tag": "spanish", "tag": "spanish"}),
        )]),
        ScriptedModel::answer("Tagged 2 books spanish."),
    ]));
    ask(
        &f,
        &model,
        "v4-spanish",
        "Tag every book whose language code is spa with the tag spanish.",
    )
    .await;
    assert_eq!(
        f.sql_ids("SELECT book_id FROM books WHERE my_tags = 'spanish' ORDER BY 1"),
        f.sql_ids("SELECT book_id FROM books WHERE language_code = 'spa' ORDER BY 1")
    );
    let seen = results_in(&model, 1).join("\n");
    assert!(seen.contains("Changed 2 books"), "{seen}");
    assert!(
        seen.contains("author \\\"none\\\": a placeholder"),
        "{seen}"
    );
    assert!(
        seen.contains("has_tag \\\"spanish\\\": the tag this call adds"),
        "{seen}"
    );
}

#[tokio::test]
async fn through_the_loop_an_empty_search_hands_the_model_the_call_that_finds_the_books() {
    let f = fixture(Toolset::V4);
    // collins-count #0 of books-v3-dev-sampled-embedded: a status filter hid every book.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[(
            "c1",
            "books_search",
            json!({"author": "Suzanne Collins", "current_status": "want_to_read"}),
        )]),
        ScriptedModel::calls(&[("c2", "books_search", json!({"author": "Suzanne Collins"}))]),
        ScriptedModel::answer("3 books by Suzanne Collins."),
    ]));
    ask(
        &f,
        &model,
        "v4-collins",
        "How many books by Suzanne Collins are in the list?",
    )
    .await;
    let first = first_result(&model, 1);
    assert_eq!(
        first["result"]["next_call"],
        json!({"author": "Suzanne Collins"}),
        "{first}"
    );
    let second = first_result(&model, 2);
    assert!(
        second["result"]["found"]
            .as_str()
            .unwrap()
            .starts_with("3 books match author"),
        "{second}"
    );
}

#[tokio::test]
async fn through_the_loop_a_described_call_after_a_search_is_sent_back_to_the_result() {
    let f = fixture(Toolset::V4);
    // tolkien-top #2 of books-v3-dev-sampled-embedded: the right data, then a description.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[(
            "c1",
            "books_search",
            json!({"author": "J.R.R. Tolkien", "min_rating": 4.0, "limit": 1}),
        )]),
        ScriptedModel::answer(
            "To find it, use the `books_search` function with author J.R.R. Tolkien.",
        ),
        ScriptedModel::answer("The Return of the King (The Lord of the Rings, #3)."),
    ]));
    let result = ask(
        &f,
        &model,
        "v4-tolkien",
        "Which book by J.R.R. Tolkien has the highest average rating?",
    )
    .await;
    assert_eq!(
        result.described_call.map(|d| d.tool),
        Some("books_search".into())
    );
    assert!(result.answer.unwrap().contains("Return of the King"));
    let first = first_result(&model, 1);
    let top = first["result"]["of_all_matches"]["highest_rated"]
        .as_str()
        .unwrap();
    assert!(top.starts_with("The Return of the King"), "{first}");
    assert_eq!(model.requests().len(), 3, "one corrective turn");
}
