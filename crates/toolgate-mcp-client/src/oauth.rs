//! toolgate as an OAuth 2.1 client of MCP servers that ask for it: `toolgate mcp login SERVER`
//! once, then every connection to that server carries its token. The protocol work is rmcp's
//! (`auth` feature: discovery, issuer checks, dynamic registration, PKCE, RFC 8707, RFC 9207,
//! refresh); this module puts our rules around it.
//!
//! Guarantees:
//! - discovery starts from the server's own 401 `WWW-Authenticate` challenge (RFC 9728
//!   protected resource metadata, then RFC 8414 / OpenID metadata of the authorization server
//!   it names); rmcp checks that the metadata's `resource` is this server's URL (same origin,
//!   path prefix) and that the authorization server's `issuer` is the one it was discovered
//!   at; we refuse, on top, rmcp's synthesized endpoints (`LegacyEndpointFallback`: the server
//!   published nothing), metadata without an `issuer`, and metadata whose
//!   `code_challenge_methods_supported` is absent or lacks `S256` (both revisions of the MCP
//!   authorization spec say a client MUST refuse then; rmcp only warns when it is absent);
//! - PKCE S256 and the `resource` indicator on the authorization request, the code exchange
//!   and every refresh (rmcp); the `state` of the redirect is checked here before rmcp checks
//!   it again, and the RFC 9207 `iss` is checked by rmcp (required when the server advertises
//!   `authorization_response_iss_parameter_supported`);
//! - the redirect is received by a listener on 127.0.0.1 only, for a bounded time, which
//!   answers one callback and stops; the authorization URL is handed to the caller to show,
//!   never opened in a browser by us;
//! - every request the OAuth flow makes (metadata, registration, token, refresh) goes through
//!   the egress exit ([`EgressOAuthHttp`]): the authorization server must be on the
//!   `[egress]` allowlist, its addresses are checked and pinned, and no redirect is followed.
//!   Why our own client rather than rmcp's: rmcp's default client filters addresses by its own
//!   rules and follows redirects for some requests, and `with_client(reqwest)` drops its
//!   filter; only an [`OAuthHttpClient`] of ours makes the allowlist, the trace record and the
//!   no-redirect rule the same as for every other request toolgate sends;
//! - tokens are stored per (issuer, resource) in the token file ([`super::credentials`]), never
//!   printed or logged by us.
//!
//! Refuses: a server that does not ask for authorization (`login`), one whose metadata fails
//! the checks above, a callback with the wrong `state`, an error, or no code, a callback that
//! does not come within the wait, and a connection to a server that asks for authorization
//! when no token is stored for it (the error says to run `toolgate mcp login SERVER`).

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationMetadataSource,
    AuthorizationRequest, AuthorizationSession, OAuthClientConfig, OAuthHttpClient,
    OAuthHttpClientFuture, OAuthHttpRequest,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate_core::error_chain::error_chain;
use toolgate_egress::Egress;

use super::credentials::{CredentialError, CredentialKey, TokenHolder};

