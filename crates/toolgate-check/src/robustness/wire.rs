//! The harness's two wires to the real server, and its transcript.
//!
//! - [`StdioSession`]: the stdio transport ([`toolgate_mcp::serve_io_until`]: the same line
//!   guard and rmcp framing as `toolgate serve` on stdin/stdout) over an OS pipe in and an
//!   in-process stream out. Every line the server writes is read by a task of its own into a
//!   channel, so a wait that times out loses nothing.
//! - [`Http`]: POSTs to `/mcp` on 127.0.0.1 as a 2026-07-28 host sends them.
//! - [`Transcript`]: every message sent and every answer received, one JSON line each, through
//!   [`JsonlTrace`]. A malformed message answered by the transport never reaches the dispatcher
//!   and leaves no dispatcher trace line; the transcript line of its answer is where it is
//!   logged, and what the report cites.
//!
//! Every wait is bounded: a write, an answer, a session's end.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use toolgate_core::trace::{JsonlTrace, TraceEvent, TraceSink};
use toolgate_mcp::{McpServer, ServeError};

use super::format::bounded;

/// The protocol revision of the HTTP requests and the stdio handshake's fallback.
pub const MODERN: &str = "2026-07-28";
/// The revision the shared stdio session is initialized with.
pub const LEGACY: &str = "2025-11-25";

/// One transcript event.
#[derive(Debug)]
struct WireEvent {
    kind: &'static str,
    attributes: Value,
}

impl TraceEvent for WireEvent {
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn attributes(&self) -> Value {
        self.attributes.clone()
    }
}

/// The suite's record of the wire, numbered as it is written (one line per event).
pub struct Transcript {
    sink: JsonlTrace,
    lines: AtomicUsize,
    pub file: String,
}

impl Transcript {
    /// A new transcript at `path` (an existing file is replaced); `file` is how the report
    /// names it.
    pub fn create(path: &std::path::Path, file: &str) -> std::io::Result<Self> {
        if path.exists() {
            std::fs::remove_file(path)?;
        }
        Ok(Transcript {
            sink: JsonlTrace::create(path)?,
            lines: AtomicUsize::new(0),
            file: file.into(),
        })
    }

    /// Writes one event and returns its line number.
    pub fn record(&self, kind: &'static str, attributes: Value) -> usize {
        // JsonlTrace writes each event as one flushed line, in call order under its lock; the
        // counter is taken under the same order because cases record one at a time.
        let line = self.lines.fetch_add(1, Ordering::SeqCst) + 1;
        self.sink.record(Arc::new(WireEvent { kind, attributes }));
        line
    }
}

/// At most 240 characters of `bytes`, lossily decoded, for the transcript.
pub fn preview(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(240)];
    let text = String::from_utf8_lossy(head).into_owned();
    if bytes.len() > head.len() {
        format!("{text}... ({} bytes)", bytes.len())
    } else {
        text
    }
}

/// Why a wire could not be used.
#[derive(Debug, Clone, PartialEq)]
pub enum WireFault {
    /// The stream or connection is closed: the server ended the session or is not there.
    Closed(String),
    /// Nothing within the wait.
    TimedOut(Duration),
}

impl std::fmt::Display for WireFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireFault::Closed(why) => write!(f, "closed: {why}"),
            WireFault::TimedOut(d) => write!(f, "no answer within {} ms", d.as_millis()),
        }
    }
}

/// A stdio session of the real transport, driven over a pipe.
pub struct StdioSession {
    input: Arc<Mutex<Option<std::io::PipeWriter>>>,
    output: mpsc::Receiver<Vec<u8>>,
    /// The session's task, until its end has been collected into `ended_with`.
    served: Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
    ended_with: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    late: Vec<Vec<u8>>,
}

