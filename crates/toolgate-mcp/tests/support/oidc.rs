//! A real OAuth 2.1 authorization server for tests: npm `oidc-provider` (pinned by
//! `scripts/setup.sh`) run by `tests/oauth/provider.mjs` under the Node 22 that the script
//! installs, on 127.0.0.1. Include it with `#[path = "support/oidc.rs"] mod oidc;`.
//!
//! What the server is, as observed from oidc-provider 9.13.3:
//! - issuer `http://127.0.0.1:<port>` (no trailing slash); discovery at both
//!   `/.well-known/openid-configuration` and `/.well-known/oauth-authorization-server` (RFC 8414),
//!   `application/json; charset=utf-8`; `jwks_uri` is `<issuer>/jwks`, answered as
//!   `application/jwk-set+json; charset=utf-8`; the token endpoint is `<issuer>/token`.
//! - confidential clients `client-a`/`secret-a` and `client-b`/`secret-b` (client_credentials,
//!   every scope given to [`AuthServer::start`]); a public client `public-client` (authorization
//!   code + PKCE, redirect `http://127.0.0.1/callback`), unused by this module.
//! - a client_credentials token for one of the `resources` is an RS256 JWT, header
//!   `{"alg":"RS256","typ":"at+jwt","kid":<first key's kid>}`, claims `jti`, `sub` (= the
//!   client id: oidc-provider fills `sub` with the client id when there is no account), `iat`,
//!   `exp` (= `iat` + ttl), `scope` (the requested scopes the server knows, space-separated;
//!   absent when none is left), `client_id`, `iss` (the issuer) and `aud` (the resource, a
//!   string). A request without `resource` gets the first resource; an unknown resource is a
//!   400 `invalid_target`; an unknown scope is dropped silently, not refused.
//! - rotation ([`AuthServer::rotate`]) rewrites the JWKS file and `POST`s `/test/rotate`: the
//!   script builds a new oidc-provider `Provider` with the new keys (oidc-provider cannot swap
//!   its keystore live) and hands every later request to it on the same socket, so port and
//!   issuer stay. Tokens issued before stay valid JWTs; only the served JWKS changes.
//!
//! A missing Node or oidc-provider is a panic naming `scripts/setup.sh`, never a skipped test.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long the provider may take to print its issuer line.
const START_LIMIT: Duration = Duration::from_secs(20);
/// How long the provider runs at most, whatever happens to the test.
const MAX_SECONDS: u64 = 600;

// Where `scripts/setup.sh` put Node and the npm packages: one finder for every crate's tests.
#[path = "../../../toolgate/tests/common/node.rs"]
#[allow(dead_code)]
mod node_install;
use node_install::installed;
pub use node_install::{node, node_dir};

/// The provider script, after checking oidc-provider is installed.
pub fn provider_script() -> PathBuf {
    installed(
        node_dir().join("node_modules/oidc-provider/package.json"),
        "oidc-provider (npm)",
    );
    // Found from this file's own path (relative to the workspace root, two levels above any
    // crate), so that other crates' tests can include this module too.
    let here = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(file!());
    here.parent()
        .and_then(Path::parent)
        .expect("support/oidc.rs lives in a tests folder")
        .join("oauth/provider.mjs")
}

/// An RSA 2048 signing key made for one test (by Node's crypto, no network).
#[derive(Clone, Debug)]
pub struct TestKey {
    pub kid: String,
    /// The private JWK (`kty n e d p q dp dq qi`, with `kid`, `alg` RS256, `use` sig).
    pub private_jwk: Value,
    /// The same key as PKCS#8 PEM, e.g. for `jsonwebtoken::EncodingKey::from_rsa_pem`.
    pub private_pem: String,
    /// The public JWK (`kty n e kid alg use`).
    pub public_jwk: Value,
}

impl TestKey {
    /// A fresh key with key id `kid`.
    pub fn generate(kid: &str) -> TestKey {
        TestKey::generate_many(&[kid]).remove(0)
    }

