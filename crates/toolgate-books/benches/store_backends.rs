//! The cost of a team's shared store, per call through the dispatcher: the same books-v4 read
//! (`books_search` by author) and write (`books_tag`, a new key each time) on a SQLite file and on
//! PostgreSQL (a cluster of the benchmark's own on 127.0.0.1), in the same run, alternating
//! rounds so that whatever else the machine does falls on both. Prints mean, p50 and p99 per
//! store and the PostgreSQL/SQLite ratio of each, and the goal (a read within 2x).
//!
//! `cargo bench -p toolgate-books --bench store_backends` runs 2,000 reads and 400 writes per
//! store; any other invocation (such as `cargo test --all-targets`) runs 40 and 10, to prove the
//! benchmark still works. It asserts nothing about time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_books::{BooksStore, Toolset};
use toolgate_core::{CallRequest, Dispatcher, Principal, Registry};
use toolgate_store::postgres::cluster::TempCluster;
use toolgate_store::postgres::{PgSettings, PgStore};

const AUTHORS: [&str; 5] = ["Orwell", "Rowling", "King", "Austen", "Tolkien"];
const ROUNDS: usize = 10;

#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn percentile_us(&self, p: f64) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1e6
    }

    fn mean_us(&self) -> f64 {
        self.0.iter().map(Duration::as_secs_f64).sum::<f64>() / self.0.len() as f64 * 1e6
    }
}

fn dispatcher(store: &BooksStore) -> Dispatcher {
    Dispatcher::new(Arc::new(
        Registry::new(Toolset::V4.tools(store).unwrap()).unwrap(),
    ))
    .unwrap()
}

async fn reads(d: &Dispatcher, n: usize, into: &mut Samples) {
    let who = Principal::local("bench", &[]);
    for i in 0..n {
        let args = json!({"author": AUTHORS[i % AUTHORS.len()], "limit": 5});
        let started = Instant::now();
        let out = d
            .call(CallRequest::new(who.clone(), "run", "books_search", args))
            .await;
        into.0.push(started.elapsed());
        assert!(!out.is_error(), "{:?}", out.result);
    }
}

async fn writes(d: &Dispatcher, round: usize, n: usize, into: &mut Samples) {
    let who = Principal::local("bench", &[]);
    for i in 0..n {
        let args = json!({"author": AUTHORS[i % AUTHORS.len()], "limit": 1, "tag": format!("r{round} n{i}")});
        let key = format!("bench-{round}-{i}");
        let started = Instant::now();
        let out = d
            .call(
                CallRequest::new(who.clone(), "run", "books_tag", args).with_idempotency_key(&key),
            )
            .await;
        into.0.push(started.elapsed());
        assert!(!out.is_error(), "{:?}", out.result);
    }
}

fn line(what: &str, store: &str, s: &Samples) {
    println!(
        "| {what} | {store} | {} | {:.0} | {:.0} | {:.0} |",
        s.0.len(),
        s.mean_us(),
        s.percentile_us(50.0),
        s.percentile_us(99.0)
    );
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (n_reads, n_writes) = if full { (2000, 400) } else { (40, 10) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cluster = TempCluster::start().unwrap();
    runtime.block_on(async {
        let file = BooksStore::init(&dir.path().join("books.sqlite")).unwrap();
        let pg = PgStore::connect(&cluster.url(), PgSettings::default()).await.unwrap();
        let shared = BooksStore::on_postgres(pg).await.unwrap();
        let (on_file, on_pg) = (dispatcher(&file), dispatcher(&shared));
        let mut samples: [[Samples; 2]; 2] = Default::default();
        // A round of each first, unmeasured: connections opened, statements prepared.
        reads(&on_file, 20, &mut Samples::default()).await;
        reads(&on_pg, 20, &mut Samples::default()).await;
        for round in 0..ROUNDS {
            let [file_reads, pg_reads] = &mut samples[0];
            reads(&on_file, n_reads / ROUNDS, file_reads).await;
            reads(&on_pg, n_reads / ROUNDS, pg_reads).await;
            let [file_writes, pg_writes] = &mut samples[1];
            writes(&on_file, round, n_writes / ROUNDS, file_writes).await;
            writes(&on_pg, round, n_writes / ROUNDS, pg_writes).await;
        }
        println!("| call | store | calls | mean µs | p50 µs | p99 µs |\n| --- | --- | --- | --- | --- | --- |");
        for (what, [file, pg]) in ["read (books_search)", "write (books_tag)"].iter().zip(&samples) {
            line(what, "SQLite file", file);
            line(what, "PostgreSQL", pg);
        }
        println!();
        for (what, [file, pg]) in ["read", "write"].iter().zip(&samples) {
            println!(
                "{what}: PostgreSQL / SQLite = {:.2}x mean, {:.2}x p99",
                pg.mean_us() / file.mean_us(),
                pg.percentile_us(99.0) / file.percentile_us(99.0)
            );
        }
        let [file_reads, pg_reads] = &samples[0];
        let ratio = pg_reads.mean_us() / file_reads.mean_us();
        println!(
            "goal: a read through the dispatcher on PostgreSQL within 2x of SQLite: {} ({ratio:.2}x)",
            if ratio <= 2.0 { "met" } else { "not met" }
        );
    });
}
