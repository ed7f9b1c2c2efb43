//! The load run: many HTTP clients at once, each write sent several times (the same
//! arguments; for half the writes also the same `_meta` idempotency key, for the other half
//! the effect identity the server derives from its run, the principal, the tool and the
//! arguments), reads in between; then every write is counted in the SQLite store and must
//! have had exactly one effect, and the process's resident memory must not have grown past
//! the case's bound from the end of the warm-up to the end of the run.
//!
//! The server runs in this process, so the memory figure is the server's and the clients'
//! together: an upper bound on the server's own growth.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use toolgate_wiring::Store;

use super::format::LoadCase;
use super::wire::{Http, modern_meta, rss_kib};

/// What one load run counted.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadFigures {
    pub id: String,
    pub clients: usize,
    pub duration_ms: u64,
    pub retries: usize,
    /// Every POST sent.
    pub requests: usize,
    pub requests_per_s: f64,
    /// Distinct writes (each sent up to `retries` times).
    pub writes: usize,
    pub write_sends: usize,
    /// Write answers that were a success (a first effect or a replayed receipt).
    pub write_successes: usize,
    /// Writes sent with a caller-given `_meta` idempotency key.
    pub writes_with_given_key: usize,
    pub reads: usize,
    pub read_successes: usize,
    /// 503 "busy" answers (not an effect; the write may be retried).
    pub busy: usize,
    /// Answers that were neither a success nor busy, and client-side failures.
    pub failures: usize,
    /// Up to 5 of them, for the reviewer.
    pub failure_samples: Vec<String>,
    /// `notes_create` calls the dispatcher's trace marks `duplicate` (a retry answered with the
    /// first effect's receipt); set by the harness from the trace.
    pub replays_in_trace: usize,
    /// Writes found in the store with exactly one row.
    pub writes_with_one_effect: usize,
    /// Writes with more than one row (a retry ran twice): must be 0.
    pub writes_with_duplicate_effects: usize,
    /// Writes answered with a success but with no row: must be 0.
    pub writes_answered_but_missing: usize,
    pub rss_warm_kib: u64,
    pub rss_end_kib: u64,
    pub rss_peak_kib: u64,
    pub rss_growth_kib: i64,
    pub rss_growth_bound_kib: u64,
}

impl LoadFigures {
    /// What is wrong with the run, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.writes_with_duplicate_effects > 0 {
            problems.push(format!(
                "{} writes had more than one effect",
                self.writes_with_duplicate_effects
            ));
        }
        if self.writes_answered_but_missing > 0 {
            problems.push(format!(
                "{} writes were answered with success but left no row",
                self.writes_answered_but_missing
            ));
        }
        if self.failures > 0 {
            problems.push(format!(
                "{} requests failed (e.g. {})",
                self.failures,
                self.failure_samples.first().cloned().unwrap_or_default()
            ));
        }
        if self.write_successes == 0 || self.read_successes == 0 {
            problems.push("no write or no read succeeded: the run showed nothing".into());
        }
        if self.rss_growth_kib > 0 && self.rss_growth_kib as u64 > self.rss_growth_bound_kib {
            problems.push(format!(
                "resident memory grew {} KiB after the warm-up, over the bound of {} KiB",
                self.rss_growth_kib, self.rss_growth_bound_kib
            ));
        }
        problems
    }
}

#[derive(Default)]
struct Tally {
    requests: usize,
    write_sends: usize,
    write_successes: usize,
    reads: usize,
    read_successes: usize,
    busy: usize,
    failures: usize,
    failure_samples: Vec<String>,
    /// Writes (by number) that got at least one success.
    succeeded: std::collections::BTreeSet<usize>,
}

/// The title of write `n` of the run `nonce`: what the row count finds it by.
fn title(nonce: &str, n: usize) -> String {
    format!("load {nonce} {n}")
}

