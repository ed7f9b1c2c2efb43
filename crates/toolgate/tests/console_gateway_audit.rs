//! A gateway call's upstream leg in the audit, every part real: two `toolgate serve --http`
//! processes on 127.0.0.1 recording into one audit file: the upstream serving the notes
//! toolset, and the gateway (`--no-toolset`) importing its tools with `--mcp-config` over
//! Streamable HTTP through the egress exit. Read back as the console's call page reads it
//! ([`AuditStore::tree`], [`AuditStore::upstream_legs`]).
//!
//! - The gateway's call of `up__notes_search` has its upstream leg (server `up`, the tool
//!   `notes_search`, `ok`, how long, the reference it sent) under it, and the upstream's own
//!   `notes_search` call, which recorded the gateway's reference (`RUN/CALL/NONCE`, sent in
//!   `_meta`, the nonce fresh and random) as its parent, hangs under it in the tree though it
//!   is another process's run.
//! - A forgery: a second client (rmcp's, over Streamable HTTP) calls the upstream directly
//!   naming the gateway's call by a guessed `RUN/CALL`, and by the right form with a wrong
//!   nonce; the upstream records them (valid forms) as parents, yet neither hangs under the
//!   gateway's call: only the call whose leg sent the reference does. Both are still found by
//!   search.
//! - A client naming a parent outside the reference's closed form (markup, a bare id) names
//!   none: the upstream records no parent, and the call runs as any other.
//! - In the browser: the gateway behind `[serve.auth]` with `[console]` (oidc-provider's login
//!   pages, headless chromium); carol, an auditor, opens the gateway call's page and sees the
//!   upstream leg (server, tool, outcome, how long) and the upstream's call under it, and
//!   nothing on the page runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[allow(clippy::duplicate_mod)]
#[path = "common/console.rs"]
mod console;

use std::path::Path;
use std::time::{Duration, Instant};

use common::team::{Instance, modern_call, serve_with, servers_json};
use serde_json::{Value, json};
use toolgate_store::audit::{AuditEntry, AuditFilter, AuditStore};

const PARENT_META: &str = "dev.toolgate/parent_call_id";

/// Every decision row of `tool`, once there are `at_least` (within 30 s).
fn rows_of(audit: &Path, tool: &str, at_least: usize) -> Vec<AuditEntry> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Ok(store) = AuditStore::open_file(audit) {
            let filter = AuditFilter {
                tool: Some(tool.into()),
                ..AuditFilter::default()
            };
            let page = runtime.block_on(store.search(&filter, None, 100)).unwrap();
            if page.entries.len() >= at_least {
                return page.entries;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the audit did not get {at_least} rows of {tool}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn succeeded(reply: &common::team::Reply) -> Value {
    let message = reply
        .message()
        .unwrap_or_else(|| panic!("no answer: {reply:?}"));
    let result = message["result"].clone();
    assert_ne!(result["isError"], json!(true), "{message}");
    result
}

/// `tools/call` of `tool` on the server at `address` through rmcp's client over Streamable
/// HTTP (its own session, no token), with `meta` as the request's `_meta`.
fn rmcp_call(address: &str, tool: &str, arguments: Value, meta: Value) -> Value {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    // reqwest is built without a default TLS provider (the plain-HTTP client still asks).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // The transport starts its worker task as it is made.
    let _inside = runtime.enter();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp"));
    let client = runtime.block_on(().serve(transport)).unwrap();
    let params: rmcp::model::CallToolRequestParams =
        serde_json::from_value(json!({"name": tool, "arguments": arguments, "_meta": meta}))
            .unwrap();
    let result = runtime
        .block_on(client.call_tool(params))
        .unwrap_or_else(|e| panic!("{tool} failed: {e}"));
    let _ = runtime.block_on(client.cancel());
    serde_json::to_value(result).unwrap()
}

fn upstream(dir: &Path, audit: &Path) -> Instance {
    let db = dir.join("notes.sqlite");
    toolgate_notes::NotesStore::open_or_init_sample(&db).unwrap();
    let (db, audit) = (db.display().to_string(), audit.display().to_string());
    serve_with(
        dir,
        None,
        &["--toolset", "notes", "--db", &db, "--audit-db", &audit],
    )
}

fn gateway(dir: &Path, audit: &Path, upstream: &str) -> Instance {
    let port = upstream.rsplit(':').next().unwrap();
    let config = dir.join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[[egress.allow]]\nhost = \"127.0.0.1\"\nschemes = [\"http\"]\nports = [{port}]\n\
             allow_private = true\n\n[mcp.servers.up]\nrisk = \"low\"\n"
        ),
    )
    .unwrap();
    let servers = servers_json(dir, upstream);
    let (servers, audit) = (servers.display().to_string(), audit.display().to_string());
    serve_with(
        dir,
        Some(&config),
        &[
            "--no-toolset",
            "--mcp-config",
            &servers,
            "--audit-db",
            &audit,
        ],
    )
}

