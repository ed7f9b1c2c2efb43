//! One connection to another MCP server: a stdio child process or a Streamable HTTP session,
//! opened with rmcp's client, listed and called with bounds.
//!
//! Guarantees:
//! - a stdio server gets the official SDKs' short default environment (`HOME`, `LOGNAME`,
//!   `PATH`, `SHELL`, `TERM`, `USER` of ours, shell functions skipped) with its entry's `env`
//!   on top, and nothing else of ours: no API key or token (see [`crate::default_env`]); so an
//!   entry pasted from Claude Desktop, Claude Code or Cursor (`"command": "npx"`, no `env`)
//!   starts as it does there. It runs as the leader of its own process group, so `npx`'s
//!   grandchildren die with it; its program must be an absolute path or be found on the `PATH`
//!   of that environment (the entry's when it names one, else ours); its stderr is drained
//!   into a bounded tail kept for error messages (its control and format characters shown by
//!   name), so it can never block;
//! - an HTTP server is reached only through the egress exit ([`Egress::session_client`]): its
//!   URL passes the allowlist and address checks, the session connects only to the checked
//!   addresses, and no redirect is followed;
//! - an HTTP server that answers 401 gets the token stored for it by `toolgate mcp login`
//!   (see [`super::oauth`]): discovered from its challenge, sent only to it, refreshed when it
//!   expires; a server that does not ask for authorization never sees a token;
//! - both MCP revisions: 2026-07-28 by `server/discover`, falling back to a 2025-11-25
//!   `initialize` for servers that do not know it, unless the caller pins one;
//! - every connect, listing and call is bounded in time; a call that times out or is canceled
//!   is abandoned, which sends the server `notifications/cancelled`;
//! - requests the server makes of us are answered only for the call of ours they belong to
//!   ([`crate::server_requests`]): elicitation put to that call's person, sampling run on our
//!   model only where the server's configuration allows it (declared to the server only
//!   then); outside a call, elicitation is declined and sampling refused;
//! - a server that announces a new tool list (`notifications/tools/list_changed`) is listed
//!   again before the next call ([`Upstream::announced_tools`]), so a tool that changed during
//!   the session is caught before it is called; the gateway's watcher ([`super::live`]) looks
//!   at the same list every tick, so the new list is reviewed against the pins at once: a new
//!   or changed tool quarantined, a vanished one withdrawn, the front end's sessions told.
//!
//! Refuses: a program that is not found under those rules (the error names the program and
//! the `PATH` searched), a relative program path with a directory (`bin/server`: relative to
//! what is not said), an unreachable or refused URL, a
//! server that does not finish the handshake in time, a server that asks for authorization
//! when no token is stored for it (the error says to run `toolgate mcp login SERVER`), or
//! whose authorization metadata fails our checks.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::breaker::{Breaker, BreakerSettings};

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::ErrorData;
#[allow(deprecated)] // Sampling's types: deprecated in 2026-07-28, still answered.
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, FormElicitationCapability, Implementation, MetaObject, ProtocolVersion,
    RequestMetaObject, SamplingCapability, SamplingMessage, SamplingMessageContentBlock,
    UrlElicitationCapability,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RunningService,
};
use rmcp::transport::auth::AuthClient;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;
use toolgate_core::CancelToken;
use toolgate_egress::Egress;

use super::config::{ServerEntry, Transport};
use super::credentials::TokenHolder;
use super::default_env::{child_environment, our_value};
use super::oauth::{self, Stored};
use super::server_requests::{InFlightCalls, SampleRequest, SampleRole, SamplingRefused};
use toolgate_core::{Asked, QuestionAnswer};

/// Lines of a stdio server's stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 40;
/// Longest stderr line kept, in bytes.
const STDERR_LINE_BYTES: usize = 400;
/// Largest JSON response accepted from an HTTP server: far above any result we pass on (8 KiB
/// by default), far below rmcp's 16 MiB.
const MAX_HTTP_RESPONSE_BYTES: usize = 1024 * 1024;

