//! `mcpServers` entries pasted as each host documents them (Claude Desktop, Claude Code, Cursor:
//! stdio with `node`, `npx` or `uvx` and no `env`, HTTP with headers, which reach the server)
//! import without a change, against the real npm servers `scripts/setup.sh` pins
//! (server-everything, -filesystem and -memory at 2026.8.31) and our own server over
//! Streamable HTTP; and a stdio server gets the SDKs' default environment and never a secret
//! of ours.
//!
//! One test function, on purpose: it sets this process's own environment and folder, as a
//! person's shell would before starting toolgate, which the child servers then see through the
//! default set. A host starts `npx` in its own folder; here it is the folder setup.sh installed
//! the servers into, so `npx -y @modelcontextprotocol/server-everything` finds the pinned
//! package there and downloads nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "mcp_client/calls.rs"]
mod calls;
use calls::{call, untrusted_text};

#[path = "../../toolgate/tests/common/node.rs"]
#[allow(dead_code)]
mod node_install;
#[path = "../../toolgate-mcp/tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate_core::Principal;
use toolgate_egress::{Egress, StaticResolver};
use toolgate_mcp::{HttpLimits, McpServer};
use toolgate_mcp_client::config::parse;
use toolgate_mcp_client::default_env::INHERITED;
use toolgate_mcp_client::imports::{ImportOptions, Imports, open_receipts};
use toolgate_mcp_client::plan::ServerRatings;
use toolgate_mcp_client::upstream::{ConnectOptions, UpstreamError, resolve_program};
use toolgate_wiring::{Assembled, ExitsConfig, Seat, Store, StoreKind, ToolsetName};

/// A secret in our environment that no server's entry names.
const PLANTED: [(&str, &str); 2] = [
    ("ANTHROPIC_API_KEY", "sk-ant-planted-never-to-leave"),
    ("TOOLGATE_PLANTED_SECRET", "toolgate-planted-never-to-leave"),
];

/// Our own `PATH`, with the folder of the Node that setup.sh installs first (as a person who
/// installed Node puts it on theirs); `npx` is the system npm's (setup.sh installs npm).
fn prepare_our_environment() -> String {
    let node = node_install::node();
    let bin = node.parent().unwrap();
    let ours = std::env::var("PATH").unwrap_or_default();
    let path = format!("{}:{ours}", bin.display());
    // SAFETY: set before the runtime and any other thread of this test binary start (it has
    // this one test), so nothing reads the environment concurrently.
    unsafe {
        std::env::set_var("PATH", &path);
        for (name, value) in PLANTED {
            std::env::set_var(name, value);
        }
    }
    std::env::set_current_dir(node_install::node_dir()).unwrap();
    path
}

fn package_entry(package: &str) -> String {
    let script = node_install::node_dir()
        .join("node_modules")
        .join(package)
        .join("dist/index.js");
    node_install::installed(script, package)
        .display()
        .to_string()
}

async fn import(
    dir: &Path,
    document: &str,
    environment: &BTreeMap<String, String>,
    ratings: &str,
    connect: ConnectOptions,
) -> Imports {
    let parsed = parse(document, environment).unwrap();
    let receipts = open_receipts(&dir.join("receipts.sqlite")).unwrap();
    let mut options = ImportOptions::new(parsed, dir.join("servers.lock.json"), receipts);
    options.ratings = toml::from_str::<BTreeMap<String, ServerRatings>>(ratings).unwrap();
    options.connect = connect;
    Imports::open(options).await.unwrap()
}

fn dispatcher(imports: &Imports) -> Assembled {
    calls::dispatcher(imports, Seat::new(Principal::local("local-user", &[])))
}

/// Every server of `imports` connected, each with at least one tool.
fn all_connected(imports: &Imports, what: &str) {
    for server in &imports.servers {
        assert!(
            server.connected.is_ok(),
            "{what}: {} did not connect: {:?}",
            server.given_name,
            server.connected
        );
        assert!(!server.tools.is_empty(), "{what}: {}", server.given_name);
    }
}

/// server-everything's `get-env` through our dispatcher: the server's whole environment.
async fn server_environment(imports: &Imports, namespace: &str) -> BTreeMap<String, String> {
    let ready = dispatcher(imports);
    let text = untrusted_text(&call(&ready, &format!("{namespace}__get_env"), json!({})).await);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("get-env answered {text}: {e}"))
}

