//! The transport every remote adapter shares: one JSON POST over HTTPS (rustls with the `ring`
//! provider), with timeouts and bounded retries.
//!
//! Contract:
//! - [`HttpTransport::post_json`] sends one JSON body and returns the parsed JSON of a 2xx
//!   answer. A non-2xx answer becomes the error the caller's format-specific `parse_error` makes
//!   of it; no answer at all (refused, reset, timed out) is [`LlmError::Transport`]; a 2xx body
//!   that is not JSON is [`LlmError::Decode`].
//! - Only errors whose [`LlmError::retryable`] is true are tried again, at most
//!   [`HttpConfig::max_attempts`] tries in all; the wait is the provider's `retry-after-ms` /
//!   `retry-after` when given, otherwise exponential backoff, and never more than
//!   [`HttpConfig::max_delay`].
//! - Secrets never appear in errors or `Debug` output: keys travel as [`Secret`] and as
//!   sensitive header values, and every error message is scrubbed of the key before it leaves.
//!   A provider's error body is scrubbed before it is cut to an excerpt (a key straddling the
//!   cut would otherwise survive in part), in its raw form and in its JSON-decoded strings.
//! - Redirects are never followed: a key header (`x-api-key`, `authorization`) must not travel
//!   to a host the caller did not name. A 3xx answer is a [`LlmError::Status`] that names the
//!   host it pointed to.

use std::fmt;
use std::sync::Once;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use toolgate_core::error_chain::error_chain;

use crate::LlmError;
use crate::wire::excerpt;

/// An API key. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The key itself, for the one header that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Timeouts and retry policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// How long to wait for the TCP and TLS connection.
    pub connect_timeout: Duration,
    /// How long one try may take in all, answer body included.
    pub timeout: Duration,
    /// Tries in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The wait before the second try when the provider says nothing; doubled each time.
    pub initial_backoff: Duration,
    /// The longest wait between tries, whatever the provider asks for.
    pub max_delay: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(300),
            max_attempts: 3,
            initial_backoff: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
        }
    }
}

/// How a format turns a non-2xx status and its body into an error.
pub type ErrorParser = fn(u16, &str) -> LlmError;

/// A reusable HTTPS client with one retry policy.
#[derive(Clone)]
pub struct HttpTransport {
    client: reqwest::Client,
    config: HttpConfig,
}

impl fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTransport")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Makes `ring` the process's rustls provider unless one is already installed.
fn ensure_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error means another provider was installed first; reqwest then uses that one.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// One failed try: the error and how long the provider asked us to wait.
struct Failure {
    error: LlmError,
    retry_after: Option<Duration>,
}

impl HttpTransport {
    pub fn new(config: HttpConfig) -> Result<Self, LlmError> {
        if config.max_attempts == 0 {
            return Err(LlmError::Config("max_attempts must be at least 1".into()));
        }
        ensure_crypto_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.timeout)
            .user_agent(concat!("toolgate-llm/", env!("CARGO_PKG_VERSION")))
            // A redirect would carry the key headers to wherever it points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| {
                LlmError::Config(format!(
                    "could not build the HTTP client: {}",
                    error_chain(&e)
                ))
            })?;
        Ok(HttpTransport { client, config })
    }

    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// POSTs `body` as JSON to `url` with `headers`, retrying as the module doc says. `secret`
    /// is scrubbed from every error message.
    pub async fn post_json(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &Value,
        parse_error: ErrorParser,
        secret: Option<&Secret>,
    ) -> Result<Value, LlmError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| LlmError::Config(format!("the request could not be encoded: {e}")))?;
        let mut attempt = 1;
        loop {
            let failure = match self
                .try_once(url, headers, bytes.clone(), parse_error, secret)
                .await
            {
                Ok(value) => return Ok(value),
                Err(failure) => failure,
            };
            let error = redact_error(failure.error, secret);
            if attempt >= self.config.max_attempts || !error.retryable() {
                return Err(note_attempts(error, attempt));
            }
            tokio::time::sleep(retry_delay(attempt, failure.retry_after, &self.config)).await;
            attempt += 1;
        }
    }

    async fn try_once(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: Vec<u8>,
        parse_error: ErrorParser,
        secret: Option<&Secret>,
    ) -> Result<Value, Failure> {
        let transport = |e: reqwest::Error| Failure {
            error: LlmError::Transport(describe(&e, &self.config)),
            retry_after: None,
        };
        let response = self
            .client
            .post(url)
            .headers(headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok());
            return Err(Failure {
                error: redirect_error(status.as_u16(), url, location),
                retry_after: None,
            });
        }
        let retry_after = retry_after_from(response.headers());
        let bytes = response.bytes().await.map_err(transport)?;
        let body = scrub_body(&String::from_utf8_lossy(&bytes), secret);
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| Failure {
                error: LlmError::Decode(format!(
                    "the {status} body is not JSON ({e}): {}",
                    excerpt(&body)
                )),
                retry_after: None,
            });
        }
        Err(Failure {
            error: parse_error(status.as_u16(), &body),
            retry_after,
        })
    }
}

