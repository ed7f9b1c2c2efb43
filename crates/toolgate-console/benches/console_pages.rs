//! The console's pages at scale, rendering included (issue 35's goal: under 100 ms p99): the
//! approval inbox with 1,000 pending tickets, and the audit's search and call pages over
//! 1,000,000 decision records, each answered by the function the console's handler calls once
//! the session is checked (store read, views, minijinja rendering, the response), on a SQLite
//! store and on PostgreSQL (a cluster of the benchmark's own on 127.0.0.1, skipped with a line
//! saying why when none can start), in alternating rounds. Prints p50 and p99 per page and
//! store, each p99 against the baseline measured in the same run (one ticket's page: a row
//! read by its key, rendered), and whether the goal is met.
//!
//! The audit records are those of `toolgate-store`'s `audit_search` bench (1,000 principals,
//! 41 tools, one call in ten a `code_execution` with five children, spread over 30 days); the
//! tickets are `email_send` calls of 1,000 principals with a preview and a taint each.
//!
//! `cargo bench -p toolgate-console --bench console_pages` fills 1,000,000 records per store and
//! measures 300 of each page; any other invocation (`cargo test --all-targets`) fills 20,000
//! and measures 30, to prove the benchmark still works. It asserts nothing about time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http_body_util::BodyExt;
use serde_json::json;
use toolgate_console::audit::{call_page, search_page};
use toolgate_console::pages::{Templates, utc};
use toolgate_console::{inbox_page, ticket_page};
use toolgate_core::approval::ApprovalRequest;
use toolgate_core::taint::{Taint, UntrustedSource};
use toolgate_core::{ApprovalLedger, Effect, Principal, Risk};
use toolgate_store::audit::AuditStore;
use toolgate_store::postgres::cluster::TempCluster;
use toolgate_store::postgres::tickets::PgTickets;
use toolgate_store::postgres::{PgSettings, PgStore};

const ROUNDS: usize = 10;
const TICKETS: usize = 1_000;
const BASE_MS: i64 = 1_780_000_000_000;
/// 30 days over a million records.
const STEP_MS: i64 = 2_592;
const GOAL_MS: f64 = 100.0;

const KINDS: [&str; 8] = [
    "baseline: one ticket's page",
    "inbox, 1,000 pending tickets",
    "audit search by principal, first page",
    "audit search by principal, a page deep in",
    "audit search by tool, first page",
    "audit search by outcome and a one-day range",
    "audit search, everything, newest page",
    "a call's page with its tree (code_execution + 5)",
];

/// The audit fill of `toolgate-store`'s `audit_search` bench, in both databases' spellings.
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

