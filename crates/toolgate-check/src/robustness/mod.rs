//! The robustness suite: malformed, truncated and oversize JSON-RPC sent to the real MCP server
//! over stdio and over HTTP, each followed by a valid request that must succeed ("the server
//! keeps serving"), and a bounded load run of concurrent, retried writes. A soak run
//! ([`soak`], `[[soak]]`) is never compiled in: passed with `--cases`, it serves the real
//! `toolgate serve` binary as a child process for minutes and samples that process's memory.
//!
//! # What runs
//!
//! One notes toolset (a fresh store in the output folder) behind one [`McpServer`], served
//! - over **stdio**: [`toolgate_mcp::serve_io_until`], the transport of `toolgate serve` (its
//!   line guard and rmcp's framing) on an OS pipe in and an in-process stream out. Cases run on
//!   one shared session, initialized with the 2025-11-25 handshake, unless they say
//!   `fresh = true` (a new session, not initialized). A session a case ended is replaced before
//!   the next case, and the case that ended it fails;
//! - over **HTTP**: [`toolgate_mcp::serve_http`] on 127.0.0.1 with the production
//!   [`HttpLimits`](toolgate_mcp::HttpLimits) (1 MiB bodies, 64 at once), each case one POST
//!   with the headers a 2026-07-28 host sends (`Mcp-Method` and `Mcp-Name` taken from the
//!   payload when it names them).
//!
//! # Contract of a wire case
//!
//! Before the case a probe (`tools/list`) must succeed, else the case is
//! [`Observed::Error`] (nothing to judge against: a harness fault or a server already gone).
//! The payload is sent, the first answer read (bounded: 5 s, or 400 ms for a silence), then the
//! probe is sent again on the same session (stdio; on a fresh session as a 2026-07-28
//! request, which needs no handshake) or server (HTTP). A case expected to be refused is `Stopped` only when the answer
//! matches **and** the probe succeeds; a wrong answer, no answer, a hang or a server that
//! stopped serving is `Leaked`. A control (`expect.result`) must be served and the server keep
//! serving, else it is `WronglyBlocked`.
//!
//! Where it is logged: a refusal made by the transport (the line guard, rmcp's decoder, the
//! HTTP front) reaches no dispatcher and writes no trace line, so the suite's transcript
//! (`robustness-transcript.jsonl`, every message sent and answer received, one JSON line each)
//! is the record, and the report cites the line of the answer. A `tool_error` case reached the
//! dispatcher: it cites the dispatcher's own `tool_call` line in `robustness-trace.jsonl`
//! (`error.type` is the code). The load run cites the first `tool_call` line whose
//! `duplicate` is true: a retry answered with the first effect's receipt. Every cited line is
//! re-read at the end; one that does not say what it is cited for is dropped, which fails its
//! case as `Unlogged`.
//!
//! # Case file format (`security/robustness/*.toml`, `--cases FILE`)
//!
//! ```toml
//! [[case]]
//! id = "stdio-truncated-json"      # unique across all files
//! category = "truncated-json"
//! transport = "stdio"              # or "http"
//! description = "..."              # optional
//! # the payload: exactly one of
//! send = '{"jsonrpc": "2.0", "id": 1, "method": "tools/li'
//! # send_hex = "7b 00 ff"         # raw bytes (invalid UTF-8, NUL)
//! # parts = [['{"a":', 1], ["[", 100000], ["]", 100000], ["}", 1]]   # [text, times] pairs
//! fresh = false                    # stdio only: a new, uninitialized session
//! headers = { "content-type" = "text/plain" }   # http only: replace defaults; "" removes
//! timeout_ms = 5000                # optional, 1 to 60000
//! # the answer: exactly one of error / tool_error / silence / result, and http_status (http)
//! expect = { error = -32700 }                      # a JSON-RPC error with this code
//! # expect = { error = -32600, http_status = 413 }
//! # expect = { tool_error = "invalid_argument" }   # tools/call isError with this code
//! # expect = { silence = true }                    # no answer (a notification)
//! # expect = { result = true }                     # a control: served
//!
//! [[load]]
//! id = "load-http-24-clients"
//! clients = 24            # 1 to 64
//! duration_ms = 3000      # 200 to 600000, warm-up (the first fifth) included
//! retries = 3             # each write sent this many times, 2 to 10
//! rss_growth_mib = 64     # bound on resident memory growth after the warm-up
//! ```
//! stdio payloads get a newline when they lack one (a payload with newlines is several
//! lines). Refused, naming the file and case: an unknown field, a missing or doubled payload or
//! expectation, `http_status`/`headers` on stdio, `fresh` on HTTP, a payload over 64 MiB, and
//! an unbounded load run.
//!
//! # Figures
//!
//! `figures.wire`: cases per transport, stdio sessions started and the cases that ended one,
//! probes sent. `figures.load`: per load run, requests and their rate, writes and sends,
//! successes, replays, failures, the writes with exactly one effect (rows counted in the
//! store), and resident memory (`/proc/self/status` VmRSS of this process, which holds the
//! server and the clients) at the end of the warm-up, at the end and at its peak, with the
//! case's bound.
//!
//! # Connection cases (`[[connection]]`)
//!
//! A client that holds the HTTP front's resources rather than sending a bad message
//! ([`connection`]): each case gets a server of its own on 127.0.0.1 (the same [`McpServer`],
//! the production [`HttpLimits`](toolgate_mcp::HttpLimits) with the limit under test
//! shortened), probed before; the attack runs on raw sockets and must be bounded within
//! `within_ms` (cut, or answered 408/503), and a `tools/list` on that server must succeed
//! after it. The transcript's `connection_outcome` line is cited.
//!
//! ```toml
//! [[connection]]
//! id = "conn-slowloris-headers"
//! category = "slow-headers"
//! attack = "slow-headers"   # slow-body, idle, half-open, past-the-cap, http2-preface,
//!                           # held-stream, abandoned-stream
//! header_ms = 1000          # optional: header_ms, body_ms, stream_ms, max_connections
//! within_ms = 4000          # the deadline, 1 to 60000; above the limit the attack meets
//! ```
//! Refused, naming the file and case: a deadline not above the limit the attack meets (the
//! case could show nothing), a limit of zero, `past-the-cap` over 64 connections.
//!
//! # Soak runs (`[[soak]]`, only from `--cases`, e.g. `security/robustness/soak.toml`)
//!
//! ```toml
//! [[soak]]
//! id = "soak-http-32-clients-10min"
//! clients = 32            # 2 to 64: even ones on 2025-11-25 sessions, odd ones 2026-07-28
//! duration_ms = 600000    # 1000 to 3600000, warm-up (the first tenth) included
//! retries = 2             # each write sent this many times by consecutive clients, 1 to 10
//! rss_growth_mib = 32     # bound on the server's resident memory growth after the warm-up
//! max_errors = 0          # optional: the most requests that may fail
//! ```
//! The running executable must be `toolgate` (a test harness is refused, not started): it is
//! started as `toolgate serve --http 127.0.0.1:0 --toolset notes` with a fresh store, trace and
//! log in the output folder (`soak-<id>-*`), and killed at the end or at the hard deadline
//! (duration plus [`soak::GRACE`]). Its `/proc/PID/status` VmRSS is sampled every second
//! (`soak-<id>-rss.tsv`); the case fails when it grew more than the bound from the end of the
//! warm-up to the end, when more requests failed than allowed, when a write had two effects or
//! an acknowledged one none (rows counted in the store once the server is stopped), when a
//! revision had no success, or when the server exited or could not be sampled. It cites the
//! server trace's first replayed write. `figures.soak` holds, per soak, requests, errors and
//! p50/p99 latency per revision and the memory figures.
//!
//! # Not covered
//!
//! The stdio cases drive the transport function of `toolgate serve` in this process, not a
//! child process's own stdin (the CLI's tests do that); the HTTP cases go to a server without
//! OAuth (the auth suite covers tokens, and `toolgate-mcp`'s `oauth.rs` a session presented
//! with another principal's token). A client that never reads its answers is a test, not a
//! case (`toolgate-mcp/tests/hostile_connections.rs`: it needs answers larger than the notes
//! tools give, to fill the kernel's socket buffers). HTTP/2 is refused, not served (hyper is
//! built with `http1` only), so no HTTP/2 framing attack reaches anything. The load run's
//! memory figure is this process's, server and clients together; the soak's is the server
//! process's own.

