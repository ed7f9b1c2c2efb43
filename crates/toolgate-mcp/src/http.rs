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
//! - any path but `/mcp` is 404.
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
//! then too.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::auth::{Authenticated, Refusal, RequestFacts, ResourceServer};
use crate::server::{McpServer, ServeError};

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

/// What one server takes on.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// The largest POST body read, in bytes.
    pub max_body_bytes: usize,
    /// POSTs served at once.
    pub max_concurrent: usize,
    /// The longest a POST's response may take, stream included. It bounds a call waiting for
    /// a person's approval too, so it is longer than the approval timeout.
    pub request_time: Duration,
    /// How long shutdown waits for in-flight POSTs.
    pub drain_time: Duration,
    /// Connections open at once. One more is answered 503 and closed at once, so descriptors
    /// and per-connection buffers stay bounded whatever clients hold open.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, counted from when the
    /// server starts waiting for them: on a new connection and again after each response, so
    /// it is also the idle timeout of a kept-alive connection. Past it the connection is
    /// closed (a slowloris sending a header byte a second, a client that connects and says
    /// nothing, a half-open connection).
    pub header_time: Duration,
    /// How long a POST body may take to arrive in full once its headers have; past it the
    /// request is answered 408 and its connection closed, and the POST slot is freed.
    pub body_time: Duration,
    /// The longest a GET stream (a session's server-to-client events) stays open; then it
    /// ends, and the client may open it again (with `Last-Event-ID` to resume).
    pub stream_time: Duration,
    /// How long a write to a client may make no progress (a client that does not read its
    /// responses or its stream, one that vanished without closing) before its connection is
    /// closed: what waits to be sent is bounded by the socket's buffers and one response.
    pub write_stall_time: Duration,
}

impl HttpLimits {
    /// Why these limits cannot be served: a count or a time of zero would refuse or time out
    /// everything. [`serve_http`] refuses to start on them.
    pub fn check(&self) -> Result<(), String> {
        let limits = self;
        let counts = [
            ("max_body_bytes", limits.max_body_bytes),
            ("max_concurrent", limits.max_concurrent),
            ("max_connections", limits.max_connections),
        ];
        if let Some((name, _)) = counts.iter().find(|(_, n)| *n == 0) {
            return Err(format!("HTTP limit `{name}` is 0: nothing could be served"));
        }
        let times = [
            ("request_time", limits.request_time),
            ("header_time", limits.header_time),
            ("body_time", limits.body_time),
            ("stream_time", limits.stream_time),
            ("write_stall_time", limits.write_stall_time),
        ];
        if let Some((name, _)) = times.iter().find(|(_, t)| t.is_zero()) {
            return Err(format!(
                "HTTP limit `{name}` is 0 s: every request would time out"
            ));
        }
        Ok(())
    }
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body_bytes: 1024 * 1024,
            max_concurrent: 64,
            request_time: Duration::from_secs(360),
            drain_time: Duration::from_secs(10),
            max_connections: 256,
            header_time: Duration::from_secs(10),
            body_time: Duration::from_secs(30),
            stream_time: Duration::from_secs(300),
            write_stall_time: Duration::from_secs(30),
        }
    }
}

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
    let mut hosts = allowed_hosts(local);
    let mut origins = allowed_origins(local);
    if let Some(auth) = &auth {
        // Clients name the server by its resource URI's authority.
        if let Ok(resource) = url::Url::parse(auth.resource()) {
            if let Some(host) = resource.host_str() {
                hosts.push(host.to_string());
                if let Some(port) = resource.port() {
                    hosts.push(format!("{host}:{port}"));
                }
            }
            origins.push(resource.origin().ascii_serialization());
        }
    }
    let server = server.requiring_tokens(auth.is_some());
    let served = server.clone();
    let manager = Arc::new(LocalSessionManager::default());
    let sessions = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(limits.max_body_bytes)
        .with_cancellation_token(sessions.clone());
    let mcp = StreamableHttpService::new(move || Ok(server.clone()), Arc::clone(&manager), config);
    let front = Front {
        mcp,
        limits,
        permits: Arc::new(Semaphore::new(limits.max_concurrent)),
        auth,
        owners: Arc::new(Owners::default()),
        manager,
        server: served,
    };

    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(REFUSALS_AT_ONCE));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // A failed accept (out of descriptors, a reset) ends that connection only; a
                // short pause keeps a lasting failure (EMFILE) from spinning the loop.
                Err(_) => {
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
        };
        let Ok(slot) = Arc::clone(&connections).try_acquire_owned() else {
            // Over the cap: told so at once, by a bounded number of short-lived tasks; past
            // those the connection is just closed.
            if let Ok(refusing) = Arc::clone(&refusals).try_acquire_owned() {
                tokio::spawn(refuse_connection(stream, limits.max_connections, refusing));
            }
            continue;
        };
        // Responses are small and a client waits for each: without this, Nagle's algorithm
        // and delayed ACKs hold a reply back for tens of milliseconds.
        let _ = stream.set_nodelay(true);
        let front = front.clone();
        let service = hyper::service::service_fn(move |request| {
            let front = front.clone();
            async move { Ok::<_, Infallible>(front.handle(request).await) }
        });
        let io = StallGuard::new(stream, limits.write_stall_time);
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_time)
            .serve_connection(TokioIo::new(io), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A connection that breaks mid-request has already cancelled its calls.
            let _ = connection.await;
            drop(slot);
        });
    }
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

