//! Shared pieces of the MCP benchmarks: the check that a `tools/call` answer is a real success
//! (JSON or SSE body), and latency percentiles.
//!
//! The benchmarks themselves are `scripts/bench-mcp.sh` (Streamable HTTP) and
//! `scripts/bench-mcp-stdio.sh` (stdio); the binaries in `src/bin/` are their load clients
//! (`mcp-load`, `mcp-stdio-load`) and their floor server (`bare-rmcp-server`, HTTP or
//! `--stdio`). Nothing here opens a socket.

use serde::Deserialize;

/// What both load clients take on their command line besides where the server is: the
/// window, the bounds, and the call they send.
#[derive(clap::Args)]
pub struct LoadArgs {
    /// The MCP revision to speak: 2025-11-25 (initialize first) or 2026-07-28 (stateless,
    /// `_meta` on every request).
    #[arg(long, value_parser = ["2025-11-25", "2026-07-28"])]
    pub revision: String,
    /// Seconds of load before measuring (0 to 600).
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Seconds measured (0.1 to 600).
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Stop after this many requests in all.
    #[arg(long, default_value_t = 5_000_000)]
    pub max_requests: u64,
    /// How long to wait for any one answer, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// The tool to call.
    #[arg(long, default_value = "books_get")]
    pub tool: String,
    /// Its arguments, as JSON.
    #[arg(long, default_value = r#"{"ids":[1]}"#)]
    pub arguments: String,
}

impl LoadArgs {
    /// Whether the revision is the stateless one (2026-07-28).
    pub fn stateless(&self) -> bool {
        self.revision == "2026-07-28"
    }

    /// The `params` of every `tools/call`: the tool, its arguments and, on the stateless
    /// revision, the `_meta` that stands in for `initialize` (`client_info` names the client).
    /// Refuses arguments that are not JSON and a window out of range.
    pub fn call_params(
        &self,
        client_info: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        if !(0.0..=600.0).contains(&self.warmup) || !(0.1..=600.0).contains(&self.duration) {
            return Err("--warmup must be 0..=600 s and --duration 0.1..=600 s".into());
        }
        let arguments: serde_json::Value = serde_json::from_str(&self.arguments)
            .map_err(|e| format!("--arguments is not JSON: {e}"))?;
        let mut params = serde_json::json!({"name": self.tool, "arguments": arguments});
        if self.stateless() {
            params["_meta"] = serde_json::json!({
                "io.modelcontextprotocol/protocolVersion": self.revision,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": client_info,
            });
        }
        Ok(params)
    }
}

/// What a load run saw: every measured call's latency, the calls that succeeded and failed,
/// and the first failure's reason.
#[derive(Default)]
pub struct Outcome {
    pub latencies_us: Vec<u32>,
    pub ok: u64,
    pub failed: u64,
    pub first_failure: Option<String>,
}

impl Outcome {
    pub fn fail(&mut self, why: String) {
        self.failed += 1;
        if self.first_failure.is_none() {
            self.first_failure = Some(why);
        }
    }

    /// A measured call that succeeded, sent at `sent` and answered at `done`.
    pub fn succeeded(&mut self, sent: std::time::Instant, done: std::time::Instant) {
        self.ok += 1;
        let micros = done.duration_since(sent).as_micros();
        self.latencies_us
            .push(u32::try_from(micros).unwrap_or(u32::MAX));
    }

    /// The output line's figures after `conns=..`: `ok= failed= rps= p50_us= p99_us=
    /// max_us=` over a window of `duration_s`.
    pub fn summary(mut self, duration_s: f64) -> (String, Option<String>) {
        self.latencies_us.sort_unstable();
        let line = format!(
            "ok={} failed={} rps={:.1} p50_us={} p99_us={} max_us={}",
            self.ok,
            self.failed,
            self.ok as f64 / duration_s,
            percentile(&self.latencies_us, 0.50),
            percentile(&self.latencies_us, 0.99),
            self.latencies_us.last().copied().unwrap_or(0),
        );
        (line, self.first_failure)
    }
}

