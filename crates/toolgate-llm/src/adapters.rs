//! The remote [`Model`]s: each joins one wire format ([`crate::anthropic`],
//! [`crate::openai_chat`], [`crate::openai_responses`]) to the shared [`HttpTransport`].
//!
//! Contract: construction validates everything that can be checked without the network (base
//! URL scheme, key present and usable as a header, model name non-empty) and fails with
//! [`LlmError::Config`]; `complete` builds the body with the format's pure `build_request`,
//! POSTs it once (plus the transport's bounded retries) and parses the answer with the format's
//! `parse_response`/`parse_error`. Keys are held as [`Secret`]s: `Debug` of an adapter never
//! shows one, and errors are scrubbed of it.
//!
//! Where a key goes: a key is never sent over plain `http://` to a host other than this
//! machine (127.0.0.0/8, ::1, `localhost`): such an adapter is refused at construction. An
//! OpenAI-compatible server gets a key only when one is named for it
//! ([`OPENAI_COMPAT_API_KEY`] or [`OpenAiCompatModel::with_api_key`]), never OpenAI's own
//! `OPENAI_API_KEY`, which belongs to api.openai.com.

use std::fmt;

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::http::{ErrorParser, HttpConfig, HttpTransport, Secret, header_map};
use crate::{
    BoxFuture, LlmError, Model, ModelRequest, ModelResponse, anthropic, openai_chat,
    openai_responses,
};

/// The environment variable [`AnthropicModel::from_env`] reads.
pub const ANTHROPIC_API_KEY: &str = "ANTHROPIC_API_KEY";
/// The environment variable the OpenAI adapters' `from_env` read.
pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
/// The environment variable [`OpenAiCompatModel::from_env`] reads: a key named for the
/// compatible server, since `OPENAI_API_KEY` is OpenAI's and must not go to another host.
pub const OPENAI_COMPAT_API_KEY: &str = "OPENAI_COMPAT_API_KEY";

/// The key in `var` as `lookup` reports it; missing or blank is a [`LlmError::Config`] that says
/// what to do.
fn key_from(var: &str, lookup: impl FnOnce(&str) -> Option<String>) -> Result<Secret, LlmError> {
    match lookup(var) {
        Some(key) if !key.trim().is_empty() => Ok(Secret::new(key.trim())),
        _ => Err(LlmError::Config(format!(
            "{var} is not set: export it with your API key, or use the embedded local model, which needs no key"
        ))),
    }
}

fn env_lookup(var: &str) -> Option<String> {
    std::env::var(var).ok()
}

/// `base` (http or https, no query or fragment) with `path` appended, one `/` between them.
fn endpoint(base: &str, path: &str) -> Result<String, LlmError> {
    let url = reqwest::Url::parse(base)
        .map_err(|e| LlmError::Config(format!("base URL `{base}` is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(LlmError::Config(format!(
            "base URL `{base}` must start with http:// or https://"
        )));
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(LlmError::Config(format!(
            "base URL `{base}` must not carry a query, a fragment or user info"
        )));
    }
    Ok(format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    ))
}

/// Whether a key may be sent to `url`: over https anywhere, over plain http only to this
/// machine (a loopback address or `localhost`), where no one on the path can read it.
fn key_may_travel_to(url: &reqwest::Url) -> bool {
    if url.scheme() == "https" {
        return true;
    }
    let Some(host) = url.host_str() else {
        return false;
    };
    // An IPv6 host is written in brackets; the URL parser has already normalised IPv4 forms.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// Refuses an endpoint that would carry `key` in the clear to another machine.
fn check_key_transport(url: &str, key: Option<&Secret>) -> Result<(), LlmError> {
    if key.is_none() {
        return Ok(());
    }
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| LlmError::Config(format!("`{url}` is not a URL: {e}")))?;
    if key_may_travel_to(&parsed) {
        Ok(())
    } else {
        Err(LlmError::Config(format!(
            "refusing to send an API key over plain http to `{}`: use https, or a server on this machine (127.0.0.1, ::1, localhost)",
            parsed.host_str().unwrap_or("")
        )))
    }
}

fn non_empty_model(model: String) -> Result<String, LlmError> {
    if model.trim().is_empty() {
        Err(LlmError::Config("the model name is empty".into()))
    } else {
        Ok(model)
    }
}

/// What every remote adapter holds: where to POST, with which headers and key.
#[derive(Clone)]
struct Endpoint {
    base_url: String,
    url: String,
    headers: HeaderMap,
    key: Option<Secret>,
    transport: HttpTransport,
}