/// Our secrets are absent and the default set is there with our values.
fn only_the_default_set(env: &BTreeMap<String, String>, path: &str, what: &str) {
    for (name, value) in PLANTED {
        assert!(!env.contains_key(name), "{what}: {name} leaked");
        assert!(
            !env.values().any(|v| v.contains(value)),
            "{what}: the value of {name} leaked"
        );
    }
    // npm puts its own `.bin` folders in front of the PATH it was given.
    let seen = env.get("PATH").map(String::as_str).unwrap_or_default();
    assert!(seen.ends_with(path), "{what}: PATH {seen}");
    for name in INHERITED.into_iter().filter(|n| *n != "PATH") {
        let ours = std::env::var(name).ok().filter(|v| !v.starts_with("()"));
        assert_eq!(env.get(name), ours.as_ref(), "{what}: {name}");
    }
}

#[test]
fn entries_pasted_from_each_hosts_documented_format_import_as_they_are() {
    let path = prepare_our_environment();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            node_entry_of_the_issue_gets_the_default_environment_only(&path).await;
            npx_entries_of_claude_desktop_claude_code_and_cursor_import(&path).await;
            a_uvx_entry_is_looked_up_on_the_default_path(&path).await;
            http_entries_with_headers_import(&path).await;
        });
}

/// The entry of issue 36, as Claude Desktop writes it: `node` by name, no `env`.
async fn node_entry_of_the_issue_gets_the_default_environment_only(path: &str) {
    let dir = tempfile::tempdir().unwrap();
    let document = json!({"mcpServers": {"everything": {
        "command": "node",
        "args": [package_entry("@modelcontextprotocol/server-everything"), "stdio"]
    }}})
    .to_string();
    let imports = import(
        dir.path(),
        &document,
        &BTreeMap::new(),
        "[everything.tools.get-env]\nrisk = \"low\"\neffect = \"read\"",
        ConnectOptions::default(),
    )
    .await;
    all_connected(&imports, "node");
    let env = server_environment(&imports, "everything").await;
    only_the_default_set(&env, path, "node, no env");
    assert_eq!(env["PATH"], path);
    // Node itself adds nothing: the server's environment is the default set, exactly.
    let names: BTreeSet<&str> = env.keys().map(String::as_str).collect();
    let allowed: BTreeSet<&str> = INHERITED.into_iter().collect();
    assert!(names.is_subset(&allowed), "{names:?}");
    imports.close().await;
}

/// `npx` entries as the three hosts document them: Claude Desktop's (no `env`), Claude Code's
/// `.mcp.json` (`"type": "stdio"`, an empty `env`), Cursor's (`env` with a key of its own).
async fn npx_entries_of_claude_desktop_claude_code_and_cursor_import(path: &str) {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let memory = dir.path().join("memory.jsonl");
    let document = json!({"mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", shared.display().to_string()]
        },
        "everything": {
            "type": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-everything"],
            "env": {}
        },
        "memory": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-memory"],
            "env": {"MEMORY_FILE_PATH": memory.display().to_string(), "API_KEY": "its-own"}
        }
    }})
    .to_string();
    let imports = import(
        dir.path(),
        &document,
        &BTreeMap::new(),
        "[everything.tools.get-env]\nrisk = \"low\"\neffect = \"read\"",
        ConnectOptions::default(),
    )
    .await;
    assert_eq!(imports.servers.len(), 3);
    all_connected(&imports, "npx");
    let env = server_environment(&imports, "everything").await;
    // npm adds its own `npm_*` variables to what it is given; ours are still absent.
    only_the_default_set(&env, path, "npx, empty env");
    imports.close().await;
}

