//! Our Streamable HTTP server as the official SDKs' clients find it: a whole session (connect,
//! list, call, end, close) with the TypeScript SDK's clients that `scripts/setup.sh` installs
//! (`@modelcontextprotocol/sdk` 1.x, whose 2025-11-25 sessions end with an HTTP DELETE, and
//! `@modelcontextprotocol/client` 2.x) and the Python SDK's client (`mcp`, in its own venv), none
//! reporting an error or warning; and the end of a
//! 2025-11-25 session on the wire, answered as the SDKs' own servers answer it: 200 and an
//! empty body (the Python SDK's client logs "Session termination failed: 202" for rmcp's own
//! 202), 404 for a session nobody holds, 405 under 2026-07-28, which has no sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../toolgate/tests/common/node.rs"]
#[allow(dead_code)]
mod node_install;
mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::tool::{Tool, ToolBuilder, ToolOutput};
use toolgate_core::{Caller, Dispatcher, Effect, Principal, Registry, Risk};
use toolgate_mcp::{HttpLimits, McpServer};

fn echo_tool() -> Tool {
    ToolBuilder::<Value>::from_schema(
        "echo_text",
        1,
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["text"],
            "properties": {"text": {"type": "string", "maxLength": 100}}
        }),
    )
    .describe("Echoes its text.", "testing.", None, "the text.")
    .policy(Risk::Low, Effect::Read, "It changes nothing.")
    .read(|_ctx, args: Value| async move { Ok(ToolOutput::new(json!({"echo": args["text"]}))) })
    .unwrap()
}

async fn start() -> support::Spawned {
    let registry = Arc::new(Registry::new(vec![echo_tool()]).unwrap());
    let principal = Principal::local("tester", &[]).with_catalogue(registry.names());
    let caller = Caller::new(Dispatcher::new(Arc::clone(&registry)).unwrap());
    let server = McpServer::serving(&registry, caller, principal, "sdk-clients-test");
    support::spawn(server, HttpLimits::default()).await
}

/// A 2025-11-25 session opened with `initialize` and `notifications/initialized`: its id.
async fn open_session(http: &reqwest::Client, url: &str) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialize.to_string())
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
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .body(initialized.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    session
}

async fn delete(http: &reqwest::Client, url: &str, revision: &str, session: &str) -> (u16, String) {
    let response = http
        .delete(url)
        .header("mcp-protocol-version", revision)
        .header("mcp-session-id", session)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn the_end_of_a_session_is_answered_200_as_the_sdks_servers_answer_it() {
    let server = start().await;
    let http = support::http();
    let session = open_session(&http, &server.url).await;

    // 2026-07-28 has no sessions: a DELETE under it is not allowed, and ends nothing.
    let (status, _) = delete(&http, &server.url, "2026-07-28", &session).await;
    assert_eq!(status, 405);

    // The Python SDK's client accepts 200 and 204 (and 405); the SDKs' servers send 200.
    assert_eq!(
        delete(&http, &server.url, "2025-11-25", &session).await,
        (200, String::new())
    );
    // Ended: a request naming it, or a second DELETE, finds no session.
    let (status, body) = delete(&http, &server.url, "2025-11-25", &session).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(support::message_of(&body)["error"]["code"], -32001);
    let (status, _) = delete(&http, &server.url, "2025-11-25", "never-opened").await;
    assert_eq!(status, 404);
    let listed = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let response = http
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .body(listed.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

/// Runs `session.mjs` with one SDK line against `url`: its stdout, after checking that it
/// exited well and wrote nothing to stderr.
fn sdk_session(url: &str, line: &str) -> String {
    let node_modules = node_install::node_dir().join("node_modules");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk_clients/session.mjs");
    let mut command = Command::new(node_install::node());
    command.arg(&script).arg(&node_modules).arg(url).arg(line);
    quiet_session(command, line)
}

/// Runs `command` (a client's whole session): its stdout, after checking that it exited well
/// and wrote nothing to stderr (where the SDKs log their warnings and errors).
fn quiet_session(mut command: Command, line: &str) -> String {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = node_install::wait_bounded(&mut child, Duration::from_secs(60), line);
    let mut stdout = String::new();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{line}: {status}\n{stdout}\n{stderr}");
    assert!(
        stderr.trim().is_empty(),
        "{line}: the SDK reported something:\n{stderr}"
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_sdk_client_reports_an_error_or_warning_over_a_whole_session() {
    node_install::installed(
        node_install::node_dir().join("node_modules/@modelcontextprotocol/client/package.json"),
        "the TypeScript SDK's client (@modelcontextprotocol/client)",
    );
    let server = start().await;
    let url = server.url.clone();
    let v1 = tokio::task::spawn_blocking({
        let url = url.clone();
        move || sdk_session(&url, "v1")
    })
    .await
    .unwrap();
    // 1.x speaks 2025-11-25: a session, ended with a DELETE it accepts.
    assert!(v1.contains("listed echo_text"), "{v1}");
    assert!(v1.contains("from the sdk"), "{v1}");
    assert!(v1.contains("terminated (forgotten)"), "{v1}");
    assert!(v1.ends_with("closed\n"), "{v1}");
    let v2 = tokio::task::spawn_blocking(move || sdk_session(&url, "v2"))
        .await
        .unwrap();
    assert!(v2.contains("from the sdk"), "{v2}");
    assert!(v2.ends_with("closed\n"), "{v2}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_logs_no_warning_over_a_whole_session() {
    let python = node_install::python_mcp_sdk();
    let server = start().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk_clients/session.py");
    let mut command = Command::new(python);
    command.arg(&script).arg(&server.url);
    let out = tokio::task::spawn_blocking(move || quiet_session(command, "python"))
        .await
        .unwrap();
    assert!(out.contains("initialized 2025-11-25"), "{out}");
    assert!(out.contains("listed echo_text"), "{out}");
    assert!(out.contains("from the sdk"), "{out}");
    assert!(out.ends_with("closed\n"), "{out}");
}
