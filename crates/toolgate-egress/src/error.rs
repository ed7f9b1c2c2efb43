//! The closed set of ways an outbound request can end badly, and how each is shown to a model.
//!
//! Contract:
//! - [`EgressError`] and [`BlockReason`] are closed enums, and every mapping over them
//!   ([`BlockReason::rule`], [`EgressError::to_tool_error`]) is an exhaustive match: adding a
//!   variant breaks the build until it is classified.
//! - [`AddressClass`] (why an address is not public) is part of this vocabulary; `addr`
//!   classifies into it, so the module dependency points one way (addr -> error).
//! - A block (a rule said no) is `forbidden`; a timeout is `deadline_exceeded`; a failure to
//!   reach or hear from the server, or a 5xx, is `transient_dependency`; a 404 is `not_found`; a
//!   429 is `rate_limited`; other 4xx are `permanent_dependency`; a bad recipient address is
//!   `invalid_argument`.
//! - The [`toolgate_core::ToolError`] never carries a query string, a path, userinfo, a resolved
//!   address, a transport error's text or a server's reply: it names the host (already
//!   canonical, bounded) and the rule. The detail goes to the trace, which stays local.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use toolgate_core::{ErrorCode, ToolError};

/// Why an address is not a public destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressClass {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`) and IPv6 unique-local `fc00::/7`.
    Private,
    /// `169.254/16`, `fe80::/10`.
    LinkLocal,
    /// Carrier-grade NAT, `100.64/10`.
    Cgnat,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `0.0.0.0`, `::`.
    Unspecified,
    /// `255.255.255.255`.
    Broadcast,
    /// `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// Cloud instance-metadata endpoints: `169.254.169.254`, `169.254.170.2`, `168.63.129.16`,
    /// `100.100.100.200`, `fd00:ec2::254`.
    CloudMetadata,
    /// `0/8` ("this network"), `240/4`, `192.0.0/24`, `198.18/15`, `192.88.99/24`, IPv6 outside
    /// `2000::/3`, `2001::/23` (IETF protocol assignments, Teredo), `100::/64`, `fec0::/10`.
    Reserved,
    /// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) whose IPv4 address is public.
    Ipv4Mapped,
    /// An IPv4-compatible IPv6 address (`::a.b.c.d`) whose IPv4 address is public.
    Ipv4Compatible,
}

impl AddressClass {
    /// The stable snake_case name used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link_local",
            AddressClass::Cgnat => "cgnat",
            AddressClass::Multicast => "multicast",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Documentation => "documentation",
            AddressClass::CloudMetadata => "cloud_metadata",
            AddressClass::Reserved => "reserved",
            AddressClass::Ipv4Mapped => "ipv4_mapped",
            AddressClass::Ipv4Compatible => "ipv4_compatible",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which non-canonical spelling a host used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NonCanonical {
    /// Decimal, octal, hex or short IPv4 (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`), or an
    /// IPv4 literal with a trailing dot.
    NumericForm,
    /// `%xx` anywhere in the host.
    PercentEncoded,
    /// Whitespace or control characters in the host.
    ForbiddenCharacter,
    /// An empty label (`a..b`, `example.org..`).
    EmptyLabel,
    /// A spelling that IDNA maps onto a different name (full-width letters, ideographic dots).
    MappedSpelling,
    /// The URL parser and the raw text disagree on the host.
    ParserDisagreement,
}

impl NonCanonical {
    pub fn describe(self) -> &'static str {
        match self {
            NonCanonical::NumericForm => {
                "an IPv4 address must be written as four decimal numbers (a.b.c.d)"
            }
            NonCanonical::PercentEncoded => "a host may not be percent-encoded",
            NonCanonical::ForbiddenCharacter => {
                "a host may not contain spaces or control characters"
            }
            NonCanonical::EmptyLabel => "a host may not contain an empty label",
            NonCanonical::MappedSpelling => {
                "the host is written in a form that maps onto a different name (full-width letters or dots?)"
            }
            NonCanonical::ParserDisagreement => "the host is ambiguous",
        }
    }
}

