//! `toolgate serve --stdio` fed raw bytes, as a buggy or hostile host might write them: what is
//! not JSON gets a `-32700`, a line over the cap (4 MiB) gets a `-32600` naming the cap and is
//! not held in memory, and the session goes on serving good requests afterwards; unknown
//! methods and bad arguments get their protocol answers; an approval asked over elicitation
//! crosses the guard both ways; EOF and SIGTERM end the process with status 0 (SIGTERM by the
//! drain deadline even when a call waits for an answer that never comes, and that call runs
//! nothing). Every line the server writes to stdout is checked to be one JSON-RPC message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const REPLY_WAIT: Duration = Duration::from_secs(20);

/// The server as a child process, with its stdout read line by line on a thread.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Raw {
    fn start(dir: &Path, toolset: &str) -> Raw {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["serve", "--stdio", "--toolset", toolset, "--db"])
            .arg(dir.join(format!("{toolset}.sqlite")))
            .current_dir(dir)
            .env_remove("XDG_DATA_HOME")
            .env("HOME", dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the binary starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Raw {
            child,
            stdin,
            lines,
        }
    }

    fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        self.send_bytes(format!("{message}\n").as_bytes());
    }

    /// The next line on stdout, which must be one JSON-RPC 2.0 message.
    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(REPLY_WAIT)
            .expect("a line on stdout in time");
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON ({e}): {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "a JSON-RPC message: {line}");
        message
    }

    fn initialize(&mut self) {
        self.initialize_with(json!({}));
    }

    /// `initialize` (2025-11-25) declaring `capabilities`, then `notifications/initialized`.
    fn initialize_with(&mut self, capabilities: Value) {
        let params = json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "raw-test", "version": "0"}});
        self.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}));
        let reply = self.next();
        assert_eq!(reply["id"], 1, "{reply}");
        assert_eq!(reply["result"]["protocolVersion"], "2025-11-25", "{reply}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
        let reply = self.next();
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Closes stdin, as a host does when it is done: the server must exit 0 within 10 s.
    fn end_cleanly(&mut self) {
        self.close_stdin();
        assert!(self.wait(Duration::from_secs(10)).success());
    }

    /// Waits for the process to end, at most `limit`; kills it and fails past that.
    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the server did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every line left on stdout once the process has ended, each checked as JSON-RPC.
    fn rest(&self) -> Vec<Value> {
        let mut rest = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries only JSON ({e}): {line:?}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            rest.push(message);
        }
        rest
    }

    /// The peak resident memory of the process so far, in KiB (Linux `VmHWM`).
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/PID/status")
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text_of(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text block: {reply}"))
        .to_string()
}

fn assert_parse_error(reply: &Value) {
    assert!(reply["id"].is_null(), "{reply}");
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("Parse error: "), "{message}");
}

#[test]
fn malformed_json_gets_a_parse_error_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut raw = Raw::start(dir.path(), "books-v2");
    // Before initialize, then again inside the session.
    raw.send_bytes(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\"\n");
    assert_parse_error(&raw.next());
    raw.initialize();
    raw.send_bytes(b"this is not json at all\n");
    assert_parse_error(&raw.next());
    raw.send_bytes(b"\xff\xfe{}\n");
    assert_parse_error(&raw.next());
    let reply = raw.call(2, "books_search", json!({"author": "Suzanne Collins"}));
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert!(text_of(&reply).contains("Mockingjay"), "{reply}");
    raw.end_cleanly();
    assert_eq!(raw.rest(), Vec::<Value>::new());
}

#[test]
fn a_ten_megabyte_line_gets_an_error_naming_the_cap_and_is_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut raw = Raw::start(dir.path(), "books-v2");
    raw.initialize();
    let reply = raw.call(2, "books_get", json!({"ids": [1]}));
    assert!(text_of(&reply).contains("Hunger Games"), "{reply}");
    let before = raw.peak_rss_kib();

    // A well-formed request whose one string argument makes the line 10 MB.
    let padding = "x".repeat(10_000_000);
    let huge = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "books_search", "arguments": {"title": padding}}});
    raw.send(&huge);
    let reply = raw.next();
    assert!(reply["id"].is_null(), "{reply}");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("4194304") && message.contains("4 MiB"),
        "{message}"
    );

    // The line was skipped, not held: the peak grew by well under its 10 MB.
    let grown = raw.peak_rss_kib().saturating_sub(before);
    assert!(
        grown < 9 * 1024,
        "peak RSS grew by {grown} KiB reading a 10 MB line"
    );

    let reply = raw.call(4, "books_get", json!({"ids": [2]}));
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert!(text_of(&reply).contains("Harry Potter"), "{reply}");
    raw.end_cleanly();
}

#[test]
fn unknown_methods_and_bad_arguments_get_their_protocol_answers() {
    let dir = tempfile::tempdir().unwrap();
    let mut raw = Raw::start(dir.path(), "books-v2");
    raw.initialize();
    raw.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "books/explode", "params": {}}));
    let reply = raw.next();
    assert_eq!(reply["id"], 7, "{reply}");
    assert_eq!(reply["error"]["code"], -32601, "{reply}");

    let reply = raw.call(8, "books_search", json!({"sort": "sideways"}));
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let structured = &reply["result"]["structuredContent"];
    assert_eq!(structured["code"], "invalid_argument", "{reply}");
    assert_eq!(structured["retryable"], false, "{reply}");
    assert!(text_of(&reply).contains("sideways"), "{reply}");

    // JSON that is not JSON-RPC is rmcp's to answer; it must not end the session.
    raw.send(&json!({"hello": "world"}));
    let reply = raw.next();
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    let reply = raw.call(9, "books_get", json!({"ids": [1]}));
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    raw.end_cleanly();
}

