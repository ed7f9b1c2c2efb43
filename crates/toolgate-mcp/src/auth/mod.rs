//! The HTTP server as an OAuth 2.1 resource server (`[serve.auth]`): every request to `/mcp`
//! carries a bearer JWT access token from the configured authorization server, for this
//! server's resource URI; the caller's principal and the tools it may see come from the token.
//!
//! Guarantees: a request without a valid token never reaches rmcp or the dispatcher; a token
//! in the query string is refused (RFC 6750 section 2.3 is not supported, since URLs are
//! logged); when the keys cannot be fetched the request is refused (fail closed) with a 503
//! that says only "authorization temporarily unavailable" (the cause goes to the trace's
//! `detail`, never to a caller nobody authenticated); a token is never logged, traced or
//! forwarded: it is read from the header, checked, and removed before the request goes on. The
//! issuer and its key set are reached over https only (plain http on a loopback address, for
//! tests); a subject is never read as a client-only token's id ([`token::CLIENT_PREFIX`]). The
//! protected resource metadata (RFC 9728) names the authorization server, the scopes and the
//! bearer method.
//!
//! Every decision is one `auth` line in the trace given to [`ResourceServer::with_trace`]
//! ([`decision::AuthDecision`]: the rule, the resource, the principal; never the token).
//!
//! rmcp has only the client side of OAuth, so this side is ours; the signature check is
//! `jsonwebtoken`'s.

pub mod decision;
pub mod grants;
pub mod keys;
pub mod token;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use http::header::AUTHORIZATION;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::Principal;
use toolgate_core::trace::{NoTrace, TraceSink};
use toolgate_egress::Egress;

use decision::{AuthDecision, Decision};
use grants::{GrantError, Grants};
use keys::{KeyCache, KeyError};
use token::{PolicyError, TokenError, TokenPolicy, VerifiedToken};

/// `[serve.auth]` in `toolgate.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The authorization server's issuer identifier, exactly as its metadata and tokens say it.
    pub issuer: String,
    /// This server's canonical resource URI (RFC 8707), e.g. `https://mcp.example.com/mcp`:
    /// tokens must name it in `aud`.
    pub resource: String,
    /// Accepted signing algorithms (asymmetric only). Default `["RS256"]`.
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// How far token times may be off this machine's clock, in seconds. Default 60.
    #[serde(default = "default_skew")]
    pub clock_skew_secs: u64,
    /// Require the RFC 9068 `typ` header `at+jwt`. Default true.
    #[serde(default = "default_true")]
    pub require_at_jwt: bool,
    /// The shortest time between two fetches of the key set when tokens name unknown keys,
    /// in seconds. Default 30.
    #[serde(default = "default_refresh")]
    pub jwks_min_refresh_secs: u64,
    /// The longest the key set is used before it is fetched again (so that a removed key stops
    /// being trusted), in seconds. Default 300.
    #[serde(default = "default_max_age")]
    pub jwks_max_age_secs: u64,
    /// Scope name to the tools it grants: tool names, or the served toolset's name for all
    /// of them.
    pub scopes: BTreeMap<String, Vec<String>>,
}

impl AuthConfig {
    /// Tokens from `issuer` for `resource`, with `scopes` granting tools, and every other
    /// setting at its default.
    pub fn new(issuer: &str, resource: &str, scopes: BTreeMap<String, Vec<String>>) -> Self {
        AuthConfig {
            issuer: issuer.into(),
            resource: resource.into(),
            algorithms: default_algorithms(),
            clock_skew_secs: default_skew(),
            require_at_jwt: default_true(),
            jwks_min_refresh_secs: default_refresh(),
            jwks_max_age_secs: default_max_age(),
            scopes,
        }
    }
}

fn default_algorithms() -> Vec<String> {
    vec!["RS256".into()]
}
fn default_skew() -> u64 {
    60
}
fn default_true() -> bool {
    true
}
fn default_refresh() -> u64 {
    30
}
fn default_max_age() -> u64 {
    300
}

