//! MCP `tools/call` through a team deployment, every part real: `toolgate serve --http`
//! instances (books-v4) on one PostgreSQL (a cluster of the benchmark's own on 127.0.0.1),
//! Debian's nginx in front of one, two and three of them (round robin, the configuration the
//! deployment page shows), and, in the same run, one instance on PostgreSQL without nginx and one
//! on a SQLite file: the baselines the others are divided by. Eight clients at once, each
//! request a 2026-07-28 `books_search` on a fresh connection, as `tests/team_deployment.rs` sends
//! them. Rounds alternate between the set-ups so that whatever else the machine does falls on
//! all of them. Prints requests per second, p50 and p99 per set-up and the ratios.
//!
//! On 2 cores the instances, nginx, PostgreSQL and the clients share two CPUs: more instances
//! show the cost of the layers, not scaling.
//!
//! `cargo bench -p toolgate --bench team_http` sends 4,000 requests per set-up; any other
//! invocation (such as `cargo test --all-targets`) sends 80, to prove the benchmark still works.
//! It asserts nothing about time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/team.rs"]
mod team;

use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_store::postgres::cluster::TempCluster;

const CLIENTS: usize = 8;
const ROUNDS: usize = 5;
const AUTHORS: [&str; 4] = [
    "Suzanne Collins",
    "Rick Riordan",
    "Dan Brown",
    "Stephen King",
];

/// `per_client` searches from each of [`CLIENTS`] threads at once against `address`; each
/// request's time, and the wall time of the whole.
fn load(address: &str, per_client: usize) -> (Vec<Duration>, Duration) {
    let started = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let address = address.to_string();
            std::thread::spawn(move || {
                let mut times = Vec::with_capacity(per_client);
                for i in 0..per_client {
                    let args = json!({"author": AUTHORS[(client + i) % AUTHORS.len()], "limit": 5});
                    let sent = Instant::now();
                    let reply =
                        team::modern_call(&address, "books_search", &args, json!({}), json!({}))
                            .unwrap();
                    times.push(sent.elapsed());
                    let message = reply.message().unwrap_or_default();
                    assert!(
                        reply.status == 200 && message["result"]["isError"] != json!(true),
                        "{} {}",
                        reply.status,
                        reply.body
                    );
                }
                times
            })
        })
        .collect();
    let times = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    (times, started.elapsed())
}

#[derive(Default)]
struct Measured {
    times: Vec<Duration>,
    wall: Duration,
}

impl Measured {
    fn per_second(&self) -> f64 {
        self.times.len() as f64 / self.wall.as_secs_f64()
    }

    fn percentile_ms(&self, p: f64) -> f64 {
        let mut sorted = self.times.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1e3
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let per_round = if full { 800 } else { 16 } / CLIENTS;
    let dir = tempfile::tempdir().unwrap();
    let cluster = TempCluster::start().unwrap();
    let url = cluster.url();
    let instances: Vec<team::Instance> = (0..3)
        .map(|i| {
            let home = dir.path().join(format!("instance-{i}"));
            std::fs::create_dir_all(&home).unwrap();
            team::serve(&home, &url, None)
        })
        .collect();
    let sqlite_home = dir.path().join("sqlite");
    std::fs::create_dir_all(&sqlite_home).unwrap();
    let sqlite_file = sqlite_home.join("books.sqlite");
    let on_sqlite = team::serve_with(
        &sqlite_home,
        None,
        &[
            "--toolset",
            "books-v4",
            "--db",
            sqlite_file.to_str().unwrap(),
        ],
    );
    let addresses: Vec<&str> = instances.iter().map(|i| i.address.as_str()).collect();
    let proxies: Vec<team::Nginx> = (1..=3).map(|n| team::nginx(&addresses[..n])).collect();

    let mut setups: Vec<(String, String)> = vec![
        (
            "SQLite, 1 instance, no nginx".into(),
            on_sqlite.address.clone(),
        ),
        (
            "PostgreSQL, 1 instance, no nginx".into(),
            addresses[0].to_string(),
        ),
    ];
    for (n, proxy) in proxies.iter().enumerate() {
        setups.push((
            format!("PostgreSQL, {} behind nginx", n + 1),
            proxy.address.clone(),
        ));
    }
    // Unmeasured: connections, statements and caches warmed on every path.
    for (_, address) in &setups {
        load(address, 4);
    }
    let mut measured: Vec<Measured> = setups.iter().map(|_| Measured::default()).collect();
    for _ in 0..ROUNDS {
        for ((_, address), m) in setups.iter().zip(&mut measured) {
            let (times, wall) = load(address, per_round);
            m.times.extend(times);
            m.wall += wall;
        }
    }

    println!("| set-up | requests | req/s | p50 ms | p99 ms |\n| --- | --- | --- | --- | --- |");
    for ((name, _), m) in setups.iter().zip(&measured) {
        println!(
            "| {name} | {} | {:.0} | {:.1} | {:.1} |",
            m.times.len(),
            m.per_second(),
            m.percentile_ms(50.0),
            m.percentile_ms(99.0)
        );
    }
    println!();
    let direct = &measured[1];
    println!(
        "PostgreSQL / SQLite, one instance without nginx: {:.2}x the requests per second, {:.2}x p99",
        direct.per_second() / measured[0].per_second(),
        direct.percentile_ms(99.0) / measured[0].percentile_ms(99.0)
    );
    for (n, m) in measured[2..].iter().enumerate() {
        println!(
            "{} behind nginx / 1 without: {:.2}x the requests per second, {:.2}x p99",
            n + 1,
            m.per_second() / direct.per_second(),
            m.percentile_ms(99.0) / direct.percentile_ms(99.0)
        );
    }
    let through_nginx = &measured[2];
    let cost = 1.0 - through_nginx.per_second() / direct.per_second();
    println!(
        "goal: nginx adds under 30% at {CLIENTS} connections: {} ({:.0}% fewer requests per second through nginx to the same one instance)",
        if cost < 0.30 { "met" } else { "not met" },
        cost * 100.0
    );
    drop(proxies);
}
