//! URL and host canonicalization: one spelling per destination, or a refusal.
//!
//! Contract:
//! - [`canonical_host`] accepts a host only in its one canonical spelling, after two documented
//!   normalizations: ASCII (and Unicode) upper case is lowered, and one trailing dot is dropped
//!   (`Example.ORG.` is `example.org`). Internationalized names are accepted in Unicode or in
//!   punycode and are always *returned and matched* in punycode (`bücher.example` is
//!   `xn--bcher-kva.example`).
//! - It refuses every other spelling that a WHATWG parser would quietly turn into a different
//!   host: decimal, octal, hex and short IPv4 forms (`2130706433`, `0177.0.0.1`, `0x7f.1`,
//!   `127.1`), percent-encoded hosts, full-width letters or dots that IDNA maps onto ASCII, empty
//!   labels, and IPv4 literals with a trailing dot. IPv6 literals are accepted in any spelling the
//!   standard parser reads (they are compared by value, never by text).
//! - [`canonicalize_url`] accepts only absolute `http` / `https` URLs written as
//!   `scheme://host[:port]/...`, and refuses userinfo (`user@`, `user:pw@`, even an empty `@`),
//!   control characters and whitespace anywhere, backslashes in or right after the authority, and
//!   any host that [`canonical_host`] refuses. The returned URL has the canonical host and no
//!   fragment; the host it names is exactly the one the allowlist and the resolver see.
//! - [`next_hop`] turns a redirect's `Location` into the next [`Target`] by the same rules, and
//!   refuses an `https` to `http` downgrade. Only a path-relative location is joined onto the
//!   current URL; anything naming a host is canonicalized from its raw text, so a redirect cannot
//!   smuggle a non-canonical host past the checks.
//!
//! Everything here is pure: no I/O, no DNS.

use std::fmt;
use std::net::IpAddr;

use url::Url;

use crate::error::{BlockReason, NonCanonical};

/// The schemes the exit understands at all. Which ones a host may use is the allowlist's call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
    /// Only for the SMTP relay: never reachable through a URL.
    Smtp,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::Smtp => "smtp",
        }
    }

    /// The scheme's conventional port, when it has one the allowlist may assume.
    pub fn default_port(self) -> Option<u16> {
        match self {
            Scheme::Http => Some(80),
            Scheme::Https => Some(443),
            Scheme::Smtp => None,
        }
    }

    pub fn parse(text: &str) -> Option<Scheme> {
        match text {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            "smtp" => Some(Scheme::Smtp),
            _ => None,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A host in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// Lower-case ASCII (punycode for IDN), no trailing dot.
    Domain(String),
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Domain(d) => f.write_str(d),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// A destination that passed canonicalization (not yet the allowlist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL to request: canonical host, no fragment, no userinfo.
    pub url: Url,
    pub scheme: Scheme,
    pub host: Host,
    /// The effective port (the scheme's default when the URL names none).
    pub port: u16,
}

/// The one canonical form of `raw`, or why it is refused. See the module doc for the rules.
pub fn canonical_host(raw: &str) -> Result<Host, BlockReason> {
    let refuse = |why: NonCanonical| {
        Err(BlockReason::NonCanonicalHost {
            host: bounded(raw),
            why,
        })
    };
    if raw.is_empty() {
        return Err(BlockReason::InvalidUrl {
            why: "the host is empty".into(),
        });
    }
    if raw.contains('%') {
        return refuse(NonCanonical::PercentEncoded);
    }
    if raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return refuse(NonCanonical::ForbiddenCharacter);
    }
    let parsed = url::Host::parse(raw).map_err(|e| BlockReason::InvalidUrl {
        why: format!("the host is not valid ({e})"),
    })?;
    match parsed {
        url::Host::Ipv6(v6) => Ok(Host::Ip(IpAddr::V6(v6))),
        url::Host::Ipv4(v4) => {
            if raw == v4.to_string() {
                Ok(Host::Ip(IpAddr::V4(v4)))
            } else {
                refuse(NonCanonical::NumericForm)
            }
        }
        url::Host::Domain(domain) => {
            let domain = domain.strip_suffix('.').unwrap_or(&domain).to_string();
            if domain.is_empty() || domain.split('.').any(str::is_empty) {
                return refuse(NonCanonical::EmptyLabel);
            }
            let written = raw.strip_suffix('.').unwrap_or(raw).to_lowercase();
            if written == domain {
                return Ok(Host::Domain(domain));
            }
            // An IDN written in Unicode: accepted only if it is exactly what the punycode
            // form reads back as (so full-width letters and odd dots are refused).
            let (unicode, result) = idna::domain_to_unicode(&domain);
            if result.is_ok() && !written.is_ascii() && unicode == written {
                return Ok(Host::Domain(domain));
            }
            refuse(NonCanonical::MappedSpelling)
        }
    }
}

