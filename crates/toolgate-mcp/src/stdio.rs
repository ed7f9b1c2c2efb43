//! The stdio transport: newline-delimited JSON-RPC on stdin/stdout, with a line guard in front
//! of rmcp's own framing ([`AsyncRwTransport`] over in-process pipes).
//!
//! Contract, for every line a host writes to stdin:
//! - a line that is valid JSON (UTF-8) and at most [`MAX_LINE_BYTES`] long reaches rmcp
//!   byte-for-byte unchanged (rmcp answers what is JSON but not JSON-RPC, and unknown methods);
//! - a line that is not valid JSON is answered on stdout with
//!   `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: ..."}}` and
//!   dropped (rmcp alone would drop it without a word);
//! - a line longer than [`MAX_LINE_BYTES`] is read through to its end without keeping more than
//!   the cap in memory, answered with a `-32600` error (id null) whose message names the cap,
//!   and dropped;
//! - a line nested deeper than [`MAX_NESTING`] arrays and objects is answered with `-32700`
//!   (id null) and dropped (rmcp's parser would refuse it as a syntax error and drop it without
//!   a word, leaving the request unanswered);
//! - before the session has begun (no `initialize` request, and no 2026-07-28 request carrying
//!   its `_meta`, has been passed on), a notification or a response is dropped with a note on
//!   stderr: rmcp would end the whole session on it. An `initialize` that rmcp refuses puts
//!   the session back to not begun;
//! - a blank line is ignored.
//!
//! Every line on stdout is one whole JSON-RPC message: rmcp's replies and the guard's go through
//! one writer, a line at a time, so they never interleave mid-line. Nothing else is written to
//! stdout.
//!
//! The session ends cleanly (`Ok`) when stdin reaches EOF, or on SIGTERM: input stops being
//! read, rmcp finishes the calls already in flight (it drains their replies for up to 5 s),
//! whatever is still running after [`DRAIN_DEADLINE`] is cancelled, and the output is flushed.
//! A host closing stdin before initializing is a clean end too.

use std::future::Future;
use std::io::{BufRead, ErrorKind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{mpsc, watch};

use crate::server::{McpServer, ServeError};

/// The longest line accepted on stdin, in bytes (the newline excluded): 4 MiB.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// The deepest nesting of arrays and objects a line may have (serde_json, which rmcp parses
/// with, stops at 128).
pub const MAX_NESTING: usize = 100;

/// How long after SIGTERM in-flight calls may run before they are cancelled.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(6);

/// How long the output may take to flush once the session is over.
const FLUSH_DEADLINE: Duration = Duration::from_secs(2);

/// The line buffer's first size; a longer line makes it grow once, to [`MAX_LINE_BYTES`].
const SMALL_LINE_BYTES: usize = 64 * 1024;

/// Bytes buffered in each in-process pipe between the guard and rmcp.
const PIPE_BYTES: usize = 64 * 1024;

/// What the stdin reader hands the guard, one per line.
#[derive(Debug, PartialEq)]
enum Inbound {
    /// A valid JSON line, newline included, for rmcp.
    Message(Vec<u8>),
    /// A line that is not JSON: the parser's complaint.
    Malformed(String),
    /// A line over the cap, discarded: how long it was.
    TooLong(usize),
}

/// Serves `server` on stdin/stdout until the host closes stdin or the process gets SIGTERM
/// (see the module docs for the contract).
pub async fn serve_stdio(server: McpServer) -> Result<(), ServeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| ServeError::Start(format!("cannot listen for SIGTERM: {e}")))?;
    serve_stdio_until(server, async move {
        term.recv().await;
    })
    .await
}

/// Like [`serve_stdio`], but ends (draining as on SIGTERM) when `shutdown` completes instead.
pub async fn serve_stdio_until(
    server: McpServer,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    serve_lines(
        server,
        |to_guard| read_lines(std::io::stdin().lock(), MAX_LINE_BYTES, to_guard),
        tokio::io::stdout(),
        shutdown,
    )
    .await
}