impl Endpoint {
    async fn post(&self, body: &Value, parse_error: ErrorParser) -> Result<Value, LlmError> {
        self.transport
            .post_json(
                &self.url,
                &self.headers,
                body,
                parse_error,
                self.key.as_ref(),
            )
            .await
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .field("transport", &self.transport)
            .finish()
    }
}

/// The provider's name for the answering model, or ours when it gave none.
fn with_model(mut response: ModelResponse, model: &str) -> ModelResponse {
    if response.model.is_empty() {
        response.model = model.to_string();
    }
    response
}

// ---------------------------------------------------------------------------------------------

/// Anthropic's Messages API.
#[derive(Clone, Debug)]
pub struct AnthropicModel {
    model: String,
    endpoint: Endpoint,
}

impl AnthropicModel {
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";

    pub fn new(api_key: impl Into<String>, model: impl Into<String>) -> Result<Self, LlmError> {
        Self::build(
            Secret::new(api_key),
            non_empty_model(model.into())?,
            Self::DEFAULT_BASE_URL,
            HttpConfig::default(),
        )
    }

    /// With the key from `ANTHROPIC_API_KEY`.
    pub fn from_env(model: impl Into<String>) -> Result<Self, LlmError> {
        let key = key_from(ANTHROPIC_API_KEY, env_lookup)?;
        Self::new(key.expose(), model)
    }

    /// Another base URL (a proxy, a test server); `/v1/messages` is appended.
    pub fn with_base_url(self, base_url: &str) -> Result<Self, LlmError> {
        Self::build(
            self.key(),
            self.model,
            base_url,
            self.endpoint.transport.config().clone(),
        )
    }

    pub fn with_http_config(self, config: HttpConfig) -> Result<Self, LlmError> {
        let base = self.endpoint.base_url.clone();
        Self::build(self.key(), self.model, &base, config)
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub fn base_url(&self) -> &str {
        &self.endpoint.base_url
    }

    fn key(&self) -> Secret {
        self.endpoint.key.clone().unwrap_or_else(|| Secret::new(""))
    }

    fn build(
        key: Secret,
        model: String,
        base_url: &str,
        config: HttpConfig,
    ) -> Result<Self, LlmError> {
        if key.expose().trim().is_empty() {
            return Err(LlmError::Config("the Anthropic API key is empty".into()));
        }
        let headers = header_map(&[
            ("x-api-key", key.expose(), true),
            ("anthropic-version", anthropic::API_VERSION, false),
        ])?;
        let url = endpoint(base_url, "v1/messages")?;
        check_key_transport(&url, Some(&key))?;
        Ok(AnthropicModel {
            model,
            endpoint: Endpoint {
                base_url: base_url.to_string(),
                url,
                headers,
                key: Some(key),
                transport: HttpTransport::new(config)?,
            },
        })
    }
}

impl Model for AnthropicModel {
    fn name(&self) -> String {
        format!("anthropic:{}", self.model)
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
        Box::pin(async move {
            let body = anthropic::build_request(request, &self.model);
            let answer = self.endpoint.post(&body, anthropic::parse_error).await?;
            Ok(with_model(anthropic::parse_response(&answer)?, &self.model))
        })
    }
}

// ---------------------------------------------------------------------------------------------

/// Which OpenAI-style wire format an [`OpenAiEndpoint`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpenAiFormat {
    Chat,
    Responses,
    Compat,
}

impl OpenAiFormat {
    fn path(self) -> &'static str {
        match self {
            OpenAiFormat::Chat | OpenAiFormat::Compat => "chat/completions",
            OpenAiFormat::Responses => "responses",
        }
    }

    fn build(self, request: &ModelRequest, model: &str) -> Value {
        match self {
            OpenAiFormat::Chat => openai_chat::build_request(request, model),
            OpenAiFormat::Compat => openai_chat::build_compat_request(request, model),
            OpenAiFormat::Responses => openai_responses::build_request(request, model),
        }
    }

    fn parse(self, answer: &Value) -> Result<ModelResponse, LlmError> {
        match self {
            OpenAiFormat::Chat | OpenAiFormat::Compat => openai_chat::parse_response(answer),
            OpenAiFormat::Responses => openai_responses::parse_response(answer),
        }
    }

    fn parse_error(self) -> ErrorParser {
        match self {
            OpenAiFormat::Chat | OpenAiFormat::Compat => openai_chat::parse_error,
            OpenAiFormat::Responses => openai_responses::parse_error,
        }
    }
}