/// How long `login` waits for the browser to come back, by default.
pub const DEFAULT_LOGIN_WAIT: Duration = Duration::from_secs(300);
/// The client name sent in dynamic client registration.
const CLIENT_NAME: &str = "toolgate";
/// The callback path of the loopback redirect URI.
const CALLBACK_PATH: &str = "/callback";
/// Largest OAuth HTTP response body accepted (rmcp's own cap is the same order).
const MAX_OAUTH_BODY_BYTES: usize = 1024 * 1024;
/// Longest request head read from the browser on the callback listener.
const MAX_CALLBACK_HEAD_BYTES: usize = 16 * 1024;
/// Requests the callback listener answers before giving up (favicons, stray probes).
const MAX_CALLBACK_REQUESTS: usize = 16;
/// One OAuth HTTP request, at most, when rmcp suggests no timeout.
const DEFAULT_OAUTH_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why authorization with a server failed or is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    #[error("the server does not ask for authorization: it answered without a token")]
    NotAsked,
    #[error("the server cannot be reached: {0}")]
    Unreachable(String),
    #[error(
        "the server asks for authorization but publishes no OAuth metadata (RFC 9728 or RFC 8414): refused (toolgate does not guess endpoints)"
    )]
    NotDiscovered,
    #[error("the authorization server's metadata names no issuer: refused")]
    NoIssuer,
    #[error(
        "the authorization server does not support PKCE with S256 (code_challenge_methods_supported: {0}): refused"
    )]
    NoPkce(String),
    #[error("the authorization is refused: {0}")]
    Refused(String),
    #[error("the OAuth flow failed: {0}")]
    Flow(String),
    #[error(transparent)]
    Credentials(#[from] CredentialError),
    #[error("the redirect listener on 127.0.0.1 cannot start: {0}")]
    Listener(String),
    #[error("the browser did not come back to {redirect_uri} within {seconds} s")]
    Timeout { redirect_uri: String, seconds: u64 },
    #[error(transparent)]
    Callback(#[from] CallbackError),
}

impl OAuthError {
    fn from_rmcp(error: AuthError) -> OAuthError {
        // AuthError is #[non_exhaustive]: what a check refuses is told apart by its message,
        // which names the check; everything else is a failed flow.
        let refusal = matches!(
            error,
            AuthError::AuthorizationServerMismatch { .. }
                | AuthError::AuthorizationServerMissingIssuer { .. }
                | AuthError::ProtectedResourceMetadataInvalid { .. }
                | AuthError::PkceUnsupported
        );
        let text = error_chain(&error);
        if refusal {
            OAuthError::Refused(text)
        } else {
            OAuthError::Flow(text)
        }
    }
}

/// What was wrong with the redirect that came back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackError {
    #[error("the authorization server refused: {error}{description}")]
    Denied { error: String, description: String },
    #[error("the redirect carries another `state` than the one sent: refused (a forged redirect?)")]
    StateMismatch,
    #[error("the redirect carries no authorization code")]
    NoCode,
    #[error("the redirect is not an HTTP GET request")]
    NotARequest,
}

/// An authorization server's metadata as we accept it: discovered, with an issuer and S256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub issuer: String,
}

/// Our checks on top of rmcp's, on the outcome of discovery.
pub fn accept_metadata(
    source: AuthorizationMetadataSource,
    metadata: &AuthorizationMetadata,
) -> Result<Accepted, OAuthError> {
    if !source.is_discovered() {
        return Err(OAuthError::NotDiscovered);
    }
    let issuer = metadata
        .issuer
        .clone()
        .filter(|i| !i.is_empty())
        .ok_or(OAuthError::NoIssuer)?;
    match &metadata.code_challenge_methods_supported {
        Some(methods) if methods.iter().any(|m| m == "S256") => Ok(Accepted { issuer }),
        Some(methods) => Err(OAuthError::NoPkce(methods.join(", "))),
        None => Err(OAuthError::NoPkce("absent".into())),
    }
}

/// The value of query parameter `name` in `url`.
pub fn query_param(url: &str, name: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// What the callback listener does with one request target (`/callback?code=...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackTarget {
    /// Not the callback path: answered 404, and the wait goes on.
    Elsewhere,
    /// The redirect, with a code and the state we sent.
    Authorized,
}

/// Judges the target of one request to the listener against the `state` we sent.
pub fn judge_callback(target: &str, expected_state: &str) -> Result<CallbackTarget, CallbackError> {
    let url = url::Url::parse(&format!("http://127.0.0.1{target}"))
        .map_err(|_| CallbackError::NotARequest)?;
    if url.path() != CALLBACK_PATH {
        return Ok(CallbackTarget::Elsewhere);
    }
    let param = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    if let Some(error) = param("error") {
        let description = param("error_description")
            .map(|d| format!(" ({})", toolgate_core::observation::cut_string(&d, 200)))
            .unwrap_or_default();
        return Err(CallbackError::Denied {
            error: toolgate_core::observation::cut_string(&error, 100),
            description,
        });
    }
    // A redirect with an error but the wrong state is still an error worth showing; one with a
    // code and the wrong state is refused before the code is looked at.
    if param("state").as_deref() != Some(expected_state) {
        return Err(CallbackError::StateMismatch);
    }
    match param("code") {
        Some(code) if !code.is_empty() => Ok(CallbackTarget::Authorized),
        Some(_) | None => Err(CallbackError::NoCode),
    }
}

