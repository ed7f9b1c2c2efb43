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
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{mpsc, watch};

use crate::server::{McpServer, ServeError};

/// The longest line accepted on stdin, in bytes (the newline excluded): 4 MiB.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// How long after SIGTERM in-flight calls may run before they are cancelled.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(6);

/// How long the output may take to flush once the session is over.
const FLUSH_DEADLINE: Duration = Duration::from_secs(2);

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
    // stdin is read on a thread of its own: a blocked read then never holds up the runtime's
    // shutdown, and the reader holds at most one capped line plus the channel's few.
    let (inbound_tx, inbound_rx) = mpsc::channel::<Inbound>(2);
    std::thread::Builder::new()
        .name("toolgate-stdin".into())
        .spawn(move || read_lines(std::io::stdin().lock(), MAX_LINE_BYTES, &inbound_tx))
        .map_err(|e| ServeError::Start(format!("cannot start the stdin reader: {e}")))?;

    let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(16);
    let writer = tokio::spawn(write_lines(out_rx, tokio::io::stdout()));
    let (guard_to_rmcp, rmcp_in) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_out, rmcp_to_writer) = tokio::io::duplex(PIPE_BYTES);
    let forwarder = tokio::spawn(forward_lines(rmcp_to_writer, out_tx.clone()));

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopper = tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let guard = tokio::spawn(guard(inbound_rx, guard_to_rmcp, out_tx, stop_rx.clone()));

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
    let mut line = Vec::new();
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
                None => classify(std::mem::take(&mut line)),
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
                line = Vec::new();
            }
            None => line.extend_from_slice(piece),
        }
        input.consume(consumed);
        if ends_line {
            let done = match skipped.take() {
                Some(len) => Some(Inbound::TooLong(len)),
                None => classify(std::mem::take(&mut line)),
            };
            if let Some(done) = done
                && to_guard.blocking_send(done).is_err()
            {
                return;
            }
        }
    }
}

/// What one complete line (without its newline) is; `None` for a blank line.
fn classify(mut line: Vec<u8>) -> Option<Inbound> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let verdict = std::str::from_utf8(&line)
        .map_err(|e| format!("the line is not UTF-8 ({e})"))
        .and_then(|text| {
            serde_json::from_str::<serde::de::IgnoredAny>(text)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
    Some(match verdict {
        Ok(()) => {
            line.push(b'\n');
            Inbound::Message(line)
        }
        Err(why) => Inbound::Malformed(why),
    })
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
async fn forward_lines(from_rmcp: DuplexStream, out: mpsc::Sender<Vec<u8>>) {
    let mut from_rmcp = BufReader::new(from_rmcp);
    let mut writer_alive = true;
    loop {
        let mut line = Vec::new();
        match from_rmcp.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
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
