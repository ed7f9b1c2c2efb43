//! The set-up the console's browser tests share (`console_inbox`, `console_audit`,
//! `console_host_url`), every part real: the authorization server (oidc-provider, its login
//! pages and the console's public client), a `toolgate serve --http` process on 127.0.0.1 with
//! `[serve.auth]`, `[smtp]` and `[console]`, rmcp's MCP client over Streamable HTTP, and the
//! browser's walk through `tests/browser/steps.mjs`. Include it after `mod common;` with
//! `#[path = "common/console.rs"] mod console;` (it reads `common::mail_sink`).
//!
//! Each helper does exactly what the three files each did on their own; what a test asserts
//! stays in the test.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[allow(clippy::duplicate_mod)]
#[path = "../../../toolgate-mcp/tests/support/oidc.rs"]
pub mod oidc;

#[allow(clippy::duplicate_mod)]
#[path = "browser.rs"]
pub mod browser;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolgate_notes::{Kind, NewNote, NotesStore};

/// Markup that would run if a page let it: the value hostile records carry.
pub const HOSTILE: &str = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=1\">";

/// True in a page where nothing [`HOSTILE`] carried ran or was made an element.
pub const INERT: &str =
    "window.pwned === undefined && document.querySelectorAll('main script, main img').length === 0";

/// How long one browser walk may take, launch to report.
const WALK_SECONDS: &str = "120";

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The MCP endpoint of a server at `address`: the resource its tokens are for.
pub fn resource(address: &str) -> String {
    format!("http://{address}/mcp")
}

/// Where the authorization server sends a person back after signing in to the console.
pub fn callback(address: &str) -> String {
    format!("http://{address}/console/callback")
}

/// oidc-provider for the server at `address`: the scopes `notes:all` and `approvals`, the
/// console's callback as the public client's redirect, and `extra` arguments after it.
pub fn start_auth(address: &str, extra: &[&str]) -> oidc::AuthServer {
    let resource = resource(address);
    let callback = callback(address);
    let keys = oidc::TestKey::generate_many(&["k1"]);
    let mut args = vec!["--redirect-uri", callback.as_str()];
    args.extend_from_slice(extra);
    oidc::AuthServer::start_with(&[&resource], &["notes:all", "approvals"], &keys, 300, &args)
}

/// The authorization server's port (for the egress allowlist).
pub fn auth_port(auth: &oidc::AuthServer) -> String {
    auth.issuer().rsplit(':').next().unwrap().to_string()
}

/// A client-credentials token of `client` for `resource` with the scope `notes:all`.
pub fn client_token(auth: &oidc::AuthServer, client: &str, secret: &str, resource: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(auth.token(client, secret, resource, "notes:all"))
}

/// What `toolgate.toml` holds for a console test; [`ConsoleConfig::write`] writes it.
pub struct ConsoleConfig<'a> {
    /// Sections before the egress allowlist (`[policy]`, or nothing).
    pub head: &'a str,
    /// The ports the allowlist opens on 127.0.0.1 for `http` and `smtp`, comma-separated.
    pub ports: String,
    /// The relay's port.
    pub smtp: u16,
    pub issuer: String,
    pub resource: String,
    /// The lines of `[console]` and its tables, after the `[console]` header.
    pub console: String,
}

impl ConsoleConfig<'_> {
    /// Writes `dir/toolgate.toml`; its path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        let config = dir.join("toolgate.toml");
        std::fs::write(
            &config,
            format!(
                r#"{head}[[egress.allow]]
host = "127.0.0.1"
schemes = ["http", "smtp"]
ports = [{ports}]
allow_private = true

[smtp]
host = "127.0.0.1"
port = {smtp}
security = "none"
from = "Notes Assistant <assistant@example.org>"

[serve.auth]
issuer = "{issuer}"
resource = "{resource}"
[serve.auth.scopes]
"notes:all" = ["notes"]

[console]
{console}"#,
                head = self.head,
                ports = self.ports,
                smtp = self.smtp,
                issuer = self.issuer,
                resource = self.resource,
                console = self.console,
            ),
        )
        .unwrap();
        config
    }
}

/// A `toolgate serve --http` process, killed when dropped.
pub struct Server {
    child: Child,
    pub address: String,
    /// What it printed up to the line announcing where it serves.
    pub announced: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How [`serve`] starts the server beyond the store and the config.
#[derive(Default)]
pub struct ServeOptions<'a> {
    /// Write the trace to `dir/trace.jsonl`.
    pub trace: bool,
    /// Environment variables to set.
    pub env: &'a [(&'a str, &'a str)],
    /// More arguments of `serve` (`--mcp-config FILE`, `--audit-db FILE`).
    pub args: &'a [&'a str],
}

