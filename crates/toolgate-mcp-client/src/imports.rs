//! Every configured server's tools, imported: connect, list, review against the pins, plan,
//! declare. What every front end (`toolgate tools`, `ask`, `serve`, `mcp ...`) opens.
//!
//! Guarantees:
//! - a server seen for the first time is pinned as seen, and the lock file is written before
//!   any of its tools is offered; afterwards, a tool whose definition changed, a new tool and
//!   a vanished tool are quarantined: withheld from the registry, and a call to one is refused
//!   with the reason (see [`super::pins`]);
//! - during the session, a server that announces a new tool list is reviewed again at once,
//!   and so is the lock file when it changes (`toolgate mcp accept` beside a running gateway):
//!   a new or changed tool is quarantined, a vanished one withdrawn, a tool pinned again as
//!   declared offered again; a front end learns it from [`Imports::availability`] (announced)
//!   and [`Imports::withholding`] (see [`super::live`]);
//! - a server that cannot be reached does not stop the others: its pinned tools are withheld
//!   with the reason it is unreachable;
//! - a definition we refuse (see [`super::plan`]) is withheld with its reason;
//! - nothing is written but the lock file (on first use, or by [`accept`](Imports::accept)),
//!   and that whole, through a temporary file.
//!
//! Refuses: an unreadable lock file (never treated as empty: that would re-pin whatever a
//! server now says), an unreadable receipts database.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use toolgate_core::health::{Availability, Check, HealthCheck};
use toolgate_core::{Effect, Risk, Tool};
use toolgate_store::SharedConnection;

use super::config::{ServerEntry, Transport};
use super::credentials::{CredentialError, TokenFile, TokenHolder};
use super::forwarded::{DEFAULT_CALL_DEADLINE, Forwarding, Route, declare};
use super::live::{CatalogueWatch, LiveServer, LiveTools, Withholding};
use super::lock::{LockError, PinLock};
use super::oauth::{LoggedIn, LoginClient, OAuthError};
use super::outage::{OutageWatch, WATCH_TICK, Watched};
use super::pins::{Drift, Review, ServerPins, pin, review};
use super::plan::{
    DEFAULT_SAMPLING_MAX_TOKENS, ImportPlan, ImportRefusal, RiskSource, SamplingPolicy,
    ServerRatings, local_name, plan_server,
};
use super::server_requests::{Sampler, SamplingGrant};
use super::upstream::{ConnectOptions, Upstream, UpstreamError, authorization_challenge};
use super::users::{RouteKind, RouteRefusal, UserSessions, route_kind};
use super::vault::TokenVault;
use super::vault_keys::{KeyFileError, VaultKeys};

/// `[mcp]` in `toolgate.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// The `mcpServers` JSON file (as desktop hosts write it).
    pub config: Option<PathBuf>,
    /// The pin lock file. Default: beside the `mcpServers` file, `<its name>.lock.json`.
    pub lock: Option<PathBuf>,
    /// Where forwarded writes are claimed and settled. Default: the user data folder.
    pub receipts: Option<PathBuf>,
    /// Longest one forwarded call may take, in seconds (default 60).
    pub call_timeout_secs: Option<u64>,
    /// Longest a server may take to start and finish the handshake, in seconds (default 30).
    pub connect_timeout_secs: Option<u64>,
    /// Calls in a row that could not reach a server before its calls are refused without
    /// being sent (default 5).
    pub breaker_failures: Option<u32>,
    /// How long a server's calls are refused before one call tries it again, in seconds
    /// (default 30).
    pub breaker_cool_down_secs: Option<u64>,
    /// The OAuth tokens `toolgate mcp login` stores, per (issuer, resource): a file only you
    /// may read (mode 0600; a wider one is refused). Default: the user data folder,
    /// `mcp-tokens.json`.
    pub tokens: Option<PathBuf>,
    /// Each user's own downstream tokens, sealed (for a gateway in front of many users).
    pub vault: Option<VaultSettings>,
    /// Our ratings, per server (by its namespace: the name normalized, `server-everything` →
    /// `server_everything`).
    #[serde(default)]
    pub servers: BTreeMap<String, ServerRatings>,
}

/// `[mcp.vault]` in `toolgate.toml`: where each user's downstream tokens are kept.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VaultSettings {
    /// The key file (`KEY-ID BASE64` per line, the current key first; mode 0600).
    pub keys_file: PathBuf,
    /// The SQLite file of the vault when no shared store is given. Default: the user data
    /// folder, `mcp-vault.sqlite`.
    pub path: Option<PathBuf>,
}

/// The vault file's default name, in the user data folder.
pub const DEFAULT_VAULT_FILE: &str = "mcp-vault.sqlite";

