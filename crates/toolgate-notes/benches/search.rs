//! `notes_search` latency as the notebook grows, through the store function (the handler's
//! work: FTS5 MATCH, BM25 ranking, snippets) and through the dispatcher (validation,
//! blocking-thread hop, observation bound), with p50/p99, the growth from each size to the
//! next, the database's size on disk, and, at the largest size, each query's matches and
//! latency (which query sets the p99), and the ranking statement alone (the share of a search
//! that ranks every match).
//!
//! `cargo bench -p toolgate-notes` runs 1k, 10k, 100k and 1M notes (issue 39's growth curve);
//! `cargo bench -p toolgate-notes -- --sizes 10000,100000` runs the sizes given. Any other
//! invocation (such as `cargo test --all-targets`) runs 1k and 10k with fewer queries, to prove
//! the benchmark still works. It prints tables and asserts nothing about time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_core::sql::Dialect;
use toolgate_core::{CallRequest, Dispatcher, Principal, Registry, ToolError, sql_params};
use toolgate_notes::search::fts_query;
use toolgate_notes::search_sql;
use toolgate_notes::{NotesStore, SearchArgs, generate_notes};

/// What a user might type: single common words, phrases, a whole question, a miss.
const QUERIES: &[&str] = toolgate_notes::sample::SEARCH_QUERY_MIX;
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
    path: String,
    samples: Samples,
}

/// The sizes to build: `--sizes a,b,..` when given, else the full curve under `--bench` and
/// two small sizes otherwise.
fn sizes(args: &[String], full: bool) -> Vec<usize> {
    let given = args
        .iter()
        .position(|a| a == "--sizes")
        .and_then(|i| args.get(i + 1))
        .map(|list| {
            list.split(',')
                .map(|n| {
                    n.trim()
                        .parse::<usize>()
                        .expect("--sizes takes numbers, e.g. 1000,10000")
                })
                .collect::<Vec<_>>()
        });
    match given {
        Some(sizes) if !sizes.is_empty() => sizes,
        _ if full => vec![1_000, 10_000, 100_000, 1_000_000],
        _ => vec![1_000, 10_000],
    }
}

/// Rounds of the query mix per row: fewer at a million notes, where one search of a common
/// word takes the better part of a second, so the whole curve stays within minutes.
fn rounds_for(notes: usize, full: bool) -> usize {
    match (full, notes) {
        (false, _) => 2,
        (true, n) if n >= 1_000_000 => 5,
        (true, _) => 20,
    }
}

