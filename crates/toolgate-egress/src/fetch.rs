//! The exit itself: [`Egress::get`], the one way a tool fetches a URL.
//!
//! Contract, for every hop (the first request and each redirect):
//! - The URL is canonicalized ([`crate::canon`]), matched against the allowlist
//!   ([`Policy::check_target`]), its name resolved by the exit's own [`Resolver`], and every
//!   address checked ([`check_addresses`]); any failure blocks before a byte is sent.
//! - The connection goes to the addresses that were checked: the per-hop client has them pinned
//!   for that one name (`resolve_to_addrs`), any other name fails to resolve inside the client,
//!   proxies are off (`no_proxy`, so no `HTTPS_PROXY` detour), and the client follows no
//!   redirects and retries nothing by itself. There is no second DNS lookup to rebind.
//! - A server certificate that does not validate (self-signed, another name, expired, not yet
//!   valid, an unknown issuer) ends the call with the `tls_certificate` rule; the handshake
//!   fails before a request is written.
//! - Redirects are followed here, at most `max_redirects`, each re-checked from scratch; an
//!   `https` to `http` move is refused.
//! - Nothing is carried across hops: no cookies (the client has no cookie store), no
//!   `Authorization` or other credentials (the exit sends none at all), no `Referer`. The only
//!   request headers are `Accept` (the allowed content types), `Accept-Encoding: identity` and
//!   `User-Agent`; the URL is the only value a caller passes, and one holding a control
//!   character (CR, LF, NUL, tab, ...) is refused as `invalid_url` before anything is resolved,
//!   so nothing a tool passes can reach a request line or header unescaped.
//! - Every response's framing is checked before it is used ([`check_framing`]): both
//!   `Content-Length` and `Transfer-Encoding`, two different lengths, or a transfer coding
//!   other than a single `chunked` are refused as `ambiguous_framing` (the shapes response
//!   smuggling needs), even where the HTTP library would pick one reading itself.
//! - The exit decodes no content coding and asks for none; a final answer that declares one
//!   (`gzip`, `br`, ...) is refused as `content_encoding_not_allowed` on its header
//!   ([`check_encoding`]), before any of its body is read, so a decompression bomb never
//!   inflates here and never reaches a caller as opaque bytes.
//! - The whole call, redirects and body included, is bounded by `timeout`; the body is read in
//!   chunks and refused as soon as it passes `max_bytes` (over-size is an error, never a silent
//!   cut); the final `Content-Type` must be on the list; a non-2xx final status is an error.
//! - Exactly one `egress` trace event is emitted per call, allowed or blocked, with the rule
//!   that decided and the hop chain. URLs in the trace have userinfo redacted. With the
//!   current call's telemetry on, the same decision is also one span ([`crate::telemetry`]),
//!   ended when the final response's headers arrive or the request fails.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};

use reqwest::header::{
    ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, LOCATION,
    TRANSFER_ENCODING,
};
use toolgate_core::budget::Spend;
use toolgate_core::error_chain::error_chain;
use toolgate_core::trace::TraceSink;

use crate::addr::check_addresses;
use crate::canon::{Host, Target, canonicalize_url, cut, next_hop, url_for_trace};
use crate::config::{ConfigError, EgressConfig, Policy};
use crate::error::{BlockReason, EgressError};
use crate::resolve::{Resolver, addresses_of};
use crate::telemetry::EgressSpan;
use crate::trace_event::{EgressDecision, Request};

/// A fetched page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPage {
    /// The URL that answered (after redirects).
    pub final_url: String,
    pub status: u16,
    /// The media type, lower-case, without parameters.
    pub content_type: String,
    /// The body as UTF-8 (invalid sequences replaced).
    pub body: String,
    /// The body's size in bytes, as received.
    pub bytes: u64,
    /// Every URL requested, in order: the first is the canonical request, the last `final_url`.
    pub hops: Vec<String>,
}

/// The single exit for outbound HTTP.
pub struct Egress {
    policy: Policy,
    resolver: Arc<dyn Resolver>,
    trace: Arc<dyn TraceSink>,
    extra_roots: Vec<reqwest::Certificate>,
    requests_sent: AtomicU64,
}

impl fmt::Debug for Egress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Egress")
            .field("policy", &self.policy)
            .field("requests_sent", &self.requests_sent())
            .finish_non_exhaustive()
    }
}

