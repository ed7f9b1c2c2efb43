//! The egress configuration and the validated allowlist built from it.
//!
//! Contract:
//! - [`EgressConfig`] is what the `[egress]` table of `toolgate.toml` deserializes into (unknown
//!   keys are refused). Nothing is allowed by default: an empty allowlist refuses every host.
//! - [`EgressConfig::validate`] turns it into a [`Policy`] or refuses it whole with a
//!   [`ConfigError`] that names the entry and says what to write instead. It refuses a bare `*`,
//!   a `*` anywhere but as the whole first label, a wildcard over fewer than two labels (`*.com`),
//!   a wildcard over a known multi-label public suffix (`*.co.uk`, from a small built-in list:
//!   [`MULTI_LABEL_PUBLIC_SUFFIXES`], not the full Public Suffix List), non-canonical host
//!   spellings (`0x7f.1`, percent-encoding), unknown schemes, port 0, an empty `ports` or
//!   `schemes` list, an `smtp` entry without `ports`, and zero caps.
//! - [`Policy::check_target`] is pure. `*.example.org` matches `a.example.org` and
//!   `a.b.example.org` but NOT the apex `example.org` (list `example.org` separately if it is
//!   wanted). Host patterns are normalized like request hosts (lower case, one trailing dot
//!   dropped, IDN to punycode), so `Bücher.Example.` and `xn--bcher-kva.example` are one entry.
//!   An IP literal is allowed only by an entry naming that exact address (compared by value);
//!   listing it does not exempt it from the address checks (a private or loopback literal still
//!   needs `allow_private = true`).
//!   Entries are tried in order; the first whose host, scheme and port all match decides, and
//!   its `allow_private` applies. When none matches, the reason is the most specific one (host
//!   unlisted, then scheme, then port).

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use serde::Deserialize;

use crate::canon::{Host, Scheme, canonical_host};
use crate::error::BlockReason;

/// Suffixes under which many unrelated parties register names; a wildcard over one of these is
/// as broad as `*.com`. A small built-in list of the common ones, not the whole PSL.
pub const MULTI_LABEL_PUBLIC_SUFFIXES: &[&str] = &[
    "co.uk",
    "org.uk",
    "me.uk",
    "ltd.uk",
    "plc.uk",
    "net.uk",
    "ac.uk",
    "gov.uk",
    "sch.uk",
    "nhs.uk",
    "com.au",
    "net.au",
    "org.au",
    "edu.au",
    "gov.au",
    "asn.au",
    "id.au",
    "co.nz",
    "org.nz",
    "net.nz",
    "ac.nz",
    "govt.nz",
    "co.jp",
    "ne.jp",
    "or.jp",
    "ac.jp",
    "go.jp",
    "ad.jp",
    "co.kr",
    "or.kr",
    "ac.kr",
    "go.kr",
    "co.za",
    "org.za",
    "gov.za",
    "ac.za",
    "co.in",
    "net.in",
    "org.in",
    "gov.in",
    "ac.in",
    "co.il",
    "org.il",
    "ac.il",
    "gov.il",
    "co.id",
    "or.id",
    "ac.id",
    "go.id",
    "com.br",
    "net.br",
    "org.br",
    "gov.br",
    "com.cn",
    "net.cn",
    "org.cn",
    "gov.cn",
    "edu.cn",
    "com.hk",
    "org.hk",
    "gov.hk",
    "edu.hk",
    "com.tw",
    "org.tw",
    "gov.tw",
    "edu.tw",
    "com.sg",
    "org.sg",
    "gov.sg",
    "edu.sg",
    "com.my",
    "org.my",
    "gov.my",
    "com.mx",
    "org.mx",
    "gob.mx",
    "com.ar",
    "org.ar",
    "gob.ar",
    "com.tr",
    "org.tr",
    "gov.tr",
    "edu.tr",
    "com.ua",
    "org.ua",
    "gov.ua",
    "com.pl",
    "org.pl",
    "net.pl",
    "co.th",
    "or.th",
    "ac.th",
    "go.th",
    "com.vn",
    "com.ph",
    "com.pk",
    "com.eg",
    "com.sa",
    "com.ng",
    "co.ke",
    "com.co",
    "com.pe",
    "com.ve",
    "com.ec",
    "co.at",
    "or.at",
    "ac.at",
    "gv.at",
    "com.es",
    "com.pt",
    "com.gr",
    "co.it",
    "com.ru",
    "org.ru",
    "net.ru",
    "github.io",
    "gitlab.io",
    "herokuapp.com",
    "appspot.com",
    "azurewebsites.net",
    "cloudfront.net",
    "blogspot.com",
    "netlify.app",
    "vercel.app",
    "pages.dev",
    "workers.dev",
    "s3.amazonaws.com",
    "web.app",
    "firebaseapp.com",
];