/// The vault `settings` describe: in `shared` (a team's store) when given, else in its SQLite
/// file (`default_path` unless the settings name one).
pub fn open_vault(
    settings: &VaultSettings,
    default_path: &Path,
    shared: Option<SharedConnection>,
) -> Result<Arc<TokenVault>, ImportsError> {
    let keys = Arc::new(VaultKeys::load(&settings.keys_file)?);
    Ok(Arc::new(match shared {
        Some(conn) => TokenVault::on(conn, keys),
        None => TokenVault::open_sqlite(settings.path.as_deref().unwrap_or(default_path), keys)?,
    }))
}

/// The pin lock beside `config`: `servers.json` → `servers.lock.json`.
pub fn default_lock_path(config: &Path) -> PathBuf {
    let stem = config
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "mcp".into());
    config.with_file_name(format!("{stem}.lock.json"))
}

/// Why importing could not start.
#[derive(Debug, thiserror::Error)]
pub enum ImportsError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("cannot open the receipts database {path}: {detail}")]
    Receipts { path: String, detail: String },
    #[error("no server is named `{0}` in the mcpServers file")]
    UnknownServer(String),
    #[error("`{server}` cannot be reached, so nothing can be pinned or accepted: {error}")]
    Unreachable {
        server: String,
        error: UpstreamError,
    },
    #[error(
        "`{server}` now offers a different catalogue (sha256:{seen}) than the one you reviewed (sha256:{expected}), so nothing was pinned: run `toolgate mcp diff {server}` again and accept what it shows"
    )]
    CatalogueChanged {
        server: String,
        expected: String,
        seen: String,
    },
    #[error("ratings name servers the mcpServers file does not have: {0}")]
    RatingsForUnknownServers(String),
    #[error("cannot read the mcpServers file {path}: {detail}")]
    ServersFile { path: String, detail: String },
    #[error("the mcpServers file {path} is refused: {source}")]
    Servers {
        path: String,
        source: super::config::ConfigError,
    },
    #[error("`{server}` is a stdio server: only HTTP servers log in with OAuth")]
    NotHttp { server: String },
    #[error("logging in to `{server}` failed: {error}")]
    Login { server: String, error: OAuthError },
    #[error(transparent)]
    VaultKeys(#[from] KeyFileError),
    #[error(transparent)]
    Vault(#[from] CredentialError),
    #[error(
        "`--as` stores a user's own token in the token vault, and none is configured: set `[mcp.vault] keys_file`"
    )]
    NoVault,
    #[error(
        "the person who signed in is `{subject}`, not `{user}`: the token was not kept; `{user}` must sign in themselves"
    )]
    NotThatUser { user: String, subject: String },
}

/// The options for the servers in the `mcpServers` file `servers_file`, under `settings`:
/// `${VAR}` in it is expanded from `env`; the lock, the receipts database and the token file
/// are where the settings say, else beside the file, at `default_receipts` and at
/// `default_tokens`; HTTP servers are reached through `egress`.
pub fn configured_options(
    settings: &McpSettings,
    servers_file: &Path,
    default_receipts: &Path,
    default_tokens: &Path,
    env: &BTreeMap<String, String>,
    egress: Option<Arc<toolgate_egress::Egress>>,
) -> Result<ImportOptions, ImportsError> {
    let shown = servers_file.display().to_string();
    let text = std::fs::read_to_string(servers_file).map_err(|e| ImportsError::ServersFile {
        path: shown.clone(),
        detail: e.to_string(),
    })?;
    let servers = super::config::parse(&text, env).map_err(|source| ImportsError::Servers {
        path: shown,
        source,
    })?;
    let lock = settings
        .lock
        .clone()
        .unwrap_or_else(|| default_lock_path(servers_file));
    let receipts_path = settings
        .receipts
        .clone()
        .unwrap_or_else(|| default_receipts.to_path_buf());
    let mut options = ImportOptions::new(servers, lock, open_receipts(&receipts_path)?);
    options.ratings = settings.servers.clone();
    if let Some(secs) = settings.call_timeout_secs {
        options.call_deadline = Duration::from_secs(secs.max(1));
    }
    if let Some(secs) = settings.connect_timeout_secs {
        options.connect.connect_timeout = Duration::from_secs(secs.max(1));
    }
    if let Some(failures) = settings.breaker_failures {
        options.connect.breaker.failures_to_open = failures.max(1);
    }
    if let Some(secs) = settings.breaker_cool_down_secs {
        options.connect.breaker.cool_down = Duration::from_secs(secs.max(1));
    }
    options.connect.egress = egress;
    options.connect.tokens = Some(TokenHolder::File(Arc::new(TokenFile::new(
        settings
            .tokens
            .clone()
            .unwrap_or_else(|| default_tokens.to_path_buf()),
    ))));
    Ok(options)
}