#[test]
fn sigterm_ends_the_server_with_status_zero_promptly() {
    let dir = tempfile::tempdir().unwrap();
    // Before initialize, stdin open: the parse error shows the server is up (its SIGTERM
    // handler is installed before stdin is read).
    let mut idle = Raw::start(dir.path(), "notes");
    idle.send_bytes(b"not yet\n");
    assert_parse_error(&idle.next());
    let killed = Command::new("kill")
        .args(["-TERM", &idle.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(idle.wait(Duration::from_secs(5)).code(), Some(0));
    assert_eq!(idle.rest(), Vec::<Value>::new());

    let mut raw = Raw::start(dir.path(), "notes");
    raw.initialize();
    let reply = raw.call(2, "notes_search", json!({"query": "budget"}));
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    // A call in flight as the signal lands; stdin stays open, so only SIGTERM can end it.
    raw.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "notes_search", "arguments": {"query": "travel"}}}));
    let start = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &raw.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = raw.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );
    // Whatever came out after the signal is still whole JSON-RPC lines (an answer to id 3 at most).
    for message in raw.rest() {
        assert_eq!(message["id"], 3, "{message}");
    }
}

#[test]
fn eof_before_and_after_initialize_ends_the_server_with_status_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut raw = Raw::start(dir.path(), "books-v2");
    raw.end_cleanly();
    assert_eq!(raw.rest(), Vec::<Value>::new());

    let mut raw = Raw::start(dir.path(), "books-v2");
    raw.initialize();
    raw.end_cleanly();
}

/// A notes server whose host declared elicitation, asked (call id 3) to delete the first
/// "budget" note: the server, its note id, and the `elicitation/create` it sent (notes_delete
/// is high risk, so the server asks the host on stdout).
fn deleting_a_note_asks(dir: &Path) -> (Raw, i64, Value) {
    let mut raw = Raw::start(dir, "notes");
    raw.initialize_with(json!({"elicitation": {}}));
    let reply = raw.call(2, "notes_search", json!({"query": "budget"}));
    let found: Value = serde_json::from_str(&text_of(&reply)).unwrap();
    let id = found["result"]["hits"][0]["id"].as_i64().unwrap();
    raw.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "notes_delete", "arguments": {"note_id": id}}}));
    let question = raw.next();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    (raw, id, question)
}

#[test]
fn an_approval_asked_over_stdio_passes_the_guard_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let (mut raw, id, question) = deleting_a_note_asks(dir.path());
    assert!(!question["id"].is_null(), "{question}");
    // A broken line while the server waits for the answer is answered, and changes nothing.
    raw.send_bytes(b"{\"jsonrpc\": \"2.0\", \"id\": \n");
    assert_parse_error(&raw.next());
    raw.send(&json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"action": "accept", "content": {"approve": true}}}));
    let reply = raw.next();
    assert_eq!(reply["id"], 3, "{reply}");
    assert_eq!(reply["result"]["isError"], false, "{reply}");

    let reply = raw.call(4, "notes_get", json!({"note_id": id}));
    assert_eq!(reply["result"]["isError"], true, "deleted: {reply}");
    assert_eq!(
        reply["result"]["structuredContent"]["code"], "not_found",
        "{reply}"
    );
    raw.end_cleanly();
}

#[test]
fn sigterm_while_a_call_waits_for_approval_exits_zero_by_the_deadline_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut raw, id, _question) = deleting_a_note_asks(dir.path());

    // The call is in flight, waiting for an answer that never comes.
    let start = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &raw.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = raw.wait(Duration::from_secs(15));
    let took = start.elapsed();
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(took < Duration::from_secs(9), "{took:?}");
    for message in raw.rest() {
        assert_eq!(
            message["id"], 3,
            "only the pending call may be answered: {message}"
        );
        assert_ne!(message["result"]["isError"], false, "{message}");
    }

    // Nothing ran: the note is still there.
    let mut raw = Raw::start(dir.path(), "notes");
    raw.initialize();
    let reply = raw.call(2, "notes_get", json!({"note_id": id}));
    assert_eq!(reply["result"]["isError"], false, "still there: {reply}");
    raw.end_cleanly();
}

#[test]
fn replies_from_the_guard_and_from_the_server_never_share_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut raw = Raw::start(dir.path(), "books-v2");
    raw.initialize();
    // Calls and broken lines interleaved in one write: the server answers the calls
    // concurrently while the guard answers the broken lines.
    const ROUNDS: u64 = 100;
    let mut burst = Vec::new();
    for i in 0..ROUNDS {
        let call = json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
            "params": {"name": "books_get", "arguments": {"ids": [1 + i % 20]}}});
        burst.extend_from_slice(format!("{call}\n{{\"broken\": {i}\n").as_bytes());
    }
    raw.send_bytes(&burst);
    let (mut answered, mut parse_errors) = (std::collections::BTreeSet::new(), 0);
    for _ in 0..2 * ROUNDS {
        let message = raw.next(); // each line parses as one JSON-RPC message
        if message["id"].is_null() {
            assert_eq!(message["error"]["code"], -32700, "{message}");
            parse_errors += 1;
        } else {
            assert_eq!(message["result"]["isError"], false, "{message}");
            answered.insert(message["id"].as_u64().unwrap());
        }
    }
    assert_eq!(parse_errors, ROUNDS);
    assert_eq!(answered, (100..100 + ROUNDS).collect());
    raw.end_cleanly();
    assert_eq!(raw.rest(), Vec::<Value>::new());
}