/// Why the resource server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("[serve.auth] resource {0:?} is not an absolute http(s) URI")]
    Resource(String),
    #[error("[serve.auth] is refused: {0}")]
    Policy(#[from] PolicyError),
    #[error("[serve.auth.scopes] is refused: {0}")]
    Grants(#[from] GrantError),
    #[error("the authorization server's keys cannot be had: {0}")]
    Keys(#[from] KeyError),
    #[error("[serve.auth] {0}")]
    Insecure(KeyError),
}

/// The principal a request's token speaks for, put into the request's extensions by the HTTP
/// front for the MCP server to read.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Principal);

/// The OAuth client a request's token was issued to (its `client_id` claim), put beside
/// [`Authenticated`] by the HTTP front: who is asking, shown to the person who approves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthClient(pub String);

/// Why a request is refused, each with its HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization: Bearer` header: 401 with a challenge naming the metadata.
    NoToken,
    /// A token in the URL: 400 `invalid_request`.
    TokenInQuery,
    /// The header is not `Bearer <token>`: 400 `invalid_request`.
    MalformedHeader,
    /// 401 `invalid_token`.
    InvalidToken(TokenError),
    /// The keys could not be fetched to check the token: 503, nothing runs.
    Unverifiable(KeyError),
    /// 403 `insufficient_scope`: `tool` needs one of `scopes`.
    InsufficientScope { tool: String, scopes: Vec<String> },
    /// A valid token for a session another principal opened (or one this server does not
    /// know): 404, as for a session that does not exist, so nothing about it is told.
    ForeignSession,
}

impl Refusal {
    /// The rule that refused, as the trace's `auth` event names it: a stable snake_case name
    /// (a token check's [`TokenError::rule`] for an invalid token).
    pub fn rule(&self) -> &'static str {
        match self {
            Refusal::NoToken => "no_token",
            Refusal::TokenInQuery => "token_in_query",
            Refusal::MalformedHeader => "malformed_header",
            Refusal::InvalidToken(error) => error.rule(),
            Refusal::Unverifiable(_) => "keys_unavailable",
            Refusal::InsufficientScope { .. } => "insufficient_scope",
            Refusal::ForeignSession => "foreign_session",
        }
    }

    pub fn status(&self) -> http::StatusCode {
        match self {
            Refusal::NoToken | Refusal::InvalidToken(_) => http::StatusCode::UNAUTHORIZED,
            Refusal::TokenInQuery | Refusal::MalformedHeader => http::StatusCode::BAD_REQUEST,
            Refusal::Unverifiable(_) => http::StatusCode::SERVICE_UNAVAILABLE,
            Refusal::InsufficientScope { .. } => http::StatusCode::FORBIDDEN,
            Refusal::ForeignSession => http::StatusCode::NOT_FOUND,
        }
    }

    /// What the client is told (never the token).
    pub fn message(&self) -> String {
        match self {
            Refusal::NoToken => {
                "this server needs an OAuth access token: send Authorization: Bearer <token>".into()
            }
            Refusal::TokenInQuery => {
                "access tokens in the URL are refused: send the token in the Authorization header"
                    .into()
            }
            Refusal::MalformedHeader => "the Authorization header is not `Bearer <token>`".into(),
            Refusal::InvalidToken(error) => format!("invalid access token: {error}"),
            // The fetch's details (URLs, statuses) are for the operator's trace, not for a
            // caller nobody has authenticated.
            Refusal::Unverifiable(_) => "authorization temporarily unavailable; retry later".into(),
            Refusal::InsufficientScope { tool, scopes } => format!(
                "the access token does not grant the tool {tool}: it needs the scope {}",
                scopes.join(" or ")
            ),
            Refusal::ForeignSession => {
                "no such session: start a new one with initialize (sessions belong to the \
                 principal that opened them)"
                    .into()
            }
        }
    }

    /// What the operator's trace keeps beyond the rule: why the keys could not be had.
    pub fn detail(&self) -> Option<String> {
        match self {
            Refusal::Unverifiable(error) => Some(error.to_string()),
            Refusal::NoToken
            | Refusal::TokenInQuery
            | Refusal::MalformedHeader
            | Refusal::InvalidToken(_)
            | Refusal::InsufficientScope { .. }
            | Refusal::ForeignSession => None,
        }
    }
}

/// The media types an authorization server's metadata and key set come as: the egress exit the
/// key fetches go through answers in these only (`ExitsConfig::egress_answering`).
pub const AUTH_CONTENT_TYPES: [&str; 2] = ["application/json", "application/jwk-set+json"];