/// The stdio transport on another pair of streams: `input` is read as stdin is (on a thread
/// of its own, through the same line guard) and every reply is written to `output` as to
/// stdout, under the contract of the module docs. For a host that is not a parent process (a
/// test or a robustness harness driving the real transport over a pipe).
pub async fn serve_io_until(
    server: McpServer,
    input: impl std::io::Read + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    serve_lines(
        server,
        move |to_guard| read_lines(std::io::BufReader::new(input), MAX_LINE_BYTES, to_guard),
        output,
        shutdown,
    )
    .await
}

async fn serve_lines(
    server: McpServer,
    reader: impl FnOnce(&mpsc::Sender<Inbound>) + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    // The input is read on a thread of its own: a blocked read then never holds up the
    // runtime's shutdown, and the reader holds at most one capped line plus the channel's few.
    let (inbound_tx, inbound_rx) = mpsc::channel::<Inbound>(2);
    std::thread::Builder::new()
        .name("toolgate-stdin".into())
        .spawn(move || reader(&inbound_tx))
        .map_err(|e| ServeError::Start(format!("cannot start the stdin reader: {e}")))?;

    let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(16);
    let writer = tokio::spawn(write_lines(out_rx, output));
    let (guard_to_rmcp, rmcp_in) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_out, rmcp_to_writer) = tokio::io::duplex(PIPE_BYTES);
    let lifecycle = Arc::new(Mutex::new(Lifecycle::default()));
    let forwarder = tokio::spawn(forward_lines(
        rmcp_to_writer,
        out_tx.clone(),
        Arc::clone(&lifecycle),
    ));

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopper = tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let guard = tokio::spawn(guard(
        inbound_rx,
        guard_to_rmcp,
        out_tx,
        stop_rx.clone(),
        lifecycle,
    ));

    let transport = AsyncRwTransport::new_server(rmcp_in, rmcp_out);
    let outcome = match server.serve(transport).await {
        Ok(running) => {
            let cancel = running.cancellation_token();
            let waiting = running.waiting();
            tokio::pin!(waiting);
            let mut stop_rx = stop_rx;
            let ended = tokio::select! {
                ended = &mut waiting => ended,
                () = async {
                    let _ = stop_rx.wait_for(|stop| *stop).await;
                    tokio::time::sleep(DRAIN_DEADLINE).await;
                } => {
                    eprintln!("toolgate: calls still running {DRAIN_DEADLINE:?} after SIGTERM; cancelling them");
                    cancel.cancel();
                    waiting.await
                }
            };
            ended
                .map(|_| ())
                .map_err(|e| ServeError::Session(e.to_string()))
        }
        // Stdin closed (or SIGTERM) before the host initialized: nothing to serve, a clean end.
        Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
            Ok(())
        }
        Err(e) => Err(ServeError::Start(e.to_string())),
    };

    stopper.abort();
    guard.abort();
    // rmcp has dropped its end of the pipe, so the forwarder ends; then the writer drains.
    let flushed = tokio::time::timeout(FLUSH_DEADLINE, async {
        let _ = forwarder.await;
        let _ = writer.await;
    })
    .await;
    if flushed.is_err() {
        eprintln!("toolgate: stdout did not flush within {FLUSH_DEADLINE:?}");
    }
    outcome
}

/// Splits `input` into lines of at most `cap` bytes and classifies each, until EOF, a read
/// error, or the guard going away. Never holds more than `cap` bytes of one line.
fn read_lines(mut input: impl BufRead, cap: usize, to_guard: &mpsc::Sender<Inbound>) {
    // One buffer for every line, reused. Once a line outgrows [`SMALL_LINE_BYTES`] the buffer
    // goes straight to `cap` instead of doubling towards it: an allocator that keeps freed
    // blocks resident (mimalloc does) would otherwise hold every step of the doubling too.
    let mut line = Vec::with_capacity(SMALL_LINE_BYTES.min(cap));
    // Bytes of the current line when it is over the cap and being skipped.
    let mut skipped: Option<usize> = None;
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("toolgate: reading stdin failed: {e}");
                return;
            }
        };
        if chunk.is_empty() {
            // EOF: a last line without its newline still counts.
            let last = match skipped {
                Some(len) => Some(Inbound::TooLong(len)),
                None => classify(&line),
            };
            if let Some(last) = last {
                let _ = to_guard.blocking_send(last);
            }
            return;
        }
        let (piece, consumed, ends_line) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (&chunk[..at], at + 1, true),
            None => (chunk, chunk.len(), false),
        };
        match skipped.as_mut() {
            Some(len) => *len += piece.len(),
            None if line.len() + piece.len() > cap => {
                skipped = Some(line.len() + piece.len());
                line.clear();
            }
            None => {
                if line.len() + piece.len() > line.capacity() {
                    line.reserve_exact(cap - line.len());
                }
                line.extend_from_slice(piece);
            }
        }
        input.consume(consumed);
        if ends_line {
            let done = match skipped.take() {
                Some(len) => Some(Inbound::TooLong(len)),
                None => classify(&line),
            };
            line.clear();
            if let Some(done) = done
                && to_guard.blocking_send(done).is_err()
            {
                return;
            }
        }
    }
}

