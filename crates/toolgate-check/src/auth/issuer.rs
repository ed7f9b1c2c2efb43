//! The suite's own authorization server on 127.0.0.1: two RSA 2048 keys made at run time (the
//! published one, kid `suite-key`, and a stranger's, kid `stranger-key`, never published), its
//! RFC 8414 metadata at `/.well-known/oauth-authorization-server` and its JWKS at `/jwks`
//! (served over HTTP/1.1 by hyper), and the tokens the cases describe ([`Issuer::mint`]).
//!
//! Guarantees: the key set holds only the published key's public half; every answer is counted
//! (the report's figures say how often the resource servers fetched the keys); the server ends
//! when [`Issuer`] is stopped or dropped.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use jsonwebtoken::{Algorithm, EncodingKey};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::traits::PublicKeyParts;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;

use super::case::{Audience, JwtPlan, OTHER_KID, RIGHT_KID, Signer};
use crate::CheckError;

const SUITE: &str = "auth";

/// An RSA signing key and its public JWK.
pub struct KeyPair {
    pub kid: &'static str,
    encoding: EncodingKey,
    pub public_jwk: Value,
}

impl KeyPair {
    /// A fresh RSA 2048 key with key id `kid`, from the system's random source.
    pub fn generate(kid: &'static str) -> Result<KeyPair, String> {
        let key = rsa::PrivateKey::new(&mut getrandom::SysRng, 2048)
            .map_err(|e| format!("cannot make an RSA key: {e}"))?;
        let der = key
            .to_pkcs1_der()
            .map_err(|e| format!("cannot encode the RSA key: {e}"))?;
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let public_jwk = json!({
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": kid,
            "n": b64(&key.n().to_be_bytes_trimmed_vartime()),
            "e": b64(&key.e().to_be_bytes_trimmed_vartime()),
        });
        Ok(KeyPair {
            kid,
            encoding: EncodingKey::from_rsa_der(der.as_bytes()),
            public_jwk,
        })
    }
}

/// Where the `$names` of a case's claims point.
#[derive(Debug, Clone)]
pub struct Names {
    pub issuer: String,
    pub main: String,
    pub second: String,
}

impl Names {
    fn replace(&self, text: &str) -> String {
        text.replace("$issuer", &self.issuer)
            .replace("$main", &self.main)
            .replace("$second", &self.second)
    }
}

/// The running authorization server.
pub struct Issuer {
    pub issuer: String,
    pub jwks_uri: String,
    right: KeyPair,
    other: KeyPair,
    counts: Arc<Counts>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
}

/// How many times each document was served.
#[derive(Debug, Default)]
pub struct Counts {
    pub metadata: AtomicUsize,
    pub jwks: AtomicUsize,
    pub other: AtomicUsize,
}

