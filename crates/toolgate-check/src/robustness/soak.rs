//! The soak run (`[[soak]]`, never compiled in: `toolgate check robustness --cases
//! security/robustness/soak.toml`): the real `toolgate serve --http 127.0.0.1:0 --toolset notes`
//! in a child process with a fresh store in the output folder, `clients` HTTP clients for
//! `duration_ms` (even ones on 2025-11-25 sessions, each ended with DELETE and replaced every
//! [`SESSION_REQUESTS`] requests; odd ones sending 2026-07-28 stateless requests), two writes
//! (`notes_create`) to a read (`notes_search`), each write sent `retries` times by consecutive
//! clients, so its retries cross both revisions (even writes carry a `_meta` idempotency key,
//! odd ones rely on the identity the server derives).
//!
//! What it guarantees to report: requests, successes, errors and p50/p99 latency per revision;
//! the **server's** resident memory (`/proc/PID/status` VmRSS of the child, not of this
//! process) sampled every second, its figure at the end of the warm-up (the first sample past
//! the first tenth of the run), at the end and at its peak; and every write counted in the
//! store after the server is stopped: exactly one row per acknowledged write. The case fails
//! when memory grew more than `rss_growth_mib` after the warm-up, when more than `max_errors`
//! requests failed, when a write had two effects or an acknowledged one none, when a revision
//! had no success, when the server exited, or when memory could not be sampled (fail closed).
//!
//! Bounds: each request waits at most [`REQUEST_WAIT`], each client loop stops at the deadline
//! (and after [`MAX_ROUNDS`]), the server must say where it listens within [`START_WAIT`], and
//! the whole run has a hard deadline of its duration plus [`GRACE`]: past it the clients are
//! aborted, the child is killed (it is killed on every path, by the guard's drop) and the case
//! is not checked. The server binds 127.0.0.1 only; an address it reports elsewhere is refused.
//!
//! The server is the executable running this check ([`this_toolgate`]): a process that is not
//! `toolgate` (a test harness) is refused rather than started with `serve` arguments.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use toolgate_core::error_chain::error_chain;
use toolgate_wiring::{Store, StoreKind};

use super::format::SoakCase;
use super::load::count_rows;
use super::wire::{LEGACY, MODERN, message_of, modern_meta, preview};
use crate::{CaseResult, Expect, Observed, TraceLocation};

/// How long the child may take to say where it listens.
pub const START_WAIT: Duration = Duration::from_secs(30);
/// How long one request may take.
pub const REQUEST_WAIT: Duration = Duration::from_secs(20);
/// How often the server's memory is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// A 2025-11-25 client's requests on one session before it ends it and opens another.
pub const SESSION_REQUESTS: usize = 200;
/// The most rounds one client makes, whatever the time allows.
pub const MAX_ROUNDS: usize = 10_000_000;
/// Latencies kept per revision (past this, the percentiles are of the first ones).
pub const MAX_LATENCIES: usize = 4_000_000;
/// What a soak may take beyond its duration: the start, the drain, the count.
pub const GRACE: Duration = Duration::from_secs(120);

/// The executable that serves the soak: this one, when it is `toolgate`.
pub fn this_toolgate() -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the running executable: {e}"))?;
    if exe.file_name().and_then(|n| n.to_str()) == Some("toolgate") {
        Ok(exe)
    } else {
        Err(format!(
            "a soak starts `toolgate serve` from the running executable, and {} is not \
             toolgate: run it with `toolgate check robustness --cases ...`",
            exe.display()
        ))
    }
}

/// The file names a soak writes in the output folder: `(store, trace, server log, rss)`.
pub fn files(id: &str) -> (String, String, String, String) {
    let stem: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    (
        format!("soak-{stem}-notes.sqlite"),
        format!("soak-{stem}-trace.jsonl"),
        format!("soak-{stem}-server.log"),
        format!("soak-{stem}-rss.tsv"),
    )
}

/// The protocol revision a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Revision {
    /// 2025-11-25: a session (`Mcp-Session-Id`), opened with `initialize`.
    Sessions,
    /// 2026-07-28: stateless requests carrying their revision in `_meta` and headers.
    Stateless,
}

impl Revision {
    fn of_client(index: usize) -> Self {
        if index.is_multiple_of(2) {
            Revision::Sessions
        } else {
            Revision::Stateless
        }
    }
    fn slot(self) -> usize {
        match self {
            Revision::Sessions => 0,
            Revision::Stateless => 1,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Revision::Sessions => LEGACY,
            Revision::Stateless => MODERN,
        }
    }
}

