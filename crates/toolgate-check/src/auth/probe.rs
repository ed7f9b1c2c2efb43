//! One request as a case presents it: a raw HTTP/1.1 exchange (hyper's client connection, so
//! that the suite decides every header, two `Authorization` headers included) with the MCP
//! endpoint, and the answer read back: status, `WWW-Authenticate`, and the JSON-RPC message of a
//! plain JSON or server-sent-events body.
//!
//! Guarantees: one connection per request, closed after it; the whole exchange ends within
//! [`LIMIT`] or is an error.

use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, WWW_AUTHENTICATE};
use http::{HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::case::{Presentation, Request as McpRequest};

/// The longest one exchange may take.
pub const LIMIT: Duration = Duration::from_secs(15);

/// What came back.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub challenge: Option<String>,
    /// The JSON-RPC message, when the body holds one.
    pub message: Option<Value>,
}

impl Answer {
    /// The names of the tools a `tools/list` result lists.
    pub fn listed(&self) -> Option<Vec<String>> {
        let tools = self.message.as_ref()?.get("result")?.get("tools")?;
        Some(
            tools
                .as_array()?
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
                .collect(),
        )
    }

    /// Whether the message is a JSON-RPC result (not an error).
    pub fn has_result(&self) -> bool {
        self.message
            .as_ref()
            .is_some_and(|m| m.get("result").is_some())
    }
}

/// The JSON-RPC body and the headers a host sends for `request` (a 2025-11-25 `initialize`,
/// else 2026-07-28 requests with their per-request `_meta` and headers).
pub fn body_of(request: &McpRequest) -> (Value, Vec<(&'static str, String)>) {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-check", "version": "0"}
    });
    match request {
        McpRequest::Initialize => (
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "toolgate-check", "version": "0"}
            }}),
            vec![],
        ),
        McpRequest::List { .. } => (
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                   "params": {"_meta": meta}}),
            vec![
                ("mcp-protocol-version", "2026-07-28".into()),
                ("mcp-method", "tools/list".into()),
            ],
        ),
        McpRequest::Call { tool, arguments } => (
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments, "_meta": meta}}),
            vec![
                ("mcp-protocol-version", "2026-07-28".into()),
                ("mcp-method", "tools/call".into()),
                ("mcp-name", tool.clone()),
            ],
        ),
    }
}

/// The path (with query) and the `Authorization` values for `token` presented as `present`.
pub fn presented(present: Presentation, token: &str) -> (String, Vec<String>) {
    let query = || {
        let encoded: String = url_encoded(token);
        format!("/mcp?access_token={encoded}")
    };
    match present {
        Presentation::Bearer => ("/mcp".into(), vec![format!("Bearer {token}")]),
        Presentation::LowercaseScheme => ("/mcp".into(), vec![format!("bearer {token}")]),
        Presentation::NoScheme => ("/mcp".into(), vec![token.to_string()]),
        Presentation::Basic => (
            "/mcp".into(),
            vec![format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{token}:"))
            )],
        ),
        Presentation::Query => (query(), vec![]),
        Presentation::QueryAndHeader => (query(), vec![format!("Bearer {token}")]),
        Presentation::TwoHeaders => (
            "/mcp".into(),
            vec![format!("Bearer {token}"), format!("Bearer {token}")],
        ),
        Presentation::None => ("/mcp".into(), vec![]),
    }
}

fn url_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// Sends `request` to the server at `address` with `token` presented as `present`.
pub async fn send(
    address: std::net::SocketAddr,
    request: &McpRequest,
    present: Presentation,
    token: &str,
) -> Result<Answer, String> {
    tokio::time::timeout(LIMIT, exchange(address, request, present, token))
        .await
        .map_err(|_| format!("no answer within {} s", LIMIT.as_secs()))?
}

async fn exchange(
    address: std::net::SocketAddr,
    request: &McpRequest,
    present: Presentation,
    token: &str,
) -> Result<Answer, String> {
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|e| format!("cannot connect to {address}: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP handshake with {address}: {e}"))?;
    let driven = tokio::spawn(connection);
    let (body, headers) = body_of(request);
    let (path, authorizations) = presented(present, token);
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(HOST, address.to_string())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream");
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    let mut http_request = builder
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| format!("cannot build the request: {e}"))?;
    for value in authorizations {
        let value = HeaderValue::from_str(&value)
            .map_err(|_| "the token cannot be sent in a header".to_string())?;
        http_request.headers_mut().append(AUTHORIZATION, value);
    }
    let response = sender
        .send_request(http_request)
        .await
        .map_err(|e| format!("the request failed: {e}"))?;
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get(WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("the response body could not be read: {e}"))?
        .to_bytes();
    drop(sender);
    driven.abort();
    Ok(Answer {
        status,
        challenge,
        message: message_of(&String::from_utf8_lossy(&bytes)),
    })
}

/// The JSON-RPC message in a response body, plain or as server-sent events.
pub fn message_of(body: &str) -> Option<Value> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_presentation_puts_the_token_where_it_says() {
        let cases = [
            (Presentation::Bearer, "/mcp", vec!["Bearer t.k"]),
            (Presentation::LowercaseScheme, "/mcp", vec!["bearer t.k"]),
            (Presentation::NoScheme, "/mcp", vec!["t.k"]),
            (Presentation::Basic, "/mcp", vec!["Basic dC5rOg=="]),
            (Presentation::Query, "/mcp?access_token=t.k", vec![]),
            (
                Presentation::QueryAndHeader,
                "/mcp?access_token=t.k",
                vec!["Bearer t.k"],
            ),
            (
                Presentation::TwoHeaders,
                "/mcp",
                vec!["Bearer t.k", "Bearer t.k"],
            ),
            (Presentation::None, "/mcp", vec![]),
        ];
        for (present, path, headers) in cases {
            assert_eq!(
                presented(present, "t.k"),
                (
                    path.to_string(),
                    headers.into_iter().map(String::from).collect::<Vec<_>>()
                ),
                "{present:?}"
            );
        }
        assert_eq!(
            presented(Presentation::Query, "a b+").0,
            "/mcp?access_token=a%20b%2B"
        );
    }

    #[test]
    fn the_message_is_found_in_json_and_in_server_sent_events() {
        let sse = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        assert_eq!(message_of(sse).unwrap()["id"], 1);
        assert_eq!(
            message_of("{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{}}").unwrap()["id"],
            2
        );
        assert!(message_of("not json").is_none());
    }
}
