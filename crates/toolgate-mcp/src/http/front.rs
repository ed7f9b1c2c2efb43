//! The front: every HTTP request, stage by stage, before and after rmcp's
//! `StreamableHttpService` ([`Front::handle`]).
//!
//! Stages, each a method named for it: serve the protected resource metadata; refuse any path
//! but `/mcp`; admit the caller (authenticate its token, remove the `Authorization` header,
//! check the session it names belongs to it); then a GET or DELETE goes to rmcp as a stream or
//! a session's end, and a POST is a call: a slot among the calls at once, its body read within
//! its size and time, checked for what rmcp cannot parse, its tool checked against the token's
//! scopes, handed to rmcp under the request's deadline, the session it opened bound to its
//! principal, rmcp's plain-text refusals turned into JSON-RPC errors, and its answer bounded by
//! the same deadline. Paths under the pages' prefix (the console) go to the [`Pages`] hook, body
//! read within the same bounds, before the MCP path check. What each stage guarantees is in the module doc of [`crate::http`].

use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager, SessionStore};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use toolgate_core::Principal;

use super::addresses::allowed_names;
use super::answers::{
    Bounded, closing, error_response, json_response, not_json, refused, timed_out,
};
use super::message::{Peeked, RequestId, peek, unreadable};
use super::pages::{Pages, under};
use super::session_streams::SessionStreams;
use super::sessions::{Owner, Owners, SESSION_HEADER, session_access};
use super::shared_sessions::SharedSessions;
use super::{HttpLimits, MCP_PATH, ResponseBody};
use crate::auth::{Authenticated, RequestFacts, ResourceServer};
use crate::server::McpServer;

/// Where a load balancer asks whether the process is up, and whether it should get requests.
pub const HEALTHZ_PATH: &str = "/healthz";
pub const READYZ_PATH: &str = "/readyz";

/// One answer to an HTTP request. A stage that answers early returns it as its `Err`.
type Answer = Response<ResponseBody>;

/// When a POST's response must have ended.
type Deadline = Pin<Box<tokio::time::Sleep>>;

#[derive(Clone)]
pub(super) struct Front {
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
    /// Where every instance on the team's store records sessions and their owners.
    shared: Option<Arc<SharedSessions>>,
    /// Web pages on the same listener (the console), handed their paths.
    pages: Option<Arc<dyn Pages>>,
    /// Each session's open GET streams, ended by its DELETE before the answer.
    streams: Arc<SessionStreams>,
}

/// Who is asking, as the front established it before the request goes on.
struct Admitted {
    /// The HTTP method, for the trace.
    http_method: String,
    /// The session the request names (a header that is not text names one nobody opened).
    session: Option<String>,
    /// The token's principal (with authorization only).
    principal: Option<Principal>,
}

impl Admitted {
    /// The request as the resource server's trace records it.
    fn facts(&self) -> RequestFacts<'_> {
        RequestFacts {
            http_method: &self.http_method,
            principal: self.principal.as_ref(),
            ..RequestFacts::default()
        }
    }
}

impl Front {
    /// The front of `server` on `local`, with rmcp behind it checking Host and Origin against
    /// this machine's names (and `auth`'s resource URI), and closing its sessions when
    /// `sessions` is cancelled.
    pub(super) fn new(
        server: McpServer,
        limits: HttpLimits,
        auth: Option<Arc<ResourceServer>>,
        local: std::net::SocketAddr,
        sessions: CancellationToken,
        pages: Option<Arc<dyn Pages>>,
    ) -> Self {
        let (hosts, origins) = allowed_names(local, auth.as_deref());
        let server = server.requiring_tokens(auth.is_some());
        let served = server.clone();
        let manager = Arc::new(LocalSessionManager::default());
        let shared = served.shared_sessions();
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(limits.max_body_bytes)
            .with_cancellation_token(sessions);
        // rmcp restores a session it does not hold from here (another instance opened it).
        config.session_store = shared
            .clone()
            .map(|s| s as Arc<dyn rmcp::transport::streamable_http_server::session::SessionStore>);
        let mcp =
            StreamableHttpService::new(move || Ok(server.clone()), Arc::clone(&manager), config);
        Front {
            mcp,
            limits,
            permits: Arc::new(Semaphore::new(limits.max_concurrent)),
            auth,
            owners: Arc::new(Owners::default()),
            manager,
            server: served,
            shared,
            pages,
            streams: Arc::new(SessionStreams::default()),
        }
    }

