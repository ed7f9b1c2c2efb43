//! `trace-pair` over a real eval (real stores, dispatcher and checks) driven by a script that
//! behaves like a model that reads its errors: it first writes the status the way a person
//! says it ("want to read"), then fixes its call only if the error tells it how. v1's terse
//! "400 Bad Request" does not; v2's teaching error lists the allowed values. The finder must
//! pick v1's stuck run as "before" and v2's corrected run as "after".

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::{Value, json};
use toolgate_eval::runner::Runner;
use toolgate_eval::suite::Suite;
use toolgate_eval::trace_pair;
use toolgate_llm::scripted::ScriptedModel;
use toolgate_llm::{BoxFuture, ContentBlock, LlmError, Model, ModelRequest, ModelResponse};
use toolgate_wiring::ToolsetName;

const SUITE: &str = r#"
[suite]
name = "books-pair"
store = "books"

[[task]]
id = "collins-want"
category = "update"
split = "dev"
prompt = "Mark every book by Suzanne Collins as want to read."
[[task.check]]
kind = "state_sql"
query = "SELECT book_id, my_status FROM books WHERE my_status IS NOT NULL ORDER BY 1"
expected_sql = "SELECT book_id, 'want_to_read' FROM books WHERE authors LIKE '%Suzanne Collins%' ORDER BY 1"
"#;

/// The tool results in the newest message, if it carries any.
fn last_results(request: &ModelRequest) -> Vec<(bool, String)> {
    request.messages.last().map_or_else(Vec::new, |m| {
        m.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolResult(r) => Some((r.is_error, r.content.clone())),
                _ => None,
            })
            .collect()
    })
}

/// The Collins ids from the first listing or search result in the conversation.
fn collins_ids(request: &ModelRequest) -> Vec<i64> {
    for message in &request.messages {
        for block in &message.content {
            let ContentBlock::ToolResult(r) = block else {
                continue;
            };
            let Ok(value) = serde_json::from_str::<Value>(&r.content) else {
                continue;
            };
            if let Some(books) = value["result"]["books"].as_array() {
                return books.iter().filter_map(|b| b["id"].as_i64()).collect();
            }
            if let Some(items) = value["result"].as_array() {
                return items
                    .iter()
                    .filter(|i| i["authors"].as_str().unwrap_or("").contains("Collins"))
                    .filter_map(|i| i["book_id"].as_i64())
                    .collect();
            }
        }
    }
    Vec::new()
}

struct ReadsItsErrors;

impl ReadsItsErrors {
    fn write(v2: bool, ids: &[i64], status: &str) -> ModelResponse {
        if v2 {
            return ScriptedModel::calls(&[(
                "w",
                "books_set_status",
                json!({"ids": ids, "status": status}),
            )]);
        }
        let calls: Vec<(String, Value)> = ids
            .iter()
            .map(|id| {
                (
                    format!("w{id}"),
                    json!({"id": id, "fields": {"my_status": status}}),
                )
            })
            .collect();
        let borrowed: Vec<(&str, &str, Value)> = calls
            .iter()
            .map(|(id, args)| (id.as_str(), "update_item", args.clone()))
            .collect();
        ScriptedModel::calls(&borrowed)
    }
}

impl Model for ReadsItsErrors {
    fn name(&self) -> String {
        "scripted:reads-its-errors".into()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
        Box::pin(async move {
            let v2 = request.tools.iter().any(|t| t.name == "books_search");
            let results = last_results(request);
            let ids = collins_ids(request);
            Ok(if results.is_empty() {
                if v2 {
                    ScriptedModel::calls(&[(
                        "s",
                        "books_search",
                        json!({"author": "Suzanne Collins"}),
                    )])
                } else {
                    ScriptedModel::calls(&[("l", "list_items", json!({}))])
                }
            } else if results.iter().all(|(error, _)| !error) {
                let wrote = request.messages.len() > 3;
                if wrote {
                    ScriptedModel::answer("Done.")
                } else {
                    Self::write(v2, &ids, "want to read")
                }
            } else if results
                .iter()
                .any(|(_, text)| text.contains("want_to_read"))
            {
                Self::write(v2, &ids, "want_to_read")
            } else {
                ScriptedModel::answer("I could not mark them: the tool refused the status.")
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_pair_shows_the_terse_error_stuck_and_the_teaching_error_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let runner = Runner {
        suite: Suite::parse(SUITE, "pair.toml").unwrap(),
        suite_text: SUITE.into(),
        toolsets: vec![ToolsetName::BooksV1, ToolsetName::BooksV2],
        runs: 1,
        split: None,
        task_ids: None,
        max_rounds: 6,
        temperature: None,
        seed: 1,
        out_dir: dir.path().join("eval"),
        pages_dir: None,
        resume: false,
        stop: Arc::new(AtomicBool::new(false)),
        store_url: None,
    };
    let runs = runner.run(Arc::new(ReadsItsErrors), None).await.unwrap();
    assert_eq!(runs.len(), 2);

    let (before, after) = trace_pair::find(&runs, "books-v1", "books-v2").expect("a pair");
    let before = before.expect("v1's stuck run");
    assert_eq!(
        (before.toolset.as_str(), before.success),
        ("books-v1", false)
    );
    assert_eq!((after.toolset.as_str(), after.success), ("books-v2", true));
    assert!(trace_pair::stuck_on_arguments(before));
    assert!(trace_pair::self_corrected(after));

    let before_text = trace_pair::render(before);
    assert!(
        before_text.contains("error invalid_argument") && before_text.contains("400 Bad Request"),
        "{before_text}"
    );
    let after_text = trace_pair::render(after);
    let error_at = after_text
        .find("error invalid_argument")
        .expect(&after_text);
    let fixed_at = after_text.find("\"want_to_read\"").expect(&after_text);
    assert!(
        error_at < fixed_at,
        "the fix comes after the error\n{after_text}"
    );
    assert!(after_text.contains("PASS"), "{after_text}");

    // Without a run that fixed itself there is no pair, only v1's stuck run.
    let v1_only: Vec<_> = runs
        .iter()
        .filter(|r| r.toolset == "books-v1")
        .cloned()
        .collect();
    assert!(trace_pair::find(&v1_only, "books-v1", "books-v2").is_none());
}
