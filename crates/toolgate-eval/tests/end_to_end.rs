//! A 2-task suite end to end with a scripted model: restore, checks, persistence, resume after
//! an interruption (including a half-written record), and the report files. The model is a
//! script that plays each toolset the way a careless user of it would, so the two designs
//! differ measurably; it never produces an eval figure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgate_eval::output::write_report;
use toolgate_eval::runner::{Runner, RunnerError};
use toolgate_eval::suite::Suite;
use toolgate_llm::scripted::ScriptedModel;
use toolgate_llm::{BoxFuture, ContentBlock, LlmError, Model, ModelRequest, ModelResponse};
use toolgate_wiring::ToolsetName;

const SUITE: &str = r#"
[suite]
name = "books-mini"
store = "books"

[[task]]
id = "collins-count"
category = "lookup"
split = "dev"
prompt = "How many books by Suzanne Collins are in the list?"
[[task.check]]
kind = "answer_number"
expected_sql = "SELECT count(*) FROM books WHERE authors LIKE '%Suzanne Collins%'"

[[task]]
id = "collins-want"
category = "update"
split = "dev"
prompt = "Mark every book by Suzanne Collins as want_to_read."
[[task.check]]
kind = "state_sql"
query = "SELECT book_id, my_status FROM books WHERE my_status IS NOT NULL ORDER BY 1"
expected_sql = "SELECT book_id, 'want_to_read' FROM books WHERE authors LIKE '%Suzanne Collins%' ORDER BY 1"
"#;

/// Plays v2 well (search, then one set_status with every id) and v1 carelessly (updates only
/// the first Collins item it finds).
#[derive(Default)]
struct CarelessScript {
    requests: AtomicUsize,
}

fn last_tool_result(request: &ModelRequest) -> Option<Value> {
    request
        .messages
        .last()?
        .content
        .iter()
        .find_map(|b| match b {
            ContentBlock::ToolResult(r) => serde_json::from_str(&r.content).ok(),
            _ => None,
        })
}

impl Model for CarelessScript {
    fn name(&self) -> String {
        "scripted:careless".into()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
        Box::pin(async move {
            self.requests.fetch_add(1, Ordering::SeqCst);
            let prompt = request
                .messages
                .first()
                .and_then(|m| match m.content.first() {
                    Some(ContentBlock::Text { text }) => Some(text.clone()),
                    _ => None,
                });
            let counting = prompt.as_deref().is_some_and(|p| p.starts_with("How many"));
            let v2 = request.tools.iter().any(|t| t.name == "books_search");
            let round = request.messages.len().div_ceil(2);
            let result = last_tool_result(request);
            Ok(match (v2, counting, round, result) {
                (true, _, 1, _) => ScriptedModel::calls(&[(
                    "s",
                    "books_search",
                    json!({"author": "Suzanne Collins", "limit": 50}),
                )]),
                (false, _, 1, _) => ScriptedModel::calls(&[("l", "list_items", json!({}))]),
                (true, true, _, Some(r)) => ScriptedModel::answer(&format!(
                    "There are {} books.",
                    r["result"]["total_matches"]
                )),
                (false, true, _, Some(r)) => {
                    let n = r["result"].as_array().map_or(0, |items| {
                        items
                            .iter()
                            .filter(|i| i["authors"].as_str().unwrap_or("").contains("Collins"))
                            .count()
                    });
                    ScriptedModel::answer(&format!("I count {n}."))
                }
                (true, false, 2, Some(r)) => {
                    let ids: Vec<i64> = r["result"]["books"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|b| b["id"].as_i64().unwrap())
                        .collect();
                    ScriptedModel::calls(&[(
                        "m",
                        "books_set_status",
                        json!({"ids": ids, "status": "want_to_read"}),
                    )])
                }
                (false, false, 2, Some(r)) => {
                    let first = r["result"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|i| i["authors"].as_str().unwrap_or("").contains("Collins"))
                        .unwrap()["book_id"]
                        .clone();
                    ScriptedModel::calls(&[(
                        "u",
                        "update_item",
                        json!({"id": first, "fields": {"my_status": "want_to_read"}}),
                    )])
                }
                _ => ScriptedModel::answer("Done."),
            })
        })
    }
}