/// The `[egress]` table.
///
/// ```toml
/// [egress]
/// max_bytes = 2097152          # response body cap, bytes
/// timeout_secs = 20            # whole request, redirects included
/// max_redirects = 5            # hops followed after the first request
/// content_types = ["text/html", "text/plain", "application/json", "application/xhtml+xml"]
///
/// [[egress.allow]]
/// host = "*.wikipedia.org"     # subdomains only; list "wikipedia.org" too for the apex
///
/// [[egress.allow]]
/// host = "127.0.0.1"           # tests only: a local server
/// schemes = ["http"]
/// ports = [8080]
/// allow_private = true
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressConfig {
    /// The allowlist. Empty (the default) allows nothing.
    #[serde(default)]
    pub allow: Vec<AllowEntry>,
    /// The largest response body accepted, in bytes. A larger body is an error
    /// ([`BlockReason::TooLarge`]), never a silent cut. Default 2 MiB.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// The time one `get` may take in all: resolution, every hop, and reading the body.
    /// Default 20 s.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// How many redirects are followed (each re-checked from scratch). Default 5, at most 20.
    #[serde(default = "default_max_redirects")]
    pub max_redirects: u32,
    /// The media types a final response may have (`type/subtype`, parameters ignored, compared
    /// case-insensitively). Anything else, or no `Content-Type`, is refused.
    #[serde(default = "default_content_types")]
    pub content_types: Vec<String>,
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig {
            allow: Vec::new(),
            max_bytes: default_max_bytes(),
            timeout_secs: default_timeout_secs(),
            max_redirects: default_max_redirects(),
            content_types: default_content_types(),
        }
    }
}

/// One `[[egress.allow]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowEntry {
    /// An exact host (`en.wikipedia.org`), a subdomain wildcard (`*.wikipedia.org`: subdomains
    /// only, not the apex), or an exact IP address (`127.0.0.1`, `::1` or `[::1]`).
    pub host: String,
    /// Schemes this host may be reached with: `https` (default), `http`, and `smtp` (for the
    /// mail relay only).
    #[serde(default = "default_schemes")]
    pub schemes: Vec<String>,
    /// Ports this host may be reached on. When absent: 443 for https and 80 for http (smtp has
    /// no default and must list its port). When present, exactly these ports are allowed, for
    /// every scheme of the entry (list 443 too if it is still wanted).
    #[serde(default)]
    pub ports: Option<Vec<u16>>,
    /// Allow addresses that are otherwise refused (loopback, private, link-local, CGNAT,
    /// metadata, ...) for this entry. For tests and a relay on the same machine only; the
    /// default config never sets it.
    #[serde(default)]
    pub allow_private: bool,
}

impl AllowEntry {
    /// An `https`-only entry on the default port.
    pub fn https(host: impl Into<String>) -> Self {
        AllowEntry {
            host: host.into(),
            schemes: default_schemes(),
            ports: None,
            allow_private: false,
        }
    }
}