/// Logs in to the HTTP server `server` (its namespace or its name as the file gives it) of
/// `options` with OAuth, as [`super::oauth::login`] does, and stores its tokens in
/// `options.connect.tokens`; `show` is given the URL the person must open.
pub async fn login(
    options: &ImportOptions,
    server: &str,
    wait: Duration,
    show: impl FnOnce(&str),
) -> Result<LoggedIn, ImportsError> {
    let tokens = options.connect.tokens.clone();
    login_into(options, server, tokens, wait, show).await
}

/// As [`login`], storing the tokens as `user`'s own in the vault (`toolgate mcp login --as`):
/// what the gateway sends when `user` calls the server's tools.
///
/// When the server's authorization server is the gateway's own (the token's issuer is `user`'s
/// tenant) and its access token names a subject, that subject must be `user`: a person who
/// signed in as someone else is refused and the token is not kept. Another issuer names people
/// in its own terms, so there the person signing in is trusted to be `user`.
pub async fn login_as(
    options: &ImportOptions,
    server: &str,
    user: &toolgate_core::Principal,
    wait: Duration,
    show: impl FnOnce(&str),
) -> Result<LoggedIn, ImportsError> {
    let vault = options.vault.as_ref().ok_or(ImportsError::NoVault)?;
    let holder = TokenHolder::user(vault, user);
    let logged_in = login_into(options, server, Some(holder.clone()), wait, show).await?;
    if logged_in.key.issuer != user.tenant {
        return Ok(logged_in);
    }
    let stored = holder.get(&logged_in.key).await?;
    let subject = stored
        .and_then(|c| c.token_response)
        .and_then(|t| serde_json::to_value(t).ok())
        .and_then(|t| t.get("access_token")?.as_str().map(str::to_string))
        .and_then(|token| super::oauth::jwt_subject(&token));
    match subject {
        Some(subject) if subject != user.id => {
            holder.put(&logged_in.key, None).await?;
            Err(ImportsError::NotThatUser {
                user: user.id.clone(),
                subject,
            })
        }
        Some(_) | None => Ok(logged_in),
    }
}

async fn login_into(
    options: &ImportOptions,
    server: &str,
    tokens: Option<TokenHolder>,
    wait: Duration,
    show: impl FnOnce(&str),
) -> Result<LoggedIn, ImportsError> {
    let (namespace, entry) = options
        .servers
        .iter()
        .find(|(namespace, entry)| *namespace == server || entry.given_name == server)
        .ok_or_else(|| ImportsError::UnknownServer(server.into()))?;
    let Transport::Http { url, .. } = &entry.transport else {
        return Err(ImportsError::NotHttp {
            server: namespace.clone(),
        });
    };
    let failed = |error: OAuthError| ImportsError::Login {
        server: namespace.clone(),
        error,
    };
    let unreachable = |error: UpstreamError| ImportsError::Login {
        server: namespace.clone(),
        error: OAuthError::Unreachable(error.to_string()),
    };
    let egress = options
        .connect
        .egress
        .as_ref()
        .ok_or_else(|| unreachable(UpstreamError::NoEgress))?;
    let tokens = tokens
        .as_ref()
        .ok_or_else(|| failed(OAuthError::Flow("no token file is configured".into())))?;
    let challenge = match authorization_challenge(entry, &options.connect)
        .await
        .map_err(unreachable)?
    {
        Some(challenge) => challenge,
        None => return Err(failed(OAuthError::NotAsked)),
    };
    let client = LoginClient {
        client_id: entry.oauth.client_id.clone(),
        callback_port: entry.oauth.callback_port,
        scopes: entry.oauth.scopes.clone(),
    };
    super::oauth::login(
        url,
        challenge.as_deref(),
        &client,
        tokens,
        egress,
        wait,
        show,
    )
    .await
    .map_err(failed)
}

/// Opens (creating if needed) the SQLite ledger forwarded writes are claimed in.
pub fn open_receipts(path: &Path) -> Result<SharedConnection, ImportsError> {
    let fail = |detail: String| ImportsError::Receipts {
        path: path.display().to_string(),
        detail,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
    }
    let conn = rusqlite::Connection::open(path).map_err(|e| fail(e.to_string()))?;
    toolgate_core::idempotency::install(&conn).map_err(|e| fail(e.to_string()))?;
    Ok(SharedConnection::new(conn, "MCP receipts database"))
}

/// What to import and how.
pub struct ImportOptions {
    pub servers: BTreeMap<String, ServerEntry>,
    pub ratings: BTreeMap<String, ServerRatings>,
    pub lock_path: PathBuf,
    pub receipts: SharedConnection,
    pub connect: ConnectOptions,
    pub call_deadline: Duration,
    /// Each user's own tokens, for servers called with them.
    pub vault: Option<Arc<TokenVault>>,
    /// The front end serves many users (`[serve.auth]`): a server that asks for OAuth is called
    /// with each user's own token unless its `credentials` say `gateway`.
    pub per_user_by_default: bool,
    /// Our model, for the servers whose ratings allow sampling (none: every sampling request
    /// is refused).
    pub sampler: Option<Arc<dyn Sampler>>,
}

