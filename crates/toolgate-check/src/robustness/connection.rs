//! Connection cases: a client that holds the HTTP front's resources instead of sending a bad
//! message (slow headers or body, idle and half-open connections, one past the connection cap,
//! an HTTP/2 preface, GET streams held or dropped), on raw sockets to 127.0.0.1.
//!
//! [`attack`] does what the case names and says what the server did: `Ok(rule)` when it bounded
//! the attack as it must (cut the connection, or answered with the status the attack must get)
//! within the case's deadline, `Err(why)` otherwise. Every wait is bounded by that deadline;
//! every loop by its count.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::format::{Attack, ConnectionCase, connection_limits};
use super::wire::{LEGACY, MODERN};

/// How often a slow client sends its next byte.
const DRIBBLE: Duration = Duration::from_millis(250);

/// Does `case`'s attack to the server at `address`; what the server did (see the module doc).
pub async fn attack(case: &ConnectionCase, address: SocketAddr) -> Result<String, String> {
    let within = Duration::from_millis(case.within_ms);
    let limits = connection_limits(case);
    let ms = |d: Duration| d.as_millis();
    match case.attack {
        Attack::SlowHeaders => {
            let mut stream = connect(address).await?;
            write(&mut stream, b"POST /mcp HTTP/1.1\r\nx-slow: ").await?;
            let after = dribble_until_closed(&mut stream, within).await?;
            Ok(format!(
                "cut after {} ms of slow headers (header time {} ms)",
                ms(after),
                ms(limits.header_time)
            ))
        }
        Attack::Idle | Attack::HalfOpen => {
            let mut stream = connect(address).await?;
            if case.attack == Attack::HalfOpen {
                write(&mut stream, b"POST /mc").await?;
            }
            let started = Instant::now();
            let (_, closed) = read_until_closed(&mut stream, within).await;
            if !closed {
                return Err(format!("still open after {} ms", ms(within)));
            }
            Ok(format!(
                "cut after {} ms (header time {} ms)",
                ms(started.elapsed()),
                ms(limits.header_time)
            ))
        }
        Attack::SlowBody => {
            let mut stream = connect(address).await?;
            let head = format!(
                "POST /mcp HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
                 accept: application/json, text/event-stream\r\nmcp-protocol-version: {MODERN}\r\n\
                 content-length: 1000\r\n\r\n{{"
            );
            write(&mut stream, head.as_bytes()).await?;
            let started = Instant::now();
            let (mut reader, mut writer) = stream.into_split();
            let dribbling = tokio::spawn(async move {
                for _ in 0..240 {
                    tokio::time::sleep(DRIBBLE).await;
                    if writer.write_all(b" ").await.is_err() {
                        return;
                    }
                }
            });
            let mut answer = Vec::new();
            let _ = tokio::time::timeout(within, reader.read_to_end(&mut answer)).await;
            dribbling.abort();
            let status = status_line(&answer);
            if !status.starts_with("HTTP/1.1 408") {
                return Err(format!(
                    "expected HTTP 408 within {} ms, got {status:?}",
                    ms(within)
                ));
            }
            Ok(format!(
                "http 408 after {} ms of a slow body (body time {} ms)",
                ms(started.elapsed()),
                ms(limits.body_time)
            ))
        }
        Attack::PastTheCap => {
            let started = Instant::now();
            let mut held = Vec::new();
            for _ in 0..limits.max_connections {
                held.push(connect(address).await?);
            }
            // Let the server accept them all before the one past the cap.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut extra = connect(address).await?;
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
            let request = format!(
                "POST /mcp HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\n\r\n{body}",
                body.len()
            );
            write(&mut extra, request.as_bytes()).await?;
            let (answer, closed) = read_until_closed(&mut extra, within).await;
            let status = status_line(&answer);
            if !status.starts_with("HTTP/1.1 503") || !closed {
                return Err(format!(
                    "the connection past the cap got {status:?} (closed: {closed})"
                ));
            }
            let left = within.saturating_sub(started.elapsed());
            for (i, mut stream) in held.into_iter().enumerate() {
                let (_, closed) = read_until_closed(&mut stream, left).await;
                if !closed {
                    return Err(format!("held connection {i} still open"));
                }
            }
            Ok(format!(
                "http 503 past {} connections, the held ones cut after {} ms (header time {} ms)",
                limits.max_connections,
                ms(started.elapsed()),
                ms(limits.header_time)
            ))
        }
        Attack::Http2Preface => {
            let mut stream = connect(address).await?;
            write(
                &mut stream,
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
            )
            .await?;
            let (answer, closed) = read_until_closed(&mut stream, within).await;
            if !closed {
                return Err(format!("still open after {} ms", ms(within)));
            }
            if !(answer.is_empty() || answer.starts_with(b"HTTP/1.1 4")) {
                return Err(format!("answered {:?}", status_line(&answer)));
            }
            Ok(format!(
                "closed without being served ({})",
                if answer.is_empty() {
                    "no answer".to_string()
                } else {
                    status_line(&answer)
                }
            ))
        }
        Attack::HeldStream => {
            let (http, url, session) = open_session(address).await?;
            let started = Instant::now();
            let mut stream = get_stream(&http, &url, &session, within).await?;
            let ended = tokio::time::timeout(within, async {
                // Bounded by the deadline; each chunk is an event or a ping.
                while let Ok(Some(_)) = stream.chunk().await {}
            })
            .await;
            if ended.is_err() {
                return Err(format!("the GET stream was open after {} ms", ms(within)));
            }
            Ok(format!(
                "the GET stream ended after {} ms (stream time {} ms)",
                ms(started.elapsed()),
                ms(limits.stream_time)
            ))
        }
        Attack::AbandonedStream => {
            let (http, url, session) = open_session(address).await?;
            let started = Instant::now();
            drop(get_stream(&http, &url, &session, within).await?);
            // Bounded by the deadline: rmcp notices the dropped stream, then serves a new one.
            loop {
                let again = get_stream(&http, &url, &session, within).await;
                if again.is_ok() {
                    return Ok(format!(
                        "a new GET stream after {} ms",
                        ms(started.elapsed())
                    ));
                }
                if started.elapsed() >= within {
                    return Err(format!(
                        "no new GET stream within {} ms: {}",
                        ms(within),
                        again.err().unwrap_or_default()
                    ));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn connect(address: SocketAddr) -> Result<TcpStream, String> {
    tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(address))
        .await
        .map_err(|_| format!("connecting to {address} took over 5 s"))?
        .map_err(|e| format!("cannot connect to {address}: {e}"))
}

async fn write(stream: &mut TcpStream, bytes: &[u8]) -> Result<(), String> {
    tokio::time::timeout(Duration::from_secs(5), stream.write_all(bytes))
        .await
        .map_err(|_| "writing took over 5 s".to_string())?
        .map_err(|e| format!("writing failed: {e}"))
}

/// One byte every [`DRIBBLE`] until the server closes the connection; how long that took, or
/// an error once `within` has passed.
async fn dribble_until_closed(
    stream: &mut TcpStream,
    within: Duration,
) -> Result<Duration, String> {
    let started = Instant::now();
    let rounds = within.as_millis() / DRIBBLE.as_millis() + 1;
    for _ in 0..rounds {
        tokio::time::sleep(DRIBBLE).await;
        if stream.write_all(b"a").await.is_err() {
            return Ok(started.elapsed());
        }
        let mut byte = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(10), stream.read(&mut byte)).await
        {
            return Ok(started.elapsed());
        }
    }
    Err(format!(
        "still reading a header byte every {} ms after {} ms",
        DRIBBLE.as_millis(),
        started.elapsed().as_millis()
    ))
}

/// Reads until the server closes (EOF or reset) or `within` passes: the first 4 KiB read, and
/// whether it closed.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (Vec<u8>, bool) {
    let deadline = tokio::time::Instant::now() + within;
    let mut kept = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return (kept, false),
            Ok(Ok(0) | Err(_)) => return (kept, true),
            Ok(Ok(n)) => {
                let room = 4096usize.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buffer[..room]);
            }
        }
    }
}

/// The first line of an HTTP answer.
fn status_line(answer: &[u8]) -> String {
    let text = String::from_utf8_lossy(answer);
    text.lines().next().unwrap_or_default().to_string()
}

fn client() -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// A 2025-11-25 session opened and initialized: the client, the endpoint and the session id.
async fn open_session(address: SocketAddr) -> Result<(reqwest::Client, String, String), String> {
    let http = client()?;
    let url = format!("http://{address}/mcp");
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {},
                   "clientInfo": {"name": "toolgate-check-robustness", "version": "0"}}
    });
    let response = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .map_err(|e| format!("initialize: {e}"))?;
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .ok_or_else(|| format!("initialize opened no session (HTTP {})", response.status()))?;
    let _ = response.bytes().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY)
        .body(initialized.to_string())
        .send()
        .await
        .map_err(|e| format!("notifications/initialized: {e}"))?;
    if !response.status().is_success() {
        return Err(format!(
            "notifications/initialized: HTTP {}",
            response.status()
        ));
    }
    Ok((http, url, session))
}

