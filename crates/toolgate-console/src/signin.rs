//! Signing a person in as an OAuth client of the authorization server that `[serve.auth]`
//! trusts: authorization code with PKCE (S256), a random `state`, and a resource indicator for
//! this server, so that the access token the code is exchanged for is one the server's own
//! resource server checks (signature, issuer, audience, expiry). The person is that token's
//! principal; the token itself is dropped once checked, never stored or passed on.
//!
//! Every request to the authorization server (its metadata, the token endpoint) goes through
//! the egress exit; the endpoints come from the issuer's metadata, whose `issuer` must be the
//! configured one, and plain http is refused except on loopback (tests).
//!
//! The protocol (URL building, PKCE, the token request and its response) is the `oauth2` crate's;
//! this module only carries its requests through the exit.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::HeaderMap;
use oauth2::basic::BasicClient;
use oauth2::{
    AsyncHttpClient, AuthUrl, AuthorizationCode, ClientId, CsrfToken, HttpRequest, HttpResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, TokenResponse, TokenUrl,
};
use serde_json::Value;
use tokio::sync::OnceCell;
use toolgate_core::Principal;
use toolgate_egress::Egress;
use toolgate_mcp::auth::ResourceServer;
use toolgate_mcp::auth::keys::{metadata_urls, refuse_plain_http};

/// The largest token response read.
const MAX_TOKEN_RESPONSE: usize = 64 * 1024;

/// Why a sign-in failed. Shown to the person in words; never holds a token.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("the authorization server's metadata could not be read: {0}")]
    Metadata(String),
    #[error("the authorization server refused the sign-in: {0}")]
    Exchange(String),
    #[error("the access token was refused: {0}")]
    Token(String),
}

/// Where the authorization server takes people and codes.
#[derive(Debug, Clone)]
struct Endpoints {
    authorize: String,
    token: String,
}

/// The console as an OAuth client.
pub struct SignIn {
    pub client_id: String,
    pub redirect_uri: String,
    pub resource: String,
    pub scopes: Vec<String>,
    issuer: String,
    egress: Arc<Egress>,
    auth: Arc<ResourceServer>,
    endpoints: OnceCell<Endpoints>,
}

/// Where to send the person, and what to keep until they come back.
pub struct Started {
    pub url: String,
    pub state: String,
    pub verifier: String,
}

impl SignIn {
    pub fn new(
        client_id: &str,
        redirect_uri: &str,
        resource: &str,
        scopes: Vec<String>,
        issuer: &str,
        egress: Arc<Egress>,
        auth: Arc<ResourceServer>,
    ) -> Self {
        SignIn {
            client_id: client_id.into(),
            redirect_uri: redirect_uri.into(),
            resource: resource.into(),
            scopes,
            issuer: issuer.into(),
            egress,
            auth,
            endpoints: OnceCell::new(),
        }
    }

    async fn endpoints(&self) -> Result<&Endpoints, SignInError> {
        self.endpoints.get_or_try_init(|| self.discover()).await
    }

    async fn discover(&self) -> Result<Endpoints, SignInError> {
        let mut last = String::from("no metadata URL");
        for url in metadata_urls(&self.issuer) {
            let page = match self.egress.get(&url).await {
                Ok(page) if page.status == 200 => page,
                Ok(page) => {
                    last = format!("{url} answered {}", page.status);
                    continue;
                }
                Err(e) => {
                    last = format!("{url}: {e}");
                    continue;
                }
            };
            let metadata: Value = serde_json::from_str(&page.body)
                .map_err(|e| SignInError::Metadata(format!("{url} is not JSON: {e}")))?;
            if metadata["issuer"].as_str() != Some(self.issuer.as_str()) {
                return Err(SignInError::Metadata(format!(
                    "{url} names another issuer than {}",
                    self.issuer
                )));
            }
            let field = |name: &str| {
                let value = metadata[name]
                    .as_str()
                    .ok_or_else(|| SignInError::Metadata(format!("{url} has no {name}")))?;
                refuse_plain_http(name, value).map_err(|e| SignInError::Metadata(e.to_string()))?;
                Ok::<_, SignInError>(value.to_string())
            };
            return Ok(Endpoints {
                authorize: field("authorization_endpoint")?,
                token: field("token_endpoint")?,
            });
        }
        Err(SignInError::Metadata(last))
    }