fn default_max_bytes() -> u64 {
    2 * 1024 * 1024
}
fn default_timeout_secs() -> u64 {
    20
}
fn default_max_redirects() -> u32 {
    5
}
fn default_schemes() -> Vec<String> {
    vec!["https".into()]
}
fn default_content_types() -> Vec<String> {
    [
        "text/html",
        "text/plain",
        "application/json",
        "application/xhtml+xml",
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

/// The most redirects a config may ask for.
pub const MAX_REDIRECTS_CAP: u32 = 20;

/// Why a config was refused. Each names the entry (`allow[2]`) or the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("the egress config is not valid TOML: {0}")]
    Toml(String),
    #[error(
        "allow[{index}]: host pattern `{pattern}` allows everything; list hosts (`en.wikipedia.org`) or one site's subdomains (`*.wikipedia.org`)"
    )]
    BareWildcard { index: usize, pattern: String },
    #[error(
        "allow[{index}]: host pattern `{pattern}`: `*` may only be the whole first label, as in `*.example.org`"
    )]
    MisplacedWildcard { index: usize, pattern: String },
    #[error(
        "allow[{index}]: host pattern `{pattern}` covers a whole top-level domain; a wildcard needs at least two labels after `*.` (`*.example.org`)"
    )]
    WildcardTooBroad { index: usize, pattern: String },
    #[error(
        "allow[{index}]: host pattern `{pattern}` covers the public suffix `{suffix}`, shared by unrelated sites; name the site (`*.example.{suffix}`)"
    )]
    WildcardOverPublicSuffix {
        index: usize,
        pattern: String,
        suffix: String,
    },
    #[error("allow[{index}]: host pattern `{pattern}` is not valid: {why}")]
    InvalidHost {
        index: usize,
        pattern: String,
        why: String,
    },
    #[error("allow[{index}]: scheme `{scheme}` is not one of https, http, smtp")]
    UnknownScheme { index: usize, scheme: String },
    #[error("allow[{index}]: `schemes` is empty; omit it for https only")]
    NoSchemes { index: usize },
    #[error("allow[{index}]: `ports` is empty; omit it for the scheme's default port")]
    NoPorts { index: usize },
    #[error("allow[{index}]: port 0 is not a port")]
    PortZero { index: usize },
    #[error("allow[{index}]: an `smtp` entry must list its `ports` (e.g. [587])")]
    SmtpNeedsPorts { index: usize },
    #[error("`{field}` must be {expected}")]
    InvalidLimit {
        field: &'static str,
        expected: String,
    },
    #[error("content type `{value}` is not a `type/subtype` without wildcards")]
    InvalidContentType { value: String },
    #[error("a root certificate could not be loaded: {0}")]
    Certificate(String),
    #[error("the SMTP relay `{host}:{port}` is not allowed by the egress allowlist: {reason}")]
    RelayNotAllowed {
        host: String,
        port: u16,
        reason: BlockReason,
    },
    #[error("the SMTP sender address `{value}` is not valid: {why}")]
    InvalidFrom { value: String, why: String },
}

/// A validated host pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// Exactly this name (canonical form).
    Exact(String),
    /// Any name strictly below this suffix (`*.example.org` stores `example.org`).
    Subdomains(String),
    /// Exactly this address.
    Ip(IpAddr),
}

impl HostPattern {
    /// Whether `host` is covered. The apex of a wildcard is not.
    pub fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (HostPattern::Exact(name), Host::Domain(d)) => name == d,
            (HostPattern::Subdomains(suffix), Host::Domain(d)) => d
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Ip(ip), Host::Ip(addr)) => ip == addr,
            (HostPattern::Exact(_) | HostPattern::Subdomains(_), Host::Ip(_))
            | (HostPattern::Ip(_), Host::Domain(_)) => false,
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostPattern::Exact(name) => f.write_str(name),
            HostPattern::Subdomains(suffix) => write!(f, "*.{suffix}"),
            HostPattern::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// A validated allow entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub pattern: HostPattern,
    pub schemes: BTreeSet<SchemeKey>,
    /// `None`: the scheme's default port.
    pub ports: Option<BTreeSet<u16>>,
    pub allow_private: bool,
}