/// What one complete line (without its newline) is; `None` for a blank line.
fn classify(line: &[u8]) -> Option<Inbound> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let verdict = std::str::from_utf8(line)
        .map_err(|e| format!("the line is not UTF-8 ({e})"))
        .and_then(|text| {
            serde_json::from_str::<serde::de::IgnoredAny>(text)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
    let verdict = verdict.and_then(|()| {
        if nests_deeper_than(line, MAX_NESTING) {
            Err(format!(
                "the message nests arrays and objects deeper than {MAX_NESTING} levels"
            ))
        } else {
            Ok(())
        }
    });
    Some(match verdict {
        Ok(()) => {
            let mut message = Vec::with_capacity(line.len() + 1);
            message.extend_from_slice(line);
            message.push(b'\n');
            Inbound::Message(message)
        }
        Err(why) => Inbound::Malformed(why),
    })
}

/// Whether `json` (valid JSON) nests arrays and objects deeper than `limit`.
pub(crate) fn nests_deeper_than(json: &[u8], limit: usize) -> bool {
    // Depth cannot pass the number of opening brackets: counting them is a vectorised pass,
    // and most messages have far fewer than the limit, so the walk below rarely runs.
    let opening = json.iter().filter(|&&b| b == b'[' || b == b'{').count();
    opening > limit && nesting(json) > limit
}

/// How deeply `json` (valid JSON) nests arrays and objects; brackets inside strings do not
/// count.
pub(crate) fn nesting(json: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in json {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Whether the session has begun, as far as the guard can tell: rmcp ends a session whose
/// first message (pings aside) is not a request, so until then notifications and responses
/// are not passed on.
#[derive(Debug, Default)]
struct Lifecycle {
    begun: bool,
    /// The id of the request that began it, until rmcp has answered it.
    opening: Option<Value>,
}

/// What the guard needs to know of a message before the session has begun.
#[derive(Debug, PartialEq)]
enum Opening {
    /// An `initialize` request, or a 2026-07-28 request with its `_meta`: it begins the
    /// session (if rmcp accepts it); the id.
    Begins(Value),
    /// A notification or a response: rmcp would end the session on it.
    Fatal,
    /// Anything else (a ping, a request rmcp refuses and answers, a line that is not an
    /// object): rmcp answers it and keeps waiting.
    Other,
}

fn opening(line: &[u8]) -> Opening {
    // Read whole only while the session has not begun: a few messages at most.
    let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(line) else {
        return Opening::Other;
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Opening::Other;
    }
    let id = message
        .get("id")
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64());
    match (message.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) => {
            let modern = message
                .get("params")
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
                .is_some();
            if method == "initialize" || (modern && method != "ping") {
                Opening::Begins(id.clone())
            } else {
                Opening::Other
            }
        }
        (Some(_), None) if !message.contains_key("id") => Opening::Fatal,
        (None, Some(_)) if message.contains_key("result") || message.contains_key("error") => {
            Opening::Fatal
        }
        _ => Opening::Other,
    }
}

/// The JSON-RPC error line (id null) the guard answers a rejected line with.
fn reply_for(rejected: &Inbound) -> Option<Vec<u8>> {
    let (code, message) = match rejected {
        Inbound::Message(_) => return None,
        Inbound::Malformed(why) => (-32700, format!("Parse error: {why}")),
        Inbound::TooLong(len) => (
            -32600,
            format!(
                "Invalid Request: a line of {len} bytes is over the {MAX_LINE_BYTES}-byte \
                 ({} MiB) cap for one message; it was discarded",
                MAX_LINE_BYTES / (1024 * 1024)
            ),
        ),
    };
    let mut line =
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
            .to_string()
            .into_bytes();
    line.push(b'\n');
    Some(line)
}

/// Passes good lines to rmcp and answers the others, until stdin ends or `stop` is set; then
/// closes rmcp's input, which ends its session once the calls in flight are answered.
async fn guard(
    mut inbound: mpsc::Receiver<Inbound>,
    mut to_rmcp: DuplexStream,
    out: mpsc::Sender<Vec<u8>>,
    mut stop: watch::Receiver<bool>,
    lifecycle: Arc<Mutex<Lifecycle>>,
) {
    loop {
        let next = tokio::select! {
            biased;
            _ = stop.wait_for(|stop| *stop) => break,
            next = inbound.recv() => next,
        };
        match next {
            None => break,
            Some(Inbound::Message(line)) => {
                let pass = match lifecycle.lock() {
                    Ok(mut state) if !state.begun => match opening(&line) {
                        Opening::Begins(id) => {
                            state.begun = true;
                            state.opening = Some(id);
                            true
                        }
                        Opening::Fatal => false,
                        Opening::Other => true,
                    },
                    _ => true,
                };
                if !pass {
                    eprintln!(
                        "toolgate: dropped a notification or response sent before the session \
                         began (initialize first)"
                    );
                    continue;
                }
                if to_rmcp.write_all(&line).await.is_err() {
                    break;
                }
            }
            Some(rejected) => {
                if let Some(reply) = reply_for(&rejected) {
                    let _ = out.send(reply).await;
                }
            }
        }
    }
    let _ = to_rmcp.shutdown().await;
}

/// Hands each whole line rmcp writes to the writer; keeps reading (and dropping) if the writer
/// is gone, so rmcp never blocks on a full pipe.
/// An error answer to the request that began the session puts it back to not begun.
async fn forward_lines(
    from_rmcp: DuplexStream,
    out: mpsc::Sender<Vec<u8>>,
    lifecycle: Arc<Mutex<Lifecycle>>,
) {
    let mut from_rmcp = BufReader::new(from_rmcp);
    let mut writer_alive = true;
    loop {
        let mut line = Vec::new();
        match from_rmcp.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if let Ok(mut state) = lifecycle.lock()
                    && state.opening.is_some()
                    && let Ok(answer) = serde_json::from_slice::<Value>(&line)
                    && answer.get("id") == state.opening.as_ref()
                {
                    state.begun = answer.get("error").is_none();
                    state.opening = None;
                }
                if line.last() != Some(&b'\n') {
                    line.push(b'\n');
                }
                if writer_alive && out.send(line).await.is_err() {
                    writer_alive = false;
                }
            }
        }
    }
}