/// An OpenAI-style endpoint: bearer key (optional for compatible servers), one format.
#[derive(Clone, Debug)]
struct OpenAiEndpoint {
    format: OpenAiFormat,
    model: String,
    endpoint: Endpoint,
}

impl OpenAiEndpoint {
    fn build(
        format: OpenAiFormat,
        key: Option<Secret>,
        model: String,
        base_url: &str,
        config: HttpConfig,
    ) -> Result<Self, LlmError> {
        let key = key.filter(|k| !k.expose().trim().is_empty());
        if key.is_none() && format != OpenAiFormat::Compat {
            return Err(LlmError::Config("the OpenAI API key is empty".into()));
        }
        let headers = match &key {
            Some(k) => header_map(&[("authorization", &format!("Bearer {}", k.expose()), true)])?,
            None => HeaderMap::new(),
        };
        let url = endpoint(base_url, format.path())?;
        check_key_transport(&url, key.as_ref())?;
        Ok(OpenAiEndpoint {
            format,
            model: non_empty_model(model)?,
            endpoint: Endpoint {
                base_url: base_url.to_string(),
                url,
                headers,
                key,
                transport: HttpTransport::new(config)?,
            },
        })
    }

    fn rebuild(self, base_url: Option<&str>, config: Option<HttpConfig>) -> Result<Self, LlmError> {
        let base = base_url.map_or_else(|| self.endpoint.base_url.clone(), str::to_string);
        let config = config.unwrap_or_else(|| self.endpoint.transport.config().clone());
        Self::build(self.format, self.endpoint.key, self.model, &base, config)
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, LlmError> {
        let body = self.format.build(request, &self.model);
        let answer = self.endpoint.post(&body, self.format.parse_error()).await?;
        Ok(with_model(self.format.parse(&answer)?, &self.model))
    }
}

macro_rules! openai_model {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $name {
            inner: OpenAiEndpoint,
        }

        impl $name {
            /// Another base URL (a proxy, a test server); the format's path is appended.
            pub fn with_base_url(self, base_url: &str) -> Result<Self, LlmError> {
                Ok($name { inner: self.inner.rebuild(Some(base_url), None)? })
            }

            pub fn with_http_config(self, config: HttpConfig) -> Result<Self, LlmError> {
                Ok($name { inner: self.inner.rebuild(None, Some(config))? })
            }

            pub fn model(&self) -> &str {
                &self.inner.model
            }

            pub fn base_url(&self) -> &str {
                &self.inner.endpoint.base_url
            }
        }

        impl Model for $name {
            fn name(&self) -> String {
                format!(concat!($prefix, ":{}"), self.inner.model)
            }

            fn complete<'a>(
                &'a self,
                request: &'a ModelRequest,
            ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
                Box::pin(self.inner.complete(request))
            }
        }
    };
}

openai_model!(
    /// OpenAI's Chat Completions API (`max_completion_tokens`, bearer key).
    OpenAiChatModel,
    "openai"
);
openai_model!(
    /// OpenAI's Responses API (stateless: the whole history is sent each turn, `store: false`).
    OpenAiResponsesModel,
    "openai-responses"
);
openai_model!(
    /// Any OpenAI-compatible local server (llama.cpp server, Ollama, vLLM): Chat Completions with
    /// `max_tokens`, key optional.
    OpenAiCompatModel,
    "openai-compat"
);

/// The default base URL of OpenAI's API.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

impl OpenAiChatModel {
    pub const DEFAULT_BASE_URL: &'static str = OPENAI_DEFAULT_BASE_URL;

    pub fn new(api_key: impl Into<String>, model: impl Into<String>) -> Result<Self, LlmError> {
        let inner = OpenAiEndpoint::build(
            OpenAiFormat::Chat,
            Some(Secret::new(api_key)),
            model.into(),
            Self::DEFAULT_BASE_URL,
            HttpConfig::default(),
        )?;
        Ok(OpenAiChatModel { inner })
    }

    /// With the key from `OPENAI_API_KEY`.
    pub fn from_env(model: impl Into<String>) -> Result<Self, LlmError> {
        let key = key_from(OPENAI_API_KEY, env_lookup)?;
        Self::new(key.expose(), model)
    }
}

impl OpenAiResponsesModel {
    pub const DEFAULT_BASE_URL: &'static str = OPENAI_DEFAULT_BASE_URL;

    pub fn new(api_key: impl Into<String>, model: impl Into<String>) -> Result<Self, LlmError> {
        let inner = OpenAiEndpoint::build(
            OpenAiFormat::Responses,
            Some(Secret::new(api_key)),
            model.into(),
            Self::DEFAULT_BASE_URL,
            HttpConfig::default(),
        )?;
        Ok(OpenAiResponsesModel { inner })
    }

