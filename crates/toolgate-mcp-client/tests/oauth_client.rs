//! toolgate as an OAuth client of MCP servers, end to end on 127.0.0.1: a real authorization
//! server (npm oidc-provider, `support/oidc.rs`, with dynamic client registration on), our own
//! notes server as the OAuth resource server (`Access::OAuth`), and the client: `login` runs as
//! `toolgate mcp login` does while the test plays the browser (follows the authorization URL,
//! fills in oidc-provider's development login and consent forms, and lets the redirect hit the
//! callback listener); then `Imports::open` imports the server's tools and a call goes through.
//! Each other test is named after what it prevents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "mcp_client/calls.rs"]
#[allow(dead_code)]
mod calls;

// The server crate's test support, shared (its tests use it too), not copied.
#[path = "../../toolgate-mcp/tests/support/oidc.rs"]
mod oidc;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use oidc::{AuthServer, TestKey};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate_core::{CallOutcome, Principal};
use toolgate_egress::{AllowEntry, Egress, EgressConfig, StaticResolver};
use toolgate_mcp::auth::{AUTH_CONTENT_TYPES, AuthConfig, ResourceServer};
use toolgate_mcp::http::{Access, serve_http_with};
use toolgate_mcp::{HttpLimits, McpServer};
use toolgate_mcp_client::config::parse;
use toolgate_mcp_client::credentials::{CredentialKey, TokenFile, TokenHolder};
use toolgate_mcp_client::imports::{ImportOptions, Imports, ImportsError, login, open_receipts};
use toolgate_mcp_client::oauth::OAuthError;
use toolgate_mcp_client::plan::ServerRatings;
use toolgate_mcp_client::upstream::{ConnectOptions, UpstreamError};
use toolgate_wiring::{ExitsConfig, Seat, Store, StoreKind, ToolsetName, assemble};

const SCOPES: [&str; 2] = ["notes:read", "notes:write"];
const WAIT: Duration = Duration::from_secs(30);

/// Our notes server at `http://127.0.0.1:<port><path>` as a resource server whose resource is
/// `resource` (its URL unless a test says otherwise), trusting `issuer`; stops when dropped.
struct NotesServer {
    url: String,
    port: u16,
    /// Its decision records (JSONL): who called which tool.
    trace: PathBuf,
    _stop: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

impl NotesServer {
    /// (principal, tool) of every call it decided, in order.
    fn callers(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(&self.trace)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|record| {
                Some((
                    record.get("principal")?.as_str()?.to_string(),
                    record.get("gen_ai.tool.name")?.as_str()?.to_string(),
                ))
            })
            .collect()
    }
}

async fn notes_server(
    listener: tokio::net::TcpListener,
    resource: &str,
    issuer: &str,
) -> NotesServer {
    let dir = tempfile::tempdir().unwrap();
    let port = listener.local_addr().unwrap().port();
    let store = Store::open_or_init(StoreKind::Notes, &dir.path().join("notes.sqlite")).unwrap();
    let trace = dir.path().join("trace.jsonl");
    let seat = Seat::new(Principal::local("local-user", &[])).with_trace(Arc::new(
        toolgate_core::trace::JsonlTrace::create(&trace).unwrap(),
    ));
    let ready =
        toolgate_wiring::dispatcher(ToolsetName::Notes, &store, &ExitsConfig::default(), seat)
            .unwrap();
    let server = McpServer::new(ready, "oauth-upstream");
    let mut scopes = BTreeMap::new();
    scopes.insert(
        "notes:read".to_string(),
        vec!["notes_search".to_string(), "notes_get".to_string()],
    );
    scopes.insert("notes:write".to_string(), vec!["notes".to_string()]);
    let stop = serve_protected("notes", server, listener, resource, issuer, scopes).await;
    NotesServer {
        url: format!("http://127.0.0.1:{port}/mcp"),
        port,
        trace,
        _stop: stop,
        _dir: dir,
    }
}

/// Serves `server` (of `toolset`) on `listener` as an OAuth resource server for `resource`,
/// trusting `issuer`, granting tools by `scopes`; stops when the sender is dropped.
async fn serve_protected(
    toolset: &str,
    server: McpServer,
    listener: tokio::net::TcpListener,
    resource: &str,
    issuer: &str,
    scopes: BTreeMap<String, Vec<String>>,
) -> tokio::sync::oneshot::Sender<()> {
    let tools: Vec<String> = server.tools().iter().map(|t| t.name.to_string()).collect();
    let mut config = AuthConfig::new(issuer, resource, scopes);
    config.clock_skew_secs = 5;
    let as_port = url::Url::parse(issuer).unwrap().port().unwrap();
    let egress = toolgate_wiring::ExitsConfig::new(allow_ports(&[as_port]).clone(), None)
        .egress_answering(&AUTH_CONTENT_TYPES, Arc::new(toolgate_core::trace::NoTrace))
        .unwrap();
    let resource_server = ResourceServer::start(&config, toolset, &tools, egress)
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve_http_with(
        server,
        listener,
        HttpLimits::default(),
        Access::OAuth(Arc::new(resource_server)),
        async {
            let _ = stopped.await;
        },
    ));
    stop
}

