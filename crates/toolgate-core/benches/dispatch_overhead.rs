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
use toolgate_core::canonical::{canonical_json, digest_parts};
use toolgate_core::idempotency::{
    self, IdempotencyKey, ReceiptLog, WriteEffect, recorded, run_once_on,
};
use toolgate_core::observation;
use toolgate_core::schema;
use toolgate_core::sql::Sql;
use toolgate_core::sql_params;
use toolgate_core::trace::{JsonlTrace, MemoryTrace, TraceSink};
use toolgate_core::{
    CallOutcome, CallRequest, CancelToken, Clock, Dispatcher, Effect, Principal, Receipt, Registry,
    Risk, SystemClock, ToolBuilder, ToolError, ToolOutput,
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

fn insert_note(tx: &dyn Sql, title: &str) -> Result<WriteEffect, ToolError> {
    let id = tx.query_i64(
        "INSERT INTO notes (title) VALUES (?1) RETURNING id",
        sql_params![title],
    )?;
    Ok(WriteEffect {
        result: json!({"note_id": id}),
        undo: Some(json!({"delete_note": id})),
    })
}

/// The receipts table as the dispatcher reads it before a write, the way the stores' shared
/// connection does: here when the connection is free, else from a blocking thread.
struct BenchReceipts(SharedDb);

impl ReceiptLog for BenchReceipts {
    fn recorded(&self, key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError> {
        let conn = self
            .0
            .lock()
            .map_err(|_| ToolError::internal("database lock poisoned"))?;
        recorded(&*conn, key)
    }

    fn recorded_here(&self, key: &IdempotencyKey) -> Option<Result<Option<Receipt>, ToolError>> {
        let conn = self.0.try_lock().ok()?;
        Some(recorded(&*conn, key))
    }
}

/// Where a bench write's handler runs its commit.
#[derive(Clone, Copy)]
enum WriteAt {
    /// On tokio's blocking pool (`spawn_blocking`): the stores' way before issue 39.
    Pool,
    /// Where `toolgate_core::blocking::run_blocking` puts it: on this worker inside
    /// `block_in_place` on the multi-thread runtime (the stores' way now).
    RunBlocking,
    /// On the calling task, blocking it (a floor: no runtime may do this with a commit that
    /// waits on the disk).
    Here,
}

fn note_add_tool(name: &str, db: SharedDb, at: WriteAt) -> toolgate_core::Tool {
    let receipts = BenchReceipts(Arc::clone(&db));
    ToolBuilder::<NoteAddArgs>::new(name, 1)
        .describe("Adds a note.", "the user asks.", None, "the note id.")
        .example("add", json!({"title": "milk"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "A note can be deleted.",
        )
        .receipts(receipts)
        .write(move |ctx, args: NoteAddArgs| {
            let db = Arc::clone(&db);
            async move {
                let key = ctx.write_key()?.clone();
                let now = ctx.now_unix;
                let write = move || -> Result<Receipt, ToolError> {
                    let mut conn = db
                        .lock()
                        .map_err(|_| ToolError::internal("database lock poisoned"))?;
                    run_once_on(&mut *conn, &key, now, |tx| insert_note(tx, &args.title))
                };
                match at {
                    // The bench's file commits without waiting on the disk (WAL, synchronous
                    // NORMAL), so the write can run on the calling task.
                    WriteAt::Here => write(),
                    WriteAt::RunBlocking => {
                        toolgate_core::blocking::run_blocking("the bench write", write).await
                    }
                    WriteAt::Pool => tokio::task::spawn_blocking(write)
                        .await
                        .map_err(|e| ToolError::internal(format!("write task failed: {e}")))?,
                }
            }
        })
        .expect("declare a bench write tool")
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
    // The write handler as the stores ran it (on the blocking pool: their commits may wait on
    // the disk), as they run it now, and on the calling task.
    let pool_tool = note_add_tool("bench_note_add_pool", Arc::clone(&db), WriteAt::Pool);
    let note_tool = note_add_tool("bench_note_add", Arc::clone(&db), WriteAt::RunBlocking);
    let note_here_tool = note_add_tool("bench_note_add_here", db, WriteAt::Here);
    Registry::new([search_tool, pool_tool, note_tool, note_here_tool]).expect("build the registry")
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
        "{:<44} {:>7} {:>11} {:>11} {:>11} {:>9} {:>9}",
        "path", "calls", "median µs", "mean µs", "+µs median", "× median", "× mean"
    );
    let Some(base) = rows.first() else { return };
    let (base_median, base_mean) = (base.median_us(), base.mean_us());
    for row in rows {
        println!(
            "{:<44} {:>7} {:>11.2} {:>11.2} {:>11.2} {:>8.1}x {:>8.1}x",
            row.label,
            row.samples.len(),
            row.median_us(),
            row.mean_us(),
            row.median_us() - base_median,
            row.median_us() / base_median,
            row.mean_us() / base_mean,
        );
    }
}

/// Cost in µs of one `step()`: the fastest of `batches` batches (the machine is shared, and
/// other load only ever adds time), timed per batch so the clock read does not dominate.
fn per_call_us(batches: usize, batch: usize, mut step: impl FnMut(usize)) -> f64 {
    for i in 0..batch {
        step(i);
    }
    let per_call: Vec<f64> = (0..batches)
        .map(|b| {
            let started = Instant::now();
            for i in 0..batch {
                step(b * batch + i);
            }
            started.elapsed().as_secs_f64() * 1e6 / batch as f64
        })
        .collect();
    per_call.into_iter().reduce(f64::min).unwrap_or(0.0)
}

/// The async version of [`per_call_us`], for steps that await (same estimator).
async fn per_call_us_async<F, Fut>(batches: usize, batch: usize, mut step: F) -> f64
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for i in 0..batch {
        step(i).await;
    }
    let mut per_call = Vec::with_capacity(batches);
    for b in 0..batches {
        let started = Instant::now();
        for i in 0..batch {
            step(b * batch + i).await;
        }
        per_call.push(started.elapsed().as_secs_f64() * 1e6 / batch as f64);
    }
    per_call.into_iter().reduce(f64::min).unwrap_or(0.0)
}

/// Where one read call's time goes: each step the dispatcher performs, re-run on its own with
/// the same values through the public API (the steps behind `pub(crate)` are reproduced with
/// what they do: `parse` is `serde_json::from_value` of a clone, twice per call). Rows marked
/// `alt:` are cheaper ways to do a step, measured beside it; they are not in the sum.
async fn breakdown(registry: &Arc<Registry>, sample: &CallOutcome, batches: usize, batch: usize) {
    let Some(tool) = registry.get("bench_search") else {
        return;
    };
    let schema_value = &tool.spec.input_schema;
    let deadline = tool.spec.executor.deadline;
    let args_of = |i: usize| json!({"query": format!("milk {i}"), "limit": 5});
    let content_of = |i: usize| {
        let hits: Vec<Value> = (0..5)
            .map(|k| json!({"id": k, "title": format!("milk {i} result {k}")}))
            .collect();
        json!({"query": format!("milk {i}"), "hits": hits})
    };
    let record: &toolgate_core::DecisionRecord = &sample.record;
    let memory = MemoryTrace::default();
    let dir = tempfile::tempdir().expect("temp dir");
    let jsonl = JsonlTrace::create(&dir.path().join("breakdown.jsonl")).expect("trace file");
    let clock = SystemClock;

    let build_args = per_call_us(batches, batch, |i| {
        std::hint::black_box(args_of(i));
    });
    let build_content = per_call_us(batches, batch, |i| {
        std::hint::black_box(content_of(i));
    });
    let mut rows: Vec<(&str, f64)> = Vec::new();
    let mut row = |label, with: f64, base: f64| rows.push((label, (with - base).max(0.0)));

    let t = per_call_us(batches, batch, |i| {
        let args = args_of(i);
        let mut copy = args.clone();
        std::hint::black_box(observation::redact_value(&mut copy));
    });
    row("call: clone + redact_value(arguments)", t, build_args);
    let t = per_call_us(batches, batch, |i| {
        let args = args_of(i);
        std::hint::black_box(digest_parts(&[&canonical_json(&args)]));
    });
    row("call: args_hash = digest(canonical_json)", t, build_args);
    // The dispatcher validates with the schema the tool compiled once at declaration.
    let compiled =
        schema::CompiledSchema::derived(schema_value).expect("the bench schema compiles");
    let t = per_call_us(batches, batch, |i| {
        let args = args_of(i);
        std::hint::black_box(compiled.validate(&args));
    });
    row("run: validate (schema compiled once)", t, build_args);
    let t = per_call_us(batches, batch, |i| {
        let args = args_of(i);
        for _ in 0..2 {
            let parsed: Result<SearchArgs, _> = serde_json::from_value(args.clone());
            let _ = std::hint::black_box(parsed);
        }
    });
    row("run: parse arguments x2 (check + call)", t, build_args);
    let t = per_call_us(batches, batch, |_| {
        std::hint::black_box(clock.today());
        std::hint::black_box(clock.now());
    });
    row("run: clock.today() + clock.now()", t, 0.0);
    let t = per_call_us(batches, batch, |i| {
        let args = args_of(i);
        let request = CallRequest::new(
            Principal::local("alice", &[]),
            "bench-run",
            "bench_search",
            args,
        );
        std::hint::black_box(request);
    });
    row("bench: CallRequest::new (caller side)", t, build_args);
    let bare = per_call_us_async(batches, batch, |i| async move {
        std::hint::black_box(std::future::ready(i).await);
    })
    .await;
    let cancel = CancelToken::new();
    let t = per_call_us_async(batches, batch, |i| {
        let cancel = cancel.clone();
        async move {
            let out = tokio::select! {
                out = Box::pin(std::future::ready(i)) => out,
                () = tokio::time::sleep(deadline) => 0,
                () = cancel.canceled() => 0,
            };
            std::hint::black_box(out);
        }
    })
    .await;
    row("execute: select! + deadline sleep + cancel", t, bare);
    let t = per_call_us(batches, batch, |i| {
        let mut content = content_of(i);
        std::hint::black_box(observation::redact_value(&mut content));
    });
    row("observe: redact_value(result)", t, build_content);
    let t = per_call_us(batches, batch, |i| {
        let content = content_of(i);
        std::hint::black_box(observation::bound(
            content,
            Vec::new(),
            tool.spec.observation.max_bytes,
            &tool.spec.observation.more_hint,
        ));
    });
    row("observe: bound (serializes to measure)", t, build_content);
    let t = per_call_us(batches, batch, |_| {
        std::hint::black_box(sample.record.clone());
        std::hint::black_box(sample.model_text().len());
    });
    row("before: record.clone + model_text().len()", t, 0.0);
    let t = per_call_us(batches, batch, |_| {
        std::hint::black_box(serde_json::to_value(record).unwrap_or(Value::Null));
    });
    row("before: serde_json::to_value(record)", t, 0.0);
    let observed = sample.observation();
    let t = per_call_us(batches, batch, |_| {
        std::hint::black_box(observed.map(observation::Observation::model_text_len));
    });
    row("alt: Observation::model_text_len (no clone)", t, 0.0);
    let mut line = Vec::with_capacity(1024);
    let t = per_call_us(batches, batch, |_| {
        line.clear();
        let written = serde_json::to_writer(&mut line, record);
        std::hint::black_box((written.is_ok(), line.len()));
    });
    row("alt: to_writer(record) into a reused buffer", t, 0.0);
    let bare_select = per_call_us_async(batches, batch, |i| {
        let cancel = cancel.clone();
        async move {
            let out = tokio::select! {
                out = Box::pin(std::future::ready(i)) => out,
                () = cancel.canceled() => 0,
            };
            std::hint::black_box(out);
        }
    })
    .await;
    row(
        "alt: select! + cancel, no deadline sleep",
        bare_select,
        bare,
    );
    let t = per_call_us(batches, batch, |_| {
        memory.record(Arc::new(record.clone()));
    });
    let clone_only = per_call_us(batches, batch, |_| {
        std::hint::black_box(Arc::new(record.clone()));
    });
    row(
        "trace: MemoryTrace::record (typed, kept as is)",
        t,
        clone_only,
    );
    let t = per_call_us(batches, batch, |_| {
        jsonl.record(Arc::new(record.clone()));
    });
    row(
        "trace: JsonlTrace::record (serialize, write + flush)",
        t,
        clone_only,
    );

    // Whole calls under the same estimator, so the ratio is comparable on a loaded machine; in
    // short batches (a long one is always cut by the scheduler when others load the cores).
    let (whole_batches, whole_batch) = (batches * 25, batch.div_ceil(25));
    let direct = per_call_us_async(whole_batches, whole_batch, |i| async move {
        let args = SearchArgs {
            query: format!("milk {i}"),
            limit: Some(5),
        };
        std::hint::black_box(search(args).await.ok());
    })
    .await;
    let alice = Principal::local("alice", &[]);
    let mut whole = Vec::new();
    for (label, dispatcher) in [
        (
            "NoTrace",
            Dispatcher::new(Arc::clone(registry)).expect("dispatcher"),
        ),
        (
            "MemoryTrace",
            Dispatcher::new(Arc::clone(registry))
                .expect("dispatcher")
                .with_trace(Arc::new(MemoryTrace::default())),
        ),
    ] {
        let (alice, dispatcher) = (&alice, &dispatcher);
        let t = per_call_us_async(whole_batches, whole_batch, |i| async move {
            let request = CallRequest::new(alice.clone(), "bench-run", "bench_search", args_of(i));
            std::hint::black_box(dispatcher.call(request).await);
        })
        .await;
        whole.push((label, t));
    }

    println!(
        "\nread call breakdown (each step alone, fastest of {batches} batches of {batch}; inputs built outside the timing)"
    );
    println!("{:<48} {:>9}", "step", "µs/call");
    let mut total = 0.0;
    for (label, us) in &rows {
        if !label.starts_with("bench:")
            && !label.starts_with("alt:")
            && !label.starts_with("trace: Jsonl")
        {
            total += us;
        }
        println!("{label:<48} {us:>9.2}");
    }
    println!(
        "{:<48} {:>9.2}",
        "sum (MemoryTrace; without the bench: row)", total
    );
    println!(
        "{:<48} {:>9.2}",
        "whole read: handler called directly", direct
    );
    for (label, t) in whole {
        println!(
            "{:<48} {t:>9.2}  (+{:.2} µs, {:.1}x direct)",
            format!("whole read: dispatcher + {label}"),
            t - direct,
            t / direct
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
    let with_no_trace = Dispatcher::new(Arc::clone(&registry)).expect("dispatcher");
    let with_memory = Arc::new(
        Dispatcher::new(Arc::clone(&registry))
            .expect("dispatcher")
            .with_trace(memory_trace.clone()),
    );
    let with_jsonl = Arc::new(
        Dispatcher::new(Arc::clone(&registry))
            .expect("dispatcher")
            .with_trace(Arc::clone(&jsonl_trace)),
    );
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
            ("read: dispatcher + NoTrace", &with_no_trace),
            ("read: dispatcher + MemoryTrace", &*with_memory),
            ("read: dispatcher + JsonlTrace (file)", &*with_jsonl),
        ] {
            let alice = &alice;
            rows.push(
                measure(label, read_warmup, read_iterations, |i| async move {
                    let request = CallRequest::new(
                        alice.clone(),
                        "bench-run",
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

    // Writes on the runtime the front ends run (the CLI and the MCP server: multi-thread),
    // measured from a task on one of its workers, as a handler runs.
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("tokio multi-thread runtime");
    let (db_writes, memory_writes, jsonl_writes, alice_writes) = (
        Arc::clone(&db),
        Arc::clone(&with_memory),
        Arc::clone(&with_jsonl),
        alice.clone(),
    );
    let write_task = multi.spawn(async move {
        let (db, with_memory, with_jsonl, alice) =
            (db_writes, memory_writes, jsonl_writes, alice_writes);
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
                        insert_note(&*conn, &format!("direct {i}")).expect("insert");
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
                            &Principal::local("alice", &[]),
                            "bench-run",
                            "bench_note_add",
                            &args.to_string(),
                        );
                        let receipt = run_once_on(&mut *conn, &key, 0, |tx| {
                            insert_note(tx, &format!("receipt {i}"))
                        })
                        .expect("run_once");
                        assert!(!receipt.duplicate());
                    }
                },
            )
            .await,
        );
        for (label, prefix, tool, dispatcher) in [
            (
                "write: dispatcher + MemoryTrace",
                "memory",
                "bench_note_add",
                &with_memory,
            ),
            (
                "write: dispatcher + JsonlTrace, pool hop",
                "pool",
                "bench_note_add_pool",
                &with_jsonl,
            ),
            (
                "write: dispatcher + JsonlTrace (file)",
                "jsonl",
                "bench_note_add",
                &with_jsonl,
            ),
            (
                "write: dispatcher + JsonlTrace, write in place",
                "here",
                "bench_note_add_here",
                &with_jsonl,
            ),
        ] {
            let alice = &alice;
            rows.push(
                measure(label, write_warmup, write_iterations, |i| async move {
                    let request = CallRequest::new(
                        alice.clone(),
                        "bench-run",
                        tool,
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
    let write_rows = multi.block_on(write_task).expect("the write measurements");

    let sample = runtime.block_on(with_memory.call(CallRequest::new(
        alice.clone(),
        "bench-run",
        "bench_search",
        json!({"query": "milk sample", "limit": 5}),
    )));

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
    // The goal's baseline: the write with its receipt and no dispatcher.
    print_group(
        "write tool (ratio against run_once with its receipt, no dispatcher)",
        &write_rows[1..],
    );
    println!(
        "\nchecks: {notes} notes (expected {}), {receipts} receipts (expected {}), \
         {} MemoryTrace events, {trace_lines} JSONL trace lines; total {:.1} s",
        6 * writes_per_row,
        5 * writes_per_row,
        memory_trace.events().len(),
        started.elapsed().as_secs_f64(),
    );
    let (batches, batch) = if full { (40, 500) } else { (3, 20) };
    runtime.block_on(breakdown(&registry, &sample, batches, batch));
}