/// The `tools/call` of write `n` (caller-given key for even `n`).
fn write_call(nonce: &str, n: usize, id: usize) -> Value {
    let mut meta = modern_meta();
    if n.is_multiple_of(2)
        && let Value::Object(map) = &mut meta
    {
        map.insert(
            toolgate_mcp::IDEMPOTENCY_KEY_META.into(),
            Value::String(format!("load-{nonce}-{n}")),
        );
    }
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": "notes_create",
            "arguments": {"title": title(nonce, n), "body": "written by the robustness load run", "tags": ["load"]},
            "_meta": meta
        }
    })
}

fn read_call(id: usize) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": "notes_search",
            "arguments": {"query": "load"},
            "_meta": modern_meta()
        }
    })
}

enum Kind {
    Write(usize),
    Read,
}

/// Runs `load` against `http`, counting effects in `store`; `nonce` keeps this run's notes
/// apart from any other's.
pub async fn run(load: &LoadCase, http: &Http, store: &Store, nonce: &str) -> LoadFigures {
    let started = Instant::now();
    let duration = Duration::from_millis(load.duration_ms);
    let warm_up = duration / 5;
    let deadline = started + duration;
    let sends = Arc::new(AtomicUsize::new(0));
    let ids = Arc::new(AtomicUsize::new(1));
    let tally = Arc::new(std::sync::Mutex::new(Tally::default()));
    let wait = Duration::from_secs(20);

    let mut clients = Vec::with_capacity(load.clients);
    for client in 0..load.clients {
        let (http, sends, ids, tally) = (
            http.clone(),
            Arc::clone(&sends),
            Arc::clone(&ids),
            Arc::clone(&tally),
        );
        let (retries, nonce) = (load.retries, nonce.to_string());
        clients.push(tokio::spawn(async move {
            // Bounded by the deadline, and by a count far above what the time allows.
            for round in 0..1_000_000usize {
                if Instant::now() >= deadline {
                    break;
                }
                let id = ids.fetch_add(1, Ordering::Relaxed);
                // Consecutive sends go to different clients, so the retries of one write race
                // each other; every third round of a client is a read.
                let (kind, message) = if (round + client) % 3 == 2 {
                    (Kind::Read, read_call(id))
                } else {
                    let n = sends.fetch_add(1, Ordering::Relaxed) / retries;
                    (Kind::Write(n), write_call(&nonce, n, id))
                };
                let answer = http.call(&message, wait).await;
                let mut t = match tally.lock() {
                    Ok(t) => t,
                    Err(_) => return,
                };
                t.requests += 1;
                let success = match &answer {
                    Ok(a) if a.status == 200 => a.message.as_ref().is_some_and(|m| {
                        m.get("result").is_some()
                            && m.pointer("/result/isError") != Some(&Value::Bool(true))
                    }),
                    _ => false,
                };
                let busy = matches!(&answer, Ok(a) if a.status == 503);
                match kind {
                    Kind::Write(n) => {
                        t.write_sends += 1;
                        if success {
                            t.write_successes += 1;
                            t.succeeded.insert(n);
                        }
                    }
                    Kind::Read => {
                        t.reads += 1;
                        if success {
                            t.read_successes += 1;
                        }
                    }
                }
                if busy {
                    t.busy += 1;
                } else if !success {
                    t.failures += 1;
                    if t.failure_samples.len() < 5 {
                        let sample = match &answer {
                            Ok(a) => {
                                format!("HTTP {}: {}", a.status, super::wire::preview(&a.body))
                            }
                            Err(e) => e.to_string(),
                        };
                        t.failure_samples.push(sample);
                    }
                }
            }
        }));
    }

    // Memory: sampled every 100 ms; the warm figure is the first sample after the warm-up.
    let mut rss_warm = None;
    let mut rss_peak = 0;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = rss_kib().unwrap_or(0);
        if started.elapsed() >= warm_up {
            rss_warm.get_or_insert(now);
            rss_peak = rss_peak.max(now);
        }
    }
    for client in clients {
        // A client past its deadline finishes its request in flight (bounded by `wait`).
        let _ = tokio::time::timeout(wait + Duration::from_secs(1), client).await;
    }
    let rss_end = rss_kib().unwrap_or(0);
    let rss_warm = rss_warm.unwrap_or(rss_end);
    let elapsed = started.elapsed();

    let tally = match Arc::try_unwrap(tally) {
        Ok(m) => m.into_inner().unwrap_or_default(),
        Err(shared) => shared
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default(),
    };
    let writes = sends.load(Ordering::Relaxed).div_ceil(load.retries);
    let rows = count_rows(store, &format!("load {nonce} "));
    let mut figures = LoadFigures {
        id: load.id.clone(),
        clients: load.clients,
        duration_ms: elapsed.as_millis() as u64,
        retries: load.retries,
        requests: tally.requests,
        requests_per_s: (tally.requests as f64 / elapsed.as_secs_f64() * 10.0).round() / 10.0,
        writes,
        write_sends: tally.write_sends,
        write_successes: tally.write_successes,
        writes_with_given_key: writes.div_ceil(2),
        reads: tally.reads,
        read_successes: tally.read_successes,
        busy: tally.busy,
        failures: tally.failures,
        failure_samples: tally.failure_samples,
        rss_warm_kib: rss_warm,
        rss_end_kib: rss_end,
        rss_peak_kib: rss_peak.max(rss_end),
        rss_growth_kib: rss_end as i64 - rss_warm as i64,
        rss_growth_bound_kib: load.rss_growth_mib * 1024,
        ..LoadFigures::default()
    };
    match rows {
        Ok(rows) => {
            for n in 0..writes {
                match rows.get(&title(nonce, n)).copied().unwrap_or(0) {
                    1 => figures.writes_with_one_effect += 1,
                    0 if tally.succeeded.contains(&n) => figures.writes_answered_but_missing += 1,
                    0 => {}
                    _ => figures.writes_with_duplicate_effects += 1,
                }
            }
        }
        Err(why) => {
            figures.failures += 1;
            figures
                .failure_samples
                .push(format!("counting rows failed: {why}"));
        }
    }
    figures
}