/// One query's matches (every word; any word when none has them all) on `store`.
fn matches(store: &NotesStore, query: &str) -> (i64, i64) {
    let terms = fts_query(query);
    let count = |expr: Option<String>| -> i64 {
        let Some(expr) = expr else { return 0 };
        store
            .with_sql(|conn| {
                conn.query_i64(
                    search_sql::count(Dialect::Sqlite),
                    sql_params![expr, Option::<&str>::None],
                )
                .map_err(ToolError::from)
            })
            .expect("count the matches")
    };
    (count(terms.all_words()), count(terms.any_word()))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let sizes = sizes(&args, full);
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    let principal = Principal::local("bench", &[]);
    let mut rows = Vec::new();
    let mut builds = Vec::new();
    let mut per_query = Vec::new();

    for &notes in &sizes {
        let rounds = rounds_for(notes, full);
        let build_started = Instant::now();
        let path = dir.path().join(format!("notes-{notes}.sqlite"));
        let store = NotesStore::init(&path).expect("create the bench database");
        store
            .insert_notes(&generate_notes(notes, SEED))
            .expect("insert the generated notes");
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        builds.push((notes, build_started.elapsed(), bytes));

        // Warm the page cache and the statement cache once per query.
        for query in QUERIES {
            store.search(&SearchArgs::query(query)).expect("search");
        }
        let mut direct = Vec::new();
        let mut by_query: Vec<Vec<Duration>> = vec![Vec::new(); QUERIES.len()];
        for _ in 0..rounds {
            for (q, query) in QUERIES.iter().enumerate() {
                let t = Instant::now();
                let out = store.search(&SearchArgs::query(query)).expect("search");
                let took = t.elapsed();
                direct.push(took);
                by_query[q].push(took);
                std::hint::black_box(out);
            }
        }
        rows.push(Row {
            notes,
            path: "store: run_search".into(),
            samples: Samples(direct),
        });

        // The ranking statement alone: every match ranked for one page of five.
        let mut statement = Vec::new();
        for _ in 0..rounds {
            for query in QUERIES {
                let terms = fts_query(query);
                let Some(expr) = terms.all_words() else {
                    continue;
                };
                let t = Instant::now();
                let page = store
                    .with_sql(|conn| {
                        conn.query(
                            &search_sql::page(Dialect::Sqlite),
                            sql_params![expr, Option::<&str>::None, 5u32, 0u32],
                        )
                        .map_err(ToolError::from)
                    })
                    .expect("the page statement");
                statement.push(t.elapsed());
                std::hint::black_box(page);
            }
        }
        rows.push(Row {
            notes,
            path: "statement: rank a page".into(),
            samples: Samples(statement),
        });

        // The snippet's statement for one hit (the newest note matching the words).
        let (highlight_sql, marks) = search_sql::highlight(Dialect::Sqlite);
        let mut highlight = Vec::new();
        for _ in 0..rounds {
            for query in QUERIES {
                let terms = fts_query(query);
                let Some(expr) = terms.all_words() else {
                    continue;
                };
                let newest = store
                    .with_sql(|conn| {
                        conn.query(
                            "SELECT max(rowid) FROM notes_fts WHERE notes_fts MATCH ?1",
                            sql_params![expr.clone()],
                        )
                        .map_err(ToolError::from)
                    })
                    .expect("the newest match");
                let Some(id) = newest.first().and_then(|row| row.i64(0).ok()) else {
                    continue;
                };
                let t = Instant::now();
                let marked = store
                    .with_sql(|conn| {
                        conn.query(
                            highlight_sql,
                            sql_params![expr, id, marks[0].clone(), marks[1].clone()],
                        )
                        .map_err(ToolError::from)
                    })
                    .expect("the highlight statement");
                highlight.push(t.elapsed());
                std::hint::black_box(marked);
            }
        }
        rows.push(Row {
            notes,
            path: "statement: mark one hit".into(),
            samples: Samples(highlight),
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
            path: "dispatcher: notes_search".into(),
            samples: Samples(via_dispatcher),
        });
        if Some(&notes) == sizes.last() {
            per_query = QUERIES
                .iter()
                .zip(by_query)
                .map(|(query, samples)| (*query, matches(&store, query), Samples(samples)))
                .collect();
        }
    }

    println!(
        "notes_search latency: {} build, {} cores, {} queries per round, {}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        QUERIES.len(),
        if full {
            "full run (20 rounds per row, 5 at 1M notes)"
        } else {
            "quick run, 2 rounds (pass --bench for the full one)"
        },
    );
    for (notes, took, bytes) in &builds {
        println!(
            "built {notes} generated notes (one transaction, FTS5 triggers) in {:.2} s: {:.1} MB on disk",
            took.as_secs_f64(),
            *bytes as f64 / 1e6,
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
    println!("\ngrowth from each size to the next:");
    for pair in sizes.windows(2) {
        let (small, large) = (pair[0], pair[1]);
        for path in [
            "store: run_search",
            "statement: rank a page",
            "statement: mark one hit",
            "dispatcher: notes_search",
        ] {
            let find = |notes: usize| rows.iter().find(|r| r.notes == notes && r.path == path);
            if let (Some(a), Some(b)) = (find(small), find(large)) {
                println!(
                    "  {small:>7} -> {large:<7} {path:<26} p50 {:.1}x, p99 {:.1}x",
                    b.samples.percentile_us(50.0) / a.samples.percentile_us(50.0),
                    b.samples.percentile_us(99.0) / a.samples.percentile_us(99.0),
                );
            }
        }
    }
    if let Some(largest) = sizes.last() {
        println!(
            "\neach query at {largest} notes (store: run_search; matches of every word / of any word):"
        );
        for (query, (every, any), samples) in &per_query {
            println!(
                "  {query:<40} {every:>8} / {any:<8} p50 {:>9.0} µs  p99 {:>9.0} µs",
                samples.percentile_us(50.0),
                samples.percentile_us(99.0),
            );
        }
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
}