#[test]
fn a_gateway_calls_upstream_leg_and_the_upstreams_own_call_hang_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.sqlite");
    let (up_dir, gw_dir) = (dir.path().join("up"), dir.path().join("gw"));
    std::fs::create_dir_all(&up_dir).unwrap();
    std::fs::create_dir_all(&gw_dir).unwrap();
    let up = upstream(&up_dir, &audit);
    let gw = gateway(&gw_dir, &audit, &up.address);

    // Parents a client names outside the closed form name none; the calls run.
    for hostile in [
        json!("<script>alert(1)</script>/call-1"),
        json!("call-1"),
        json!({"run": "r"}),
    ] {
        succeeded(
            &modern_call(
                &up.address,
                "notes_search",
                &json!({"query": "garden", "limit": 1}),
                json!({}),
                json!({ (PARENT_META): hostile }),
            )
            .unwrap(),
        );
    }

    // Through the gateway.
    succeeded(
        &modern_call(
            &gw.address,
            "up__notes_search",
            &json!({"query": "budget", "limit": 2}),
            json!({}),
            json!({}),
        )
        .unwrap(),
    );

    let gateway_call = rows_of(&audit, "up__notes_search", 1).remove(0);
    let upstream_calls = rows_of(&audit, "notes_search", 4);
    let reference = upstream_calls[0].parent_call_id.clone().unwrap();
    let guessed = format!("{}/{}", gateway_call.run_id, gateway_call.call_id);
    let nonce = reference
        .strip_prefix(&format!("{guessed}/"))
        .unwrap_or_else(|| panic!("{reference} names {guessed} with a nonce"));
    assert!(
        nonce.len() == 32 && nonce.chars().all(|c| c.is_ascii_hexdigit()),
        "{reference}: 128 bits in hex"
    );
    let parents: Vec<Option<String>> = upstream_calls
        .iter()
        .map(|e| e.parent_call_id.clone())
        .collect();
    assert_eq!(
        parents,
        vec![Some(reference.clone()), None, None, None],
        "newest first: the gateway's, then the three naming no valid parent"
    );
    assert_ne!(upstream_calls[0].instance, gateway_call.instance);

    // Mallory, another client of the upstream, names the gateway's call as her calls' parent:
    // by the guessable `RUN/CALL`, and in the right form with a wrong nonce.
    let wrong_nonce = format!("{guessed}/{}", "0".repeat(32));
    for forged in [&guessed, &wrong_nonce] {
        let answer = rmcp_call(
            &up.address,
            "notes_search",
            json!({"query": "forged", "limit": 1}),
            json!({ (PARENT_META): forged }),
        );
        assert_ne!(answer["isError"], json!(true), "{answer}");
    }
    let upstream_calls = rows_of(&audit, "notes_search", 6);
    let forged: Vec<Option<String>> = upstream_calls[..2]
        .iter()
        .map(|e| e.parent_call_id.clone())
        .collect();
    assert_eq!(
        forged,
        vec![Some(wrong_nonce), Some(guessed)],
        "the upstream records both (valid forms) as their parents; search finds them"
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = AuditStore::open_file(&audit).unwrap();
    let tree = runtime
        .block_on(store.tree(&gateway_call.call_id, Some(&gateway_call.run_id)))
        .unwrap()
        .unwrap();
    let shape: Vec<(String, Option<String>)> = tree
        .entries()
        .iter()
        .map(|e| (e.tool.clone(), e.parent_call_id.clone()))
        .collect();
    assert_eq!(
        shape,
        vec![
            ("up__notes_search".to_string(), None),
            ("notes_search".to_string(), Some(reference.clone())),
        ],
        "only the call whose reference the gateway's leg sent; the forged two are not under it"
    );
    let legs = runtime
        .block_on(store.upstream_legs(&gateway_call.run_id, vec![gateway_call.call_id.clone()]))
        .unwrap();
    assert_eq!(legs.len(), 1, "{legs:?}");
    assert_eq!(
        (
            legs[0].server.as_str(),
            legs[0].tool.as_str(),
            legs[0].outcome.as_str(),
            legs[0].reference.as_deref()
        ),
        ("up", "notes_search", "ok", Some(reference.as_str())),
        "{legs:?}"
    );
    drop(gw);
    drop(up);
}

