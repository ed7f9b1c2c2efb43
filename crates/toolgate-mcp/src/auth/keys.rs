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

/// The keys of one authorization server, refreshed on demand.
pub struct KeyCache {
    egress: Arc<Egress>,
    jwks_uri: String,
    min_refresh: Duration,
    max_age: Duration,
    state: Mutex<State>,
}

struct State {
    keys: Arc<Vec<PublicKey>>,
    fetched_at: Instant,
}

impl KeyCache {
    /// Discovers `issuer`'s metadata and fetches its keys now: a server that cannot check
    /// tokens does not start.
    pub async fn discover(
        egress: Arc<Egress>,
        issuer: &str,
        min_refresh: Duration,
        max_age: Duration,
    ) -> Result<KeyCache, KeyError> {
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
        let keys = fetch_keys(&egress, &jwks_uri).await?;
        Ok(KeyCache {
            egress,
            jwks_uri,
            min_refresh,
            max_age,
            state: Mutex::new(State {
                keys: Arc::new(keys),
                fetched_at: Instant::now(),
            }),
        })
    }

    pub fn jwks_uri(&self) -> &str {
        &self.jwks_uri
    }

    /// The keys held now, fetched again first when they are older than the maximum age.
    pub async fn current(&self) -> Result<Arc<Vec<PublicKey>>, KeyError> {
        let mut state = self.state.lock().await;
        if state.fetched_at.elapsed() >= self.max_age {
            state.fetched_at = Instant::now();
            state.keys = Arc::new(fetch_keys(&self.egress, &self.jwks_uri).await?);
        }
        Ok(Arc::clone(&state.keys))
    }

    /// The keys after fetching them again, if the last fetch is older than the minimum
    /// interval; else the keys held (`None` when they were not refreshed, so the caller knows
    /// nothing changed). Concurrent callers share one fetch.
    pub async fn refreshed(&self) -> Result<Option<Arc<Vec<PublicKey>>>, KeyError> {
        let mut state = self.state.lock().await;
        if state.fetched_at.elapsed() < self.min_refresh {
            return Ok(None);
        }
        // Counted from the attempt, so a failing server is not asked on every request either.
        state.fetched_at = Instant::now();
        let keys = fetch_keys(&self.egress, &self.jwks_uri).await?;
        state.keys = Arc::new(keys);
        Ok(Some(Arc::clone(&state.keys)))
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
