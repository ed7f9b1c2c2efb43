//! Load client of the MCP-over-HTTP benchmark: `--conns` workers, each with its own HTTP/1.1
//! keep-alive connection to a loopback Streamable HTTP endpoint, send `tools/call` back to
//! back; after `--warmup` seconds, `--duration` seconds are measured. Every answer is checked
//! (a JSON-RPC error, `isError`, a bad status or a missing answer is a failure).
//!
//! Revisions: `2025-11-25` does `initialize`, keeps the `Mcp-Session-Id`, sends
//! `notifications/initialized`, then calls with the session header (and DELETEs the session
//! at the end); `2026-07-28` is stateless: no handshake, every request carries the protocol
//! version, client capabilities and client info in `_meta` plus the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers.
//!
//! Prints one line `conns=.. ok=.. failed=.. rps=.. p50_us=.. p99_us=.. max_us=..
//! client_cpu_pct=..` (the client's own CPU use over the whole run, warm-up included: near
//! 100 means the client, not the server, was the limit), then
//! `failure: ...` with the first failure if there was one. Exits non-zero only when it could
//! not run at all. Loopback only: any other host is refused.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use toolgate_mcp_bench::{LoadArgs, Outcome, check_tool_call, result_of};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const CLIENT_INFO: &str = r#"{"name":"toolgate-mcp-load","version":"0.1.0"}"#;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Revision {
    Sessions,  // 2025-11-25
    Stateless, // 2026-07-28
}

impl Revision {
    fn as_str(self) -> &'static str {
        match self {
            Revision::Sessions => "2025-11-25",
            Revision::Stateless => "2026-07-28",
        }
    }
}

struct Config {
    addr: SocketAddr,
    authority: String,
    path: String,
    revision: Revision,
    tool: String,
    /// The `params` of every `tools/call`, serialized once.
    params: String,
    warmup: Duration,
    duration: Duration,
    max_requests: u64,
    timeout: Duration,
}

/// The MCP load client of scripts/bench-mcp.sh: CONNS connections to one loopback server, each
/// sending `tools/call` back to back (HTTP/1.1 keep-alive), every answer checked; prints one
/// line of req/s, latency percentiles and failures.
#[derive(clap::Parser)]
#[command(version)]
struct Args {
    /// The server's endpoint, http://127.0.0.1:PORT/PATH (loopback addresses only).
    #[arg(long)]
    url: String,
    /// Concurrent connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    conns: u16,
    #[command(flatten)]
    load: LoadArgs,
}

fn main() -> anyhow::Result<()> {
    let args = <Args as clap::Parser>::parse();
    let url = args.url;
    let load = args.load;
    let revision = if load.stateless() {
        Revision::Stateless
    } else {
        Revision::Sessions
    };
    let conns = usize::from(args.conns);
    let client_info: Value = serde_json::from_str(CLIENT_INFO)?;
    let params = load.call_params(&client_info).map_err(|e| anyhow!(e))?;

    let (authority, path) = url
        .strip_prefix("http://")
        .map(|rest| rest.split_once('/').unwrap_or((rest, "")))
        .ok_or_else(|| anyhow!("--url must be http://127.0.0.1:PORT/PATH"))?;
    let addr: SocketAddr = authority
        .parse()
        .with_context(|| format!("{authority} is not IP:PORT"))?;
    if !is_loopback(addr.ip()) {
        bail!("refusing {addr}: the bench only talks to loopback");
    }

    let config = Arc::new(Config {
        addr,
        authority: authority.to_string(),
        path: format!("/{path}"),
        revision,
        tool: load.tool.clone(),
        params: params.to_string(),
        warmup: Duration::from_secs_f64(load.warmup),
        duration: Duration::from_secs_f64(load.duration),
        max_requests: load.max_requests,
        timeout: Duration::from_millis(load.timeout_ms),
    });

    // The client gets one core (taskset in the bench script): one thread is enough and fair.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let (cpu_before, wall_before) = (on_cpu_ns(), Instant::now());
    let outcome = runtime.block_on(run(config.clone(), conns))?;
    let wall_ns = wall_before.elapsed().as_nanos() as f64;
    let client_cpu = match (cpu_before, on_cpu_ns()) {
        (Some(before), Some(after)) => format!("{:.0}", (after - before) as f64 / wall_ns * 100.0),
        _ => "?".into(),
    };

    let (figures, failure) = outcome.summary(config.duration.as_secs_f64());
    println!("conns={conns} {figures} client_cpu_pct={client_cpu}");
    if let Some(why) = failure {
        println!("failure: {}", why.replace('\n', " "));
    }
    Ok(())
}

/// Nanoseconds this process has spent on a CPU (Linux `/proc/self/schedstat`), to tell
/// whether the client, not the server, was the limit.
fn on_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}

async fn run(config: Arc<Config>, conns: usize) -> anyhow::Result<Outcome> {
    let barrier = Arc::new(tokio::sync::Barrier::new(conns));
    let workers: Vec<_> = (0..conns)
        .map(|_| tokio::spawn(worker(config.clone(), barrier.clone())))
        .collect();
    let mut total = Outcome::default();
    for handle in workers {
        let outcome = handle.await.context("worker panicked")?;
        total.latencies_us.extend(outcome.latencies_us);
        total.ok += outcome.ok;
        total.failed += outcome.failed;
        if total.first_failure.is_none() {
            total.first_failure = outcome.first_failure;
        }
    }
    Ok(total)
}