fn allow_ports(ports: &[u16]) -> EgressConfig {
    EgressConfig {
        allow: vec![AllowEntry {
            host: "127.0.0.1".into(),
            schemes: vec!["http".into()],
            ports: Some(ports.to_vec()),
            allow_private: true,
        }],
        ..EgressConfig::default()
    }
}

fn egress(ports: &[u16]) -> Arc<Egress> {
    Arc::new(
        Egress::new(
            allow_ports(ports),
            Arc::new(StaticResolver::new()),
            Arc::new(toolgate_core::trace::NoTrace),
        )
        .unwrap(),
    )
}

fn port_of(url: &str) -> u16 {
    url::Url::parse(url).unwrap().port().unwrap()
}

async fn bound() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    (listener, url)
}

/// The client side: an `mcpServers` document, a token file, a lock and receipts, in a folder.
struct Client {
    dir: tempfile::TempDir,
}

impl Client {
    fn new() -> Client {
        Client {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn tokens_path(&self) -> PathBuf {
        self.dir.path().join("mcp-tokens.json")
    }

    fn tokens(&self) -> TokenFile {
        TokenFile::new(self.tokens_path())
    }

    /// Options for `servers` (an `mcpServers` object), reached through `egress`.
    fn options(&self, servers: Value, egress: Arc<Egress>) -> ImportOptions {
        let text = json!({"mcpServers": servers}).to_string();
        let parsed = parse(&text, &BTreeMap::new()).unwrap();
        let receipts = open_receipts(&self.dir.path().join("receipts.sqlite")).unwrap();
        let mut options =
            ImportOptions::new(parsed, self.dir.path().join("servers.lock.json"), receipts);
        let ratings: BTreeMap<String, ServerRatings> = toml::from_str(
            "[notes]\nrisk = \"low\"\neffect = \"read\"\n[notes_two]\nrisk = \"low\"\neffect = \"read\"",
        )
        .unwrap();
        options.ratings = ratings
            .into_iter()
            .filter(|(name, _)| options.servers.contains_key(name))
            .collect();
        options.connect = ConnectOptions {
            egress: Some(egress),
            tokens: Some(TokenHolder::File(Arc::new(self.tokens()))),
            ..ConnectOptions::default()
        };
        options
    }
}

/// Logs in to `server` of `options` while playing the browser; the login's outcome.
async fn login_as_browser(
    options: &ImportOptions,
    server: &str,
) -> Result<toolgate_mcp_client::oauth::LoggedIn, ImportsError> {
    let (show, browser) = browser_of("alice");
    let outcome = login(options, server, WAIT, show).await;
    browser.check(outcome.is_ok()).await;
    outcome
}

/// A person (`name` at the authorization server's login form) waiting for a login to show them
/// its URL.
struct WaitingBrowser(tokio::task::JoinHandle<Option<(u16, String)>>);

impl WaitingBrowser {
    /// After a successful login, the callback page said so.
    async fn check(self, logged_in: bool) {
        if let (Some((status, body)), true) = (self.0.await.unwrap(), logged_in) {
            assert_eq!(status, 200, "the callback page: {body}");
        }
    }
}

/// The `show` a login hands its URL to, and the browser `name` follows it in.
fn browser_of(name: &'static str) -> (impl FnOnce(&str), WaitingBrowser) {
    let (url_tx, url_rx) = tokio::sync::oneshot::channel::<String>();
    let browser = tokio::spawn(async move {
        let Ok(url) = url_rx.await else {
            return None;
        };
        Some(Browser::named(name).authorize(&url).await)
    });
    let show = move |url: &str| {
        let _ = url_tx.send(url.to_string());
    };
    (show, WaitingBrowser(browser))
}

/// A person's browser, as far as oidc-provider's development interactions need one: cookies,
/// redirects followed by hand, the login form (any name) and the consent form submitted.
struct Browser {
    http: reqwest::Client,
    cookies: BTreeMap<String, String>,
    /// What the login form is filled in with: the subject of the tokens.
    name: &'static str,
}

impl Browser {
    fn named(name: &'static str) -> Browser {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Browser {
            name,
            http: reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            cookies: BTreeMap::new(),
        }
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> reqwest::Response {
        let cookie = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let request = if cookie.is_empty() {
            request
        } else {
            request.header("cookie", cookie)
        };
        let response = request.send().await.expect("the page answers");
        for set in response.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let pair = set.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            let expired = set
                .to_ascii_lowercase()
                .contains("expires=thu, 01 jan 1970");
            if value.is_empty() || expired {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_string(), value.to_string());
            }
        }
        response
    }