impl ImportOptions {
    pub fn new(
        servers: BTreeMap<String, ServerEntry>,
        lock_path: PathBuf,
        receipts: SharedConnection,
    ) -> Self {
        ImportOptions {
            servers,
            ratings: BTreeMap::new(),
            lock_path,
            receipts,
            connect: ConnectOptions::default(),
            call_deadline: DEFAULT_CALL_DEADLINE,
            vault: None,
            per_user_by_default: false,
            sampler: None,
        }
    }
}

/// Where one tool of a server stands.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolState {
    /// Offered, under this plan.
    Offered(ImportPlan),
    /// Pinned and reviewed, but the definition is refused.
    Refused(ImportRefusal),
    /// Held back until reviewed and accepted.
    Quarantined(Drift),
    /// Pinned, but its server cannot be reached.
    Unreachable,
}

/// One tool as `toolgate mcp list` and `toolgate tools` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// The server's own name for it.
    pub remote_name: String,
    /// Ours (`namespace__tool`), when it can have one.
    pub local_name: Option<String>,
    pub state: ToolState,
}

impl ToolEntry {
    /// Risk, effect and source when offered.
    pub fn rating(&self) -> Option<(Risk, Effect, RiskSource)> {
        match &self.state {
            ToolState::Offered(plan) => Some((plan.risk, plan.effect, plan.risk_source)),
            ToolState::Refused(_) | ToolState::Quarantined(_) | ToolState::Unreachable => None,
        }
    }
}

/// One server, imported.
#[derive(Debug)]
pub struct ServerImport {
    pub namespace: String,
    pub given_name: String,
    /// The negotiated revision and the server's name and version, when connected.
    pub connected: Result<(Option<String>, Option<String>), UpstreamError>,
    /// Pinned just now, on first use.
    pub newly_pinned: bool,
    pub tools: Vec<ToolEntry>,
    /// Keys of its entry toolgate does not act on.
    pub ignored_keys: Vec<String>,
    /// How it is called and what its clients see while it is down.
    pub terms: ServerTerms,
}

/// How one server is called, from `[mcp]` and `[mcp.servers.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTerms {
    pub on_outage: super::outage::OutageMode,
    pub call_timeout: Duration,
    pub connect_timeout: Duration,
    /// Calls carry each user's own token (it asks for OAuth and is called per user).
    pub per_user: bool,
}

impl ServerTerms {
    /// One line for `toolgate mcp list` and the other listings.
    pub fn describe(&self) -> String {
        let outage = match self.on_outage {
            super::outage::OutageMode::Fail => "listed, calls refused at once",
            super::outage::OutageMode::Hide => "its tools hidden until it is back",
        };
        let credentials = if self.per_user {
            "; calls carry each user's own token"
        } else {
            ""
        };
        format!(
            "calls time out after {} s, connecting after {} s; while down: {outage}{credentials}",
            self.call_timeout.as_secs(),
            self.connect_timeout.as_secs()
        )
    }
}

/// Every configured server's tools, imported.
pub struct Imports {
    pub servers: Vec<ServerImport>,
    /// The offered tools, declared.
    pub tools: Vec<Tool>,
    /// Local name → why it is not offered.
    pub withheld: BTreeMap<String, String>,
    /// The connected servers, by namespace.
    upstreams: Vec<(String, Arc<Upstream>)>,
    /// Which tools are hidden now because their server is down (`on_outage = "hide"`).
    outage: Arc<OutageWatch>,
    /// What is withheld now because a catalogue or the lock file changed during the session
    /// (and what the outage watch hides).
    live: Arc<CatalogueWatch>,
    /// The catalogues as listed, per connected server.
    catalogues: BTreeMap<String, Vec<Value>>,
    lock: PinLock,
    lock_path: PathBuf,
}

impl std::fmt::Debug for Imports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Imports")
            .field("servers", &self.servers)
            .field("withheld", &self.withheld)
            .finish_non_exhaustive()
    }
}

/// The local name a remote tool is known by in messages, even when it cannot have one.
fn shown_name(namespace: &str, remote: &str) -> String {
    local_name(namespace, remote).unwrap_or_else(|| format!("{namespace}__{remote}"))
}

