//! Load client of the MCP-over-stdio benchmark: starts the server command given after `--` as
//! its child, speaks newline-delimited JSON-RPC on its stdin/stdout as a desktop host does
//! (one session, one call in flight at a time), sends `tools/call` back to back, and after
//! `--warmup` seconds measures `--duration` seconds. Every answer is checked (a JSON-RPC
//! error, `isError`, a missing answer or a closed pipe is a failure).
//!
//! Revisions: `2025-11-25` sends `initialize` and `notifications/initialized` first;
//! `2026-07-28` sends no handshake and puts the protocol version, client capabilities and
//! client info in every request's `_meta`.
//!
//! Prints one line `conns=1 ok=.. failed=.. rps=.. p50_us=.. p99_us=.. max_us=..
//! server_peak_rss_kb=.. server_anon_kb=.. server_file_kb=..` (the child's `VmHWM` once the
//! measured window is over, and what is resident then: its own memory, and the pages of its
//! binary and libraries, which are clean and shared with every other process mapping them), then
//! `failure: ...` with the first failure if there was one. Then it closes the child's stdin
//! (a clean end of the session) and waits up to 10 s for it to exit before killing it.
//! Exits non-zero only when it could not run at all. Bounded: no read waits longer than
//! `--timeout-ms`, and the run stops after `--max-requests`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};
use toolgate_mcp_bench::{LoadArgs, Outcome, check_tool_call, result_of};

const CLIENT_INFO: &str = r#"{"name":"toolgate-mcp-stdio-load","version":"0.1.0"}"#;

/// How long the child may take to exit once its stdin is closed.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// The MCP load client of scripts/bench-mcp-stdio.sh: one stdio session with the server
/// command after `--`, `tools/call` back to back, every answer checked; prints one line of
/// calls/s, latency percentiles, the server's peak RSS and failures.
#[derive(clap::Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    load: LoadArgs,
    /// The server to start, and its arguments (after `--`).
    #[arg(last = true, required = true, num_args = 1..)]
    server: Vec<String>,
}

/// The child's stdin and its stdout as lines read by a thread of their own, so every read
/// can time out.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<std::io::Result<String>>,
    timeout: Duration,
}

impl Session {
    fn start(command: &[String], timeout: Duration) -> anyhow::Result<Session> {
        let (program, arguments) = command
            .split_first()
            .ok_or_else(|| anyhow!("no server command after --"))?;
        let mut child = Command::new(program)
            .args(arguments)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("could not start {program}"))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("the child has no stdout"))?;
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Session {
            child,
            stdin,
            lines,
            timeout,
        })
    }

    fn send(&mut self, message: &str) -> anyhow::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| anyhow!("stdin is closed"))?;
        stdin.write_all(message.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush().context("the server's stdin is closed")
    }

    /// The next line that is the answer to `id` (notifications and other lines are skipped).
    fn answer(&mut self, id: u64) -> anyhow::Result<String> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line.context("reading the server's stdout")?,
                Err(mpsc::RecvTimeoutError::Timeout) => bail!("no answer to {id} in time"),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("the server closed its stdout")
                }
            };
            let answers = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v.get("id").and_then(Value::as_u64))
                == Some(id);
            if answers {
                return Ok(line);
            }
        }
    }

    /// A `kB` field of the child's `/proc/PID/status` (`VmHWM`: its peak resident set;
    /// `RssAnon`, `RssFile`: what is resident now, its own memory and mapped files apart).
    fn status_kb(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    }

    /// Closes stdin (the session's clean end) and waits for the child; kills it if it stays.
    fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + EXIT_WAIT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("mcp-stdio-load: the server did not exit after stdin closed; killing it");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn main() -> anyhow::Result<()> {
    let Args { load, server } = <Args as clap::Parser>::parse();
    let client_info: Value = serde_json::from_str(CLIENT_INFO)?;
    let params = load
        .call_params(&client_info)
        .map_err(|e| anyhow!(e))?
        .to_string();

    let mut session = Session::start(&server, Duration::from_millis(load.timeout_ms))?;
    if !load.stateless()
        && let Err(e) = initialize(&mut session, &load.revision, &client_info)
    {
        session.finish();
        return Err(e);
    }

    let mut outcome = Outcome::default();
    let measure_from = Instant::now() + Duration::from_secs_f64(load.warmup);
    let end = measure_from + Duration::from_secs_f64(load.duration);
    for id in 1..=load.max_requests {
        let sent = Instant::now();
        if sent >= end {
            break;
        }
        let request =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#);
        let answer = session.send(&request).and_then(|()| session.answer(id));
        let done = Instant::now();
        match answer {
            Err(e) => {
                // The session is broken or stuck: count it and stop.
                outcome.fail(format!("{e:#}"));
                break;
            }
            Ok(line) => match check_tool_call("application/json", line.as_bytes(), id) {
                Err(why) => outcome.fail(why),
                Ok(()) if sent >= measure_from && done <= end => outcome.succeeded(sent, done),
                Ok(()) => {}
            },
        }
    }
    let [peak_rss, anon, file] = ["VmHWM", "RssAnon", "RssFile"].map(|field| {
        session
            .status_kb(field)
            .map_or_else(|| "?".to_owned(), |kb| kb.to_string())
    });
    session.finish();

    let (figures, failure) = outcome.summary(load.duration);
    println!(
        "conns=1 {figures} server_peak_rss_kb={peak_rss} server_anon_kb={anon} server_file_kb={file}"
    );
    if let Some(why) = failure {
        println!("failure: {}", why.replace('\n', " "));
    }
    Ok(())
}

/// The 2025-11-25 handshake: `initialize` (the server must choose `revision`), then
/// `notifications/initialized`.
fn initialize(session: &mut Session, revision: &str, client_info: &Value) -> anyhow::Result<()> {
    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": revision, "capabilities": {}, "clientInfo": client_info},
    });
    session.send(&init.to_string())?;
    let line = session.answer(0).context("initialize")?;
    let result = result_of("application/json", line.as_bytes(), 0)
        .map_err(|e| anyhow!("initialize: {e}"))?;
    let chosen = result.get("protocolVersion").and_then(Value::as_str);
    if chosen != Some(revision) {
        bail!("initialize: the server chose protocolVersion {chosen:?}");
    }
    session.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
}