    /// Follows the authorization URL to the redirect back to the client; the status and body
    /// of the callback page.
    async fn authorize(&mut self, url: &str) -> (u16, String) {
        let mut current = url::Url::parse(url).unwrap();
        let mut form: Option<Vec<(&str, &str)>> = None;
        for _ in 0..16 {
            let request = match form.take() {
                Some(fields) => self
                    .http
                    .post(current.clone())
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(oidc::form_urlencoded(&fields)),
                None => self.http.get(current.clone()),
            };
            let response = self.send(request).await;
            let status = response.status().as_u16();
            if let Some(location) = response.headers().get("location") {
                current = current.join(location.to_str().unwrap()).unwrap();
                if current.path() == "/callback" {
                    // The redirect back to toolgate's listener: the end of the browser's part.
                    let page = self.http.get(current.clone()).send().await.unwrap();
                    let status = page.status().as_u16();
                    return (status, page.text().await.unwrap());
                }
                continue;
            }
            let body = response.text().await.unwrap();
            assert_eq!(status, 200, "{current}: {body}");
            if body.contains(r#"name="prompt" value="login""#) {
                form = Some(vec![
                    ("prompt", "login"),
                    ("login", self.name),
                    ("password", "x"),
                ]);
            } else if body.contains(r#"name="prompt" value="consent""#) {
                form = Some(vec![("prompt", "consent")]);
            } else {
                panic!("an unexpected page at {current}: {body}");
            }
        }
        panic!("the authorization did not come back within 16 pages");
    }
}

