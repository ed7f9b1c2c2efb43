//! Access-token checks: a JWT access token (RFC 9068) is accepted only if every check passes,
//! as a pure function of the token, the authorization server's keys, the policy and the time.
//!
//! Checks, in order: the header parses and names an algorithm on the allowlist (never `none`,
//! never HMAC: [`TokenPolicy::new`] refuses both); `typ` is `at+jwt` when the policy asks; a
//! key of the authorization server's set matches the token's key id and algorithm family; the
//! signature verifies; `iss` is exactly the issuer; `aud` (a string or an array) contains this
//! server's resource URI (RFC 8707); `exp` is present and not past, `nbf` not ahead, `iat` not
//! ahead, each within the clock-skew bound; the token names a subject or a client, and a
//! subject never starts with [`CLIENT_PREFIX`] (the principal id of a client-only token).
//! Scopes are split on plain spaces only (RFC 6749 section 3.3).
//!
//! The signature itself is checked by `jsonwebtoken`; the claim checks are ours, so that the
//! time is an argument (tests pin it) and each failure has its own typed reason.

use std::collections::BTreeSet;

use base64::Engine as _;
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::{Map, Value};

/// What a token must satisfy.
#[derive(Debug, Clone)]
pub struct TokenPolicy {
    issuer: String,
    resource: String,
    algorithms: Vec<Algorithm>,
    skew_secs: u64,
    require_at_jwt: bool,
}

/// Why a policy cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "unknown signing algorithm {0:?}: use RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384 or EdDSA"
    )]
    UnknownAlgorithm(String),
    #[error(
        "signing algorithm {0} is refused: only asymmetric algorithms can be checked against an authorization server's public keys"
    )]
    SymmetricAlgorithm(String),
    #[error("no signing algorithm is accepted: list at least one")]
    NoAlgorithm,
}

impl TokenPolicy {
    /// A policy for tokens from `issuer` for `resource`, signed with one of `algorithms`
    /// (names as in JWA: `RS256`, `ES256`, ...).
    pub fn new(
        issuer: &str,
        resource: &str,
        algorithms: &[String],
        skew_secs: u64,
        require_at_jwt: bool,
    ) -> Result<TokenPolicy, PolicyError> {
        let mut accepted = Vec::new();
        for name in algorithms {
            let algorithm: Algorithm = name
                .parse()
                .map_err(|_| PolicyError::UnknownAlgorithm(name.clone()))?;
            if algorithm.family() == AlgorithmFamily::Hmac {
                return Err(PolicyError::SymmetricAlgorithm(name.clone()));
            }
            accepted.push(algorithm);
        }
        if accepted.is_empty() {
            return Err(PolicyError::NoAlgorithm);
        }
        Ok(TokenPolicy {
            issuer: issuer.into(),
            resource: resource.into(),
            algorithms: accepted,
            skew_secs,
            require_at_jwt,
        })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn resource(&self) -> &str {
        &self.resource
    }
}

/// One public key of the authorization server.
#[derive(Clone)]
pub struct PublicKey {
    pub kid: Option<String>,
    /// The algorithm the key is for, when its JWK says.
    pub alg: Option<Algorithm>,
    pub family: AlgorithmFamily,
    pub key: DecodingKey,
}

/// A token that passed every check: who it speaks for and what it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    pub subject: Option<String>,
    pub client_id: Option<String>,
    pub scopes: BTreeSet<String>,
    pub expires_at: u64,
}

/// Why a token was refused. Every variant is an `invalid_token` to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is not a well-formed JWT ({0})")]
    Malformed(String),
    #[error("the token's signing algorithm {0:?} is not accepted")]
    AlgorithmRefused(String),
    #[error("the token's type {0:?} is not at+jwt (RFC 9068 access token)")]
    WrongType(Option<String>),
    #[error("no key of the authorization server matches the token (key id {0:?})")]
    UnknownKey(Option<String>),
    #[error("the token's signature does not verify")]
    BadSignature,
    #[error("the token was issued by {0:?}, not by this server's authorization server")]
    WrongIssuer(Option<String>),
    #[error("the token is not for this resource (audience {0})")]
    WrongAudience(String),
    #[error("the token has no expiry (exp)")]
    NoExpiry,
    #[error("the token expired")]
    Expired,
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    #[error("the token claims to be issued in the future (iat)")]
    IssuedInFuture,
    #[error("the token names neither a subject (sub) nor a client (client_id)")]
    NoSubject,
    #[error(
        "the token's subject starts with {CLIENT_PREFIX:?}, which names client-only tokens here"
    )]
    ReservedSubject,
}