    /// Fresh keys, one per key id, made by one Node process.
    pub fn generate_many(kids: &[&str]) -> Vec<TestKey> {
        let mut command = Command::new(node());
        command.arg(provider_script());
        for kid in kids {
            command.arg("--generate-key").arg(kid);
        }
        let output = command
            .stdin(Stdio::null())
            .output()
            .expect("node runs provider.mjs --generate-key");
        assert!(
            output.status.success(),
            "provider.mjs --generate-key failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let keys: Vec<Value> = serde_json::from_slice(&output.stdout).expect("a JSON key list");
        keys.into_iter()
            .map(|k| TestKey {
                kid: k["kid"].as_str().unwrap().to_owned(),
                private_pem: k["private_pem"].as_str().unwrap().to_owned(),
                private_jwk: k["private_jwk"].clone(),
                public_jwk: k["public_jwk"].clone(),
            })
            .collect()
    }
}

/// A running oidc-provider on 127.0.0.1; dropping it kills the process.
pub struct AuthServer {
    child: Child,
    /// Held open: the script exits when its stdin closes (e.g. the test process dies).
    stdin: Option<ChildStdin>,
    issuer: String,
    jwks_file: PathBuf,
    _dir: tempfile::TempDir,
    stderr: Arc<Mutex<String>>,
    http: reqwest::Client,
}

impl AuthServer {
    /// Starts a provider that issues tokens for `resources` (each one its own audience) with
    /// `scopes` allowed, signing with `keys[0]` and serving all of `keys`, access tokens living
    /// `ttl_secs`. Panics if it has not printed its issuer within 20 s.
    pub fn start(resources: &[&str], scopes: &[&str], keys: &[TestKey], ttl_secs: u64) -> Self {
        AuthServer::start_with(resources, scopes, keys, ttl_secs, &[])
    }

    /// As [`AuthServer::start`], with more `provider.mjs` options (`--registration`,
    /// `--redirect-uri URI`, ...).
    pub fn start_with(
        resources: &[&str],
        scopes: &[&str],
        keys: &[TestKey],
        ttl_secs: u64,
        extra: &[&str],
    ) -> Self {
        assert!(!resources.is_empty(), "at least one resource");
        let dir = tempfile::tempdir().unwrap();
        let jwks_file = dir.path().join("jwks.json");
        write_jwks(&jwks_file, keys);
        let mut command = Command::new(node());
        command
            .arg(provider_script())
            .arg("--node-dir")
            .arg(node_dir())
            .arg("--port")
            .arg("0")
            .arg("--jwks")
            .arg(&jwks_file)
            .arg("--scopes")
            .arg(scopes.join(" "))
            .arg("--ttl")
            .arg(ttl_secs.to_string())
            .arg("--max-seconds")
            .arg(MAX_SECONDS.to_string());
        for resource in resources {
            command.arg("--resource").arg(resource);
        }
        command.args(extra);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node starts provider.mjs");
        let stdin = child.stdin.take();

        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });

