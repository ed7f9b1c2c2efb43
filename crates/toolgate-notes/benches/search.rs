//! `notes_search` latency as the notebook grows, through the store function (the handler's
//! work: FTS5 MATCH, BM25 ranking, snippets) and through the dispatcher (validation,
//! blocking-thread hop, observation bound), with p50/p99, the growth from each size to the
//! next, the database's size on disk, and, at the largest size, each query's matches and
//! latency (which query sets the p99), and the ranking statement alone (the share of a search
//! that ranks every match), and the same first page from FTS5's statement and from the top-k
//! index beside it (`toolgate_notes::search_index`), with each one's build time, size and the
//! ratio between them in the same run (the bench checks both give the same ids).
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
use toolgate_notes::notebook_index::{IndexPolicy, IndexState, index_dir};
use toolgate_notes::search::{FtsQuery, fts_query};
use toolgate_notes::search_index::PageRequest;
use toolgate_notes::search_sql;
use toolgate_notes::{Kind, NotesStore, SearchArgs, generate_notes};

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

/// A first page of five, every word or any word, any kind.
fn first_page(every: bool) -> PageRequest {
    PageRequest {
        every,
        kind: None,
        limit: 5,
        offset: 0,
    }
}

/// The ids of FTS5's first page of five for the match expression `expr`, any kind.
fn first_page_statement(store: &NotesStore, expr: &str) -> Vec<i64> {
    store
        .with_sql(|conn| {
            conn.query(
                &search_sql::page(Dialect::Sqlite),
                sql_params![expr, Option::<&str>::None, 5u32, 0u32],
            )
            .map_err(ToolError::from)
        })
        .expect("the page statement")
        .iter()
        .map(|row| row.i64(0).expect("an id"))
        .collect()
}

/// Each query of the mix searched through `store` (of `kind` when given), `rounds` times.
fn time_searches(store: &NotesStore, rounds: usize, kind: Option<Kind>) -> Vec<Duration> {
    let mut samples = Vec::new();
    for _ in 0..rounds {
        for query in QUERIES {
            let mut args = SearchArgs::query(query);
            args.kind = kind;
            let t = Instant::now();
            let out = store.search(&args).expect("search");
            samples.push(t.elapsed());
            std::hint::black_box(out);
        }
    }
    samples
}

/// FTS5's first page of five as the search asks for it: every word, then any word.
fn fts5_every_then_any(store: &NotesStore, parsed: &FtsQuery) -> Vec<i64> {
    let page = |expr: Option<String>| -> Vec<i64> {
        expr.map_or_else(Vec::new, |expr| first_page_statement(store, &expr))
    };
    let every = page(parsed.all_words());
    if every.is_empty() && parsed.terms.len() > 1 {
        page(parsed.any_word())
    } else {
        every
    }
}