/// Makes `ring` the process's rustls provider unless one is already installed.
pub(crate) fn ensure_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error means another provider was installed first; that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A resolver for the per-hop client that refuses every name: the one name the hop may use is
/// pinned to its checked addresses, so any other lookup is a bug, not a fallback.
struct NoDns;

impl reqwest::dns::Resolve for NoDns {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_string();
        Box::pin(async move {
            Err(format!("the egress exit resolves names itself; `{name}` was not checked").into())
        })
    }
}

/// What the trace line of one call says; filled in as the call goes.
#[derive(Debug, Default)]
struct Record {
    /// The call's span, when telemetry is on ([`crate::telemetry`]).
    span: Option<EgressSpan>,
    method: Option<&'static str>,
    url: String,
    hops: Vec<String>,
    hop_rules: Vec<String>,
    scheme: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    addresses: Vec<String>,
    status: Option<u16>,
    bytes: u64,
    content_type: Option<String>,
}

impl Record {
    fn enter(&mut self, target: &Target) {
        self.hops.push(target.url.to_string());
        self.scheme = Some(target.scheme.as_str().to_string());
        self.host = Some(target.host.to_string());
        self.port = Some(target.port);
        self.addresses.clear();
        self.status = None;
    }

    /// A hop that never became a [`Target`]: its raw text (redacted) and its host as written.
    fn enter_raw(&mut self, raw: &str) {
        self.hops.push(url_for_trace(raw));
        self.host = raw_host_of(raw);
        self.scheme = raw
            .split_once("://")
            .map(|(s, _)| cut(&s.to_ascii_lowercase(), 20));
        self.port = None;
        self.addresses.clear();
        self.status = None;
    }

    /// The call's trace event, recorded to `trace`, and its span ended from the same decision.
    fn finish<T>(mut self, result: &Result<T, EgressError>, trace: &dyn TraceSink) {
        let span = self.span.take();
        let decision = self.into_decision(result);
        if let Some(span) = span {
            span.end(&decision);
        }
        trace.record(Arc::new(decision));
    }

    fn into_decision<T>(self, result: &Result<T, EgressError>) -> EgressDecision {
        let allowed_by = self.hop_rules.last().cloned();
        let request = Request::Http {
            method: self.method,
            url: self.url,
            scheme: self.scheme,
            host: self.host,
            port: self.port,
            addresses: self.addresses,
            hops: self.hops,
            hop_rules: self.hop_rules,
            status: self.status,
            bytes: self.bytes,
            content_type: self.content_type,
        };
        EgressDecision::of(request, result, allowed_by, |detail| detail)
    }
}

/// The host of a raw URL as written (after any userinfo, before the port), bounded.
pub(crate) fn raw_host_of(raw: &str) -> Option<String> {
    let (_, rest) = raw.split_once("://")?;
    let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let host = if host_port.starts_with('[') {
        host_port.split_inclusive(']').next().unwrap_or(host_port)
    } else {
        host_port.split(':').next().unwrap_or(host_port)
    };
    Some(cut(host, 200))
}

impl Egress {
    /// Validates `config` (see [`EgressConfig::validate`]) and builds the exit.
    pub fn new(
        config: EgressConfig,
        resolver: Arc<dyn Resolver>,
        trace: Arc<dyn TraceSink>,
    ) -> Result<Egress, ConfigError> {
        let policy = config.validate()?;
        Ok(Egress::from_policy(policy, resolver, trace))
    }

    /// Builds the exit from an already validated policy.
    pub fn from_policy(
        policy: Policy,
        resolver: Arc<dyn Resolver>,
        trace: Arc<dyn TraceSink>,
    ) -> Egress {
        ensure_crypto_provider();
        Egress {
            policy,
            resolver,
            trace,
            extra_roots: Vec::new(),
            requests_sent: AtomicU64::new(0),
        }
    }

    /// Also trusts this root certificate (DER or PEM) for `https`, on top of the system's: for
    /// a private CA, or a test server's.
    pub fn with_root_certificate(mut self, cert: &[u8]) -> Result<Egress, ConfigError> {
        let parsed = if cert.starts_with(b"-----BEGIN") {
            reqwest::Certificate::from_pem(cert)
        } else {
            reqwest::Certificate::from_der(cert)
        }
        .map_err(|e| ConfigError::Certificate(e.to_string()))?;
        self.extra_roots.push(parsed);
        Ok(self)
    }

