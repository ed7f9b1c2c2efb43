//! `notes_search` latency at two scales of generated notes, through the store function (the
//! handler's work: FTS5 MATCH, BM25 ranking, snippets) and through the dispatcher (validation,
//! blocking-thread hop, observation bound), with p50/p99 and the growth from the small to the
//! large notebook.
//!
//! `cargo bench -p toolgate-notes` runs 10k and 100k notes; any other invocation (such as
//! `cargo test --all-targets`) runs 1k and 10k with fewer queries, to prove the benchmark still
//! works. It prints a table and asserts nothing about time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_core::{CallRequest, Dispatcher, Principal, Registry};
use toolgate_notes::{NotesStore, SearchArgs, generate_notes};

/// What a user might type: single common words, phrases, a whole question, a miss.
const QUERIES: &[&str] = &[
    "budget",
    "travel budget",
    "quarterly report",
    "garden beds progress",
    "Platform team sync",
    "incident review timing",
    "sourdough starter",
    "what did Wen say about the tax return",
    "design team budget",
    "zanzibar",
];
const SEED: u64 = 7;

struct Samples(Vec<Duration>);

impl Samples {
    fn percentile_us(&self, p: f64) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return 0.0;
        }
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        let index = rank.clamp(1, sorted.len()) - 1;
        sorted[index].as_secs_f64() * 1e6
    }
}

struct Row {
    notes: usize,
    path: &'static str,
    samples: Samples,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (sizes, rounds) = if full {
        ([10_000, 100_000], 20)
    } else {
        ([1_000, 10_000], 2)
    };
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    let principal = Principal::local("bench", &[]);
    let mut rows = Vec::new();
    let mut builds = Vec::new();

    for notes in sizes {
        let build_started = Instant::now();
        let store = NotesStore::init(&dir.path().join(format!("notes-{notes}.sqlite")))
            .expect("create the bench database");
        store
            .insert_notes(&generate_notes(notes, SEED))
            .expect("insert the generated notes");
        builds.push((notes, build_started.elapsed()));

        // Warm the page cache and the statement cache once per query.
        for query in QUERIES {
            store.search(&SearchArgs::query(query)).expect("search");
        }
        let mut direct = Vec::new();
        for _ in 0..rounds {
            for query in QUERIES {
                let t = Instant::now();
                let out = store.search(&SearchArgs::query(query)).expect("search");
                direct.push(t.elapsed());
                std::hint::black_box(out);
            }
        }
        rows.push(Row {
            notes,
            path: "store: run_search",
            samples: Samples(direct),
        });

        let registry = Registry::new(toolgate_notes::tools(&store).expect("declare the tools"))
            .expect("registry");
        let dispatcher = Dispatcher::new(Arc::new(registry)).expect("dispatcher");
        let via_dispatcher = runtime.block_on(async {
            let mut samples = Vec::new();
            for _ in 0..rounds {
                for query in QUERIES {
                    let request = CallRequest::new(
                        principal.clone(),
                        "run-1",
                        "notes_search",
                        json!({"query": query}),
                    );
                    let t = Instant::now();
                    let outcome = dispatcher.call(request).await;
                    samples.push(t.elapsed());
                    assert!(!outcome.is_error(), "{}", outcome.model_text());
                    std::hint::black_box(outcome);
                }
            }
            samples
        });
        rows.push(Row {
            notes,
            path: "dispatcher: notes_search",
            samples: Samples(via_dispatcher),
        });
    }

    println!(
        "notes_search latency: {} build, {} cores, {} queries x {} rounds per row, {}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        QUERIES.len(),
        rounds,
        if full {
            "full run"
        } else {
            "quick run (pass --bench for the full one)"
        },
    );
    for (notes, took) in &builds {
        println!(
            "built {notes} generated notes (one transaction, FTS5 triggers) in {:.2} s",
            took.as_secs_f64()
        );
    }
    println!(
        "\n{:>8}  {:<26} {:>7} {:>10} {:>10}",
        "notes", "path", "calls", "p50 µs", "p99 µs"
    );
    for row in &rows {
        println!(
            "{:>8}  {:<26} {:>7} {:>10.0} {:>10.0}",
            row.notes,
            row.path,
            row.samples.0.len(),
            row.samples.percentile_us(50.0),
            row.samples.percentile_us(99.0),
        );
    }
    let (small, large) = (sizes[0], sizes[1]);
    println!("\nratio {}k/{}k:", large / 1000, small / 1000);
    for path in ["store: run_search", "dispatcher: notes_search"] {
        let find = |notes: usize| rows.iter().find(|r| r.notes == notes && r.path == path);
        if let (Some(a), Some(b)) = (find(small), find(large)) {
            println!(
                "  {:<26} p50 {:.1}x, p99 {:.1}x",
                path,
                b.samples.percentile_us(50.0) / a.samples.percentile_us(50.0),
                b.samples.percentile_us(99.0) / a.samples.percentile_us(99.0),
            );
        }
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
}