/// Connections over the cap being told so at once; past these they are closed unanswered.
const REFUSALS_AT_ONCE: usize = 64;
/// How long a refused connection is given to take its 503.
const REFUSAL_TIME: Duration = Duration::from_secs(1);
/// The pause after a failed accept.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Answers a connection over the cap with a 503 (JSON-RPC error body, `Retry-After`) and
/// closes it, all within [`REFUSAL_TIME`]. What the client sent is read (up to 64 KiB) before
/// the close, so the kernel does not reset the connection over the answer.
async fn refuse_connection(
    mut stream: tokio::net::TcpStream,
    max_connections: usize,
    _refusing: OwnedSemaphorePermit,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = error_body(
        Value::Null,
        -32000,
        &format!(
            "server busy: it holds at most {max_connections} connections at once; retry shortly"
        ),
    )
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut read = 0;
        while read < 64 * 1024 {
            match stream.read(&mut sink).await? {
                0 => break,
                n => read += n,
            }
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
}

/// A connection's socket whose writes fail once they have made no progress for the stall
/// time, and which is then reset: a client that stops reading (or vanished without closing)
/// cannot hold a response, the kernel's send queue and its connection slot for ever.
struct StallGuard {
    inner: tokio::net::TcpStream,
    stall: Duration,
    /// Running while a write, flush or shutdown is pending.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl StallGuard {
    fn new(inner: tokio::net::TcpStream, stall: Duration) -> Self {
        StallGuard {
            inner,
            stall,
            stalled: None,
        }
    }

    /// `poll` as a write of `asked` bytes. Only a write the kernel takes whole (the client is
    /// keeping up) stops the stall timer; a partial or pending one starts it, and once it has
    /// run out the write fails: a client that reads a trickle is cut as one that reads nothing.
    fn guard(
        &mut self,
        cx: &mut Context<'_>,
        asked: usize,
        poll: impl FnOnce(
            Pin<&mut tokio::net::TcpStream>,
            &mut Context<'_>,
        ) -> Poll<std::io::Result<usize>>,
    ) -> Poll<std::io::Result<usize>> {
        let polled = poll(Pin::new(&mut self.inner), cx);
        match polled {
            Poll::Ready(Ok(n)) if n >= asked => {
                self.stalled = None;
                return polled;
            }
            Poll::Ready(Err(_)) => return polled,
            Poll::Ready(Ok(_)) | Poll::Pending => {}
        }
        let stall = self.stall;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        if timer.as_mut().poll(cx).is_pending() {
            return polled;
        }
        // Closed with a reset, so the kernel drops what it still queues for this client
        // instead of keeping it (and the connection) until it is read.
        let _ = self.inner.set_zero_linger();
        Poll::Ready(Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the client did not keep up with its answer for {} s: connection closed",
                stall.as_secs()
            ),
        )))
    }
}