/// How connections are made.
#[derive(Clone)]
pub struct ConnectOptions {
    /// The handshake (and, for stdio, the program's start).
    pub connect_timeout: Duration,
    /// One `tools/list` (all pages).
    pub list_timeout: Duration,
    /// `None`: 2026-07-28 with a fallback to 2025-11-25; `Some`: only that revision.
    pub revision: Option<ProtocolVersion>,
    /// The exit HTTP servers are reached through; without one, HTTP servers are refused.
    pub egress: Option<Arc<Egress>>,
    /// Whose OAuth tokens a server that asks for authorization gets: the ones `toolgate mcp
    /// login` stored, or one user's in the vault; without any, such a server is refused with
    /// the advice to log in.
    pub tokens: Option<TokenHolder>,
    /// When the server's calls are refused for a while after failing to reach it.
    pub breaker: BreakerSettings,
    /// Declare sampling to the server (its `[mcp.servers.NAME]` allows it).
    pub sampling: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(30),
            list_timeout: Duration::from_secs(30),
            revision: None,
            egress: None,
            tokens: None,
            breaker: BreakerSettings::default(),
            sampling: false,
        }
    }
}

/// Why a server could not be reached or answered badly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    #[error(
        "`{command}` is not an absolute path, and there is no PATH to find it on (neither the entry's env nor toolgate's own environment sets one) or it names a directory relative to nothing said: give the program's full path"
    )]
    NoPath { command: String },
    #[error(
        "`{command}` was not found on the server's PATH ({path}): install it there, give its full path, or set \"PATH\" in the entry's env"
    )]
    NotFound { command: String, path: String },
    #[error("the server could not be started: {0}")]
    Spawn(String),
    #[error("the server's URL is refused by the egress exit: {0}")]
    Egress(String),
    #[error("HTTP servers are reached through the egress exit, and none is configured")]
    NoEgress,
    #[error("a header is refused: {0}")]
    BadHeader(String),
    #[error(
        "the server asks for authorization (OAuth) and no token is stored for it: run `toolgate mcp login {server}`"
    )]
    AuthorizationRequired { server: String },
    #[error(
        "`{server}` asks for authorization, and this gateway calls it with each user's own token: `{user}` has none for it; connect with `toolgate mcp login {server} --as {user}`"
    )]
    UserNotConnected { server: String, user: String },
    #[error("OAuth with the server failed: {0}")]
    OAuth(String),
    #[error("the MCP handshake failed: {detail}{stderr}")]
    Handshake { detail: String, stderr: String },
    #[error("the server did not {what} within {seconds} s{stderr}")]
    Timeout {
        what: &'static str,
        seconds: u64,
        stderr: String,
    },
    #[error("the server's answer is unusable: {0}")]
    Protocol(String),
    /// The server answered with a JSON-RPC error: `said` is its message, the server's own
    /// words (untrusted, unbounded as received), kept out of the display on purpose.
    #[error("the server answered with a JSON-RPC error (code {code})")]
    Refused { code: i32, said: String },
    #[error("the connection to the server is lost: {0}")]
    Gone(String),
    #[error("the call was canceled")]
    Canceled,
}

impl UpstreamError {
    /// This error in our own words, and the server's words it carries (a JSON-RPC error's
    /// message, the tail of its stderr, what a failed handshake or lost session reported),
    /// which are untrusted and never belong in a trusted message.
    pub fn ours_and_theirs(&self) -> (String, Option<String>) {
        match self {
            UpstreamError::Refused { said, .. } => (self.to_string(), Some(said.clone())),
            UpstreamError::Handshake { detail, stderr } => (
                "the MCP handshake failed".into(),
                Some(format!("{detail}{stderr}")),
            ),
            UpstreamError::Timeout {
                what,
                seconds,
                stderr,
            } if !stderr.is_empty() => (
                format!("the server did not {what} within {seconds} s"),
                Some(stderr.clone()),
            ),
            UpstreamError::Gone(detail) => (
                "the connection to the server is lost".into(),
                Some(detail.clone()),
            ),
            UpstreamError::NoPath { .. }
            | UpstreamError::NotFound { .. }
            | UpstreamError::Spawn(_)
            | UpstreamError::Egress(_)
            | UpstreamError::NoEgress
            | UpstreamError::BadHeader(_)
            | UpstreamError::AuthorizationRequired { .. }
            | UpstreamError::UserNotConnected { .. }
            | UpstreamError::OAuth(_)
            | UpstreamError::Timeout { .. }
            | UpstreamError::Protocol(_)
            | UpstreamError::Canceled => (self.to_string(), None),
        }
    }

