//! Raw Streamable HTTP for the tests that need to see the wire: one JSON-RPC POST as a
//! 2026-07-28 host sends it (per-request `_meta`, the protocol and SEP-2243 headers), and the
//! JSON-RPC message read back from a plain JSON or server-sent-events body.
#![allow(dead_code)]

pub mod tool_results;

use serde_json::{Value, json};

/// The `_meta` a 2026-07-28 request carries; `elicitation` declares that the host can ask.
pub fn modern_meta(elicitation: bool) -> Value {
    let capabilities = if elicitation {
        json!({"elicitation": {}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}
    })
}

/// A 2026-07-28 `tools/call` with JSON-RPC id `id`; `extra` is merged into its params.
pub fn tools_call(id: u64, name: &str, arguments: Value, extra: Value) -> Value {
    let mut params = json!({"name": name, "arguments": arguments, "_meta": modern_meta(true)});
    if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
        p.extend(e);
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// A POST of `body` to `url` with the headers a 2026-07-28 host sends for `method` (and
/// `name`, the tool, for a `tools/call`).
pub fn post(
    http: &reqwest::Client,
    url: &str,
    method: &str,
    name: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::RequestBuilder {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    request.body(body)
}

/// Sends a `tools/call` and returns its status and JSON-RPC message.
pub async fn call(http: &reqwest::Client, url: &str, message: &Value) -> (u16, Value) {
    let name = message["params"]["name"].as_str();
    let response = post(http, url, "tools/call", name, message.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, message_of(&response.text().await.unwrap()))
}

/// The JSON-RPC message in a response body, plain or as server-sent events.
pub fn message_of(body: &str) -> Value {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .chain(std::iter::once(body.trim()))
        .find_map(|d| {
            serde_json::from_str::<Value>(d)
                .ok()
                .filter(|v| v.get("jsonrpc").is_some())
        })
        .unwrap_or_else(|| panic!("no JSON-RPC message in {body:?}"))
}

/// reqwest is built without a default TLS provider; any client of it (ours, rmcp's) needs one
/// installed even for plain HTTP.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An HTTP client for plain-HTTP tests.
pub fn http() -> reqwest::Client {
    install_tls_provider();
    reqwest::Client::new()
}

/// A server under test on 127.0.0.1: its endpoint, and the sender that starts its shutdown
/// (dropping it does too).
pub struct Spawned {
    pub url: String,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub served: tokio::task::JoinHandle<Result<(), toolgate_mcp::ServeError>>,
}

/// Serves `server` with `limits` on a fresh loopback port.
pub async fn spawn(server: toolgate_mcp::McpServer, limits: toolgate_mcp::HttpLimits) -> Spawned {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(toolgate_mcp::serve_http(server, listener, limits, async {
        let _ = stopped.await;
    }));
    Spawned {
        url,
        stop: Some(stop),
        served,
    }
}

/// An egress allowlist for plain-http servers of this machine on `ports` (a test's
/// authorization server, key-set server or upstream), private addresses allowed explicitly.
pub fn loopback_http_allowlist(ports: &[u16]) -> toolgate_egress::EgressConfig {
    toolgate_egress::EgressConfig {
        allow: vec![toolgate_egress::AllowEntry {
            host: "127.0.0.1".into(),
            schemes: vec!["http".into()],
            ports: Some(ports.to_vec()),
            allow_private: true,
        }],
        ..toolgate_egress::EgressConfig::default()
    }
}