async fn call(imports: &Imports, tool: &str, args: Value) -> CallOutcome {
    let ready = calls::dispatcher(imports, Seat::new(Principal::local("local-user", &[])));
    calls::call(&ready, tool, args).await
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn connect_error(imports: &Imports, server: &str) -> UpstreamError {
    imports
        .servers
        .iter()
        .find(|s| s.namespace == server)
        .unwrap()
        .connected
        .clone()
        .unwrap_err()
}

/// One authorization server and two notes servers (two resources) behind it.
struct Env {
    auth: AuthServer,
    one: NotesServer,
    two: NotesServer,
}

async fn env() -> Env {
    let (first, one_url) = bound().await;
    let (second, two_url) = bound().await;
    let auth = AuthServer::start_with(
        &[&one_url, &two_url],
        &SCOPES,
        &[TestKey::generate("k1")],
        300,
        &["--registration"],
    );
    let issuer = auth.issuer();
    let one = notes_server(first, &one_url, &issuer).await;
    let two = notes_server(second, &two_url, &issuer).await;
    Env { auth, one, two }
}

impl Env {
    fn servers(&self) -> Value {
        json!({
            "notes": {"type": "http", "url": self.one.url},
            "notes_two": {"type": "http", "url": self.two.url},
        })
    }

    fn egress(&self) -> Arc<Egress> {
        egress(&[self.one.port, self.two.port, port_of(&self.auth.issuer())])
    }
}

#[tokio::test]
async fn login_stores_a_private_token_per_resource_and_imported_calls_carry_it() {
    let env = env().await;
    let client = Client::new();
    let options = client.options(env.servers(), env.egress());

    let one = login_as_browser(&options, "notes").await.unwrap();
    assert_eq!(one.key, CredentialKey::new(env.auth.issuer(), &env.one.url));
    assert!(one.scopes.contains(&"notes:read".to_string()), "{one:?}");
    let two = login_as_browser(&options, "notes_two").await.unwrap();
    assert_eq!(two.key, CredentialKey::new(env.auth.issuer(), &env.two.url));

    // One private file, one entry per (issuer, resource), each with its own token.
    assert_eq!(mode(&client.tokens_path()), 0o600);
    let entries = client.tokens().entries().unwrap();
    let mut keys: Vec<&CredentialKey> = entries.iter().map(|e| &e.key).collect();
    keys.sort();
    let mut want = vec![&one.key, &two.key];
    want.sort();
    assert_eq!(keys, want);
    let token = |key: &CredentialKey| -> Value {
        let entry = entries.iter().find(|e| e.key == *key).unwrap();
        serde_json::to_value(entry.credentials.token_response.as_ref().unwrap()).unwrap()
    };
    let (first, second) = (token(&one.key), token(&two.key));
    assert_ne!(first["access_token"], second["access_token"]);
    // Each token names its own server as the audience.
    for (entry, resource) in [(&first, &env.one.url), (&second, &env.two.url)] {
        let (_, claims) = oidc::decode_unverified(entry["access_token"].as_str().unwrap());
        assert_eq!(claims["aud"], json!(resource));
        assert_eq!(claims["iss"], json!(env.auth.issuer()));
        assert_eq!(claims["sub"], json!("alice"));
    }

    let imports = Imports::open(client.options(env.servers(), env.egress()))
        .await
        .unwrap();
    for server in &imports.servers {
        assert!(server.connected.is_ok(), "{server:?}");
    }
    let outcome = call(
        &imports,
        "notes__notes_search",
        json!({"query": "anything"}),
    )
    .await;
    assert!(
        outcome.observation().is_some(),
        "the call failed: {:?}",
        outcome.result
    );
    imports.close().await;
}

#[tokio::test]
async fn a_server_that_asks_for_oauth_without_a_stored_token_says_to_log_in() {
    let env = env().await;
    let client = Client::new();
    let imports = Imports::open(client.options(env.servers(), env.egress()))
        .await
        .unwrap();
    let error = connect_error(&imports, "notes");
    assert_eq!(
        error,
        UpstreamError::AuthorizationRequired {
            server: "notes".into()
        }
    );
    assert!(
        error.to_string().contains("run `toolgate mcp login notes`"),
        "{error}"
    );
    assert!(imports.tools.is_empty());
    assert!(!client.tokens_path().exists(), "nothing is written");
    imports.close().await;
}

#[tokio::test]
async fn a_token_file_readable_by_others_is_refused_and_left_alone() {
    let env = env().await;
    let client = Client::new();
    let options = client.options(env.servers(), env.egress());
    login_as_browser(&options, "notes").await.unwrap();
    std::fs::set_permissions(client.tokens_path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::read(client.tokens_path()).unwrap();

    let imports = Imports::open(client.options(env.servers(), env.egress()))
        .await
        .unwrap();
    let error = connect_error(&imports, "notes").to_string();
    assert!(error.contains("chmod 600"), "{error}");
    assert!(imports.tools.is_empty());
    imports.close().await;
    // A new login is refused too, and the file is neither rewritten nor narrowed behind the
    // person's back.
    let refused = login_as_browser(&options, "notes").await.unwrap_err();
    assert!(refused.to_string().contains("chmod 600"), "{refused}");
    assert_eq!(mode(&client.tokens_path()), 0o644);
    assert_eq!(std::fs::read(client.tokens_path()).unwrap(), before);
}

#[tokio::test]
async fn an_authorization_server_off_the_egress_allowlist_is_never_contacted() {
    let env = env().await;
    let client = Client::new();
    // Only the MCP server is allowed, not the authorization server.
    let options = client.options(env.servers(), egress(&[env.one.port]));
    let error = login_as_browser(&options, "notes").await.unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(
            error,
            ImportsError::Login {
                error: OAuthError::Flow(_),
                ..
            }
        ),
        "{text}"
    );
    assert!(text.contains("blocked by the egress exit"), "{text}");
    assert!(!client.tokens_path().exists());
}

#[tokio::test]
async fn protected_resource_metadata_for_another_resource_is_refused() {
    // The server at /mcp says, in its metadata, that it is the resource /other: a token asked
    // for that resource must not be sent to it.
    let (listener, url) = bound().await;
    let other = url.replace("/mcp", "/other");
    let auth = AuthServer::start_with(
        &[&other],
        &SCOPES,
        &[TestKey::generate("k1")],
        300,
        &["--registration"],
    );
    let server = notes_server(listener, &other, &auth.issuer()).await;
    assert_eq!(server.url, url);
    let client = Client::new();
    let options = client.options(
        json!({"notes": {"type": "http", "url": url}}),
        egress(&[server.port, port_of(&auth.issuer())]),
    );
    let error = login_as_browser(&options, "notes").await.unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(
            error,
            ImportsError::Login {
                error: OAuthError::Refused(_),
                ..
            }
        ),
        "{text}"
    );
    assert!(text.contains("resource mismatch"), "{text}");
    assert!(!client.tokens_path().exists());
}