impl Issuer {
    /// Makes the keys (both at once, on two threads) and serves the metadata and key set on
    /// a fresh 127.0.0.1 port.
    pub async fn start() -> Result<Issuer, CheckError> {
        let (right, other) = std::thread::scope(|scope| {
            let other = scope.spawn(|| KeyPair::generate(OTHER_KID));
            let right = KeyPair::generate(RIGHT_KID);
            let other = other
                .join()
                .unwrap_or_else(|_| Err("the key thread failed".into()));
            (right, other)
        });
        let (right, other) = (
            right.map_err(|e| CheckError::setup(SUITE, e))?,
            other.map_err(|e| CheckError::setup(SUITE, e))?,
        );
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| CheckError::setup(SUITE, format!("cannot listen on 127.0.0.1: {e}")))?;
        let address = listener
            .local_addr()
            .map_err(|e| CheckError::setup(SUITE, e))?;
        let issuer = format!("http://{address}");
        let jwks_uri = format!("{issuer}/jwks");
        let metadata = json!({
            "issuer": issuer,
            "jwks_uri": jwks_uri,
            "scopes_supported": ["notes:read", "notes:write"],
            "response_types_supported": ["code"],
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["none"],
        });
        let jwks = json!({"keys": [right.public_jwk.clone()]});
        let counts = Arc::new(Counts::default());
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let served = tokio::spawn(serve(
            listener,
            Arc::new(Documents { metadata, jwks }),
            Arc::clone(&counts),
            stopped,
        ));
        Ok(Issuer {
            issuer,
            jwks_uri,
            right,
            other,
            counts,
            stop: Some(stop),
            served: Some(served),
        })
    }

    pub fn port(&self) -> u16 {
        url_port(&self.issuer)
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Stops serving and waits (briefly) for the server to end.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), served).await;
        }
    }

    /// The token `plan` describes, made at `now` for servers whose leeway is `leeway`.
    pub fn mint(
        &self,
        plan: &JwtPlan,
        names: &Names,
        now: u64,
        leeway: u64,
    ) -> Result<String, String> {
        let mut header = Map::new();
        header.insert("alg".into(), Value::String(plan.alg.clone()));
        if let Some(typ) = &plan.typ {
            header.insert("typ".into(), Value::String(typ.clone()));
        }
        if let Some(kid) = &plan.kid {
            header.insert("kid".into(), Value::String(kid.clone()));
        }
        let mut claims = Map::new();
        let mut text = |name: &str, value: &Option<String>| {
            if let Some(value) = value {
                claims.insert(name.into(), Value::String(names.replace(value)));
            }
        };
        text("iss", &plan.iss);
        text("sub", &plan.sub);
        text("client_id", &plan.client_id);
        text("scope", &plan.scope);
        match &plan.aud {
            None => {}
            Some(Audience::One(one)) => {
                claims.insert("aud".into(), Value::String(names.replace(one)));
            }
            Some(Audience::Many(many)) => {
                let all = many.iter().map(|a| Value::String(names.replace(a)));
                claims.insert("aud".into(), Value::Array(all.collect()));
            }
        }
        for (name, time) in [("iat", plan.iat), ("nbf", plan.nbf), ("exp", plan.exp)] {
            if let Some(time) = time {
                claims.insert(name.into(), Value::from(time.at(now, leeway)));
            }
        }
        let part = |value: &Map<String, Value>| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Value::Object(value.clone()).to_string())
        };
        let message = format!("{}.{}", part(&header), part(&claims));
        let algorithm = || {
            plan.alg
                .parse::<Algorithm>()
                .map_err(|e| format!("alg {:?}: {e}", plan.alg))
        };
        let sign = |key: &EncodingKey| {
            jsonwebtoken::crypto::sign(message.as_bytes(), key, algorithm()?)
                .map_err(|e| format!("cannot sign with {}: {e}", plan.alg))
        };
        Ok(match plan.sign {
            Signer::Right => format!("{message}.{}", sign(&self.right.encoding)?),
            Signer::Other => format!("{message}.{}", sign(&self.other.encoding)?),
            Signer::None => format!("{message}."),
            Signer::HmacPublic => {
                let secret = EncodingKey::from_secret(self.right.public_jwk.to_string().as_bytes())
                    .map_err(|e| format!("cannot make the HMAC key: {e}"))?;
                format!("{message}.{}", sign(&secret)?)
            }
            Signer::Tampered => {
                let signature = sign(&self.right.encoding)?;
                claims.insert("sub".into(), Value::String("mallory".into()));
                format!("{}.{}.{signature}", part(&header), part(&claims))
            }
        })
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn url_port(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or(0)
}

struct Documents {
    metadata: Value,
    jwks: Value,
}

async fn serve(
    listener: TcpListener,
    documents: Arc<Documents>,
    counts: Arc<Counts>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let documents = Arc::clone(&documents);
        let counts = Arc::clone(&counts);
        let service = hyper::service::service_fn(move |request: http::Request<_>| {
            let answer = answer(request.uri().path(), &documents, &counts);
            async move { Ok::<_, Infallible>(answer) }
        });
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            // A connection the client drops ends here; each answer is complete in itself.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(30), connection).await;
        });
    }
}

fn answer(path: &str, documents: &Documents, counts: &Counts) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/.well-known/oauth-authorization-server" => {
            counts.metadata.fetch_add(1, Ordering::Relaxed);
            (
                StatusCode::OK,
                "application/json",
                documents.metadata.to_string(),
            )
        }
        "/jwks" => {
            counts.jwks.fetch_add(1, Ordering::Relaxed);
            (
                StatusCode::OK,
                "application/jwk-set+json",
                documents.jwks.to_string(),
            )
        }
        _ => {
            counts.other.fetch_add(1, Ordering::Relaxed);
            (
                StatusCode::NOT_FOUND,
                "application/json",
                json!({"error": "not_found"}).to_string(),
            )
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}