    /// The validated policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// How many HTTP requests have actually been sent (hops that passed every check). A
    /// blocked hop never counts: tests use this to show no traffic left.
    pub fn requests_sent(&self) -> u64 {
        self.requests_sent.load(Ordering::SeqCst)
    }

    /// Fetches `url` through every check; see the module doc. Emits one `egress` trace event.
    pub async fn get(&self, url: &str) -> Result<FetchedPage, EgressError> {
        let mut record = Record {
            span: crate::telemetry::start(),
            method: Some("GET"),
            url: url_for_trace(url),
            ..Record::default()
        };
        let timeout = self.policy.timeout;
        // Charged to the call this request serves before anything is resolved or sent.
        let result = match toolgate_core::budget::charge_in_call(Spend::Outbound) {
            Err(exhausted) => Err(EgressError::BudgetExhausted(exhausted)),
            Ok(()) => match tokio::time::timeout(timeout, self.run(url, &mut record)).await {
                Ok(result) => result,
                Err(_) => Err(EgressError::Timeout { after: timeout }),
            },
        };
        record.finish(&result, self.trace.as_ref());
        result
    }

    /// A client for a long-lived session with the one origin of `url` (an MCP server's
    /// Streamable HTTP endpoint): `url` passes the allowlist, canonical-host, resolution and
    /// address checks now, and the client connects only to the addresses checked, never
    /// follows a redirect (a redirect is an error the caller sees), uses no proxy and sends no
    /// referer, asks for no content coding (`Accept-Encoding: identity`) and validates the
    /// server's certificate. What it sends and receives is the session's protocol, bounded by
    /// its caller: the response checks of [`Egress::get`] (framing, coding, caps) are not
    /// applied to it.
    /// Emits one `egress` trace event for the check.
    pub async fn session_client(&self, url: &str) -> Result<reqwest::Client, EgressError> {
        let mut record = Record {
            span: crate::telemetry::start(),
            url: url_for_trace(url),
            ..Record::default()
        };
        let result =
            match tokio::time::timeout(self.policy.timeout, self.check_session(url, &mut record))
                .await
            {
                Ok(result) => result,
                Err(_) => Err(EgressError::Timeout {
                    after: self.policy.timeout,
                }),
            };
        record.finish(&result, self.trace.as_ref());
        result
    }

    async fn check_session(
        &self,
        url: &str,
        record: &mut Record,
    ) -> Result<reqwest::Client, EgressError> {
        let target = match canonicalize_url(url) {
            Ok(target) => target,
            Err(reason) => {
                record.enter_raw(url);
                return Err(reason.into());
            }
        };
        record.enter(&target);
        let addrs = self.checked_addresses(&target, record).await?;
        self.pinned_client(&target, &addrs, usize::MAX)
    }

    /// The addresses `target` may be reached at: its host passes the allowlist, resolves, and
    /// every address passes the address rules of the entry that allowed it.
    async fn checked_addresses(
        &self,
        target: &Target,
        record: &mut Record,
    ) -> Result<Vec<IpAddr>, EgressError> {
        let permit = self
            .policy
            .check_target(target.scheme, &target.host, target.port)?;
        record.hop_rules.push(permit.rule());
        let addrs = addresses_of(self.resolver.as_ref(), &target.host).await?;
        record.addresses = addrs.iter().map(ToString::to_string).collect();
        check_addresses(&addrs, permit.allow_private)?;
        Ok(addrs)
    }