/// The prefix of the principal id of a token without a subject (`client:<client_id>`): a
/// subject that starts with it would pass for that client, so it is refused.
pub const CLIENT_PREFIX: &str = "client:";

impl TokenError {
    /// The check that failed, as a stable snake_case name (the `rule` of the trace's `auth`
    /// event); never any part of the token.
    pub fn rule(&self) -> &'static str {
        match self {
            TokenError::Malformed(_) => "malformed_token",
            TokenError::AlgorithmRefused(_) => "algorithm_refused",
            TokenError::WrongType(_) => "wrong_type",
            TokenError::UnknownKey(_) => "unknown_key",
            TokenError::BadSignature => "bad_signature",
            TokenError::WrongIssuer(_) => "wrong_issuer",
            TokenError::WrongAudience(_) => "wrong_audience",
            TokenError::NoExpiry => "no_expiry",
            TokenError::Expired => "expired",
            TokenError::NotYetValid => "not_yet_valid",
            TokenError::IssuedInFuture => "issued_in_future",
            TokenError::NoSubject => "no_subject",
            TokenError::ReservedSubject => "reserved_subject",
        }
    }

    /// Whether fetching the key set again could change the answer.
    pub fn is_unknown_key(&self) -> bool {
        matches!(self, TokenError::UnknownKey(_))
    }
}

/// The header fields the checks read, parsed leniently so that an unsupported `alg` (`none`)
/// is reported as refused rather than as unreadable.
struct RawHeader {
    alg: String,
    typ: Option<String>,
    kid: Option<String>,
}

fn raw_header(token: &str) -> Result<RawHeader, TokenError> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed(
            "not three dot-separated parts".into(),
        ));
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| TokenError::Malformed("the header is not base64url".into()))?;
    let fields: Map<String, Value> = serde_json::from_slice(&bytes)
        .map_err(|_| TokenError::Malformed("the header is not a JSON object".into()))?;
    let text = |key: &str| fields.get(key).and_then(Value::as_str).map(str::to_string);
    Ok(RawHeader {
        alg: text("alg").ok_or_else(|| TokenError::Malformed("the header has no alg".into()))?,
        typ: text("typ"),
        kid: text("kid"),
    })
}

/// Checks `token` against `keys` and `policy` at `now` (seconds since the epoch).
pub fn verify(
    token: &str,
    keys: &[PublicKey],
    policy: &TokenPolicy,
    now: u64,
) -> Result<VerifiedToken, TokenError> {
    let header = raw_header(token)?;
    let algorithm = header
        .alg
        .parse::<Algorithm>()
        .ok()
        .filter(|a| policy.algorithms.contains(a))
        .ok_or_else(|| TokenError::AlgorithmRefused(header.alg.clone()))?;
    if policy.require_at_jwt {
        let typ = header.typ.as_deref().map(str::to_ascii_lowercase);
        if !matches!(typ.as_deref(), Some("at+jwt" | "application/at+jwt")) {
            return Err(TokenError::WrongType(header.typ));
        }
    }
    let key = pick_key(keys, header.kid.as_deref(), algorithm)
        .ok_or_else(|| TokenError::UnknownKey(header.kid.clone()))?;
    let claims = verified_claims(token, key, algorithm)?;
    check_claims(&claims, policy, now)
}

/// The key a token with `kid` and `algorithm` is checked with: the one with that id, or, when
/// the token names none, the only key of the algorithm's family.
fn pick_key<'a>(
    keys: &'a [PublicKey],
    kid: Option<&str>,
    algorithm: Algorithm,
) -> Option<&'a PublicKey> {
    let fits =
        |k: &&PublicKey| k.family == algorithm.family() && k.alg.is_none_or(|alg| alg == algorithm);
    match kid {
        Some(kid) => keys
            .iter()
            .filter(fits)
            .find(|k| k.kid.as_deref() == Some(kid)),
        None => {
            let mut candidates = keys.iter().filter(fits);
            let only = candidates.next()?;
            candidates.next().is_none().then_some(only)
        }
    }
}