#[test]
fn an_auditor_sees_a_gateway_calls_upstream_leg_and_the_upstreams_call_on_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.sqlite");
    let (up_dir, gw_dir) = (dir.path().join("up"), dir.path().join("gw"));
    std::fs::create_dir_all(&up_dir).unwrap();
    std::fs::create_dir_all(&gw_dir).unwrap();
    let up = upstream(&up_dir, &audit);
    let up_port = up.address.rsplit(':').next().unwrap().to_string();

    // The gateway serves the notes toolset and the upstream's tools, behind [serve.auth] with
    // the console; carol audits.
    let address = format!("127.0.0.1:{}", console::free_port());
    let auth = console::start_auth(&address, &[]);
    let resource = console::resource(&address);
    let config = gw_dir.join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            r#"[[egress.allow]]
host = "127.0.0.1"
schemes = ["http"]
ports = [{as_port}, {up_port}]
allow_private = true

[mcp.servers.up]
risk = "low"

[serve.auth]
issuer = "{issuer}"
resource = "{resource}"
[serve.auth.scopes]
"notes:all" = ["notes"]

[console]
client_id = "public-client"
sign_in_scopes = ["approvals"]
[console.approvers]
subjects = ["alice"]
[console.auditors]
subjects = ["carol"]
"#,
            as_port = console::auth_port(&auth),
            issuer = auth.issuer(),
        ),
    )
    .unwrap();
    let servers = servers_json(&gw_dir, &up.address);
    let db = gw_dir.join("notes.sqlite");
    toolgate_notes::NotesStore::open_or_init_sample(&db).unwrap();
    let (servers, audit_arg) = (servers.display().to_string(), audit.display().to_string());
    let gw = console::serve(
        &gw_dir,
        &config,
        &address,
        &db,
        &console::ServeOptions {
            args: &["--mcp-config", &servers, "--audit-db", &audit_arg],
            ..console::ServeOptions::default()
        },
    );
    let token = console::client_token(&auth, "client-a", "secret-a", &resource);
    let mut session = console::McpSession::open(&gw.address, &token);
    let answer = session.call("up__notes_search", json!({"query": "budget", "limit": 2}));
    assert_ne!(answer["isError"], json!(true), "{answer}");
    rows_of(&audit, "notes_search", 1);

    let origin = format!("http://{address}");
    let mut steps = console::sign_in(&origin, "carol");
    steps.extend([
        json!({"goto": format!("{origin}/console/audit?tool=up__notes_search")}),
        json!({"click": "a.call"}),
        json!({"text": "#tree a.node", "as": "nodes"}),
        json!({"text": "#tree li.upstream", "as": "legs"}),
        json!({"eval": "document.querySelectorAll('#tree > li > ul > li').length", "as": "under"}),
        json!({"eval": console::INERT, "as": "inert"}),
    ]);
    let carol = console::walk(&Value::from(steps));
    assert_eq!(
        console::reads(&carol, "nodes"),
        ["up__notes_search", "notes_search"],
        "{carol:#}"
    );
    let legs = console::reads(&carol, "legs");
    assert_eq!(legs.len(), 1, "{legs:?}");
    assert!(
        legs[0].contains("up")
            && legs[0].contains("notes_search")
            && legs[0].contains("ok")
            && legs[0].contains(" ms"),
        "{legs:?}"
    );
    // The leg and the upstream's call, both directly under the gateway's call.
    assert_eq!(carol["evals"]["under"], json!(2), "{carol:#}");
    assert_eq!(carol["evals"]["inert"], json!(true), "{carol:#}");
    assert_eq!(carol["page_errors"], json!([]), "{carol:#}");
    drop(session);
    drop(gw);
    drop(up);
}