/// Rows per title of the notes whose title starts with `prefix` (a run's own).
pub(super) fn count_rows(store: &Store, prefix: &str) -> Result<BTreeMap<String, usize>, String> {
    let pattern = format!("{prefix}%");
    store
        .with_conn(|conn| -> Result<BTreeMap<String, usize>, rusqlite::Error> {
            let mut statement = conn
                .prepare("SELECT title, COUNT(*) FROM notes WHERE title LIKE ?1 GROUP BY title")?;
            let rows = statement.query_map([&pattern], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
            })?;
            let mut counts = BTreeMap::new();
            for row in rows {
                let (title, n) = row?;
                counts.insert(title, usize::try_from(n).unwrap_or(0));
            }
            Ok(counts)
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_even_writes_carry_a_caller_given_key_and_retries_are_identical() {
        let a = write_call("x", 4, 1);
        let b = write_call("x", 4, 2);
        assert_eq!(a["params"], b["params"], "a retry must be the same request");
        assert_eq!(
            a["params"]["_meta"][toolgate_mcp::IDEMPOTENCY_KEY_META],
            "load-x-4"
        );
        let odd = write_call("x", 5, 3);
        assert!(
            odd["params"]["_meta"]
                .get(toolgate_mcp::IDEMPOTENCY_KEY_META)
                .is_none()
        );
    }

    #[test]
    fn a_run_with_a_duplicate_effect_or_too_much_growth_has_problems() {
        let fine = LoadFigures {
            write_successes: 10,
            read_successes: 3,
            writes_with_one_effect: 10,
            rss_growth_kib: 100,
            rss_growth_bound_kib: 1024,
            ..LoadFigures::default()
        };
        assert!(fine.problems().is_empty());
        let table = [
            LoadFigures {
                writes_with_duplicate_effects: 1,
                ..fine.clone()
            },
            LoadFigures {
                writes_answered_but_missing: 1,
                ..fine.clone()
            },
            LoadFigures {
                failures: 1,
                ..fine.clone()
            },
            LoadFigures {
                rss_growth_kib: 2048,
                ..fine.clone()
            },
            LoadFigures {
                read_successes: 0,
                ..fine.clone()
            },
        ];
        for figures in table {
            assert_eq!(figures.problems().len(), 1, "{figures:?}");
        }
    }
}