/// Builds a header map; a value marked sensitive is hidden from `Debug`. An invalid value is a
/// [`LlmError::Config`] naming the header, never quoting the value.
pub fn header_map(pairs: &[(&'static str, &str, bool)]) -> Result<HeaderMap, LlmError> {
    let mut map = HeaderMap::new();
    for (name, value, sensitive) in pairs {
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            LlmError::Config(format!(
                "the value for header `{name}` is not a valid HTTP header value (a stray newline or non-ASCII character in the key?)"
            ))
        })?;
        value.set_sensitive(*sensitive);
        map.insert(HeaderName::from_static(name), value);
    }
    Ok(map)
}

/// What went wrong with a request that got no answer, with the cause chain
/// (`… connection refused`) and the timeouts when one was hit.
fn describe(error: &reqwest::Error, config: &HttpConfig) -> String {
    if error.is_timeout() {
        format!(
            "timed out (connect timeout {:?}, total timeout {:?}): {}",
            config.connect_timeout,
            config.timeout,
            error_chain(error)
        )
    } else {
        error_chain(error)
    }
}

/// The wait a provider asked for: `retry-after-ms` (OpenAI) first, then `retry-after` in
/// seconds. An HTTP-date or garbage is ignored (backoff applies).
fn retry_after_from(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    parse_retry_after(get("retry-after-ms"), get("retry-after"))
}

fn parse_retry_after(millis: Option<&str>, seconds: Option<&str>) -> Option<Duration> {
    let parse = |text: Option<&str>, scale: f64| {
        text.and_then(|t| t.trim().parse::<f64>().ok())
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| Duration::from_secs_f64((n * scale).min(86_400.0)))
    };
    parse(millis, 0.001).or_else(|| parse(seconds, 1.0))
}

/// The wait after try number `attempt` (1-based): the provider's ask, else
/// `initial_backoff * 2^(attempt-1)`, capped by `max_delay` either way.
fn retry_delay(attempt: u32, retry_after: Option<Duration>, config: &HttpConfig) -> Duration {
    let backoff = || {
        let factor = 2_u32.saturating_pow(attempt.saturating_sub(1));
        config.initial_backoff.saturating_mul(factor)
    };
    retry_after.unwrap_or_else(backoff).min(config.max_delay)
}

/// The refusal of a redirect, naming the host it pointed to (never the whole Location, which
/// may carry a query).
fn redirect_error(status: u16, url: &str, location: Option<&str>) -> LlmError {
    let target = location.and_then(|l| reqwest::Url::parse(url).ok()?.join(l).ok());
    let host = match target.as_ref().and_then(|t| t.host_str()) {
        Some(host) => format!("to host `{host}`"),
        None => "without a usable Location".to_string(),
    };
    LlmError::Status {
        status,
        message: format!(
            "the provider redirected {host}; provider calls do not follow redirects, since the key \
             would go along: set the base URL to the final address"
        ),
    }
}