/// The bytes of the files in `dir`.
fn folder_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// This process's resident memory in MB (Linux), 0 elsewhere.
fn resident_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
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
    let mut index_builds = Vec::new();

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
                let page = first_page_statement(&store, &expr);
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

        // The same page both ways, as the search asks for it: every word, then any word when
        // no note has them all (five hits, no kind). FTS5 ranks every match; the top-k index
        // (`toolgate_notes::search_index`) counts every match and scores only those that can
        // still enter the page.
        // The same notebook opened again as a large one is: its index prepared on its own
        // thread (the time is the whole preparation: tokenizing every note and indexing it).
        let resident_before = resident_mb();
        let index_started = Instant::now();
        let indexed = NotesStore::open_with(&path, IndexPolicy::FromNotes(0))
            .expect("open the notebook with its index");
        let state = indexed.wait_for_search_index(Duration::from_secs(3_600));
        assert_eq!(state, Some(IndexState::Ready), "the index was not prepared");
        index_builds.push((
            notes,
            index_started.elapsed(),
            folder_bytes(&index_dir(&path)),
            resident_mb() - resident_before,
        ));
        let index = indexed.search_index().expect("the ready index");
        // Warm the index's files and its cached statistics once per query, as FTS5's are.
        for query in QUERIES {
            let terms = index.query_terms(&fts_query(query).terms).expect("terms");
            index
                .page(&terms, first_page(false))
                .expect("the index page");
        }
        let mut fts5_pages = Vec::new();
        let mut index_pages = Vec::new();
        let mut index_by_query: Vec<Vec<Duration>> = vec![Vec::new(); QUERIES.len()];
        for _ in 0..rounds {
            for (q, query) in QUERIES.iter().enumerate() {
                let parsed = fts_query(query);
                let t = Instant::now();
                let fts5 = fts5_every_then_any(&store, &parsed);
                fts5_pages.push(t.elapsed());
                let t = Instant::now();
                let terms = index.query_terms(&parsed.terms).expect("the query's terms");
                let mut page = index
                    .page(&terms, first_page(true))
                    .expect("the index page");
                if page.total == 0 && terms.len() > 1 {
                    page = index
                        .page(&terms, first_page(false))
                        .expect("the index page");
                }
                let took = t.elapsed();
                index_pages.push(took);
                index_by_query[q].push(took);
                assert_eq!(page.ids, fts5, "{query}: the index and FTS5 disagree");
            }
        }
        rows.push(Row {
            notes,
            path: "fts5: every, then any word".into(),
            samples: Samples(fts5_pages),
        });
        rows.push(Row {
            notes,
            path: "index: every, then any word".into(),
            samples: Samples(index_pages),
        });
        drop(index);
        rows.push(Row {
            notes,
            path: "store, indexed: run_search".into(),
            samples: Samples(time_searches(&indexed, rounds, None)),
        });
        // The kind filter (meetings), which FTS5 applies by joining every match to its note.
        for (store, path) in [
            (&store, "store: kind = meeting"),
            (&indexed, "store, indexed: kind = meeting"),
        ] {
            rows.push(Row {
                notes,
                path: path.into(),
                samples: Samples(time_searches(store, rounds, Some(Kind::Meeting))),
            });
        }

        for (store, path) in [
            (&store, "dispatcher: notes_search"),
            (&indexed, "dispatcher, indexed"),
        ] {
            let registry = Registry::new(toolgate_notes::tools(store).expect("declare the tools"))
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
                path: path.into(),
                samples: Samples(via_dispatcher),
            });
        }
        // A search right after a write (a new note, or an edit of one, in turn): the index
        // first applies the change (a delete and an add, a commit, a reload), and an edited
        // note leaves a deleted document its counts must skip. Last, as it changes the notebook.
        let mut after_write: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            for (q, query) in QUERIES.iter().enumerate() {
                if (round + q) % 2 == 0 {
                    store
                        .insert_notes(&generate_notes(1, (round * QUERIES.len() + q) as u64))
                        .expect("a new note");
                } else {
                    store
                        .with_conn(|conn| {
                            conn.execute(
                                "UPDATE notes SET body = body || ' edited' WHERE id = ?1",
                                [1 + (round * QUERIES.len() + q) as i64],
                            )
                        })
                        .expect("the connection")
                        .expect("an edit");
                }
                for (samples, store) in after_write.iter_mut().zip([&store, &indexed]) {
                    let t = Instant::now();
                    let out = store.search(&SearchArgs::query(query)).expect("search");
                    samples.push(t.elapsed());
                    std::hint::black_box(out);
                }
            }
        }
        let [fts5_after, index_after] = after_write;
        rows.push(Row {
            notes,
            path: "store: after a write".into(),
            samples: Samples(fts5_after),
        });
        rows.push(Row {
            notes,
            path: "store, indexed: after a write".into(),
            samples: Samples(index_after),
        });
        if Some(&notes) == sizes.last() {
            per_query = QUERIES
                .iter()
                .zip(by_query)
                .zip(index_by_query)
                .map(|((query, samples), index_samples)| {
                    (
                        *query,
                        matches(&store, query),
                        Samples(samples),
                        Samples(index_samples),
                    )
                })
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
    for (notes, took, bytes, resident) in &index_builds {
        println!(
            "indexed {notes} notes (top-k index prepared on opening: tokenized, indexed, one segment) in {:.2} s: {:.1} MB on disk; the process's resident memory {resident:+.0} MB",
            took.as_secs_f64(),
            *bytes as f64 / 1e6,
        );
    }
    println!(
        "\n{:>8}  {:<30} {:>7} {:>10} {:>10}",
        "notes", "path", "calls", "p50 µs", "p99 µs"
    );
    for row in &rows {
        println!(
            "{:>8}  {:<30} {:>7} {:>10.0} {:>10.0}",
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
            "fts5: every, then any word",
            "index: every, then any word",
            "store, indexed: run_search",
            "store: kind = meeting",
            "store, indexed: kind = meeting",
            "dispatcher: notes_search",
            "dispatcher, indexed",
            "store: after a write",
            "store, indexed: after a write",
        ] {
            let find = |notes: usize| rows.iter().find(|r| r.notes == notes && r.path == path);
            if let (Some(a), Some(b)) = (find(small), find(large)) {
                println!(
                    "  {small:>7} -> {large:<7} {path:<30} p50 {:.1}x, p99 {:.1}x",
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
        for (query, (every, any), samples, index_samples) in &per_query {
            println!(
                "  {query:<40} {every:>8} / {any:<8} p50 {:>9.0} µs  p99 {:>9.0} µs; index p50 {:>7.0} µs  p99 {:>7.0} µs",
                samples.percentile_us(50.0),
                samples.percentile_us(99.0),
                index_samples.percentile_us(50.0),
                index_samples.percentile_us(99.0),
            );
        }
    }
    println!(
        "\nthe index against FTS5 for the same work, in the same run (FTS5 time / index time):"
    );
    for (fts5_path, index_path) in [
        ("fts5: every, then any word", "index: every, then any word"),
        ("store: run_search", "store, indexed: run_search"),
        ("store: kind = meeting", "store, indexed: kind = meeting"),
        ("dispatcher: notes_search", "dispatcher, indexed"),
        ("store: after a write", "store, indexed: after a write"),
    ] {
        for &notes in &sizes {
            let find = |path: &str| rows.iter().find(|r| r.notes == notes && r.path == path);
            if let (Some(fts5), Some(index)) = (find(fts5_path), find(index_path)) {
                println!(
                    "  {index_path:<30} {notes:>8} notes: p50 {:.1}x, p99 {:.1}x faster",
                    fts5.samples.percentile_us(50.0) / index.samples.percentile_us(50.0),
                    fts5.samples.percentile_us(99.0) / index.samples.percentile_us(99.0),
                );
            }
        }
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
}
