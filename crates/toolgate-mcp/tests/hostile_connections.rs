//! The HTTP front of `serve_http` on a real listener on 127.0.0.1 under clients that hold its
//! resources rather than send bad messages: slow headers and bodies, idle and half-open
//! connections past the connection cap, GET streams held or abandoned, clients that never read
//! what they asked for, and an HTTP/2 preface. Each test is named after what it prevents, uses
//! raw sockets where a client library would be too polite, bounds every wait, and ends with a
//! probe (`echo_text` over a new connection) that must be served.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolgate_core::tool::{Tool, ToolBuilder, ToolOutput};
use toolgate_core::{Caller, Dispatcher, Effect, Principal, Registry, Risk};
use toolgate_mcp::{HttpLimits, McpServer};

/// The size of one `big_text` answer's text.
const BIG: usize = 256 * 1024;

fn echo_tool() -> Tool {
    ToolBuilder::<Value>::from_schema(
        "echo_text",
        1,
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["text"],
            "properties": {"text": {"type": "string", "maxLength": 100}}
        }),
    )
    .describe("Echoes its text.", "testing.", None, "the text.")
    .policy(Risk::Low, Effect::Read, "It changes nothing.")
    .read(|_ctx, args: Value| async move { Ok(ToolOutput::new(json!({"echo": args["text"]}))) })
    .unwrap()
}

fn big_tool() -> Tool {
    ToolBuilder::<Value>::from_schema(
        "big_text",
        1,
        json!({"type": "object", "additionalProperties": false, "properties": {}}),
    )
    .describe("Answers a large text.", "testing.", None, "a large text.")
    .policy(Risk::Low, Effect::Read, "It changes nothing.")
    .max_output_bytes(2 * BIG)
    .read(|_ctx, _args: Value| async move { Ok(ToolOutput::new(json!({"text": "b".repeat(BIG)}))) })
    .unwrap()
}

struct Running {
    url: String,
    /// `127.0.0.1:PORT`.
    address: String,
    _spawned: support::Spawned,
}

async fn start(limits: HttpLimits) -> Running {
    let registry = Arc::new(Registry::new(vec![echo_tool(), big_tool()]).unwrap());
    let principal = Principal::local("tester", &[]).with_catalogue(registry.names());
    let caller = Caller::new(Dispatcher::new(Arc::clone(&registry)).unwrap());
    let server = McpServer::serving(&registry, caller, principal, "hostile-connections-test");
    let spawned = support::spawn(server, limits).await;
    let address = spawned
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    Running {
        url: spawned.url.clone(),
        address,
        _spawned: spawned,
    }
}

/// The probe: a `tools/call` on a new connection is served within 5 s.
async fn probe(url: &str, id: u64) {
    support::install_tls_provider();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let (status, message) = support::call(
        &http,
        url,
        &support::tools_call(id, "echo_text", json!({"text": "still here"}), json!({})),
    )
    .await;
    assert_eq!(status, 200, "{message}");
    assert_eq!(message["result"]["isError"], false, "{message}");
}

/// A raw POST of a 2026-07-28 `tools/call` of `tool`, as bytes on the wire.
fn raw_call(address: &str, id: u64, tool: &str) -> Vec<u8> {
    let body = support::tools_call(id, tool, json!({}), json!({})).to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         mcp-method: tools/call\r\nmcp-name: {tool}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads until the server closes the connection (EOF or reset) or `within` passes; what was
/// read, and whether it closed. At most `cap` bytes are kept.
async fn read_until_closed(
    stream: &mut TcpStream,
    within: Duration,
    cap: usize,
) -> (Vec<u8>, bool) {
    let deadline = tokio::time::Instant::now() + within;
    let mut kept = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return (kept, false),
            Ok(Ok(0)) | Ok(Err(_)) => return (kept, true),
            Ok(Ok(n)) => {
                let room = cap.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buffer[..room]);
            }
        }
    }
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn a_slowloris_sending_a_header_byte_a_second_is_cut_at_the_header_time() {
    let running = start(HttpLimits {
        header_time: Duration::from_secs(2),
        ..HttpLimits::default()
    })
    .await;
    let mut slow = TcpStream::connect(&running.address).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nx-slow: ")
        .await
        .unwrap();
    let started = Instant::now();
    let mut cut = false;
    // One header byte a second for at most 8 s (hyper's own default would wait 30 s).
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if slow.write_all(b"a").await.is_err() {
            cut = true;
            break;
        }
        let mut byte = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(10), slow.read(&mut byte)).await
        {
            cut = true;
            break;
        }
    }
    assert!(cut, "the slow headers were still being read after 8 s");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "cut only after {took:?}");
    probe(&running.url, 1).await;
}