impl tokio::io::AsyncRead for StallGuard {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for StallGuard {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.guard(cx, buf.len(), |inner, cx| inner.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let asked = bufs.iter().map(|b| b.len()).sum();
        self.guard(cx, asked, |inner, cx| inner.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    // A TCP flush or shutdown does not wait for the client: nothing to guard.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Without authorization the server is for this machine only: any address but a loopback one
/// is refused.
pub fn refuse_non_loopback(address: SocketAddr) -> Result<(), ServeError> {
    match non_loopback_refusal(address) {
        None => Ok(()),
        Some(refusal) => Err(ServeError::Start(refusal)),
    }
}

/// Why `address` may not be served without authorization, or `None` when it is a loopback
/// address (for front ends that check before they open or create anything).
pub fn non_loopback_refusal(address: SocketAddr) -> Option<String> {
    (!address.ip().is_loopback()).then(|| {
        format!(
            "refusing to serve MCP over HTTP on {address}: without authorization toolgate \
             serves loopback addresses only (127.0.0.1 or ::1)"
        )
    })
}

fn allowed_hosts(local: SocketAddr) -> Vec<String> {
    let port = local.port();
    vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.1".into(),
        "localhost".into(),
        "::1".into(),
    ]
}

fn allowed_origins(local: SocketAddr) -> Vec<String> {
    let port = local.port();
    vec![
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        format!("http://[::1]:{port}"),
    ]
}

#[derive(Clone)]
struct Front {
    mcp: StreamableHttpService<McpServer, LocalSessionManager>,
    limits: HttpLimits,
    permits: Arc<Semaphore>,
    auth: Option<Arc<ResourceServer>>,
    /// Who opened each session (with authorization only).
    owners: Arc<Owners>,
    /// rmcp's sessions, to forget the bindings of those it closed.
    manager: Arc<LocalSessionManager>,
    /// For forgetting a closed session's taint sources.
    server: McpServer,
}

/// The header naming a 2025-11-25 session.
const SESSION_HEADER: &str = "mcp-session-id";

/// A principal as a session's owner: its tenant (the token's issuer) and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    tenant: String,
    id: String,
}

impl Owner {
    fn of(principal: &toolgate_core::Principal) -> Self {
        Owner {
            tenant: principal.tenant.clone(),
            id: principal.id.clone(),
        }
    }
}

/// Session id to the principal that opened it.
#[derive(Default)]
struct Owners {
    by_session: std::sync::Mutex<std::collections::HashMap<String, Owner>>,
}

impl Owners {
    fn with<T>(&self, f: impl FnOnce(&mut std::collections::HashMap<String, Owner>) -> T) -> T {
        // Every change is one insert or remove: a poisoned map is still consistent.
        match self.by_session.lock() {
            Ok(mut map) => f(&mut map),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    fn owner(&self, session: &str) -> Option<Owner> {
        self.with(|map| map.get(session).cloned())
    }
}

/// Whether `caller` may use a session bound to `bound`: only the principal that opened it,
/// and never a session with no known owner (fail closed).
fn session_access(bound: Option<&Owner>, caller: &Owner) -> Result<(), Refusal> {
    match bound {
        Some(owner) if owner == caller => Ok(()),
        Some(_) | None => Err(Refusal::ForeignSession),
    }
}

impl Front {
    async fn handle(&self, mut request: Request<Incoming>) -> Response<ResponseBody> {
        if let Some(auth) = &self.auth
            && request.method() == Method::GET
            && auth
                .metadata_paths()
                .iter()
                .any(|p| p == request.uri().path())
        {
            return json_response(StatusCode::OK, &auth.metadata());
        }
        if request.uri().path() != MCP_PATH {
            return error_response(
                StatusCode::NOT_FOUND,
                Value::Null,
                -32601,
                &format!("no MCP endpoint here: use {MCP_PATH}"),
            );
        }
        let http_method = request.method().as_str().to_string();
        // A header that is not text names no session anyone opened: refused below.
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .map(|v| v.to_str().unwrap_or_default().to_string());
        let principal = match &self.auth {
            None => None,
            Some(auth) => match auth
                .authenticate(request.headers(), request.uri().query())
                .await
            {
                Ok(principal) => {
                    request
                        .extensions_mut()
                        .insert(Authenticated(principal.clone()));
                    Some(principal)
                }
                Err(refusal) => {
                    let facts = RequestFacts {
                        http_method: &http_method,
                        ..RequestFacts::default()
                    };
                    auth.record_refusal(&refusal, facts);
                    return refused(auth, &refusal, Value::Null);
                }
            },
        };
        // Read and checked: the token goes no further.
        request.headers_mut().remove(AUTHORIZATION);
        let owner = principal.as_ref().map(Owner::of);
        if let (Some(auth), Some(owner), Some(session)) = (&self.auth, &owner, &session)
            && let Err(refusal) = session_access(self.owners.owner(session).as_ref(), owner)
        {
            auth.record_refusal(
                &refusal,
                RequestFacts {
                    http_method: &http_method,
                    principal: principal.as_ref(),
                    ..RequestFacts::default()
                },
            );
            return refused(auth, &refusal, Value::Null);
        }
        if request.method() != Method::POST {
            if let Some(auth) = &self.auth {
                auth.record_allow(RequestFacts {
                    http_method: &http_method,
                    principal: principal.as_ref(),
                    ..RequestFacts::default()
                });
            }
            let deleting = request.method() == Method::DELETE;
            // GET streams and DELETE of a session are rmcp's; they are not calls.
            let response = self.mcp.handle(request).await.map(BodyExt::boxed);
            let streamed = response
                .headers()
                .get(CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            // A GET stream ends by the stream time; the client may open it again.
            let response = if streamed {
                let deadline = Box::pin(tokio::time::sleep(self.limits.stream_time));
                response.map(|body| {
                    BoxBody::new(Bounded {
                        inner: body,
                        deadline,
                        on_timeout: None,
                        ended: false,
                        _permit: None,
                    })
                })
            } else {
                response
            };
            if deleting
                && response.status().is_success()
                && let Some(session) = &session
            {
                self.forget(std::slice::from_ref(session));
            }
            return response;
        }
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            let mut response = error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                Value::Null,
                -32000,
                &format!(
                    "server busy: it serves at most {} requests at once; retry shortly",
                    self.limits.max_concurrent
                ),
            );
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            return response;
        };
        let (parts, body) = request.into_parts();
        let read = tokio::time::timeout(
            self.limits.body_time,
            Limited::new(body, self.limits.max_body_bytes).collect(),
        );
        let Ok(read) = read.await else {
            // The rest of the body is never read: the connection cannot carry another request.
            return closing(error_response(
                StatusCode::REQUEST_TIMEOUT,
                Value::Null,
                -32600,
                &format!(
                    "the request body did not arrive within {} s: send it at once",
                    self.limits.body_time.as_secs()
                ),
            ));
        };
        let bytes = match read {
            Ok(collected) => collected.to_bytes(),
            // The rest of the body is never read, so the connection cannot carry another
            // request: say so, or a client's pool may send its next request into a socket the
            // server is closing.
            Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
                return closing(error_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    Value::Null,
                    -32600,
                    &format!(
                        "request body over {} bytes: send a smaller request",
                        self.limits.max_body_bytes
                    ),
                ));
            }
            Err(error) => {
                return closing(error_response(
                    StatusCode::BAD_REQUEST,
                    Value::Null,
                    -32600,
                    &format!("the request body could not be read: {error}"),
                ));
            }
        };
        if let Some(why) = unreadable(&bytes) {
            return error_response(
                StatusCode::BAD_REQUEST,
                Value::Null,
                -32700,
                &format!("Parse error: {why}"),
            );
        }
        // Only the scope check needs the message's fields before rmcp answers; without it the
        // body is parsed once (by rmcp), and here again only when an answer needs its id or a
        // refusal needs to say it was not JSON.
        let peeked = match &self.auth {
            None => None,
            Some(_) => match peek(&bytes) {
                Ok(peeked) => Some(peeked),
                Err(error) => return not_json(&error),
            },
        };
        if let (Some(auth), Some(Peeked { id, method, tool })) = (&self.auth, &peeked) {
            let facts = RequestFacts {
                http_method: &http_method,
                rpc_method: method.as_deref(),
                tool: tool.as_deref(),
                principal: principal.as_ref(),
            };
            if let (Some(principal), Some(tool)) = (&principal, tool)
                && let Err(refusal) = auth.check_tool(principal, tool)
            {
                auth.record_refusal(&refusal, facts);
                return refused(auth, &refusal, id.clone());
            }
            auth.record_allow(facts);
        }
        let id = match peeked {
            Some(peeked) => RequestId::Known(peeked.id),
            None => RequestId::InBody(bytes.clone()),
        };
        // One timer bounds both the wait for the response and its body.
        let mut deadline = Box::pin(tokio::time::sleep(self.limits.request_time));
        let json_body = parts
            .headers
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        let request = Request::from_parts(parts, Full::new(bytes));
        let response = tokio::select! {
            response = self.mcp.handle(request) => response,
            () = deadline.as_mut() => return timed_out(id.value(), self.limits.request_time),
        };
        if let (Some(owner), None) = (owner, &session)
            && let Some(opened) = response.headers().get(SESSION_HEADER)
            && let Ok(opened) = opened.to_str()
        {
            // An initialize opened a session: it is this principal's from now on. The client
            // learns the id from this response, so no request can name it before the binding.
            self.bind(opened, owner).await;
        }
        if response.status().is_client_error()
            && let RequestId::InBody(body) = &id
            && let Err(error) = peek(body)
        {
            // rmcp refused a body that is not JSON, in plain text: say so as JSON-RPC does.
            return not_json(&error);
        }
        if json_body && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            // rmcp read JSON it could not take as a JSON-RPC message; its reason is plain text.
            let reason = tokio::select! {
                body = response.into_body().collect() => body
                    .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                    .unwrap_or_default(),
                () = deadline.as_mut() => return timed_out(id.value(), self.limits.request_time),
            };
            return error_response(
                StatusCode::BAD_REQUEST,
                id.value(),
                -32600,
                &format!("Invalid Request: not a JSON-RPC message this server reads ({reason})"),
            );
        }
        let streamed = response
            .headers()
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        let limit = self.limits.request_time;
        response.map(|body| {
            BoxBody::new(Bounded {
                inner: body,
                deadline,
                // Built only if the deadline passes: most responses end well before it.
                on_timeout: streamed.then_some((id, limit)),
                ended: false,
                _permit: Some(permit),
            })
        })
    }