    /// Answers one HTTP request, stage by stage (see the module doc).
    pub(super) async fn handle(&self, request: Request<Incoming>) -> Answer {
        self.route(request).await.unwrap_or_else(|early| early)
    }

    async fn route(&self, mut request: Request<Incoming>) -> Result<Answer, Answer> {
        if let Some(metadata) = self.resource_metadata(&request) {
            return Ok(metadata);
        }
        if let Some(health) = self.health(&request).await {
            return Ok(health);
        }
        if let Some(pages) = &self.pages
            && under(pages.prefix(), request.uri().path())
        {
            let (parts, body) = request.into_parts();
            let bytes = self.read_body(body).await?;
            let answer = pages.answer(Request::from_parts(parts, bytes)).await;
            return Ok(answer.map(BodyExt::boxed));
        }
        only_the_mcp_path(&request)?;
        let admitted = self.admit(&mut request).await?;
        if request.method() == Method::POST {
            self.call(request, admitted).await
        } else {
            Ok(self.stream_or_delete(request, &admitted).await)
        }
    }

    /// The protected resource metadata, for a GET of one of its well-known paths (with
    /// authorization only).
    fn resource_metadata<B>(&self, request: &Request<B>) -> Option<Answer> {
        let auth = self.auth.as_ref()?;
        let asked = request.method() == Method::GET
            && auth
                .metadata_paths()
                .iter()
                .any(|p| p == request.uri().path());
        asked.then(|| json_response(StatusCode::OK, &auth.metadata()))
    }