/// Checks tokens for one served toolset.
pub struct ResourceServer {
    policy: TokenPolicy,
    keys: KeyCache,
    grants: Grants,
    metadata_url: String,
    metadata_paths: [String; 2],
    /// The served tools, in name order (for what an allow withholds).
    tools: Vec<String>,
    trace: Arc<dyn TraceSink>,
}

/// What the front knows of a request when it decides.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestFacts<'a> {
    pub http_method: &'a str,
    pub rpc_method: Option<&'a str>,
    pub tool: Option<&'a str>,
    pub principal: Option<&'a Principal>,
}

impl ResourceServer {
    /// Builds the checks of `config` for `toolset` (whose tools are `tools`) and fetches the
    /// authorization server's keys through `egress`.
    pub async fn start(
        config: &AuthConfig,
        toolset: &str,
        tools: &[String],
        egress: Arc<Egress>,
    ) -> Result<ResourceServer, AuthError> {
        let resource = url::Url::parse(&config.resource)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or_else(|| AuthError::Resource(config.resource.clone()))?;
        keys::refuse_plain_http("issuer", &config.issuer).map_err(AuthError::Insecure)?;
        let policy = TokenPolicy::new(
            &config.issuer,
            &config.resource,
            &config.algorithms,
            config.clock_skew_secs,
            config.require_at_jwt,
        )?;
        let grants = Grants::new(&config.scopes, toolset, tools)?;
        let keys = KeyCache::discover(
            egress,
            &config.issuer,
            Duration::from_secs(config.jwks_min_refresh_secs),
            Duration::from_secs(config.jwks_max_age_secs),
        )
        .await?;
        let (metadata_url, metadata_paths) = metadata_location(&resource);
        let mut tools = tools.to_vec();
        tools.sort();
        Ok(ResourceServer {
            policy,
            keys,
            grants,
            metadata_url,
            metadata_paths,
            tools,
            trace: Arc::new(NoTrace),
        })
    }

    /// Records every decision in `trace` (by default, nowhere).
    pub fn with_trace(mut self, trace: Arc<dyn TraceSink>) -> Self {
        self.trace = trace;
        self
    }

    /// Records that `refusal` answered the request described by `facts`.
    pub fn record_refusal(&self, refusal: &Refusal, facts: RequestFacts<'_>) {
        self.record(
            Decision::Refuse,
            refusal.rule(),
            Some(refusal.status().as_u16()),
            refusal.detail(),
            facts,
        );
    }

    /// Records that the request described by `facts` goes to the MCP server.
    pub fn record_allow(&self, facts: RequestFacts<'_>) {
        self.record(Decision::Allow, decision::VALID_TOKEN, None, None, facts);
    }

    fn record(
        &self,
        decision: Decision,
        rule: &'static str,
        status: Option<u16>,
        detail: Option<String>,
        facts: RequestFacts<'_>,
    ) {
        let withheld = match (decision, facts.principal) {
            (Decision::Allow, Some(principal)) => self
                .tools
                .iter()
                .filter(|tool| !principal.in_catalogue(tool))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        self.trace.record(Arc::new(AuthDecision {
            decision,
            rule,
            status,
            resource: self.policy.resource().to_string(),
            http_method: facts.http_method.to_string(),
            rpc_method: facts.rpc_method.map(str::to_string),
            tool: facts.tool.map(str::to_string),
            principal: facts.principal.map(|p| p.id.clone()),
            withheld,
            detail,
        }));
    }

    /// This server's resource URI.
    pub fn resource(&self) -> &str {
        self.policy.resource()
    }

    /// The paths the protected resource metadata is served at: the RFC 9728 location for the
    /// resource's path, and the bare well-known path.
    pub fn metadata_paths(&self) -> &[String; 2] {
        &self.metadata_paths
    }

    /// The protected resource metadata document (RFC 9728).
    pub fn metadata(&self) -> Value {
        json!({
            "resource": self.policy.resource(),
            "authorization_servers": [self.policy.issuer()],
            "scopes_supported": self.grants.scopes().collect::<Vec<_>>(),
            "bearer_methods_supported": ["header"],
            "resource_signing_alg_values_supported": [],
            "resource_name": "toolgate MCP server",
        })
    }

    /// The `WWW-Authenticate` value for `refusal` (RFC 6750 section 3, RFC 9728 section 5.1).
    pub fn challenge(&self, refusal: &Refusal) -> String {
        let all_scopes = self.grants.scopes().collect::<Vec<_>>().join(" ");
        let base = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        let description = quoted(&refusal.message());
        match refusal {
            Refusal::NoToken => format!("{base}, scope=\"{all_scopes}\""),
            Refusal::TokenInQuery | Refusal::MalformedHeader => {
                format!("{base}, error=\"invalid_request\", error_description=\"{description}\"")
            }
            Refusal::InvalidToken(_) | Refusal::Unverifiable(_) => {
                format!("{base}, error=\"invalid_token\", error_description=\"{description}\"")
            }
            Refusal::InsufficientScope { scopes, .. } => format!(
                "{base}, error=\"insufficient_scope\", scope=\"{}\", error_description=\"{description}\"",
                scopes.join(" ")
            ),
            Refusal::ForeignSession => base,
        }
    }

    /// The principal of a request with `headers` and `query`, or why it is refused.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
    ) -> Result<Principal, Refusal> {
        self.authenticate_client(headers, query)
            .await
            .map(|(principal, _)| principal)
    }