    /// Binds `session` to `owner`, and forgets the bindings of sessions rmcp has closed (so the
    /// map holds no more than rmcp's live sessions and this one).
    async fn bind(&self, session: &str, owner: Owner) {
        let live: std::collections::HashSet<String> = self
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(|id| id.to_string())
            .collect();
        let closed = self.owners.with(|map| {
            let closed: Vec<String> = map
                .keys()
                .filter(|id| !live.contains(*id) && id.as_str() != session)
                .cloned()
                .collect();
            for id in &closed {
                map.remove(id);
            }
            map.insert(session.to_string(), owner);
            closed
        });
        self.server.forget_sessions(&closed);
    }

    /// Forgets `sessions`: their owners and their taint sources.
    fn forget(&self, sessions: &[String]) {
        self.owners.with(|map| {
            for id in sessions {
                map.remove(id);
            }
        });
        self.server.forget_sessions(sessions);
    }

    /// Waits until no POST is in flight, up to the drain time.
    async fn drain(&self) {
        let all = u32::try_from(self.limits.max_concurrent).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(self.limits.drain_time, self.permits.acquire_many(all)).await;
    }
}

/// The JSON-RPC id of the request a response answers: read already, or still in its body
/// (read only if an error or a timeout must name it).
enum RequestId {
    Known(Value),
    InBody(Bytes),
}