impl Imports {
    /// Connects to every server, reviews each against the pins (pinning first-seen servers
    /// and saving the lock), and declares what may be offered.
    pub async fn open(options: ImportOptions) -> Result<Imports, ImportsError> {
        let unknown: Vec<&str> = options
            .ratings
            .keys()
            .filter(|name| !options.servers.contains_key(*name))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(ImportsError::RatingsForUnknownServers(unknown.join(", ")));
        }
        let mut lock = PinLock::load(&options.lock_path)?;
        let mut imports = Imports {
            servers: Vec::new(),
            tools: Vec::new(),
            withheld: BTreeMap::new(),
            upstreams: Vec::new(),
            outage: OutageWatch::start(Vec::new(), WATCH_TICK),
            live: CatalogueWatch::start(
                Vec::new(),
                BTreeMap::new(),
                PinLock::default(),
                options.lock_path.clone(),
                OutageWatch::start(Vec::new(), WATCH_TICK),
                WATCH_TICK,
            ),
            catalogues: BTreeMap::new(),
            lock: PinLock::default(),
            lock_path: options.lock_path.clone(),
        };
        let mut watched = Vec::new();
        let mut live = Vec::new();
        let connected = futures_join(&options).await;
        let mut lock_changed = false;
        for ((namespace, entry), connection) in options.servers.iter().zip(connected) {
            let mut server = ServerImport {
                namespace: namespace.clone(),
                given_name: entry.given_name.clone(),
                connected: Ok((None, None)),
                newly_pinned: false,
                tools: Vec::new(),
                ignored_keys: entry.ignored_keys.clone(),
                terms: ServerTerms {
                    on_outage: options
                        .ratings
                        .get(namespace)
                        .map(|r| r.on_outage)
                        .unwrap_or_default(),
                    call_timeout: call_deadline_for(&options, namespace),
                    connect_timeout: connect_options_for(&options, namespace).connect_timeout,
                    per_user: false,
                },
            };
            let pins = lock.servers.get(namespace).cloned();
            let listed = match connection {
                Ok(upstream) => match upstream.list_tools().await {
                    Ok(tools) => Ok((upstream, tools)),
                    Err(e) => {
                        upstream.close().await;
                        Err(e)
                    }
                },
                Err(e) => Err(e),
            };
            let (upstream, catalogue) = match listed {
                Ok(pair) => pair,
                Err(error) => {
                    for remote in pins.iter().flat_map(|p| p.tools.keys()) {
                        let local = shown_name(namespace, remote);
                        imports.withheld.insert(
                            local.clone(),
                            format!("its MCP server `{namespace}` cannot be reached: {error}"),
                        );
                        server.tools.push(ToolEntry {
                            remote_name: remote.clone(),
                            local_name: Some(local),
                            state: ToolState::Unreachable,
                        });
                    }
                    server.connected = Err(error);
                    imports.servers.push(server);
                    continue;
                }
            };
            server.connected = Ok((upstream.revision(), upstream.server_info()));
            let pins = match pins {
                Some(pins) => pins,
                None => {
                    let pins = pin(&catalogue);
                    lock.servers.insert(namespace.clone(), pins.clone());
                    lock_changed = true;
                    server.newly_pinned = true;
                    pins
                }
            };
            let upstream = Arc::new(upstream);
            let ratings = options.ratings.get(namespace);
            // A per-user route without a vault is refused, never the gateway's own session.
            let route = route_kind(
                ratings.and_then(|r| r.credentials),
                options.per_user_by_default,
                upstream.with_token(),
                options.vault.is_some(),
            )
            .and_then(|kind| match kind {
                RouteKind::Shared => Ok(Route::Shared(Arc::clone(&upstream))),
                RouteKind::PerUser => {
                    let vault = options.vault.as_ref().ok_or(RouteRefusal::NoVault)?;
                    Ok(Route::PerUser {
                        listing: Arc::clone(&upstream),
                        users: Arc::new(UserSessions::new(
                            entry.clone(),
                            connect_options_for(&options, namespace),
                            Arc::clone(vault),
                        )),
                    })
                }
            });
            let route = match route {
                Ok(route) => route,
                Err(refusal) => {
                    for remote in pins.tools.keys() {
                        imports.withheld.insert(
                            shown_name(namespace, remote),
                            format!("its MCP server `{namespace}` is not offered: {refusal}"),
                        );
                    }
                    imports.servers.push(server);
                    continue;
                }
            };
            server.terms.per_user = matches!(route, Route::PerUser { .. });
            let forwarding = Forwarding {
                route,
                receipts: options.receipts.clone(),
                deadline: call_deadline_for(&options, namespace),
                sampling: sampling_for(&options, namespace),
            };
            let (entries, tools, withheld) =
                import_server(namespace, &catalogue, &pins, ratings, &forwarding);
            watched.push(Watched {
                mode: ratings.map(|r| r.on_outage).unwrap_or_default(),
                upstream: Arc::clone(&upstream),
                tools: entries
                    .iter()
                    .filter(|e| matches!(e.state, ToolState::Offered(_)))
                    .filter_map(|e| e.local_name.clone())
                    .collect(),
            });
            live.push(LiveServer {
                namespace: namespace.clone(),
                upstream: Arc::clone(&upstream),
                catalogue: catalogue.clone(),
                ratings: ratings.cloned(),
                forwarding,
                declared: entries
                    .iter()
                    .filter_map(|e| match &e.state {
                        ToolState::Offered(plan) => {
                            Some((plan.remote_name.clone(), plan.digest.clone()))
                        }
                        ToolState::Refused(_)
                        | ToolState::Quarantined(_)
                        | ToolState::Unreachable => None,
                    })
                    .collect(),
            });
            server.tools = entries;
            imports.tools.extend(tools);
            imports.withheld.extend(withheld);
            imports.catalogues.insert(namespace.clone(), catalogue);
            imports.upstreams.push((namespace.clone(), upstream));
            imports.servers.push(server);
        }
        if lock_changed {
            lock.save(&options.lock_path)?;
        }
        imports.outage = OutageWatch::start(watched, WATCH_TICK);
        imports.live = CatalogueWatch::start(
            live,
            imports.withheld.clone(),
            lock.clone(),
            options.lock_path.clone(),
            Arc::clone(&imports.outage),
            WATCH_TICK,
        );
        imports.lock = lock;
        Ok(imports)
    }

    /// The pins the lock file holds for `server`.
    pub fn pins(&self, server: &str) -> Option<&ServerPins> {
        self.lock.servers.get(server)
    }

    /// What `server` offers now, as listed.
    pub fn catalogue(&self, server: &str) -> Option<&[Value]> {
        self.catalogues.get(server).map(Vec::as_slice)
    }

    /// The review of `server`'s current catalogue against its pins.
    pub fn review(&self, server: &str) -> Result<Review, ImportsError> {
        let entry = self.server(server)?;
        let catalogue = self.connected_catalogue(entry)?;
        let pins = self.pins(server).cloned().unwrap_or_default();
        Ok(review(&pins, catalogue))
    }

    /// The digest of `server`'s catalogue as this session listed it (the one
    /// [`Imports::accept`] must be given): `toolgate mcp diff` prints it with what it shows.
    pub fn catalogue_digest(&self, server: &str) -> Result<String, ImportsError> {
        let entry = self.server(server)?;
        Ok(pin(self.connected_catalogue(entry)?).catalogue)
    }

    /// Records `server`'s current catalogue as its pins (what `toolgate mcp accept` does) and
    /// saves the lock, only when that catalogue is the one `reviewed` names (its digest, with
    /// or without a `sha256:` prefix, as `toolgate mcp diff` printed it); returns the review
    /// that was accepted. A gateway already running over the same lock file reads it again and
    /// admits what it pins (see [`super::live`]); anything else at its next open.
    ///
    /// Refuses, pinning nothing, a catalogue other than the reviewed one: each command
    /// connects anew, so a server could show one catalogue to `diff` and another to `accept`.
    pub fn accept(&mut self, server: &str, reviewed: &str) -> Result<Review, ImportsError> {
        let accepted = self.review(server)?;
        let entry = self.server(server)?;
        let catalogue = self.connected_catalogue(entry)?;
        let pins = pin(catalogue);
        let expected = reviewed.strip_prefix("sha256:").unwrap_or(reviewed);
        if !expected.eq_ignore_ascii_case(&pins.catalogue) {
            return Err(ImportsError::CatalogueChanged {
                server: server.into(),
                expected: expected.into(),
                seen: pins.catalogue,
            });
        }
        self.lock.servers.insert(server.to_string(), pins);
        self.lock.save(&self.lock_path)?;
        Ok(accepted)
    }

    fn server(&self, server: &str) -> Result<&ServerImport, ImportsError> {
        self.servers
            .iter()
            .find(|s| s.namespace == server)
            .ok_or_else(|| ImportsError::UnknownServer(server.into()))
    }

    fn connected_catalogue(&self, entry: &ServerImport) -> Result<&[Value], ImportsError> {
        if let Err(error) = &entry.connected {
            return Err(ImportsError::Unreachable {
                server: entry.namespace.clone(),
                error: error.clone(),
            });
        }
        Ok(self.catalogue(&entry.namespace).unwrap_or_default())
    }

    /// Which imported tools are hidden now, for a front end's `tools/list`: their server is
    /// down and hides them, or they are quarantined or withdrawn because their server's
    /// catalogue changed during the session (see [`super::live`]); its changes are announced.
    pub fn availability(&self) -> Arc<dyn Availability> {
        Arc::clone(&self.live) as Arc<dyn Availability>
    }

    /// Why an imported tool is withheld now beyond what the registry withholds (it is new,
    /// changed or withdrawn since the session began), for a front end to refuse its calls.
    pub fn withholding(&self) -> Arc<dyn Withholding> {
        Arc::clone(&self.live) as Arc<dyn Withholding>
    }

    /// The imported tools as offered now, for a front end that builds its dispatcher again
    /// when they change: from now on a tool pinned during the session (`toolgate mcp accept`
    /// beside the running gateway) is declared and offered at once, a changed one as pinned
    /// (see [`super::live`]).
    pub fn admitting(&self) -> Arc<dyn LiveTools> {
        self.live.admit();
        Arc::clone(&self.live) as Arc<dyn LiveTools>
    }

    /// Reports every connected server's breaker state through `telemetry` from now on
    /// (`toolgate.upstream.state`, its state now first), so a server that is down from the
    /// start shows before any call reaches it. A call reports through its own telemetry
    /// otherwise, from its first call on.
    pub fn report_states_to(&self, telemetry: &toolgate_core::telemetry::Telemetry) {
        for (namespace, upstream) in &self.upstreams {
            upstream.breaker().report_to(namespace, telemetry);
        }
    }

    /// One health check per connected server: its breaker's state (`closed`, `open`,
    /// `half_open`), not required (the instance serves its other tools while one is down).
    pub fn health_checks(&self) -> Vec<Arc<dyn HealthCheck>> {
        self.upstreams
            .iter()
            .map(|(namespace, upstream)| {
                let check: Arc<dyn HealthCheck> = Arc::new(UpstreamHealth {
                    name: format!("upstream:{namespace}"),
                    upstream: Arc::clone(upstream),
                });
                check
            })
            .collect()
    }

    /// Ends every session (stdio servers exit).
    pub async fn close(self) {
        drop(self.tools);
        // The watchers hold the sessions too; they end at their next tick.
        drop(self.outage);
        drop(self.live);
        for (_, upstream) in self.upstreams {
            if let Ok(upstream) = Arc::try_unwrap(upstream) {
                upstream.close().await;
            }
        }
    }
}