    /// Whether the request surely never reached the server (nothing can have happened).
    pub fn never_sent(&self) -> bool {
        match self {
            UpstreamError::NoPath { .. }
            | UpstreamError::NotFound { .. }
            | UpstreamError::Spawn(_)
            | UpstreamError::Egress(_)
            | UpstreamError::NoEgress
            | UpstreamError::BadHeader(_)
            | UpstreamError::AuthorizationRequired { .. }
            | UpstreamError::UserNotConnected { .. }
            | UpstreamError::OAuth(_)
            | UpstreamError::Handshake { .. } => true,
            UpstreamError::Timeout { .. }
            | UpstreamError::Refused { .. }
            | UpstreamError::Protocol(_)
            | UpstreamError::Gone(_)
            | UpstreamError::Canceled => false,
        }
    }
}

/// A failed request as an [`UpstreamError`]: a JSON-RPC error answer keeps the server's
/// words apart from ours; anything else means the session is gone.
fn service_error(error: rmcp::ServiceError, stderr: &str) -> UpstreamError {
    match error {
        rmcp::ServiceError::McpError(data) => UpstreamError::Refused {
            code: data.code.0,
            said: data.message.into_owned(),
        },
        other => UpstreamError::Gone(format!("{other}{stderr}")),
    }
}

/// The last lines a stdio server wrote to stderr.
#[derive(Debug, Default)]
struct StderrTail {
    lines: VecDeque<String>,
}

impl StderrTail {
    fn push(&mut self, line: &str) {
        if self.lines.len() == STDERR_TAIL_LINES {
            self.lines.pop_front();
        }
        // A server's stderr is shown in error messages on a terminal: its control and
        // format characters by name, so it cannot rewrite what is around it.
        self.lines.push_back(toolgate_core::observation::cut_string(
            &toolgate_core::display::visible_line(line),
            STDERR_LINE_BYTES,
        ));
    }
}

/// How we answer a server: our client info; its elicitation and sampling requests answered
/// for the call of ours they belong to ([`crate::server_requests`]); a new tool list noted.
#[derive(Clone)]
struct UpstreamHandler {
    config: ClientConfig,
    tools_changed: Arc<AtomicBool>,
    calls: InFlightCalls,
}

impl ClientHandler for UpstreamHandler {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        // Outside a call of ours nobody is waiting on this server: declined, as before.
        let Ok(call) = self.calls.asking() else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let (message, asked) = question_of(request)?;
        Ok(elicit_result(call.elicit(message, asked).await))
    }

    #[allow(deprecated)] // Sampling is deprecated in 2026-07-28, and still ours to answer.
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let call = self
            .calls
            .asking()
            .map_err(|e| ErrorData::invalid_request(format!("sampling refused: {e}"), None))?;
        let request =
            sample_request(params).map_err(|e| ErrorData::invalid_request(e.to_string(), None))?;
        let sampled = call
            .sample(request)
            .await
            .map_err(|e| ErrorData::invalid_request(format!("sampling refused: {e}"), None))?;
        let message = SamplingMessage::new(
            rmcp::model::Role::Assistant,
            SamplingMessageContentBlock::text(sampled.text),
        );
        let stop = if sampled.at_limit {
            CreateMessageResult::STOP_REASON_END_MAX_TOKEN
        } else {
            CreateMessageResult::STOP_REASON_END_TURN
        };
        Ok(CreateMessageResult::new(message, sampled.model).with_stop_reason(stop))
    }
}

/// A server's elicitation as the question we put to the person; a form whose schema cannot be
/// written back as JSON is refused.
fn question_of(request: ElicitRequestParams) -> Result<(String, Asked), ErrorData> {
    match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => {
            let schema = serde_json::to_value(requested_schema)
                .map_err(|e| ErrorData::invalid_params(format!("requestedSchema: {e}"), None))?;
            Ok((message, Asked::Form { schema }))
        }
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            Ok((message, Asked::Url { url }))
        }
        // rmcp's enum is non-exhaustive: a mode we do not know is not shown to anyone.
        _ => Err(ErrorData::invalid_params(
            "toolgate knows only the form and url elicitation modes",
            None,
        )),
    }
}