pub mod connection;
pub mod format;
pub mod load;
pub mod soak;
pub mod wire;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::oneshot;
use toolgate_core::Principal;
use toolgate_core::trace::JsonlTrace;
use toolgate_mcp::{HttpLimits, McpServer, ServeError};
use toolgate_wiring::{ExitsConfig, Seat, Store, StoreKind, ToolsetName};

use crate::cases::{self, CaseSource};
use crate::{CaseResult, CheckError, Expect, Observed, SuiteOptions, SuiteReport, TraceIndex};
use crate::{TraceLocation, Verdict};

pub use format::{
    Answer, Attack, CaseFile, ConnectionCase, Expected, LoadCase, SoakCase, Transport, WireCase,
};
pub use load::LoadFigures;
use wire::{Http, StdioSession, Transcript, WireFault};

const SUITE: &str = "robustness";

/// The repository's own case files, compiled in. `soak.toml` is not one of them: a soak runs
/// for minutes and only when its file is passed with `--cases`.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "security/robustness/stdio.toml",
        include_str!("../../../../security/robustness/stdio.toml"),
    ),
    (
        "security/robustness/http.toml",
        include_str!("../../../../security/robustness/http.toml"),
    ),
    (
        "security/robustness/connections.toml",
        include_str!("../../../../security/robustness/connections.toml"),
    ),
    (
        "security/robustness/load.toml",
        include_str!("../../../../security/robustness/load.toml"),
    ),
];