        let (tx, rx) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let issuer = serde_json::from_str::<Value>(&line)
                    .ok()
                    .and_then(|v| v["issuer"].as_str().map(str::to_owned));
                if let (Some(issuer), Some(tx)) = (issuer, tx.take()) {
                    let _ = tx.send(issuer);
                }
            }
        });
        let issuer = match rx.recv_timeout(START_LIMIT) {
            Ok(issuer) => issuer,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                std::thread::sleep(Duration::from_millis(50));
                panic!(
                    "provider.mjs printed no issuer ({e}); its stderr:\n{}",
                    stderr.lock().unwrap()
                );
            }
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        AuthServer {
            child,
            stdin,
            issuer,
            jwks_file,
            _dir: dir,
            stderr,
            http,
        }
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn issuer(&self) -> String {
        self.issuer.clone()
    }

    /// Where the public keys are served (`<issuer>/jwks`, as discovery says).
    pub fn jwks_uri(&self) -> String {
        format!("{}/jwks", self.issuer)
    }

    /// The token endpoint (`<issuer>/token`, as discovery says).
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer)
    }

    /// What the provider wrote to stderr so far (notices, warnings, errors).
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The discovery document at `/.well-known/openid-configuration`.
    pub async fn discovery(&self) -> Value {
        let url = format!("{}/.well-known/openid-configuration", self.issuer);
        self.get_json(&url).await
    }

    /// The public JWKS as the provider serves it.
    pub async fn jwks(&self) -> Value {
        self.get_json(&self.jwks_uri()).await
    }

    /// A client_credentials access token for `client_id` (HTTP Basic with `secret`) for
    /// `resource` with `scope` (space-separated); panics unless the provider issues one.
    pub async fn token(
        &self,
        client_id: &str,
        secret: &str,
        resource: &str,
        scope: &str,
    ) -> String {
        let (status, body) = self
            .token_response(client_id, secret, Some(resource), Some(scope))
            .await;
        assert_eq!(status, 200, "token request refused: {body}");
        body["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access_token in {body}"))
            .to_owned()
    }

    /// The status and JSON body of a client_credentials token request (for refusals:
    /// `invalid_target`, `invalid_client`, ...); `None` leaves the parameter out.
    pub async fn token_response(
        &self,
        client_id: &str,
        secret: &str,
        resource: Option<&str>,
        scope: Option<&str>,
    ) -> (u16, Value) {
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(resource) = resource {
            form.push(("resource", resource));
        }
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        let response = self
            .http
            .post(self.token_endpoint())
            .basic_auth(client_id, Some(secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_urlencoded(&form))
            .send()
            .await
            .expect("the token endpoint answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("token endpoint answered {status} with {text:?}"));
        (status, body)
    }

    /// Replaces the key set: `keys[0]` signs from now on, all of `keys` are served. Returns once
    /// the jwks_uri serves exactly these key ids (bounded, 5 s).
    pub async fn rotate(&self, keys: &[TestKey]) {
        write_jwks(&self.jwks_file, keys);
        let response = self
            .http
            .post(format!("{}/test/rotate", self.issuer))
            .send()
            .await
            .expect("the rotate endpoint answers");
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        assert_eq!(status, 200, "rotation refused: {body}");
        let want: Vec<&str> = keys.iter().map(|k| k.kid.as_str()).collect();
        let start = Instant::now();
        loop {
            let served = kids(&self.jwks().await);
            if served == want {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "after rotation the JWKS serves {served:?}, not {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn get_json(&self, url: &str) -> Value {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .expect("the provider answers");
        assert_eq!(response.status().as_u16(), 200, "GET {url}");
        response.json().await.expect("a JSON body")
    }
}

impl AuthServer {
    /// Stops the authorization server now (as if it went down); dropping it does too.
    pub fn stop(&mut self) {
        self.stdin.take();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The key ids of a JWKS, in order.
pub fn kids(jwks: &Value) -> Vec<String> {
    jwks["keys"]
        .as_array()
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k["kid"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The header and claims of a compact JWS, decoded without checking anything.
pub fn decode_unverified(jwt: &str) -> (Value, Value) {
    let mut parts = jwt.split('.');
    let mut part = || {
        let bytes = base64url_decode(parts.next().expect("a JWT has three parts"));
        serde_json::from_slice::<Value>(&bytes).expect("a JSON JWT part")
    };
    let header = part();
    let claims = part();
    (header, claims)
}

/// Base64url without padding (padding is tolerated), as in JWTs.
pub fn base64url_decode(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => panic!("not base64url: {text:?}"),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// `application/x-www-form-urlencoded` of `pairs`.
pub fn form_urlencoded(pairs: &[(&str, &str)]) -> String {
    fn encode(s: &str, out: &mut String) {
        for b in s.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                    out.push(char::from(b));
                }
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
    }
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        encode(k, &mut out);
        out.push('=');
        encode(v, &mut out);
    }
    out
}

fn write_jwks(path: &Path, keys: &[TestKey]) {
    assert!(!keys.is_empty(), "at least one key");
    let jwks = json!({"keys": keys.iter().map(|k| k.private_jwk.clone()).collect::<Vec<_>>()});
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, jwks.to_string()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}