    /// As [`ResourceServer::authenticate`], with the OAuth client the token names, if any.
    pub async fn authenticate_client(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
    ) -> Result<(Principal, Option<OAuthClient>), Refusal> {
        if query.is_some_and(has_token_parameter) {
            return Err(Refusal::TokenInQuery);
        }
        let token = bearer_token(headers)?;
        let now = toolgate_core::clock::unix_secs(std::time::SystemTime::now());
        let keys = self.keys.current().await.map_err(Refusal::Unverifiable)?;
        let verified = match token::verify(token, &keys, &self.policy, now) {
            Err(error) if error.is_unknown_key() => match self.keys.refreshed().await {
                Ok(Some(keys)) => token::verify(token, &keys, &self.policy, now),
                Ok(None) => Err(error),
                Err(fetch) => return Err(Refusal::Unverifiable(fetch)),
            },
            other => other,
        }
        .map_err(Refusal::InvalidToken)?;
        let client = verified.client_id.clone().map(OAuthClient);
        Ok((self.principal_of(&verified), client))
    }

    /// `tool` unless `principal` may call it: then the refusal naming the scopes it needs. A
    /// tool no scope grants is left to the dispatcher (it is not this server's).
    pub fn check_tool(&self, principal: &Principal, tool: &str) -> Result<(), Refusal> {
        if principal.in_catalogue(tool) || !self.grants.knows(tool) {
            return Ok(());
        }
        Err(Refusal::InsufficientScope {
            tool: tool.into(),
            scopes: self
                .grants
                .scopes_granting(tool)
                .into_iter()
                .map(str::to_string)
                .collect(),
        })
    }

    fn principal_of(&self, token: &VerifiedToken) -> Principal {
        let id = match (&token.subject, &token.client_id) {
            (Some(subject), _) => subject.clone(),
            // `verify` refuses a subject with this prefix, so the two kinds never meet.
            (None, Some(client)) => format!("{}{client}", token::CLIENT_PREFIX),
            // `verify` refuses a token with neither.
            (None, None) => String::new(),
        };
        let catalogue = self.grants.tools_for(&token.scopes);
        Principal {
            id,
            tenant: self.policy.issuer().into(),
            scopes: Arc::new(token.scopes.clone()),
            catalogue: Some(Arc::new(catalogue)),
        }
    }
}

/// Where the metadata of `resource` is: its absolute URL (named in challenges) and the two
/// paths served.
fn metadata_location(resource: &url::Url) -> (String, [String; 2]) {
    let bare = "/.well-known/oauth-protected-resource".to_string();
    let path = resource.path().trim_end_matches('/');
    let suffixed = format!("{bare}{path}");
    let origin = resource.origin().ascii_serialization();
    (format!("{origin}{suffixed}"), [suffixed, bare])
}

