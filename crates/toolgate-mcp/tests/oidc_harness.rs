//! The OAuth test harness (`support/oidc.rs`) against the real oidc-provider it runs: what its
//! access tokens carry, what its discovery and JWKS answers are, and that key rotation keeps the
//! issuer and changes the signing key. The MCP OAuth tests rely on exactly this.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/oidc.rs"]
mod oidc;

use oidc::{AuthServer, TestKey, decode_unverified, kids};
use serde_json::json;

const MCP: &str = "http://127.0.0.1:45001/mcp";
const OTHER: &str = "http://127.0.0.1:45002/mcp";
const SCOPES: [&str; 3] = ["notes:read", "notes:write", "books:read"];

#[tokio::test]
async fn client_credentials_token_is_an_rs256_at_jwt_for_the_requested_resource() {
    let key = TestKey::generate("k1");
    assert!(key.private_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    assert_eq!(key.public_jwk["kid"], "k1");
    assert!(
        key.public_jwk.get("d").is_none(),
        "the public JWK is public"
    );
    let server = AuthServer::start(&[MCP, OTHER], &SCOPES, std::slice::from_ref(&key), 120);
    let issuer = server.issuer();
    assert!(issuer.starts_with("http://127.0.0.1:"), "{issuer}");

    let discovery = server.discovery().await;
    assert_eq!(discovery["issuer"], issuer.as_str());
    assert_eq!(discovery["jwks_uri"], server.jwks_uri().as_str());
    assert_eq!(
        discovery["token_endpoint"],
        server.token_endpoint().as_str()
    );
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let rfc8414 = http
        .get(format!("{issuer}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap();
    assert_eq!(rfc8414.status().as_u16(), 200);
    assert_eq!(
        rfc8414.json::<serde_json::Value>().await.unwrap()["issuer"],
        issuer.as_str()
    );
    let jwks = http.get(server.jwks_uri()).send().await.unwrap();
    assert_eq!(
        jwks.headers()["content-type"],
        "application/jwk-set+json; charset=utf-8"
    );
    let jwks: serde_json::Value = jwks.json().await.unwrap();
    assert_eq!(kids(&jwks), ["k1"]);
    assert_eq!(jwks["keys"][0]["n"], key.public_jwk["n"]);
    assert!(
        jwks["keys"][0].get("d").is_none(),
        "only public parts are served"
    );

    let token = server
        .token("client-a", "secret-a", MCP, "notes:read books:read")
        .await;
    let (header, claims) = decode_unverified(&token);
    assert_eq!(
        header,
        json!({"alg": "RS256", "typ": "at+jwt", "kid": "k1"})
    );
    assert_eq!(claims["iss"], issuer.as_str());
    assert_eq!(claims["aud"], MCP, "aud is the resource, as a string");
    assert_eq!(claims["scope"], "notes:read books:read");
    assert_eq!(claims["client_id"], "client-a");
    assert_eq!(
        claims["sub"], "client-a",
        "no account: sub is the client id"
    );
    assert!(claims["jti"].is_string());
    let iat = claims["iat"].as_u64().unwrap();
    assert_eq!(claims["exp"].as_u64().unwrap(), iat + 120);
    let mut names: Vec<&str> = claims
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "aud",
            "client_id",
            "exp",
            "iat",
            "iss",
            "jti",
            "scope",
            "sub"
        ]
    );

    // The second resource: another audience, same issuer and key.
    let other = server
        .token("client-b", "secret-b", OTHER, "notes:write")
        .await;
    let (_, claims) = decode_unverified(&other);
    assert_eq!(claims["aud"], OTHER);
    assert_eq!(claims["client_id"], "client-b");
    assert_eq!(claims["scope"], "notes:write");

    // No resource: the first one. Unknown scopes are dropped, not refused.
    let (status, body) = server
        .token_response("client-a", "secret-a", None, Some("notes:read admin"))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "notes:read");
    let (_, claims) = decode_unverified(body["access_token"].as_str().unwrap());
    assert_eq!(claims["aud"], MCP);

    // Refusals.
    let (status, body) = server
        .token_response(
            "client-a",
            "secret-a",
            Some("http://127.0.0.1:45003/mcp"),
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_target"))
    );
    let (status, body) = server
        .token_response("client-a", "secret-b", Some(MCP), None)
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_client"))
    );
}

#[tokio::test]
async fn rotation_changes_the_signing_key_and_keeps_the_issuer() {
    let mut keys = TestKey::generate_many(&["k1", "k2"]).into_iter();
    let (k1, k2) = (keys.next().unwrap(), keys.next().unwrap());
    let server = AuthServer::start(&[MCP], &SCOPES, std::slice::from_ref(&k1), 300);
    let issuer = server.issuer();
    let kid = |token: &str| decode_unverified(token).0["kid"].clone();
    let before = server
        .token("client-a", "secret-a", MCP, "notes:read")
        .await;
    assert_eq!(kid(&before), "k1");

    server.rotate(&[k2.clone(), k1.clone()]).await;
    assert_eq!(kids(&server.jwks().await), ["k2", "k1"]);
    let after = server
        .token("client-a", "secret-a", MCP, "notes:read")
        .await;
    assert_eq!(kid(&after), "k2");
    let (_, claims) = decode_unverified(&after);
    assert_eq!(claims["iss"], issuer.as_str(), "the issuer stays");
    assert_eq!(server.discovery().await["issuer"], issuer.as_str());

    server.rotate(std::slice::from_ref(&k2)).await;
    assert_eq!(kids(&server.jwks().await), ["k2"]);
    let last = server
        .token("client-b", "secret-b", MCP, "books:read")
        .await;
    assert_eq!(kid(&last), "k2");
    assert_eq!(server.issuer(), issuer);
}