impl RequestId {
    /// The id (null for a notification, or a body that is not a JSON-RPC message).
    fn value(&self) -> Value {
        match self {
            RequestId::Known(id) => id.clone(),
            RequestId::InBody(body) => peek(body).map_or(Value::Null, |p| p.id),
        }
    }
}

/// The answer to a body that is not JSON.
fn not_json(error: &serde_json::Error) -> Response<ResponseBody> {
    error_response(
        StatusCode::BAD_REQUEST,
        Value::Null,
        -32700,
        &format!("Parse error: the body is not JSON ({error})"),
    )
}

/// What the front reads of a POST body.
#[derive(Debug, PartialEq)]
struct Peeked {
    /// The JSON-RPC id (null for a notification or anything else that is JSON).
    id: Value,
    /// The JSON-RPC method, when it is a string.
    method: Option<String>,
    /// For a `tools/call`, the tool it names.
    tool: Option<String>,
}

/// What the single JSON-RPC message in `body` is ([`Peeked`]), or why `body` is not JSON. Only
/// these are built; the rest is skipped.
fn peek(body: &[u8]) -> Result<Peeked, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(default)]
        name: Option<Value>,
    }
    #[derive(serde::Deserialize)]
    struct Message {
        #[serde(default)]
        id: Option<Value>,
        #[serde(default)]
        method: Option<Value>,
        #[serde(default)]
        params: Option<Params>,
    }
    // serde reads a struct from an array too, so only an object is read as a message.
    let is_object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    match is_object.then(|| serde_json::from_slice::<Message>(body)) {
        Some(Ok(message)) => {
            let method = message
                .method
                .as_ref()
                .and_then(Value::as_str)
                .map(str::to_string);
            let calls = method.as_deref() == Some("tools/call");
            let tool = message
                .params
                .and_then(|p| p.name)
                .and_then(|n| n.as_str().map(str::to_string))
                .filter(|_| calls);
            Ok(Peeked {
                id: message.id.unwrap_or(Value::Null),
                method,
                tool,
            })
        }
        _ => serde_json::from_slice::<serde::de::IgnoredAny>(body).map(|_| Peeked {
            id: Value::Null,
            method: None,
            tool: None,
        }),
    }
}