/// Claude Desktop's documented Python server entry (`uvx mcp-server-fetch`): `uvx` is looked
/// up on the default `PATH`; where it is not installed (setup.sh does not install it) the
/// refusal names the program and the `PATH` searched.
async fn a_uvx_entry_is_looked_up_on_the_default_path(path: &str) {
    let dir = tempfile::tempdir().unwrap();
    let document =
        json!({"mcpServers": {"fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}}})
            .to_string();
    let env: BTreeMap<String, String> = [("PATH".to_string(), path.to_string())].into();
    let is_file = |p: &Path| p.is_file();
    match resolve_program("uvx", &env, is_file) {
        Ok(found) => {
            // Installed here: found on our PATH, not started (it would download the server).
            let on_path: Vec<PathBuf> = std::env::split_paths(path).collect();
            assert!(on_path.iter().any(|d| d.join("uvx") == found), "{found:?}");
        }
        Err(refused) => {
            assert_eq!(
                refused,
                UpstreamError::NotFound {
                    command: "uvx".into(),
                    path: path.into()
                }
            );
            let imports = import(
                dir.path(),
                &document,
                &BTreeMap::new(),
                "",
                ConnectOptions::default(),
            )
            .await;
            let error = imports.servers[0].connected.as_ref().unwrap_err();
            let said = error.to_string();
            assert!(
                said.starts_with("`uvx` was not found on the server's PATH ("),
                "{said}"
            );
            assert!(said.contains(path), "{said}");
            imports.close().await;
        }
    }
}

/// A plain TCP relay on 127.0.0.1 to `target` that keeps the head of the first request on
/// each connection (its Host rewritten to the target's, which our server checks), so the test
/// sees the headers a client sent.
async fn recording_relay(target: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match inbound.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head)
                    .replace(&format!("127.0.0.1:{port}"), &format!("127.0.0.1:{target}"));
                seen.lock().unwrap().push(text.clone());
                let mut outbound = tokio::net::TcpStream::connect(("127.0.0.1", target))
                    .await
                    .unwrap();
                outbound.write_all(text.as_bytes()).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (port, heads)
}

/// HTTP entries with headers: Claude Code's (`"type": "http"`, a header with `${VAR}`) and
/// Cursor's (`url` and `headers`, no type), against our own server on 127.0.0.1, through a
/// relay that shows the headers arrive.
async fn http_entries_with_headers_import(_path: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_or_init(StoreKind::Books, &dir.path().join("books.sqlite")).unwrap();
    let seat = Seat::new(Principal::local("local-user", &[]));
    let ready =
        toolgate_wiring::dispatcher(ToolsetName::BooksV2, &store, &ExitsConfig::default(), seat)
            .unwrap();
    let upstream = support::spawn(McpServer::new(ready, "upstream"), HttpLimits::default()).await;
    let port: u16 = upstream
        .url
        .trim_end_matches("/mcp")
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let (relay, heads) = recording_relay(port).await;
    let url = format!("http://127.0.0.1:{relay}/mcp");
    let egress = Egress::new(
        support::loopback_http_allowlist(&[relay]),
        Arc::new(StaticResolver::new()),
        Arc::new(toolgate_core::trace::NoTrace),
    )
    .unwrap();
    let document = json!({"mcpServers": {
        "books": {
            "type": "http",
            "url": url,
            "headers": {"X-API-Key": "${BOOKS_API_KEY}"}
        },
        "books-cursor": {
            "url": url,
            "headers": {"API_KEY": "value"}
        }
    }})
    .to_string();
    let environment: BTreeMap<String, String> =
        [("BOOKS_API_KEY".to_string(), "key-from-env".to_string())].into();
    let connect = ConnectOptions {
        egress: Some(Arc::new(egress)),
        ..ConnectOptions::default()
    };
    let imports = import(
        dir.path(),
        &document,
        &environment,
        "[books]\nrisk = \"low\"\neffect = \"read\"\n[books_cursor]\nrisk = \"low\"\neffect = \"read\"",
        connect,
    )
    .await;
    all_connected(&imports, "http");
    let ready = dispatcher(&imports);
    for tool in ["books__books_get", "books_cursor__books_get"] {
        let text = untrusted_text(&call(&ready, tool, json!({"ids": [1]})).await);
        assert!(text.contains("Hunger Games"), "{tool}: {text}");
    }
    imports.close().await;
    let heads = heads.lock().unwrap().join("\n").to_ascii_lowercase();
    for header in ["x-api-key: key-from-env", "api_key: value"] {
        assert!(heads.contains(header), "{header} was not sent:\n{heads}");
    }
}