/// The target of an HTTP/1 request head (`GET /callback?... HTTP/1.1`).
pub fn request_target(head: &str) -> Result<&str, CallbackError> {
    let line = head.lines().next().unwrap_or_default();
    let mut parts = line.split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("GET"), Some(target), Some(version))
            if target.starts_with('/') && version.starts_with("HTTP/1.") =>
        {
            Ok(target)
        }
        _ => Err(CallbackError::NotARequest),
    }
}

/// Every OAuth HTTP request rmcp makes, sent through the egress exit: checked against the
/// allowlist, to checked and pinned addresses, following no redirect (a redirect comes back
/// as the 3xx it is, which rmcp treats as a failure), bounded in time and size.
pub struct EgressOAuthHttp {
    egress: Arc<Egress>,
}

impl EgressOAuthHttp {
    pub fn new(egress: Arc<Egress>) -> Self {
        EgressOAuthHttp { egress }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl OAuthHttpClient for EgressOAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let OAuthHttpRequest {
                request, timeout, ..
            } = request;
            let timeout = timeout.unwrap_or(DEFAULT_OAUTH_REQUEST_TIMEOUT);
            let (parts, body) = request.into_parts();
            let url = parts.uri.to_string();
            let client = self
                .egress
                .session_client(&url)
                .await
                .map_err(|e| Box::new(e) as BoxError)?;
            let send = client
                .request(parts.method, &url)
                .headers(parts.headers)
                .body(body)
                .send();
            let work = async {
                let mut response = send.await.map_err(|e| Box::new(e) as BoxError)?;
                let mut builder = http::Response::builder()
                    .status(response.status())
                    .version(response.version());
                for (name, value) in response.headers() {
                    builder = builder.header(name, value);
                }
                let mut bytes = Vec::new();
                while let Some(chunk) = response
                    .chunk()
                    .await
                    .map_err(|e| Box::new(e) as BoxError)?
                {
                    if chunk.len() > MAX_OAUTH_BODY_BYTES.saturating_sub(bytes.len()) {
                        return Err(format!(
                            "the answer from {url} is larger than {MAX_OAUTH_BODY_BYTES} bytes"
                        )
                        .into());
                    }
                    bytes.extend_from_slice(&chunk);
                }
                builder.body(bytes).map_err(|e| Box::new(e) as BoxError)
            };
            match tokio::time::timeout(timeout, work).await {
                Ok(result) => result,
                Err(_) => {
                    Err(format!("{url} did not answer within {} s", timeout.as_secs()).into())
                }
            }
        })
    }
}

/// A manager for the server at `url`, whose HTTP goes through `egress`, with its metadata
/// discovered from `challenge` and accepted; also the (issuer, resource) its tokens are for.
async fn discovered_manager(
    url: &str,
    challenge: Option<&str>,
    egress: &Arc<Egress>,
) -> Result<(AuthorizationManager, Accepted), OAuthError> {
    let http: Arc<dyn OAuthHttpClient> = Arc::new(EgressOAuthHttp::new(Arc::clone(egress)));
    let mut manager = AuthorizationManager::new_with_oauth_http_client(url, http)
        .await
        .map_err(OAuthError::from_rmcp)?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .map_err(OAuthError::from_rmcp)?;
    let accepted = accept_metadata(resolution.source, &resolution.metadata)?;
    manager.set_metadata(resolution.metadata);
    Ok((manager, accepted))
}

