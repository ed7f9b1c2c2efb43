//! The web console on `toolgate serve --http`, under `/console` on the MCP listener: people sign
//! in through the authorization server `[serve.auth]` trusts and decide the approval tickets
//! that calls are waiting on (the approval inbox).
//!
//! Guarantees:
//! - Sign-in is authorization code + PKCE as an OAuth client of that server ([`signin`]); the
//!   person is the principal of an access token for this server's own resource, checked by the
//!   same resource server that guards `/mcp`. The callback is taken once, and only in the
//!   browser that started the sign-in (a `SameSite=Lax` login cookie scoped to the callback).
//! - Sessions are server-side records with an expiry and a sign-out ([`sessions`]; in the
//!   shared database with a shared store, [`shared_sessions`]); the cookie
//!   that names one is `HttpOnly`, `SameSite=Strict`, scoped to `/console`, and `Secure` unless
//!   the console is on plain http on loopback ([`rules::session_cookie`]).
//! - Every state-changing request (a decision, sign-out) must come from the console's own
//!   origin and carry the session's CSRF token ([`rules::admit_submission`]): else 403, and
//!   nothing is read from its form.
//! - Only approvers (by scope or subject) see the inbox and its tickets, and decide; nobody
//!   decides a call they made themselves unless the configuration allows it at that call's risk
//!   (four eyes, [`rules::may_decide`]): else 403.
//! - A decision names the ticket's binding digest (the form carries it); the store records it
//!   only for that binding, once, before the ticket expires ([`toolgate_core::approval::decidable`]):
//!   else 404 (unknown ticket) or 409 (another call, already decided, expired).
//! - A request for a host name other than the console's own is refused (DNS rebinding).
//! - Every value on a page is escaped, and pages run no script ([`pages`]).
//! - Only auditors (by scope or subject; nobody unless configured) read the audit: its
//!   search, a call's page with its nested calls, and the exports ([`audit`]); else 403.

pub mod audit;
pub mod audit_views;
pub mod pages;
pub mod rules;
pub mod sessions;
pub mod shared_sessions;
pub mod signin;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{COOKIE, HOST, ORIGIN, SET_COOKIE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use minijinja::context;
use serde::Deserialize;
use toolgate_core::approval::inbox::INBOX_LIMIT;
use toolgate_core::approval::{HumanDecision, holder};
use toolgate_core::clock::unix_secs;
use toolgate_core::{ApprovalLedger, BoxFuture, Denial, Risk};
use toolgate_egress::Egress;
use toolgate_mcp::auth::ResourceServer;
use toolgate_mcp::http::Pages;

use pages::{InboxLine, Templates, TicketView, see_other};
use rules::{
    Approvers, Auditors, Submission, admit_submission, may_decide, secure_cookie, session_cookie,
};
use sessions::{Session, SessionBook, SessionRecords};
use signin::SignIn;

/// Where the console is served.
pub const PREFIX: &str = "/console";

/// `[console]` as the configuration gives it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSettings {
    /// The console's client id at the authorization server (a public client: PKCE, no secret).
    pub client_id: String,
    /// Where people reach the console (`https://mcp.example.org`): its sign-in callback is
    /// `ORIGIN/console/callback`, and only requests from this origin change anything. Default:
    /// the listener's own address over http, on loopback only.
    #[serde(default)]
    pub origin: Option<String>,
    /// Who may approve.
    #[serde(default)]
    pub approvers: Approvers,
    /// Who may read the audit (default nobody: see [`Auditors`]).
    #[serde(default)]
    pub auditors: Auditors,
    /// The risks at which the person who made a call may approve it themselves (default none:
    /// four eyes).
    #[serde(default)]
    pub self_approval: Vec<Risk>,
    /// The scopes asked for at sign-in (default: the approvers' scopes).
    #[serde(default)]
    pub sign_in_scopes: Option<Vec<String>>,
    /// How long a session lasts.
    #[serde(default = "default_session_minutes")]
    pub session_minutes: u64,
    /// How long a call waits in the inbox for a decision (at most 110 s: the dispatcher stops
    /// waiting for an approver at 120 s).
    #[serde(default = "default_ticket_secs")]
    pub ticket_secs: u64,
}

fn default_session_minutes() -> u64 {
    480
}

fn default_ticket_secs() -> u64 {
    100
}

/// The longest a ticket may wait (below the dispatcher's approval timeout of 120 s).
pub const MAX_TICKET_SECS: u64 = 110;

