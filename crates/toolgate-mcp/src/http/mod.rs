//! Streamable HTTP at `/mcp`: rmcp's `StreamableHttpService` (sessions with `Mcp-Session-Id` for
//! 2025-11-25 clients, stateless requests for 2026-07-28, Host and Origin checks) behind a front
//! of ours that adds what rmcp leaves to the embedder.
//!
//! Guarantees, each answered with a JSON-RPC error body a client can show:
//! - a POST body over [`HttpLimits::max_body_bytes`] is refused with 413 before rmcp sees it,
//!   read no further than the cap;
//! - a body that is not UTF-8 or nests deeper than [`MAX_NESTING`](crate::MAX_NESTING) gets
//!   400 with `-32700` before rmcp sees it; a body that is not JSON gets the same when rmcp
//!   refuses it (rmcp answers in plain text; the body is parsed here only then, or up front
//!   when the scope check needs the tool's name, so a good call is parsed once);
//! - a JSON body that rmcp cannot read as a JSON-RPC message (a wrong `jsonrpc`, no method, an
//!   id of the wrong type, a batch) gets 400 with `-32600` and rmcp's reason, instead of rmcp's
//!   plain-text 415;
//! - at most [`HttpLimits::max_concurrent`] POSTs are served at once; one more gets 503 with
//!   `Retry-After` at once instead of queueing;
//! - a POST's whole response, streamed or not, ends by [`HttpLimits::request_time`]; past it
//!   the client gets a `-32603` error for that request id and the call is cancelled;
//! - any path but `/mcp` is 404, but for the pages given to [`serve_http_with_pages`] (the
//!   console), which get their own prefix ([`Pages`]).
//!
//! Connections, bounded in count and time whatever a client holds open ([`HttpLimits`]):
//! - at most [`HttpLimits::max_connections`] at once; one more is answered 503 (a JSON-RPC
//!   error, `Retry-After`, `Connection: close`) and closed within a second, by at most 64
//!   such answers at a time (past those it is closed unanswered); a failed accept pauses the
//!   loop 50 ms instead of spinning;
//! - a request's headers must arrive within [`HttpLimits::header_time`] of the server starting
//!   to wait for them (hyper's header read timeout): this cuts a slowloris, a client that
//!   connects and says nothing, a half-open connection and a kept-alive one left idle;
//! - a POST body must arrive in full within [`HttpLimits::body_time`], else 408 with
//!   `-32600`, the connection closed and the POST slot freed;
//! - a GET stream (rmcp's session events, each session's buffer bounded by rmcp at 16
//!   messages) ends by [`HttpLimits::stream_time`]; the client may reopen it;
//! - a write the client does not take in full for [`HttpLimits::write_stall_time`] (it reads
//!   nothing, or a trickle) resets the connection: one answer at a time per connection waits
//!   in memory, and the kernel's queue for it is dropped;
//! - HTTP/2 is not served (hyper's `http1` feature only): a prior-knowledge preface is closed
//!   unanswered, an `Upgrade: h2c` request is served as HTTP/1.1.
//!
//! Limits of zero are refused at start, naming the limit.
//!
//! Shutdown ([`serve_http`]'s `shutdown` future) stops accepting, waits for in-flight POSTs up to
//! [`HttpLimits::drain_time`], then closes sessions and open streams and returns.
//!
//! Access ([`Access`]): without authorization the server refuses to bind anything but a loopback
//! address, unless the operator says `--insecure-no-auth`; as an OAuth resource server
//! ([`crate::auth`]) every request to `/mcp` needs a valid bearer token (401, 403 or 503
//! otherwise, before rmcp sees it), the protected resource metadata is served at its well-known
//! paths, and the token's principal is handed to the MCP server in the request's extensions.
//! Each request to `/mcp` leaves one `auth` line in the resource server's trace: the refusal's
//! rule, or the allow as it is handed on. The `Authorization` header never reaches rmcp: it is
//! removed once read (the MCP server refuses a request that still carries one).
//!
//! Sessions (2025-11-25 `Mcp-Session-Id`) belong to the principal (tenant and id) whose
//! `initialize` opened them: with authorization, a request naming a session another principal
//! opened, or one this front did not see opened, is answered 404 before rmcp sees it, whether
//! it is a POST (a call, a response to the server's elicitation, a cancellation), a GET (a
//! stream, a replay with `Last-Event-ID`) or a DELETE. A binding is forgotten when its session
//! is deleted or rmcp no longer holds it; the MCP server forgets that session's taint sources
//! then too. With a shared store ([`McpServer::sharing_sessions`](crate::McpServer)), a session
//! and its owner are recorded there too, so any instance continues it, still only for that
//! principal (see [`SharedSessions`]). A DELETE that ends a session is answered as the
//! official SDKs' servers answer it: its GET streams are ended first, then 200 with an empty
//! body (rmcp says 202, which the Python SDK's client logs as a failed termination); a DELETE
//! naming a session nobody holds gets 404, and one under 2026-07-28 (no sessions) rmcp's 405.
//!
//! One file per job: `limits` (what one server takes on), `addresses` (where it may listen,
//! which Host and Origin names it answers to), `connections` (accepting connections, bounded
//! in count and time), `front` (each request, stage by stage, before and after rmcp),
//! `sessions` (who owns each session), `session_streams` (each session's open streams, for its
//! DELETE), `message` (what the front reads of a body) and
//! `answers` (the front's own responses, and bodies that end by their deadline).