/// The resource indicator rmcp sends for this manager's server. rmcp keeps the resource it
/// discovered private; the authorization URL it builds is the one public view of it, so one
/// is built (with a placeholder client, never sent anywhere) and read. The placeholder is
/// replaced by the stored client id before any request.
async fn resource_of(manager: &mut AuthorizationManager) -> Result<String, OAuthError> {
    manager
        .configure_client(OAuthClientConfig::new(
            "toolgate-resource-probe",
            "http://127.0.0.1/callback",
        ))
        .map_err(OAuthError::from_rmcp)?;
    let url = manager
        .get_authorization_url(&[])
        .await
        .map_err(OAuthError::from_rmcp)?;
    query_param(&url, "resource").ok_or_else(|| {
        OAuthError::Flow("rmcp built an authorization URL without `resource`".into())
    })
}

/// The `sub` claim of `token` when it is a JWT (RFC 9068 access tokens are); `None` for an
/// opaque token or one without a subject. Read only to compare who signed in, never trusted
/// for anything else: the token is not verified here.
pub fn jwt_subject(token: &str) -> Option<String> {
    use base64::Engine;
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("sub")?.as_str().map(str::to_string)
}

/// What a connection to a server that asked for authorization needs.
pub enum Stored {
    /// A manager holding the stored tokens of the server (refreshing them as needed).
    Authorized(Box<AuthorizationManager>),
    /// No token is stored for the server's (issuer, resource).
    NotLoggedIn(CredentialKey),
}

/// The stored authorization for the server at `url` that answered with `challenge`.
pub async fn stored_authorization(
    url: &str,
    challenge: Option<&str>,
    tokens: &TokenHolder,
    egress: &Arc<Egress>,
) -> Result<Stored, OAuthError> {
    let (mut manager, accepted) = discovered_manager(url, challenge, egress).await?;
    let resource = resource_of(&mut manager).await?;
    let key = CredentialKey::new(accepted.issuer, resource);
    let stored = tokens.get(&key).await?;
    if stored.is_none_or(|c| c.token_response.is_none()) {
        return Ok(Stored::NotLoggedIn(key));
    }
    manager.set_credential_store(tokens.slot(key.clone()));
    // With the metadata set, this only loads the entry and configures its client id (and
    // clears it if the issuer it was stored under changed, which the key already rules out).
    if !manager
        .initialize_from_store()
        .await
        .map_err(OAuthError::from_rmcp)?
    {
        return Ok(Stored::NotLoggedIn(key));
    }
    Ok(Stored::Authorized(Box::new(manager)))
}

/// The client of a login: pre-registered, or registered now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoginClient {
    /// A client id registered with the authorization server beforehand; `None`: dynamic
    /// client registration (RFC 7591).
    pub client_id: Option<String>,
    /// The port of the loopback redirect URI; `None`: any free one (fine with dynamic
    /// registration; a pre-registered client usually needs the port it was registered with).
    pub callback_port: Option<u16>,
    /// Scopes to ask for; empty: what the server's challenge or metadata suggests.
    pub scopes: Vec<String>,
}

/// What a login stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedIn {
    pub key: CredentialKey,
    pub client_id: String,
    pub scopes: Vec<String>,
}