impl StdioSession {
    /// Starts a session of `server` (not yet initialized).
    pub fn start(server: McpServer) -> std::io::Result<Self> {
        let (reader, writer) = std::io::pipe()?;
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(toolgate_mcp::serve_io_until(
            server,
            reader,
            theirs,
            async move {
                let _ = stopped.await;
            },
        ));
        let (lines_tx, output) = mpsc::channel(256);
        tokio::spawn(async move {
            let mut from_server = BufReader::new(ours);
            loop {
                let mut line = Vec::new();
                match from_server.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if lines_tx.send(line).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(StdioSession {
            input: Arc::new(Mutex::new(Some(writer))),
            output,
            served: Some(served),
            ended_with: None,
            stop: Some(stop),
            late: Vec::new(),
        })
    }

    /// Writes `bytes` (a newline is added when missing) within `wait`.
    pub async fn send(&mut self, bytes: &[u8], wait: Duration) -> Result<(), WireFault> {
        let mut data = bytes.to_vec();
        if data.last() != Some(&b'\n') {
            data.push(b'\n');
        }
        let input = Arc::clone(&self.input);
        let write = tokio::task::spawn_blocking(move || {
            let mut guard = input
                .lock()
                .map_err(|_| WireFault::Closed("the input lock is poisoned".into()))?;
            let pipe = guard
                .as_mut()
                .ok_or_else(|| WireFault::Closed("the input is closed".into()))?;
            pipe.write_all(&data)
                .and_then(|()| pipe.flush())
                .map_err(|e| WireFault::Closed(format!("writing the input failed: {e}")))
        });
        match tokio::time::timeout(wait, write).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => Err(WireFault::Closed(format!("the writer failed: {e}"))),
            Err(_) => Err(WireFault::TimedOut(wait)),
        }
    }

    /// The next line the server writes, within `wait`.
    pub async fn next_line(&mut self, wait: Duration) -> Result<Vec<u8>, WireFault> {
        match tokio::time::timeout(wait, self.output.recv()).await {
            Ok(Some(line)) => Ok(line),
            Ok(None) => Err(WireFault::Closed(self.end_reason())),
            Err(_) => Err(WireFault::TimedOut(wait)),
        }
    }

    /// Why the output ended, as far as can be seen now.
    fn end_reason(&self) -> String {
        if self.ended() {
            "the server ended the session".into()
        } else {
            "the server's output closed".into()
        }
    }

    /// Whether the session has ended.
    pub fn ended(&self) -> bool {
        self.served.as_ref().is_none_or(|s| s.is_finished())
    }

    /// Sends a request and reads lines until its answer (by id) comes; the other lines read on
    /// the way are returned too.
    pub async fn request(
        &mut self,
        message: &Value,
        wait: Duration,
    ) -> Result<(Value, Vec<Vec<u8>>), WireFault> {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        self.send(message.to_string().as_bytes(), wait).await?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut others = Vec::new();
        // Bounded by the deadline; at most 1000 unrelated lines are skipped.
        for _ in 0..1000 {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let line = self.next_line(left).await?;
            match serde_json::from_slice::<Value>(&line) {
                Ok(answer) if answer.get("id") == Some(&id) => return Ok((answer, others)),
                _ => others.push(line),
            }
        }
        Err(WireFault::TimedOut(wait))
    }

    /// The 2025-11-25 handshake: `initialize`, then `notifications/initialized`.
    pub async fn initialize(&mut self, wait: Duration) -> Result<(), String> {
        let init = json!({
            "jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "toolgate-check-robustness", "version": "0"}
            }
        });
        let (answer, _) = self
            .request(&init, wait)
            .await
            .map_err(|e| format!("initialize: {e}"))?;
        if answer.get("result").is_none() {
            return Err(format!("initialize was refused: {}", bounded(&answer)));
        }
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.send(initialized.to_string().as_bytes(), wait)
            .await
            .map_err(|e| format!("notifications/initialized: {e}"))
    }

    /// `tools/list` with JSON-RPC id `id`: how many tools it lists, or why it failed.
    pub async fn list_tools(&mut self, id: &str, wait: Duration) -> Result<usize, String> {
        let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        self.list(list, wait).await
    }

    /// `tools/list` as a 2026-07-28 request (its `_meta` inline): served on a session that has
    /// not been initialized, or one that began as 2026-07-28.
    pub async fn list_tools_modern(&mut self, id: &str, wait: Duration) -> Result<usize, String> {
        let list = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/list",
            "params": {"_meta": modern_meta()}
        });
        self.list(list, wait).await
    }

    async fn list(&mut self, list: Value, wait: Duration) -> Result<usize, String> {
        let (answer, others) = self.request(&list, wait).await.map_err(|e| e.to_string())?;
        self.late.extend(others);
        tool_count(&answer)
    }

    /// The lines read while waiting for a probe's answer that were not its answer (a late
    /// answer to a case), since the last call.
    pub fn take_late(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.late)
    }

    /// Closes the input and waits (bounded) for the session to end; how it ended.
    pub async fn close(mut self, wait: Duration) -> String {
        if let Ok(mut input) = self.input.lock() {
            input.take();
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.outcome(wait).await {
            Some(outcome) => outcome,
            None => {
                if let Some(served) = self.served.take() {
                    served.abort();
                }
                format!("did not end within {} ms; aborted", wait.as_millis())
            }
        }
    }

    /// How the session ended, once it has (waiting at most `wait`); `None` while it runs.
    pub async fn outcome(&mut self, wait: Duration) -> Option<String> {
        if let Some(ended) = &self.ended_with {
            return Some(ended.clone());
        }
        let served = self.served.as_mut()?;
        let ended = match tokio::time::timeout(wait, served).await {
            Ok(Ok(Ok(()))) => "ended cleanly".to_string(),
            Ok(Ok(Err(e))) => format!("ended with an error: {e}"),
            Ok(Err(e)) => format!("the session task failed: {e}"),
            Err(_) => return None,
        };
        self.served = None;
        self.ended_with = Some(ended.clone());
        Some(ended)
    }
}

