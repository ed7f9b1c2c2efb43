//! The HTTP server as an OAuth 2.1 resource server, against a real authorization server on
//! 127.0.0.1 (npm oidc-provider, started by `support/oidc.rs`): tokens it issues, and tokens
//! the tests forge with its own signing key (so that only the one claim under test is wrong).
//! Each test is named after what it prevents; a refused request must also leave no trace of a
//! call, and no token may appear in the trace the server wrote.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/oidc.rs"]
mod oidc;
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use oidc::{AuthServer, TestKey};
use serde_json::{Value, json};
use toolgate_core::Principal;
use toolgate_core::trace::JsonlTrace;
use toolgate_egress::EgressConfig;
use toolgate_mcp::auth::{AUTH_CONTENT_TYPES, AuthConfig, ResourceServer};
use toolgate_mcp::http::{Access, serve_http_with};
use toolgate_mcp::{HttpLimits, McpServer};
use toolgate_wiring::{ExitsConfig, Seat, Store, StoreKind, ToolsetName};

const OTHER_RESOURCE: &str = "http://127.0.0.1:1/mcp";

struct Env {
    auth: AuthServer,
    url: String,
    resource: String,
    keys: Vec<TestKey>,
    trace: std::path::PathBuf,
    http: reqwest::Client,
    _stop: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

/// A notes server whose `notes:read` scope grants searching and reading, `notes:write` the
/// whole toolset; the authorization server signs with `keys[0]`.
async fn start(keys: Vec<TestKey>, max_age_secs: u64) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let resource = format!("http://{}/mcp", listener.local_addr().unwrap());
    let auth = AuthServer::start(
        &[&resource, OTHER_RESOURCE],
        &["notes:read", "notes:write"],
        &keys[..1],
        300,
    );
    let issuer = auth.issuer();
    let as_port = url::Url::parse(&issuer).unwrap().port().unwrap();

    let trace_path = dir.path().join("trace.jsonl");
    let trace: Arc<dyn toolgate_core::trace::TraceSink> =
        Arc::new(JsonlTrace::create(&trace_path).unwrap());
    let store = Store::open_or_init(StoreKind::Notes, &dir.path().join("notes.sqlite")).unwrap();
    let seat = Seat::new(Principal::local("local-user", &[])).with_trace(Arc::clone(&trace));
    let exits = ExitsConfig::new(EgressConfig::default(), None);
    let ready = toolgate_wiring::dispatcher(ToolsetName::Notes, &store, &exits, seat).unwrap();
    let server = McpServer::new(ready, "mcp-oauth-test");
    let tools: Vec<String> = server.tools().iter().map(|t| t.name.to_string()).collect();

    let mut scopes = BTreeMap::new();
    scopes.insert(
        "notes:read".to_string(),
        vec!["notes_search".to_string(), "notes_get".to_string()],
    );
    scopes.insert("notes:write".to_string(), vec!["notes".to_string()]);
    let mut config = AuthConfig::new(&issuer, &resource, scopes);
    config.clock_skew_secs = 5;
    config.jwks_min_refresh_secs = 0;
    config.jwks_max_age_secs = max_age_secs;
    // The authorization server is on this machine: allowed explicitly, as a test.
    let allowlist = support::loopback_http_allowlist(&[as_port]);
    let egress = toolgate_wiring::ExitsConfig::new(allowlist.clone(), None)
        .egress_answering(&AUTH_CONTENT_TYPES, Arc::clone(&trace))
        .unwrap();
    let resource_server = ResourceServer::start(&config, "notes", &tools, egress)
        .await
        .unwrap()
        .with_trace(Arc::clone(&trace));

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve_http_with(
        server,
        listener,
        HttpLimits::default(),
        Access::OAuth(Arc::new(resource_server)),
        async {
            let _ = stopped.await;
        },
    ));
    Env {
        auth,
        url: resource.clone(),
        resource,
        keys,
        trace: trace_path,
        http: support::http(),
        _stop: stop,
        _dir: dir,
    }
}