/// Why the exit refused a request. Each is one named rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockReason {
    #[error("the URL is not valid: {why}")]
    InvalidUrl { why: String },
    #[error("host `{host}` is not on the allowlist")]
    UnlistedHost { host: String },
    #[error("scheme `{scheme}` is not allowed here")]
    SchemeNotAllowed { scheme: String },
    #[error("port {port} is not allowed for host `{host}`")]
    PortNotAllowed { host: String, port: u16 },
    #[error("URLs with a user name or password (`user@host`) are refused")]
    UserInfo,
    #[error("IP address {ip} is not listed; use the host name, or list the exact address")]
    IpLiteralNotListed { ip: IpAddr },
    #[error("host `{host}` is not written canonically: {}", why.describe())]
    NonCanonicalHost { host: String, why: NonCanonical },
    #[error("the host resolves to {addr}, a {class} address")]
    ForbiddenAddress { addr: IpAddr, class: AddressClass },
    #[error("the host resolved to no address")]
    NoAddress,
    #[error("a redirect from {from_scheme} to {to_scheme} is a downgrade")]
    Downgrade {
        from_scheme: String,
        to_scheme: String,
    },
    #[error("more than {max} redirects")]
    TooManyRedirects { max: u32 },
    #[error("the response is larger than the {max} byte cap")]
    TooLarge { max: u64 },
    #[error("content type {} is not allowed", content_type.as_deref().unwrap_or("(none)"))]
    ContentTypeNotAllowed { content_type: Option<String> },
    /// The server's certificate did not validate (self-signed, another name, expired, ...):
    /// the connection is dropped before a request is sent.
    #[error("the server's TLS certificate was refused: {why}")]
    TlsCertificate { why: String },
    /// The answer is encoded (`gzip`, `br`, ...): the exit asks for none and decodes none, so
    /// a compressed body is refused on its header, before any of it is read.
    #[error("content encoding `{encoding}` is not allowed; the exit accepts only unencoded bodies")]
    ContentEncodingNotAllowed { encoding: String },
    /// The answer's length is framed two ways or in an unknown way (`Content-Length` with
    /// `Transfer-Encoding`, two lengths, a transfer coding other than `chunked`): the shapes
    /// response smuggling needs.
    #[error("the response's framing is ambiguous: {why}")]
    AmbiguousFraming { why: String },
}

impl BlockReason {
    /// The stable snake_case name of the rule that decided, as the trace records it.
    pub fn rule(&self) -> &'static str {
        match self {
            BlockReason::InvalidUrl { .. } => "invalid_url",
            BlockReason::UnlistedHost { .. } => "unlisted_host",
            BlockReason::SchemeNotAllowed { .. } => "scheme_not_allowed",
            BlockReason::PortNotAllowed { .. } => "port_not_allowed",
            BlockReason::UserInfo => "userinfo",
            BlockReason::IpLiteralNotListed { .. } => "ip_literal_not_listed",
            BlockReason::NonCanonicalHost { .. } => "non_canonical_host",
            BlockReason::ForbiddenAddress { .. } => "forbidden_address",
            BlockReason::NoAddress => "no_address",
            BlockReason::Downgrade { .. } => "downgrade",
            BlockReason::TooManyRedirects { .. } => "too_many_redirects",
            BlockReason::TooLarge { .. } => "too_large",
            BlockReason::ContentTypeNotAllowed { .. } => "content_type_not_allowed",
            BlockReason::TlsCertificate { .. } => "tls_certificate",
            BlockReason::ContentEncodingNotAllowed { .. } => "content_encoding_not_allowed",
            BlockReason::AmbiguousFraming { .. } => "ambiguous_framing",
        }
    }

    /// A sentence for the model: no resolved addresses (they map the internal network).
    fn public_message(&self) -> String {
        match self {
            BlockReason::ForbiddenAddress { class, .. } => {
                format!(
                    "the host resolves to a {class} address, which the egress exit never connects to"
                )
            }
            BlockReason::InvalidUrl { .. }
            | BlockReason::UnlistedHost { .. }
            | BlockReason::SchemeNotAllowed { .. }
            | BlockReason::PortNotAllowed { .. }
            | BlockReason::UserInfo
            | BlockReason::IpLiteralNotListed { .. }
            | BlockReason::NonCanonicalHost { .. }
            | BlockReason::NoAddress
            | BlockReason::Downgrade { .. }
            | BlockReason::TooManyRedirects { .. }
            | BlockReason::TooLarge { .. }
            | BlockReason::ContentTypeNotAllowed { .. }
            | BlockReason::TlsCertificate { .. }
            | BlockReason::ContentEncodingNotAllowed { .. }
            | BlockReason::AmbiguousFraming { .. } => self.to_string(),
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            BlockReason::UnlistedHost { .. } => Some(
                "only hosts listed under [[egress.allow]] in the config can be fetched; do not retry with another spelling",
            ),
            BlockReason::InvalidUrl { .. } => Some("send an absolute https:// URL"),
            BlockReason::SchemeNotAllowed { .. } | BlockReason::Downgrade { .. } => {
                Some("use https://")
            }
            BlockReason::NonCanonicalHost { .. } => {
                Some("write the host name plainly, e.g. https://example.org/")
            }
            BlockReason::PortNotAllowed { .. }
            | BlockReason::UserInfo
            | BlockReason::IpLiteralNotListed { .. }
            | BlockReason::ForbiddenAddress { .. }
            | BlockReason::NoAddress
            | BlockReason::TooManyRedirects { .. }
            | BlockReason::TooLarge { .. }
            | BlockReason::ContentTypeNotAllowed { .. }
            | BlockReason::TlsCertificate { .. }
            | BlockReason::ContentEncodingNotAllowed { .. }
            | BlockReason::AmbiguousFraming { .. } => None,
        }
    }
}