/// The transcript's file name in the output folder.
pub const TRANSCRIPT_FILE: &str = "robustness-transcript.jsonl";
/// The dispatcher's trace file name in the output folder.
pub const TRACE_FILE: &str = "robustness-trace.jsonl";
/// The notes store the server serves, in the output folder (replaced on each run).
pub const STORE_FILE: &str = "robustness-notes.sqlite";

/// How long an answer is waited for unless the case says otherwise.
const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// How long a silence is waited for unless the case says otherwise.
const SILENCE_WAIT: Duration = Duration::from_millis(400);
/// How long a probe may take.
const PROBE_WAIT: Duration = Duration::from_secs(5);

/// Runs the suite: the built-in case files and `options.extra_cases`.
pub async fn run(options: &SuiteOptions) -> Result<SuiteReport, CheckError> {
    let started = Instant::now();
    let files = load(&options.extra_cases)?;
    let mut harness = Harness::start(&options.out_dir).await?;
    let mut results = Vec::new();
    let mut load_figures = Vec::new();
    for source in &files {
        for case in &source.file.case {
            options.say(&format!("robustness: {} ({})", case.id, case.category));
            results.push(harness.run_wire(case).await);
        }
    }
    for source in &files {
        for case in &source.file.connection {
            options.say(&format!(
                "robustness: {} ({}, {} ms at most)",
                case.id,
                case.attack.as_str(),
                case.within_ms
            ));
            results.push(harness.run_connection(case).await);
        }
    }
    for source in &files {
        for case in &source.file.load {
            options.say(&format!(
                "robustness: {} ({} clients for {} ms)",
                case.id, case.clients, case.duration_ms
            ));
            let (result, figures) = harness.run_load(case).await;
            results.push(result);
            load_figures.push(figures);
        }
    }
    let mut soak_figures = Vec::new();
    let mut traces = vec![TRANSCRIPT_FILE.to_string(), TRACE_FILE.to_string()];
    for source in &files {
        for case in &source.file.soak {
            options.say(&format!(
                "robustness: {} (soak: {} clients for {} ms against a toolgate serve child)",
                case.id, case.clients, case.duration_ms
            ));
            let result = soak::run_case(case, &options.out_dir, soak::this_toolgate()).await;
            soak_figures.push(result.facts.clone());
            traces.push(soak::files(&case.id).1);
            results.push(result);
        }
    }
    let wire_figures = harness.figures();
    let results = harness.finish(results).await;
    let figures = json!({"wire": wire_figures, "load": load_figures, "soak": soak_figures});
    Ok(SuiteReport::new(
        SUITE,
        files.iter().map(|f| f.origin.clone()).collect(),
        traces,
        results,
        started.elapsed().as_millis() as u64,
    )
    .with_figures(figures))
}

/// The built-in case files and `extra`, checked: unique ids, every case runnable.
pub fn load(extra: &[PathBuf]) -> Result<Vec<CaseSource<CaseFile>>, CheckError> {
    let files = cases::load_cases::<CaseFile>(BUILTIN, extra)?;
    cases::unique_ids(files.iter().flat_map(|f| {
        let wire = f.file.case.iter().map(|c| c.id.as_str());
        let load = f.file.load.iter().map(|c| c.id.as_str());
        let connection = f.file.connection.iter().map(|c| c.id.as_str());
        let soak = f.file.soak.iter().map(|c| c.id.as_str());
        wire.chain(load)
            .chain(connection)
            .chain(soak)
            .map(|id| (f.origin.as_str(), id))
    }))?;
    for f in &files {
        let refuse = |id: &str, why: String| CheckError::Cases {
            path: PathBuf::from(&f.origin),
            message: format!("case `{id}`: {why}"),
        };
        for case in &f.file.case {
            format::check_wire(case).map_err(|why| refuse(&case.id, why))?;
        }
        for case in &f.file.load {
            format::check_load(case).map_err(|why| refuse(&case.id, why))?;
        }
        for case in &f.file.connection {
            format::check_connection(case).map_err(|why| refuse(&case.id, why))?;
        }
        for case in &f.file.soak {
            format::check_soak(case).map_err(|why| refuse(&case.id, why))?;
        }
    }
    Ok(files)
}

/// What running one wire case came to, before it is judged.
enum Run {
    /// The case could not be checked (the probe before it failed, a harness fault).
    NotChecked(String),
    Done {
        answer: Answer,
        /// The transcript line of the answer (or of the silence, or of the failure).
        answer_line: usize,
        /// The probe after the case: `Err` when the server stopped serving.
        kept_serving: Result<(), String>,
    },
}