/// Why `body` cannot be parsed as rmcp parses it, beyond not being JSON: it is not UTF-8
/// (serde_json skips the bytes of a string it does not keep), or it nests deeper than rmcp's
/// parser goes.
fn unreadable(body: &[u8]) -> Option<String> {
    if let Err(e) = std::str::from_utf8(body) {
        return Some(format!("the body is not UTF-8 ({e})"));
    }
    crate::stdio::nests_deeper_than(body, crate::stdio::MAX_NESTING).then(|| {
        format!(
            "the body nests arrays and objects deeper than {} levels",
            crate::stdio::MAX_NESTING
        )
    })
}

/// The answer to a refused request: its status, the `WWW-Authenticate` challenge and a
/// JSON-RPC error body saying why.
fn refused(auth: &ResourceServer, refusal: &Refusal, id: Value) -> Response<ResponseBody> {
    let status = refusal.status();
    let mut response = error_response(status, id, -32001, &refusal.message());
    // A session refusal is a 404 like an unknown session's: no challenge, the token was good.
    if !matches!(refusal, Refusal::ForeignSession)
        && let Ok(challenge) = HeaderValue::from_str(&auth.challenge(refusal))
    {
        response
            .headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, challenge);
    }
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("5"));
    }
    response
}

fn json_response(status: StatusCode, body: &Value) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A response body that holds its request's concurrency permit until it ends, and ends by the
/// request's deadline: a stream gets a last event with the timeout error for its request.
struct Bounded {
    inner: ResponseBody,
    deadline: Pin<Box<tokio::time::Sleep>>,
    /// For a stream: the request's id and the time limit, for the last event's error.
    on_timeout: Option<(RequestId, Duration)>,
    ended: bool,
    /// A POST's concurrency permit (a GET stream holds none).
    _permit: Option<OwnedSemaphorePermit>,
}

impl Body for Bounded {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            // Dropping the inner body closes rmcp's stream, which cancels the call.
            self.ended = true;
            self.inner = BoxBody::new(http_body_util::Empty::new());
            return Poll::Ready(
                self.on_timeout
                    .take()
                    .map(|(id, limit)| Ok(Frame::data(timeout_event(id.value(), limit)))),
            );
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }
}

fn timeout_message(limit: Duration) -> String {
    format!(
        "request took longer than the server's limit of {} s and was cancelled",
        limit.as_secs()
    )
}

fn timed_out(id: Value, limit: Duration) -> Response<ResponseBody> {
    error_response(
        StatusCode::GATEWAY_TIMEOUT,
        id,
        -32603,
        &timeout_message(limit),
    )
}

fn timeout_event(id: Value, limit: Duration) -> Bytes {
    let error = error_body(id, -32603, &timeout_message(limit));
    Bytes::from(format!("event: message\ndata: {error}\n\n"))
}