/// The session's GET stream, opened (its headers read) within `within`.
async fn get_stream(
    http: &reqwest::Client,
    url: &str,
    session: &str,
    within: Duration,
) -> Result<reqwest::Response, String> {
    let response = http
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", LEGACY)
        // The stream itself may outlast the client's default timeout; the case bounds it.
        .timeout(within + Duration::from_secs(1))
        .send()
        .await
        .map_err(|e| format!("GET stream: {e}"))?;
    if response.status().as_u16() != 200 {
        return Err(format!("GET stream: HTTP {}", response.status()));
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener that accepts and holds every connection, reading nothing and answering
    /// nothing: a server with no bound at all.
    async fn holding_server() -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            // Bounded: the cases here open at most 5 connections.
            for _ in 0..16 {
                match listener.accept().await {
                    Ok((stream, _)) => held.push(stream),
                    Err(_) => return,
                }
            }
        });
        (address, task)
    }

    #[tokio::test]
    async fn a_server_that_holds_a_hostile_client_for_ever_is_reported_unbounded() {
        let table = [
            (Attack::SlowHeaders, "still reading"),
            (Attack::Idle, "still open"),
            (Attack::HalfOpen, "still open"),
            (Attack::SlowBody, "expected HTTP 408"),
            (Attack::PastTheCap, "past the cap got"),
            (Attack::Http2Preface, "still open"),
        ];
        for (attack_kind, why) in table {
            let (address, server) = holding_server().await;
            let case = ConnectionCase {
                id: "c".into(),
                category: "c".into(),
                description: String::new(),
                attack: attack_kind,
                header_ms: Some(100),
                body_ms: Some(100),
                stream_ms: Some(100),
                max_connections: Some(2),
                within_ms: 700,
            };
            let got = attack(&case, address).await;
            server.abort();
            match got {
                Err(got) => assert!(got.contains(why), "{}: {got}", attack_kind.as_str()),
                Ok(rule) => panic!("{}: judged bounded: {rule}", attack_kind.as_str()),
            }
        }
    }
}