fn elicit_result(answer: QuestionAnswer) -> ElicitResult {
    match answer {
        QuestionAnswer::Accept(content) => {
            let result = ElicitResult::new(ElicitationAction::Accept);
            if content.is_empty() {
                result
            } else {
                result.with_content(Value::Object(content))
            }
        }
        QuestionAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
        QuestionAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}

/// A server's sampling request as our model is given it: text only, no tools.
#[allow(deprecated)] // Sampling's types are deprecated in 2026-07-28, and still in use.
fn sample_request(params: CreateMessageRequestParams) -> Result<SampleRequest, SamplingRefused> {
    if params.tools.as_ref().is_some_and(|tools| !tools.is_empty()) {
        return Err(SamplingRefused::ToolsOffered);
    }
    let mut messages = Vec::new();
    for message in params.messages {
        let role = match message.role {
            rmcp::model::Role::User => SampleRole::User,
            rmcp::model::Role::Assistant => SampleRole::Assistant,
        };
        let mut text = String::new();
        for block in message.content.into_vec() {
            match block {
                SamplingMessageContentBlock::Text(block) => {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&block.text);
                }
                SamplingMessageContentBlock::Image(_) => {
                    return Err(SamplingRefused::NotText("an image"));
                }
                SamplingMessageContentBlock::Audio(_) => {
                    return Err(SamplingRefused::NotText("audio"));
                }
                SamplingMessageContentBlock::ToolUse(_) => {
                    return Err(SamplingRefused::NotText("a tool call"));
                }
                SamplingMessageContentBlock::ToolResult(_) => {
                    return Err(SamplingRefused::NotText("a tool result"));
                }
                // rmcp's enum is non-exhaustive: a block we do not know is not passed on.
                _ => return Err(SamplingRefused::NotText("a block of an unknown kind")),
            }
        }
        messages.push((role, text));
    }
    Ok(SampleRequest {
        server: String::new(),
        server_system: params.system_prompt,
        messages,
        max_tokens: params.max_tokens,
        temperature: params.temperature,
    })
}

/// A connected server.
pub struct Upstream {
    service: RunningService<RoleClient, UpstreamHandler>,
    stderr: Arc<Mutex<StderrTail>>,
    list_timeout: Duration,
    tools_changed: Arc<AtomicBool>,
    /// The tool list as last listed after the server announced a change.
    announced: tokio::sync::Mutex<Option<Arc<Vec<Value>>>>,
    /// Refuses the server's calls for a while after they could not reach it.
    breaker: Breaker,
    /// The server asked for authorization and got a token.
    with_token: bool,
    /// Our calls in flight, which the server's requests are answered for.
    calls: InFlightCalls,
    /// An HTTP server's host (`server.address` on the spans of its calls).
    address: Option<String>,
    /// `pipe` for a stdio server, `tcp` for HTTP (`network.transport`).
    transport: &'static str,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("revision", &self.revision())
            .finish_non_exhaustive()
    }
}