mod addresses;
mod answers;
mod connections;
mod front;
mod limits;
mod message;
mod pages;
mod session_streams;
mod sessions;
mod shared_sessions;

pub use shared_sessions::{MAX_SESSION_AGE_SECS, SharedSessions};

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use addresses::{non_loopback_refusal, refuse_non_loopback};
pub use limits::HttpLimits;
pub use pages::Pages;

use crate::auth::ResourceServer;
use crate::server::{McpServer, ServeError};
use front::Front;

/// Who may reach the server.
#[derive(Clone)]
pub enum Access {
    /// This machine only: a non-loopback address is refused. One principal for every request.
    LoopbackOnly,
    /// Anyone who can connect, with no authorization at all (`--insecure-no-auth`).
    InsecureNoAuth,
    /// Every request carries an access token for this resource server.
    OAuth(Arc<ResourceServer>),
}

/// The endpoint's path.
pub const MCP_PATH: &str = "/mcp";

type ResponseBody = BoxBody<Bytes, Infallible>;

/// Serves `server` on `listener` (bound to a loopback address) until `shutdown` completes, then
/// drains as the module doc says.
pub async fn serve_http(
    server: McpServer,
    listener: TcpListener,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    serve_http_with(server, listener, limits, Access::LoopbackOnly, shutdown).await
}

/// [`serve_http`] with the given access rule.
pub async fn serve_http_with(
    server: McpServer,
    listener: TcpListener,
    limits: HttpLimits,
    access: Access,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    serve_http_with_pages(server, listener, limits, access, None, shutdown).await
}

/// [`serve_http_with`], with `pages` (the console) answering under their prefix.
pub async fn serve_http_with_pages(
    server: McpServer,
    listener: TcpListener,
    limits: HttpLimits,
    access: Access,
    pages: Option<Arc<dyn Pages>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    limits.check().map_err(ServeError::Start)?;
    let local = listener
        .local_addr()
        .map_err(|e| ServeError::Start(format!("the listener has no address: {e}")))?;
    if matches!(access, Access::LoopbackOnly) {
        refuse_non_loopback(local)?;
    }
    let auth = match &access {
        Access::OAuth(auth) => Some(Arc::clone(auth)),
        Access::LoopbackOnly | Access::InsecureNoAuth => None,
    };
    let sessions = CancellationToken::new();
    let front = Front::new(server, limits, auth, local, sessions.clone(), pages);
    let graceful = GracefulShutdown::new();
    connections::accept_until(&listener, &front, limits, &graceful, shutdown).await;
    drop(listener);
    front.drain().await;
    sessions.cancel();
    // Idle keep-alive connections close now; anything still open past the drain is cut.
    let _ = tokio::time::timeout(limits.drain_time, graceful.shutdown()).await;
    Ok(())
}

/// The usual `shutdown` for [`serve_http`]: completes on SIGTERM or Ctrl-C; if the handlers
/// cannot be installed, never (the server then stops only when killed, which loses no
/// receipts).
pub async fn sigterm_or_ctrl_c() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        () = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