fn verified_claims(
    token: &str,
    key: &PublicKey,
    algorithm: Algorithm,
) -> Result<Map<String, Value>, TokenError> {
    // Only the signature and the algorithm are checked here; the claims are checked below.
    let mut validation = Validation::new(algorithm);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.leeway = 0;
    match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
        Ok(data) => Ok(data.claims),
        Err(error) => Err(match error.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidSignature => TokenError::BadSignature,
            jsonwebtoken::errors::ErrorKind::InvalidAlgorithm
            | jsonwebtoken::errors::ErrorKind::InvalidAlgorithmName => {
                TokenError::AlgorithmRefused(format!("{algorithm:?}"))
            }
            _ => TokenError::Malformed(error.to_string()),
        }),
    }
}

fn check_claims(
    claims: &Map<String, Value>,
    policy: &TokenPolicy,
    now: u64,
) -> Result<VerifiedToken, TokenError> {
    let text = |key: &str| claims.get(key).and_then(Value::as_str).map(str::to_string);
    let issuer = text("iss");
    if issuer.as_deref() != Some(policy.issuer.as_str()) {
        return Err(TokenError::WrongIssuer(issuer));
    }
    let audience = claims.get("aud").cloned().unwrap_or(Value::Null);
    let for_us = match &audience {
        Value::String(one) => one == &policy.resource,
        Value::Array(many) => many
            .iter()
            .any(|a| a.as_str() == Some(policy.resource.as_str())),
        _ => false,
    };
    if !for_us {
        return Err(TokenError::WrongAudience(audience.to_string()));
    }
    let time = |key: &str| -> Result<Option<u64>, TokenError> {
        match claims.get(key) {
            None => Ok(None),
            Some(value) => value
                .as_f64()
                .filter(|t| t.is_finite() && *t >= 0.0)
                .map(|t| Some(t as u64))
                .ok_or_else(|| TokenError::Malformed(format!("{key} is not a time"))),
        }
    };
    let skew = policy.skew_secs;
    let expires_at = time("exp")?.ok_or(TokenError::NoExpiry)?;
    if now >= expires_at.saturating_add(skew) {
        return Err(TokenError::Expired);
    }
    if time("nbf")?.is_some_and(|nbf| nbf > now.saturating_add(skew)) {
        return Err(TokenError::NotYetValid);
    }
    if time("iat")?.is_some_and(|iat| iat > now.saturating_add(skew)) {
        return Err(TokenError::IssuedInFuture);
    }
    let subject = text("sub");
    let client_id = text("client_id");
    if subject.is_none() && client_id.is_none() {
        return Err(TokenError::NoSubject);
    }
    if subject
        .as_deref()
        .is_some_and(|s| s.starts_with(CLIENT_PREFIX))
    {
        return Err(TokenError::ReservedSubject);
    }
    Ok(VerifiedToken {
        subject,
        client_id,
        scopes: scopes_of(claims),
        expires_at,
    })
}