/// The real server, its two transports, and what the suite has recorded so far.
pub struct Harness {
    server: McpServer,
    store: Store,
    out_dir: PathBuf,
    transcript: Transcript,
    trace_path: PathBuf,
    http: Http,
    http_stop: Option<oneshot::Sender<()>>,
    http_served: Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
    shared: Option<StdioSession>,
    sessions_started: usize,
    /// The cases after which a stdio session had ended, with how it ended.
    sessions_ended: Vec<Value>,
    probes: usize,
    cases: [usize; 2],
    connection_cases: usize,
    nonce: String,
}

impl Harness {
    /// A fresh notes store, trace and transcript in `out_dir`, and the server on stdio (on
    /// demand) and on a new port of 127.0.0.1.
    pub async fn start(out_dir: &Path) -> Result<Self, CheckError> {
        std::fs::create_dir_all(out_dir).map_err(|e| CheckError::io(out_dir, e))?;
        let store_path = out_dir.join(STORE_FILE);
        for suffix in ["", "-wal", "-shm"] {
            let path = PathBuf::from(format!("{}{suffix}", store_path.display()));
            if path.exists() {
                std::fs::remove_file(&path).map_err(|e| CheckError::io(&path, e))?;
            }
        }
        let trace_path = out_dir.join(TRACE_FILE);
        if trace_path.exists() {
            std::fs::remove_file(&trace_path).map_err(|e| CheckError::io(&trace_path, e))?;
        }
        let trace = JsonlTrace::create(&trace_path).map_err(|e| CheckError::io(&trace_path, e))?;
        let transcript_path = out_dir.join(TRANSCRIPT_FILE);
        let transcript = Transcript::create(&transcript_path, TRANSCRIPT_FILE)
            .map_err(|e| CheckError::io(&transcript_path, e))?;
        let store = Store::open_or_init(StoreKind::Notes, &store_path)
            .map_err(|e| CheckError::setup(SUITE, format!("the notes store: {e}")))?;
        let seat = Seat::new(Principal::local("robustness", &[])).with_trace(Arc::new(trace));
        let ready =
            toolgate_wiring::dispatcher(ToolsetName::Notes, &store, &ExitsConfig::default(), seat)
                .map_err(|e| CheckError::setup(SUITE, format!("the notes dispatcher: {e}")))?;
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let nonce = format!("{}-{millis}", std::process::id());
        let server = McpServer::new(ready, &format!("robustness-{nonce}"));

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| CheckError::setup(SUITE, format!("cannot listen on 127.0.0.1: {e}")))?;
        let address = listener
            .local_addr()
            .map_err(|e| CheckError::setup(SUITE, format!("the listener has no address: {e}")))?;
        let (http_stop, stopped) = oneshot::channel::<()>();
        let http_served = tokio::spawn(toolgate_mcp::serve_http(
            server.clone(),
            listener,
            HttpLimits::default(),
            async {
                let _ = stopped.await;
            },
        ));
        let http =
            Http::new(format!("http://{address}/mcp")).map_err(|e| CheckError::setup(SUITE, e))?;
        Ok(Harness {
            server,
            store,
            out_dir: out_dir.to_path_buf(),
            transcript,
            trace_path,
            http,
            http_stop: Some(http_stop),
            http_served: Some(http_served),
            shared: None,
            sessions_started: 0,
            sessions_ended: Vec::new(),
            probes: 0,
            cases: [0, 0],
            connection_cases: 0,
            nonce,
        })
    }

    /// The HTTP endpoint's URL.
    pub fn http_url(&self) -> &str {
        &self.http.url
    }

    /// Shuts the HTTP server down and waits (bounded) until it has stopped; the cases sent to
    /// it afterwards find nothing there.
    pub async fn stop_http(&mut self) {
        if let Some(stop) = self.http_stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.http_served.take() {
            let _ = tokio::time::timeout(Duration::from_secs(20), served).await;
        }
    }

    /// Runs and judges one wire case.
    pub async fn run_wire(&mut self, case: &WireCase) -> CaseResult {
        let mark = self.trace_mark();
        let run = match format::payload(case) {
            Err(why) => Run::NotChecked(format!("the case is malformed: {why}")),
            Ok(payload) => match case.transport {
                Transport::Stdio => {
                    self.cases[0] += 1;
                    self.stdio_case(case, &payload).await
                }
                Transport::Http => {
                    self.cases[1] += 1;
                    self.http_case(case, payload).await
                }
            },
        };
        self.judge(case, run, mark)
    }

    fn waits(case: &WireCase) -> Duration {
        let default = if case.expect.silence {
            SILENCE_WAIT
        } else {
            ANSWER_WAIT
        };
        case.timeout_ms.map_or(default, Duration::from_millis)
    }

    fn record_sent(&self, case: &WireCase, payload: &[u8]) {
        self.transcript.record(
            "wire_sent",
            json!({
                "case": case.id, "transport": case.transport.as_str(),
                "bytes": payload.len(), "preview": wire::preview(payload),
            }),
        );
    }

    /// A working shared stdio session (replacing one that ended), or why there is none.
    async fn shared_session(&mut self) -> Result<&mut StdioSession, String> {
        if self.shared.as_ref().is_none_or(StdioSession::ended) {
            if let Some(old) = self.shared.take() {
                old.close(Duration::from_secs(2)).await;
            }
            let mut session = StdioSession::start(self.server.clone())
                .map_err(|e| format!("cannot start a stdio session: {e}"))?;
            self.sessions_started += 1;
            session.initialize(PROBE_WAIT).await?;
            self.shared = Some(session);
        }
        self.shared
            .as_mut()
            .ok_or_else(|| "no stdio session".to_string())
    }

    async fn stdio_case(&mut self, case: &WireCase, payload: &[u8]) -> Run {
        let wait = Self::waits(case);
        let probe_id = format!("probe-before-{}", case.id);
        let mut fresh = None;
        if case.fresh {
            match StdioSession::start(self.server.clone()) {
                Ok(session) => {
                    self.sessions_started += 1;
                    fresh = Some(session);
                }
                Err(e) => return Run::NotChecked(format!("cannot start a stdio session: {e}")),
            }
        } else {
            let before = match self.shared_session().await {
                Ok(session) => {
                    let listed = session.list_tools(&probe_id, PROBE_WAIT).await;
                    // Lines before this probe's answer belong to no case of this one.
                    session.take_late();
                    listed
                }
                Err(why) => Err(why),
            };
            self.probes += 1;
            if let Err(why) = before {
                self.transcript.record(
                    "probe",
                    json!({"case": case.id, "when": "before", "ok": false, "detail": why}),
                );
                return Run::NotChecked(format!(
                    "the stdio session did not answer tools/list before the case: {why}"
                ));
            }
        }
        self.record_sent(case, payload);
        let transcript = &self.transcript;
        let session = match fresh.as_mut() {
            Some(session) => session,
            None => match self.shared.as_mut() {
                Some(session) => session,
                None => return Run::NotChecked("no stdio session".into()),
            },
        };
        let sent = session.send(payload, ANSWER_WAIT.max(wait)).await;
        let (answer, answer_line) = match sent {
            Err(fault) => {
                let line = transcript.record(
                    "wire_failed",
                    json!({"case": case.id, "transport": "stdio", "detail": fault.to_string()}),
                );
                (Answer::default(), line)
            }
            Ok(()) => match session.next_line(wait).await {
                Ok(line) => {
                    let message = serde_json::from_slice::<Value>(&line)
                        .ok()
                        .filter(|v| v.get("jsonrpc").is_some());
                    let at = transcript.record(
                        "wire_received",
                        json!({
                            "case": case.id, "transport": "stdio",
                            "message": message.clone().unwrap_or(Value::Null),
                            "raw": if message.is_none() { Value::String(wire::preview(&line)) } else { Value::Null },
                        }),
                    );
                    (
                        Answer {
                            http_status: None,
                            message,
                            silent: false,
                        },
                        at,
                    )
                }
                Err(WireFault::TimedOut(waited)) => {
                    let at = transcript.record(
                        "wire_silence",
                        json!({"case": case.id, "transport": "stdio", "waited_ms": waited.as_millis() as u64}),
                    );
                    (
                        Answer {
                            silent: true,
                            ..Answer::default()
                        },
                        at,
                    )
                }
                Err(fault @ WireFault::Closed(_)) => {
                    let at = transcript.record(
                        "wire_failed",
                        json!({"case": case.id, "transport": "stdio", "detail": fault.to_string()}),
                    );
                    (Answer::default(), at)
                }
            },
        };
        // The server keeps serving: on the same stream, a new request must be answered.
        let probe_id = format!("probe-after-{}", case.id);
        let after = if case.fresh {
            // A new session is probed as a 2026-07-28 host would use it: that works whether
            // the case left it not begun or began it as 2026-07-28.
            session.list_tools_modern(&probe_id, PROBE_WAIT).await
        } else {
            session.list_tools(&probe_id, PROBE_WAIT).await
        };
        self.probes += 1;
        let kept_serving = after.map(|_| ());
        // Whatever came before the probe's answer came late from the case: recorded, and an
        // answer to a case that expected none.
        let mut answer = answer;
        let mut answer_line = answer_line;
        for line in session.take_late() {
            let message = serde_json::from_slice::<Value>(&line)
                .ok()
                .filter(|v| v.get("jsonrpc").is_some());
            let at = transcript.record(
                "wire_received_late",
                json!({
                    "case": case.id, "transport": "stdio",
                    "message": message.clone().unwrap_or(Value::Null),
                    "raw": if message.is_none() { Value::String(wire::preview(&line)) } else { Value::Null },
                }),
            );
            if answer.silent && message.is_some() {
                answer = Answer {
                    http_status: None,
                    message,
                    silent: false,
                };
                answer_line = at;
            }
        }
        self.transcript.record(
            "probe",
            json!({
                "case": case.id, "when": "after", "ok": kept_serving.is_ok(),
                "detail": kept_serving.as_ref().err(),
            }),
        );
        if kept_serving.is_err() {
            let outcome = session
                .outcome(Duration::from_secs(2))
                .await
                .unwrap_or_else(|| "still running but not answering".into());
            self.transcript.record(
                "session_ended",
                json!({"case": case.id, "transport": "stdio", "outcome": outcome}),
            );
            self.sessions_ended
                .push(json!({"case": case.id, "outcome": outcome}));
        }
        if let Some(session) = fresh {
            session.close(Duration::from_secs(2)).await;
        }
        Run::Done {
            answer,
            answer_line,
            kept_serving,
        }
    }

    async fn http_case(&mut self, case: &WireCase, payload: Vec<u8>) -> Run {
        let wait = Self::waits(case);
        let probe_id = format!("probe-before-{}", case.id);
        self.probes += 1;
        if let Err(why) = self.http.list_tools(&probe_id, PROBE_WAIT).await {
            self.transcript.record(
                "probe",
                json!({"case": case.id, "when": "before", "ok": false, "detail": why}),
            );
            return Run::NotChecked(format!(
                "the HTTP server did not answer tools/list before the case: {why}"
            ));
        }
        self.record_sent(case, &payload);
        // The headers a host sends for this message: its method and tool, when it names them.
        let parsed = serde_json::from_slice::<Value>(&payload).ok();
        let method = parsed
            .as_ref()
            .and_then(|v| v.get("method"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let name = parsed
            .as_ref()
            .and_then(|v| v.pointer("/params/name"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let posted = self
            .http
            .post(
                payload,
                method.as_deref(),
                name.as_deref(),
                &case.headers,
                wait.max(Duration::from_millis(100)),
            )
            .await;
        let (answer, answer_line) = match posted {
            Ok(response) => {
                let at = self.transcript.record(
                    "wire_received",
                    json!({
                        "case": case.id, "transport": "http", "http_status": response.status,
                        "message": response.message.clone().unwrap_or(Value::Null),
                        "raw": if response.message.is_none() { Value::String(wire::preview(&response.body)) } else { Value::Null },
                    }),
                );
                (
                    Answer {
                        http_status: Some(response.status),
                        silent: response.body.iter().all(u8::is_ascii_whitespace),
                        message: response.message,
                    },
                    at,
                )
            }
            Err(fault) => {
                let at = self.transcript.record(
                    "wire_failed",
                    json!({"case": case.id, "transport": "http", "detail": fault.to_string()}),
                );
                (Answer::default(), at)
            }
        };
        let probe_id = format!("probe-after-{}", case.id);
        self.probes += 1;
        let kept_serving = self
            .http
            .list_tools(&probe_id, PROBE_WAIT)
            .await
            .map(|_| ());
        self.transcript.record(
            "probe",
            json!({
                "case": case.id, "when": "after", "ok": kept_serving.is_ok(),
                "detail": kept_serving.as_ref().err(),
            }),
        );
        Run::Done {
            answer,
            answer_line,
            kept_serving,
        }
    }

    /// The dispatcher's trace lines so far (0 when it cannot be read).
    fn trace_mark(&self) -> usize {
        TraceIndex::read(&self.trace_path)
            .ok()
            .and_then(|index| index.lines.last().map(|l| l.line))
            .unwrap_or(0)
    }

    /// The first dispatcher trace line after `mark` that `matches`.
    fn trace_line_after(&self, mark: usize, matches: impl Fn(&Value) -> bool) -> Option<usize> {
        let index = TraceIndex::read(&self.trace_path).ok()?;
        index
            .lines
            .iter()
            .find(|l| l.line > mark && l.event["event"] == "tool_call" && matches(&l.event))
            .map(|l| l.line)
    }

    /// The verdict of `case` from what running it came to; `mark` is the dispatcher trace's
    /// last line before the case.
    fn judge(&self, case: &WireCase, run: Run, mark: usize) -> CaseResult {
        let expect = if case.expect.result {
            Expect::Allow
        } else {
            Expect::Block
        };
        let what = if case.description.is_empty() {
            format!("{} over {}", case.category, case.transport.as_str())
        } else {
            case.description.clone()
        };
        let (answer, answer_line, kept_serving) = match run {
            Run::NotChecked(why) => {
                return CaseResult::new(
                    &case.id,
                    &case.category,
                    expect,
                    Observed::Error {
                        message: why.clone(),
                    },
                    None,
                    format!("{what}: not checked: {why}"),
                );
            }
            Run::Done {
                answer,
                answer_line,
                kept_serving,
            } => (answer, answer_line, kept_serving),
        };
        let judged = format::judge_answer(&case.expect, &answer);
        let transcript_at = |rule: &str| TraceLocation {
            file: TRANSCRIPT_FILE.into(),
            line: answer_line,
            rule: rule.into(),
            hops: vec![],
        };
        let at = match (&judged, &case.expect.tool_error) {
            // The dispatcher refused the arguments: its own trace line shows it. Only lines
            // written since the case began count (probes are tools/list, which the dispatcher
            // does not see).
            (Ok(rule), Some(code)) => self
                .trace_line_after(mark, |e| e["error.type"] == code.as_str())
                .map(|line| TraceLocation {
                    file: TRACE_FILE.into(),
                    line,
                    rule: rule.clone(),
                    hops: vec![],
                }),
            (Ok(rule), None) => Some(transcript_at(rule)),
            (Err(_), _) => Some(transcript_at("unexpected answer")),
        };
        let (observed, detail) = match (&judged, &kept_serving, expect) {
            (Ok(rule), Ok(()), Expect::Allow) => (
                Observed::Passed,
                format!("{what}: served ({rule}); the server keeps serving"),
            ),
            (Ok(rule), Ok(()), _) => (
                Observed::Blocked,
                format!("{what}: refused ({rule}); the server keeps serving"),
            ),
            (Err(why), _, Expect::Allow) => (Observed::Blocked, format!("{what}: {why}")),
            (Err(why), _, _) => (Observed::Passed, format!("{what}: {why}")),
            (Ok(rule), Err(why), Expect::Allow) => (
                Observed::Blocked,
                format!("{what}: served ({rule}), but then the server stopped serving: {why}"),
            ),
            (Ok(rule), Err(why), _) => (
                Observed::Passed,
                format!("{what}: refused ({rule}), but then the server stopped serving: {why}"),
            ),
        };
        CaseResult::new(&case.id, &case.category, expect, observed, at, detail)
    }

    /// Runs and judges one connection case on a server of its own (the same [`McpServer`],
    /// the case's limits), then probes that server; the transcript line of the outcome is
    /// cited.
    pub async fn run_connection(&mut self, case: &ConnectionCase) -> CaseResult {
        self.connection_cases += 1;
        let what = if case.description.is_empty() {
            format!("{} over http", case.attack.as_str())
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
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(e) => return not_checked(format!("cannot listen on 127.0.0.1: {e}")),
        };
        let address = match listener.local_addr() {
            Ok(address) => address,
            Err(e) => return not_checked(format!("the listener has no address: {e}")),
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(toolgate_mcp::serve_http(
            self.server.clone(),
            listener,
            format::connection_limits(case),
            async {
                let _ = stopped.await;
            },
        ));
        let http = match Http::new(format!("http://{address}/mcp")) {
            Ok(http) => http,
            Err(why) => return not_checked(why),
        };
        self.probes += 1;
        if let Err(why) = http
            .list_tools(&format!("probe-before-{}", case.id), PROBE_WAIT)
            .await
        {
            let _ = stop.send(());
            return not_checked(format!("its server did not answer tools/list: {why}"));
        }
        self.transcript.record(
            "connection_sent",
            json!({"case": case.id, "attack": case.attack.as_str(), "within_ms": case.within_ms}),
        );
        let outcome = connection::attack(case, address).await;
        let at = self.transcript.record(
            "connection_outcome",
            json!({
                "case": case.id, "attack": case.attack.as_str(), "bounded": outcome.is_ok(),
                "detail": match &outcome { Ok(rule) | Err(rule) => rule },
            }),
        );
        self.probes += 1;
        let kept_serving = http
            .list_tools(&format!("probe-after-{}", case.id), PROBE_WAIT)
            .await
            .map(|_| ());
        self.transcript.record(
            "probe",
            json!({
                "case": case.id, "when": "after", "ok": kept_serving.is_ok(),
                "detail": kept_serving.as_ref().err(),
            }),
        );
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(20), served).await;
        let (observed, detail, rule) = match (&outcome, &kept_serving) {
            (Ok(rule), Ok(())) => (
                Observed::Blocked,
                format!("{what}: {rule}; the server keeps serving"),
                rule.clone(),
            ),
            (Ok(rule), Err(why)) => (
                Observed::Passed,
                format!("{what}: {rule}, but then the server stopped serving: {why}"),
                "unexpected answer".to_string(),
            ),
            (Err(why), _) => (
                Observed::Passed,
                format!("{what}: not bounded: {why}"),
                "unexpected answer".to_string(),
            ),
        };
        let at = TraceLocation {
            file: TRANSCRIPT_FILE.into(),
            line: at,
            rule,
            hops: vec![],
        };
        CaseResult::new(
            &case.id,
            &case.category,
            Expect::Block,
            observed,
            Some(at),
            detail,
        )
    }

    /// Runs one load case over HTTP and judges it.
    pub async fn run_load(&mut self, case: &LoadCase) -> (CaseResult, LoadFigures) {
        let probe_id = format!("probe-before-{}", case.id);
        self.probes += 1;
        if let Err(why) = self.http.list_tools(&probe_id, PROBE_WAIT).await {
            let result = CaseResult::new(
                &case.id,
                &case.category,
                Expect::Block,
                Observed::Error {
                    message: why.clone(),
                },
                None,
                format!("load run not started: the HTTP server did not answer: {why}"),
            );
            return (result, LoadFigures::default());
        }
        let mark = self.trace_mark();
        let nonce = format!("{}-{}", self.nonce, case.id);
        let mut figures = load::run(case, &self.http, &self.store, &nonce).await;
        figures.replays_in_trace = TraceIndex::read(&self.trace_path)
            .map(|index| {
                index
                    .lines
                    .iter()
                    .filter(|l| {
                        l.line > mark
                            && l.event["duplicate"] == true
                            && l.event["gen_ai.tool.name"] == "notes_create"
                    })
                    .count()
            })
            .unwrap_or(0);
        self.probes += 1;
        let kept_serving = self
            .http
            .list_tools(&format!("probe-after-{}", case.id), PROBE_WAIT)
            .await;
        let mut problems = figures.problems();
        if let Err(why) = &kept_serving {
            problems.push(format!("the server stopped serving after the run: {why}"));
        }
        let at = self
            .trace_line_after(mark, |e| {
                e["duplicate"] == true && e["gen_ai.tool.name"] == "notes_create"
            })
            .map(|line| TraceLocation {
                file: TRACE_FILE.into(),
                line,
                rule: "idempotency: a retry replayed the first effect's receipt".into(),
                hops: vec![],
            });
        let summary = format!(
            "{} clients for {} ms: {} requests ({}/s); {} writes sent {} times, {} with exactly \
             one effect, {} retries replayed; {} reads; {} busy, {} failed; resident memory \
             {:+} KiB after warm-up (bound {} KiB)",
            figures.clients,
            figures.duration_ms,
            figures.requests,
            figures.requests_per_s,
            figures.writes,
            figures.write_sends,
            figures.writes_with_one_effect,
            figures.replays_in_trace,
            figures.reads,
            figures.busy,
            figures.failures,
            figures.rss_growth_kib,
            figures.rss_growth_bound_kib
        );
        let (observed, detail) = if problems.is_empty() {
            (Observed::Blocked, format!("{summary}; no retry ran twice"))
        } else {
            (
                Observed::Passed,
                format!("{summary}: {}", problems.join("; ")),
            )
        };
        let result = CaseResult::new(
            &case.id,
            &case.category,
            Expect::Block,
            observed,
            at,
            detail,
        )
        .with_facts(serde_json::to_value(&figures).unwrap_or(Value::Null));
        (result, figures)
    }

    /// The wire figures so far.
    pub fn figures(&self) -> Value {
        json!({
            "stdio_cases": self.cases[0],
            "http_cases": self.cases[1],
            "connection_cases": self.connection_cases,
            "stdio_sessions_started": self.sessions_started,
            "stdio_sessions_ended_by_a_case": self.sessions_ended,
            "probes": self.probes,
            "out_dir": self.out_dir.display().to_string(),
        })
    }

    /// Stops both transports (bounded) and re-reads every cited line: a citation the file does
    /// not bear out is dropped, so its block counts as unlogged.
    pub async fn finish(mut self, results: Vec<CaseResult>) -> Vec<CaseResult> {
        if let Some(session) = self.shared.take() {
            session.close(Duration::from_secs(5)).await;
        }
        self.stop_http().await;
        let transcript = TraceIndex::read(&self.out_dir.join(TRANSCRIPT_FILE)).ok();
        let trace = TraceIndex::read(&self.trace_path).ok();
        results
            .into_iter()
            .map(|c| {
                let Some(at) = &c.at else { return c };
                let line = |index: Option<&TraceIndex>| {
                    index
                        .and_then(|i| i.lines.iter().find(|l| l.line == at.line))
                        .map(|l| l.event.clone())
                };
                let borne_out = if at.file == TRANSCRIPT_FILE {
                    line(transcript.as_ref()).is_some_and(|e| e["case"] == c.id.as_str())
                } else if at.file == TRACE_FILE {
                    line(trace.as_ref()).is_some_and(|e| e["event"] == "tool_call")
                } else {
                    // A soak's server trace, read up to the one line (it can be large).
                    soak::event_at(&self.out_dir.join(&at.file), at.line)
                        .is_some_and(|e| e["event"] == "tool_call")
                };
                if borne_out || c.verdict == Verdict::Error {
                    c
                } else {
                    let facts = c.facts.clone();
                    CaseResult::new(
                        c.id,
                        c.category,
                        c.expect,
                        c.observed,
                        None,
                        format!("{} (its cited line {} was not found)", c.detail, at.cite()),
                    )
                    .with_facts(facts)
                }
            })
            .collect()
    }
}