#[tokio::test]
async fn an_authorization_server_whose_metadata_names_another_issuer_is_refused() {
    // A resource whose metadata points at an authorization server at /as on its own origin,
    // which serves the real provider's metadata: its issuer is not the one it was found at (a
    // mix-up), so nothing may be registered, asked or stored.
    let auth = AuthServer::start_with(
        &["http://127.0.0.1:1/mcp"],
        &SCOPES,
        &[TestKey::generate("k1")],
        300,
        &["--registration"],
    );
    let real_metadata = auth.discovery().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let origin = format!("http://127.0.0.1:{port}");
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    tokio::spawn(tampering_server(
        listener,
        origin.clone(),
        real_metadata,
        Arc::clone(&seen),
    ));
    let client = Client::new();
    let options = client.options(
        json!({"notes": {"type": "http", "url": format!("{origin}/mcp")}}),
        egress(&[port, port_of(&auth.issuer())]),
    );
    let error = login_as_browser(&options, "notes").await.unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(
            error,
            ImportsError::Login {
                error: OAuthError::Refused(_),
                ..
            }
        ),
        "{text}"
    );
    assert!(text.contains("issuer mismatch"), "{text}");
    assert!(!client.tokens_path().exists());
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .all(|p| !p.contains("reg") && !p.contains("token")),
        "{seen:?}"
    );
}

/// An MCP server that asks for OAuth and names an authorization server whose metadata it
/// copies from a real one (so its `issuer` is not where it is served); records the paths asked.
async fn tampering_server(
    listener: tokio::net::TcpListener,
    origin: String,
    metadata: Value,
    seen: Arc<std::sync::Mutex<Vec<String>>>,
) {
    for _ in 0..64 {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let mut buf = vec![0u8; 16 * 1024];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(0);
        let head = String::from_utf8_lossy(&buf[..n]).to_string();
        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
        seen.lock().unwrap().push(path.clone());
        let (status, extra, body) = if path == "/mcp" {
            (
                "401 Unauthorized",
                format!(
                    "www-authenticate: Bearer resource_metadata=\"{origin}/.well-known/oauth-protected-resource/mcp\"\r\n"
                ),
                String::new(),
            )
        } else if path.starts_with("/.well-known/oauth-protected-resource") {
            (
                "200 OK",
                String::new(),
                json!({"resource": format!("{origin}/mcp"),
                       "authorization_servers": [format!("{origin}/as")]})
                .to_string(),
            )
        } else if path.contains("/.well-known/") {
            ("200 OK", String::new(), metadata.to_string())
        } else {
            ("404 Not Found", String::new(), String::new())
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
    }
}

#[tokio::test]
async fn an_expired_token_is_refreshed_and_stored_again_before_the_server_sees_it() {
    // Access tokens live 4 s; rmcp refreshes once less than half their life is left.
    let (listener, url) = bound().await;
    let auth = AuthServer::start_with(
        &[&url],
        &SCOPES,
        &[TestKey::generate("k1")],
        4,
        &["--registration"],
    );
    let server = notes_server(listener, &url, &auth.issuer()).await;
    let client = Client::new();
    let servers = json!({"notes": {"type": "http", "url": url}});
    let ports = [server.port, port_of(&auth.issuer())];
    let options = client.options(servers.clone(), egress(&ports));
    let logged_in = login_as_browser(&options, "notes").await.unwrap();
    let access_token = |file: &TokenFile| -> (String, bool) {
        let stored = file.get(&logged_in.key).unwrap().unwrap();
        let token = serde_json::to_value(stored.token_response.unwrap()).unwrap();
        (
            token["access_token"].as_str().unwrap().to_string(),
            token["refresh_token"].is_string(),
        )
    };
    let (first, has_refresh) = access_token(&client.tokens());
    assert!(
        has_refresh,
        "a dynamically registered client gets a refresh token"
    );

    tokio::time::sleep(Duration::from_secs(3)).await;
    let imports = Imports::open(client.options(servers, egress(&ports)))
        .await
        .unwrap();
    assert!(
        imports.servers[0].connected.is_ok(),
        "{:?}",
        imports.servers
    );
    let outcome = call(&imports, "notes__notes_search", json!({"query": "x"})).await;
    assert!(outcome.observation().is_some(), "{:?}", outcome.result);
    let (second, _) = access_token(&client.tokens());
    assert_ne!(
        first, second,
        "the refreshed token replaced the old one in the file"
    );
    assert_eq!(mode(&client.tokens_path()), 0o600);
    imports.close().await;
}

#[tokio::test]
async fn a_preregistered_client_logs_in_on_its_callback_port_with_the_scopes_its_entry_names() {
    let callback_port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let (listener, url) = bound().await;
    let redirect = format!("http://127.0.0.1:{callback_port}/callback");
    let auth = AuthServer::start_with(
        &[&url],
        &SCOPES,
        &[TestKey::generate("k1")],
        300,
        &["--redirect-uri", &redirect],
    );
    let server = notes_server(listener, &url, &auth.issuer()).await;
    let client = Client::new();
    let servers = json!({"notes": {"type": "http", "url": url, "oauth": {
        "clientId": "public-client", "callbackPort": callback_port, "scopes": "notes:read"}}});
    let ports = [server.port, port_of(&auth.issuer())];
    let logged_in = login_as_browser(&client.options(servers.clone(), egress(&ports)), "notes")
        .await
        .unwrap();
    assert_eq!(logged_in.client_id, "public-client");
    assert_eq!(logged_in.scopes, ["notes:read"]);

    let imports = Imports::open(client.options(servers, egress(&ports)))
        .await
        .unwrap();
    // The token grants notes:read only: the server lists just the tools that scope grants.
    let mut names: Vec<&str> = imports.tools.iter().map(|t| t.spec.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["notes__notes_get", "notes__notes_search"]);
    let outcome = call(&imports, "notes__notes_search", json!({"query": "x"})).await;
    assert!(outcome.observation().is_some(), "{:?}", outcome.result);
    imports.close().await;
}

/// A TCP relay on `listener` to 127.0.0.1:`target` that records every bearer token sent
/// through it (what the server behind it was shown); at most 256 connections.
async fn recording_relay(
    listener: tokio::net::TcpListener,
    target: u16,
    seen: Arc<std::sync::Mutex<Vec<String>>>,
) {
    for _ in 0..256 {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let seen = Arc::clone(&seen);
        tokio::spawn(async move {
            let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                return;
            };
            let (mut from_client, mut to_client) = client.into_split();
            let (mut from_server, mut to_server) = server.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
                let _ = to_client.shutdown().await;
            });
            let mut buf = vec![0u8; 16 * 1024];
            let mut pending: Vec<u8> = Vec::new();
            loop {
                let n = match from_client.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.windows(2).position(|w| w == b"\r\n") {
                    let line = String::from_utf8_lossy(&pending[..end]).to_string();
                    pending.drain(..end + 2);
                    if line
                        .to_ascii_lowercase()
                        .starts_with("authorization: bearer ")
                    {
                        seen.lock()
                            .unwrap()
                            .push(line["authorization: bearer ".len()..].into());
                    }
                }
                if pending.len() > 64 * 1024 {
                    pending.clear();
                }
                if to_server.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
            let _ = to_server.shutdown().await;
        });
    }
}