/// A connected server as a health check: ready unless its breaker is open.
struct UpstreamHealth {
    name: String,
    upstream: Arc<Upstream>,
}

impl HealthCheck for UpstreamHealth {
    fn check(&self) -> toolgate_core::BoxFuture<'_, Check> {
        let state = self.upstream.breaker().state();
        Box::pin(async move {
            Check {
                name: self.name.clone(),
                ready: !matches!(state, crate::breaker::BreakerState::Open { .. }),
                required: false,
                state: state.name().into(),
            }
        })
    }
}

/// Connects to every server at once (a slow one does not hold up the others).
/// How `namespace`'s server is connected to: `options.connect`, with its own timeouts.
fn connect_options_for(options: &ImportOptions, namespace: &str) -> ConnectOptions {
    let mut connect = options.connect.clone();
    if let Some(secs) = options
        .ratings
        .get(namespace)
        .and_then(|r| r.connect_timeout_secs)
    {
        connect.connect_timeout = Duration::from_secs(secs.max(1));
    }
    connect.sampling = sampling_for(options, namespace).is_some();
    connect
}

/// The longest one call to `namespace`'s server may take.
fn call_deadline_for(options: &ImportOptions, namespace: &str) -> Duration {
    options
        .ratings
        .get(namespace)
        .and_then(|r| r.call_timeout_secs)
        .map_or(options.call_deadline, |secs| {
            Duration::from_secs(secs.max(1))
        })
}

