//! The HTTP front of `serve_http` on a real listener on 127.0.0.1: what bad input, too much
//! input, too many requests, a request that takes too long, and shutdown get, and that the
//! server keeps serving after each. Each test is named after what it prevents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::tool::{Tool, ToolBuilder, ToolOutput};
use toolgate_core::{Caller, Dispatcher, Effect, Principal, Registry, Risk};
use toolgate_mcp::{HttpLimits, McpServer};

/// What the test holds of the `wait_gate` tool: it answers once `open` is notified, and
/// `cancelled` says a call was dropped before it answered.
#[derive(Clone, Default)]
struct Gate {
    open: Arc<tokio::sync::Notify>,
    cancelled: Arc<AtomicBool>,
    entered: Arc<tokio::sync::Notify>,
}

struct SetOnDrop(Arc<AtomicBool>, bool);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        if !self.1 {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

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

fn gate_tool(gate: Gate) -> Tool {
    ToolBuilder::<Value>::from_schema(
        "wait_gate",
        1,
        json!({"type": "object", "additionalProperties": false, "properties": {}}),
    )
    .describe(
        "Waits for the test to open the gate.",
        "testing.",
        None,
        "opened.",
    )
    .policy(Risk::Low, Effect::Read, "It changes nothing.")
    .deadline(Duration::from_secs(60))
    .read(move |_ctx, _args: Value| {
        let gate = gate.clone();
        async move {
            let mut guard = SetOnDrop(gate.cancelled.clone(), false);
            gate.entered.notify_one();
            gate.open.notified().await;
            guard.1 = true;
            Ok(ToolOutput::new(json!({"opened": true})))
        }
    })
    .unwrap()
}

fn overrun_tool() -> Tool {
    ToolBuilder::<Value>::from_schema(
        "overrun",
        1,
        json!({"type": "object", "additionalProperties": false, "properties": {}}),
    )
    .describe("Never finishes in time.", "testing.", None, "nothing.")
    .policy(Risk::Low, Effect::Read, "It changes nothing.")
    .deadline(Duration::from_millis(50))
    .read(|_ctx, _args: Value| async move {
        std::future::pending::<()>().await;
        Ok(ToolOutput::new(json!({})))
    })
    .unwrap()
}

struct Running {
    url: String,
    gate: Gate,
    spawned: support::Spawned,
}

impl Running {
    /// A `wait_gate` call in the background; it answers once the gate opens.
    fn call_the_gate(&self, http: &reqwest::Client) -> tokio::task::JoinHandle<(u16, Value)> {
        let (http, url) = (http.clone(), self.url.clone());
        tokio::spawn(async move {
            support::call(
                &http,
                &url,
                &support::tools_call(1, "wait_gate", json!({}), json!({})),
            )
            .await
        })
    }
}

async fn start(limits: HttpLimits) -> Running {
    let gate = Gate::default();
    let registry = Arc::new(
        Registry::new(vec![echo_tool(), gate_tool(gate.clone()), overrun_tool()]).unwrap(),
    );
    let principal = Principal::local("tester", &[]).with_catalogue(registry.names());
    let caller = Caller::new(Dispatcher::new(Arc::clone(&registry)).unwrap());
    let server = McpServer::serving(&registry, caller, principal, "http-front-test");
    let spawned = support::spawn(server, limits).await;
    Running {
        url: spawned.url.clone(),
        gate,
        spawned,
    }
}

async fn echo_works(http: &reqwest::Client, url: &str, id: u64) {
    let (status, message) = support::call(
        http,
        url,
        &support::tools_call(id, "echo_text", json!({"text": "still here"}), json!({})),
    )
    .await;
    assert_eq!(status, 200, "{message}");
    assert_eq!(message["id"], id);
    assert_eq!(message["result"]["isError"], false, "{message}");
    assert!(message.to_string().contains("still here"), "{message}");
}

fn error_code(message: &Value) -> i64 {
    message["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not a JSON-RPC error: {message}"))
}