/// The token of an `Authorization: Bearer` header.
fn bearer_token(headers: &HeaderMap) -> Result<&str, Refusal> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Err(Refusal::NoToken);
    };
    if values.next().is_some() {
        return Err(Refusal::MalformedHeader);
    }
    let text = value.to_str().map_err(|_| Refusal::MalformedHeader)?;
    let (scheme, token) = text.split_once(' ').ok_or(Refusal::MalformedHeader)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.contains(' ') {
        return Err(Refusal::MalformedHeader);
    }
    Ok(token)
}

fn has_token_parameter(query: &str) -> bool {
    url::form_urlencoded::parse(query.as_bytes()).any(|(key, _)| key == "access_token")
}

/// `text` fit for a quoted-string: no quotes, backslashes or control characters.
fn quoted(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn only_one_well_formed_bearer_header_yields_a_token() {
        assert_eq!(
            bearer_token(&headers(&["Bearer abc.def.ghi"])),
            Ok("abc.def.ghi")
        );
        assert_eq!(bearer_token(&headers(&["bearer abc"])), Ok("abc"));
        assert_eq!(bearer_token(&headers(&[])), Err(Refusal::NoToken));
        for bad in [
            &["Basic dXNlcjpwdw=="][..],
            &["Bearer"],
            &["Bearer "],
            &["Bearer a b"],
            &["Bearer a", "Bearer b"],
        ] {
            assert_eq!(
                bearer_token(&headers(bad)),
                Err(Refusal::MalformedHeader),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_token_in_the_query_string_is_noticed_however_it_is_encoded() {
        for query in ["access_token=x", "a=1&access_token=", "access%5Ftoken=x"] {
            assert!(has_token_parameter(query), "{query}");
        }
        for query in ["", "token=x", "a=access_token"] {
            assert!(!has_token_parameter(query), "{query}");
        }
    }

    #[test]
    fn metadata_is_served_where_rfc_9728_puts_it_for_the_resource_path() {
        let resource = url::Url::parse("https://mcp.example:8443/mcp").unwrap();
        let (url, paths) = metadata_location(&resource);
        assert_eq!(
            url,
            "https://mcp.example:8443/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            paths,
            [
                "/.well-known/oauth-protected-resource/mcp".to_string(),
                "/.well-known/oauth-protected-resource".to_string()
            ]
        );
    }

    #[test]
    fn every_refusal_has_a_stable_rule_name_and_its_status() {
        let cases = [
            (Refusal::NoToken, "no_token", 401),
            (Refusal::TokenInQuery, "token_in_query", 400),
            (Refusal::MalformedHeader, "malformed_header", 400),
            (Refusal::InvalidToken(TokenError::Expired), "expired", 401),
            (
                Refusal::InvalidToken(TokenError::WrongAudience("\"x\"".into())),
                "wrong_audience",
                401,
            ),
            (
                Refusal::InvalidToken(TokenError::AlgorithmRefused("none".into())),
                "algorithm_refused",
                401,
            ),
            (
                Refusal::Unverifiable(KeyError::NoKeys { url: "u".into() }),
                "keys_unavailable",
                503,
            ),
            (
                Refusal::InsufficientScope {
                    tool: "t".into(),
                    scopes: vec![],
                },
                "insufficient_scope",
                403,
            ),
            (Refusal::ForeignSession, "foreign_session", 404),
        ];
        for (refusal, rule, status) in cases {
            assert_eq!(refusal.rule(), rule, "{refusal:?}");
            assert_eq!(refusal.status().as_u16(), status, "{refusal:?}");
        }
    }

    #[test]
    fn an_unauthenticated_caller_learns_nothing_of_the_key_fetch() {
        let refusal = Refusal::Unverifiable(KeyError::Fetch {
            url: "https://as.internal:8443/jwks".into(),
            reason: "connection refused (10.1.2.3)".into(),
        });
        let told = refusal.message();
        assert_eq!(told, "authorization temporarily unavailable; retry later");
        assert!(!told.contains("as.internal"), "{told}");
        assert!(refusal.detail().unwrap().contains("as.internal"));
    }

    #[test]
    fn challenge_text_cannot_break_out_of_its_quotes() {
        assert_eq!(quoted("a \"b\" \\c\nd"), "a 'b' 'c d");
    }
}