/// What one revision's clients did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RevisionFigures {
    pub revision: String,
    pub clients: usize,
    /// `tools/call` requests sent (session set-up and tear-down not counted).
    pub requests: usize,
    pub writes_sent: usize,
    pub reads: usize,
    pub successes: usize,
    /// Requests that failed (any answer but a success, a timeout, a reset), session set-ups
    /// that failed included; 503 busy answers included and also counted in `busy`.
    pub errors: usize,
    pub busy: usize,
    pub sessions_opened: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// What a soak counted.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SoakFigures {
    pub id: String,
    pub clients: usize,
    pub duration_ms: u64,
    pub retries: usize,
    pub server_pid: u32,
    pub server_address: String,
    /// `[2025-11-25 sessions, 2026-07-28 stateless]`.
    pub revisions: Vec<RevisionFigures>,
    pub requests: usize,
    pub requests_per_s: f64,
    pub errors: usize,
    pub max_errors: usize,
    /// Up to 5 failures, for the reviewer.
    pub error_samples: Vec<String>,
    /// Distinct writes (each sent up to `retries` times).
    pub writes: usize,
    /// Distinct writes with at least one success.
    pub writes_acknowledged: usize,
    /// Rows of this run's notes in the store after the server stopped.
    pub notes_created: usize,
    pub writes_with_one_effect: usize,
    /// Writes with more than one row (a retry ran twice): must be 0.
    pub writes_with_duplicate_effects: usize,
    /// Writes answered with a success but with no row: must be 0.
    pub writes_answered_but_missing: usize,
    /// `notes_create` calls the server's trace marks `duplicate` (a retry answered with the
    /// first effect's receipt).
    pub replays_in_trace: usize,
    pub rss_samples: usize,
    pub rss_first_kib: u64,
    /// The first sample past the warm-up (the first tenth); 0 when there was none.
    pub rss_warm_kib: u64,
    /// The last sample while the clients were sending; 0 when there was none.
    pub rss_end_kib: u64,
    /// The largest sample past the warm-up.
    pub rss_peak_kib: u64,
    pub rss_growth_kib: i64,
    pub rss_growth_bound_kib: u64,
    /// After the clients stopped, before the server was.
    pub rss_after_drain_kib: u64,
    /// How the server ended before it was stopped, if it did.
    pub server_exited: Option<String>,
}

impl SoakFigures {
    /// What is wrong with the run, if anything: the verdict (empty is a pass).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(how) = &self.server_exited {
            problems.push(format!("the server exited during the run: {how}"));
        }
        if self.rss_warm_kib == 0 || self.rss_end_kib == 0 {
            problems.push(
                "the server's resident memory was not sampled after the warm-up: the growth \
                 bound cannot be checked"
                    .into(),
            );
        } else if self.rss_growth_kib > 0 && self.rss_growth_kib as u64 > self.rss_growth_bound_kib
        {
            problems.push(format!(
                "the server's resident memory grew {} KiB after the warm-up, over the bound of \
                 {} KiB",
                self.rss_growth_kib, self.rss_growth_bound_kib
            ));
        }
        if self.errors > self.max_errors {
            problems.push(format!(
                "{} requests failed, over the bound of {} (e.g. {})",
                self.errors,
                self.max_errors,
                self.error_samples.first().cloned().unwrap_or_default()
            ));
        }
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
        if self.writes_acknowledged == 0 {
            problems.push("no write succeeded: the run showed nothing".into());
        }
        for revision in &self.revisions {
            if revision.successes == 0 {
                problems.push(format!(
                    "no {} request succeeded: the run showed nothing of that revision",
                    revision.revision
                ));
            }
        }
        problems
    }

    /// One line for the report.
    pub fn summary(&self) -> String {
        let per: Vec<String> = self
            .revisions
            .iter()
            .map(|r| {
                format!(
                    "{}: {} requests, {} errors, p50 {} ms, p99 {} ms, {} sessions",
                    r.revision, r.requests, r.errors, r.p50_ms, r.p99_ms, r.sessions_opened
                )
            })
            .collect();
        format!(
            "{} clients for {} ms against toolgate serve (pid {}): {} ({}/s); {} writes \
             acknowledged, {} notes created, {} with exactly one effect, {} retries replayed; \
             server memory {} KiB after warm-up, {} KiB at the end ({:+} KiB, bound {} KiB, \
             peak {} KiB)",
            self.clients,
            self.duration_ms,
            self.server_pid,
            per.join("; "),
            self.requests_per_s,
            self.writes_acknowledged,
            self.notes_created,
            self.writes_with_one_effect,
            self.replays_in_trace,
            self.rss_warm_kib,
            self.rss_end_kib,
            self.rss_growth_kib,
            self.rss_growth_bound_kib,
            self.rss_peak_kib
        )
    }
}

