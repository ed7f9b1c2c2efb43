//! Per-call overhead of the dispatcher (resolve, validate, policy, receipt, trace, observation)
//! against calling the same handler directly.
//!
//! `cargo bench -p toolgate-core` runs the full measurement; any other invocation (such as
//! `cargo test --all-targets`) runs a few iterations only, to prove the benchmark still works.
//! It prints a table and asserts nothing about time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::idempotency::{self, IdempotencyKey, WriteEffect, run_once, store_error};
use toolgate_core::trace::{JsonlTrace, MemoryTrace, TraceSink};
use toolgate_core::{
    CallRequest, Dispatcher, Effect, Principal, Receipt, Registry, Risk, ToolBuilder, ToolError,
    ToolOutput,
};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    #[schemars(length(min = 1, max = 100))]
    query: String,
    #[schemars(range(min = 1, max = 50))]
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoteAddArgs {
    #[schemars(length(min = 1, max = 200))]
    title: String,
}

/// The read handler both paths run: a few small hits, like a real search page.
async fn search(args: SearchArgs) -> Result<ToolOutput, ToolError> {
    let limit = args.limit.unwrap_or(5) as usize;
    let hits: Vec<Value> = (0..limit)
        .map(|i| json!({"id": i, "title": format!("{} result {i}", args.query)}))
        .collect();
    Ok(ToolOutput::new(json!({"query": args.query, "hits": hits})))
}

type SharedDb = Arc<Mutex<Connection>>;

fn open_db(path: &Path) -> Connection {
    let conn = Connection::open(path).expect("open the bench database");
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
         CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL);",
    )
    .expect("create the notes table");
    idempotency::install(&conn).expect("create the receipts table");
    conn
}

fn insert_note(tx: &rusqlite::Connection, title: &str) -> Result<WriteEffect, ToolError> {
    tx.execute("INSERT INTO notes (title) VALUES (?1)", [title])
        .map_err(store_error)?;
    let id = tx.last_insert_rowid();
    Ok(WriteEffect {
        result: json!({"note_id": id}),
        undo: Some(json!({"delete_note": id})),
    })
}