    /// A client that reaches `target`'s host only at `addrs`, follows no redirect, uses no
    /// proxy and sends no referer; it keeps at most `pool_idle` idle connections (0 for a
    /// one-request client).
    fn pinned_client(
        &self,
        target: &Target,
        addrs: &[IpAddr],
        pool_idle: usize,
    ) -> Result<reqwest::Client, EgressError> {
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .referer(false)
            .pool_max_idle_per_host(pool_idle)
            .connect_timeout(self.policy.timeout)
            .dns_resolver(NoDns)
            .user_agent(concat!("toolgate-egress/", env!("CARGO_PKG_VERSION")))
            // No content coding is decoded here, so none is asked for: a session's client too.
            .default_headers(reqwest::header::HeaderMap::from_iter([(
                ACCEPT_ENCODING,
                reqwest::header::HeaderValue::from_static("identity"),
            )]));
        if let Host::Domain(name) = &target.host {
            let pinned: Vec<SocketAddr> = addrs
                .iter()
                .map(|ip| SocketAddr::new(*ip, target.port))
                .collect();
            builder = builder.resolve_to_addrs(name, &pinned);
        }
        if !self.extra_roots.is_empty() {
            builder = builder.tls_certs_merge(self.extra_roots.iter().cloned());
        }
        builder.build().map_err(|e| EgressError::Internal {
            detail: cut(&error_chain(&e.without_url()), 500),
        })
    }

    async fn run(&self, url: &str, record: &mut Record) -> Result<FetchedPage, EgressError> {
        let mut target = match canonicalize_url(url) {
            Ok(target) => target,
            Err(reason) => {
                record.enter_raw(url);
                return Err(reason.into());
            }
        };
        let mut redirects = 0_u32;
        loop {
            record.enter(&target);
            let addrs = self.checked_addresses(&target, record).await?;

            let mut response = self.send(&target, &addrs).await?;
            if let Some(span) = &mut record.span {
                span.answered();
            }
            let status = response.status();
            record.status = Some(status.as_u16());
            check_framing(response.headers())?;

            if status.is_redirection()
                && let Some(location) = response.headers().get(LOCATION)
            {
                let location = String::from_utf8_lossy(location.as_bytes()).into_owned();
                let next = if redirects >= self.policy.max_redirects {
                    Err(BlockReason::TooManyRedirects {
                        max: self.policy.max_redirects,
                    })
                } else {
                    next_hop(&target.url, &location)
                };
                match next {
                    Ok(next) => {
                        redirects += 1;
                        target = next;
                        continue;
                    }
                    Err(reason) => {
                        let shown = if location.contains("://") || location.starts_with("//") {
                            location
                        } else {
                            target
                                .url
                                .join(&location)
                                .map(|u| u.to_string())
                                .unwrap_or(location)
                        };
                        record.enter_raw(&shown);
                        return Err(reason.into());
                    }
                }
            }
            let host = target.host.to_string();
            if !status.is_success() {
                return Err(EgressError::Status {
                    host,
                    status: status.as_u16(),
                });
            }
            let header = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            record.content_type = header.as_deref().map(|h| cut(h, 100));
            check_encoding(response.headers())?;
            let content_type = self.policy.content_type_allowed(header.as_deref())?;

            let max = self.policy.max_bytes;
            if response.content_length().is_some_and(|len| len > max) {
                return Err(BlockReason::TooLarge { max }.into());
            }
            let mut body: Vec<u8> = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| transport(&host, e))? {
                let total = body.len() as u64 + chunk.len() as u64;
                record.bytes = total;
                if total > max {
                    return Err(BlockReason::TooLarge { max }.into());
                }
                body.extend_from_slice(&chunk);
            }
            return Ok(FetchedPage {
                final_url: target.url.to_string(),
                status: status.as_u16(),
                content_type,
                body: String::from_utf8_lossy(&body).into_owned(),
                bytes: body.len() as u64,
                hops: record.hops.clone(),
            });
        }
    }

    /// Sends one GET to `target`, connecting only to `addrs`.
    async fn send(
        &self,
        target: &Target,
        addrs: &[IpAddr],
    ) -> Result<reqwest::Response, EgressError> {
        let client = self.pinned_client(target, addrs, 0)?;
        let accept = self
            .policy
            .content_types
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        self.requests_sent.fetch_add(1, Ordering::SeqCst);
        client
            .get(target.url.clone())
            .header(ACCEPT, accept)
            .send()
            .await
            .map_err(
                |e| match certificate_refusal(&e).or_else(|| framing_refusal(&e)) {
                    Some(reason) => reason.into(),
                    None => transport(&target.host.to_string(), e),
                },
            )
    }
}

/// The comma-separated tokens of every value of `name`, trimmed and lower-case; a value that is
/// not visible ASCII becomes one token that matches nothing.
fn tokens(headers: &HeaderMap, name: &reqwest::header::HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|value| match value.to_str() {
            Ok(text) => text
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .collect::<Vec<_>>(),
            Err(_) => vec!["(not ascii)".to_string()],
        })
        .collect()
}