/// A scheme as an ordered key (for the sets in [`Rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SchemeKey {
    Http,
    Https,
    Smtp,
}

impl From<Scheme> for SchemeKey {
    fn from(s: Scheme) -> Self {
        match s {
            Scheme::Http => SchemeKey::Http,
            Scheme::Https => SchemeKey::Https,
            Scheme::Smtp => SchemeKey::Smtp,
        }
    }
}

impl Rule {
    fn port_allowed(&self, scheme: Scheme, port: u16) -> bool {
        match &self.ports {
            Some(ports) => ports.contains(&port),
            None => scheme.default_port() == Some(port),
        }
    }
}

/// What allowed a request: the entry that matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    /// The entry's position in `[[egress.allow]]`.
    pub index: usize,
    /// The entry's pattern, canonical.
    pub pattern: String,
    pub allow_private: bool,
}

impl Permit {
    /// The rule name recorded in the trace: `allow[0]:*.example.org`.
    pub fn rule(&self) -> String {
        format!("allow[{}]:{}", self.index, self.pattern)
    }
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub rules: Vec<Rule>,
    pub max_bytes: u64,
    pub timeout: Duration,
    pub max_redirects: u32,
    /// Lower-case `type/subtype`.
    pub content_types: BTreeSet<String>,
}

impl EgressConfig {
    /// Reads the `[egress]` table of a whole `toolgate.toml` document (an absent table is the
    /// default config: nothing allowed), and validates it.
    pub fn from_toml_document(text: &str) -> Result<(EgressConfig, Policy), ConfigError> {
        #[derive(Deserialize)]
        struct Document {
            #[serde(default)]
            egress: EgressConfig,
        }
        let doc: Document = toml::from_str(text).map_err(|e| ConfigError::Toml(e.to_string()))?;
        let policy = doc.egress.validate()?;
        Ok((doc.egress, policy))
    }

    /// Checks every entry and cap; see the module doc for what is refused.
    pub fn validate(&self) -> Result<Policy, ConfigError> {
        let rules = self
            .allow
            .iter()
            .enumerate()
            .map(|(index, entry)| validate_entry(index, entry))
            .collect::<Result<Vec<_>, _>>()?;
        if self.max_bytes == 0 {
            return Err(ConfigError::InvalidLimit {
                field: "max_bytes",
                expected: "at least 1".into(),
            });
        }
        if self.timeout_secs == 0 {
            return Err(ConfigError::InvalidLimit {
                field: "timeout_secs",
                expected: "at least 1".into(),
            });
        }
        if self.max_redirects > MAX_REDIRECTS_CAP {
            return Err(ConfigError::InvalidLimit {
                field: "max_redirects",
                expected: format!("at most {MAX_REDIRECTS_CAP}"),
            });
        }
        let content_types = self
            .content_types
            .iter()
            .map(|value| normalize_content_type(value))
            .collect::<Result<BTreeSet<_>, _>>()?;
        Ok(Policy {
            rules,
            max_bytes: self.max_bytes,
            timeout: Duration::from_secs(self.timeout_secs),
            max_redirects: self.max_redirects,
            content_types,
        })
    }
}

fn normalize_content_type(value: &str) -> Result<String, ConfigError> {
    let lower = value.trim().to_ascii_lowercase();
    let valid = lower.split_once('/').is_some_and(|(t, s)| {
        let token = |x: &str| {
            !x.is_empty()
                && x.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "!#$&-^_.+".contains(c))
        };
        token(t) && token(s)
    });
    if valid {
        Ok(lower)
    } else {
        Err(ConfigError::InvalidContentType {
            value: value.to_string(),
        })
    }
}