/// Logs in to the server at `url`, which answered with `challenge`: discovery, client
/// registration, the authorization URL handed to `show` (the person opens it), the redirect
/// received on 127.0.0.1 within `wait`, the code exchanged, the tokens stored in `tokens`.
pub async fn login(
    url: &str,
    challenge: Option<&str>,
    client: &LoginClient,
    tokens: &TokenHolder,
    egress: &Arc<Egress>,
    wait: Duration,
    show: impl FnOnce(&str),
) -> Result<LoggedIn, OAuthError> {
    // A token store that would be refused later is refused before the person is sent anywhere.
    tokens.check().await?;
    let (manager, accepted) = discovered_manager(url, challenge, egress).await?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", client.callback_port.unwrap_or(0)))
        .await
        .map_err(|e| OAuthError::Listener(e.to_string()))?;
    let port = listener
        .local_addr()
        .map_err(|e| OAuthError::Listener(e.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
    let mut request = AuthorizationRequest::new(&redirect_uri).with_client_name(CLIENT_NAME);
    if let Some(id) = &client.client_id {
        request = request.with_preregistered_client(id);
    }
    if !client.scopes.is_empty() {
        request = request.with_scopes(client.scopes.iter().cloned());
    }
    let mut session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| OAuthError::from_rmcp(e))?;
    let authorization_url = session.get_authorization_url().to_string();
    let resource = query_param(&authorization_url, "resource").ok_or_else(|| {
        OAuthError::Flow("rmcp built an authorization URL without `resource`".into())
    })?;
    let state = query_param(&authorization_url, "state").ok_or_else(|| {
        OAuthError::Flow("rmcp built an authorization URL without `state`".into())
    })?;
    let scopes = query_param(&authorization_url, "scope")
        .map(|s| s.split(' ').map(str::to_string).collect())
        .unwrap_or_default();
    let key = CredentialKey::new(accepted.issuer, resource);
    session
        .auth_manager
        .set_credential_store(tokens.slot(key.clone()));

    show(&authorization_url);
    let callback = match tokio::time::timeout(wait, receive_callback(&listener, &state)).await {
        Ok(callback) => callback?,
        Err(_) => {
            return Err(OAuthError::Timeout {
                redirect_uri,
                seconds: wait.as_secs(),
            });
        }
    };
    drop(listener);
    session
        .handle_callback_url(&format!("http://127.0.0.1:{port}{callback}"))
        .await
        .map_err(OAuthError::from_rmcp)?;
    let (client_id, _) = session
        .get_credentials()
        .await
        .map_err(OAuthError::from_rmcp)?;
    Ok(LoggedIn {
        key,
        client_id,
        scopes,
    })
}

/// Answers requests on `listener` until the redirect comes (its request target is returned)
/// or one is refused; at most [`MAX_CALLBACK_REQUESTS`].
async fn receive_callback(
    listener: &tokio::net::TcpListener,
    state: &str,
) -> Result<String, OAuthError> {
    for _ in 0..MAX_CALLBACK_REQUESTS {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| OAuthError::Listener(e.to_string()))?;
        let head = match tokio::time::timeout(Duration::from_secs(10), read_head(&mut stream)).await
        {
            Ok(Ok(head)) => head,
            Ok(Err(_)) | Err(_) => continue,
        };
        let judged = request_target(&head).and_then(|t| Ok((t, judge_callback(t, state)?)));
        let (status, page, outcome) = match judged {
            Ok((_, CallbackTarget::Elsewhere)) => ("404 Not Found", "Not found.", None),
            Ok((target, CallbackTarget::Authorized)) => (
                "200 OK",
                "toolgate received the authorization. You can close this tab.",
                Some(Ok(target.to_string())),
            ),
            Err(error) => (
                "400 Bad Request",
                "toolgate refused this authorization; see the terminal.",
                Some(Err(error)),
            ),
        };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\ncache-control: no-store\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        if let Some(outcome) = outcome {
            return outcome.map_err(OAuthError::Callback);
        }
    }
    Err(OAuthError::Listener(format!(
        "{MAX_CALLBACK_REQUESTS} requests came to the redirect listener and none was the redirect"
    )))
}