#[tokio::test]
async fn bad_input_gets_its_error_and_the_server_keeps_serving() {
    let running = start(HttpLimits::default()).await;
    let http = support::http();
    let url = &running.url;

    // Malformed JSON: a JSON-RPC parse error, not a plain-text 415.
    let response = support::post(
        &http,
        url,
        "tools/call",
        Some("echo_text"),
        "{\"jsonrpc\": \"2.0\", ",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let message = support::message_of(&response.text().await.unwrap());
    assert_eq!(error_code(&message), -32700, "{message}");
    echo_works(&http, url, 1).await;

    // A 10 MB body: refused at the cap, with a JSON-RPC body naming it.
    let huge = support::tools_call(
        2,
        "echo_text",
        json!({"text": "x".repeat(10_000_000)}),
        json!({}),
    );
    let response = support::post(
        &http,
        url,
        "tools/call",
        Some("echo_text"),
        huge.to_string(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    // The rest of the body is never read: a client's pool must not reuse the connection.
    assert_eq!(
        response.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"close"[..]),
        "a 413 must close the connection it did not read to the end"
    );
    let message = support::message_of(&response.text().await.unwrap());
    assert_eq!(error_code(&message), -32600);
    assert!(message.to_string().contains("1048576 bytes"), "{message}");
    echo_works(&http, url, 3).await;

    // An unknown method.
    let unknown = json!({
        "jsonrpc": "2.0", "id": 4, "method": "tools/frobnicate",
        "params": {"_meta": support::modern_meta(false)}
    });
    let response = support::post(&http, url, "tools/frobnicate", None, unknown.to_string())
        .send()
        .await
        .unwrap();
    let message = support::message_of(&response.text().await.unwrap());
    assert_eq!(error_code(&message), -32601, "{message}");
    echo_works(&http, url, 5).await;

    // Bad arguments: a tool error the model can act on, not a protocol error.
    let (_, message) = support::call(
        &http,
        url,
        &support::tools_call(6, "echo_text", json!({"text": 7}), json!({})),
    )
    .await;
    assert_eq!(message["result"]["isError"], true, "{message}");
    assert_eq!(
        message["result"]["structuredContent"]["code"],
        "invalid_argument"
    );
    echo_works(&http, url, 7).await;

    // A tool that does not exist: a protocol error.
    let (_, message) = support::call(
        &http,
        url,
        &support::tools_call(8, "no_such_tool", json!({}), json!({})),
    )
    .await;
    assert_eq!(error_code(&message), -32602, "{message}");
    echo_works(&http, url, 9).await;

    // Another path, and a Host a DNS-rebinding page would send.
    let response = http
        .post(url.replace("/mcp", "/other"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let response = support::post(&http, url, "tools/call", Some("echo_text"), "{}")
        .header("host", "attacker.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    let response = support::post(&http, url, "tools/call", Some("echo_text"), "{}")
        .header("origin", "http://attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    echo_works(&http, url, 10).await;
}

#[tokio::test]
async fn one_request_over_the_concurrency_cap_is_refused_at_once_not_queued() {
    let running = start(HttpLimits {
        max_concurrent: 1,
        ..HttpLimits::default()
    })
    .await;
    let http = support::http();
    let waiting = running.call_the_gate(&http);
    running.gate.entered.notified().await;
    let response = support::post(
        &http,
        &running.url,
        "tools/call",
        Some("echo_text"),
        support::tools_call(2, "echo_text", json!({"text": "a"}), json!({})).to_string(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    let message = support::message_of(&response.text().await.unwrap());
    assert!(
        message["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 1"),
        "{message}"
    );

    running.gate.open.notify_one();
    let (_, first) = waiting.await.unwrap();
    assert_eq!(first["result"]["isError"], false, "{first}");
    echo_works(&http, &running.url, 3).await;
}

#[tokio::test]
async fn a_request_past_the_time_limit_gets_an_error_and_its_call_is_cancelled() {
    let running = start(HttpLimits {
        request_time: Duration::from_millis(300),
        ..HttpLimits::default()
    })
    .await;
    let http = support::http();
    let (_, message) = support::call(
        &http,
        &running.url,
        &support::tools_call(1, "wait_gate", json!({}), json!({})),
    )
    .await;
    assert_eq!(message["id"], 1);
    assert_eq!(error_code(&message), -32603, "{message}");
    assert!(message.to_string().contains("limit"), "{message}");
    // The dispatcher's call was dropped, not left running.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !running.gate.cancelled.load(Ordering::SeqCst) {
        assert!(
            std::time::Instant::now() < deadline,
            "the timed-out call kept running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    echo_works(&http, &running.url, 2).await;
}

#[tokio::test]
async fn shutdown_lets_the_call_in_flight_finish_and_then_stops() {
    let mut running = start(HttpLimits::default()).await;
    let http = support::http();
    let waiting = running.call_the_gate(&http);
    running.gate.entered.notified().await;
    running.spawned.stop.take().unwrap().send(()).unwrap();
    // Shutdown has begun and waits for the call; new connections are no longer accepted.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !running.spawned.served.is_finished(),
        "shutdown did not wait for the call in flight"
    );
    assert!(
        support::http()
            .post(&running.url)
            .body("{}")
            .send()
            .await
            .is_err(),
        "a new connection was accepted during shutdown"
    );
    running.gate.open.notify_one();
    let (_, first) = waiting.await.unwrap();
    assert_eq!(first["result"]["isError"], false, "{first}");
    assert!(!running.gate.cancelled.load(Ordering::SeqCst));
    tokio::time::timeout(Duration::from_secs(20), running.spawned.served)
        .await
        .expect("the server stops after draining")
        .unwrap()
        .unwrap();
}

async fn wait_until_cancelled(gate: &Gate) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !gate.cancelled.load(Ordering::SeqCst) {
        assert!(
            std::time::Instant::now() < deadline,
            "the abandoned call kept running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_stream_the_host_closes_cancels_its_call() {
    let running = start(HttpLimits::default()).await;
    support::install_tls_provider();
    // A host that closes the stream closes its connection: no pooled connection stays open.
    let host = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let message = support::tools_call(1, "wait_gate", json!({}), json!({}));
    // The 2026-07-28 reply starts only with the result, so the host is still waiting for the
    // response headers when it gives up.
    let waiting = {
        let url = running.url.clone();
        tokio::spawn(async move {
            support::post(
                &host,
                &url,
                "tools/call",
                Some("wait_gate"),
                message.to_string(),
            )
            .send()
            .await
        })
    };
    running.gate.entered.notified().await;
    waiting.abort();
    wait_until_cancelled(&running.gate).await;
    echo_works(&support::http(), &running.url, 2).await;
}

#[tokio::test]
async fn notifications_cancelled_in_a_session_cancels_its_call() {
    use rmcp::ServiceExt;
    use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
    use rmcp::service::PeerRequestOptions;

    let running = start(HttpLimits::default()).await;
    support::install_tls_provider();
    let client = ()
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            running.url.clone(),
        ))
        .await
        .unwrap();
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(CallToolRequestParams::new("wait_gate"))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    running.gate.entered.notified().await;
    handle
        .cancel(Some("the user pressed stop".into()))
        .await
        .unwrap();
    wait_until_cancelled(&running.gate).await;
}

#[tokio::test]
async fn the_tool_list_carries_cache_hints_only_where_the_revision_has_them() {
    let running = start(HttpLimits::default()).await;
    let http = support::http();
    let list = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": support::modern_meta(false)}
    });
    let response = support::post(&http, &running.url, "tools/list", None, list.to_string())
        .send()
        .await
        .unwrap();
    let message = support::message_of(&response.text().await.unwrap());
    let result = &message["result"];
    assert_eq!(result["ttlMs"], 300_000, "{message}");
    assert_eq!(result["cacheScope"], "private");
    let names: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo_text", "overrun", "wait_gate"]);
    assert_eq!(result["tools"][0]["annotations"]["readOnlyHint"], true);

    use rmcp::ServiceExt;
    let legacy = ()
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            running.url.clone(),
        ))
        .await
        .unwrap();
    let listed = legacy.list_tools(None).await.unwrap();
    assert_eq!(listed.ttl_ms, None);
    assert_eq!(listed.cache_scope, None);
    assert_eq!(listed.tools.len(), 3);
}

#[tokio::test]
async fn a_tool_past_its_deadline_still_gets_an_answer_to_the_host() {
    let running = start(HttpLimits::default()).await;
    let http = support::http();
    let (_, message) = support::call(
        &http,
        &running.url,
        &support::tools_call(1, "overrun", json!({}), json!({})),
    )
    .await;
    assert_eq!(message["result"]["isError"], true, "{message}");
    assert_eq!(
        message["result"]["structuredContent"]["code"],
        "deadline_exceeded"
    );
    echo_works(&http, &running.url, 2).await;
}