/// Why the console cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("[console] origin {0:?} is not an http(s) origin (scheme, host and port, no path)")]
    Origin(String),
    #[error(
        "[console] origin {0} is plain http off loopback: the session cookie would travel in the clear; use https"
    )]
    InsecureOrigin(String),
    #[error("[console] ticket_secs must be between 1 and {MAX_TICKET_SECS}")]
    TicketTime,
    #[error("[console] names no approver (approvers.scopes or approvers.subjects)")]
    NoApprovers,
    #[error(transparent)]
    Templates(#[from] pages::TemplateError),
}

impl ConsoleSettings {
    /// How long an inbox ticket waits, once checked.
    pub fn ticket_time(&self) -> Result<Duration, ConsoleError> {
        if self.ticket_secs == 0 || self.ticket_secs > MAX_TICKET_SECS {
            return Err(ConsoleError::TicketTime);
        }
        Ok(Duration::from_secs(self.ticket_secs))
    }
}

/// The console: its settings, the ledger the inbox reads and decides in, sessions, sign-in.
pub struct Console {
    settings: ConsoleSettings,
    origin: String,
    host: String,
    secure: bool,
    ledger: Arc<ApprovalLedger>,
    /// In memory, or in the shared database ([`Console::with_shared_sessions`]).
    sessions: Box<dyn SessionRecords>,
    signin: SignIn,
    templates: Templates,
    /// The decision records the audit pages read (none: the pages say there is no audit).
    audit: Option<toolgate_store::audit::AuditStore>,
}

/// The inbox as `who` (an approver, whose form token is `csrf`) sees it: the pending tickets of
/// `ledger`, newest first, rendered. What `GET /console` answers once the session is checked.
pub async fn inbox_page(
    templates: &Templates,
    ledger: &ApprovalLedger,
    who: &str,
    csrf: &str,
) -> Response<Full<Bytes>> {
    match ledger.pending(SystemTime::now()).await {
        Ok(tickets) => {
            // A full page means older tickets wait beyond it: the page says so.
            let more = tickets.len() >= INBOX_LIMIT as usize;
            let tickets: Vec<InboxLine> = tickets.iter().map(InboxLine::of).collect();
            templates.page(
                StatusCode::OK,
                "inbox.html",
                context! { tickets, more, limit => INBOX_LIMIT, who, csrf },
            )
        }
        Err(denial) => templates.message(
            StatusCode::SERVICE_UNAVAILABLE,
            "The approval store failed",
            &denial.to_string(),
            Some((who, csrf)),
        ),
    }
}

/// Ticket `token`'s page as `who` (an approver, whose form token is `csrf`) sees it, rendered.
/// What `GET /console/tickets/TOKEN` answers once the session is checked.
pub async fn ticket_page(
    templates: &Templates,
    ledger: &ApprovalLedger,
    token: &str,
    who: &str,
    csrf: &str,
) -> Response<Full<Bytes>> {
    match ledger.ticket(token).await {
        Ok(Some(ticket)) => {
            let now = i64::try_from(unix_secs(SystemTime::now())).unwrap_or(i64::MAX);
            // Which client asked is shown when the ledger noted it; a store that cannot say
            // leaves it unnamed rather than failing the page.
            let client = ledger.client_of(token).await.ok().flatten();
            templates.page(
                StatusCode::OK,
                "ticket.html",
                context! { t => TicketView::of(&ticket, now, client.as_deref()), who, csrf },
            )
        }
        Ok(None) => templates.message(
            StatusCode::NOT_FOUND,
            "No such ticket",
            "No approval ticket has this id.",
            Some((who, csrf)),
        ),
        Err(denial) => templates.message(
            StatusCode::SERVICE_UNAVAILABLE,
            "The approval store failed",
            &denial.to_string(),
            Some((who, csrf)),
        ),
    }
}

/// Where the authorization server is and what this server is to it.
pub struct Authority {
    pub issuer: String,
    pub resource: String,
    pub resource_server: Arc<ResourceServer>,
    /// The exit requests to the authorization server go through.
    pub egress: Arc<Egress>,
}