    /// `GET /healthz`: the process is up (200, always). `GET /readyz`: whether this instance
    /// should get requests: 200 when every required check (the shared database) passes, else
    /// 503; each check's name and state either way, never a secret or a server's words. Both
    /// answer without a token, like any load balancer's probe.
    async fn health<B>(&self, request: &Request<B>) -> Option<Answer> {
        if request.method() != Method::GET {
            return None;
        }
        match request.uri().path() {
            HEALTHZ_PATH => Some(json_response(
                StatusCode::OK,
                &serde_json::json!({"status": "up"}),
            )),
            READYZ_PATH => {
                let mut checks = Vec::new();
                for check in self.server.health_checks() {
                    checks.push(check.check().await);
                }
                let ready = toolgate_core::health::ready(&checks);
                let status = if ready {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                Some(json_response(
                    status,
                    &serde_json::json!({"ready": ready, "checks": checks}),
                ))
            }
            _ => None,
        }
    }

    /// Who is asking: the token's principal (with authorization) handed to the MCP server in
    /// the request's extensions, the token removed from the request, and the session it names
    /// checked against the principal that opened it.
    async fn admit(&self, request: &mut Request<Incoming>) -> Result<Admitted, Answer> {
        let http_method = request.method().as_str().to_string();
        // A header that is not text names no session anyone opened: refused below.
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .map(|v| v.to_str().unwrap_or_default().to_string());
        let principal = self.authenticate(request, &http_method).await?;
        // Read and checked: the token goes no further.
        request.headers_mut().remove(AUTHORIZATION);
        let admitted = Admitted {
            http_method,
            session,
            principal,
        };
        self.check_session_owner(&admitted).await?;
        Ok(admitted)
    }

    /// The principal the request's token names (none without authorization); a refusal is
    /// recorded and answered with its status and challenge.
    async fn authenticate(
        &self,
        request: &mut Request<Incoming>,
        http_method: &str,
    ) -> Result<Option<Principal>, Answer> {
        let Some(auth) = &self.auth else {
            return Ok(None);
        };
        match auth
            .authenticate_client(request.headers(), request.uri().query())
            .await
        {
            Ok((principal, client)) => {
                let extensions = request.extensions_mut();
                extensions.insert(Authenticated(principal.clone()));
                if let Some(client) = client {
                    extensions.insert(client);
                }
                Ok(Some(principal))
            }
            Err(refusal) => {
                let facts = RequestFacts {
                    http_method,
                    ..RequestFacts::default()
                };
                auth.record_refusal(&refusal, facts);
                Err(refused(auth, &refusal, Value::Null))
            }
        }
    }

    /// With authorization, a request naming a session is served only to the principal that
    /// opened it.
    async fn check_session_owner(&self, admitted: &Admitted) -> Result<(), Answer> {
        let (Some(auth), Some(principal), Some(session)) =
            (&self.auth, &admitted.principal, &admitted.session)
        else {
            return Ok(());
        };
        let mut owner = self.owners.owner(session);
        // Opened at another instance (or before a restart): its owner is in the shared store.
        // A store that cannot be read leaves the owner unknown: refused, like a stranger's.
        if owner.is_none()
            && let Some(shared) = &self.shared
            && let Ok(Some(recorded)) = shared.owner(session).await
        {
            self.owners
                .with(|map| map.insert(session.clone(), recorded.clone()));
            owner = Some(recorded);
        }
        match session_access(owner.as_ref(), &Owner::of(principal)) {
            Ok(()) => Ok(()),
            Err(refusal) => {
                auth.record_refusal(&refusal, admitted.facts());
                Err(refused(auth, &refusal, Value::Null))
            }
        }
    }

    /// A GET (a session's stream) or a DELETE (a session's end): rmcp's, not calls. A stream
    /// ends by the stream time (the client may open it again); a deleted session's binding and
    /// taint sources are forgotten, and the DELETE is answered as the SDKs' servers answer it
    /// ([`session_end_answer`]).
    async fn stream_or_delete(&self, request: Request<Incoming>, admitted: &Admitted) -> Answer {
        if let Some(auth) = &self.auth {
            auth.record_allow(admitted.facts());
        }
        let deleting = request.method() == Method::DELETE;
        // Asked before rmcp closes it: rmcp's close of a session it never held does nothing.
        let known = match (&admitted.session, deleting) {
            (Some(session), true) => self.session_known(session).await,
            _ => true,
        };
        let response = self.mcp.handle(request).await.map(BodyExt::boxed);
        let response = if deleting {
            match session_end_answer(response.status(), known) {
                SessionEnd::AsRmcp => response,
                SessionEnd::Ended => {
                    if let Some(session) = &admitted.session {
                        self.streams.end(session, self.limits.drain_time).await;
                    }
                    Response::builder()
                        .status(StatusCode::OK)
                        .body(ResponseBody::default())
                        .unwrap_or(response)
                }
                SessionEnd::Unknown => error_response(
                    StatusCode::NOT_FOUND,
                    Value::Null,
                    -32001,
                    "Session not found: it ended or was never opened here; start a new one with initialize",
                ),
            }
        } else {
            response
        };
        let response = if is_event_stream(&response) {
            let deadline = Box::pin(tokio::time::sleep(self.limits.stream_time));
            response.map(|body| {
                let bounded = BoxBody::new(Bounded {
                    inner: body,
                    deadline,
                    on_timeout: None,
                    ended: false,
                    _permit: None,
                });
                match &admitted.session {
                    Some(session) => self.streams.register(session, bounded),
                    None => bounded,
                }
            })
        } else {
            response
        };
        if deleting
            && response.status().is_success()
            && let Some(session) = &admitted.session
        {
            self.forget(std::slice::from_ref(session));
        }
        response
    }

    /// A POST: a call, a response to the server's elicitation, or a notification, bounded in
    /// count, size and time, its tool checked against the token's scopes, then rmcp's.
    async fn call(&self, request: Request<Incoming>, admitted: Admitted) -> Result<Answer, Answer> {
        let permit = self.post_slot()?;
        let (parts, body) = request.into_parts();
        let bytes = self.read_body(body).await?;
        parseable(&bytes)?;
        let id = self.check_scope(&bytes, &admitted)?;
        // One timer bounds both the wait for the response and its body.
        let mut deadline: Deadline = Box::pin(tokio::time::sleep(self.limits.request_time));
        let json_body = parts
            .headers
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        let request = Request::from_parts(parts, Full::new(bytes));
        let response = tokio::select! {
            response = self.mcp.handle(request) => response,
            () = deadline.as_mut() => return Err(timed_out(id.value(), self.limits.request_time)),
        };
        self.bind_opened_session(&admitted, &response).await;
        let response = self
            .explain_rmcp_refusal(response, &id, json_body, &mut deadline)
            .await?;
        Ok(self.bounded(response, deadline, id, permit))
    }

    /// One of the POSTs served at once; past them, 503 with `Retry-After` at once.
    fn post_slot(&self) -> Result<OwnedSemaphorePermit, Answer> {
        self.permits.clone().try_acquire_owned().map_err(|_| {
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
            response
        })
    }

    /// The whole body, within the body time and the size cap. When either is exceeded the rest
    /// of the body is never read, so the connection cannot carry another request: the answer
    /// says so (`Connection: close`), or a client's pool may send its next request into a
    /// socket the server is closing.
    async fn read_body(&self, body: Incoming) -> Result<Bytes, Answer> {
        let read = tokio::time::timeout(
            self.limits.body_time,
            Limited::new(body, self.limits.max_body_bytes).collect(),
        );
        let Ok(read) = read.await else {
            return Err(closing(error_response(
                StatusCode::REQUEST_TIMEOUT,
                Value::Null,
                -32600,
                &format!(
                    "the request body did not arrive within {} s: send it at once",
                    self.limits.body_time.as_secs()
                ),
            )));
        };
        match read {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
                Err(closing(error_response(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    Value::Null,
                    -32600,
                    &format!(
                        "request body over {} bytes: send a smaller request",
                        self.limits.max_body_bytes
                    ),
                )))
            }
            Err(error) => Err(closing(error_response(
                StatusCode::BAD_REQUEST,
                Value::Null,
                -32600,
                &format!("the request body could not be read: {error}"),
            ))),
        }
    }

