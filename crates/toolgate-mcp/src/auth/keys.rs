//! The authorization server's signing keys: its metadata (RFC 8414, or OpenID discovery) and
//! JWKS, fetched through the egress exit, cached, and fetched again when a token names a key id
//! the cache does not hold (at most once per [`KeyCache`]'s minimum interval) and when the
//! cached set is older than its maximum age, so that a key the server removed stops being
//! trusted.
//!
//! Guarantees: only signature keys of a kind the token checks support are kept (a symmetric
//! `oct` key, an encryption key or an unreadable entry is skipped, never guessed at); the
//! metadata is used only if its `issuer` is exactly the configured one (RFC 8414 section 3.3); a
//! failed fetch keeps the keys already held and is reported, so a token is never accepted
//! because a check could not be made.
//!
//! Fetching never blocks a request that can be checked with the keys held: the cache's lock is
//! held only to read or swap its state, and one fetch at a time runs outside it. A failed fetch
//! does not count as a refresh (keys past their maximum age stay refused) and starts a backoff
//! ([`FIRST_BACKOFF`] doubling to [`MAX_BACKOFF`]) during which the server is not asked again.
//! The issuer and the key-set URL must be `https` (plain `http` only on a loopback address).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use tokio::sync::Mutex;
use toolgate_egress::Egress;

use super::token::PublicKey;

/// Why the authorization server's keys could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("cannot fetch {url}: {reason}")]
    Fetch { url: String, reason: String },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url} is not a JSON document: {reason}")]
    NotJson { url: String, reason: String },
    #[error("the metadata at {url} names the issuer {found:?}, not {expected:?}")]
    IssuerMismatch {
        url: String,
        expected: String,
        found: Option<String>,
    },
    #[error("the metadata at {url} has no jwks_uri")]
    NoJwksUri { url: String },
    #[error("the key set at {url} holds no usable signature key")]
    NoKeys { url: String },
    #[error("the {what} {url} is refused: {reason}")]
    Insecure {
        what: String,
        url: String,
        reason: String,
    },
}

/// The signature keys of a JWKS document; entries that cannot be used are skipped.
pub fn keys_of(jwks: &Value) -> Vec<PublicKey> {
    let Some(entries) = jwks.get("keys").and_then(Value::as_array) else {
        return Vec::new();
    };
    entries.iter().filter_map(public_key).collect()
}

fn public_key(entry: &Value) -> Option<PublicKey> {
    // Parsed one by one, so that one key of an unknown kind does not hide the others.
    let jwk: Jwk = serde_json::from_value(entry.clone()).ok()?;
    if matches!(
        jwk.algorithm,
        jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_)
    ) {
        return None;
    }
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    let alg = match &jwk.common.key_algorithm {
        None => None,
        // A key for encryption (RSA-OAEP, ...) parses as no signing algorithm: skipped.
        Some(key_algorithm) => Some(
            serde_json::to_value(key_algorithm)
                .ok()?
                .as_str()?
                .parse::<Algorithm>()
                .ok()?,
        ),
    };
    let key = DecodingKey::from_jwk(&jwk).ok()?;
    let family = match &jwk.algorithm {
        jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => jsonwebtoken::AlgorithmFamily::Rsa,
        jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => {
            jsonwebtoken::AlgorithmFamily::Ec
        }
        jsonwebtoken::jwk::AlgorithmParameters::OctetKeyPair(_) => {
            jsonwebtoken::AlgorithmFamily::Ed
        }
        // Symmetric keys, and kinds jsonwebtoken may add later: never used.
        _ => return None,
    };
    Some(PublicKey {
        kid: jwk.common.key_id.clone(),
        alg,
        family,
        key,
    })
}

/// Where the metadata of `issuer` may be, in the order tried: RFC 8414 (with the issuer's path
/// after the well-known segment), then OpenID discovery.
pub fn metadata_urls(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let mut urls = Vec::new();
    if let Ok(url) = url::Url::parse(trimmed) {
        let path = url.path().trim_end_matches('/');
        let origin = url.origin().ascii_serialization();
        urls.push(format!(
            "{origin}/.well-known/oauth-authorization-server{path}"
        ));
    }
    urls.push(format!("{trimmed}/.well-known/openid-configuration"));
    urls
}