/// Canonicalizes an absolute `http(s)` URL. See the module doc for what is refused.
pub fn canonicalize_url(input: &str) -> Result<Target, BlockReason> {
    let invalid = |why: &str| {
        Err(BlockReason::InvalidUrl {
            why: why.to_string(),
        })
    };
    if input.chars().any(|c| c.is_control()) {
        return invalid("the URL contains control characters (tab, newline, ...)");
    }
    if input.trim() != input {
        return invalid("the URL has leading or trailing whitespace");
    }
    let Some((scheme_text, rest)) = input.split_once("://") else {
        return invalid("the URL must be absolute: scheme://host/path");
    };
    if scheme_text.is_empty()
        || !scheme_text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return invalid("the URL must start with a scheme such as https://");
    }
    let scheme_lower = scheme_text.to_ascii_lowercase();
    let scheme = match Scheme::parse(&scheme_lower) {
        Some(s @ (Scheme::Http | Scheme::Https)) => s,
        Some(Scheme::Smtp) | None => {
            return Err(BlockReason::SchemeNotAllowed {
                scheme: bounded(&scheme_lower),
            });
        }
    };
    let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if rest[end..].starts_with('\\') {
        return invalid("a backslash may not end the host part of a URL");
    }
    if authority.contains('@') {
        return Err(BlockReason::UserInfo);
    }
    let raw_host = split_host(authority)?;
    let host = canonical_host(raw_host)?;

    let mut url = Url::parse(input).map_err(|e| BlockReason::InvalidUrl {
        why: format!("the URL does not parse ({e})"),
    })?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(BlockReason::UserInfo);
    }
    // The parser and the raw text must agree on the host; a disagreement is a parser
    // differential and is refused rather than guessed at.
    let agrees = match (url.host(), &host) {
        (Some(url::Host::Domain(d)), Host::Domain(ours)) => {
            d.strip_suffix('.').unwrap_or(d) == ours
        }
        (Some(url::Host::Ipv4(v4)), Host::Ip(ip)) => IpAddr::V4(v4) == *ip,
        (Some(url::Host::Ipv6(v6)), Host::Ip(ip)) => IpAddr::V6(v6) == *ip,
        _ => false,
    };
    if !agrees {
        return Err(BlockReason::NonCanonicalHost {
            host: bounded(raw_host),
            why: NonCanonical::ParserDisagreement,
        });
    }
    if let Host::Domain(d) = &host
        && url.host_str() != Some(d.as_str())
        && url.set_host(Some(d)).is_err()
    {
        return invalid("the host could not be normalized");
    }
    url.set_fragment(None);
    let Some(port) = url.port_or_known_default() else {
        return invalid("the URL has no port and its scheme has no default");
    };
    Ok(Target {
        url,
        scheme,
        host,
        port,
    })
}