/// Our client's info: elicitation in both modes (routed to the person, see
/// [`crate::server_requests`]), and sampling only when the server may sample.
fn client_config(revision: ProtocolVersion, sampling: bool) -> ClientConfig {
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = Some(
        ElicitationCapability::new()
            .with_form(FormElicitationCapability::default())
            .with_url(UrlElicitationCapability::new()),
    );
    if sampling {
        #[allow(deprecated)] // Deprecated in 2026-07-28, still answered when allowed.
        {
            capabilities.sampling = Some(SamplingCapability::default());
        }
    }
    ClientConfig::new(
        capabilities,
        Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(revision)
}

fn lifecycle(revision: Option<&ProtocolVersion>) -> ClientLifecycleMode {
    match revision {
        Some(v) if *v == ProtocolVersion::V_2025_11_25 => ClientLifecycleMode::Initialize,
        Some(v) => ClientLifecycleMode::Discover {
            preferred_versions: vec![v.clone()],
        },
        None => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
    }
}

/// `command` as the program to run: itself when absolute, else its first match on the `PATH`
/// of `env` (the child's whole environment, [`child_environment`]), as a host's SDK finds it.
pub fn resolve_program(
    command: &str,
    env: &BTreeMap<String, String>,
    is_file: impl Fn(&Path) -> bool,
) -> Result<PathBuf, UpstreamError> {
    let path = Path::new(command);
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let Some(search) = env.get("PATH") else {
        return Err(UpstreamError::NoPath {
            command: command.into(),
        });
    };
    if command.contains('/') {
        // A relative path with a directory is relative to the child's directory: ambiguous
        // under a cleared environment, so refused like a missing PATH.
        return Err(UpstreamError::NoPath {
            command: command.into(),
        });
    }
    std::env::split_paths(search)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .find(|candidate| is_file(candidate))
        .ok_or_else(|| UpstreamError::NotFound {
            command: command.into(),
            path: search.clone(),
        })
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl Upstream {
    /// Connects to `entry` (see the module doc for the rules).
    pub async fn connect(
        entry: &ServerEntry,
        options: &ConnectOptions,
    ) -> Result<Upstream, UpstreamError> {
        let stderr = Arc::new(Mutex::new(StderrTail::default()));
        let revision = options
            .revision
            .clone()
            .unwrap_or(ProtocolVersion::V_2025_11_25);
        let tools_changed = Arc::new(AtomicBool::new(false));
        let calls = InFlightCalls::default();
        let info = UpstreamHandler {
            config: client_config(revision, options.sampling),
            tools_changed: Arc::clone(&tools_changed),
            calls: calls.clone(),
        };
        let mode = lifecycle(options.revision.as_ref());
        let mut with_token = false;
        let started = match &entry.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let env = child_environment(our_value, env);
                let program = resolve_program(command, &env, is_executable_file)?;
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args).env_clear().envs(&env);
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                let mut wrapped = CommandWrap::from(cmd);
                wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
                let (process, child_stderr) = TokioChildProcess::builder(wrapped)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| UpstreamError::Spawn(e.to_string()))?;
                if let Some(child_stderr) = child_stderr {
                    let tail = Arc::clone(&stderr);
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(child_stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            if let Ok(mut tail) = tail.lock() {
                                tail.push(&line);
                            }
                        }
                    });
                }
                tokio::time::timeout(
                    options.connect_timeout,
                    info.serve_with_lifecycle(process, mode),
                )
                .await
            }
            Transport::Http { url, headers } => {
                let egress = options.egress.as_ref().ok_or(UpstreamError::NoEgress)?;
                let plain =
                    http_handshake(url, headers, egress, None, &info, &mode, options).await?;
                match plain {
                    Ok(Err(e)) if e.is_authorization_required() => {
                        let challenge = e.auth_challenge().map(str::to_string);
                        let manager = tokio::time::timeout(
                            options.connect_timeout,
                            stored_manager(entry, url, challenge.as_deref(), options, egress),
                        )
                        .await
                        .map_err(|_| UpstreamError::Timeout {
                            what: "finish OAuth discovery",
                            seconds: options.connect_timeout.as_secs(),
                            stderr: String::new(),
                        })??;
                        match http_handshake(
                            url,
                            headers,
                            egress,
                            Some(manager),
                            &info,
                            &mode,
                            options,
                        )
                        .await?
                        {
                            // Refused with the stored token even after a refresh: it was
                            // revoked or is for other scopes; a new login is the fix.
                            Ok(Err(e)) if e.is_authorization_required() => {
                                return Err(not_logged_in(entry, options));
                            }
                            authorized => {
                                with_token = true;
                                authorized
                            }
                        }
                    }
                    plain => plain,
                }
            }
        };
        let tail_now = |tail: &Arc<Mutex<StderrTail>>| stderr_text(tail);
        let service = match started {
            Err(_) => {
                return Err(UpstreamError::Timeout {
                    what: "finish the MCP handshake",
                    seconds: options.connect_timeout.as_secs(),
                    stderr: tail_now(&stderr),
                });
            }
            Ok(Err(e)) if e.is_authorization_required() => {
                return Err(not_logged_in(entry, options));
            }
            Ok(Err(e)) => {
                // Give the child a moment to explain itself on stderr.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Err(UpstreamError::Handshake {
                    detail: e.to_string(),
                    stderr: tail_now(&stderr),
                });
            }
            Ok(Ok(service)) => service,
        };
        Ok(Upstream {
            service,
            stderr,
            list_timeout: options.list_timeout,
            tools_changed,
            announced: tokio::sync::Mutex::new(None),
            breaker: Breaker::new(options.breaker),
            with_token,
            calls,
            address: match &entry.transport {
                Transport::Http { url, .. } => url::Url::parse(url)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_string)),
                Transport::Stdio { .. } => None,
            },
            transport: match entry.transport {
                Transport::Http { .. } => "tcp",
                Transport::Stdio { .. } => "pipe",
            },
        })
    }

    /// The calls of ours in flight on this session, which its requests are answered for.
    pub fn in_flight(&self) -> &InFlightCalls {
        &self.calls
    }

    /// An HTTP server's host; `None` for a stdio server.
    pub fn address(&self) -> Option<&str> {
        self.address.as_deref()
    }

    /// How the session reaches the server: `pipe` (stdio) or `tcp` (HTTP).
    pub fn network_transport(&self) -> &'static str {
        self.transport
    }

    /// Whether the server asked for authorization and this session carries a token.
    pub fn with_token(&self) -> bool {
        self.with_token
    }

    /// The server's breaker: whether its calls are let through now.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// The server's tool list as it is now, if it has announced a change since we connected
    /// (listed again when it announced one since the last look); `None` while it announced
    /// none.
    pub async fn announced_tools(&self) -> Result<Option<Arc<Vec<Value>>>, UpstreamError> {
        let mut announced = self.announced.lock().await;
        if self.tools_changed.swap(false, Ordering::SeqCst) {
            match self.list_tools().await {
                Ok(tools) => *announced = Some(Arc::new(tools)),
                Err(e) => {
                    // Look again next time: the change is still unreviewed.
                    self.tools_changed.store(true, Ordering::SeqCst);
                    return Err(e);
                }
            }
        }
        Ok(announced.clone())
    }

    /// The negotiated protocol revision.
    pub fn revision(&self) -> Option<String> {
        self.service
            .peer_info()
            .map(|info| info.protocol_version.to_string())
    }

    /// The server's name and version, as it gives them.
    pub fn server_info(&self) -> Option<String> {
        let info = self.service.peer_info()?;
        let implementation = info.server_info.as_ref()?;
        Some(format!(
            "{} {}",
            implementation.name, implementation.version
        ))
    }

    /// Every tool the server offers (all pages), as MCP `Tool` objects.
    pub async fn list_tools(&self) -> Result<Vec<Value>, UpstreamError> {
        let listed = tokio::time::timeout(self.list_timeout, self.service.list_all_tools())
            .await
            .map_err(|_| UpstreamError::Timeout {
                what: "list its tools",
                seconds: self.list_timeout.as_secs(),
                stderr: stderr_text(&self.stderr),
            })?
            .map_err(|e| service_error(e, &stderr_text(&self.stderr)))?;
        listed
            .iter()
            .map(|tool| {
                serde_json::to_value(tool).map_err(|e| UpstreamError::Protocol(e.to_string()))
            })
            .collect()
    }

    /// Calls the server's tool `name` with `arguments` and `meta`, for at most `deadline`,
    /// abandoned when `cancel` fires. The result is the MCP `CallToolResult` as JSON.
    pub async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        deadline: Duration,
        cancel: &CancelToken,
    ) -> Result<Value, UpstreamError> {
        let mut params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
        if !meta.is_empty() {
            params.meta = Some(RequestMetaObject(MetaObject(meta)));
        }
        let call = self.service.call_tool(params);
        let result = tokio::select! {
            result = tokio::time::timeout(deadline, call) => result,
            () = cancel.canceled() => return Err(UpstreamError::Canceled),
        };
        let result = result
            .map_err(|_| UpstreamError::Timeout {
                what: "answer the call",
                seconds: deadline.as_secs(),
                stderr: String::new(),
            })?
            .map_err(|e| service_error(e, ""))?;
        serde_json::to_value(result).map_err(|e| UpstreamError::Protocol(e.to_string()))
    }

    /// What a stdio server last wrote to stderr (empty for HTTP).
    pub fn stderr_tail(&self) -> String {
        stderr_text(&self.stderr)
    }

    /// Ends the session (a stdio server's process group is killed if it does not exit).
    pub async fn close(mut self) {
        let _ = self
            .service
            .close_with_timeout(Duration::from_secs(3))
            .await;
    }
}