    /// With the key from `OPENAI_API_KEY`.
    pub fn from_env(model: impl Into<String>) -> Result<Self, LlmError> {
        let key = key_from(OPENAI_API_KEY, env_lookup)?;
        Self::new(key.expose(), model)
    }
}

impl OpenAiCompatModel {
    /// A server at `base_url` (e.g. `http://127.0.0.1:8080/v1` for llama.cpp server,
    /// `http://127.0.0.1:11434/v1` for Ollama, `http://127.0.0.1:8000/v1` for vLLM), no key.
    pub fn new(base_url: &str, model: impl Into<String>) -> Result<Self, LlmError> {
        let inner = OpenAiEndpoint::build(
            OpenAiFormat::Compat,
            None,
            model.into(),
            base_url,
            HttpConfig::default(),
        )?;
        Ok(OpenAiCompatModel { inner })
    }

    /// The server at `base_url`, with the key in [`OPENAI_COMPAT_API_KEY`] when that is set
    /// (and not blank); `OPENAI_API_KEY` is never read, since it is OpenAI's.
    pub fn from_env(base_url: &str, model: impl Into<String>) -> Result<Self, LlmError> {
        Self::from_lookup(base_url, model, env_lookup)
    }

    /// As [`Self::from_env`], reading variables through `lookup`.
    pub fn from_lookup(
        base_url: &str,
        model: impl Into<String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, LlmError> {
        let compat = Self::new(base_url, model)?;
        match lookup(OPENAI_COMPAT_API_KEY) {
            Some(key) if !key.trim().is_empty() => compat.with_api_key(key.trim()),
            _ => Ok(compat),
        }
    }

    /// Sends `Authorization: Bearer <key>` (vLLM's `--api-key`, a gateway in front of Ollama).
    /// Refused for a plain `http://` URL to another machine.
    pub fn with_api_key(self, api_key: impl Into<String>) -> Result<Self, LlmError> {
        let inner = self.inner;
        let inner = OpenAiEndpoint::build(
            inner.format,
            Some(Secret::new(api_key)),
            inner.model,
            &inner.endpoint.base_url,
            inner.endpoint.transport.config().clone(),
        )?;
        Ok(OpenAiCompatModel { inner })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prevents_unclear_missing_key_errors() {
        let cases: [(Option<&str>, Option<&str>); 4] = [
            (None, None),
            (Some(""), None),
            (Some("  "), None),
            (Some(" sk-1 \n"), Some("sk-1")),
        ];
        for (value, want) in cases {
            let got = key_from("OPENAI_API_KEY", |_| value.map(str::to_string));
            match (got, want) {
                (Ok(key), Some(want)) => assert_eq!(key.expose(), want),
                (Err(LlmError::Config(m)), None) => {
                    assert!(m.contains("OPENAI_API_KEY is not set"), "{m}")
                }
                (other, want) => panic!("{value:?}: got {other:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn prevents_malformed_endpoint_urls() {
        let cases = [
            (
                "https://api.anthropic.com",
                "v1/messages",
                Some("https://api.anthropic.com/v1/messages"),
            ),
            (
                "https://api.openai.com/v1/",
                "chat/completions",
                Some("https://api.openai.com/v1/chat/completions"),
            ),
            (
                "http://127.0.0.1:11434/v1",
                "/chat/completions",
                Some("http://127.0.0.1:11434/v1/chat/completions"),
            ),
            ("ftp://example.org", "x", None),
            ("api.openai.com/v1", "x", None),
            ("https://example.org/v1?key=abc", "x", None),
            ("https://user:pw@example.org/v1", "x", None),
        ];
        for (base, path, want) in cases {
            let got = endpoint(base, path).ok();
            assert_eq!(got.as_deref(), want, "{base}");
        }
    }

    #[test]
    fn prevents_keys_in_adapter_debug_output() {
        let shown = [
            format!("{:?}", AnthropicModel::new("sk-ant-secret", "claude-x")),
            format!("{:?}", OpenAiChatModel::new("sk-oai-secret", "gpt-x")),
            format!("{:?}", OpenAiResponsesModel::new("sk-oai-secret", "gpt-x")),
            format!(
                "{:?}",
                OpenAiCompatModel::new("http://127.0.0.1:8080/v1", "local")
                    .and_then(|m| m.with_api_key("sk-oai-secret"))
            ),
        ];
        for text in shown {
            assert!(text.starts_with("Ok("), "{text}");
            assert!(!text.contains("secret"), "{text}");
        }
    }

    #[test]
    fn prevents_unusable_configurations() {
        assert!(matches!(
            AnthropicModel::new("", "claude-x"),
            Err(LlmError::Config(_))
        ));
        assert!(matches!(
            AnthropicModel::new("k", " "),
            Err(LlmError::Config(_))
        ));
        assert!(matches!(
            OpenAiChatModel::new("", "gpt-x"),
            Err(LlmError::Config(_))
        ));
        assert!(matches!(
            OpenAiResponsesModel::new("k", ""),
            Err(LlmError::Config(_))
        ));
        assert!(matches!(
            OpenAiCompatModel::new("localhost:8080", "m"),
            Err(LlmError::Config(_))
        ));
        assert!(OpenAiCompatModel::new("http://127.0.0.1:8080/v1", "m").is_ok());
    }

    #[test]
    fn plain_http_key_to_a_remote_host_is_refused() {
        let cases = [
            ("https://api.openai.com/v1", true),
            ("https://10.0.0.5:8000/v1", true),
            ("http://127.0.0.1:8080/v1", true),
            ("http://127.8.9.1:8080/v1", true),
            ("http://[::1]:8080/v1", true),
            ("http://localhost:11434/v1", true),
            ("http://LOCALHOST:11434/v1", true),
            ("http://10.0.0.5:8000/v1", false),
            ("http://192.168.1.2/v1", false),
            ("http://gpu-box.lan:8000/v1", false),
            ("http://localhost.evil.example/v1", false),
            ("http://127.0.0.1.nip.io/v1", false),
            ("http://[::ffff:127.0.0.1]/v1", false),
        ];
        for (base, allowed) in cases {
            let url = reqwest::Url::parse(base).unwrap_or_else(|e| panic!("{base}: {e}"));
            assert_eq!(key_may_travel_to(&url), allowed, "{base}");
            let with_key = OpenAiCompatModel::new(base, "m").and_then(|m| m.with_api_key("sk-x"));
            match (with_key, allowed) {
                (Ok(_), true) => {}
                (Err(LlmError::Config(m)), false) => {
                    assert!(m.contains("plain http") && !m.contains("sk-x"), "{m}")
                }
                (other, _) => panic!("{base}: {other:?}"),
            }
            // Without a key any of them is fine: nothing secret travels.
            assert!(OpenAiCompatModel::new(base, "m").is_ok(), "{base}");
        }
        assert!(matches!(
            AnthropicModel::new("k", "c").and_then(|m| m.with_base_url("http://10.0.0.5")),
            Err(LlmError::Config(_))
        ));
    }

    #[test]
    fn openai_key_is_not_a_compatible_servers_key() {
        let only_openai = |var: &str| (var == OPENAI_API_KEY).then(|| "sk-openai".to_string());
        let named = |var: &str| (var == OPENAI_COMPAT_API_KEY).then(|| " sk-compat ".to_string());
        let blank = |var: &str| (var == OPENAI_COMPAT_API_KEY).then(|| "  ".to_string());
        let base = "http://127.0.0.1:8080/v1";
        let key_of = |m: OpenAiCompatModel| m.inner.endpoint.key.map(|k| k.expose().to_string());
        type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;
        let cases: [(Lookup, Option<&str>); 3] = [
            (&only_openai, None),
            (&named, Some("sk-compat")),
            (&blank, None),
        ];
        for (lookup, want) in cases {
            let model =
                OpenAiCompatModel::from_lookup(base, "m", lookup).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(key_of(model).as_deref(), want);
        }
        // A named key for a plain-http remote server is refused, not dropped silently.
        assert!(matches!(
            OpenAiCompatModel::from_lookup("http://10.0.0.5/v1", "m", named),
            Err(LlmError::Config(_))
        ));
    }

    #[test]
    fn prevents_ambiguous_model_names() {
        let names = [
            AnthropicModel::new("k", "claude-x").map(|m| m.name()),
            OpenAiChatModel::new("k", "gpt-x").map(|m| m.name()),
            OpenAiResponsesModel::new("k", "gpt-x").map(|m| m.name()),
            OpenAiCompatModel::new("http://127.0.0.1:8080/v1", "qwen").map(|m| m.name()),
        ];
        let want = [
            "anthropic:claude-x",
            "openai:gpt-x",
            "openai-responses:gpt-x",
            "openai-compat:qwen",
        ];
        for (got, want) in names.into_iter().zip(want) {
            assert_eq!(got.ok().as_deref(), Some(want));
        }
    }
}