fn registry(db: SharedDb) -> Registry {
    let search_tool = ToolBuilder::<SearchArgs>::new("bench_search", 1)
        .describe(
            "Searches notes.",
            "you need notes matching words.",
            None,
            "matching titles.",
        )
        .example("search", json!({"query": "milk", "limit": 5}))
        .policy(Risk::Low, Effect::Read, "It only reads.")
        .read(|_ctx, args: SearchArgs| search(args))
        .expect("declare bench_search");
    let note_tool = ToolBuilder::<NoteAddArgs>::new("bench_note_add", 1)
        .describe("Adds a note.", "the user asks.", None, "the note id.")
        .example("add", json!({"title": "milk"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "A note can be deleted.",
        )
        .write(move |ctx, args: NoteAddArgs| {
            let db = Arc::clone(&db);
            async move {
                let key = ctx.write_key()?.clone();
                let now = ctx.now_unix;
                tokio::task::spawn_blocking(move || -> Result<Receipt, ToolError> {
                    let mut conn = db
                        .lock()
                        .map_err(|_| ToolError::internal("database lock poisoned"))?;
                    run_once(&mut conn, &key, now, |tx| insert_note(tx, &args.title))
                })
                .await
                .map_err(|e| ToolError::internal(format!("write task failed: {e}")))?
            }
        })
        .expect("declare bench_note_add");
    Registry::new([search_tool, note_tool]).expect("build the registry")
}

struct Row {
    label: &'static str,
    samples: Vec<Duration>,
}

impl Row {
    fn median_us(&self) -> f64 {
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        sorted
            .get(sorted.len() / 2)
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    }

    fn mean_us(&self) -> f64 {
        let total: Duration = self.samples.iter().sum();
        total.as_secs_f64() * 1e6 / self.samples.len().max(1) as f64
    }
}

/// Times `iterations` calls of `one` after `warmup` untimed ones; `one(i)` gets a call number
/// that is unique across warm-up and timed calls.
async fn measure<F, Fut>(label: &'static str, warmup: usize, iterations: usize, mut one: F) -> Row
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for i in 0..warmup {
        one(i).await;
    }
    let mut samples = Vec::with_capacity(iterations);
    for i in warmup..warmup + iterations {
        let started = Instant::now();
        one(i).await;
        samples.push(started.elapsed());
    }
    Row { label, samples }
}

fn print_group(title: &str, rows: &[Row]) {
    println!("\n{title}");
    println!(
        "{:<44} {:>7} {:>11} {:>11} {:>9} {:>9}",
        "path", "calls", "median µs", "mean µs", "× median", "× mean"
    );
    let Some(base) = rows.first() else { return };
    let (base_median, base_mean) = (base.median_us(), base.mean_us());
    for row in rows {
        println!(
            "{:<44} {:>7} {:>11.2} {:>11.2} {:>8.1}x {:>8.1}x",
            row.label,
            row.samples.len(),
            row.median_us(),
            row.mean_us(),
            row.median_us() / base_median,
            row.mean_us() / base_mean,
        );
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (read_iterations, write_iterations) = if full { (20_000, 2_000) } else { (200, 20) };
    let (read_warmup, write_warmup) = (read_iterations / 10, write_iterations / 10);

    let dir = tempfile::tempdir().expect("temp dir");
    let db: SharedDb = Arc::new(Mutex::new(open_db(&dir.path().join("bench.sqlite"))));
    let registry = Arc::new(registry(Arc::clone(&db)));
    let memory_trace = Arc::new(MemoryTrace::default());
    let jsonl_path = dir.path().join("trace.jsonl");
    let jsonl_trace: Arc<dyn TraceSink> =
        Arc::new(JsonlTrace::create(&jsonl_path).expect("create the trace file"));
    let with_memory = Dispatcher::new(Arc::clone(&registry)).with_trace(memory_trace.clone());
    let with_jsonl = Dispatcher::new(Arc::clone(&registry)).with_trace(Arc::clone(&jsonl_trace));
    let alice = Principal::local("alice", &[]);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    let started = Instant::now();

    let read_rows = runtime.block_on(async {
        let direct = measure(
            "read: handler called directly",
            read_warmup,
            read_iterations,
            |i| async move {
                let args = SearchArgs {
                    query: format!("milk {i}"),
                    limit: Some(5),
                };
                std::hint::black_box(search(args).await.expect("search"));
            },
        )
        .await;
        let mut rows = vec![direct];
        for (label, dispatcher) in [
            ("read: dispatcher + MemoryTrace", &with_memory),
            ("read: dispatcher + JsonlTrace (file)", &with_jsonl),
        ] {
            let alice = &alice;
            rows.push(
                measure(label, read_warmup, read_iterations, |i| async move {
                    let request = CallRequest::new(
                        alice.clone(),
                        "bench_search",
                        json!({"query": format!("milk {i}"), "limit": 5}),
                    );
                    let outcome = dispatcher.call(request).await;
                    assert!(!outcome.is_error(), "{:?}", outcome.result);
                    std::hint::black_box(outcome);
                })
                .await,
            );
        }
        rows
    });

    let write_rows = runtime.block_on(async {
        let mut rows = Vec::new();
        // Each write row uses its own title prefix so that every call is a fresh effect.
        let db_direct = Arc::clone(&db);
        rows.push(
            measure(
                "write: plain SQLite insert",
                write_warmup,
                write_iterations,
                |i| {
                    let db = Arc::clone(&db_direct);
                    async move {
                        let conn = db.lock().expect("lock");
                        insert_note(&conn, &format!("direct {i}")).expect("insert");
                    }
                },
            )
            .await,
        );
        let db_receipt = Arc::clone(&db);
        rows.push(
            measure(
                "write: run_once receipt, no dispatcher",
                write_warmup,
                write_iterations,
                |i| {
                    let db = Arc::clone(&db_receipt);
                    async move {
                        let mut conn = db.lock().expect("lock");
                        let args = json!({"title": format!("receipt {i}")});
                        let key = IdempotencyKey::derived(
                            "bench-run",
                            "bench_note_add",
                            &args.to_string(),
                        );
                        let receipt = run_once(&mut conn, &key, 0, |tx| {
                            insert_note(tx, &format!("receipt {i}"))
                        })
                        .expect("run_once");
                        assert!(!receipt.duplicate);
                    }
                },
            )
            .await,
        );
        for (label, prefix, dispatcher) in [
            ("write: dispatcher + MemoryTrace", "memory", &with_memory),
            (
                "write: dispatcher + JsonlTrace (file)",
                "jsonl",
                &with_jsonl,
            ),
        ] {
            let alice = &alice;
            rows.push(
                measure(label, write_warmup, write_iterations, |i| async move {
                    let request = CallRequest::new(
                        alice.clone(),
                        "bench_note_add",
                        json!({"title": format!("{prefix} {i}")}),
                    )
                    .with_run("bench-run");
                    let outcome = dispatcher.call(request).await;
                    assert!(!outcome.is_error(), "{:?}", outcome.result);
                    assert!(!outcome.record.duplicate, "every write must be fresh");
                })
                .await,
            );
        }
        rows
    });

    let writes_per_row = write_warmup + write_iterations;
    let notes: i64 = db
        .lock()
        .expect("lock")
        .query_row("SELECT count(*) FROM notes", [], |r| r.get(0))
        .expect("count notes");
    let receipts: i64 = db
        .lock()
        .expect("lock")
        .query_row("SELECT count(*) FROM tool_receipts", [], |r| r.get(0))
        .expect("count receipts");
    let trace_lines = std::fs::read_to_string(&jsonl_path)
        .map(|t| t.lines().count())
        .unwrap_or(0);

    println!(
        "dispatch overhead: {} build, {} cores, {}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        if full {
            "full run"
        } else {
            "quick run (pass --bench for the full one)"
        },
    );
    print_group(
        "read tool (ratio against the direct handler call)",
        &read_rows,
    );
    print_group(
        "write tool (ratio against a plain SQLite insert)",
        &write_rows,
    );
    println!(
        "\nchecks: {notes} notes (expected {}), {receipts} receipts (expected {}), \
         {} MemoryTrace events, {trace_lines} JSONL trace lines; total {:.1} s",
        4 * writes_per_row,
        3 * writes_per_row,
        memory_trace.events().len(),
        started.elapsed().as_secs_f64(),
    );
}