/// The one writer of stdout: whole lines, each flushed, until every sender is gone.
async fn write_lines(mut lines: mpsc::Receiver<Vec<u8>>, mut stdout: impl AsyncWrite + Unpin) {
    while let Some(line) = lines.recv().await {
        if let Err(e) = stdout.write_all(&line).await {
            eprintln!("toolgate: writing stdout failed: {e}");
            return;
        }
        if stdout.flush().await.is_err() {
            return;
        }
    }
    let _ = stdout.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything `read_lines` makes of `input` with a cap of `cap` bytes.
    fn lines_of(input: &[u8], cap: usize) -> Vec<Inbound> {
        let (tx, mut rx) = mpsc::channel(64);
        read_lines(std::io::BufReader::with_capacity(7, input), cap, &tx);
        drop(tx);
        let mut got = Vec::new();
        while let Ok(item) = rx.try_recv() {
            got.push(item);
        }
        got
    }

    #[test]
    fn good_lines_pass_unchanged_bad_ones_are_named_and_long_ones_are_measured() {
        let input = b"{\"a\":1}\nnot json\n\n   \n0123456789012345678901\n[1,2]\n{\"tail\":true}";
        let got = lines_of(input, 20);
        assert_eq!(got.len(), 5, "{got:?}");
        assert_eq!(got[0], Inbound::Message(b"{\"a\":1}\n".to_vec()));
        assert!(
            matches!(&got[1], Inbound::Malformed(why) if why.contains("expected")),
            "{got:?}"
        );
        assert_eq!(got[2], Inbound::TooLong(22));
        assert_eq!(got[3], Inbound::Message(b"[1,2]\n".to_vec()));
        assert_eq!(got[4], Inbound::Message(b"{\"tail\":true}\n".to_vec()));
    }

    #[test]
    fn a_line_at_the_cap_passes_and_one_past_it_does_not() {
        let at_cap = b"\"0123456789\"\n"; // 12 bytes before the newline
        assert_eq!(lines_of(at_cap, 12), [Inbound::Message(at_cap.to_vec())]);
        assert_eq!(lines_of(at_cap, 11), [Inbound::TooLong(12)]);
        // Unterminated and over the cap at EOF: still answered.
        assert_eq!(lines_of(b"\"0123456789", 5), [Inbound::TooLong(11)]);
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        let got = lines_of(b"\"\xff\xfe\"\n", 100);
        assert!(
            matches!(&got[..], [Inbound::Malformed(why)] if why.contains("UTF-8")),
            "{got:?}"
        );
    }

    #[test]
    fn nesting_past_the_limit_is_a_parse_error_and_brackets_in_strings_do_not_count() {
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_NESTING + 1),
            "]".repeat(MAX_NESTING + 1)
        );
        let got = lines_of(format!("{deep}\n").as_bytes(), 1 << 20);
        assert!(
            matches!(&got[..], [Inbound::Malformed(why)] if why.contains("deeper")),
            "{got:?}"
        );
        let at_limit = format!("{}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
        assert_eq!(nesting(at_limit.as_bytes()), MAX_NESTING);
        assert_eq!(nesting(br#"{"a":"[[[[\"{{{{","b":[1]}"#), 2);
        assert!(!nests_deeper_than(at_limit.as_bytes(), MAX_NESTING));
        assert!(nests_deeper_than(deep.as_bytes(), MAX_NESTING));
        // Many brackets, shallow: the count alone does not refuse it.
        let wide = format!("[{}1]", "[1],".repeat(MAX_NESTING * 2));
        assert!(!nests_deeper_than(wide.as_bytes(), MAX_NESTING));
        let in_strings = format!("{{\"a\":\"{}\"}}", "[".repeat(MAX_NESTING * 2));
        assert!(!nests_deeper_than(in_strings.as_bytes(), MAX_NESTING));
    }

    #[test]
    fn before_the_session_begins_only_what_rmcp_would_end_it_on_is_held_back() {
        let table: [(&[u8], Opening); 10] = [
            (br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#, Opening::Begins(json!(1))),
            (
                br#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
                Opening::Begins(json!("a")),
            ),
            (br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#, Opening::Other),
            (br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#, Opening::Other),
            (br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, Opening::Fatal),
            (br#"{"jsonrpc":"2.0","id":9,"result":{}}"#, Opening::Fatal),
            (br#"{"jsonrpc":"2.0","id":9,"error":{"code":1,"message":"m"}}"#, Opening::Fatal),
            // rmcp answers these with an error and keeps waiting.
            (br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, Opening::Other),
            (br#"{"jsonrpc":"1.0","method":"notifications/initialized"}"#, Opening::Other),
            (br#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#, Opening::Other),
        ];
        for (line, want) in table {
            assert_eq!(opening(line), want, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn replies_are_one_json_rpc_error_line_with_a_null_id() {
        let reply = reply_for(&Inbound::TooLong(10_000_000)).unwrap();
        assert_eq!(reply.last(), Some(&b'\n'));
        assert_eq!(reply.iter().filter(|&&b| b == b'\n').count(), 1);
        let value: serde_json::Value = serde_json::from_slice(&reply).unwrap();
        assert_eq!(value["jsonrpc"], "2.0");
        assert!(value["id"].is_null());
        assert_eq!(value["error"]["code"], -32600);
        let message = value["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("4194304") && message.contains("10000000"),
            "{message}"
        );
        let parse = reply_for(&Inbound::Malformed("bad".into())).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&parse).unwrap();
        assert_eq!(value["error"]["code"], -32700);
        assert_eq!(value["error"]["message"], "Parse error: bad");
        assert_eq!(reply_for(&Inbound::Message(b"{}\n".to_vec())), None);
    }
}