/// How many tools a `tools/list` answer lists (at least one), or why it is not one.
pub fn tool_count(answer: &Value) -> Result<usize, String> {
    match answer.pointer("/result/tools").and_then(Value::as_array) {
        Some(tools) if !tools.is_empty() => Ok(tools.len()),
        _ => Err(format!("not a tool list: {}", bounded(answer))),
    }
}

/// The `_meta` of a 2026-07-28 request.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-check-robustness", "version": "0"}
    })
}

/// An HTTP response as the harness keeps it.
#[derive(Debug, Clone)]
pub struct HttpAnswer {
    pub status: u16,
    pub body: Vec<u8>,
    /// The first JSON-RPC message in the body (plain JSON or server-sent events).
    pub message: Option<Value>,
}

/// A client of the server's `/mcp` on 127.0.0.1.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    pub url: String,
}

impl Http {
    pub fn new(url: String) -> Result<Self, String> {
        // reqwest is built without a default TLS provider; its client needs one installed
        // even for plain HTTP.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Http { client, url })
    }

    /// POSTs `body` with the 2026-07-28 headers (`method` and `name` fill `Mcp-Method` and
    /// `Mcp-Name` when given), `headers` replacing them by name (an empty value removes one).
    pub async fn post(
        &self,
        body: Vec<u8>,
        method: Option<&str>,
        name: Option<&str>,
        headers: &std::collections::BTreeMap<String, String>,
        wait: Duration,
    ) -> Result<HttpAnswer, WireFault> {
        let mut all: std::collections::BTreeMap<String, String> = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", MODERN),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        if let Some(method) = method {
            all.insert("mcp-method".into(), method.into());
        }
        if let Some(name) = name {
            all.insert("mcp-name".into(), name.into());
        }
        for (k, v) in headers {
            all.insert(k.to_ascii_lowercase(), v.clone());
        }
        let mut request = self.client.post(&self.url).timeout(wait).body(body);
        for (k, v) in all.iter().filter(|(_, v)| !v.is_empty()) {
            request = request.header(k.as_str(), v.as_str());
        }
        let response = request.send().await.map_err(fault)?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(fault)?.to_vec();
        let message = message_of(&body);
        Ok(HttpAnswer {
            status,
            body,
            message,
        })
    }

    /// POSTs one JSON-RPC request as a 2026-07-28 host would.
    pub async fn call(&self, message: &Value, wait: Duration) -> Result<HttpAnswer, WireFault> {
        let method = message["method"].as_str();
        let name = message.pointer("/params/name").and_then(Value::as_str);
        self.post(
            message.to_string().into_bytes(),
            method,
            name,
            &Default::default(),
            wait,
        )
        .await
    }

    /// A 2026-07-28 `tools/list`: how many tools, or why it failed.
    pub async fn list_tools(&self, id: &str, wait: Duration) -> Result<usize, String> {
        let list = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/list",
            "params": {"_meta": modern_meta()}
        });
        let answer = self.call(&list, wait).await.map_err(|e| e.to_string())?;
        match &answer.message {
            Some(message) if answer.status == 200 => tool_count(message),
            _ => Err(format!("HTTP {}: {}", answer.status, preview(&answer.body))),
        }
    }
}

fn fault(error: reqwest::Error) -> WireFault {
    if error.is_timeout() {
        WireFault::TimedOut(Duration::ZERO)
    } else {
        // The source chain says what broke (refused, reset).
        let mut why = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(s) = source {
            why.push_str(&format!(": {s}"));
            source = s.source();
        }
        WireFault::Closed(why)
    }
}

/// The first JSON-RPC message in a body, plain or as server-sent events.
pub fn message_of(body: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(body);
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .chain(std::iter::once(text.trim()))
        .find_map(|d| {
            serde_json::from_str::<Value>(d)
                .ok()
                .filter(|v| v.get("jsonrpc").is_some())
        })
}

/// The resident set size of this process, in KiB, from `/proc/self/status`.
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_found_in_plain_json_and_in_server_sent_events() {
        let plain = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert_eq!(message_of(plain).unwrap()["id"], 1);
        let sse = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n";
        assert_eq!(message_of(sse).unwrap()["id"], 2);
        assert_eq!(message_of(b"Unsupported Media Type"), None);
        assert_eq!(message_of(b"{\"not\":\"rpc\"}"), None);
    }

    #[test]
    fn a_preview_never_carries_a_huge_payload() {
        let huge = vec![b'x'; 5_000_000];
        let p = preview(&huge);
        assert!(p.len() < 300, "{}", p.len());
        assert!(p.ends_with("(5000000 bytes)"), "{p}");
        assert_eq!(preview(b"\xff{"), "\u{fffd}{");
    }

    #[test]
    fn this_process_has_a_resident_size() {
        assert!(rss_kib().is_some_and(|kib| kib > 0));
    }
}