/// The host part of `host[:port]` or `[v6][:port]`, raw.
fn split_host(authority: &str) -> Result<&str, BlockReason> {
    let invalid = |why: &str| BlockReason::InvalidUrl {
        why: why.to_string(),
    };
    let (host, port) = if authority.starts_with('[') {
        let close = authority
            .find(']')
            .ok_or_else(|| invalid("an IPv6 host is missing its closing `]`"))?;
        let (host, rest) = authority.split_at(close + 1);
        match rest.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if rest.is_empty() => (host, None),
            None => return Err(invalid("unexpected text after an IPv6 host")),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if let Some(port) = port
        && (port.is_empty() || !port.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(invalid("the port must be digits"));
    }
    Ok(host)
}

/// The next hop named by a redirect from `from`. Re-runs every URL check on it and refuses an
/// `https` to `http` downgrade; the allowlist and the addresses are checked by the caller.
pub fn next_hop(from: &Url, location: &str) -> Result<Target, BlockReason> {
    let location = location.trim_matches([' ', '\t']);
    let invalid = |why: &str| BlockReason::InvalidUrl {
        why: format!("redirect Location: {why}"),
    };
    if location.is_empty() {
        return Err(invalid("empty"));
    }
    if location.contains('\\') || location.chars().any(char::is_control) {
        return Err(invalid("contains a backslash or a control character"));
    }
    let absolute = if location.starts_with("//") {
        format!("{}:{location}", from.scheme())
    } else if has_scheme_prefix(location) {
        if !location.contains("://") {
            return Err(invalid("a scheme must be followed by //"));
        }
        location.to_string()
    } else {
        let joined = from.join(location).map_err(|e| invalid(&e.to_string()))?;
        if joined.host() != from.host() || joined.port() != from.port() {
            return Err(invalid("a relative location changed the host"));
        }
        joined.to_string()
    };
    let target = canonicalize_url(&absolute)?;
    check_downgrade(from, &target.url)?;
    Ok(target)
}

/// Refuses a move from `https` to anything that is not `https`.
pub fn check_downgrade(from: &Url, to: &Url) -> Result<(), BlockReason> {
    if from.scheme() == "https" && to.scheme() != "https" {
        return Err(BlockReason::Downgrade {
            from_scheme: from.scheme().to_string(),
            to_scheme: bounded(to.scheme()),
        });
    }
    Ok(())
}

/// `scheme:` at the start, before any `/`, `?` or `#`.
fn has_scheme_prefix(text: &str) -> bool {
    let Some(colon) = text.find(':') else {
        return false;
    };
    let head = &text[..colon];
    !head.is_empty()
        && head.starts_with(|c: char| c.is_ascii_alphabetic())
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// A URL fit for a trace line: userinfo replaced by `[redacted]`, at most 2,048 characters.
pub fn url_for_trace(raw: &str) -> String {
    let redacted = match raw.split_once("://") {
        Some((scheme, rest)) => {
            let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
            let authority = &rest[..end];
            match authority.rfind('@') {
                Some(at) => format!("{scheme}://[redacted]{}", &rest[at..]),
                None => raw.to_string(),
            }
        }
        None => raw.to_string(),
    };
    cut(&redacted, 2048)
}

/// At most `max` characters of `text`, marked when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// Hosts echoed in errors are bounded (a 10 kB "host" is not echoed whole).
fn bounded(text: &str) -> String {
    cut(text, 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(result: Result<Target, BlockReason>) -> Option<BlockReason> {
        result.err()
    }

    #[test]
    fn non_canonical_host_spellings_are_refused_and_canonical_ones_normalized() {
        use NonCanonical::*;
        let v4 = |t: &str| Ok(Host::Ip(t.parse().unwrap_or_else(|e| panic!("{t}: {e}"))));
        let dom = |t: &str| Ok(Host::Domain(t.to_string()));
        let non = |h: &str, why| {
            Err(BlockReason::NonCanonicalHost {
                host: h.to_string(),
                why,
            })
        };
        let cases: Vec<(&str, Result<Host, BlockReason>)> = vec![
            ("127.0.0.1", v4("127.0.0.1")),
            ("2130706433", non("2130706433", NumericForm)),
            ("0177.0.0.1", non("0177.0.0.1", NumericForm)),
            ("0x7f.1", non("0x7f.1", NumericForm)),
            ("0x7f000001", non("0x7f000001", NumericForm)),
            ("127.1", non("127.1", NumericForm)),
            ("127.0.0.1.", non("127.0.0.1.", NumericForm)),
            ("017700000001", non("017700000001", NumericForm)),
            ("[::ffff:127.0.0.1]", v4("::ffff:127.0.0.1")),
            ("[::ffff:7f00:1]", v4("::ffff:127.0.0.1")),
            ("[::127.0.0.1]", v4("::127.0.0.1")),
            ("[::1]", v4("::1")),
            ("example.org", dom("example.org")),
            ("Example.ORG", dom("example.org")),
            ("example.org.", dom("example.org")),
            ("EXAMPLE.org.", dom("example.org")),
            ("example.org..", non("example.org..", EmptyLabel)),
            ("a..example.org", non("a..example.org", EmptyLabel)),
            ("bücher.example", dom("xn--bcher-kva.example")),
            ("BÜCHER.example", dom("xn--bcher-kva.example")),
            ("xn--bcher-kva.example", dom("xn--bcher-kva.example")),
            (
                "ｅｘａｍｐｌｅ.org",
                non("ｅｘａｍｐｌｅ.org", MappedSpelling),
            ),
            ("example。org", non("example。org", MappedSpelling)),
            ("ex%61mple.org", non("ex%61mple.org", PercentEncoded)),
            ("%31%32%37.0.0.1", non("%31%32%37.0.0.1", PercentEncoded)),
        ];
        for (raw, want) in cases {
            assert_eq!(canonical_host(raw), want, "{raw}");
        }
    }

    #[test]
    fn urls_are_canonicalized_to_the_host_the_checks_see() {
        let cases = [
            (
                "https://Example.ORG./a?b#frag",
                "https://example.org/a?b",
                443,
            ),
            ("http://example.org:8080/", "http://example.org:8080/", 8080),
            (
                "HTTPS://bücher.example/",
                "https://xn--bcher-kva.example/",
                443,
            ),
            ("http://[::1]:81/x", "http://[::1]:81/x", 81),
        ];
        for (input, want, port) in cases {
            let target = canonicalize_url(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(target.url.as_str(), want, "{input}");
            assert_eq!(target.port, port, "{input}");
        }
    }

    #[test]
    fn userinfo_and_malformed_urls_are_refused() {
        type Check = fn(&BlockReason) -> bool;
        let cases: &[(&str, Check)] = &[
            ("http://allowed.example@evil.example/", |r| {
                *r == BlockReason::UserInfo
            }),
            ("https://user:pw@host.example/", |r| {
                *r == BlockReason::UserInfo
            }),
            ("https://@host.example/", |r| *r == BlockReason::UserInfo),
            ("http://evil.example\\@allowed.example/", |r| {
                matches!(r, BlockReason::InvalidUrl { .. })
            }),
            ("http://exa\nmple.org/", |r| {
                matches!(r, BlockReason::InvalidUrl { .. })
            }),
            (" http://example.org/", |r| {
                matches!(r, BlockReason::InvalidUrl { .. })
            }),
            ("example.org/path", |r| {
                matches!(r, BlockReason::InvalidUrl { .. })
            }),
            ("ftp://example.org/", |r| {
                matches!(r, BlockReason::SchemeNotAllowed { .. })
            }),
            ("file:///etc/passwd", |r| {
                matches!(r, BlockReason::SchemeNotAllowed { .. })
            }),
            ("http:///example.org/", |r| {
                matches!(r, BlockReason::InvalidUrl { .. })
            }),
            ("http://0x7f.1/", |r| {
                matches!(r, BlockReason::NonCanonicalHost { .. })
            }),
            ("http://2130706433/", |r| {
                matches!(r, BlockReason::NonCanonicalHost { .. })
            }),
            ("http://example.org:8o/", |r| {
                matches!(r, BlockReason::InvalidUrl { .. })
            }),
        ];
        for (input, ok) in cases {
            let got = reason(canonicalize_url(input));
            assert!(got.as_ref().is_some_and(ok), "{input}: {got:?}");
        }
    }

    #[test]
    fn redirects_rerun_every_check_and_refuse_downgrades() {
        let from = |u: &str| Url::parse(u).unwrap_or_else(|e| panic!("{u}: {e}"));
        let ok = [
            ("https://a.example/x", "/y", "https://a.example/y"),
            ("https://a.example/x/z", "w", "https://a.example/x/w"),
            (
                "https://a.example/x",
                "//b.example/q",
                "https://b.example/q",
            ),
            (
                "http://a.example/x",
                "https://b.example/",
                "https://b.example/",
            ),
            (
                "http://a.example/x",
                "HTTP://B.Example./",
                "http://b.example/",
            ),
        ];
        for (base, location, want) in ok {
            let target =
                next_hop(&from(base), location).unwrap_or_else(|e| panic!("{location}: {e}"));
            assert_eq!(target.url.as_str(), want);
        }
        let downgrade = next_hop(&from("https://a.example/"), "http://a.example/plain");
        assert_eq!(
            downgrade,
            Err(BlockReason::Downgrade {
                from_scheme: "https".into(),
                to_scheme: "http".into()
            })
        );
        let scheme_relative_keeps_https =
            next_hop(&from("https://a.example/"), "//b.example/").map(|t| t.scheme);
        assert_eq!(scheme_relative_keeps_https, Ok(Scheme::Https));
        let refused = [
            "http://0177.0.0.1/",
            "//2130706433/",
            "https://u@b.example/",
            "/\\evil.example/",
            "http:evil.example",
            "javascript:alert(1)",
            "",
        ];
        for location in refused {
            assert!(
                next_hop(&from("http://a.example/"), location).is_err(),
                "{location}"
            );
        }
    }

    #[test]
    fn credentials_never_reach_the_trace() {
        let cases = [
            (
                "http://allowed.example@evil.example/",
                "http://[redacted]@evil.example/",
            ),
            (
                "https://user:pw@host.example/p?q",
                "https://[redacted]@host.example/p?q",
            ),
            ("https://host.example/a@b", "https://host.example/a@b"),
            ("not a url", "not a url"),
        ];
        for (raw, want) in cases {
            assert_eq!(url_for_trace(raw), want);
        }
        assert!(url_for_trace(&"x".repeat(5000)).chars().count() <= 2049);
    }
}