fn runner(dir: &std::path::Path, runs: usize, resume: bool, stop: Arc<AtomicBool>) -> Runner {
    Runner {
        suite: Suite::parse(SUITE, "mini.toml").unwrap(),
        suite_text: SUITE.into(),
        toolsets: vec![ToolsetName::BooksV1, ToolsetName::BooksV2],
        runs,
        split: None,
        task_ids: None,
        max_rounds: 6,
        temperature: None,
        seed: 1,
        out_dir: dir.to_path_buf(),
        pages_dir: None,
        resume,
        stop,
        store_url: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_runs_persists_resumes_after_interruption_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("eval");
    let model = Arc::new(CarelessScript::default());

    // First session: interrupted after 3 runs (as a Ctrl-C would), then a kill mid-write.
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = Arc::clone(&stop);
    let first = runner(&out, 2, false, Arc::clone(&stop))
        .run(
            model.clone(),
            Some(Box::new(move |p| {
                if p.done == 3 {
                    stopper.store(true, Ordering::SeqCst)
                }
            })),
        )
        .await
        .unwrap();
    assert_eq!(first.len(), 3);
    let runs_file = out.join("runs.jsonl");
    assert_eq!(
        std::fs::read_to_string(&runs_file).unwrap().lines().count(),
        3
    );
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&runs_file)
            .unwrap();
        write!(f, "{{\"toolset\":\"books-v2\",\"ta").unwrap();
    }

    // Starting again without --resume is refused; resuming with other settings is refused.
    let again = runner(&out, 2, false, Arc::new(AtomicBool::new(false)))
        .run(model.clone(), None)
        .await;
    assert!(matches!(again, Err(RunnerError::Exists { .. })));
    let other = runner(&out, 3, true, Arc::new(AtomicBool::new(false)))
        .run(model.clone(), None)
        .await;
    assert!(
        matches!(other, Err(RunnerError::Mismatch { ref differences, .. }) if differences.contains("runs")),
        "{other:?}"
    );

    // Resume: only the 5 missing runs execute.
    let before = model.requests.load(Ordering::SeqCst);
    let all = runner(&out, 2, true, Arc::new(AtomicBool::new(false)))
        .run(model.clone(), None)
        .await
        .unwrap();
    assert_eq!(all.len(), 8);
    let mut keys: Vec<_> = all.iter().map(|r| r.key()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 8, "no run twice");
    let resumed_requests = model.requests.load(Ordering::SeqCst) - before;
    assert!(
        (5 * 2..=5 * 3).contains(&resumed_requests),
        "{resumed_requests}"
    );
    assert!(
        !std::fs::read_to_string(&runs_file)
            .unwrap()
            .contains("\"ta\n"),
        "the half-written line is gone"
    );

    // Checks judged the real store after each run, restored before each run.
    for r in &all {
        let expect_pass = r.toolset == "books-v2" || r.task == "collins-count";
        assert_eq!(
            r.success, expect_pass,
            "{} {} {:?} {:?}",
            r.toolset, r.task, r.failure, r.checks
        );
    }
    let v1_update = all
        .iter()
        .find(|r| r.toolset == "books-v1" && r.task == "collins-want")
        .unwrap();
    assert_eq!(
        v1_update.failure,
        Some(toolgate_eval::record::FailureKind::WrongFinalState)
    );
    assert!(
        v1_update.checks[0].detail.contains("expected"),
        "{}",
        v1_update.checks[0].detail
    );
    assert!(
        all.iter()
            .filter(|r| r.toolset == "books-v1")
            .all(|r| r.input_tokens > 0)
    );

    // Report files.
    let (report, files) = write_report(&out).unwrap();
    assert_eq!(files.len(), 3);
    assert!(files.iter().all(|f| f.exists()));
    let v1 = &report.toolsets[0];
    let v2 = &report.toolsets[1];
    assert_eq!((v1.toolset.as_str(), v1.success.mean), ("books-v1", 0.5));
    assert_eq!((v2.toolset.as_str(), v2.success.mean), ("books-v2", 1.0));
    assert_eq!(v2.pass_hat_k, Some(1.0));
    assert_eq!(report.comparisons.len(), 1);
    assert_eq!(report.comparisons[0].difference.mean, 0.5);
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("| books-v2 | 2 × 2 | 100% [100, 100]"),
        "{markdown}"
    );
    assert!(markdown.contains("**Verdict:**"));
    assert!(markdown.contains("wrong final state"));
    let svg = std::fs::read_to_string(out.join("chart.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("books-v1") && svg.contains("tokens per task"));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 8);
}

/// A model that samples: the count it answers with depends on the request's seed (as a real
/// sampler's choice does), and the same seed always gives the same answer.
struct SeededGuesser;

impl Model for SeededGuesser {
    fn name(&self) -> String {
        "seeded-guesser".into()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
        Box::pin(async move {
            let seed = request
                .seed
                .expect("a sampling eval sends each request a seed");
            // A small deterministic mix of the seed, as a sampler's random stream would be.
            let guess = (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 61) + 1;
            Ok(ScriptedModel::answer(&format!("There are {guess} books.")))
        })
    }
}

fn sampling_runner(dir: &std::path::Path, seed: u64) -> Runner {
    Runner {
        toolsets: vec![ToolsetName::BooksV2],
        task_ids: Some(vec!["collins-count".into()]),
        runs: 4,
        temperature: Some(0.7),
        seed,
        ..runner(dir, 4, false, Arc::new(AtomicBool::new(false)))
    }
}

async fn answers(dir: &std::path::Path, seed: u64) -> Vec<(Option<String>, Option<u64>)> {
    sampling_runner(dir, seed)
        .run(Arc::new(SeededGuesser), None)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.answer, r.seed))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampled_runs_differ_by_seed_and_the_same_seed_repeats_them() {
    let dir = tempfile::tempdir().unwrap();
    let first = answers(&dir.path().join("a"), 7).await;
    let again = answers(&dir.path().join("b"), 7).await;
    let other = answers(&dir.path().join("c"), 8).await;
    assert_eq!(first, again, "the same seed must reproduce every run");
    assert_ne!(first, other, "another seed must be able to change the runs");
    // Each run records its own seed, and the runs of one eval differ from each other.
    let seeds: std::collections::BTreeSet<_> = first.iter().map(|(_, s)| s.unwrap()).collect();
    assert_eq!(seeds.len(), 4);
    let plan: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("a").join("plan.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(plan["seed"], 7);
    assert!((plan["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_refuses_another_seed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("eval");
    answers(&out, 7).await;
    let err = Runner {
        resume: true,
        ..sampling_runner(&out, 8)
    }
    .run(Arc::new(SeededGuesser), None)
    .await
    .unwrap_err();
    assert!(
        matches!(&err, RunnerError::Mismatch { differences, .. } if differences == "seed"),
        "{err}"
    );
}

#[test]
fn greedy_runs_record_no_seed() {
    let dir = tempfile::tempdir().unwrap();
    let runner = runner(dir.path(), 1, false, Arc::new(AtomicBool::new(false)));
    assert_eq!(runner.plan("m", &[]).seed, None);
}