/// The value at quantile `q` (0 to 1, nearest rank) of `sorted` microseconds, in ms with one
/// decimal; 0 for no values.
pub fn percentile_ms(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    (f64::from(sorted[rank - 1]) / 100.0).round() / 10.0
}

/// `(warm, end, peak)` of memory `samples` (`(ms since the start, KiB)`, in time order): the
/// first sample at or past `warm_up_ms`, the last one, the largest past the warm-up. `None`
/// when no sample is past the warm-up.
pub fn rss_figures(samples: &[(u64, u64)], warm_up_ms: u64) -> Option<(u64, u64, u64)> {
    let after: Vec<u64> = samples
        .iter()
        .filter(|(at, _)| *at >= warm_up_ms)
        .map(|(_, kib)| *kib)
        .collect();
    let warm = *after.first()?;
    let end = *after.last()?;
    let peak = after.iter().copied().max().unwrap_or(end);
    Some((warm, end, peak))
}

/// VmRSS in KiB from the text of a `/proc/PID/status`.
pub fn vm_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Where `toolgate serve` says it listens (its `serving ... at http://ADDRESS/mcp` line), if
/// it has said so and the address is a loopback one.
pub fn served_address(log: &str) -> Option<SocketAddr> {
    log.lines().find_map(|line| {
        let rest = line.split_once(" at http://")?.1;
        let address: SocketAddr = rest.split_once("/mcp")?.0.parse().ok()?;
        address.ip().is_loopback().then_some(address)
    })
}

/// The child `toolgate serve`, killed when dropped (on every path, the hard deadline's too).
struct ServerChild {
    child: Child,
}