type Handshake = Result<
    Result<RunningService<RoleClient, UpstreamHandler>, rmcp::service::ClientInitializeError>,
    tokio::time::error::Elapsed,
>;

/// One MCP handshake with the HTTP server at `url` through the egress exit, with `manager`'s
/// tokens when given.
async fn http_handshake(
    url: &str,
    headers: &BTreeMap<String, String>,
    egress: &Arc<Egress>,
    manager: Option<rmcp::transport::auth::AuthorizationManager>,
    info: &UpstreamHandler,
    mode: &ClientLifecycleMode,
    options: &ConnectOptions,
) -> Result<Handshake, UpstreamError> {
    let client = egress
        .session_client(url)
        .await
        .map_err(|e| UpstreamError::Egress(e.to_string()))?;
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(header_map(headers)?)
        .max_json_response_size(MAX_HTTP_RESPONSE_BYTES);
    let info = info.clone();
    let mode = mode.clone();
    Ok(match manager {
        None => {
            let transport = StreamableHttpClientTransport::with_client(client, config);
            tokio::time::timeout(
                options.connect_timeout,
                info.serve_with_lifecycle(transport, mode),
            )
            .await
        }
        Some(manager) => {
            let transport = StreamableHttpClientTransport::with_client(
                AuthClient::new(client, manager),
                config,
            );
            tokio::time::timeout(
                options.connect_timeout,
                info.serve_with_lifecycle(transport, mode),
            )
            .await
        }
    })
}