/// The shortest wait after a failed fetch before the key set is asked for again; doubled
/// after each further failure up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between two fetches while the key set keeps failing.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The keys of one authorization server, refreshed on demand.
///
/// The state is held under a lock only to read or swap it, never across a fetch: a request
/// whose token names a key already held is checked while a fetch is under way. One fetch is in
/// flight at a time (the fetch lock); callers that need one while it runs wait for it and use
/// its result instead of fetching again.
pub struct KeyCache {
    egress: Arc<Egress>,
    jwks_uri: String,
    min_refresh: Duration,
    max_age: Duration,
    state: std::sync::Mutex<State>,
    fetching: Mutex<()>,
}

#[derive(Clone)]
struct State {
    keys: Arc<Vec<PublicKey>>,
    /// When the keys held were fetched (successful fetches only: a failure does not make old
    /// keys look fresh).
    fetched_at: Instant,
    /// Counts finished fetches, successful or not, so that a caller that waited for another's
    /// fetch knows it finished.
    generation: u64,
    /// The last fetch failed: when, why, and how long to wait before asking again.
    failure: Option<Failure>,
}

#[derive(Clone)]
struct Failure {
    at: Instant,
    error: KeyError,
    backoff: Duration,
}

/// Why keys are wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Any request: the keys held, unless older than the maximum age.
    Current,
    /// A token names a key id the set does not hold.
    UnknownKey,
}

/// What to do about a [`Need`], decided from the cache's clock alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Use the keys held.
    UseHeld,
    /// Nothing new may be fetched yet (an unknown key id within the minimum interval): the
    /// token is checked against the keys held, and fails as it did.
    NotYet,
    /// The last fetch failed and its backoff has not passed: refused without asking again.
    Backoff(KeyError),
    /// Fetch the key set.
    Fetch,
}

/// The plan for `need` given how long ago the keys were fetched (`age`) and the last failure
/// (`failed`: its age, its error and its backoff). Pure, so the rules are tested as a table.
pub fn plan(
    need: Need,
    age: Duration,
    failed: Option<(Duration, &KeyError, Duration)>,
    min_refresh: Duration,
    max_age: Duration,
) -> Plan {
    let stale = age >= max_age;
    let wanted = match need {
        Need::Current => stale,
        Need::UnknownKey => stale || age >= min_refresh,
    };
    if !wanted {
        return match need {
            Need::Current => Plan::UseHeld,
            Need::UnknownKey => Plan::NotYet,
        };
    }
    match failed {
        Some((since, error, backoff)) if since < backoff => {
            if stale {
                // Old keys are not trusted past their age: refused until a fetch succeeds.
                Plan::Backoff(error.clone())
            } else {
                match need {
                    Need::Current => Plan::UseHeld,
                    Need::UnknownKey => Plan::Backoff(error.clone()),
                }
            }
        }
        _ => Plan::Fetch,
    }
}

/// The wait after a failure that follows one with `previous` backoff (none: the first).
pub fn next_backoff(previous: Option<Duration>) -> Duration {
    match previous {
        None => FIRST_BACKOFF,
        Some(previous) => previous.saturating_mul(2).min(MAX_BACKOFF),
    }
}

impl KeyCache {
    /// Discovers `issuer`'s metadata and fetches its keys now: a server that cannot check
    /// tokens does not start. The issuer and the key-set URL must be `https`, or `http` on a
    /// loopback address (tests).
    pub async fn discover(
        egress: Arc<Egress>,
        issuer: &str,
        min_refresh: Duration,
        max_age: Duration,
    ) -> Result<KeyCache, KeyError> {
        refuse_plain_http("issuer", issuer)?;
        let mut last = None;
        let mut metadata = None;
        for url in metadata_urls(issuer) {
            match fetch_json(&egress, &url).await {
                Ok(document) => {
                    metadata = Some((url, document));
                    break;
                }
                Err(error) => last = Some(error),
            }
        }
        let Some((url, metadata)) = metadata else {
            return Err(last.unwrap_or(KeyError::Fetch {
                url: issuer.into(),
                reason: "no metadata location".into(),
            }));
        };
        let found = metadata.get("issuer").and_then(Value::as_str);
        if found != Some(issuer) {
            return Err(KeyError::IssuerMismatch {
                url,
                expected: issuer.into(),
                found: found.map(str::to_string),
            });
        }
        let jwks_uri = metadata
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or(KeyError::NoJwksUri { url })?
            .to_string();
        refuse_plain_http("key set (jwks_uri)", &jwks_uri)?;
        let keys = fetch_keys(&egress, &jwks_uri).await?;
        Ok(KeyCache {
            egress,
            jwks_uri,
            min_refresh,
            max_age,
            state: std::sync::Mutex::new(State {
                keys: Arc::new(keys),
                fetched_at: Instant::now(),
                generation: 0,
                failure: None,
            }),
            fetching: Mutex::new(()),
        })
    }