/// (audience, subject) of each recorded token.
fn audiences_and_subjects(seen: &std::sync::Mutex<Vec<String>>) -> Vec<(String, String)> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|token| {
            let (_, claims) = oidc::decode_unverified(token);
            (
                claims["aud"].as_str().unwrap_or_default().to_string(),
                claims["sub"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// What a host of the gateway gets back for `tool`, as the person `name` logged in to it.
async fn call_through_gateway(host: &Client, options: &ImportOptions, tool: &str) -> Value {
    let entry = options.servers.get("gateway").unwrap();
    let upstream = toolgate_mcp_client::upstream::Upstream::connect(entry, &options.connect)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", host.dir.path().display()));
    let result = upstream
        .call(
            tool,
            json!({"query": "budget"}).as_object().unwrap().clone(),
            serde_json::Map::new(),
            WAIT,
            &toolgate_core::CancelToken::new(),
        )
        .await
        .unwrap();
    upstream.close().await;
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_calls_upstreams_with_their_own_token_never_another_users_or_the_front_token() {
    use toolgate_mcp_client::imports::login_as;

    // Two upstream notes servers (our own server as an OAuth resource server), each behind a
    // relay that records the tokens it is shown, and the gateway's front: three resources of
    // one authorization server.
    let (one_listener, _) = bound().await;
    let (one_relay, one_url) = bound().await;
    let (two_listener, _) = bound().await;
    let (two_relay, two_url) = bound().await;
    let (front_listener, front_url) = bound().await;
    let auth = AuthServer::start_with(
        &[&one_url, &two_url, &front_url],
        &SCOPES,
        &[TestKey::generate("k1")],
        300,
        &["--registration"],
    );
    let issuer = auth.issuer();
    let one_port = one_listener.local_addr().unwrap().port();
    let two_port = two_listener.local_addr().unwrap().port();
    let one = notes_server(one_listener, &one_url, &issuer).await;
    let two = notes_server(two_listener, &two_url, &issuer).await;
    let seen_one = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen_two = Arc::new(std::sync::Mutex::new(Vec::new()));
    tokio::spawn(recording_relay(one_relay, one_port, Arc::clone(&seen_one)));
    tokio::spawn(recording_relay(two_relay, two_port, Arc::clone(&seen_two)));
    let ports = [
        port_of(&one_url),
        port_of(&two_url),
        port_of(&front_url),
        port_of(&issuer),
    ];

    // The gateway: both upstreams, each user's tokens sealed in its vault, many users.
    let gateway = Client::new();
    let vault_path = gateway.dir.path().join("vault.sqlite");
    let vault = vault_in(gateway.dir.path());
    let gateway_options = || {
        let mut options = gateway.options(
            json!({"notes": {"type": "http", "url": one_url},
                   "notes_two": {"type": "http", "url": two_url}}),
            egress(&ports),
        );
        options.vault = Some(Arc::clone(&vault));
        options.per_user_by_default = true;
        options
    };
    let user = |id: &str| Principal {
        id: id.into(),
        tenant: issuer.clone(),
        scopes: Arc::default(),
        catalogue: None,
    };
    // The gateway's own login lists and pins the catalogues; alice and bob connect their own
    // accounts to `notes` (`toolgate mcp login notes --as USER`); nobody to `notes_two`.
    for server in ["notes", "notes_two"] {
        let (show, browser) = browser_of("operator");
        let outcome = login(&gateway_options(), server, WAIT, show).await;
        browser.check(outcome.is_ok()).await;
        outcome.unwrap();
    }
    for name in ["alice", "bob"] {
        let (show, browser) = browser_of(name);
        let outcome = login_as(&gateway_options(), "notes", &user(name), WAIT, show).await;
        browser.check(outcome.is_ok()).await;
        assert_eq!(outcome.unwrap().key, CredentialKey::new(&issuer, &one_url));
    }
    let imports = Imports::open(gateway_options()).await.unwrap();
    for server in &imports.servers {
        assert!(server.connected.is_ok(), "{server:?}");
    }
    let assembled = assemble(
        imports.tools.clone(),
        imports.withheld.clone(),
        Seat::new(Principal::local("local-user", &[])),
    )
    .unwrap();
    let front = McpServer::serving(
        &assembled.registry,
        assembled.caller,
        assembled.principal,
        "gateway-run",
    );
    let tool_names: Vec<String> = front.tools().iter().map(|t| t.name.to_string()).collect();
    assert!(
        tool_names.contains(&"notes__notes_search".to_string()),
        "{tool_names:?}"
    );
    let mut front_scopes = BTreeMap::new();
    front_scopes.insert("notes:read".to_string(), tool_names.clone());
    let _front = serve_protected(
        "gateway",
        front,
        front_listener,
        &front_url,
        &issuer,
        front_scopes,
    )
    .await;

    // Each person's MCP host logs in to the gateway (the front token) and calls through it.
    let mut front_tokens = Vec::new();
    let mut results = BTreeMap::new();
    for name in ["alice", "bob", "carol"] {
        let host = Client::new();
        let options = host.options(
            json!({"gateway": {"type": "http", "url": front_url}}),
            egress(&ports),
        );
        let (show, browser) = browser_of(name);
        let outcome = login(&options, "gateway", WAIT, show).await;
        browser.check(outcome.is_ok()).await;
        outcome.unwrap();
        let entries = host.tokens().entries().unwrap();
        let token = serde_json::to_value(entries[0].credentials.token_response.as_ref().unwrap())
            .unwrap()["access_token"]
            .as_str()
            .unwrap()
            .to_string();
        front_tokens.push(token);
        for tool in ["notes__notes_search", "notes_two__notes_search"] {
            let result = call_through_gateway(&host, &options, tool).await;
            results.insert((name, tool), result);
        }
    }

    // alice's and bob's calls to `notes` went through, each as themselves at the upstream.
    for name in ["alice", "bob"] {
        let result = &results[&(name, "notes__notes_search")];
        assert_ne!(result["isError"], json!(true), "{name}: {result}");
    }
    let callers = one.callers();
    for name in ["alice", "bob"] {
        assert!(
            callers
                .iter()
                .any(|(who, tool)| who.contains(name) && tool == "notes_search"),
            "{name} not among the upstream's callers: {callers:?}"
        );
    }
    assert!(
        !callers.iter().any(|(who, _)| who.contains("carol")),
        "{callers:?}"
    );
    // carol has no token of her own for `notes`, and nobody has one for `notes_two`: the typed
    // error says how to connect, and nothing reached the upstream's tools.
    for (name, tool, server) in [
        ("carol", "notes__notes_search", "notes"),
        ("alice", "notes_two__notes_search", "notes_two"),
        ("bob", "notes_two__notes_search", "notes_two"),
    ] {
        let result = &results[&(name, tool)];
        assert_eq!(result["isError"], json!(true), "{name} {tool}: {result}");
        let text = result.to_string();
        assert!(text.contains("unauthorized"), "{name} {tool}: {text}");
        assert!(
            text.contains(&format!("toolgate mcp login {server} --as {name}")),
            "{name} {tool}: {text}"
        );
    }
    assert!(two.callers().is_empty(), "{:?}", two.callers());

    // What each upstream was shown: only tokens minted for it, of the gateway's own login or of
    // the user calling; never a front token, never one minted for the other server.
    let at_one = audiences_and_subjects(&seen_one);
    let at_two = audiences_and_subjects(&seen_two);
    assert!(at_one.iter().all(|(aud, _)| *aud == one_url), "{at_one:?}");
    assert!(at_two.iter().all(|(aud, _)| *aud == two_url), "{at_two:?}");
    for name in ["alice", "bob", "operator"] {
        assert!(
            at_one.iter().any(|(_, sub)| sub == name),
            "{name}: {at_one:?}"
        );
    }
    assert!(
        at_two.iter().all(|(_, sub)| sub == "operator"),
        "{at_two:?}"
    );
    let shown: Vec<String> = [&seen_one, &seen_two]
        .iter()
        .flat_map(|seen| seen.lock().unwrap().clone())
        .collect();
    for token in &front_tokens {
        assert!(!shown.contains(token), "a front token reached an upstream");
    }
    // At rest the vault holds no token in clear.
    let stored = vault
        .get(
            &toolgate_core::approval::holder(&user("alice")),
            &CredentialKey::new(&issuer, &one_url),
        )
        .await
        .unwrap()
        .unwrap();
    let access = serde_json::to_value(stored.token_response.unwrap()).unwrap()["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    let bytes = std::fs::read(&vault_path).unwrap();
    assert!(
        !bytes.windows(access.len()).any(|w| w == access.as_bytes()),
        "alice's token is in the vault file in clear"
    );
    assert_eq!(mode(&vault_path), 0o600);
    imports.close().await;
}

/// A token vault in `dir` (`vault.sqlite`, sealed under a key file `vault.keys` there).
fn vault_in(dir: &Path) -> Arc<toolgate_mcp_client::vault::TokenVault> {
    let keys = dir.join("vault.keys");
    std::fs::write(&keys, "k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n").unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).unwrap();
    let keys = toolgate_mcp_client::vault_keys::VaultKeys::load(&keys).unwrap();
    Arc::new(
        toolgate_mcp_client::vault::TokenVault::open_sqlite(
            &dir.join("vault.sqlite"),
            Arc::new(keys),
        )
        .unwrap(),
    )
}

#[tokio::test]
async fn a_login_as_one_user_by_another_person_is_refused_and_not_kept() {
    use toolgate_mcp_client::imports::login_as;
    let env = env().await;
    let client = Client::new();
    let vault = vault_in(client.dir.path());
    let mut options = client.options(env.servers(), env.egress());
    options.vault = Some(Arc::clone(&vault));
    let alice = Principal {
        id: "alice".into(),
        tenant: env.auth.issuer(),
        scopes: Arc::default(),
        catalogue: None,
    };
    let key = CredentialKey::new(env.auth.issuer(), &env.one.url);
    let holder = toolgate_core::approval::holder(&alice);

    // bob signs in where alice should: the token names bob, so it is not kept as alice's.
    let (show, browser) = browser_of("bob");
    let refused = login_as(&options, "notes", &alice, WAIT, show).await;
    browser.check(false).await;
    match refused {
        Err(ImportsError::NotThatUser { user, subject }) => {
            assert_eq!((user.as_str(), subject.as_str()), ("alice", "bob"));
        }
        other => panic!("{other:?}"),
    }
    assert!(vault.get(&holder, &key).await.unwrap().is_none());

    // alice herself: kept.
    let (show, browser) = browser_of("alice");
    let outcome = login_as(&options, "notes", &alice, WAIT, show).await;
    browser.check(outcome.is_ok()).await;
    assert_eq!(outcome.unwrap().key, key);
    assert!(vault.get(&holder, &key).await.unwrap().is_some());
}