async fn read_head(stream: &mut tokio::net::TcpStream) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_CALLBACK_HEAD_BYTES {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(issuer: Option<&str>, methods: Option<&[&str]>) -> AuthorizationMetadata {
        let mut metadata = AuthorizationMetadata::default();
        metadata.authorization_endpoint = "https://as.example/auth".into();
        metadata.token_endpoint = "https://as.example/token".into();
        metadata.issuer = issuer.map(str::to_string);
        metadata.code_challenge_methods_supported =
            methods.map(|m| m.iter().map(|s| s.to_string()).collect());
        metadata
    }

    #[test]
    fn guessed_or_incomplete_authorization_metadata_is_refused() {
        use AuthorizationMetadataSource::*;
        let s256: &[&str] = &["S256"];
        let plain: &[&str] = &["plain"];
        let cases = [
            (
                ProtectedResourceMetadata,
                Some("https://as.example"),
                Some(s256),
                Ok(Accepted {
                    issuer: "https://as.example".into(),
                }),
            ),
            (
                AuthorizationServerMetadata,
                Some("https://as.example"),
                Some(s256),
                Ok(Accepted {
                    issuer: "https://as.example".into(),
                }),
            ),
            (
                LegacyEndpointFallback,
                Some("https://as.example"),
                Some(s256),
                Err(OAuthError::NotDiscovered),
            ),
            (
                ProtectedResourceMetadata,
                None,
                Some(s256),
                Err(OAuthError::NoIssuer),
            ),
            (
                ProtectedResourceMetadata,
                Some(""),
                Some(s256),
                Err(OAuthError::NoIssuer),
            ),
            (
                ProtectedResourceMetadata,
                Some("https://as.example"),
                None,
                Err(OAuthError::NoPkce("absent".into())),
            ),
            (
                ProtectedResourceMetadata,
                Some("https://as.example"),
                Some(plain),
                Err(OAuthError::NoPkce("plain".into())),
            ),
        ];
        for (source, issuer, methods, want) in cases {
            assert_eq!(
                accept_metadata(source, &metadata(issuer, methods)),
                want,
                "{source:?} {issuer:?} {methods:?}"
            );
        }
    }

    #[test]
    fn forged_or_failed_redirects_are_refused() {
        let cases = [
            (
                "/callback?code=abc&state=s1&iss=x",
                Ok(CallbackTarget::Authorized),
            ),
            ("/favicon.ico", Ok(CallbackTarget::Elsewhere)),
            (
                "/callback?code=abc&state=s2",
                Err(CallbackError::StateMismatch),
            ),
            ("/callback?code=abc", Err(CallbackError::StateMismatch)),
            ("/callback?state=s1", Err(CallbackError::NoCode)),
            ("/callback?state=s1&code=", Err(CallbackError::NoCode)),
            (
                "/callback?error=access_denied&error_description=no+thanks&state=s1",
                Err(CallbackError::Denied {
                    error: "access_denied".into(),
                    description: " (no thanks)".into(),
                }),
            ),
        ];
        for (target, want) in cases {
            assert_eq!(judge_callback(target, "s1"), want, "{target}");
        }
    }

    #[test]
    fn only_a_get_request_line_is_a_redirect() {
        let cases = [
            (
                "GET /callback?code=1 HTTP/1.1\r\nHost: x\r\n\r\n",
                Ok("/callback?code=1"),
            ),
            (
                "POST /callback HTTP/1.1\r\n\r\n",
                Err(CallbackError::NotARequest),
            ),
            (
                "GET http://evil/callback HTTP/1.1\r\n\r\n",
                Err(CallbackError::NotARequest),
            ),
            ("", Err(CallbackError::NotARequest)),
            ("GET /callback\r\n\r\n", Err(CallbackError::NotARequest)),
        ];
        for (head, want) in cases {
            assert_eq!(request_target(head), want, "{head:?}");
        }
    }

    #[test]
    fn only_a_jwt_with_a_subject_names_who_signed_in() {
        use base64::Engine;
        let part = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let jwt = |claims: &str| format!("{}.{}.sig", part(r#"{"alg":"RS256"}"#), part(claims));
        let cases = [
            (jwt(r#"{"sub":"alice","aud":"x"}"#), Some("alice")),
            (jwt(r#"{"aud":"x"}"#), None),
            (jwt(r#"{"sub":7}"#), None),
            ("opaque-token-value".to_string(), None),
            (format!("{}.not-base64!.sig", part("{}")), None),
            (format!("{}.{}", part("{}"), part(r#"{"sub":"a"}"#)), None),
            (format!("{}.extra", jwt(r#"{"sub":"a"}"#)), None),
        ];
        for (token, want) in cases {
            assert_eq!(jwt_subject(&token).as_deref(), want, "{token}");
        }
    }

    #[test]
    fn query_params_are_read_decoded() {
        let url = "https://as.example/auth?resource=http%3A%2F%2F127.0.0.1%3A9%2Fmcp&scope=a+b";
        assert_eq!(
            query_param(url, "resource").as_deref(),
            Some("http://127.0.0.1:9/mcp")
        );
        assert_eq!(query_param(url, "scope").as_deref(), Some("a b"));
        assert_eq!(query_param(url, "state"), None);
    }
}