/// What `namespace`'s server may ask of our model during a call: nothing unless its
/// ratings say `sampling = "allow"` and a model is wired in.
fn sampling_for(options: &ImportOptions, namespace: &str) -> Option<SamplingGrant> {
    let ratings = options.ratings.get(namespace)?;
    match (ratings.sampling, &options.sampler) {
        (SamplingPolicy::Allow, Some(sampler)) => Some(SamplingGrant {
            sampler: Arc::clone(sampler),
            max_tokens: ratings
                .sampling_max_tokens
                .unwrap_or(DEFAULT_SAMPLING_MAX_TOKENS),
        }),
        (SamplingPolicy::Allow, None) | (SamplingPolicy::Deny, _) => None,
    }
}

async fn futures_join(options: &ImportOptions) -> Vec<Result<Upstream, UpstreamError>> {
    let mut set = tokio::task::JoinSet::new();
    for (index, (namespace, entry)) in options.servers.iter().enumerate() {
        let entry = entry.clone();
        let connect = connect_options_for(options, namespace);
        set.spawn(async move { (index, Upstream::connect(&entry, &connect).await) });
    }
    let mut results: Vec<Option<Result<Upstream, UpstreamError>>> =
        (0..options.servers.len()).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        if let Ok((index, result)) = joined
            && let Some(slot) = results.get_mut(index)
        {
            *slot = Some(result);
        }
    }
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| Err(UpstreamError::Spawn("the connecting task failed".into())))
        })
        .collect()
}