/// One connection: set up (and, for 2025-11-25, initialize), wait for every worker, then call.
async fn worker(config: Arc<Config>, barrier: Arc<tokio::sync::Barrier>) -> Outcome {
    let mut outcome = Outcome::default();
    let setup = tokio::time::timeout(config.timeout, setup(&config)).await;
    // Every worker reaches the barrier, set up or not, so none waits forever.
    barrier.wait().await;
    let (mut sender, session) = match setup {
        Ok(Ok(ready)) => ready,
        Ok(Err(e)) => {
            outcome.fail(format!("setup: {e:#}"));
            return outcome;
        }
        Err(_) => {
            outcome.fail("setup timed out".into());
            return outcome;
        }
    };
    let start = Instant::now();
    let measure_from = start + config.warmup;
    let end = measure_from + config.duration;
    let expected = (config.duration.as_secs_f64() * 20_000.0) as usize;
    outcome.latencies_us.reserve(expected.min(1 << 22));

    for id in 1..=config.max_requests {
        let sent = Instant::now();
        if sent >= end {
            break;
        }
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{}}}"#,
            config.params
        );
        let mut request = post(&config, body, session.as_ref());
        if config.revision == Revision::Stateless {
            let headers = request.headers_mut();
            headers.insert("mcp-method", HeaderValue::from_static("tools/call"));
            if let Ok(name) = HeaderValue::from_str(&config.tool) {
                headers.insert("mcp-name", name);
            }
        }
        let answer = tokio::time::timeout(config.timeout, exchange(&mut sender, request)).await;
        let done = Instant::now();
        let measured = sent >= measure_from && done <= end;
        let verdict = match answer {
            Err(_) => Err("timed out".to_string()),
            Ok(Err(e)) => {
                // The connection is gone: count it and stop this worker.
                if measured || sent >= measure_from {
                    outcome.fail(format!("transport: {e:#}"));
                } else {
                    outcome.fail(format!("transport (warm-up): {e:#}"));
                }
                break;
            }
            Ok(Ok((status, content_type, body))) if status.is_success() => {
                check_tool_call(&content_type, &body, id)
            }
            Ok(Ok((status, _, body))) => Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(300)
                    .collect::<String>()
            )),
        };
        match verdict {
            // Failures count whenever they happen, so a broken warm-up is not hidden.
            Err(why) => outcome.fail(why),
            Ok(()) if measured => outcome.succeeded(sent, done),
            Ok(()) => {}
        }
    }

    if let Some(session) = session {
        let mut request = Request::builder()
            .method(Method::DELETE)
            .uri(&config.path)
            .header(HOST, &config.authority)
            .header(VERSION_HEADER, config.revision.as_str())
            .body(Full::new(Bytes::new()));
        if let Ok(request) = &mut request {
            request.headers_mut().insert(SESSION_HEADER, session);
        }
        if let Ok(request) = request {
            let _ = tokio::time::timeout(config.timeout, exchange(&mut sender, request)).await;
        }
    }
    outcome
}

type Answer = (hyper::StatusCode, String, Bytes);

async fn setup(config: &Config) -> anyhow::Result<(SendRequest<Full<Bytes>>, Option<HeaderValue>)> {
    let stream = tokio::net::TcpStream::connect(config.addr)
        .await
        .with_context(|| format!("connect {}", config.addr))?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("HTTP/1.1 handshake")?;
    tokio::spawn(connection);
    if config.revision == Revision::Stateless {
        return Ok((sender, None));
    }

    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": config.revision.as_str(),
            "capabilities": {},
            "clientInfo": serde_json::from_str::<Value>(CLIENT_INFO)?,
        }
    });
    let mut request = post(config, init.to_string(), None);
    request.headers_mut().remove(VERSION_HEADER);
    let response = sender.ready().await.and(Ok(()));
    response.context("connection not ready")?;
    let response = sender.send_request(request).await.context("initialize")?;
    let status = response.status();
    let session = response.headers().get(SESSION_HEADER).cloned();
    let content_type = content_type_of(response.headers());
    let body = response.into_body().collect().await?.to_bytes();
    if !status.is_success() {
        bail!(
            "initialize: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let result = result_of(&content_type, &body, 0).map_err(|e| anyhow!("initialize: {e}"))?;
    let version = result.get("protocolVersion").and_then(Value::as_str);
    if version != Some(config.revision.as_str()) {
        bail!("initialize: server chose protocolVersion {version:?}");
    }
    let session = session.ok_or_else(|| anyhow!("initialize: no Mcp-Session-Id header"))?;

    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string();
    let request = post(config, note, Some(&session));
    let (status, _, body) = exchange(&mut sender, request).await?;
    if !status.is_success() {
        bail!(
            "notifications/initialized: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok((sender, Some(session)))
}

fn post(config: &Config, body: String, session: Option<&HeaderValue>) -> Request<Full<Bytes>> {
    let mut request = Request::new(Full::new(Bytes::from(body)));
    *request.method_mut() = Method::POST;
    if let Ok(uri) = config.path.parse() {
        *request.uri_mut() = uri;
    }
    let headers = request.headers_mut();
    if let Ok(host) = HeaderValue::from_str(&config.authority) {
        headers.insert(HOST, host);
    }
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert(
        VERSION_HEADER,
        HeaderValue::from_static(config.revision.as_str()),
    );
    if let Some(session) = session {
        headers.insert(SESSION_HEADER, session.clone());
    }
    request
}

async fn exchange(
    sender: &mut SendRequest<Full<Bytes>>,
    request: Request<Full<Bytes>>,
) -> anyhow::Result<Answer> {
    sender.ready().await.context("connection closed")?;
    let response = sender.send_request(request).await.context("send")?;
    let status = response.status();
    let content_type = content_type_of(response.headers());
    let body = response
        .into_body()
        .collect()
        .await
        .context("body")?
        .to_bytes();
    Ok((status, content_type, body))
}

fn content_type_of(headers: &hyper::HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}