impl ServerChild {
    fn spawn(
        exe: &Path,
        out_dir: &Path,
        store: &Path,
        trace: &Path,
        log: &Path,
    ) -> Result<Self, String> {
        let log_file = std::fs::File::create(log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let child = Command::new(exe)
            .args([
                "serve",
                "--http",
                "127.0.0.1:0",
                "--toolset",
                "notes",
                "--db",
            ])
            .arg(store)
            .arg("--trace")
            .arg(trace)
            // No ./toolgate.toml of the caller's folder applies: the output folder has none.
            .current_dir(out_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log_file))
            .spawn()
            .map_err(|e| format!("cannot start {} serve: {e}", exe.display()))?;
        Ok(ServerChild { child })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How the server ended, if it has.
    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("cannot be waited for: {e}")),
        }
    }

    /// Its resident memory now, in KiB.
    fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        vm_rss_kib(&status)
    }

    /// Waits (bounded by [`START_WAIT`]) for the line saying where it listens.
    async fn address(&mut self, log: &Path) -> Result<SocketAddr, String> {
        let started = Instant::now();
        let rounds = START_WAIT.as_millis() / 100;
        for _ in 0..rounds {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if let Some(address) = served_address(&text) {
                return Ok(address);
            }
            if let Some(how) = self.exited() {
                return Err(format!("toolgate serve exited ({how}): {}", tail(&text)));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let text = std::fs::read_to_string(log).unwrap_or_default();
        Err(format!(
            "toolgate serve did not say where it listens within {} ms: {}",
            started.elapsed().as_millis(),
            tail(&text)
        ))
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        // SIGKILL: every request has been answered or abandoned by now, and each write's
        // receipt and trace line are on disk before its answer.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

#[derive(Default)]
struct RevisionTally {
    clients: usize,
    requests: usize,
    writes_sent: usize,
    reads: usize,
    successes: usize,
    errors: usize,
    busy: usize,
    sessions_opened: usize,
    latencies_us: Vec<u32>,
}

#[derive(Default)]
struct Tally {
    revisions: [RevisionTally; 2],
    error_samples: Vec<String>,
    /// Writes (by number) that got at least one success.
    acknowledged: BTreeSet<usize>,
}

impl Tally {
    fn error(&mut self, revision: Revision, why: String) {
        self.revisions[revision.slot()].errors += 1;
        if self.error_samples.len() < 5 {
            self.error_samples
                .push(format!("{}: {why}", revision.name()));
        }
    }
}

/// What every client shares.
struct Shared {
    http: reqwest::Client,
    url: String,
    nonce: String,
    retries: usize,
    deadline: Instant,
    /// Set when the server has gone: the clients stop.
    stop: AtomicBool,
    sends: AtomicUsize,
    ids: AtomicUsize,
    tally: Mutex<Tally>,
}

impl Shared {
    fn tally(&self, f: impl FnOnce(&mut Tally)) {
        if let Ok(mut tally) = self.tally.lock() {
            f(&mut tally);
        }
    }
}

/// The title of write `n` of the run `nonce`: what the row count finds it by.
fn title(nonce: &str, n: usize) -> String {
    format!("soak {nonce} {n}")
}

/// The `tools/call` params of write `n` (the caller-given key for even `n`) or of a read, with
/// the `_meta` of `revision`.
fn call_params(revision: Revision, nonce: &str, write: Option<usize>) -> Value {
    let mut meta = match revision {
        Revision::Stateless => modern_meta(),
        Revision::Sessions => json!({}),
    };
    let (name, arguments) = match write {
        Some(n) => {
            if n.is_multiple_of(2)
                && let Value::Object(map) = &mut meta
            {
                map.insert(
                    toolgate_mcp::IDEMPOTENCY_KEY_META.into(),
                    Value::String(format!("soak-{nonce}-{n}")),
                );
            }
            (
                "notes_create",
                json!({"title": title(nonce, n), "body": "written by the robustness soak", "tags": ["soak"]}),
            )
        }
        None => ("notes_search", json!({"query": "soak"})),
    };
    json!({"name": name, "arguments": arguments, "_meta": meta})
}

/// An HTTP answer: status, the session id it gave, body.
struct Answer {
    status: u16,
    session: Option<String>,
    body: Vec<u8>,
}

impl Answer {
    fn succeeded(&self) -> bool {
        self.status == 200
            && message_of(&self.body).is_some_and(|m| {
                m.get("result").is_some()
                    && m.pointer("/result/isError") != Some(&Value::Bool(true))
            })
    }
    fn describe(&self) -> String {
        format!("HTTP {}: {}", self.status, preview(&self.body))
    }
}

/// POSTs `message` as a client of `revision` (on `session` for 2025-11-25; none for its
/// `initialize`).
async fn post(
    shared: &Shared,
    revision: Revision,
    session: Option<&str>,
    message: &Value,
) -> Result<Answer, String> {
    let mut request = shared
        .http
        .post(&shared.url)
        .timeout(REQUEST_WAIT)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    match revision {
        Revision::Stateless => {
            request = request.header("mcp-protocol-version", MODERN);
            if let Some(method) = message["method"].as_str() {
                request = request.header("mcp-method", method);
            }
            if let Some(name) = message.pointer("/params/name").and_then(Value::as_str) {
                request = request.header("mcp-name", name);
            }
        }
        Revision::Sessions => {
            if let Some(session) = session {
                request = request
                    .header("mcp-protocol-version", LEGACY)
                    .header("mcp-session-id", session);
            }
        }
    }
    let response = request
        .body(message.to_string())
        .send()
        .await
        .map_err(|e| error_chain(&e))?;
    let status = response.status().as_u16();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response
        .bytes()
        .await
        .map_err(|e| error_chain(&e))?
        .to_vec();
    Ok(Answer {
        status,
        session,
        body,
    })
}

/// A 2025-11-25 session opened and initialized.
async fn open_session(shared: &Shared, id: usize) -> Result<String, String> {
    let init = json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {},
                   "clientInfo": {"name": "toolgate-check-soak", "version": "0"}}
    });
    let answer = post(shared, Revision::Sessions, None, &init).await?;
    let session = match (&answer.session, answer.succeeded()) {
        (Some(session), true) => session.clone(),
        _ => return Err(format!("initialize: {}", answer.describe())),
    };
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let answer = post(shared, Revision::Sessions, Some(&session), &initialized).await?;
    if !(200..300).contains(&answer.status) {
        return Err(format!("notifications/initialized: {}", answer.describe()));
    }
    Ok(session)
}

/// Ends a 2025-11-25 session (DELETE); its outcome is not judged, only bounded.
async fn end_session(shared: &Shared, session: &str) {
    let _ = shared
        .http
        .delete(&shared.url)
        .timeout(REQUEST_WAIT)
        .header("mcp-protocol-version", LEGACY)
        .header("mcp-session-id", session)
        .send()
        .await;
}