    /// With authorization, the message's id, method and tool: a tool call outside the
    /// token's scopes is refused, anything else recorded as allowed. Only the scope check
    /// needs the message's fields before rmcp answers; without it the body is parsed once (by
    /// rmcp), and here again only when an answer needs its id or a refusal needs to say it
    /// was not JSON.
    fn check_scope(&self, bytes: &Bytes, admitted: &Admitted) -> Result<RequestId, Answer> {
        let Some(auth) = &self.auth else {
            return Ok(RequestId::InBody(bytes.clone()));
        };
        let Peeked { id, method, tool } = peek(bytes).map_err(|error| not_json(&error))?;
        let facts = RequestFacts {
            http_method: &admitted.http_method,
            rpc_method: method.as_deref(),
            tool: tool.as_deref(),
            principal: admitted.principal.as_ref(),
        };
        if let (Some(principal), Some(tool)) = (&admitted.principal, &tool)
            && let Err(refusal) = auth.check_tool(principal, tool)
        {
            auth.record_refusal(&refusal, facts);
            return Err(refused(auth, &refusal, id));
        }
        auth.record_allow(facts);
        Ok(RequestId::Known(id))
    }

    /// An `initialize` opened a session: it is this principal's from now on. The client
    /// learns the id from this response, so no request can name it before the binding.
    async fn bind_opened_session(&self, admitted: &Admitted, response: &Answer) {
        let (Some(principal), None) = (&admitted.principal, &admitted.session) else {
            return;
        };
        if let Some(opened) = response.headers().get(SESSION_HEADER)
            && let Ok(opened) = opened.to_str()
        {
            let owner = Owner::of(principal);
            if let Some(shared) = &self.shared {
                // Failing, the session still works here; elsewhere it has no owner and is
                // refused (fail closed).
                let _ = shared.bind(opened, &owner).await;
            }
            self.bind(opened, owner).await;
        }
    }