    /// The authorization URL for a new sign-in, with its `state` and PKCE verifier.
    pub async fn start(&self) -> Result<Started, SignInError> {
        let endpoints = self.endpoints().await?;
        let client = BasicClient::new(ClientId::new(self.client_id.clone()))
            .set_auth_uri(
                AuthUrl::new(endpoints.authorize.clone())
                    .map_err(|e| SignInError::Metadata(e.to_string()))?,
            )
            .set_redirect_uri(
                RedirectUrl::new(self.redirect_uri.clone())
                    .map_err(|e| SignInError::Metadata(e.to_string()))?,
            );
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client.authorize_url(CsrfToken::new_random);
        for scope in &self.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state) = request
            .set_pkce_challenge(challenge)
            .add_extra_param("resource", self.resource.clone())
            .url();
        Ok(Started {
            url: url.to_string(),
            state: state.secret().clone(),
            verifier: verifier.secret().clone(),
        })
    }

    /// Exchanges `code` (with the sign-in's `verifier`) for an access token, and returns the
    /// principal the resource server finds in it.
    pub async fn finish(&self, code: &str, verifier: &str) -> Result<Principal, SignInError> {
        let endpoints = self.endpoints().await?;
        let client = BasicClient::new(ClientId::new(self.client_id.clone()))
            .set_token_uri(
                TokenUrl::new(endpoints.token.clone())
                    .map_err(|e| SignInError::Metadata(e.to_string()))?,
            )
            .set_redirect_uri(
                RedirectUrl::new(self.redirect_uri.clone())
                    .map_err(|e| SignInError::Metadata(e.to_string()))?,
            );
        let http = ThroughExit {
            client: self
                .egress
                .session_client(&endpoints.token)
                .await
                .map_err(|e| SignInError::Exchange(e.to_string()))?,
        };
        let token = client
            .exchange_code(AuthorizationCode::new(code.into()))
            .set_pkce_verifier(PkceCodeVerifier::new(verifier.into()))
            .add_extra_param("resource", self.resource.clone())
            .request_async(&http)
            .await
            .map_err(|e| SignInError::Exchange(exchange_error(&e)))?;
        let mut headers = HeaderMap::new();
        let bearer = format!("Bearer {}", token.access_token().secret());
        headers.insert(
            http::header::AUTHORIZATION,
            bearer
                .parse()
                .map_err(|_| SignInError::Token("not a header value".into()))?,
        );
        self.auth
            .authenticate(&headers, None)
            .await
            .map_err(|refusal| SignInError::Token(refusal.message()))
    }
}

/// The token endpoint's refusal in words, without the response body's secrets.
fn exchange_error<RE: std::error::Error + 'static>(
    e: &oauth2::RequestTokenError<RE, oauth2::basic::BasicErrorResponse>,
) -> String {
    match e {
        oauth2::RequestTokenError::ServerResponse(r) => r.error().to_string(),
        oauth2::RequestTokenError::Request(e) => e.to_string(),
        oauth2::RequestTokenError::Parse(e, _) => format!("unreadable response: {e}"),
        oauth2::RequestTokenError::Other(e) => e.clone(),
    }
}

/// Why a request through the exit failed.
#[derive(Debug, thiserror::Error)]
pub enum ExitError {
    #[error("the request could not be built: {0}")]
    Build(String),
    #[error("the request failed: {0}")]
    Send(String),
    #[error("the response is larger than {MAX_TOKEN_RESPONSE} bytes")]
    TooLarge,
}

/// `oauth2`'s HTTP client: a client the egress exit checked and pinned to one origin.
struct ThroughExit {
    client: reqwest::Client,
}

impl<'c> AsyncHttpClient<'c> for ThroughExit {
    type Error = ExitError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, ExitError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let request =
                reqwest::Request::try_from(request).map_err(|e| ExitError::Build(e.to_string()))?;
            let response = self
                .client
                .execute(request)
                .await
                .map_err(|e| ExitError::Send(e.to_string()))?;
            let mut builder = http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                builder = builder.header(name, value);
            }
            let body = response
                .bytes()
                .await
                .map_err(|e| ExitError::Send(e.to_string()))?;
            if body.len() > MAX_TOKEN_RESPONSE {
                return Err(ExitError::TooLarge);
            }
            builder
                .body(body.to_vec())
                .map_err(|e| ExitError::Build(e.to_string()))
        })
    }
}