/// The error for a server that asks for authorization and gets no usable token from
/// `options.tokens`: whose login would fix it.
fn not_logged_in(entry: &ServerEntry, options: &ConnectOptions) -> UpstreamError {
    match &options.tokens {
        Some(TokenHolder::Vault { user, .. }) => UpstreamError::UserNotConnected {
            server: entry.given_name.clone(),
            user: user.clone(),
        },
        Some(TokenHolder::File(_)) | None => UpstreamError::AuthorizationRequired {
            server: entry.given_name.clone(),
        },
    }
}

/// The manager holding the stored tokens for `entry`'s server, which asked for authorization
/// with `challenge`.
async fn stored_manager(
    entry: &ServerEntry,
    url: &str,
    challenge: Option<&str>,
    options: &ConnectOptions,
    egress: &Arc<Egress>,
) -> Result<rmcp::transport::auth::AuthorizationManager, UpstreamError> {
    let not_logged_in = || not_logged_in(entry, options);
    let tokens = options.tokens.as_ref().ok_or_else(not_logged_in)?;
    match oauth::stored_authorization(url, challenge, tokens, egress).await {
        Ok(Stored::Authorized(manager)) => Ok(*manager),
        Ok(Stored::NotLoggedIn(_)) => Err(not_logged_in()),
        Err(e) => Err(UpstreamError::OAuth(e.to_string())),
    }
}