    pub fn jwks_uri(&self) -> &str {
        &self.jwks_uri
    }

    /// The keys held now, fetched again first when they are older than the maximum age.
    pub async fn current(&self) -> Result<Arc<Vec<PublicKey>>, KeyError> {
        match self.get(Need::Current).await? {
            Some(keys) => Ok(keys),
            None => Ok(self.snapshot().keys),
        }
    }

    /// The keys after fetching them again, if the last fetch is older than the minimum
    /// interval; else `None` (nothing changed, so the caller's answer stands). Concurrent
    /// callers share one fetch; a failed fetch is not repeated before its backoff passes.
    pub async fn refreshed(&self) -> Result<Option<Arc<Vec<PublicKey>>>, KeyError> {
        self.get(Need::UnknownKey).await
    }

    fn snapshot(&self) -> State {
        // A poisoned lock still holds a consistent state: every write is one assignment.
        match self.state.lock() {
            Ok(state) => state.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn plan_now(&self, need: Need) -> (Plan, u64) {
        let state = self.snapshot();
        let failed = state
            .failure
            .as_ref()
            .map(|f| (f.at.elapsed(), &f.error, f.backoff));
        let plan = plan(
            need,
            state.fetched_at.elapsed(),
            failed,
            self.min_refresh,
            self.max_age,
        );
        (plan, state.generation)
    }

    /// `Some(keys)` when a fetch (this caller's or one it waited for) brought keys, `None`
    /// when the keys held stand.
    async fn get(&self, need: Need) -> Result<Option<Arc<Vec<PublicKey>>>, KeyError> {
        let (first, seen) = self.plan_now(need);
        match first {
            Plan::UseHeld | Plan::NotYet => return Ok(None),
            Plan::Backoff(error) => return Err(error),
            Plan::Fetch => {}
        }
        let _fetching = self.fetching.lock().await;
        let state = self.snapshot();
        if state.generation != seen {
            // Another caller's fetch finished while this one waited: its result is the answer.
            return match state.failure {
                Some(failure) => Err(failure.error),
                None => Ok(Some(state.keys)),
            };
        }
        self.fetch_now().await
    }

    /// Fetches the key set (the caller holds the fetch lock) and records the outcome.
    async fn fetch_now(&self) -> Result<Option<Arc<Vec<PublicKey>>>, KeyError> {
        let fetched = fetch_keys(&self.egress, &self.jwks_uri).await;
        let mut state = match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        state.generation = state.generation.wrapping_add(1);
        match fetched {
            Ok(keys) => {
                state.keys = Arc::new(keys);
                state.fetched_at = Instant::now();
                state.failure = None;
                Ok(Some(Arc::clone(&state.keys)))
            }
            Err(error) => {
                // The refresh clock stays where the last success left it; only the backoff
                // grows, so a failing server is neither hammered nor trusted longer.
                let backoff = next_backoff(state.failure.as_ref().map(|f| f.backoff));
                state.failure = Some(Failure {
                    at: Instant::now(),
                    error: error.clone(),
                    backoff,
                });
                Err(error)
            }
        }
    }
}

/// Refuses a URL that is not `https`, unless it is `http` on a loopback address (a test's
/// authorization server on this machine): keys fetched in the clear can be swapped on the way.
pub fn refuse_plain_http(what: &str, url: &str) -> Result<(), KeyError> {
    let parsed = url::Url::parse(url).map_err(|e| KeyError::Insecure {
        what: what.into(),
        url: url.into(),
        reason: format!("not a URL ({e})"),
    })?;
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if is_loopback_host(&parsed) => Ok(()),
        "http" => Err(KeyError::Insecure {
            what: what.into(),
            url: url.into(),
            reason: "keys fetched over plain http can be swapped on the way: use https (plain \
                     http is accepted only on a loopback address, for tests)"
                .into(),
        }),
        scheme => Err(KeyError::Insecure {
            what: what.into(),
            url: url.into(),
            reason: format!("the scheme {scheme:?} is not https"),
        }),
    }
}

/// Whether `url` names this machine by a loopback address (`localhost` included).
pub fn is_loopback_host(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

async fn fetch_keys(egress: &Egress, url: &str) -> Result<Vec<PublicKey>, KeyError> {
    let keys = keys_of(&fetch_json(egress, url).await?);
    if keys.is_empty() {
        return Err(KeyError::NoKeys { url: url.into() });
    }
    Ok(keys)
}

async fn fetch_json(egress: &Egress, url: &str) -> Result<Value, KeyError> {
    let page = egress.get(url).await.map_err(|e| KeyError::Fetch {
        url: url.into(),
        reason: e.to_string(),
    })?;
    if page.status != 200 {
        return Err(KeyError::Status {
            url: url.into(),
            status: page.status,
        });
    }
    serde_json::from_str(&page.body).map_err(|e| KeyError::NotJson {
        url: url.into(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // A real P-256 public key (RFC 7517 appendix A.1's example).
    fn ec_key(extra: Value) -> Value {
        let mut key = json!({"kty": "EC", "crv": "P-256",
            "x": "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4",
            "y": "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"});
        for (k, v) in extra.as_object().unwrap() {
            key[k] = v.clone();
        }
        key
    }

    #[test]
    fn keys_that_cannot_check_a_signature_are_never_kept() {
        let jwks = json!({"keys": [
            ec_key(json!({"kid": "sig", "use": "sig", "alg": "ES256"})),
            ec_key(json!({"kid": "enc", "use": "enc"})),
            ec_key(json!({"kid": "oaep", "alg": "RSA-OAEP"})),
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "XYZ", "kid": "alien"},
            "not a key",
        ]});
        let kept: Vec<_> = keys_of(&jwks).into_iter().map(|k| k.kid).collect();
        assert_eq!(kept, [Some("sig".to_string())]);
        assert!(keys_of(&json!({"nokeys": []})).is_empty());
    }

    #[test]
    fn a_failed_fetch_neither_extends_trust_nor_hammers_the_server() {
        let s = Duration::from_secs;
        let (min, max) = (s(30), s(300));
        let down = KeyError::Status {
            url: "u".into(),
            status: 500,
        };
        let cases = [
            // (what it prevents, need, age, failure (since, backoff), expected)
            (
                "fresh keys are used",
                Need::Current,
                s(10),
                None,
                Plan::UseHeld,
            ),
            (
                "stale keys are refetched",
                Need::Current,
                s(300),
                None,
                Plan::Fetch,
            ),
            (
                "a failure does not make stale keys usable",
                Need::Current,
                s(400),
                Some((s(0), s(1))),
                Plan::Backoff(down.clone()),
            ),
            (
                "a failure in backoff is not retried on every request",
                Need::UnknownKey,
                s(40),
                Some((s(0), s(4))),
                Plan::Backoff(down.clone()),
            ),
            (
                "a failure past its backoff is retried at once",
                Need::UnknownKey,
                s(40),
                Some((s(5), s(4))),
                Plan::Fetch,
            ),
            (
                "stale keys are retried once the backoff passed",
                Need::Current,
                s(400),
                Some((s(2), s(1))),
                Plan::Fetch,
            ),
            (
                "a failing server does not stall requests with fresh keys",
                Need::Current,
                s(40),
                Some((s(0), s(60))),
                Plan::UseHeld,
            ),
            (
                "unknown key ids do not fetch within the minimum interval",
                Need::UnknownKey,
                s(10),
                None,
                Plan::NotYet,
            ),
            (
                "an unknown key id fetches after it",
                Need::UnknownKey,
                s(30),
                None,
                Plan::Fetch,
            ),
        ];
        for (what, need, age, failed, expected) in cases {
            let failed = failed.map(|(since, backoff)| (since, &down, backoff));
            assert_eq!(plan(need, age, failed, min, max), expected, "{what}");
        }
        assert_eq!(next_backoff(None), FIRST_BACKOFF);
        assert_eq!(next_backoff(Some(s(1))), s(2));
        assert_eq!(next_backoff(Some(s(50))), MAX_BACKOFF);
    }

    #[test]
    fn keys_fetched_in_the_clear_from_another_host_are_refused() {
        let cases = [
            ("https://as.example", true),
            ("http://127.0.0.1:4000", true),
            ("http://[::1]:4000/jwks", true),
            ("http://localhost:4000", true),
            ("http://as.example", false),
            ("http://10.0.0.5/jwks", false),
            ("http://127.0.0.1.evil.example/jwks", false),
            ("ftp://as.example", false),
            ("not a url", false),
        ];
        for (url, allowed) in cases {
            assert_eq!(refuse_plain_http("issuer", url).is_ok(), allowed, "{url}");
        }
        let refused = refuse_plain_http("issuer", "http://as.example").unwrap_err();
        assert!(refused.to_string().contains("https"), "{refused}");
    }

    #[test]
    fn metadata_is_looked_for_where_rfc_8414_and_openid_put_it() {
        assert_eq!(
            metadata_urls("https://as.example"),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            metadata_urls("https://as.example/tenant1"),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ]
        );
    }
}