/// The scopes a token grants: `scope` (separated by plain spaces, RFC 6749 section 3.3 and
/// RFC 9068) and `scp` (a list or a string, as some servers write it). Only U+0020 separates:
/// any other whitespace is part of a token, which then names no scope of ours.
fn scopes_of(claims: &Map<String, Value>) -> BTreeSet<String> {
    let mut scopes = BTreeSet::new();
    for key in ["scope", "scp"] {
        match claims.get(key) {
            Some(Value::String(list)) => {
                scopes.extend(
                    list.split(' ')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                );
            }
            Some(Value::Array(items)) => {
                scopes.extend(items.iter().filter_map(Value::as_str).map(str::to_string));
            }
            _ => {}
        }
    }
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ISSUER: &str = "https://as.example";
    const RESOURCE: &str = "https://mcp.example/mcp";
    const NOW: u64 = 1_800_000_000;

    fn policy() -> TokenPolicy {
        TokenPolicy::new(ISSUER, RESOURCE, &["ES256".into()], 30, true).unwrap()
    }

    fn b64(value: &Value) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
    }

    fn good_claims() -> Value {
        json!({"iss": ISSUER, "aud": RESOURCE, "exp": NOW + 300, "iat": NOW - 10,
               "sub": "alice", "client_id": "app", "scope": "notes:read notes:write"})
    }

    /// Claims checks only: a token whose header and signature passed.
    fn claims_result(claims: Value) -> Result<VerifiedToken, TokenError> {
        check_claims(claims.as_object().unwrap(), &policy(), NOW)
    }

    #[test]
    fn a_policy_never_accepts_none_or_hmac() {
        let refused = |alg: &str| TokenPolicy::new(ISSUER, RESOURCE, &[alg.into()], 0, false);
        assert_eq!(
            refused("HS256").unwrap_err(),
            PolicyError::SymmetricAlgorithm("HS256".into())
        );
        assert!(matches!(
            refused("none").unwrap_err(),
            PolicyError::UnknownAlgorithm(_)
        ));
        assert_eq!(
            TokenPolicy::new(ISSUER, RESOURCE, &[], 0, false).unwrap_err(),
            PolicyError::NoAlgorithm
        );
    }

    #[test]
    fn tokens_with_a_refused_header_are_rejected_before_any_key_is_tried() {
        let claims = b64(&good_claims());
        let cases = [
            (
                json!({"alg": "none", "typ": "at+jwt"}),
                TokenError::AlgorithmRefused("none".into()),
            ),
            (
                json!({"alg": "HS256", "typ": "at+jwt"}),
                TokenError::AlgorithmRefused("HS256".into()),
            ),
            (
                json!({"alg": "RS256", "typ": "at+jwt"}),
                TokenError::AlgorithmRefused("RS256".into()),
            ),
            (
                json!({"alg": "ES256", "typ": "JWT"}),
                TokenError::WrongType(Some("JWT".into())),
            ),
            (json!({"alg": "ES256"}), TokenError::WrongType(None)),
            (
                json!({"alg": "ES256", "typ": "at+jwt", "kid": "k9"}),
                TokenError::UnknownKey(Some("k9".into())),
            ),
        ];
        for (header, expected) in cases {
            let token = format!("{}.{claims}.c2ln", b64(&header));
            assert_eq!(
                verify(&token, &[], &policy(), NOW).unwrap_err(),
                expected,
                "{header}"
            );
        }
    }

    #[test]
    fn tokens_that_are_not_jwts_are_malformed() {
        for token in ["", "abc", "a.b", "a.b.c.d", "!!.e30.c2ln", "e30.e30.c2ln"] {
            assert!(
                matches!(
                    verify(token, &[], &policy(), NOW),
                    Err(TokenError::Malformed(_))
                ),
                "{token:?}"
            );
        }
    }

    #[test]
    fn claims_that_do_not_bind_the_token_to_us_now_are_rejected() {
        let with = |key: &str, value: Value| {
            let mut claims = good_claims();
            claims[key] = value;
            claims
        };
        let without = |key: &str| {
            let mut claims = good_claims();
            claims.as_object_mut().unwrap().remove(key);
            claims
        };
        let cases = [
            (
                "another issuer",
                with("iss", json!("https://evil.example")),
                TokenError::WrongIssuer(Some("https://evil.example".into())),
            ),
            (
                "an issuer differing only by a slash",
                with("iss", json!(format!("{ISSUER}/"))),
                TokenError::WrongIssuer(Some(format!("{ISSUER}/"))),
            ),
            ("no issuer", without("iss"), TokenError::WrongIssuer(None)),
            (
                "another audience",
                with("aud", json!("https://other.example/mcp")),
                TokenError::WrongAudience("\"https://other.example/mcp\"".into()),
            ),
            (
                "an audience array without us",
                with("aud", json!(["https://a.example", "https://b.example"])),
                TokenError::WrongAudience(r#"["https://a.example","https://b.example"]"#.into()),
            ),
            (
                "no audience",
                without("aud"),
                TokenError::WrongAudience("null".into()),
            ),
            ("no expiry", without("exp"), TokenError::NoExpiry),
            (
                "expired beyond the skew",
                with("exp", json!(NOW - 31)),
                TokenError::Expired,
            ),
            (
                "not valid until beyond the skew",
                with("nbf", json!(NOW + 31)),
                TokenError::NotYetValid,
            ),
            (
                "issued beyond the skew in the future",
                with("iat", json!(NOW + 31)),
                TokenError::IssuedInFuture,
            ),
            (
                "a time that is not a number",
                with("exp", json!("tomorrow")),
                TokenError::Malformed("exp is not a time".into()),
            ),
        ];
        for (what, claims, expected) in cases {
            assert_eq!(claims_result(claims).unwrap_err(), expected, "{what}");
        }
        let mut anonymous = without("sub");
        anonymous.as_object_mut().unwrap().remove("client_id");
        assert_eq!(claims_result(anonymous).unwrap_err(), TokenError::NoSubject);
    }

    #[test]
    fn every_failed_check_has_a_rule_name_of_its_own() {
        let all = [
            TokenError::Malformed(String::new()),
            TokenError::AlgorithmRefused(String::new()),
            TokenError::WrongType(None),
            TokenError::UnknownKey(None),
            TokenError::BadSignature,
            TokenError::WrongIssuer(None),
            TokenError::WrongAudience(String::new()),
            TokenError::NoExpiry,
            TokenError::Expired,
            TokenError::NotYetValid,
            TokenError::IssuedInFuture,
            TokenError::NoSubject,
            TokenError::ReservedSubject,
        ];
        let names: BTreeSet<&str> = all.iter().map(TokenError::rule).collect();
        assert_eq!(names.len(), all.len(), "{names:?}");
        assert!(
            names
                .iter()
                .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_')),
            "{names:?}"
        );
    }

    #[test]
    fn claims_within_the_skew_and_audience_arrays_with_us_are_accepted() {
        let mut claims = good_claims();
        claims["aud"] = json!(["https://a.example", RESOURCE]);
        claims["exp"] = json!(NOW - 29);
        claims["nbf"] = json!(NOW + 29);
        claims["scp"] = json!(["books:read"]);
        let verified = claims_result(claims).unwrap();
        assert_eq!(verified.subject.as_deref(), Some("alice"));
        assert_eq!(verified.client_id.as_deref(), Some("app"));
        let scopes: Vec<_> = verified.scopes.iter().map(String::as_str).collect();
        assert_eq!(scopes, ["books:read", "notes:read", "notes:write"]);
    }

    #[test]
    fn a_subject_cannot_pass_for_a_client_only_token() {
        let mut claims = good_claims();
        claims["sub"] = json!("client:app");
        assert_eq!(
            claims_result(claims).unwrap_err(),
            TokenError::ReservedSubject
        );
        let mut client_only = good_claims();
        client_only.as_object_mut().unwrap().remove("sub");
        let verified = claims_result(client_only).unwrap();
        assert_eq!(
            (verified.subject, verified.client_id.as_deref()),
            (None, Some("app"))
        );
    }

    #[test]
    fn scopes_split_on_plain_spaces_only() {
        let cases = [
            ("notes:read notes:write", vec!["notes:read", "notes:write"]),
            (
                "  notes:read   notes:write ",
                vec!["notes:read", "notes:write"],
            ),
            // Other whitespace is part of a token: one literal token that grants nothing.
            ("notes:read\tnotes:write", vec!["notes:read\tnotes:write"]),
            (
                "notes:read\u{3000}notes:write",
                vec!["notes:read\u{3000}notes:write"],
            ),
            (
                "notes:read\u{a0}notes:write",
                vec!["notes:read\u{a0}notes:write"],
            ),
            ("notes:read\nnotes:write", vec!["notes:read\nnotes:write"]),
        ];
        for (scope, expected) in cases {
            let mut claims = good_claims();
            claims["scope"] = json!(scope);
            let got: Vec<String> = claims_result(claims).unwrap().scopes.into_iter().collect();
            assert_eq!(got, expected, "{scope:?}");
        }
    }
}
