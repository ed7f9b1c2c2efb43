//! The audit search at scale (issue 35's goal: under 100 ms p99 over 1,000,000 decision
//! records): a SQLite audit file and a PostgreSQL database (a cluster of the benchmark's own on
//! 127.0.0.1, skipped with a line saying why when none can start) are filled with the same
//! generated records, then searched through [`AuditStore`], the API the console calls, in
//! alternating rounds. Prints p50 and p99 per search and store, each p99 against the baseline
//! measured in the same run (a row read by its primary key through the same API), and whether
//! the goal is met.
//!
//! The records: 1,000 principals, 41 tools, one call in ten a `code_execution` whose next five
//! calls are its children, about 8% errors and 5% answered approvals, spread over 30 days.
//!
//! `cargo bench -p toolgate-store --bench audit_search` fills 1,000,000 records per store and
//! runs 300 of each search; any other invocation (such as `cargo test --all-targets`) fills
//! 20,000 and runs 30, to prove the benchmark still works. It asserts nothing about time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use toolgate_store::audit::query::{AuditFilter, Cursor, OutcomeFilter};
use toolgate_store::audit::{ApprovalFilter, AuditStore};
use toolgate_store::postgres::cluster::TempCluster;
use toolgate_store::postgres::{PgSettings, PgStore};

const ROUNDS: usize = 10;
const BASE_MS: i64 = 1_780_000_000_000;
/// 30 days over a million records.
const STEP_MS: i64 = 2_592;
const PAGE: u32 = 50;
const GOAL_MS: f64 = 100.0;

const KINDS: [&str; 8] = [
    "baseline: one row by primary key",
    "by principal, first page",
    "by principal, a page deep in (keyset)",
    "by tool, first page",
    "by outcome and a one-day range",
    "by approval (declined)",
    "everything, newest page",
    "a call's tree (code_execution + 5)",
];

/// The fill, written once with the two databases' spellings of a row generator and a JSON
/// object.
fn fill_sql(rows: i64, postgres: bool) -> String {
    let (generator, json, text) = if postgres {
        (
            format!("generate_series(1::bigint, {rows}) AS g(n)"),
            "jsonb_build_object",
            "n::text",
        )
    } else {
        (
            format!(
                "(WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {rows}) SELECT n FROM g)"
            ),
            "json_object",
            "CAST(n AS TEXT)",
        )
    };
    format!(
        "INSERT INTO decisions (time_unix_ms, instance, call_id, parent_call_id, run_id, tenant,
             principal, tool, tool_version, origin, risk, stage, outcome, approval, denial,
             decided_by, idempotency_key, duplicate, catalogue_digest, record)
         SELECT {BASE_MS} + n * {STEP_MS}, 'bench/1', call_id, parent_call_id, run_id, '',
             principal, tool, 1, origin, 'low', 'done', outcome, approval, denial, decided_by,
             NULL, {false_}, NULL,
             {json}('gen_ai.tool.call.id', call_id, 'gen_ai.tool.name', tool, 'principal', principal,
                    'run_id', run_id, 'origin', origin, 'outcome', outcome,
                    'approval', {json}('status', approval),
                    'arguments', {json}('title', 'Note ' || {text},
                        'body', 'Quarterly planning notes: budget, hiring, travel and the garden beds; ' || {text}))
         FROM (SELECT n,
             'call-' || {text} AS call_id,
             CASE WHEN n % 10 BETWEEN 1 AND 5 THEN 'call-' || CAST(n - n % 10 AS TEXT) END AS parent_call_id,
             'run-' || CAST(n / 1000 AS TEXT) AS run_id,
             'user-' || CAST(n % 1000 AS TEXT) AS principal,
             CASE WHEN n % 10 = 0 THEN 'code_execution' ELSE 'tool_' || CAST(n % 50 AS TEXT) END AS tool,
             CASE WHEN n % 10 BETWEEN 1 AND 5 THEN 'sandbox' ELSE 'loop' END AS origin,
             CASE WHEN n % 97 = 0 THEN 'approval_denied' WHEN n % 89 = 0 THEN 'approval_required'
                  WHEN n % 20 = 0 THEN 'invalid_argument' WHEN n % 53 = 0 THEN 'forbidden'
                  ELSE 'ok' END AS outcome,
             CASE WHEN n % 97 = 0 THEN 'denied' WHEN n % 89 = 0 THEN 'pending'
                  WHEN n % 31 = 0 THEN 'approved' ELSE 'not_needed' END AS approval,
             CASE WHEN n % 97 = 0 THEN 'declined' END AS denial,
             CASE WHEN n % 97 = 0 OR (n % 31 = 0 AND n % 89 <> 0) THEN 'approver-' || CAST(n % 7 AS TEXT) END AS decided_by
           FROM {generator}) AS r",
        false_ = if postgres { "false" } else { "0" },
    )
}

/// A small deterministic generator (xorshift), so both stores get the same questions.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: i64) -> i64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as i64
    }
}

#[derive(Default, Clone)]
struct Samples(Vec<Duration>);

impl Samples {
    fn percentile_ms(&self, p: f64) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1e3
    }
}