/// One client: until the deadline (or [`MAX_ROUNDS`], or the server gone), a read every
/// third round and a write otherwise.
async fn client(shared: Arc<Shared>, index: usize) {
    let revision = Revision::of_client(index);
    let mut session: Option<String> = None;
    let mut on_session = 0usize;
    for round in 0..MAX_ROUNDS {
        if Instant::now() >= shared.deadline || shared.stop.load(Ordering::Relaxed) {
            break;
        }
        if revision == Revision::Sessions && (session.is_none() || on_session >= SESSION_REQUESTS) {
            if let Some(old) = session.take() {
                end_session(&shared, &old).await;
            }
            let id = shared.ids.fetch_add(1, Ordering::Relaxed);
            match open_session(&shared, id).await {
                Ok(opened) => {
                    session = Some(opened);
                    on_session = 0;
                    shared.tally(|t| t.revisions[0].sessions_opened += 1);
                }
                Err(why) => {
                    shared.tally(|t| t.error(revision, format!("opening a session: {why}")));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            }
        }
        on_session += 1;
        // Consecutive sends go to different clients (so to both revisions): the retries of one
        // write race each other.
        let write = ((round + index) % 3 != 2)
            .then(|| shared.sends.fetch_add(1, Ordering::Relaxed) / shared.retries);
        let id = shared.ids.fetch_add(1, Ordering::Relaxed);
        let message = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": call_params(revision, &shared.nonce, write),
        });
        let started = Instant::now();
        let answer = post(&shared, revision, session.as_deref(), &message).await;
        let took = u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX);
        if revision == Revision::Sessions && matches!(&answer, Ok(a) if a.status == 404) {
            // The session is gone (ended by the server): the next round opens another.
            session = None;
        }
        shared.tally(|t| {
            let r = &mut t.revisions[revision.slot()];
            r.requests += 1;
            if r.latencies_us.len() < MAX_LATENCIES {
                r.latencies_us.push(took);
            }
            match write {
                Some(_) => r.writes_sent += 1,
                None => r.reads += 1,
            }
            match &answer {
                Ok(a) if a.succeeded() => {
                    r.successes += 1;
                    if let Some(n) = write {
                        t.acknowledged.insert(n);
                    }
                }
                Ok(a) => {
                    if a.status == 503 {
                        r.busy += 1;
                    }
                    t.error(revision, a.describe());
                }
                Err(why) => t.error(revision, why.clone()),
            }
        });
    }
    if let Some(old) = session {
        end_session(&shared, &old).await;
    }
}