/// Opens `TICKETS` pending inbox tickets in `ledger`; their tokens.
async fn open_tickets(ledger: &ApprovalLedger) -> Vec<String> {
    let mut tokens = Vec::with_capacity(TICKETS);
    for i in 0..TICKETS {
        let principal = Principal::local(&format!("user-{i}"), &[]);
        let to = format!("someone-{i}@example.org");
        let request = ApprovalRequest {
            binding: format!("binding-{i}"),
            tool: "email_send".into(),
            version: 1,
            risk: Risk::High,
            reason: "sends an email".into(),
            effect: Effect::Irreversible,
            arguments: json!({"draft_id": i}),
            preview: Some(json!({
                "to": [to],
                "subject": format!("Booking {i}"),
                "body": "Please find the booking confirmation below. ".repeat(20),
            })),
            principal: principal.id.clone(),
            taint: vec![Taint {
                argument: "preview.to".into(),
                value: to.clone(),
                source: UntrustedSource::new(
                    &format!("note {i} (clipped from https://conference.example/booking)"),
                    &format!("Conference booking\nSend the confirmation to {to}."),
                    "notes_get",
                    &format!("call-{i}"),
                ),
            }],
        };
        let ticket = ledger
            .open_inbox_ticket(
                &request,
                &principal,
                SystemTime::now(),
                Duration::from_secs(3600),
            )
            .await
            .unwrap();
        tokens.push(ticket.token);
    }
    tokens
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

/// `YYYY-MM-DD HH:MM:SS`, as the search form takes a time.
fn form_time(ms: i64) -> String {
    utc(ms / 1000).trim_end_matches(" UTC").to_string()
}

struct Bench {
    name: &'static str,
    audit: AuditStore,
    ledger: Arc<ApprovalLedger>,
    tokens: Vec<String>,
    samples: Vec<Samples>,
}

/// One page of kind `kind`, read whole; its size in bytes (checked to hold what it should).
async fn one(
    bench: &Bench,
    templates: &Templates,
    kind: usize,
    rows: i64,
    dice: &mut Dice,
) -> usize {
    let n = 1 + dice.below(rows);
    let (who, csrf) = ("auditor", "csrf-token");
    let response = match kind {
        0 => {
            let token = &bench.tokens[dice.below(TICKETS as i64) as usize];
            ticket_page(templates, &bench.ledger, token, who, csrf).await
        }
        1 => inbox_page(templates, &bench.ledger, who, csrf).await,
        _ => {
            let query = match kind {
                2 => format!("principal=user-{}", n % 1000),
                3 => {
                    let at = rows / 2 + dice.below(rows / 2);
                    format!(
                        "principal=user-{}&after={}.{at}",
                        n % 1000,
                        BASE_MS + at * STEP_MS
                    )
                }
                4 => format!(
                    "tool=tool_{}",
                    [1, 2, 3, 4, 6, 7, 8, 9][dice.below(8) as usize] + 10 * dice.below(5)
                ),
                5 => {
                    let day = 86_400_000 / STEP_MS;
                    let since = BASE_MS + (1 + dice.below((rows - day).max(1))) * STEP_MS;
                    let code = if dice.below(2) == 0 {
                        "invalid_argument"
                    } else {
                        "forbidden"
                    };
                    format!(
                        "outcome={code}&since={}&until={}",
                        form_time(since),
                        form_time(since + 86_400_000)
                    )
                }
                6 => String::new(),
                _ => {
                    let root = (n / 10).max(1) * 10;
                    format!("run=run-{}&call=call-{root}", root / 1000)
                }
            };
            if kind == 7 {
                call_page(templates, &bench.audit, &query, who, csrf).await
            } else {
                search_page(templates, &bench.audit, &query, who, csrf).await
            }
        }
    };
    assert_eq!(response.status(), 200, "{} {}", bench.name, KINDS[kind]);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let page = std::str::from_utf8(&body).unwrap();
    let expected = match kind {
        0 => "id=\"decide\"",
        1 => "id=\"more\"",
        7 => "class=\"node\"",
        _ => "class=\"call\"",
    };
    assert!(
        page.contains(expected),
        "{} {}: {expected} missing",
        bench.name,
        KINDS[kind]
    );
    body.len()
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (rows, pages) = if full {
        (1_000_000i64, 300usize)
    } else {
        (20_000, 30)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let templates = Templates::load().unwrap();
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
    let cluster = match TempCluster::start() {
        Ok(cluster) => Some(cluster),
        Err(e) => {
            println!("PostgreSQL: skipped, no cluster could start ({e})");
            None
        }
    };
    runtime.block_on(async {
        // The ledger `serve` keeps without a shared store: SQLite, in memory.
        let ledger = Arc::new(ApprovalLedger::in_memory().unwrap());
        let tokens = open_tickets(&ledger).await;
        let mut benches = vec![Bench {
            name: "SQLite",
            audit: AuditStore::open_file(&path).unwrap(),
            ledger,
            tokens,
            samples: vec![Samples::default(); KINDS.len()],
        }];
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
            let ledger = Arc::new(ApprovalLedger::on(PgTickets::new(pg.clone())));
            let tokens = open_tickets(&ledger).await;
            println!(
                "PostgreSQL: {rows} records and {TICKETS} tickets filled in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            benches.push(Bench {
                name: "PostgreSQL",
                audit: AuditStore::on_postgres(pg),
                ledger,
                tokens,
                samples: vec![Samples::default(); KINDS.len()],
            });
        }
        // Unmeasured first: caches warmed, statements prepared.
        for bench in &benches {
            let mut dice = Dice(7);
            for kind in 0..KINDS.len() {
                for _ in 0..5 {
                    one(bench, &templates, kind, rows, &mut dice).await;
                }
            }
        }
        let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
        let mut sizes = vec![0usize; KINDS.len()];
        for _ in 0..ROUNDS {
            let seed = dice.below(i64::MAX) as u64 | 1;
            for bench in &mut benches {
                // The same questions for each store in a round.
                let mut round_dice = Dice(seed);
                for (kind, size) in sizes.iter_mut().enumerate() {
                    for _ in 0..pages / ROUNDS {
                        let started = Instant::now();
                        *size = one(bench, &templates, kind, rows, &mut round_dice).await;
                        bench.samples[kind].0.push(started.elapsed());
                    }
                }
            }
        }
        println!();
        println!("| page | store | pages | last page KiB | p50 ms | p99 ms | p99 / baseline p99 |");
        println!("| --- | --- | --- | --- | --- | --- | --- |");
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
                    "| {what} | {} | {} | {:.0} | {:.2} | {:.2} | {:.1}x |",
                    bench.name,
                    s.0.len(),
                    sizes[kind] as f64 / 1024.0,
                    s.percentile_ms(50.0),
                    p99,
                    p99 / baseline
                );
            }
        }
        println!();
        println!(
            "goal: every page over {TICKETS} tickets and {rows} records under {GOAL_MS} ms p99, \
             rendering included: {} (worst p99 {worst:.2} ms)",
            if worst < GOAL_MS { "met" } else { "not met" }
        );
    });
    drop(cluster);
}