/// Every way [`crate::Egress::get`] and [`crate::SmtpRelay::send`] can fail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    /// A rule refused the request (before it was sent, or while reading the answer).
    #[error("blocked by the egress exit: {0}")]
    Blocked(BlockReason),
    /// The total time cap ran out.
    #[error("timed out after {after:?}")]
    Timeout { after: Duration },
    /// The host name did not resolve.
    #[error("could not resolve `{host}`: {detail}")]
    Resolve { host: String, detail: String },
    /// No connection, or the connection broke before the answer was complete.
    #[error("could not reach `{host}`: {detail}")]
    Transport { host: String, detail: String },
    /// The server answered with a status other than 2xx (after redirects).
    #[error("`{host}` answered HTTP {status}")]
    Status { host: String, status: u16 },
    /// A recipient or sender address is not a valid email address, or there are none.
    #[error("invalid email address in `{field}`: {detail}")]
    InvalidEmail { field: String, detail: String },
    /// The SMTP relay refused the message for good (5xx).
    #[error("the SMTP relay refused the message: {detail}")]
    SmtpRejected { detail: String },
    /// The SMTP relay could not take the message now (4xx, connection trouble).
    #[error("the SMTP relay failed: {detail}")]
    SmtpTransient { detail: String },
    /// A fault in this crate or its TLS setup, not in the request.
    #[error("internal egress error: {detail}")]
    Internal { detail: String },
    /// The call's run or principal has no outbound requests left: nothing was sent.
    #[error("not sent: {0}")]
    BudgetExhausted(toolgate_core::budget::Exhausted),
}

impl From<BlockReason> for EgressError {
    fn from(reason: BlockReason) -> Self {
        EgressError::Blocked(reason)
    }
}