/// Runs `case` against `exe serve` with its files in `out_dir`: the figures, and the server
/// trace's first replayed write (line number), if any. `Err` when it could not run at all.
async fn soak(
    case: &SoakCase,
    out_dir: &Path,
    exe: &Path,
) -> Result<(SoakFigures, Option<usize>), String> {
    let (store_name, trace_name, log_name, rss_name) = files(&case.id);
    let store_path = out_dir.join(&store_name);
    let trace_path = out_dir.join(&trace_name);
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    for path in [
        store_path.clone(),
        PathBuf::from(format!("{}-wal", store_path.display())),
        PathBuf::from(format!("{}-shm", store_path.display())),
        trace_path.clone(),
    ] {
        if path.exists() {
            std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    let log_path = out_dir.join(&log_name);
    let mut server = ServerChild::spawn(exe, out_dir, &store_path, &trace_path, &log_path)?;
    let address = server.address(&log_path).await?;
    let server_pid = server.pid();
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let duration = Duration::from_millis(case.duration_ms);
    let started = Instant::now();
    let shared = Arc::new(Shared {
        http,
        url: format!("http://{address}/mcp"),
        nonce: format!("{server_pid}-{millis}"),
        retries: case.retries,
        deadline: started + duration,
        stop: AtomicBool::new(false),
        sends: AtomicUsize::new(0),
        ids: AtomicUsize::new(1),
        tally: Mutex::new(Tally::default()),
    });
    // Dropping the set (the hard deadline) aborts every client.
    let mut clients = tokio::task::JoinSet::new();
    for index in 0..case.clients {
        shared.tally(|t| t.revisions[Revision::of_client(index).slot()].clients += 1);
        clients.spawn(client(Arc::clone(&shared), index));
    }

    // The server's memory, every second, until the deadline or its exit.
    let mut samples: Vec<(u64, u64)> = Vec::new();
    let mut server_exited = None;
    let rounds = duration.as_millis() / SAMPLE_EVERY.as_millis() + 1;
    for round in 1..=rounds {
        let next = started + SAMPLE_EVERY * u32::try_from(round).unwrap_or(u32::MAX);
        tokio::time::sleep_until(tokio::time::Instant::from_std(next.min(shared.deadline))).await;
        if let Some(how) = server.exited() {
            server_exited = Some(how);
            shared.stop.store(true, Ordering::Relaxed);
            break;
        }
        if let Some(kib) = server.rss_kib() {
            samples.push((started.elapsed().as_millis() as u64, kib));
        }
        if Instant::now() >= shared.deadline {
            break;
        }
    }
    let ran = started.elapsed();
    // A client past the deadline finishes its request in flight (bounded by REQUEST_WAIT).
    let drain = tokio::time::timeout(REQUEST_WAIT + Duration::from_secs(5), async {
        while clients.join_next().await.is_some() {}
    })
    .await;
    drop(clients);
    let rss_after_drain = server.rss_kib().unwrap_or(0);
    if server_exited.is_none() {
        server_exited = server.exited();
    }
    drop(server);
    write_samples(&out_dir.join(&rss_name), &samples);

    let tally = match shared.tally.lock() {
        Ok(mut t) => std::mem::take(&mut *t),
        Err(_) => Tally::default(),
    };
    let mut revisions = Vec::new();
    for (revision, r) in [Revision::Sessions, Revision::Stateless]
        .into_iter()
        .zip(tally.revisions)
    {
        let mut latencies = r.latencies_us;
        latencies.sort_unstable();
        revisions.push(RevisionFigures {
            revision: revision.name().into(),
            clients: r.clients,
            requests: r.requests,
            writes_sent: r.writes_sent,
            reads: r.reads,
            successes: r.successes,
            errors: r.errors,
            busy: r.busy,
            sessions_opened: r.sessions_opened,
            p50_ms: percentile_ms(&latencies, 0.50),
            p99_ms: percentile_ms(&latencies, 0.99),
            max_ms: percentile_ms(&latencies, 1.0),
        });
    }
    let requests: usize = revisions.iter().map(|r| r.requests).sum();
    let mut errors: usize = revisions.iter().map(|r| r.errors).sum();
    let mut error_samples = tally.error_samples;
    if drain.is_err() {
        errors += 1;
        error_samples.push("a client was still waiting past the drain time".into());
    }
    let warm_up_ms = case.duration_ms / 10;
    let (rss_warm, rss_end, rss_peak) = rss_figures(&samples, warm_up_ms).unwrap_or((0, 0, 0));
    let writes = shared.sends.load(Ordering::Relaxed).div_ceil(case.retries);
    let mut figures = SoakFigures {
        id: case.id.clone(),
        clients: case.clients,
        duration_ms: ran.as_millis() as u64,
        retries: case.retries,
        server_pid,
        server_address: address.to_string(),
        revisions,
        requests,
        requests_per_s: (requests as f64 / ran.as_secs_f64().max(0.001) * 10.0).round() / 10.0,
        errors,
        max_errors: case.max_errors,
        error_samples,
        writes,
        writes_acknowledged: tally.acknowledged.len(),
        rss_samples: samples.len(),
        rss_first_kib: samples.first().map_or(0, |s| s.1),
        rss_warm_kib: rss_warm,
        rss_end_kib: rss_end,
        rss_peak_kib: rss_peak,
        rss_growth_kib: rss_end as i64 - rss_warm as i64,
        rss_growth_bound_kib: case.rss_growth_mib * 1024,
        rss_after_drain_kib: rss_after_drain,
        server_exited,
        ..SoakFigures::default()
    };

    // Every write's rows, counted in the store the server left.
    let store = Store::open_or_init(StoreKind::Notes, &store_path)
        .map_err(|e| format!("the soak's store cannot be opened: {e}"))?;
    let rows: BTreeMap<String, usize> = count_rows(&store, &format!("soak {} ", shared.nonce))?;
    figures.notes_created = rows.values().sum();
    for n in 0..writes {
        match rows.get(&title(&shared.nonce, n)).copied().unwrap_or(0) {
            1 => figures.writes_with_one_effect += 1,
            0 if tally.acknowledged.contains(&n) => figures.writes_answered_but_missing += 1,
            0 => {}
            _ => figures.writes_with_duplicate_effects += 1,
        }
    }
    let (replays, first) = replays(&trace_path);
    figures.replays_in_trace = replays;
    Ok((figures, first))
}

/// The memory samples as `ms<TAB>KiB` lines (best effort: the figures carry the verdict).
fn write_samples(path: &Path, samples: &[(u64, u64)]) {
    if let Ok(mut file) = std::fs::File::create(path) {
        let _ = writeln!(file, "elapsed_ms\tvm_rss_kib");
        for (at, kib) in samples {
            let _ = writeln!(file, "{at}\t{kib}");
        }
    }
}

/// Whether a trace event is a `notes_create` answered with the first effect's receipt.
fn is_replay(event: &Value) -> bool {
    event["event"] == "tool_call"
        && event["duplicate"] == true
        && event["gen_ai.tool.name"] == "notes_create"
}

/// The replayed writes in the server's trace, and the first one's line (1-based); read line
/// by line, since a long soak's trace is large.
fn replays(trace: &Path) -> (usize, Option<usize>) {
    let Ok(file) = std::fs::File::open(trace) else {
        return (0, None);
    };
    let (mut count, mut first) = (0, None);
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let Ok(line) = line else { break };
        // Only lines that can be a replay are parsed.
        if !line.contains("\"duplicate\":true") {
            continue;
        }
        if serde_json::from_str::<Value>(&line).is_ok_and(|e| is_replay(&e)) {
            count += 1;
            first.get_or_insert(i + 1);
        }
    }
    (count, first)
}

/// The event on line `line` (1-based) of `path`, read line by line.
pub fn event_at(path: &Path, line: usize) -> Option<Value> {
    let file = std::fs::File::open(path).ok()?;
    let text = std::io::BufReader::new(file)
        .lines()
        .nth(line.checked_sub(1)?)?
        .ok()?;
    serde_json::from_str(&text).ok()
}

/// Runs and judges one soak (bounded by its hard deadline) with `exe` as the server; the
/// server trace's first replayed write is cited.
pub async fn run_case(case: &SoakCase, out_dir: &Path, exe: Result<PathBuf, String>) -> CaseResult {
    let what = if case.description.is_empty() {
        format!("soak of {} clients", case.clients)
    } else {
        case.description.clone()
    };
    let not_checked = |why: String| {
        CaseResult::new(
            &case.id,
            &case.category,
            Expect::Block,
            Observed::Error {
                message: why.clone(),
            },
            None,
            format!("{what}: not checked: {why}"),
        )
    };
    let exe = match exe {
        Ok(exe) => exe,
        Err(why) => return not_checked(why),
    };
    let hard = Duration::from_millis(case.duration_ms) + GRACE;
    let (figures, first_replay) = match tokio::time::timeout(hard, soak(case, out_dir, &exe)).await
    {
        Err(_) => {
            return not_checked(format!(
                "past its hard deadline of {} s: the clients were aborted and the server killed",
                hard.as_secs()
            ));
        }
        Ok(Err(why)) => return not_checked(why),
        Ok(Ok(done)) => done,
    };
    let (_, trace_name, _, _) = files(&case.id);
    let at = first_replay.map(|line| TraceLocation {
        file: trace_name,
        line,
        rule: "idempotency: a retry replayed the first effect's receipt".into(),
        hops: vec![],
    });
    let problems = figures.problems();
    let summary = figures.summary();
    let (observed, detail) = if problems.is_empty() {
        (
            Observed::Blocked,
            format!("{what}: {summary}; no write ran twice, memory within its bound"),
        )
    } else {
        (
            Observed::Passed,
            format!("{what}: {summary}: {}", problems.join("; ")),
        )
    };
    CaseResult::new(
        &case.id,
        &case.category,
        Expect::Block,
        observed,
        at,
        detail,
    )
    .with_facts(serde_json::to_value(&figures).unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fine() -> SoakFigures {
        SoakFigures {
            revisions: vec![
                RevisionFigures {
                    revision: LEGACY.into(),
                    successes: 10,
                    ..RevisionFigures::default()
                },
                RevisionFigures {
                    revision: MODERN.into(),
                    successes: 10,
                    ..RevisionFigures::default()
                },
            ],
            writes_acknowledged: 10,
            writes_with_one_effect: 10,
            rss_warm_kib: 50_000,
            rss_end_kib: 51_000,
            rss_growth_kib: 1_000,
            rss_growth_bound_kib: 32 * 1024,
            max_errors: 2,
            errors: 2,
            ..SoakFigures::default()
        }
    }

    #[test]
    fn growth_or_errors_over_their_bound_and_any_double_effect_fail_the_soak() {
        assert!(fine().problems().is_empty(), "{:?}", fine().problems());
        let mut no_legacy = fine();
        no_legacy.revisions[0].successes = 0;
        let table: Vec<(&str, SoakFigures)> = vec![
            (
                "over the bound of 32768 KiB",
                SoakFigures {
                    rss_end_kib: 50_000 + 32 * 1024 + 1,
                    rss_growth_kib: 32 * 1024 + 1,
                    ..fine()
                },
            ),
            (
                "3 requests failed, over the bound of 2",
                SoakFigures {
                    errors: 3,
                    ..fine()
                },
            ),
            (
                "more than one effect",
                SoakFigures {
                    writes_with_duplicate_effects: 1,
                    ..fine()
                },
            ),
            (
                "left no row",
                SoakFigures {
                    writes_answered_but_missing: 1,
                    ..fine()
                },
            ),
            (
                "not sampled",
                SoakFigures {
                    rss_warm_kib: 0,
                    ..fine()
                },
            ),
            (
                "exited during the run",
                SoakFigures {
                    server_exited: Some("signal: 9 (SIGKILL)".into()),
                    ..fine()
                },
            ),
            (
                "no write succeeded",
                SoakFigures {
                    writes_acknowledged: 0,
                    ..fine()
                },
            ),
            ("no 2025-11-25 request succeeded", no_legacy),
        ];
        for (want, figures) in table {
            let problems = figures.problems();
            assert_eq!(problems.len(), 1, "{want}: {problems:?}");
            assert!(problems[0].contains(want), "{want}: {problems:?}");
        }
        // Shrinking memory and growth exactly at the bound pass.
        for growth in [-10_000, 32 * 1024] {
            let figures = SoakFigures {
                rss_growth_kib: growth,
                ..fine()
            };
            assert!(figures.problems().is_empty(), "{growth}");
        }
    }

    #[test]
    fn memory_is_judged_from_the_first_sample_past_the_warm_up_to_the_last() {
        let samples = [(500, 10), (1000, 40), (1500, 90), (2000, 60)];
        assert_eq!(rss_figures(&samples, 1000), Some((40, 60, 90)));
        assert_eq!(rss_figures(&samples, 2500), None);
        assert_eq!(rss_figures(&[], 0), None);
    }

    #[test]
    fn percentiles_are_nearest_rank_in_milliseconds() {
        let sorted: Vec<u32> = (1..=100).map(|ms| ms * 1000).collect();
        assert_eq!(percentile_ms(&sorted, 0.50), 50.0);
        assert_eq!(percentile_ms(&sorted, 0.99), 99.0);
        assert_eq!(percentile_ms(&sorted, 1.0), 100.0);
        assert_eq!(percentile_ms(&[1500], 0.5), 1.5);
        assert_eq!(percentile_ms(&[], 0.5), 0.0);
    }

    #[test]
    fn only_a_loopback_address_the_server_announced_is_used() {
        let line = "toolgate: serving notes (/tmp/x.sqlite) at http://127.0.0.1:41234/mcp, \
                    loopback only: no authorization is configured";
        assert_eq!(
            served_address(&format!("toolgate: importing\n{line}\n")),
            Some("127.0.0.1:41234".parse().unwrap())
        );
        assert_eq!(
            served_address("toolgate: serving notes at http://10.0.0.5:80/mcp, x"),
            None
        );
        assert_eq!(served_address("toolgate: starting"), None);
    }

    #[test]
    fn the_resident_size_is_read_from_proc_status() {
        let status = "Name:\ttoolgate\nVmPeak:\t  900 kB\nVmRSS:\t   51234 kB\nThreads:\t4\n";
        assert_eq!(vm_rss_kib(status), Some(51_234));
        assert_eq!(vm_rss_kib("Name:\tx\n"), None);
    }

    #[test]
    fn a_test_harness_is_not_started_as_the_server() {
        // This process is the unit-test harness, not toolgate.
        let why = this_toolgate().unwrap_err();
        assert!(why.contains("is not toolgate"), "{why}");
    }

    #[test]
    fn retries_of_a_write_are_the_same_call_on_either_revision() {
        let legacy = call_params(Revision::Sessions, "x", Some(4));
        let modern = call_params(Revision::Stateless, "x", Some(4));
        assert_eq!(legacy["arguments"], modern["arguments"]);
        for params in [&legacy, &modern] {
            assert_eq!(
                params["_meta"][toolgate_mcp::IDEMPOTENCY_KEY_META],
                "soak-x-4"
            );
        }
        let odd = call_params(Revision::Stateless, "x", Some(5));
        assert!(
            odd["_meta"]
                .get(toolgate_mcp::IDEMPOTENCY_KEY_META)
                .is_none()
        );
        assert_eq!(
            call_params(Revision::Sessions, "x", None)["name"],
            "notes_search"
        );
    }

    #[test]
    fn file_names_keep_to_the_output_folder() {
        let (store, trace, log, rss) = files("../../etc/passwd soak");
        for name in [store, trace, log, rss] {
            assert!(!name.contains('/') && !name.contains(' '), "{name}");
        }
    }
}