impl Console {
    /// The console for `settings` at `origin` (the configured one, else `fallback_origin`),
    /// deciding in `ledger`.
    pub fn new(
        settings: ConsoleSettings,
        fallback_origin: &str,
        ledger: Arc<ApprovalLedger>,
        authority: Authority,
    ) -> Result<Console, ConsoleError> {
        let origin = settings
            .origin
            .clone()
            .unwrap_or_else(|| fallback_origin.to_string());
        let url = url::Url::parse(&origin)
            .ok()
            .filter(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host().is_some()
                    && u.path() == "/"
                    && u.query().is_none()
                    && u.username().is_empty()
            })
            .ok_or_else(|| ConsoleError::Origin(origin.clone()))?;
        let secure = secure_cookie(&url);
        if url.scheme() == "http" && secure {
            return Err(ConsoleError::InsecureOrigin(origin));
        }
        settings.ticket_time()?;
        if settings.approvers.scopes.is_empty() && settings.approvers.subjects.is_empty() {
            return Err(ConsoleError::NoApprovers);
        }
        let origin = url.origin().ascii_serialization();
        let host = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_string(),
        };
        let scopes = settings
            .sign_in_scopes
            .clone()
            .unwrap_or_else(|| settings.approvers.scopes.clone());
        let signin = SignIn::new(
            &settings.client_id,
            &format!("{origin}{PREFIX}/callback"),
            &authority.resource,
            scopes,
            &authority.issuer,
            authority.egress,
            authority.resource_server,
        );
        Ok(Console {
            sessions: Box::new(SessionBook::new(Duration::from_secs(
                settings.session_minutes * 60,
            ))),
            settings,
            origin,
            host,
            secure,
            ledger,
            signin,
            templates: Templates::load()?,
            audit: None,
        })
    }

    /// The console reading its audit pages from `store` (the audit the server records into;
    /// a reader, never a second writer).
    pub fn with_audit(mut self, store: toolgate_store::audit::AuditStore) -> Console {
        self.audit = Some(store);
        self
    }

    /// The console keeping its sessions and sign-ins under way in the PostgreSQL database
    /// `conn` is on, so every instance on that database shares them; on any other store they
    /// stay in memory.
    pub fn with_shared_sessions(mut self, conn: toolgate_store::SharedConnection) -> Console {
        let lifetime = self.sessions.lifetime();
        if let Some(shared) = shared_sessions::SharedSessions::on(conn, lifetime) {
            self.sessions = Box::new(shared);
        }
        self
    }

    /// The origin the console answers for.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    async fn route(&self, request: Request<Bytes>) -> Response<Full<Bytes>> {
        let host = request
            .headers()
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if host != self.host {
            return self.templates.message(
                StatusCode::MISDIRECTED_REQUEST,
                "Wrong address",
                "This console answers only at its own address.",
                None,
            );
        }
        let path = request.uri().path().to_string();
        let rest = path.strip_prefix(PREFIX).unwrap_or_default();
        let session = self.session_of(&request).await;
        match (request.method(), rest) {
            (&Method::GET, "" | "/") => self.inbox(session.as_ref()).await,
            (&Method::GET, "/signin") => self.start_sign_in().await,
            (&Method::GET, "/callback") => {
                let binder = request
                    .headers()
                    .get(COOKIE)
                    .and_then(|h| h.to_str().ok())
                    .and_then(|h| rules::cookie_value(h, rules::LOGIN_COOKIE_NAME));
                self.callback(request.uri().query().unwrap_or(""), binder)
                    .await
            }
            (&Method::POST, "/signout") => self.sign_out(&request, session.as_ref()).await,
            (&Method::GET, "/audit") => {
                self.audit_search(request.uri().query().unwrap_or(""), session.as_ref())
                    .await
            }
            (&Method::GET, "/audit/call") => {
                self.audit_call(request.uri().query().unwrap_or(""), session.as_ref())
                    .await
            }
            (&Method::GET, "/audit/export") => {
                self.audit_export(request.uri().query().unwrap_or(""), session.as_ref())
                    .await
            }
            (method, rest) => match rest
                .strip_prefix("/tickets/")
                .map(|t| t.split_once('/').unwrap_or((t, "")))
            {
                Some((token, "")) if method == Method::GET => {
                    self.ticket_page(token, session.as_ref()).await
                }
                Some((token, "decide")) if method == Method::POST => {
                    self.decide(token, &request, session.as_ref()).await
                }
                _ => self.templates.message(
                    StatusCode::NOT_FOUND,
                    "Not found",
                    "There is no such page in the console.",
                    None,
                ),
            },
        }
    }

    /// The session the request's cookie names, with its id.
    /// A session that cannot be read is none: the person is asked to sign in.
    async fn session_of<B>(&self, request: &Request<B>) -> Option<(String, Session)> {
        let header = request.headers().get(COOKIE)?.to_str().ok()?;
        let id = rules::session_of(header)?;
        let session = self.sessions.find(id).await?;
        Some((id.to_string(), session))
    }

    fn signed_in<'a>(&self, session: &'a Session) -> Option<(&'a str, &'a str)> {
        Some((session.principal.id.as_str(), session.csrf.as_str()))
    }

    fn is_approver(&self, session: &Session) -> bool {
        self.settings.approvers.includes(&session.principal)
    }

    fn not_an_approver(&self, session: &Session) -> Response<Full<Bytes>> {
        self.templates.message(
            StatusCode::FORBIDDEN,
            "Not an approver",
            &rules::ApproverRefusal::NotAnApprover.to_string(),
            self.signed_in(session),
        )
    }

    async fn inbox(&self, session: Option<&(String, Session)>) -> Response<Full<Bytes>> {
        let Some((_, session)) = session else {
            return self
                .templates
                .page(StatusCode::OK, "signin.html", context! {});
        };
        if !self.is_approver(session) {
            // An auditor who decides nothing lands on the audit instead.
            if self.settings.auditors.includes(&session.principal) {
                return see_other(&format!("{PREFIX}/audit"));
            }
            return self.not_an_approver(session);
        }
        inbox_page(
            &self.templates,
            &self.ledger,
            &session.principal.id,
            &session.csrf,
        )
        .await
    }

    fn store_failed(&self, denial: &Denial, session: &Session) -> Response<Full<Bytes>> {
        self.templates.message(
            StatusCode::SERVICE_UNAVAILABLE,
            "The approval store failed",
            &denial.to_string(),
            self.signed_in(session),
        )
    }

    async fn start_sign_in(&self) -> Response<Full<Bytes>> {
        let started = match self.signin.start().await {
            Ok(started) => started,
            Err(e) => {
                return self.templates.message(
                    StatusCode::BAD_GATEWAY,
                    "Sign-in is unavailable",
                    &e.to_string(),
                    None,
                );
            }
        };
        match self
            .sessions
            .start_login(&started.state, &started.verifier)
            .await
        {
            Ok(binder) => {
                let mut response = see_other(&started.url);
                let cookie =
                    rules::login_cookie(&binder, self.secure, sessions::LOGIN_TIME.as_secs());
                if let Ok(value) = HeaderValue::from_str(&cookie) {
                    response.headers_mut().insert(SET_COOKIE, value);
                }
                response
            }
            Err(e) => self.templates.message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Sign-in is unavailable",
                &e.to_string(),
                None,
            ),
        }
    }

    async fn callback(&self, query: &str, binder: Option<&str>) -> Response<Full<Bytes>> {
        let mut code = None;
        let mut state = None;
        let mut error = None;
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            match name.as_ref() {
                "code" => code = Some(value.into_owned()),
                "state" => state = Some(value.into_owned()),
                "error" => error = Some(value.into_owned()),
                _ => {}
            }
        }
        let refused = |message: &str| {
            self.templates
                .message(StatusCode::BAD_REQUEST, "Sign-in failed", message, None)
        };
        let verifier = match state.as_deref() {
            Some(state) => self.sessions.finish_login(state, binder).await,
            None => None,
        };
        let Some(verifier) = verifier else {
            return refused(
                "This sign-in was not started here in this browser, was already used, or took too long: sign in again.",
            );
        };
        if let Some(error) = error {
            return refused(&format!("The authorization server said: {error}"));
        }
        let Some(code) = code else {
            return refused("The authorization server sent no code.");
        };
        let principal = match self.signin.finish(&code, &verifier).await {
            Ok(principal) => principal,
            Err(e) => return refused(&e.to_string()),
        };
        match self.sessions.open(principal).await {
            Ok(id) => {
                let mut response = see_other(PREFIX);
                let cookie = session_cookie(&id, self.secure, self.sessions.lifetime().as_secs());
                // The sign-in is done: its login cookie is cleared.
                let cleared = rules::login_cookie("", self.secure, 0);
                for cookie in [cookie, cleared] {
                    if let Ok(value) = HeaderValue::from_str(&cookie) {
                        response.headers_mut().append(SET_COOKIE, value);
                    }
                }
                response
            }
            Err(e) => self.templates.message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Sign-in failed",
                &e.to_string(),
                None,
            ),
        }
    }

    /// The form of a state-changing request, once its origin and CSRF token are checked.
    fn admitted_form(
        &self,
        request: &Request<Bytes>,
        session: &Session,
    ) -> Result<Vec<(String, String)>, Response<Full<Bytes>>> {
        let form: Vec<(String, String)> = url::form_urlencoded::parse(request.body())
            .into_owned()
            .collect();
        let header = |name| {
            request
                .headers()
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
        };
        let submission = Submission {
            origin: header(ORIGIN),
            fetch_site: header(http::HeaderName::from_static("sec-fetch-site")),
            form_token: form
                .iter()
                .find(|(k, _)| k == "csrf")
                .map(|(_, v)| v.as_str()),
        };
        admit_submission(&submission, &self.origin, &session.csrf).map_err(|refusal| {
            self.templates.message(
                StatusCode::FORBIDDEN,
                "Refused",
                &format!("{refusal}: nothing was changed."),
                self.signed_in(session),
            )
        })?;
        Ok(form)
    }

    async fn sign_out(
        &self,
        request: &Request<Bytes>,
        session: Option<&(String, Session)>,
    ) -> Response<Full<Bytes>> {
        let Some((id, session)) = session else {
            return see_other(PREFIX);
        };
        if let Err(refused) = self.admitted_form(request, session) {
            return refused;
        }
        // A sign-out the records did not take is said, never shown as done.
        if let Err(e) = self.sessions.close(id).await {
            return self.templates.message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Sign-out failed",
                &e.to_string(),
                self.signed_in(session),
            );
        }
        let mut response = see_other(PREFIX);
        if let Ok(value) = HeaderValue::from_str(&session_cookie("", self.secure, 0)) {
            response.headers_mut().insert(SET_COOKIE, value);
        }
        response
    }

    async fn ticket_page(
        &self,
        token: &str,
        session: Option<&(String, Session)>,
    ) -> Response<Full<Bytes>> {
        let Some((_, session)) = session else {
            return see_other(PREFIX);
        };
        if !self.is_approver(session) {
            return self.not_an_approver(session);
        }
        ticket_page(
            &self.templates,
            &self.ledger,
            token,
            &session.principal.id,
            &session.csrf,
        )
        .await
    }

    fn no_such_ticket(&self, session: &Session) -> Response<Full<Bytes>> {
        self.templates.message(
            StatusCode::NOT_FOUND,
            "No such ticket",
            "No approval ticket has this id.",
            self.signed_in(session),
        )
    }

    async fn decide(
        &self,
        token: &str,
        request: &Request<Bytes>,
        session: Option<&(String, Session)>,
    ) -> Response<Full<Bytes>> {
        let Some((_, session)) = session else {
            return self.templates.message(
                StatusCode::UNAUTHORIZED,
                "Sign in first",
                "Only a signed-in approver decides.",
                None,
            );
        };
        let form = match self.admitted_form(request, session) {
            Ok(form) => form,
            Err(refused) => return refused,
        };
        let field = |name: &str| {
            form.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let approved = match field("decision") {
            Some("approve") => true,
            Some("decline") => false,
            _ => {
                return self.templates.message(
                    StatusCode::BAD_REQUEST,
                    "No decision",
                    "The form said neither approve nor decline: nothing was recorded.",
                    self.signed_in(session),
                );
            }
        };
        let ticket = match self.ledger.ticket(token).await {
            Ok(Some(ticket)) => ticket,
            Ok(None) => return self.no_such_ticket(session),
            Err(denial) => return self.store_failed(&denial, session),
        };
        if let Err(refusal) = may_decide(
            &session.principal,
            &self.settings.approvers,
            &ticket.holder,
            ticket.request.risk,
            &self.settings.self_approval,
        ) {
            return self.templates.message(
                StatusCode::FORBIDDEN,
                "Refused",
                &format!("{refusal}: nothing was recorded."),
                self.signed_in(session),
            );
        }
        let decision = HumanDecision {
            decided_by: holder(&session.principal),
            approved,
            reason: field("reason")
                .unwrap_or_default()
                .trim()
                .chars()
                .take(500)
                .collect(),
            decided_at_unix: i64::try_from(unix_secs(SystemTime::now())).unwrap_or(i64::MAX),
        };
        let binding = field("binding").unwrap_or_default();
        match self.ledger.decide(token, binding, &decision).await {
            Ok(()) => see_other(&format!("{PREFIX}/tickets/{token}")),
            Err(denial) => {
                let status = match &denial {
                    Denial::UnknownTicket => StatusCode::NOT_FOUND,
                    Denial::BoundToOtherCall | Denial::AlreadyUsed | Denial::Expired => {
                        StatusCode::CONFLICT
                    }
                    Denial::LedgerFailed { .. } => StatusCode::SERVICE_UNAVAILABLE,
                    // `Denial` is non-exhaustive; the store's decide returns none of the others.
                    _ => StatusCode::CONFLICT,
                };
                self.templates.message(
                    status,
                    "Not recorded",
                    &format!("{denial}: nothing was recorded."),
                    self.signed_in(session),
                )
            }
        }
    }
}

impl Pages for Console {
    fn prefix(&self) -> &str {
        PREFIX
    }

    fn answer<'a>(&'a self, request: Request<Bytes>) -> BoxFuture<'a, Response<Full<Bytes>>> {
        Box::pin(self.route(request))
    }
}