fn error_body(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// `response` marked as the connection's last (`Connection: close`).
fn closing<B>(mut response: Response<B>) -> Response<B> {
    response
        .headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn error_response(
    status: StatusCode,
    id: Value,
    code: i64,
    message: &str,
) -> Response<ResponseBody> {
    json_response(status, &error_body(id, code, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_a_public_address_without_authorization_is_refused() {
        let cases = [
            ("127.0.0.1:8080", true),
            ("[::1]:8080", true),
            ("0.0.0.0:8080", false),
            ("192.168.1.10:8080", false),
            ("[::]:8080", false),
        ];
        for (address, allowed) in cases {
            let address: SocketAddr = address.parse().unwrap();
            assert_eq!(refuse_non_loopback(address).is_ok(), allowed, "{address}");
        }
    }

    #[test]
    fn a_body_is_refused_as_not_json_only_when_it_is_not() {
        let cases: [(&[u8], Option<Value>); 7] = [
            (
                br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
                Some(json!(7)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#,
                Some(json!("a")),
            ),
            (
                br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                Some(Value::Null),
            ),
            (
                br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                Some(Value::Null),
            ),
            (br#"42"#, Some(Value::Null)),
            (br#"{"jsonrpc": "2.0", "#, None),
            (b"\xff\xfe", None),
        ];
        for (body, id) in cases {
            assert_eq!(
                peek(body).ok().map(|p| p.id),
                id,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn bodies_rmcp_cannot_parse_are_named_before_it_sees_them() {
        let deep = format!("{}{}", "[".repeat(101), "]".repeat(101));
        let text = format!("{{\"x\":\"{}\"}}", "[".repeat(500));
        let cases: [(&[u8], Option<&str>); 4] = [
            (br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, None),
            (b"{\"x\":\"\xff\xfe\"}", Some("not UTF-8")),
            (deep.as_bytes(), Some("deeper than 100")),
            // Brackets inside strings are text, not nesting.
            (text.as_bytes(), None),
        ];
        for (body, why) in cases {
            let got = unreadable(body);
            assert_eq!(
                got.is_some(),
                why.is_some(),
                "{}: {got:?}",
                String::from_utf8_lossy(body)
            );
            if let (Some(got), Some(why)) = (got, why) {
                assert!(got.contains(why), "{got}");
            }
        }
    }

    #[test]
    fn only_a_tools_call_names_a_tool_for_the_scope_check() {
        let cases: [(&[u8], Option<&str>); 5] = [
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes_delete"}}"#,
                Some("notes_delete"),
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"x"}}"#,
                None,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#,
                None,
            ),
            (br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, None),
            (
                br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}]"#,
                None,
            ),
        ];
        let listed = peek(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
        assert_eq!(listed.method.as_deref(), Some("tools/list"));
        assert_eq!(peek(b"[1]").unwrap().method, None);
        for (body, tool) in cases {
            let peeked = peek(body).unwrap();
            assert_eq!(
                peeked.tool.as_deref(),
                tool,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_session_is_served_only_to_the_principal_that_opened_it() {
        let owner = |tenant: &str, id: &str| Owner {
            tenant: tenant.into(),
            id: id.into(),
        };
        let alice = owner("https://as.example", "alice");
        let cases = [
            ("its owner", Some(alice.clone()), alice.clone(), true),
            (
                "another principal",
                Some(alice.clone()),
                owner("https://as.example", "bob"),
                false,
            ),
            (
                "the same id from another tenant",
                Some(alice.clone()),
                owner("https://other.example", "alice"),
                false,
            ),
            (
                "a session nobody was seen opening",
                None,
                alice.clone(),
                false,
            ),
        ];
        for (what, bound, caller, allowed) in cases {
            assert_eq!(
                session_access(bound.as_ref(), &caller).is_ok(),
                allowed,
                "{what}"
            );
        }
    }

    #[test]
    fn only_this_servers_loopback_origins_are_allowed() {
        let origins = allowed_origins("127.0.0.1:5000".parse().unwrap());
        assert!(origins.contains(&"http://127.0.0.1:5000".to_string()));
        assert!(origins.iter().all(|o| o.ends_with(":5000")), "{origins:?}");
    }
}