    /// rmcp's plain-text refusals as JSON-RPC errors: a body that is not JSON gets `-32700`,
    /// JSON that is not a JSON-RPC message this server reads (rmcp's 415) `-32600` with rmcp's
    /// reason. Any other response passes unchanged.
    async fn explain_rmcp_refusal(
        &self,
        response: Answer,
        id: &RequestId,
        json_body: bool,
        deadline: &mut Deadline,
    ) -> Result<Answer, Answer> {
        if response.status().is_client_error()
            && let RequestId::InBody(body) = id
            && let Err(error) = peek(body)
        {
            return Err(not_json(&error));
        }
        if json_body && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            let reason = tokio::select! {
                body = response.into_body().collect() => body
                    .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                    .unwrap_or_default(),
                () = deadline.as_mut() => {
                    return Err(timed_out(id.value(), self.limits.request_time));
                }
            };
            return Err(error_response(
                StatusCode::BAD_REQUEST,
                id.value(),
                -32600,
                &format!("Invalid Request: not a JSON-RPC message this server reads ({reason})"),
            ));
        }
        Ok(response)
    }

    /// `response` holding the POST's slot until its body ends, and ending by `deadline`: a
    /// stream then gets a last event with the timeout error for the request `id`.
    fn bounded(
        &self,
        response: Answer,
        deadline: Deadline,
        id: RequestId,
        permit: OwnedSemaphorePermit,
    ) -> Answer {
        let streamed = is_event_stream(&response);
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

    /// Whether `session` is one rmcp holds here or, on a team's store, one any instance
    /// recorded. A store that cannot be read counts it as known: the DELETE goes on to rmcp,
    /// which ends it wherever it is.
    async fn session_known(&self, session: &str) -> bool {
        if self
            .manager
            .has_session(&SessionId::from(session))
            .await
            .unwrap_or(true)
        {
            return true;
        }
        match &self.shared {
            Some(shared) => !matches!(SessionStore::load(shared.as_ref(), session).await, Ok(None)),
            None => false,
        }
    }

    /// Waits until no POST is in flight, up to the drain time.
    pub(super) async fn drain(&self) {
        let all = u32::try_from(self.limits.max_concurrent).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(self.limits.drain_time, self.permits.acquire_many(all)).await;
    }
}

/// Any path but `/mcp` is 404.
fn only_the_mcp_path<B>(request: &Request<B>) -> Result<(), Answer> {
    if request.uri().path() == MCP_PATH {
        return Ok(());
    }
    Err(error_response(
        StatusCode::NOT_FOUND,
        Value::Null,
        -32601,
        &format!("no MCP endpoint here: use {MCP_PATH}"),
    ))
}

/// A body rmcp could not parse (not UTF-8, nested too deep) is a parse error before rmcp sees
/// it.
fn parseable(bytes: &[u8]) -> Result<(), Answer> {
    match unreadable(bytes) {
        None => Ok(()),
        Some(why) => Err(error_response(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32700,
            &format!("Parse error: {why}"),
        )),
    }
}

/// What a DELETE is answered, from rmcp's answer and whether the session it names was known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SessionEnd {
    /// 200 with an empty body: the session ended.
    Ended,
    /// 404: no such session (ended before, or never opened).
    Unknown,
    /// rmcp's own answer: 405 for a 2026-07-28 request (that revision has no sessions), 400
    /// without a session id or with a bad protocol header, 500 when the close failed.
    AsRmcp,
}

/// rmcp answers a DELETE that ended a session with 202 Accepted. The 2025-11-25 revision names
/// no success status for it, and the official SDKs' servers answer 200 with an empty body
/// (TypeScript: `handleDeleteRequest`, `new Response(null, { status: 200 })`; Python:
/// `_handle_delete_request`, 200), while the Python SDK's client logs "Session termination
/// failed: 202" for anything but 200, 204 and 405. So ours is theirs: 200; and, as theirs, 404
/// for a session nobody holds, which the revision says a request naming an ended session gets.
fn session_end_answer(rmcp: StatusCode, known: bool) -> SessionEnd {
    match (rmcp, known) {
        (StatusCode::ACCEPTED | StatusCode::OK | StatusCode::NO_CONTENT, true) => SessionEnd::Ended,
        (StatusCode::ACCEPTED | StatusCode::OK | StatusCode::NO_CONTENT, false) => {
            SessionEnd::Unknown
        }
        _ => SessionEnd::AsRmcp,
    }
}

/// Whether `response` is a server-sent event stream.
fn is_event_stream<B>(response: &Response<B>) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_sdk_client_never_sees_202_for_the_end_of_its_session() {
        // (rmcp's answer, session known, ours)
        let cases = [
            (StatusCode::ACCEPTED, true, SessionEnd::Ended),
            (StatusCode::ACCEPTED, false, SessionEnd::Unknown),
            (StatusCode::OK, true, SessionEnd::Ended),
            (StatusCode::METHOD_NOT_ALLOWED, true, SessionEnd::AsRmcp),
            (StatusCode::METHOD_NOT_ALLOWED, false, SessionEnd::AsRmcp),
            (StatusCode::BAD_REQUEST, false, SessionEnd::AsRmcp),
            (StatusCode::INTERNAL_SERVER_ERROR, true, SessionEnd::AsRmcp),
        ];
        for (rmcp, known, want) in cases {
            assert_eq!(session_end_answer(rmcp, known), want, "{rmcp} {known}");
        }
    }
}