#[derive(Deserialize)]
struct Envelope {
    id: Option<serde_json::Value>,
    result: Option<ToolResult>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ToolResult {
    #[serde(rename = "isError", default)]
    is_error: bool,
    #[serde(default)]
    content: Vec<serde_json::Value>,
}

/// Checks one HTTP answer to a `tools/call` with JSON-RPC id `id`: the body is either
/// `application/json` (one JSON-RPC message) or `text/event-stream` (the message with our id
/// in some `data:` line; other events, such as priming events, are skipped). Success means a
/// result that is not `isError` and carries at least one content block.
pub fn check_tool_call(content_type: &str, body: &[u8], id: u64) -> Result<(), String> {
    if content_type.starts_with("application/json") {
        return check_message(body, id).unwrap_or_else(|| Err(snippet("no response", body)));
    }
    if content_type.starts_with("text/event-stream") {
        let text = std::str::from_utf8(body).map_err(|_| "SSE body is not UTF-8".to_string())?;
        return text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .find_map(|data| check_message(data.trim().as_bytes(), id))
            .unwrap_or_else(|| Err(snippet("no response with our id in the SSE stream", body)));
    }
    Err(snippet(
        &format!("unexpected content-type `{content_type}`"),
        body,
    ))
}

/// The `result` of the JSON-RPC answer with id `id` in a JSON or SSE body (for `initialize`).
pub fn result_of(content_type: &str, body: &[u8], id: u64) -> Result<serde_json::Value, String> {
    let pick = |message: &[u8]| -> Option<Result<serde_json::Value, String>> {
        let mut value: serde_json::Value = serde_json::from_slice(message).ok()?;
        if value.get("id").and_then(serde_json::Value::as_u64) != Some(id) {
            return None;
        }
        Some(match value.get_mut("result") {
            Some(result) => Ok(result.take()),
            None => Err(snippet("no result", message)),
        })
    };
    if content_type.starts_with("application/json") {
        return pick(body).unwrap_or_else(|| Err(snippet("no response", body)));
    }
    let text = String::from_utf8_lossy(body);
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .find_map(|data| pick(data.trim().as_bytes()))
        .unwrap_or_else(|| Err(snippet("no response with our id", body)))
}

/// `None` when `message` is not the answer to `id` (another message, or not JSON-RPC).
fn check_message(message: &[u8], id: u64) -> Option<Result<(), String>> {
    let envelope: Envelope = serde_json::from_slice(message).ok()?;
    if envelope.id.as_ref().and_then(serde_json::Value::as_u64) != Some(id) {
        return None;
    }
    Some(match (envelope.error, envelope.result) {
        (Some(error), _) => Err(format!("JSON-RPC error: {error}")),
        (None, Some(result)) if result.is_error => Err(snippet("tool isError", message)),
        (None, Some(result)) if result.content.is_empty() => {
            Err(snippet("result without content", message))
        }
        (None, Some(_)) => Ok(()),
        (None, None) => Err(snippet("neither result nor error", message)),
    })
}

fn snippet(what: &str, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let cut: String = text.chars().take(300).collect();
    format!("{what}: {cut}")
}

/// The `q`-quantile (0..=1) of `sorted` by nearest rank; 0 for an empty slice.
pub fn percentile(sorted: &[u32], q: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_success_and_failures() {
        let ok = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"{}"}]}}"#;
        assert_eq!(check_tool_call("application/json", ok, 7), Ok(()));
        assert!(check_tool_call("application/json", ok, 8).is_err());
        let tool_err =
            br#"{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[{"type":"text"}]}}"#;
        assert!(check_tool_call("application/json", tool_err, 7).is_err());
        let rpc_err = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"x"}}"#;
        let verdict = check_tool_call("application/json; charset=utf-8", rpc_err, 7);
        assert!(verdict.is_err_and(|e| e.contains("-32602")));
        assert!(check_tool_call("text/html", ok, 7).is_err());
    }

    #[test]
    fn sse_skips_priming_and_other_messages() {
        let body = "id: 0\nretry: 3000\ndata: \n\n\
                    event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
                    event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n";
        assert_eq!(
            check_tool_call("text/event-stream", body.as_bytes(), 3),
            Ok(())
        );
        assert!(check_tool_call("text/event-stream", b"data: \n\n", 3).is_err());
    }

    #[test]
    fn percentiles() {
        let sorted: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&sorted, 0.5), 50);
        assert_eq!(percentile(&sorted, 0.99), 99);
        assert_eq!(percentile(&[5], 0.99), 5);
        assert_eq!(percentile(&[], 0.5), 0);
    }
}