/// Parses one host pattern. Public so the CLI's `check` can explain a pattern.
pub fn parse_pattern(index: usize, pattern: &str) -> Result<HostPattern, ConfigError> {
    let invalid = |why: String| ConfigError::InvalidHost {
        index,
        pattern: pattern.to_string(),
        why,
    };
    let trimmed = pattern.trim();
    if trimmed.is_empty() {
        return Err(invalid("it is empty".into()));
    }
    if matches!(trimmed, "*" | "*." | "**") {
        return Err(ConfigError::BareWildcard {
            index,
            pattern: pattern.to_string(),
        });
    }
    if let Some(suffix) = trimmed.strip_prefix("*.") {
        if suffix.contains('*') {
            return Err(ConfigError::MisplacedWildcard {
                index,
                pattern: pattern.to_string(),
            });
        }
        let host = canonical_host(suffix).map_err(|e| invalid(e.to_string()))?;
        let Host::Domain(suffix) = host else {
            return Err(invalid("a wildcard cannot cover an IP address".into()));
        };
        if suffix.split('.').count() < 2 {
            return Err(ConfigError::WildcardTooBroad {
                index,
                pattern: pattern.to_string(),
            });
        }
        if MULTI_LABEL_PUBLIC_SUFFIXES.contains(&suffix.as_str()) {
            return Err(ConfigError::WildcardOverPublicSuffix {
                index,
                pattern: pattern.to_string(),
                suffix,
            });
        }
        return Ok(HostPattern::Subdomains(suffix));
    }
    if trimmed.contains('*') {
        return Err(ConfigError::MisplacedWildcard {
            index,
            pattern: pattern.to_string(),
        });
    }
    // A bare IPv6 address is accepted without brackets for convenience.
    if let Ok(ip) = trimmed.parse::<std::net::Ipv6Addr>() {
        return Ok(HostPattern::Ip(IpAddr::V6(ip)));
    }
    match canonical_host(trimmed).map_err(|e| invalid(e.to_string()))? {
        Host::Domain(name) => Ok(HostPattern::Exact(name)),
        Host::Ip(ip) => Ok(HostPattern::Ip(ip)),
    }
}

fn validate_entry(index: usize, entry: &AllowEntry) -> Result<Rule, ConfigError> {
    let pattern = parse_pattern(index, &entry.host)?;
    if entry.schemes.is_empty() {
        return Err(ConfigError::NoSchemes { index });
    }
    let mut schemes = BTreeSet::new();
    for text in &entry.schemes {
        let scheme = Scheme::parse(&text.to_ascii_lowercase()).ok_or_else(|| {
            ConfigError::UnknownScheme {
                index,
                scheme: text.clone(),
            }
        })?;
        schemes.insert(SchemeKey::from(scheme));
    }
    let ports = match &entry.ports {
        None if schemes.contains(&SchemeKey::Smtp) => {
            return Err(ConfigError::SmtpNeedsPorts { index });
        }
        None => None,
        Some(list) if list.is_empty() => return Err(ConfigError::NoPorts { index }),
        Some(list) if list.contains(&0) => return Err(ConfigError::PortZero { index }),
        Some(list) => Some(list.iter().copied().collect()),
    };
    Ok(Rule {
        pattern,
        schemes,
        ports,
        allow_private: entry.allow_private,
    })
}