impl Env {
    async fn token(&self, client: &str, scope: &str) -> String {
        let secret = format!("secret-{}", client.trim_start_matches("client-"));
        self.auth
            .token(client, &secret, &self.resource, scope)
            .await
    }

    /// A token signed with `key` whose claims are good ones with `change` applied.
    fn forged(&self, key: &TestKey, change: impl FnOnce(&mut Value)) -> String {
        let now = unix_now();
        let mut claims = json!({
            "iss": self.auth.issuer(), "aud": self.resource, "sub": "mallory",
            "client_id": "client-a", "scope": "notes:read notes:write",
            "iat": now, "exp": now + 300,
        });
        change(&mut claims);
        let mut header = Header::new(Algorithm::RS256);
        header.typ = Some("at+jwt".into());
        header.kid = Some(key.kid.clone());
        let signing = EncodingKey::from_rsa_pem(key.private_pem.as_bytes()).unwrap();
        jsonwebtoken::encode(&header, &claims, &signing).unwrap()
    }

    /// A 2026-07-28 `tools/call` with `token` (none when `None`): status, the
    /// `WWW-Authenticate` header and the JSON-RPC message.
    async fn call(
        &self,
        token: Option<&str>,
        tool: &str,
        arguments: Value,
        extra: Value,
    ) -> (u16, String, Value) {
        let message = support::tools_call(1, tool, arguments, extra);
        let mut request = support::post(
            &self.http,
            &self.url,
            "tools/call",
            Some(tool),
            message.to_string(),
        );
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = response.text().await.unwrap();
        (status, challenge, support::message_of(&body))
    }