/// Refuses a response whose length is framed two ways or in a way other than one plain
/// `Content-Length` or a single `chunked`. Pure.
pub fn check_framing(headers: &HeaderMap) -> Result<(), BlockReason> {
    let ambiguous = |why: &str| {
        Err(BlockReason::AmbiguousFraming {
            why: why.to_string(),
        })
    };
    let codings = tokens(headers, &TRANSFER_ENCODING);
    let lengths = tokens(headers, &CONTENT_LENGTH);
    if !codings.is_empty() && !lengths.is_empty() {
        return ambiguous("both Transfer-Encoding and Content-Length");
    }
    if !codings.is_empty() && codings != ["chunked"] {
        return ambiguous("a Transfer-Encoding other than a single `chunked`");
    }
    if lengths
        .iter()
        .any(|l| l.is_empty() || !l.bytes().all(|b| b.is_ascii_digit()))
    {
        return ambiguous("a Content-Length that is not a plain number");
    }
    if lengths
        .windows(2)
        .any(|pair| pair[0].trim_start_matches('0') != pair[1].trim_start_matches('0'))
    {
        return ambiguous("two different Content-Length values");
    }
    Ok(())
}

/// Refuses a response that declares a content coding other than `identity`. Pure.
pub fn check_encoding(headers: &HeaderMap) -> Result<(), BlockReason> {
    match tokens(headers, &CONTENT_ENCODING)
        .into_iter()
        .find(|t| !t.is_empty() && t != "identity")
    {
        Some(encoding) => Err(BlockReason::ContentEncodingNotAllowed {
            encoding: cut(&encoding, 40),
        }),
        None => Ok(()),
    }
}

/// The rule for a connection that failed because the server's certificate did not validate;
/// `None` for every other failure. The rustls error sits inside an `io::Error`, whose
/// `source()` skips it, so each link is also looked into with `get_ref`.
fn certificate_refusal(error: &reqwest::Error) -> Option<BlockReason> {
    links(error).find_map(|link| match link.downcast_ref::<rustls::Error>() {
        Some(rustls::Error::InvalidCertificate(cert)) => Some(BlockReason::TlsCertificate {
            why: describe_certificate_error(cert).to_string(),
        }),
        _ => None,
    })
}

/// The rule for a response the HTTP library itself refused for its length framing (two
/// different `Content-Length` values, a malformed length or transfer coding); `None` for
/// every other failure. hyper gives these no public kind, so its messages are matched; the
/// test `ambiguous_response_framing_is_refused` shows they still arrive.
fn framing_refusal(error: &reqwest::Error) -> Option<BlockReason> {
    const FRAMING: [&str; 3] = [
        "invalid content-length parsed",
        "unexpected transfer-encoding parsed",
        "invalid transfer-encoding parsed",
    ];
    links(error).find_map(|link| {
        let text = link.to_string();
        FRAMING
            .iter()
            .any(|m| text == *m)
            .then(|| BlockReason::AmbiguousFraming {
                why: format!("the response's length framing did not parse ({text})"),
            })
    })
}

/// Every error in `error`'s chain. An `io::Error`'s `source()` skips the error it wraps, so
/// each one is also opened with `get_ref`.
fn links<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    let mut pending: Vec<&'a (dyn std::error::Error + 'static)> = vec![error];
    std::iter::from_fn(move || {
        let current = pending.pop()?;
        if let Some(next) = current.source() {
            pending.push(next);
        }
        if let Some(inner) = current
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            pending.push(inner);
        }
        Some(current)
    })
    .take(64)
}

/// Our words for a certificate failure (never the library's text). Pure.
fn describe_certificate_error(error: &rustls::CertificateError) -> &'static str {
    use rustls::CertificateError as E;
    match error {
        E::Expired | E::ExpiredContext { .. } => "the certificate has expired",
        E::NotValidYet | E::NotValidYetContext { .. } => "the certificate is not valid yet",
        E::NotValidForName | E::NotValidForNameContext { .. } => {
            "the certificate is not valid for this host name"
        }
        E::UnknownIssuer => "the certificate is not signed by a trusted authority",
        E::BadSignature
        | E::UnsupportedSignatureAlgorithmContext { .. }
        | E::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            "the certificate's signature does not verify"
        }
        E::Revoked => "the certificate is revoked",
        // `CertificateError` is non-exhaustive: anything else is still a refusal.
        _ => "the certificate is invalid",
    }
}