impl Policy {
    /// Which entry allows `scheme://host:port`, or the most specific reason none does.
    pub fn check_target(
        &self,
        scheme: Scheme,
        host: &Host,
        port: u16,
    ) -> Result<Permit, BlockReason> {
        let by_host: Vec<(usize, &Rule)> = self
            .rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.pattern.matches(host))
            .collect();
        if by_host.is_empty() {
            return Err(match host {
                Host::Ip(ip) => BlockReason::IpLiteralNotListed { ip: *ip },
                Host::Domain(d) => BlockReason::UnlistedHost { host: d.clone() },
            });
        }
        let by_scheme: Vec<&(usize, &Rule)> = by_host
            .iter()
            .filter(|(_, rule)| rule.schemes.contains(&SchemeKey::from(scheme)))
            .collect();
        if by_scheme.is_empty() {
            return Err(BlockReason::SchemeNotAllowed {
                scheme: scheme.as_str().to_string(),
            });
        }
        by_scheme
            .iter()
            .find(|(_, rule)| rule.port_allowed(scheme, port))
            .map(|(index, rule)| Permit {
                index: *index,
                pattern: rule.pattern.to_string(),
                allow_private: rule.allow_private,
            })
            .ok_or_else(|| BlockReason::PortNotAllowed {
                host: host.to_string(),
                port,
            })
    }

    /// Whether a final response's `Content-Type` header value is on the list (parameters such
    /// as `; charset=utf-8` are ignored).
    pub fn content_type_allowed(&self, header: Option<&str>) -> Result<String, BlockReason> {
        let media = header
            .and_then(|h| h.split(';').next())
            .map(|m| m.trim().to_ascii_lowercase())
            .filter(|m| !m.is_empty());
        match media {
            Some(m) if self.content_types.contains(&m) => Ok(m),
            other => Err(BlockReason::ContentTypeNotAllowed {
                content_type: other.map(|m| crate::canon::cut(&m, 100)),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(entries: Vec<AllowEntry>) -> Policy {
        EgressConfig {
            allow: entries,
            ..EgressConfig::default()
        }
        .validate()
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn domain(d: &str) -> Host {
        Host::Domain(d.to_string())
    }

    #[test]
    fn over_broad_or_malformed_patterns_are_refused_at_load() {
        type Check = fn(&ConfigError) -> bool;
        let refused: &[(&str, Check)] = &[
            ("*", |e| matches!(e, ConfigError::BareWildcard { .. })),
            ("*.", |e| matches!(e, ConfigError::BareWildcard { .. })),
            ("*.com", |e| {
                matches!(e, ConfigError::WildcardTooBroad { .. })
            }),
            ("*.org.", |e| {
                matches!(e, ConfigError::WildcardTooBroad { .. })
            }),
            ("*.co.uk", |e| {
                matches!(e, ConfigError::WildcardOverPublicSuffix { .. })
            }),
            ("*.CO.UK", |e| {
                matches!(e, ConfigError::WildcardOverPublicSuffix { .. })
            }),
            ("*.github.io", |e| {
                matches!(e, ConfigError::WildcardOverPublicSuffix { .. })
            }),
            ("*.*.example.org", |e| {
                matches!(e, ConfigError::MisplacedWildcard { .. })
            }),
            ("foo.*.org", |e| {
                matches!(e, ConfigError::MisplacedWildcard { .. })
            }),
            ("*example.org", |e| {
                matches!(e, ConfigError::MisplacedWildcard { .. })
            }),
            ("*.10.0.0.1", |e| {
                matches!(e, ConfigError::InvalidHost { .. })
            }),
            ("0x7f.1", |e| matches!(e, ConfigError::InvalidHost { .. })),
            ("ex%61mple.org", |e| {
                matches!(e, ConfigError::InvalidHost { .. })
            }),
            ("", |e| matches!(e, ConfigError::InvalidHost { .. })),
        ];
        for (pattern, check) in refused {
            let got = parse_pattern(0, pattern);
            assert!(got.as_ref().is_err_and(check), "{pattern:?} gave {got:?}");
        }
        let accepted = [
            (
                "*.example.org",
                HostPattern::Subdomains("example.org".into()),
            ),
            (
                "*.example.co.uk",
                HostPattern::Subdomains("example.co.uk".into()),
            ),
            (
                "*.Bücher.example.",
                HostPattern::Subdomains("xn--bcher-kva.example".into()),
            ),
            ("Example.ORG.", HostPattern::Exact("example.org".into())),
            ("localhost", HostPattern::Exact("localhost".into())),
            ("127.0.0.1", HostPattern::Ip(IpAddr::from([127, 0, 0, 1]))),
            (
                "::1",
                HostPattern::Ip("::1".parse().unwrap_or(IpAddr::from([0; 4]))),
            ),
            (
                "[::1]",
                HostPattern::Ip("::1".parse().unwrap_or(IpAddr::from([0; 4]))),
            ),
        ];
        for (pattern, want) in accepted {
            assert_eq!(parse_pattern(0, pattern), Ok(want), "{pattern}");
        }
    }

    #[test]
    fn wildcard_matches_subdomains_but_not_the_apex_or_lookalikes() {
        let p = HostPattern::Subdomains("example.org".into());
        let cases = [
            ("a.example.org", true),
            ("a.b.example.org", true),
            ("example.org", false),
            ("badexample.org", false),
            ("example.org.evil.test", false),
            (".example.org", false),
        ];
        for (host, want) in cases {
            assert_eq!(p.matches(&domain(host)), want, "{host}");
        }
        let exact = HostPattern::Exact("example.org".into());
        assert!(exact.matches(&domain("example.org")));
        assert!(!exact.matches(&domain("a.example.org")));
        assert!(!exact.matches(&Host::Ip(IpAddr::from([93, 184, 215, 14]))));
    }

    #[test]
    fn unlisted_scheme_port_or_ip_is_blocked_with_the_most_specific_reason() {
        let p = policy(vec![
            AllowEntry::https("*.wikipedia.org"),
            AllowEntry {
                host: "127.0.0.1".into(),
                schemes: vec!["http".into()],
                ports: Some(vec![8080]),
                allow_private: true,
            },
            AllowEntry {
                host: "relay.example.org".into(),
                schemes: vec!["smtp".into()],
                ports: Some(vec![587]),
                allow_private: false,
            },
        ]);
        let loopback = Host::Ip(IpAddr::from([127, 0, 0, 1]));
        let cases: Vec<(Scheme, Host, u16, Result<String, BlockReason>)> = vec![
            (
                Scheme::Https,
                domain("en.wikipedia.org"),
                443,
                Ok("allow[0]:*.wikipedia.org".into()),
            ),
            (
                Scheme::Https,
                domain("wikipedia.org"),
                443,
                Err(BlockReason::UnlistedHost {
                    host: "wikipedia.org".into(),
                }),
            ),
            (
                Scheme::Http,
                domain("en.wikipedia.org"),
                80,
                Err(BlockReason::SchemeNotAllowed {
                    scheme: "http".into(),
                }),
            ),
            (
                Scheme::Https,
                domain("en.wikipedia.org"),
                8443,
                Err(BlockReason::PortNotAllowed {
                    host: "en.wikipedia.org".into(),
                    port: 8443,
                }),
            ),
            (
                Scheme::Http,
                loopback.clone(),
                8080,
                Ok("allow[1]:127.0.0.1".into()),
            ),
            (
                Scheme::Http,
                loopback.clone(),
                80,
                Err(BlockReason::PortNotAllowed {
                    host: "127.0.0.1".into(),
                    port: 80,
                }),
            ),
            (
                Scheme::Https,
                Host::Ip(IpAddr::from([10, 0, 0, 5])),
                443,
                Err(BlockReason::IpLiteralNotListed {
                    ip: IpAddr::from([10, 0, 0, 5]),
                }),
            ),
            (
                Scheme::Smtp,
                domain("relay.example.org"),
                587,
                Ok("allow[2]:relay.example.org".into()),
            ),
            (
                Scheme::Https,
                domain("relay.example.org"),
                443,
                Err(BlockReason::SchemeNotAllowed {
                    scheme: "https".into(),
                }),
            ),
        ];
        for (scheme, host, port, want) in cases {
            let got = p
                .check_target(scheme, &host, port)
                .map(|permit| permit.rule());
            assert_eq!(got, want, "{scheme}://{host}:{port}");
        }
    }

    #[test]
    fn bad_entries_and_caps_are_refused_at_load() {
        let base = |entry: AllowEntry| EgressConfig {
            allow: vec![entry],
            ..EgressConfig::default()
        };
        let cases: Vec<(EgressConfig, ConfigError)> = vec![
            (
                base(AllowEntry {
                    schemes: vec!["ftp".into()],
                    ..AllowEntry::https("a.example")
                }),
                ConfigError::UnknownScheme {
                    index: 0,
                    scheme: "ftp".into(),
                },
            ),
            (
                base(AllowEntry {
                    schemes: vec![],
                    ..AllowEntry::https("a.example")
                }),
                ConfigError::NoSchemes { index: 0 },
            ),
            (
                base(AllowEntry {
                    ports: Some(vec![]),
                    ..AllowEntry::https("a.example")
                }),
                ConfigError::NoPorts { index: 0 },
            ),
            (
                base(AllowEntry {
                    ports: Some(vec![0]),
                    ..AllowEntry::https("a.example")
                }),
                ConfigError::PortZero { index: 0 },
            ),
            (
                base(AllowEntry {
                    schemes: vec!["smtp".into()],
                    ..AllowEntry::https("a.example")
                }),
                ConfigError::SmtpNeedsPorts { index: 0 },
            ),
            (
                EgressConfig {
                    max_bytes: 0,
                    ..EgressConfig::default()
                },
                ConfigError::InvalidLimit {
                    field: "max_bytes",
                    expected: "at least 1".into(),
                },
            ),
            (
                EgressConfig {
                    max_redirects: 99,
                    ..EgressConfig::default()
                },
                ConfigError::InvalidLimit {
                    field: "max_redirects",
                    expected: "at most 20".into(),
                },
            ),
            (
                EgressConfig {
                    content_types: vec!["text/*".into()],
                    ..EgressConfig::default()
                },
                ConfigError::InvalidContentType {
                    value: "text/*".into(),
                },
            ),
        ];
        for (config, want) in cases {
            assert_eq!(config.validate(), Err(want));
        }
    }

    #[test]
    fn toml_config_loads_with_documented_defaults_and_refuses_a_bare_star() {
        let text = r#"
            [egress]
            max_bytes = 1000

            [[egress.allow]]
            host = "*.wikipedia.org"
            schemes = ["https"]
            ports = [443]
            allow_private = false
        "#;
        let (config, policy) =
            EgressConfig::from_toml_document(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.max_bytes, 1000);
        assert_eq!(policy.max_redirects, 5);
        assert_eq!(policy.timeout, Duration::from_secs(20));
        assert!(policy.content_types.contains("application/xhtml+xml"));

        let star = "[[egress.allow]]\nhost = \"*\"\n";
        assert!(matches!(
            EgressConfig::from_toml_document(star),
            Err(ConfigError::BareWildcard { .. })
        ));
        let typo = "[[egress.allow]]\nhost = \"a.example\"\nallow_privat = true\n";
        assert!(matches!(
            EgressConfig::from_toml_document(typo),
            Err(ConfigError::Toml(_))
        ));
        let (_, empty) = EgressConfig::from_toml_document("").unwrap_or_else(|e| panic!("{e}"));
        assert!(empty.rules.is_empty());
    }

    #[test]
    fn content_types_off_the_list_are_refused() {
        let p = policy(vec![]);
        let cases = [
            (Some("text/html; charset=utf-8"), true),
            (Some("Application/JSON"), true),
            (Some("application/octet-stream"), false),
            (Some("image/svg+xml"), false),
            (Some(""), false),
            (None, false),
        ];
        for (header, ok) in cases {
            assert_eq!(p.content_type_allowed(header).is_ok(), ok, "{header:?}");
        }
    }
}