    async fn list_tools(&self, token: &str) -> Vec<String> {
        let message = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                             "params": {"_meta": support::modern_meta(false)}});
        let response = support::post(
            &self.http,
            &self.url,
            "tools/list",
            None,
            message.to_string(),
        )
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), 200);
        let message = support::message_of(&response.text().await.unwrap());
        message["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Whether a note titled `title` exists, asked with a good token.
    async fn has_note(&self, title: &str) -> bool {
        let token = self.token("client-a", "notes:read").await;
        let (status, _, message) = self
            .call(
                Some(&token),
                "notes_search",
                json!({"query": title}),
                json!({}),
            )
            .await;
        assert_eq!(status, 200, "{message}");
        // The result echoes the query; a found note shows as its title field.
        message["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(&format!("\"title\":{}", json!(title)))
    }

    /// A POST into the 2025-11-25 session `session`, with `token`.
    fn session_post(&self, token: &str, session: &str, body: &Value) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", session)
            .bearer_auth(token)
            .body(body.to_string())
    }

    /// Opens a 2025-11-25 session with `token` (a host that can ask its user): its id.
    async fn open_session(&self, token: &str) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "raw", "version": "0"}}});
        let response = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .bearer_auth(token)
            .body(init.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let session = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let _ = response.text().await.unwrap();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = self
            .session_post(token, &session, &initialized)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
        session
    }

    fn trace_text(&self) -> String {
        std::fs::read_to_string(&self.trace).unwrap()
    }

    /// The last `auth` decision the server traced.
    fn last_auth(&self) -> Value {
        self.trace_text()
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["event"] == "auth")
            .expect("an auth line in the trace")
    }

    fn assert_no_token_written(&self, tokens: &[&str]) {
        let trace = self.trace_text();
        for token in tokens {
            // A token's signature alone identifies it.
            let signature = token.rsplit('.').next().unwrap();
            assert!(
                signature.is_empty() || !trace.contains(signature),
                "a token is in the trace"
            );
            assert!(!trace.contains(token), "a token is in the trace");
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn create(title: &str) -> Value {
    json!({"title": title, "body": "written under OAuth"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_token_is_told_where_the_metadata_is_and_runs_nothing() {
    let env = start(TestKey::generate_many(&["k1"]), 300).await;
    let (status, challenge, _) = env
        .call(None, "notes_create", create("no token"), json!({}))
        .await;
    assert_eq!(status, 401);
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains("scope=\"notes:read notes:write\""),
        "{challenge}"
    );
    let metadata_url = challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    let origin = env.url.trim_end_matches("/mcp");
    assert_eq!(
        metadata_url,
        format!("{origin}/.well-known/oauth-protected-resource/mcp")
    );
    for url in [
        metadata_url.clone(),
        format!("{origin}/.well-known/oauth-protected-resource"),
    ] {
        let metadata: Value = env
            .http
            .get(&url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(metadata["resource"], env.resource, "{url}");
        assert_eq!(
            metadata["authorization_servers"],
            json!([env.auth.issuer()])
        );
        assert_eq!(
            metadata["scopes_supported"],
            json!(["notes:read", "notes:write"])
        );
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }
    assert!(!env.has_note("no token").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_token_runs_the_call_as_its_own_principal() {
    let env = start(TestKey::generate_many(&["k1"]), 300).await;
    let token = env.token("client-a", "notes:read notes:write").await;
    let (status, _, message) = env
        .call(
            Some(&token),
            "notes_create",
            create("good token"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{message}");
    assert_eq!(message["result"]["isError"], false, "{message}");
    assert!(env.has_note("good token").await);
    let trace = env.trace_text();
    assert!(
        trace.contains("\"client-a\""),
        "the call ran as the token's subject"
    );
    env.assert_no_token_written(&[&token]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_that_are_not_for_us_or_not_genuine_run_nothing() {
    let keys = TestKey::generate_many(&["k1", "k9"]);
    let env = start(keys.clone(), 300).await;
    let (ours, stranger) = (&keys[0], &keys[1]);
    let now = unix_now();
    let genuine = env.token("client-a", "notes:read notes:write").await;
    let for_another_resource = env
        .auth
        .token("client-a", "secret-a", OTHER_RESOURCE, "notes:write")
        .await;
    let tampered = {
        // The payload changed (another subject), the signature kept.
        let parts: Vec<&str> = genuine.split('.').collect();
        let (_, mut claims) = oidc::decode_unverified(&genuine);
        claims["sub"] = json!("mallory");
        let payload = base64_url(claims.to_string().as_bytes());
        format!("{}.{payload}.{}", parts[0], parts[2])
    };
    let alg_none = format!(
        "{}.{}.",
        base64_url(br#"{"alg":"none","typ":"at+jwt"}"#),
        base64_url(oidc::decode_unverified(&genuine).1.to_string().as_bytes())
    );
    let hmac_with_public_key = {
        let mut header = Header::new(Algorithm::HS256);
        header.typ = Some("at+jwt".into());
        header.kid = Some(ours.kid.clone());
        let (_, claims) = oidc::decode_unverified(&genuine);
        let secret = ours.public_jwk.to_string();
        jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_secret(secret.as_bytes()).unwrap(),
        )
        .unwrap()
    };
    let cases = [
        (
            "a token for another resource",
            for_another_resource,
            "wrong_audience",
        ),
        (
            "an expired token",
            env.forged(ours, |c| c["exp"] = json!(now - 60)),
            "expired",
        ),
        (
            "a token not valid yet",
            env.forged(ours, |c| c["nbf"] = json!(now + 120)),
            "not_yet_valid",
        ),
        (
            "a token from another issuer",
            env.forged(ours, |c| c["iss"] = json!("http://127.0.0.1:2")),
            "wrong_issuer",
        ),
        ("a tampered token", tampered, "bad_signature"),
        (
            "an unsigned token (alg none)",
            alg_none,
            "algorithm_refused",
        ),
        (
            "a token HMAC-signed with the public key",
            hmac_with_public_key,
            "algorithm_refused",
        ),
        (
            "a token whose audience array lacks us",
            env.forged(ours, |c| c["aud"] = json!([OTHER_RESOURCE, "urn:other"])),
            "wrong_audience",
        ),
        (
            "a token signed with a key the server never had",
            env.forged(stranger, |_| {}),
            "unknown_key",
        ),
    ];
    for (what, token, rule) in &cases {
        let title = format!("forged {what}");
        let (status, challenge, message) = env
            .call(Some(token), "notes_create", create(&title), json!({}))
            .await;
        assert_eq!(status, 401, "{what}: {message}");
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        // The refusal is in the trace with its rule, before anything else.
        let decided = env.last_auth();
        assert_eq!(decided["decision"], "refuse", "{what}: {decided}");
        assert_eq!(decided["rule"], *rule, "{what}: {decided}");
        assert_eq!(decided["http.response.status_code"], 401, "{what}");
        assert_eq!(decided["resource"], env.resource.as_str(), "{what}");
        assert!(!env.has_note(&title).await, "{what} ran the tool");
    }
    // A token in the URL is refused even when it is genuine.
    let response = support::post(
        &env.http,
        &format!("{}?access_token={genuine}", env.url),
        "tools/call",
        Some("notes_create"),
        support::tools_call(1, "notes_create", create("query token"), json!({})).to_string(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(env.last_auth()["rule"], "token_in_query");
    assert!(!env.has_note("query token").await);
    let all: Vec<&str> = cases
        .iter()
        .map(|(_, t, _)| t.as_str())
        .chain([genuine.as_str()])
        .collect();
    env.assert_no_token_written(&all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_without_the_scope_neither_sees_nor_calls_the_tool() {
    let env = start(TestKey::generate_many(&["k1"]), 300).await;
    let reader = env.token("client-a", "notes:read").await;
    let listed = env.list_tools(&reader).await;
    assert_eq!(listed, ["notes_get", "notes_search"]);
    // The allow says what the list leaves out.
    let decided = env.last_auth();
    assert_eq!(decided["decision"], "allow", "{decided}");
    assert_eq!(decided["rpc.method"], "tools/list", "{decided}");
    let withheld = decided["withheld"].as_array().unwrap();
    assert!(withheld.contains(&json!("notes_create")), "{decided}");
    assert!(!withheld.contains(&json!("notes_search")), "{decided}");
    let (status, challenge, message) = env
        .call(
            Some(&reader),
            "notes_create",
            create("reader wrote"),
            json!({}),
        )
        .await;
    assert_eq!(status, 403, "{message}");
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"notes:write\""), "{challenge}");
    let decided = env.last_auth();
    assert_eq!(
        (
            &decided["rule"],
            &decided["gen_ai.tool.name"],
            &decided["principal"]
        ),
        (
            &json!("insufficient_scope"),
            &json!("notes_create"),
            &json!("client-a")
        ),
        "{decided}"
    );
    assert!(!env.has_note("reader wrote").await);
    let writer = env.token("client-a", "notes:write").await;
    assert!(
        env.list_tools(&writer)
            .await
            .contains(&"notes_create".to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_trusted_after_one_refetch_and_a_removed_one_is_not() {
    let keys = TestKey::generate_many(&["old", "new"]);
    let env = start(keys.clone(), 2).await;
    let (old, new) = (&env.keys[0], &env.keys[1]);
    env.auth.rotate(&[new.clone(), old.clone()]).await;
    let signed_by_new = env.token("client-a", "notes:write").await;
    assert_eq!(oidc::decode_unverified(&signed_by_new).0["kid"], "new");
    // The egress exit records every fetch in the trace.
    let jwks_fetches = || {
        let uri = env.auth.jwks_uri();
        env.trace_text()
            .lines()
            .filter(|l| l.contains(&uri))
            .count()
    };
    let before = jwks_fetches();
    let (status, _, message) = env
        .call(
            Some(&signed_by_new),
            "notes_create",
            create("after rotation"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{message}");
    assert_eq!(
        jwks_fetches(),
        before + 1,
        "one refetch for the unknown key id"
    );
    env.auth.rotate(std::slice::from_ref(new)).await;
    // Past the key set's maximum age the server fetches it again and drops the old key.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let signed_by_old = env.forged(old, |_| {});
    let (status, challenge, _) = env
        .call(
            Some(&signed_by_old),
            "notes_create",
            create("old key"),
            json!({}),
        )
        .await;
    assert_eq!(status, 401, "{challenge}");
    assert!(!env.has_note("old key").await);
    drop(keys);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_never_share_effects_or_approvals() {
    let env = start(TestKey::generate_many(&["k1"]), 300).await;
    let alice = env.token("client-a", "notes:write").await;
    let bob = env.token("client-b", "notes:write").await;
    // The same write by each is two effects, not one replayed receipt.
    for token in [&alice, &bob] {
        let (status, _, message) = env
            .call(Some(token), "notes_create", create("same write"), json!({}))
            .await;
        assert_eq!(status, 200, "{message}");
        assert!(
            message["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("same write")
        );
    }
    let trace = env.trace_text();
    let keys: std::collections::BTreeSet<String> = trace
        .lines()
        .filter(|l| l.contains("notes_create") && l.contains("\"ok\""))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|r| r["idempotency_key"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        keys.len(),
        2,
        "two principals, two effect identities: {keys:?}"
    );

    // Alice's delete asks for approval; Bob cannot answer it.
    let (_, _, asked) = env
        .call(
            Some(&alice),
            "notes_delete",
            json!({"note_id": 1}),
            json!({}),
        )
        .await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let ticket = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let answer = json!({
        "requestState": ticket,
        "inputResponses": {"approval": {"action": "accept", "content": {"approve": true}}}
    });
    let (status, _, by_bob) = env
        .call(
            Some(&bob),
            "notes_delete",
            json!({"note_id": 1}),
            answer.clone(),
        )
        .await;
    assert_eq!(status, 200, "{by_bob}");
    assert_ne!(
        by_bob["result"]["isError"], false,
        "Bob's answer ran Alice's delete: {by_bob}"
    );
    let (_, _, by_alice) = env
        .call(Some(&alice), "notes_delete", json!({"note_id": 1}), answer)
        .await;
    assert_eq!(by_alice["result"]["isError"], false, "{by_alice}");
    env.assert_no_token_written(&[&alice, &bob]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_keys_cannot_be_fetched_no_token_is_accepted() {
    let mut env = start(TestKey::generate_many(&["k1"]), 1).await;
    let token = env.token("client-a", "notes:write").await;
    let (status, _, message) = env
        .call(
            Some(&token),
            "notes_create",
            create("before the outage"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{message}");
    env.auth.stop();
    // Past the key set's maximum age the keys must be fetched again, and cannot be.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, challenge, message) = env
        .call(
            Some(&token),
            "notes_create",
            create("during the outage"),
            json!({}),
        )
        .await;
    assert_eq!(status, 503, "{message}");
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    let text = message["error"]["message"].as_str().unwrap();
    assert_eq!(text, "authorization temporarily unavailable; retry later");
    // The caller is told nothing of the fetch; the operator's trace says what failed.
    let jwks = env.auth.jwks_uri();
    assert!(
        !message.to_string().contains(&jwks) && !challenge.contains(&jwks),
        "{message} {challenge}"
    );
    let decided = env.last_auth();
    assert_eq!(decided["rule"], "keys_unavailable", "{decided}");
    assert!(
        decided["detail"].as_str().unwrap().contains(&jwks),
        "{decided}"
    );
    let trace = env.trace_text();
    assert!(
        !trace.contains("during the outage"),
        "the call ran during the outage"
    );
}

/// Reads `stream` until a JSON-RPC message for which `wanted` holds arrives; returns it.
async fn next_message(
    stream: &mut reqwest::Response,
    buffer: &mut String,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            for data in event.lines().filter_map(|l| l.strip_prefix("data:")) {
                if let Ok(message) = serde_json::from_str::<Value>(data.trim())
                    && wanted(&message)
                {
                    return message;
                }
            }
        }
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(20), stream.chunk())
            .await
            .expect("the stream went quiet")
            .unwrap()
            .expect("the stream ended");
        buffer.push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principal_cannot_use_a_session_it_did_not_open() {
    let env = start(TestKey::generate_many(&["k1"]), 300).await;
    let alice = env.token("client-a", "notes:write").await;
    let bob = env.token("client-b", "notes:write").await;
    let (status, _, made) = env
        .call(
            Some(&alice),
            "notes_create",
            create("kept by alice"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{made}");
    let session = env.open_session(&alice).await;

    // Alice deletes the note in her session: the server asks her host, on her stream.
    let delete = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                        "params": {"name": "notes_delete", "arguments": {"note_id": 1}}});
    let mut stream = env
        .session_post(&alice, &session, &delete)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut buffer = String::new();
    let asked = next_message(&mut stream, &mut buffer, |m| {
        m["method"] == "elicitation/create"
    })
    .await;
    let question = asked["id"].clone();

    // Bob holds her session id and a valid token of his own: every use of it is refused.
    let accept = json!({"jsonrpc": "2.0", "id": question,
                        "result": {"action": "accept", "content": {"approve": true}}});
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 7, "reason": "bob"}});
    for (what, body) in [
        ("an answer to her question", &accept),
        ("a cancellation", &cancel),
    ] {
        let response = env.session_post(&bob, &session, body).send().await.unwrap();
        assert_eq!(response.status(), 404, "{what}");
        let decided = env.last_auth();
        assert_eq!(
            (&decided["rule"], &decided["principal"]),
            (&json!("foreign_session"), &json!("client-b")),
            "{what}: {decided}"
        );
    }
    let replay = env
        .http
        .get(&env.url)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .header("last-event-id", "0")
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(replay.status(), 404, "a replay of her stream");
    let deleted = env
        .http
        .delete(&env.url)
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 404, "a delete of her session");

    // Alice's session is intact: she declines, and her call ends with her answer.
    let decline = json!({"jsonrpc": "2.0", "id": question, "result": {"action": "decline"}});
    let response = env
        .session_post(&alice, &session, &decline)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let result = next_message(&mut stream, &mut buffer, |m| m["id"] == 7).await;
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert!(result.to_string().contains("approval_denied"), "{result}");
    drop(stream);
    assert!(
        env.has_note("kept by alice").await,
        "Bob's answer deleted it"
    );
    let listed = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"});
    let response = env
        .session_post(&alice, &session, &listed)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // Her own delete ends it; the session id is then nobody's.
    let deleted = env
        .http
        .delete(&env.url)
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let response = env
        .session_post(&alice, &session, &listed)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    env.assert_no_token_written(&[&alice, &bob]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_access_token_never_reaches_the_mcp_server() {
    // The MCP server refuses a request that still carries an Authorization header; the front
    // must have removed it, on the stateless path and inside a session alike.
    let env = start(TestKey::generate_many(&["k1"]), 300).await;
    let token = env.token("client-a", "notes:read").await;
    let (status, _, message) = env
        .call(
            Some(&token),
            "notes_search",
            json!({"query": "x"}),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{message}");
    assert!(message.get("error").is_none(), "{message}");
    assert_eq!(message["result"]["isError"], false, "{message}");
    let session = env.open_session(&token).await;
    let listed = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let response = env
        .session_post(&token, &session, &listed)
        .send()
        .await
        .unwrap();
    let message = support::message_of(&response.text().await.unwrap());
    assert!(message["result"]["tools"].is_array(), "{message}");
}

/// An authorization server of our own on 127.0.0.1 whose key set answers the first fetch at
/// once and holds every later one until released (or 30 s): a slow authorization server.
struct SlowKeys {
    issuer: String,
    /// Key-set fetches received so far.
    fetches: Arc<std::sync::atomic::AtomicUsize>,
    release: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SlowKeys {
    fn drop(&mut self) {
        self.release.notify_waiters();
        self.task.abort();
    }
}

async fn slow_key_server(jwks: Value) -> SlowKeys {
    slow_key_server_naming(jwks, None).await
}

/// [`slow_key_server`] whose metadata names `jwks_uri` (default: its own `/jwks`).
async fn slow_key_server_naming(jwks: Value, jwks_uri: Option<&str>) -> SlowKeys {
    use http_body_util::Full;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let jwks_uri = jwks_uri.map_or_else(|| format!("{issuer}/jwks"), str::to_string);
    let metadata = json!({"issuer": issuer, "jwks_uri": jwks_uri});
    let fetches = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(tokio::sync::Notify::new());
    let (counted, held) = (Arc::clone(&fetches), Arc::clone(&release));
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (metadata, jwks) = (metadata.clone(), jwks.clone());
            let (counted, held) = (Arc::clone(&counted), Arc::clone(&held));
            let service = hyper::service::service_fn(move |request: http::Request<_>| {
                let (metadata, jwks) = (metadata.clone(), jwks.clone());
                let (counted, held) = (Arc::clone(&counted), Arc::clone(&held));
                async move {
                    let _: &http::Request<hyper::body::Incoming> = &request;
                    let body = if request.uri().path() == "/jwks" {
                        if counted.fetch_add(1, Ordering::SeqCst) > 0 {
                            tokio::select! {
                                () = held.notified() => {}
                                () = tokio::time::sleep(std::time::Duration::from_secs(30)) => {}
                            }
                        }
                        jwks.to_string()
                    } else {
                        metadata.to_string()
                    };
                    let response = http::Response::builder()
                        .header("content-type", "application/json")
                        .body(Full::new(bytes::Bytes::from(body)))
                        .unwrap();
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    SlowKeys {
        issuer,
        fetches,
        release,
        task,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_key_fetch_does_not_stall_tokens_with_known_keys() {
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let keys = TestKey::generate_many(&["k1", "k9"]);
    let (known, unknown) = (&keys[0], &keys[1]);
    let slow = slow_key_server(json!({"keys": [known.public_jwk]})).await;
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let resource = format!("http://{}/mcp", listener.local_addr().unwrap());
    let store = Store::open_or_init(StoreKind::Notes, &dir.path().join("notes.sqlite")).unwrap();
    let seat = Seat::new(Principal::local("local-user", &[]));
    let exits = ExitsConfig::new(EgressConfig::default(), None);
    let ready = toolgate_wiring::dispatcher(ToolsetName::Notes, &store, &exits, seat).unwrap();
    let server = McpServer::new(ready, "mcp-slow-keys");
    let tools: Vec<String> = server.tools().iter().map(|t| t.name.to_string()).collect();
    let mut scopes = BTreeMap::new();
    scopes.insert("notes:read".to_string(), vec!["notes".to_string()]);
    let mut config = AuthConfig::new(&slow.issuer, &resource, scopes);
    config.jwks_min_refresh_secs = 0;
    let port = url::Url::parse(&slow.issuer).unwrap().port().unwrap();
    let allowlist = support::loopback_http_allowlist(&[port]);
    let egress = toolgate_wiring::ExitsConfig::new(allowlist.clone(), None)
        .egress_answering(&AUTH_CONTENT_TYPES, Arc::new(toolgate_core::trace::NoTrace))
        .unwrap();
    let resource_server = ResourceServer::start(&config, "notes", &tools, egress)
        .await
        .unwrap();
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve_http_with(
        server,
        listener,
        HttpLimits::default(),
        Access::OAuth(Arc::new(resource_server)),
        async {
            let _ = stopped.await;
        },
    ));
    let forge = |key: &TestKey| {
        let now = unix_now();
        let claims = json!({"iss": slow.issuer, "aud": resource, "sub": "alice",
                            "scope": "notes:read", "iat": now, "exp": now + 300});
        let mut header = Header::new(Algorithm::RS256);
        header.typ = Some("at+jwt".into());
        header.kid = Some(key.kid.clone());
        let signing = EncodingKey::from_rsa_pem(key.private_pem.as_bytes()).unwrap();
        jsonwebtoken::encode(&header, &claims, &signing).unwrap()
    };
    let http = support::http();
    let search = |token: String| {
        let message = support::tools_call(1, "notes_search", json!({"query": "x"}), json!({}));
        support::post(
            &http,
            &resource,
            "tools/call",
            Some("notes_search"),
            message.to_string(),
        )
        .bearer_auth(token)
        .send()
    };
    assert_eq!(slow.fetches.load(Ordering::SeqCst), 1, "the start-up fetch");

    // A token with a key id the set lacks makes the server fetch the set again; it hangs.
    let stalled = tokio::spawn(search(forge(unknown)));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while slow.fetches.load(Ordering::SeqCst) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the refetch never came"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Meanwhile a token with a known key is served at once.
    let known_call = tokio::time::timeout(Duration::from_secs(5), search(forge(known)))
        .await
        .expect("a known key waited behind the key-set fetch")
        .unwrap();
    assert_eq!(known_call.status(), 200);
    // A second unknown key id waits for the fetch in flight instead of starting another.
    let second = tokio::spawn(search(forge(unknown)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        slow.fetches.load(Ordering::SeqCst),
        2,
        "one fetch in flight"
    );
    slow.release.notify_waiters();
    for waiting in [stalled, second] {
        let response = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), 401, "the key is still unknown");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_from_a_plain_http_server_on_another_host_are_never_trusted() {
    use toolgate_mcp::auth::AuthError;
    let key = TestKey::generate("k1");
    let egress_to = |port: u16| {
        let allowlist = support::loopback_http_allowlist(&[port]);
        toolgate_wiring::ExitsConfig::new(allowlist.clone(), None)
            .egress_answering(&AUTH_CONTENT_TYPES, Arc::new(toolgate_core::trace::NoTrace))
            .unwrap()
    };
    let mut scopes = BTreeMap::new();
    scopes.insert("notes:read".to_string(), vec!["notes_get".to_string()]);
    let tools = ["notes_get".to_string()];
    // An issuer over plain http elsewhere: refused at start, before anything is fetched.
    let config = AuthConfig::new(
        "http://as.example",
        "http://127.0.0.1:1/mcp",
        scopes.clone(),
    );
    let refused = ResourceServer::start(&config, "notes", &tools, egress_to(1))
        .await
        .err()
        .expect("an http issuer on another host was accepted");
    assert!(matches!(refused, AuthError::Insecure(_)), "{refused}");
    assert!(refused.to_string().contains("https"), "{refused}");
    // A loopback issuer whose metadata sends the key fetch over plain http elsewhere.
    let server = slow_key_server_naming(
        json!({"keys": [key.public_jwk]}),
        Some("http://keys.example/jwks"),
    )
    .await;
    let port = url::Url::parse(&server.issuer).unwrap().port().unwrap();
    let config = AuthConfig::new(&server.issuer, "http://127.0.0.1:1/mcp", scopes);
    let refused = ResourceServer::start(&config, "notes", &tools, egress_to(port))
        .await
        .err()
        .expect("a key set over http on another host was accepted");
    let said = refused.to_string();
    assert!(
        said.contains("http://keys.example/jwks") && said.contains("https"),
        "{said}"
    );
    assert_eq!(server.fetches.load(std::sync::atomic::Ordering::SeqCst), 0);
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