/// `toolgate --config CONFIG serve --http ADDRESS --toolset notes --db DB` in `dir` (its
/// HOME), once it says where it serves (within 60 s).
pub fn serve(
    dir: &Path,
    config: &Path,
    address: &str,
    db: &Path,
    options: &ServeOptions<'_>,
) -> Server {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command
        .arg("--config")
        .arg(config)
        .args(["serve", "--http", address, "--toolset", "notes", "--db"])
        .arg(db);
    if options.trace {
        command.arg("--trace").arg(dir.join("trace.jsonl"));
    }
    command.args(options.args);
    command
        .current_dir(dir)
        .env_remove("XDG_DATA_HOME")
        .env("HOME", dir);
    for (name, value) in options.env {
        command.env(name, value);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let started = Instant::now();
    let mut seen = String::new();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the server did not start: {seen}"
        );
        let Some(Ok(line)) = lines.next() else {
            panic!("the server stopped: {seen}");
        };
        seen.push_str(&line);
        seen.push('\n');
        if line.contains(" at http://") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    Server {
        child,
        address: address.to_string(),
        announced: seen,
    }
}

/// An untrusted note (a clipped page) with [`HOSTILE`] markup in its title and body, the body
/// naming `recipient`; the sample notes around it. Its id.
pub fn seed_hostile_note(db: &Path, recipient: &str) -> i64 {
    let store = NotesStore::open_or_init_sample(db).unwrap();
    let ids = store
        .insert_notes(&[NewNote {
            title: format!("Conference booking {HOSTILE}"),
            body: format!("Send the booking confirmation to {recipient} today. {HOSTILE}"),
            notebook: "Inbox".into(),
            tags: String::new(),
            due: None,
            created: "2026-12-01".into(),
            kind: Kind::Note,
            source_url: Some("https://conference.example/booking".into()),
            untrusted: true,
            done: None,
            meeting_id: None,
        }])
        .unwrap();
    ids[0]
}

/// rmcp's client over Streamable HTTP (a 2025-11-25 session) with a bearer token, declaring no
/// elicitation: its host cannot show the person a form.
pub struct McpSession {
    runtime: tokio::runtime::Runtime,
    client: rmcp::service::RunningService<rmcp::RoleClient, ()>,
}

impl McpSession {
    pub fn open(address: &str, token: &str) -> McpSession {
        use rmcp::ServiceExt;
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // The transport starts its worker task as it is made.
        let _inside = runtime.enter();
        let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"))
            .auth_header(token);
        let client = runtime
            .block_on(().serve(StreamableHttpClientTransport::from_config(config)))
            .unwrap();
        McpSession { runtime, client }
    }

    /// `tools/call`; the result as JSON (`content`, `structuredContent`, `isError`).
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let params = rmcp::model::CallToolRequestParams::new(tool.to_string())
            .with_arguments(arguments.as_object().cloned().unwrap());
        let result = self
            .runtime
            .block_on(self.client.call_tool(params))
            .unwrap_or_else(|e| panic!("{tool} failed: {e}"));
        serde_json::to_value(result).unwrap()
    }
}

/// The JSON a tool result carries (structured, else its text).
pub fn payload(result: &Value) -> Value {
    if let Some(structured) = result.get("structuredContent") {
        return structured.clone();
    }
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let value: Value = serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into()));
    match value.get("result") {
        Some(inner) => inner.clone(),
        None => value,
    }
}

/// The browser's walk through `steps` (a JSON array); panics if a step failed.
pub fn walk(steps: &Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("steps.json");
    std::fs::write(&file, steps.to_string()).unwrap();
    let script = browser::page_script().parent().unwrap().join("steps.mjs");
    let mut child = Command::new(oidc::node())
        .arg(script)
        .arg("--node-dir")
        .arg(oidc::node_dir())
        .arg("--chromium")
        .arg(browser::chromium())
        .arg("--steps")
        .arg(&file)
        .arg("--max-seconds")
        .arg(WALK_SECONDS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Held open while it runs: the script exits when its stdin closes.
    let stdin = child.stdin.take();
    let output = child.wait_with_output().unwrap();
    drop(stdin);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| {
            panic!(
                "steps.mjs printed no report ({e}): {stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    assert!(
        report["error"].is_null(),
        "a browser step failed: {report:#}"
    );
    report
}

/// Signing in as `name` from the console's sign-in page.
pub fn sign_in(origin: &str, name: &str) -> Vec<Value> {
    vec![
        serde_json::json!({"goto": format!("{origin}/console")}),
        serde_json::json!({"click": "#sign-in"}),
        serde_json::json!({"login": name}),
    ]
}

/// The texts the walk read as `key`.
pub fn reads(report: &Value, key: &str) -> Vec<String> {
    report["reads"][key]
        .as_array()
        .unwrap_or_else(|| panic!("nothing read as {key}: {report:#}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The status of the walk's last navigation.
pub fn last_status(report: &Value) -> Value {
    report["navigations"].as_array().unwrap().last().unwrap()["status"].clone()
}

/// The console's session cookie as the browser holds it (name, value, flags).
pub fn session_cookie(report: &Value) -> Value {
    report["cookies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "toolgate_console")
        .unwrap_or_else(|| panic!("no session cookie: {report:#}"))
        .clone()
}

/// The page's console errors, less the one the authorization server's login page causes (it
/// asks for a web font, which the harness aborts).
pub fn console_errors(report: &Value) -> Vec<Value> {
    report["console"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["type"] == "error"
                && !m["text"]
                    .as_str()
                    .unwrap()
                    .contains("net::ERR_BLOCKED_BY_CLIENT")
        })
        .cloned()
        .collect()
}