/// One query of kind `kind`; returns how many rows it read (to check it found something).
async fn one(store: &AuditStore, kind: usize, rows: i64, dice: &mut Dice) -> usize {
    let n = 1 + dice.below(rows);
    let principal = || Some(format!("user-{}", n % 1000));
    let page = |filter: AuditFilter, after: Option<Cursor>| async move {
        store
            .search(&filter, after, PAGE)
            .await
            .unwrap()
            .entries
            .len()
    };
    match kind {
        0 => usize::from(store.entry(n).await.unwrap().is_some()),
        1 => {
            page(
                AuditFilter {
                    principal: principal(),
                    ..Default::default()
                },
                None,
            )
            .await
        }
        2 => {
            // A cursor somewhere in the newer half: older rows of the principal follow it.
            let at = rows / 2 + dice.below(rows / 2);
            let after = Cursor {
                time_unix_ms: BASE_MS + at * STEP_MS,
                id: at,
            };
            page(
                AuditFilter {
                    principal: principal(),
                    ..Default::default()
                },
                Some(after),
            )
            .await
        }
        3 => {
            let tool = format!(
                "tool_{}",
                [1, 2, 3, 4, 6, 7, 8, 9][dice.below(8) as usize] + 10 * dice.below(5)
            );
            page(
                AuditFilter {
                    tool: Some(tool),
                    ..Default::default()
                },
                None,
            )
            .await
        }
        4 => {
            let day = 86_400_000 / STEP_MS;
            let since = BASE_MS + (1 + dice.below((rows - day).max(1))) * STEP_MS;
            let code = if dice.below(2) == 0 {
                "invalid_argument"
            } else {
                "forbidden"
            };
            page(
                AuditFilter {
                    outcome: Some(code.parse::<OutcomeFilter>().unwrap()),
                    since_ms: Some(since),
                    until_ms: Some(since + 86_400_000),
                    ..Default::default()
                },
                None,
            )
            .await
        }
        5 => {
            page(
                AuditFilter {
                    approval: Some(ApprovalFilter::Declined),
                    ..Default::default()
                },
                None,
            )
            .await
        }
        6 => page(AuditFilter::default(), None).await,
        _ => {
            let root = (n / 10).max(1) * 10;
            let tree = store
                .tree(
                    &format!("call-{root}"),
                    Some(&format!("run-{}", root / 1000)),
                )
                .await
                .unwrap();
            tree.map_or(0, |t| t.len())
        }
    }
}

struct Bench {
    name: &'static str,
    store: AuditStore,
    samples: Vec<Samples>,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (rows, queries) = if full {
        (1_000_000i64, 300usize)
    } else {
        (20_000, 30)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.sqlite");
    let started = Instant::now();
    {
        let conn = toolgate_store::audit::sqlite::open_file(&path).unwrap();
        conn.execute_batch(&format!(
            "BEGIN; {}; COMMIT; ANALYZE;",
            fill_sql(rows, false)
        ))
        .unwrap();
    }
    println!(
        "SQLite: {rows} records filled in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let mut benches = vec![Bench {
        name: "SQLite file",
        store: AuditStore::open_file(&path).unwrap(),
        samples: vec![Samples::default(); KINDS.len()],
    }];
    let cluster = match TempCluster::start() {
        Ok(cluster) => Some(cluster),
        Err(e) => {
            println!("PostgreSQL: skipped, no cluster could start ({e})");
            None
        }
    };
    runtime.block_on(async {
        if let Some(cluster) = &cluster {
            let started = Instant::now();
            let pg = PgStore::connect(&cluster.url(), PgSettings::default())
                .await
                .unwrap();
            let client = pg.client().await.unwrap();
            client.batch_execute(&fill_sql(rows, true)).await.unwrap();
            client
                .batch_execute("VACUUM ANALYZE decisions")
                .await
                .unwrap();
            drop(client);
            println!(
                "PostgreSQL: {rows} records filled in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            benches.push(Bench {
                name: "PostgreSQL",
                store: AuditStore::on_postgres(pg),
                samples: vec![Samples::default(); KINDS.len()],
            });
        }
        // Unmeasured first: caches warmed, statements prepared.
        for bench in &benches {
            let mut dice = Dice(7);
            for kind in 0..KINDS.len() {
                for _ in 0..5 {
                    one(&bench.store, kind, rows, &mut dice).await;
                }
            }
        }
        let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
        for _ in 0..ROUNDS {
            for bench in &mut benches {
                // The same questions for each store in a round.
                let seed = dice.below(i64::MAX) as u64 | 1;
                let mut round_dice = Dice(seed);
                for (kind, what) in KINDS.iter().enumerate() {
                    for _ in 0..queries / ROUNDS {
                        let started = Instant::now();
                        let found = one(&bench.store, kind, rows, &mut round_dice).await;
                        bench.samples[kind].0.push(started.elapsed());
                        assert!(found > 0, "{} found nothing for {what}", bench.name);
                    }
                }
            }
        }
    });
    println!();
    println!("| search | store | queries | p50 ms | p99 ms | p99 / baseline p99 |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut worst: f64 = 0.0;
    for (kind, what) in KINDS.iter().enumerate() {
        for bench in &benches {
            let s = &bench.samples[kind];
            let p99 = s.percentile_ms(99.0);
            let baseline = bench.samples[0].percentile_ms(99.0);
            if kind > 0 {
                worst = worst.max(p99);
            }
            println!(
                "| {what} | {} | {} | {:.2} | {:.2} | {:.1}x |",
                bench.name,
                s.0.len(),
                s.percentile_ms(50.0),
                p99,
                p99 / baseline
            );
        }
    }
    println!();
    println!(
        "goal: every search over {rows} records under {GOAL_MS} ms p99: {} (worst p99 {worst:.2} ms)",
        if worst < GOAL_MS { "met" } else { "not met" }
    );
    drop(cluster);
}