fn transport(host: &str, error: reqwest::Error) -> EgressError {
    EgressError::Transport {
        host: host.to_string(),
        detail: cut(&error_chain(&error.without_url()), 500),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            let value = reqwest::header::HeaderValue::from_str(value)
                .unwrap_or_else(|e| panic!("{value}: {e}"));
            map.append(*name, value);
        }
        map
    }

    #[test]
    fn smuggling_shapes_in_response_framing_are_refused() {
        let refused = [
            vec![("content-length", "5"), ("transfer-encoding", "chunked")],
            vec![("transfer-encoding", "chunked"), ("content-length", "5")],
            vec![("content-length", "5"), ("content-length", "6")],
            vec![("content-length", "5, 6")],
            vec![("content-length", "+5")],
            vec![("content-length", "-1")],
            vec![("content-length", "")],
            vec![("transfer-encoding", "identity")],
            vec![("transfer-encoding", "gzip, chunked")],
            vec![("transfer-encoding", "chunked, identity")],
            vec![
                ("transfer-encoding", "chunked"),
                ("transfer-encoding", "chunked"),
            ],
            vec![("transfer-encoding", "xchunked")],
        ];
        for pairs in refused {
            assert!(
                matches!(
                    check_framing(&headers(&pairs)),
                    Err(BlockReason::AmbiguousFraming { .. })
                ),
                "{pairs:?}"
            );
        }
        let fine = [
            vec![],
            vec![("content-length", "5")],
            vec![("content-length", "5"), ("content-length", "5")],
            vec![("content-length", "5, 05")],
            vec![("transfer-encoding", "chunked")],
            vec![("transfer-encoding", " Chunked ")],
        ];
        for pairs in fine {
            assert_eq!(check_framing(&headers(&pairs)), Ok(()), "{pairs:?}");
        }
    }

    #[test]
    fn encoded_bodies_are_refused_on_their_header() {
        let cases = [
            (vec![], None),
            (vec![("content-encoding", "identity")], None),
            (vec![("content-encoding", "IDENTITY")], None),
            (vec![("content-encoding", "gzip")], Some("gzip")),
            (vec![("content-encoding", "GZip")], Some("gzip")),
            (vec![("content-encoding", "br")], Some("br")),
            (
                vec![("content-encoding", "identity, deflate")],
                Some("deflate"),
            ),
            (
                vec![
                    ("content-encoding", "identity"),
                    ("content-encoding", "zstd"),
                ],
                Some("zstd"),
            ),
        ];
        for (pairs, want) in cases {
            let got = match check_encoding(&headers(&pairs)) {
                Ok(()) => None,
                Err(BlockReason::ContentEncodingNotAllowed { encoding }) => Some(encoding),
                Err(other) => panic!("{other:?}"),
            };
            assert_eq!(got.as_deref(), want, "{pairs:?}");
        }
    }

    #[test]
    fn certificate_failures_are_named_in_our_words() {
        use rustls::CertificateError as E;
        let cases = [
            (E::Expired, "expired"),
            (E::NotValidYet, "not valid yet"),
            (E::NotValidForName, "host name"),
            (E::UnknownIssuer, "trusted authority"),
            (E::BadSignature, "signature"),
            (E::Revoked, "revoked"),
            (E::BadEncoding, "invalid"),
        ];
        for (error, words) in cases {
            let text = describe_certificate_error(&error);
            assert!(text.contains(words), "{error:?}: {text}");
        }
    }

    #[test]
    fn blocked_raw_urls_are_traced_by_the_host_as_written() {
        let cases = [
            ("http://allowed.example@evil.example/", Some("evil.example")),
            ("http://0x7f.1:8080/a", Some("0x7f.1")),
            ("https://[::1]:8443/", Some("[::1]")),
            ("https://user:pw@h.example", Some("h.example")),
            ("no scheme", None),
        ];
        for (raw, want) in cases {
            assert_eq!(raw_host_of(raw).as_deref(), want, "{raw}");
        }
    }
}