/// The `WWW-Authenticate` challenge `entry`'s server answers a handshake without a token
/// with: `Ok(None)` when it does not ask for authorization (the handshake succeeded), `Ok(Some(None))`
/// when it answers 401 without a challenge.
pub async fn authorization_challenge(
    entry: &ServerEntry,
    options: &ConnectOptions,
) -> Result<Option<Option<String>>, UpstreamError> {
    let Transport::Http { url, headers } = &entry.transport else {
        return Ok(None);
    };
    let egress = options.egress.as_ref().ok_or(UpstreamError::NoEgress)?;
    let info = UpstreamHandler {
        config: client_config(
            options
                .revision
                .clone()
                .unwrap_or(ProtocolVersion::V_2025_11_25),
            options.sampling,
        ),
        tools_changed: Arc::new(AtomicBool::new(false)),
        calls: InFlightCalls::default(),
    };
    let mode = lifecycle(options.revision.as_ref());
    match http_handshake(url, headers, egress, None, &info, &mode, options).await? {
        Err(_) => Err(UpstreamError::Timeout {
            what: "answer the MCP handshake",
            seconds: options.connect_timeout.as_secs(),
            stderr: String::new(),
        }),
        Ok(Err(e)) if e.is_authorization_required() => {
            Ok(Some(e.auth_challenge().map(str::to_string)))
        }
        Ok(Err(e)) => Err(UpstreamError::Handshake {
            detail: e.to_string(),
            stderr: String::new(),
        }),
        Ok(Ok(mut service)) => {
            let _ = service.close_with_timeout(Duration::from_secs(3)).await;
            Ok(None)
        }
    }
}

fn stderr_text(tail: &Arc<Mutex<StderrTail>>) -> String {
    let Ok(tail) = tail.lock() else {
        return String::new();
    };
    if tail.lines.is_empty() {
        return String::new();
    }
    let lines: Vec<&str> = tail.lines.iter().map(String::as_str).collect();
    format!("; its stderr ends with:\n{}", lines.join("\n"))
}

fn header_map(
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, UpstreamError> {
    headers
        .iter()
        .map(|(name, value)| {
            let header = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| UpstreamError::BadHeader(format!("`{name}` is not a header name")))?;
            let value = http::HeaderValue::from_str(value).map_err(|_| {
                UpstreamError::BadHeader(format!("the value of `{name}` is not a header value"))
            })?;
            Ok((header, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(path: Option<&str>) -> BTreeMap<String, String> {
        path.map(|p| [("PATH".to_string(), p.to_string())].into())
            .unwrap_or_default()
    }

    #[test]
    fn program_is_looked_up_only_on_the_servers_own_path() {
        let exists = |p: &Path| p == Path::new("/opt/node/bin/npx");
        let cases = [
            ("/usr/bin/node", None, Ok(PathBuf::from("/usr/bin/node"))),
            (
                "npx",
                Some("/nope:/opt/node/bin"),
                Ok(PathBuf::from("/opt/node/bin/npx")),
            ),
            (
                "npx",
                None,
                Err(UpstreamError::NoPath {
                    command: "npx".into(),
                }),
            ),
            (
                "npx",
                Some("relative/bin:/nope"),
                Err(UpstreamError::NotFound {
                    command: "npx".into(),
                    path: "relative/bin:/nope".into(),
                }),
            ),
            (
                "bin/npx",
                Some("/opt/node"),
                Err(UpstreamError::NoPath {
                    command: "bin/npx".into(),
                }),
            ),
        ];
        for (command, path, want) in cases {
            assert_eq!(
                resolve_program(command, &env(path), exists),
                want,
                "{command}"
            );
        }
    }

    #[test]
    fn stderr_tail_is_bounded_in_lines_and_bytes() {
        let mut tail = StderrTail::default();
        for i in 0..100 {
            tail.push(&format!("{i} {}", "x".repeat(1000)));
        }
        assert_eq!(tail.lines.len(), STDERR_TAIL_LINES);
        assert!(tail.lines[0].starts_with("60 "));
        assert!(tail.lines.iter().all(|l| l.len() <= STDERR_LINE_BYTES + 40));
        tail.push("ok\u{1b}[1A\u{1b}[2K\u{202e}");
        assert_eq!(tail.lines.back().unwrap(), "ok<ESC>[1A<ESC>[2K<U+202E>");
    }

    #[test]
    fn only_errors_before_sending_count_as_never_sent() {
        assert!(UpstreamError::NoEgress.never_sent());
        assert!(!UpstreamError::Gone("reset".into()).never_sent());
        assert!(
            !UpstreamError::Timeout {
                what: "answer the call",
                seconds: 1,
                stderr: String::new()
            }
            .never_sent()
        );
    }
}