impl EgressError {
    /// The rule or failure kind, as recorded in the trace.
    pub fn rule(&self) -> &'static str {
        match self {
            EgressError::Blocked(reason) => reason.rule(),
            EgressError::Timeout { .. } => "timeout",
            EgressError::Resolve { .. } => "resolve_failed",
            EgressError::Transport { .. } => "transport_failed",
            EgressError::Status { .. } => "http_status",
            EgressError::InvalidEmail { .. } => "invalid_email",
            EgressError::SmtpRejected { .. } => "smtp_rejected",
            EgressError::SmtpTransient { .. } => "smtp_failed",
            EgressError::Internal { .. } => "internal",
            EgressError::BudgetExhausted(_) => "budget_exhausted",
        }
    }

    /// Whether a rule of the exit (rather than the network or the server) stopped the request.
    /// The time cap counts as a rule.
    pub fn is_block(&self) -> bool {
        match self {
            EgressError::Blocked(_)
            | EgressError::Timeout { .. }
            | EgressError::BudgetExhausted(_) => true,
            EgressError::Resolve { .. }
            | EgressError::Transport { .. }
            | EgressError::Status { .. }
            | EgressError::InvalidEmail { .. }
            | EgressError::SmtpRejected { .. }
            | EgressError::SmtpTransient { .. }
            | EgressError::Internal { .. } => false,
        }
    }

    /// The error as a tool returns it. Messages name the host and the rule, never the query,
    /// addresses, or a server's or library's text.
    pub fn to_tool_error(&self) -> ToolError {
        match self {
            EgressError::Blocked(reason) => {
                let error = ToolError::new(
                    ErrorCode::Forbidden,
                    format!(
                        "the egress exit refused the request: {}",
                        reason.public_message()
                    ),
                )
                .with_expected(format!(
                    "a request the egress rules allow (rule: {})",
                    reason.rule()
                ));
                match reason.hint() {
                    Some(hint) => error.with_hint(hint),
                    None => error,
                }
            }
            EgressError::Timeout { after } => ToolError::new(
                ErrorCode::DeadlineExceeded,
                format!(
                    "the request did not finish within {} s",
                    after.as_secs_f64()
                ),
            ),
            EgressError::Resolve { host, .. } => ToolError::new(
                ErrorCode::TransientDependency,
                format!("the host `{host}` could not be resolved"),
            )
            .with_hint("check the host name; if it is right, try again later"),
            EgressError::Transport { host, .. } => ToolError::new(
                ErrorCode::TransientDependency,
                format!("`{host}` could not be reached, or the connection broke"),
            ),
            EgressError::Status { host, status } => {
                let code = match status {
                    404 | 410 => ErrorCode::NotFound,
                    429 => ErrorCode::RateLimited,
                    500..=599 => ErrorCode::TransientDependency,
                    _ => ErrorCode::PermanentDependency,
                };
                ToolError::new(code, format!("`{host}` answered HTTP {status}"))
                    .with_received(json!(status))
            }
            EgressError::InvalidEmail { field, .. } => ToolError::invalid(
                field.clone(),
                format!("`{field}` must be one or more email addresses"),
            )
            .with_example(json!("alice@example.org")),
            EgressError::SmtpRejected { .. } => ToolError::new(
                ErrorCode::PermanentDependency,
                "the mail relay refused the message",
            ),
            EgressError::SmtpTransient { .. } => ToolError::new(
                ErrorCode::TransientDependency,
                "the mail relay could not take the message now",
            ),
            EgressError::Internal { .. } => {
                ToolError::internal("the egress exit failed internally")
            }
            EgressError::BudgetExhausted(exhausted) => ToolError::new(
                ErrorCode::BudgetExhausted,
                format!("nothing was sent: {exhausted}"),
            )
            .with_hint("this run can send nothing more; tell the user what is left undone"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_the_right_code_without_leaking_details() {
        let secret = "q=secret-note-text";
        let cases = [
            (
                EgressError::Blocked(BlockReason::UnlistedHost {
                    host: "evil.test".into(),
                }),
                ErrorCode::Forbidden,
            ),
            (
                EgressError::Blocked(BlockReason::ForbiddenAddress {
                    addr: "10.0.0.5".parse().unwrap_or(IpAddr::from([0, 0, 0, 0])),
                    class: AddressClass::Private,
                }),
                ErrorCode::Forbidden,
            ),
            (
                EgressError::Timeout {
                    after: Duration::from_secs(3),
                },
                ErrorCode::DeadlineExceeded,
            ),
            (
                EgressError::Transport {
                    host: "a.test".into(),
                    detail: format!("connection refused for http://a.test/?{secret}"),
                },
                ErrorCode::TransientDependency,
            ),
            (
                EgressError::Resolve {
                    host: "a.test".into(),
                    detail: secret.into(),
                },
                ErrorCode::TransientDependency,
            ),
            (
                EgressError::Status {
                    host: "a.test".into(),
                    status: 503,
                },
                ErrorCode::TransientDependency,
            ),
            (
                EgressError::Status {
                    host: "a.test".into(),
                    status: 404,
                },
                ErrorCode::NotFound,
            ),
            (
                EgressError::Status {
                    host: "a.test".into(),
                    status: 429,
                },
                ErrorCode::RateLimited,
            ),
            (
                EgressError::Status {
                    host: "a.test".into(),
                    status: 403,
                },
                ErrorCode::PermanentDependency,
            ),
            (
                EgressError::InvalidEmail {
                    field: "to[0]".into(),
                    detail: secret.into(),
                },
                ErrorCode::InvalidArgument,
            ),
            (
                EgressError::SmtpRejected {
                    detail: secret.into(),
                },
                ErrorCode::PermanentDependency,
            ),
            (
                EgressError::SmtpTransient {
                    detail: secret.into(),
                },
                ErrorCode::TransientDependency,
            ),
            (
                EgressError::Internal {
                    detail: secret.into(),
                },
                ErrorCode::Internal,
            ),
        ];
        for (error, code) in cases {
            let tool = error.to_tool_error();
            assert_eq!(tool.code, code, "{error}");
            let shown = serde_json::to_string(&tool).unwrap_or_default();
            assert!(!shown.contains(secret), "{shown}");
            assert!(!shown.contains("10.0.0.5"), "{shown}");
        }
    }
}
