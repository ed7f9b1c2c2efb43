//! The bridge between a script and the tools it may call: one JSON line per call, one reply
//! line per call, each frame bounded before it is read (an over-long one closes the bridge).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use toolgate_core::BoxFuture;

/// What a script's tool call gets back over the bridge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BridgeReply {
    Ok {
        ok: bool,
        result: Value,
    },
    Err {
        ok: bool,
        code: String,
        message: String,
        retryable: bool,
    },
}

impl BridgeReply {
    pub fn ok(result: Value) -> Self {
        BridgeReply::Ok { ok: true, result }
    }

    pub fn error(code: &str, message: impl Into<String>, retryable: bool) -> Self {
        BridgeReply::Err {
            ok: false,
            code: code.to_owned(),
            message: message.into(),
            retryable,
        }
    }
}

/// Where a script's tool calls go (the dispatcher, for `code_execution`).
pub trait ToolBridge: Send + Sync {
    fn call(&self, tool: String, arguments: Value) -> BoxFuture<'_, BridgeReply>;
}

/// A bridge that refuses every call (a run that offers no tools).
pub struct NoTools;

impl ToolBridge for NoTools {
    fn call(&self, tool: String, _arguments: Value) -> BoxFuture<'_, BridgeReply> {
        Box::pin(async move {
            BridgeReply::error(
                "not_found",
                format!("no tools are offered here ({tool})"),
                false,
            )
        })
    }
}

/// The host's end of a run's bridge.
pub(super) struct BridgeEnd {
    pub(super) requests: BufReader<OwnedReadHalf>,
    pub(super) replies: OwnedWriteHalf,
    /// Kept to shut the bridge in both directions when it is closed on the script: a
    /// script blocked writing an oversized frame gets EPIPE and reads the refusal, and a
    /// later call reads the end of the stream instead of waiting for the wall clock.
    pub(super) control: std::os::unix::net::UnixStream,
    /// The buffer frames are read into.
    pub(super) frame: Vec<u8>,
}

impl BridgeEnd {
    /// The next frame of at most `cap` bytes (see [`read_line`]).
    pub(super) async fn next_frame(&mut self, cap: usize) -> Result<Option<Vec<u8>>, String> {
        read_line(&mut self.requests, &mut self.frame, cap).await
    }

    /// Answers one frame `read` off the bridge: the script's `tool_calls`th call, within the
    /// run's `allowance`, goes to `tools` (the wall clock stops meanwhile: `deadline` moves by
    /// the time it took); a call over the allowance, or a frame that is not a call, is refused
    /// and the bridge closed. Returns whether the bridge stays open.
    pub(super) async fn answer(
        &mut self,
        read: Result<Option<Vec<u8>>, String>,
        tools: &dyn ToolBridge,
        allowance: usize,
        tool_calls: &mut usize,
        deadline: &mut tokio::time::Instant,
    ) -> bool {
        let mut open = true;
        let reply = match read {
            Ok(Some(request)) => {
                *tool_calls += 1;
                if *tool_calls > allowance {
                    open = false;
                    BridgeReply::error(
                        "rate_limited",
                        format!("a script may make at most {allowance} tool calls"),
                        false,
                    )
                } else {
                    let waited = std::time::Instant::now();
                    let reply = serve(tools, &request).await;
                    *deadline += waited.elapsed();
                    reply
                }
            }
            // The script closed its end: nothing to answer.
            Ok(None) => return false,
            Err(message) => {
                open = false;
                BridgeReply::error("invalid_argument", message, false)
            }
        };
        let mut out = serde_json::to_vec(&reply).unwrap_or_default();
        out.push(b'\n');
        if self.replies.write_all(&out).await.is_err() {
            open = false;
        }
        if !open {
            // Nothing more is read: stop the script's writes here, after the reply.
            let _ = self.control.shutdown(std::net::Shutdown::Both);
        }
        open
    }
}

/// One line of at most `cap` bytes, bounded before it is read: the host never holds more than
/// `cap + 1` bytes of a frame (an over-long one is refused, not read on); `Ok(None)` at end of
/// stream.
async fn read_line(
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    line: &mut Vec<u8>,
    cap: usize,
) -> Result<Option<Vec<u8>>, String> {
    line.clear();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    let n = (&mut *reader)
        .take(limit)
        .read_until(b'\n', line)
        .await
        .map_err(|e| e.to_string())?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(format!(
            "a tool call over the bridge is longer than {cap} bytes; the bridge is closed"
        ));
    }
    Ok(Some(std::mem::take(line)))
}

#[derive(Deserialize)]
struct BridgeRequest {
    tool: String,
    #[serde(default)]
    arguments: Value,
}

async fn serve(bridge: &dyn ToolBridge, line: &[u8]) -> BridgeReply {
    match serde_json::from_slice::<BridgeRequest>(line) {
        Ok(request) => {
            let arguments = match request.arguments {
                Value::Null => Value::Object(serde_json::Map::new()),
                other => other,
            };
            bridge.call(request.tool, arguments).await
        }
        Err(e) => BridgeReply::error(
            "invalid_argument",
            format!("a bridge request is a JSON object with \"tool\" and \"arguments\": {e}"),
            false,
        ),
    }
}