/// A provider's error body with `secret` replaced, before anything cuts it: in the raw text,
/// and in the strings of its JSON when the key is there only in escaped form (`\u0073k-…`).
fn scrub_body(body: &str, secret: Option<&Secret>) -> String {
    let Some(secret) = secret.map(Secret::expose).filter(|s| !s.is_empty()) else {
        return body.to_string();
    };
    let raw = redact(body, secret);
    match serde_json::from_str::<Value>(&raw) {
        Ok(value) if json_holds(&value, secret) => {
            serde_json::to_string(&redact_json(value, secret)).unwrap_or(raw)
        }
        _ => raw,
    }
}

fn json_holds(value: &Value, secret: &str) -> bool {
    match value {
        Value::String(s) => s.contains(secret),
        Value::Array(items) => items.iter().any(|v| json_holds(v, secret)),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.contains(secret) || json_holds(v, secret)),
        _ => false,
    }
}

fn redact_json(value: Value, secret: &str) -> Value {
    match value {
        Value::String(s) => Value::String(redact(&s, secret)),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| redact_json(v, secret)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (redact(&k, secret), redact_json(v, secret)))
                .collect(),
        ),
        other => other,
    }
}

/// `text` with every occurrence of `secret` replaced.
fn redact(text: &str, secret: &str) -> String {
    if secret.is_empty() {
        text.to_string()
    } else {
        text.replace(secret, "[redacted]")
    }
}

fn redact_error(error: LlmError, secret: Option<&Secret>) -> LlmError {
    let Some(secret) = secret else {
        return error;
    };
    let r = |text: String| redact(&text, secret.expose());
    match error {
        LlmError::Status { status, message } => LlmError::Status {
            status,
            message: r(message),
        },
        LlmError::Transport(m) => LlmError::Transport(r(m)),
        LlmError::Decode(m) => LlmError::Decode(r(m)),
        LlmError::Config(m) => LlmError::Config(r(m)),
        LlmError::Engine(m) => LlmError::Engine(r(m)),
    }
}