pub(crate) type ServerTools = (Vec<ToolEntry>, Vec<Tool>, BTreeMap<String, String>);

/// One connected server's tools: reviewed against `pins`, planned, declared (called through
/// `route`, writes claimed in `receipts`, each call bounded by `deadline`).
pub(crate) fn import_server(
    namespace: &str,
    catalogue: &[Value],
    pins: &ServerPins,
    ratings: Option<&ServerRatings>,
    forwarding: &Forwarding,
) -> ServerTools {
    let reviewed = review(pins, catalogue);
    let mut entries = Vec::new();
    let mut withheld = BTreeMap::new();
    for (remote, drift) in &reviewed.quarantined {
        let local = shown_name(namespace, remote);
        withheld.insert(local.clone(), drift.reason(namespace, remote));
        entries.push(ToolEntry {
            remote_name: remote.clone(),
            local_name: Some(local),
            state: ToolState::Quarantined(drift.clone()),
        });
    }
    let accepted: Vec<Value> = catalogue
        .iter()
        .filter(|tool| {
            tool.get("name")
                .and_then(Value::as_str)
                .is_some_and(|name| reviewed.accepted.iter().any(|a| a == name))
        })
        .cloned()
        .collect();
    let (plans, refused) = plan_server(namespace, &accepted, ratings);
    for (remote, refusal) in refused {
        let local = local_name(namespace, &remote);
        if let Some(local) = &local {
            withheld.insert(
                local.clone(),
                format!("its definition is refused: {refusal}"),
            );
        }
        entries.push(ToolEntry {
            remote_name: remote,
            local_name: local,
            state: ToolState::Refused(refusal),
        });
    }
    let mut tools = Vec::new();
    for plan in plans {
        match declare(&plan, forwarding) {
            Ok(tool) => {
                tools.push(tool);
                entries.push(ToolEntry {
                    remote_name: plan.remote_name.clone(),
                    local_name: Some(plan.local_name.clone()),
                    state: ToolState::Offered(plan),
                });
            }
            Err(e) => {
                let refusal = ImportRefusal::Schema(e.to_string());
                withheld.insert(
                    plan.local_name.clone(),
                    format!("its definition is refused: {refusal}"),
                );
                entries.push(ToolEntry {
                    remote_name: plan.remote_name,
                    local_name: Some(plan.local_name),
                    state: ToolState::Refused(refusal),
                });
            }
        }
    }
    entries.sort_by(|a, b| a.remote_name.cmp(&b.remote_name));
    (entries, tools, withheld)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_sits_beside_the_servers_file() {
        assert_eq!(
            default_lock_path(Path::new("/etc/x/servers.json")),
            PathBuf::from("/etc/x/servers.lock.json")
        );
        assert_eq!(
            default_lock_path(Path::new("mcp.json")),
            PathBuf::from("mcp.lock.json")
        );
    }

    #[test]
    fn a_servers_own_timeouts_override_the_defaults_and_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let receipts = open_receipts(&dir.path().join("r.sqlite")).unwrap();
        let mut options = ImportOptions::new(BTreeMap::new(), dir.path().join("l.json"), receipts);
        options.call_deadline = Duration::from_secs(60);
        options.connect.connect_timeout = Duration::from_secs(30);
        options.ratings = toml::from_str(
            "[slow]\ncall_timeout_secs = 300\nconnect_timeout_secs = 90\n[zero]\ncall_timeout_secs = 0\n[plain]\nrisk = \"low\"",
        )
        .unwrap();
        let cases = [
            ("slow", 300, 90),
            // A zero would refuse every call before it is sent: at least a second.
            ("zero", 1, 30),
            ("plain", 60, 30),
            ("unrated", 60, 30),
        ];
        for (server, call, connect) in cases {
            assert_eq!(
                call_deadline_for(&options, server),
                Duration::from_secs(call),
                "{server}"
            );
            assert_eq!(
                connect_options_for(&options, server).connect_timeout,
                Duration::from_secs(connect),
                "{server}"
            );
        }
    }

    #[test]
    fn mcp_settings_refuse_unknown_keys() {
        let ok: McpSettings = toml::from_str(
            "config = \"servers.json\"\n[servers.everything]\nrisk = \"low\"\neffect = \"read\"\n[servers.everything.tools.add]\nrisk = \"medium\"",
        )
        .unwrap();
        assert_eq!(
            ok.servers["everything"].tools["add"].risk,
            Some(Risk::Medium)
        );
        assert!(toml::from_str::<McpSettings>("confg = \"x\"").is_err());
    }
}