#[tokio::test]
async fn a_body_sent_a_byte_at_a_time_is_cut_at_the_body_time_and_frees_its_post_slot() {
    let running = start(HttpLimits {
        max_concurrent: 1,
        body_time: Duration::from_secs(2),
        ..HttpLimits::default()
    })
    .await;
    let mut slow = TcpStream::connect(&running.address).await.unwrap();
    let headers = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         content-length: 1000\r\n\r\n{{",
        running.address
    );
    slow.write_all(headers.as_bytes()).await.unwrap();
    let dribble = {
        // A byte every 300 ms, for at most 10 s, until the server stops reading.
        let (mut reader, mut writer) = slow.into_split();
        let writing = tokio::spawn(async move {
            for _ in 0..33 {
                tokio::time::sleep(Duration::from_millis(300)).await;
                if writer.write_all(b" ").await.is_err() {
                    return;
                }
            }
        });
        let reading = tokio::spawn(async move {
            let mut answer = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(10), reader.read_to_end(&mut answer))
                .await;
            answer
        });
        (writing, reading)
    };
    let answer = dribble.1.await.unwrap();
    dribble.0.abort();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("-32600"), "{answer}");
    assert!(answer.contains("2 s"), "{answer}");
    // The one POST slot is free again.
    probe(&running.url, 1).await;
}

#[tokio::test]
async fn connections_past_the_cap_are_refused_at_once_and_idle_ones_close_at_the_header_time() {
    let running = start(HttpLimits {
        max_connections: 4,
        max_concurrent: 4,
        header_time: Duration::from_secs(2),
        ..HttpLimits::default()
    })
    .await;
    // Four connections that hold a slot: two say nothing, one sends half a request line (a
    // half-open client that went away), one is a kept-alive connection after a full request.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(&running.address).await.unwrap());
    }
    let mut half = TcpStream::connect(&running.address).await.unwrap();
    half.write_all(b"POST /mc").await.unwrap();
    held.push(half);
    let mut kept = TcpStream::connect(&running.address).await.unwrap();
    kept.write_all(&raw_call(&running.address, 1, "echo_text"))
        .await
        .unwrap();
    let mut head = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), kept.read(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert!(
        head[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head[..n])
    );
    held.push(kept);
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The fifth is answered 503 at once, saying why.
    let mut fifth = TcpStream::connect(&running.address).await.unwrap();
    fifth
        .write_all(&raw_call(&running.address, 2, "echo_text"))
        .await
        .unwrap();
    let (answer, closed) = read_until_closed(&mut fifth, Duration::from_secs(3), 64 * 1024).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(closed, "the refused connection was left open: {answer}");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("at most 4 connections"), "{answer}");

    // Every held connection is closed by the header time (2 s), not left to its client.
    let started = Instant::now();
    for mut stream in held {
        let (_, closed) = read_until_closed(&mut stream, Duration::from_secs(5), 64 * 1024).await;
        assert!(
            closed,
            "a held connection was still open after {:?}",
            started.elapsed()
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    probe(&running.url, 3).await;
}

#[tokio::test]
async fn an_http2_preface_is_closed_without_being_served_and_the_server_keeps_serving() {
    let running = start(HttpLimits::default()).await;
    let mut h2 = TcpStream::connect(&running.address).await.unwrap();
    // The prior-knowledge preface and an empty SETTINGS frame.
    h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let (answer, closed) = read_until_closed(&mut h2, Duration::from_secs(3), 4096).await;
    assert!(closed, "the HTTP/2 connection was left open");
    // Nothing that an HTTP/2 client could read as a served request.
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 "),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // An h2c upgrade request is served as HTTP/1.1, not upgraded.
    let mut upgrade = TcpStream::connect(&running.address).await.unwrap();
    let mut request = raw_call(&running.address, 1, "echo_text");
    let at = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    request.splice(
        at + 2..at + 2,
        b"connection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQAAP__\r\n"
            .iter()
            .copied(),
    );
    upgrade.write_all(&request).await.unwrap();
    let mut head = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), upgrade.read(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert!(
        head[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head[..n])
    );
    probe(&running.url, 2).await;
}

/// Opens a 2025-11-25 session: its id.
async fn open_session(http: &reqwest::Client, url: &str) -> String {
    let init = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}
    });
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let _ = response.text().await.unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(initialized.to_string())
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    session
}

fn get_stream(http: &reqwest::Client, url: &str, session: &str) -> reqwest::RequestBuilder {
    http.get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
}