/// Says how many tries were made when more than one was.
fn note_attempts(error: LlmError, attempts: u32) -> LlmError {
    if attempts <= 1 {
        return error;
    }
    let note = |m: String| format!("{m} (gave up after {attempts} tries)");
    match error {
        LlmError::Status { status, message } => LlmError::Status {
            status,
            message: note(message),
        },
        LlmError::Transport(m) => LlmError::Transport(note(m)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> HttpConfig {
        HttpConfig {
            initial_backoff: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            ..HttpConfig::default()
        }
    }

    #[test]
    fn prevents_ignoring_or_misreading_retry_after() {
        let cases = [
            (None, Some("2"), Some(Duration::from_secs(2))),
            (None, Some(" 1.5 "), Some(Duration::from_millis(1500))),
            (Some("250"), Some("2"), Some(Duration::from_millis(250))),
            (Some("soon"), Some("3"), Some(Duration::from_secs(3))),
            (None, Some("Wed, 21 Oct 2015 07:28:00 GMT"), None),
            (None, Some("-1"), None),
            (None, Some("NaN"), None),
            (None, None, None),
        ];
        for (ms, secs, want) in cases {
            assert_eq!(parse_retry_after(ms, secs), want, "{ms:?} {secs:?}");
        }
    }

    #[test]
    fn prevents_unbounded_waits_between_tries() {
        let c = config();
        let cases = [
            (1, None, Duration::from_millis(100)),
            (2, None, Duration::from_millis(200)),
            (3, None, Duration::from_millis(400)),
            (40, None, Duration::from_secs(5)),
            (1, Some(Duration::from_secs(2)), Duration::from_secs(2)),
            (1, Some(Duration::from_secs(3600)), Duration::from_secs(5)),
            (1, Some(Duration::ZERO), Duration::ZERO),
        ];
        for (attempt, asked, want) in cases {
            assert_eq!(retry_delay(attempt, asked, &c), want, "{attempt} {asked:?}");
        }
    }

    #[test]
    fn prevents_keys_leaking_into_errors() {
        let secret = Secret::new("sk-live-123");
        let cases = [
            (
                LlmError::Status {
                    status: 401,
                    message: "Incorrect API key provided: sk-live-123.".into(),
                },
                LlmError::Status {
                    status: 401,
                    message: "Incorrect API key provided: [redacted].".into(),
                },
            ),
            (
                LlmError::Transport("sk-live-123 sk-live-123".into()),
                LlmError::Transport("[redacted] [redacted]".into()),
            ),
            (
                LlmError::Decode("nothing secret".into()),
                LlmError::Decode("nothing secret".into()),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(redact_error(input, Some(&secret)), want);
        }
        assert_eq!(redact("a", ""), "a");
    }

    #[test]
    fn prevents_keys_leaking_into_debug_output() {
        let secret = Secret::new("sk-live-123");
        let headers = header_map(&[("authorization", "Bearer sk-live-123", true)])
            .unwrap_or_else(|e| panic!("{e}"));
        for shown in [
            format!("{secret:?}"),
            format!("{secret}"),
            format!("{headers:?}"),
        ] {
            assert!(!shown.contains("sk-live-123"), "{shown}");
        }
    }

    #[test]
    fn prevents_invalid_keys_being_echoed() {
        let err = header_map(&[("x-api-key", "sk-bad\nkey", true)]);
        match err {
            Err(LlmError::Config(m)) => assert!(m.contains("x-api-key") && !m.contains("sk-bad")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_key_straddling_the_excerpt_cut_is_scrubbed_whole() {
        let key = "sk-live-0123456789abcdef";
        let secret = Secret::new(key);
        let pad = "x".repeat(crate::wire::MAX_EXCERPT_CHARS - 12);
        let cases = [
            format!("{pad}{key} trailing"),
            format!("{{\"error\": {{\"message\": \"{pad}{key}\"}}}}"),
            // The key only in JSON-escaped form: decoded, it would appear whole.
            format!("{{\"error\": {{\"message\": \"{pad}\\u0073k-live-0123456789abcdef\"}}}}"),
        ];
        for body in cases {
            let scrubbed = scrub_body(&body, Some(&secret));
            for shown in [
                excerpt(&scrubbed),
                crate::openai_chat::parse_error(401, &scrubbed).to_string(),
                crate::anthropic::parse_error(401, &scrubbed).to_string(),
            ] {
                assert!(!shown.contains(&key[..8]), "{shown}");
            }
        }
        assert_eq!(scrub_body("no key here", Some(&secret)), "no key here");
        assert_eq!(scrub_body("sk-live", None), "sk-live");
    }

    #[test]
    fn a_redirect_names_only_the_host_it_points_to() {
        let cases = [
            (
                Some("http://127.0.0.1:9/v1/messages?k=sk"),
                "to host `127.0.0.1`",
            ),
            (Some("https://evil.example/steal"), "to host `evil.example`"),
            (Some("/other/path"), "to host `api.example`"),
            (None, "without a usable Location"),
        ];
        for (location, want) in cases {
            let err = redirect_error(307, "https://api.example/v1/messages", location);
            match &err {
                LlmError::Status {
                    status: 307,
                    message,
                } => {
                    assert!(message.contains(want), "{message}");
                    assert!(!message.contains("k=sk"), "{message}");
                }
                other => panic!("{other:?}"),
            }
            assert!(!err.retryable());
        }
    }

    #[test]
    fn prevents_silent_retries_in_final_errors() {
        let cases = [
            (
                LlmError::Transport("refused".into()),
                1,
                LlmError::Transport("refused".into()),
            ),
            (
                LlmError::Transport("refused".into()),
                3,
                LlmError::Transport("refused (gave up after 3 tries)".into()),
            ),
            (
                LlmError::Status {
                    status: 529,
                    message: "overloaded".into(),
                },
                2,
                LlmError::Status {
                    status: 529,
                    message: "overloaded (gave up after 2 tries)".into(),
                },
            ),
        ];
        for (input, attempts, want) in cases {
            assert_eq!(note_attempts(input, attempts), want);
        }
    }

    #[test]
    fn prevents_a_zero_try_policy() {
        let c = HttpConfig {
            max_attempts: 0,
            ..HttpConfig::default()
        };
        assert!(matches!(HttpTransport::new(c), Err(LlmError::Config(_))));
    }
}