#[tokio::test]
async fn a_get_stream_ends_at_the_stream_time_and_an_abandoned_one_holds_nothing() {
    let running = start(HttpLimits {
        stream_time: Duration::from_secs(2),
        ..HttpLimits::default()
    })
    .await;
    support::install_tls_provider();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let session = open_session(&http, &running.url).await;

    // A stream that is read: it ends by the stream time (rmcp's pings alone would keep it
    // open for ever).
    let started = Instant::now();
    let mut stream = get_stream(&http, &running.url, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let ended = tokio::time::timeout(Duration::from_secs(8), async {
        while let Ok(Some(_)) = stream.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "the GET stream was still open after 8 s");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // A stream opened and abandoned (its connection dropped unread): the session opens another
    // and keeps serving calls.
    let abandoned = get_stream(&http, &running.url, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(abandoned.status().as_u16(), 200);
    drop(abandoned);
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let again = get_stream(&http, &running.url, &session)
            .send()
            .await
            .unwrap();
        if again.status().as_u16() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no new stream after an abandoned one: {}",
            again.status()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    probe(&running.url, 1).await;
}

/// 4 clients each pipeline 32 calls of 256 KiB answers (32 MiB asked for, more than the
/// kernel's socket buffers hold: a small receive window, and at most 4 MiB queued to send)
/// and read nothing. Every connection must have been reset after the stall time (2 s); the
/// peak resident memory meanwhile (from `peak`) is returned (the clients hold nothing).
async fn flood_unread(address: &str, mut peak: u64) -> u64 {
    let (clients, calls) = (4, 32u64);
    let mut unread = Vec::new();
    for _ in 0..clients {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(16 * 1024).unwrap();
        let mut stream = socket.connect(address.parse().unwrap()).await.unwrap();
        let mut all = Vec::new();
        for id in 0..calls {
            all.extend(raw_call(address, id + 1, "big_text"));
        }
        stream.write_all(&all).await.unwrap();
        unread.push(stream);
    }
    // The server writes until the kernel's buffers are full, then stalls.
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        peak = peak.max(rss_kib());
    }
    // Reading now finds an end after what the small receive window held, well short of the
    // answers asked for (a server still writing would send them all, then wait for more).
    let asked = calls as usize * BIG;
    for mut stream in unread {
        let (got, closed) = read_until_closed(&mut stream, Duration::from_secs(5), asked).await;
        assert!(closed, "a client that read nothing was still connected");
        assert!(
            got.len() < asked / 4,
            "{} bytes were sent: nothing was cut",
            got.len()
        );
    }
    peak
}

#[tokio::test]
async fn clients_that_never_read_their_answers_are_cut_at_the_write_stall_time_in_bounded_memory() {
    let running = start(HttpLimits {
        write_stall_time: Duration::from_secs(2),
        ..HttpLimits::default()
    })
    .await;
    // Warm up: one big answer read in full, so the allocator's first growth is not counted.
    let mut warm = TcpStream::connect(&running.address).await.unwrap();
    warm.write_all(&raw_call(&running.address, 1, "big_text"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    while seen.len() < BIG {
        let n = tokio::time::timeout(Duration::from_secs(5), warm.read(&mut buffer))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0);
        seen.extend_from_slice(&buffer[..n]);
    }
    drop(warm);
    let before = rss_kib();

    // Two rounds of the same flood: the first may grow the allocator's pools; the second
    // must find them reusable, or the server keeps something of every unread answer.
    let first = flood_unread(&running.address, before).await;
    let second = flood_unread(&running.address, first).await;
    let mib = |kib: u64| kib / 1024;
    eprintln!(
        "resident memory: before {} MiB, peak in round 1 {} MiB, in round 2 {} MiB",
        mib(before),
        mib(first),
        mib(second)
    );
    assert!(
        mib(first.saturating_sub(before)) < 128,
        "resident memory grew {} MiB in the first round",
        mib(first.saturating_sub(before))
    );
    assert!(
        mib(second.saturating_sub(first)) < 16,
        "resident memory kept growing: {} MiB more in the second round",
        mib(second.saturating_sub(first))
    );
    probe(&running.url, 99).await;
}

#[test]
fn limits_of_zero_are_refused_with_their_name() {
    let cases = [
        (
            "max_connections",
            HttpLimits {
                max_connections: 0,
                ..HttpLimits::default()
            },
        ),
        (
            "max_concurrent",
            HttpLimits {
                max_concurrent: 0,
                ..HttpLimits::default()
            },
        ),
        (
            "header_time",
            HttpLimits {
                header_time: Duration::ZERO,
                ..HttpLimits::default()
            },
        ),
        (
            "body_time",
            HttpLimits {
                body_time: Duration::ZERO,
                ..HttpLimits::default()
            },
        ),
        (
            "stream_time",
            HttpLimits {
                stream_time: Duration::ZERO,
                ..HttpLimits::default()
            },
        ),
        (
            "write_stall_time",
            HttpLimits {
                write_stall_time: Duration::ZERO,
                ..HttpLimits::default()
            },
        ),
    ];
    assert!(HttpLimits::default().check().is_ok());
    for (name, limits) in cases {
        let why = limits.check().unwrap_err();
        assert!(why.contains(name), "{name}: {why}");
    }
}
