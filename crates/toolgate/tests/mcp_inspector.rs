//! `toolgate serve` driven by the official MCP Inspector in CLI mode (installed, pinned, by
//! `scripts/setup.sh`), in both protocol eras: `legacy` (initialize, 2025-11-25) and `modern`
//! (2026-07-28: `server/discover` and per-request `_meta`, no initialize). Over stdio each
//! Inspector run spawns the real binary with HOME and `--db` in the test's own folder; over
//! HTTP it talks to one `serve --http` on 127.0.0.1, stopped by SIGTERM at the end. Each run
//! prints one JSON object; the assertions are on what the tools, resources and prompts actually
//! returned.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
// It loads `common/node.rs` too, for its own tests' sake: the same finder twice, on purpose.
#[allow(clippy::duplicate_mod)]
#[path = "../../toolgate-mcp/tests/support/oidc.rs"]
mod oidc;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::node;
use serde_json::Value;

const ERAS: [&str; 2] = ["legacy", "modern"];

/// Where the Inspector finds the server.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// It spawns `toolgate serve --stdio --toolset NAME --db DIR/NAME.sqlite` itself.
    Stdio(&'a str),
    /// A running `toolgate serve --http` at this URL.
    Http(&'a str),
    /// A running `toolgate serve --http` at this URL that needs this bearer token.
    Authorized(&'a str, &'a str),
    /// It spawns `toolgate --config FILE serve --stdio --no-toolset`: a gateway in front of
    /// the MCP servers that configuration imports.
    Gateway(&'a Path),
}

/// One Inspector run: `method` (with `extra` options) against `target`; the parsed `result`.
fn inspect(dir: &Path, era: &str, target: Target, method: &str, extra: &[&str]) -> Value {
    let (status, result, stderr) = inspect_run(dir, era, target, method, extra);
    assert!(
        status.success(),
        "{era} {method} {extra:?} failed ({status}):\nresult: {result}\nstderr: {stderr}"
    );
    result
}

/// One Inspector run, successful or not: its exit status, the parsed `result` and its stderr.
fn inspect_run(
    dir: &Path,
    era: &str,
    target: Target,
    method: &str,
    extra: &[&str],
) -> (std::process::ExitStatus, Value, String) {
    let label = match target {
        Target::Stdio(toolset) => toolset.to_string(),
        Target::Http(_) | Target::Authorized(..) => "http".to_string(),
        Target::Gateway(_) => "gateway".to_string(),
    };
    // A call's files are named after its tool too, so two calls in one era do not share them.
    let tool = match extra {
        ["--tool-name", name, ..] => format!("-{name}"),
        _ => String::new(),
    };
    let tag = format!("{era}-{label}-{}{tool}", method.replace('/', "_"));
    let out_path = dir.join(format!("{tag}.out"));
    let err_path = dir.join(format!("{tag}.err"));
    let mut command = Command::new(node::node());
    command
        .arg(node::inspector())
        .arg("--cli")
        .args(["--format", "json", "--protocol-era", era])
        .args(["--method", method])
        .args(extra);
    match target {
        Target::Stdio(toolset) => {
            command
                .args(["-e", &format!("HOME={}", dir.display())])
                // Options before `--`, the server command after it (so our flags stay ours).
                .arg("--")
                .arg(env!("CARGO_BIN_EXE_toolgate"))
                .args(["serve", "--stdio", "--toolset", toolset, "--db"])
                .arg(dir.join(format!("{toolset}.sqlite")));
        }
        Target::Gateway(config) => {
            command
                .args(["-e", &format!("HOME={}", dir.display())])
                .arg("--")
                .arg(env!("CARGO_BIN_EXE_toolgate"))
                .arg("--config")
                .arg(config)
                .args(["serve", "--stdio", "--no-toolset", "--trace"])
                .arg(dir.join(format!("{tag}.trace.jsonl")));
        }
        Target::Http(url) => {
            command.args(["--server-url", url, "--transport", "http"]);
        }
        Target::Authorized(url, token) => {
            command
                .args(["--server-url", url, "--transport", "http"])
                .args(["--header", &format!("Authorization: Bearer {token}")]);
        }
    }
    let mut child = command
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .expect("node runs the Inspector");
    let status = node::wait_bounded(&mut child, Duration::from_secs(60), "the Inspector");
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    let mut reply: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{era} {method}: one JSON object on stdout ({e}, {status}): {stdout}\nstderr: {stderr}"
        )
    });
    (status, reply["result"].take(), stderr)
}

fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {result}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// A successful tool result's one text block, parsed (our tools answer JSON text).
fn tool_json(result: &Value) -> Value {
    assert_eq!(result["isError"], false, "{result}");
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text block: {result}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("JSON text ({e}): {text}"))
}

/// One `tools/call` of `tool` with the Inspector's argument options `args`; the result's JSON.
fn call_tool(dir: &Path, era: &str, target: Target, tool: &str, args: &[&str]) -> Value {
    let options = [&["--tool-name", tool][..], args].concat();
    tool_json(&inspect(dir, era, target, "tools/call", &options))
}

/// The books-v2 checks of one era against one target: the list, a search and a get.
fn check_books(dir: &Path, era: &str, target: Target) {
    let listed = inspect(dir, era, target, "tools/list", &[]);
    assert_eq!(
        tool_names(&listed),
        ["books_get", "books_search", "books_set_status", "books_tag"],
        "{era}"
    );
    let get = &listed["tools"][0];
    assert_eq!(get["annotations"]["readOnlyHint"], true, "{era}: {get}");
    assert_eq!(get["inputSchema"]["required"][0], "ids", "{era}: {get}");

    let found = call_tool(
        dir,
        era,
        target,
        "books_search",
        &[
            "--tool-args-json",
            r#"{"author":"Suzanne Collins","sort":"year_asc"}"#,
        ],
    );
    assert_eq!(found["result"]["total_matches"], 3, "{era}: {found}");
    let first = &found["result"]["books"][0];
    assert_eq!(
        first["title"], "The Hunger Games (The Hunger Games, #1)",
        "{era}"
    );
    let id = first["id"].as_i64().unwrap();

    let got = call_tool(
        dir,
        era,
        target,
        "books_get",
        &["--tool-arg", &format!("ids=[{id}]")],
    );
    let book = &got["result"]["books"][0];
    assert_eq!(book["id"], id, "{era}: {got}");
    assert_eq!(book["authors"], "Suzanne Collins", "{era}: {got}");
    assert_eq!(book["year"], 2008, "{era}: {got}");
    assert_eq!(got["result"]["not_found"], Value::Array(vec![]), "{era}");
}

#[test]
fn inspector_lists_and_calls_books_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    for era in ERAS {
        check_books(dir.path(), era, Target::Stdio("books-v2"));
    }
}

/// `toolgate serve --http 127.0.0.1:0 --toolset TOOLSET` and the URL it says it listens at.
fn serve_http(dir: &Path, toolset: &str) -> (Child, String) {
    serve_http_at(dir, toolset, "127.0.0.1:0", &[], &[])
}

/// `toolgate serve --http ADDRESS --toolset TOOLSET EXTRA...` and the URL it listens at.
/// `extra` goes before `serve` (global options), `serve_extra` after it.
fn serve_http_at(
    dir: &Path,
    toolset: &str,
    address: &str,
    extra: &[&str],
    serve_extra: &[&str],
) -> (Child, String) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(extra)
        .args(["serve", "--http", address, "--toolset", toolset, "--db"])
        .arg(dir.join(format!("{toolset}.sqlite")))
        .args(serve_extra)
        .current_dir(dir)
        .env_remove("XDG_DATA_HOME")
        .env("HOME", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    // It says where it listens on stderr; the rest of stderr is drained so it never blocks.
    let stderr = server.stderr.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let url = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .expect("the server says where it listens");
        // Other lines may name loopback URLs too (a plain-http test issuer): the endpoint is
        // the one ending in /mcp.
        if let Some(at) = line.find("http://127.0.0.1:") {
            let url: String = line[at..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .collect();
            let url = url.trim_end_matches(',');
            if url.ends_with("/mcp") {
                break url.to_string();
            }
        }
    };
    assert!(url.ends_with("/mcp"), "{url}");
    (server, url)
}

/// SIGTERM, and the server exits 0 within a bounded wait.
fn stop(mut server: Child) {
    let killed = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = node::wait_bounded(&mut server, Duration::from_secs(20), "the HTTP server");
    assert!(status.success(), "{status}");
}

#[test]
fn inspector_over_http_lists_and_calls_books_and_notes_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    let (books, books_url) = serve_http(dir.path(), "books-v2");
    let (notes, notes_url) = serve_http(dir.path(), "notes");
    for era in ERAS {
        check_books(dir.path(), era, Target::Http(&books_url));
        check_notes(dir.path(), era, Target::Http(&notes_url));
    }
    stop(books);
    stop(notes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_with_a_bearer_token_lists_and_calls_notes_in_both_eras() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let keys = oidc::TestKey::generate_many(&["k1"]);
    let auth = oidc::AuthServer::start(&[&resource], &["notes:all"], &keys, 300);
    let issuer = auth.issuer();
    let config = common::write_auth_config(dir.path(), &issuer, &resource, "notes:all", "notes");
    let trace = dir.path().join("serve.trace.jsonl");
    let (server, url) = serve_http_at(
        dir.path(),
        "notes",
        &format!("127.0.0.1:{port}"),
        &["--config", config.to_str().unwrap()],
        &["--trace", trace.to_str().unwrap()],
    );
    let token = auth
        .token("client-a", "secret-a", &resource, "notes:all")
        .await;
    let checks = {
        let (dir, url, token) = (dir.path().to_path_buf(), url.clone(), token.clone());
        tokio::task::spawn_blocking(move || {
            for era in ERAS {
                check_notes(&dir, era, Target::Authorized(&url, &token));
            }
        })
    };
    checks.await.unwrap();
    stop(server);
    // Each request's authorization decision is in the server's trace, as the token's principal.
    let decisions: Vec<serde_json::Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "auth")
        .collect();
    for method in ["tools/list", "tools/call"] {
        assert!(
            decisions.iter().any(|d| d["decision"] == "allow"
                && d["rpc.method"] == method
                && d["principal"] == "client-a"
                && d["resource"] == resource.as_str()),
            "{method}: {decisions:?}"
        );
    }
    // Nothing the server or the Inspector wrote holds the token.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).to_string();
            assert!(!text.contains(&token), "{} holds the token", path.display());
        }
    }
}

/// The notes checks of one era against one target: the list, a write, and a search and a get
/// that find exactly it.
fn check_notes(dir: &Path, era: &str, target: Target) {
    let listed = inspect(dir, era, target, "tools/list", &[]);
    let names = tool_names(&listed);
    for tool in ["notes_create", "notes_get", "notes_search", "notes_delete"] {
        assert!(names.contains(&tool.to_string()), "{era}: {names:?}");
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "{era}: the list is in name order");

    // A write through the Inspector, then a search and a get that find exactly it.
    let title = format!("Inspector {era} checklist");
    let created = call_tool(
        dir,
        era,
        target,
        "notes_create",
        &[
            "--tool-args-json",
            &serde_json::json!({"title": title, "body": "zanzibar quokka", "notebook": "Work"})
                .to_string(),
        ],
    );
    let note = &created["result"]["created"];
    assert_eq!(note["title"], title.as_str(), "{era}: {created}");
    assert_eq!(note["notebook"], "Work", "{era}: {created}");
    let id = note["id"].as_i64().unwrap();

    let found = call_tool(
        dir,
        era,
        target,
        "notes_search",
        &["--tool-arg", &format!("query={era} zanzibar")],
    );
    assert_eq!(found["result"]["total_matches"], 1, "{era}: {found}");
    assert_eq!(found["result"]["hits"][0]["id"], id, "{era}: {found}");

    let got = call_tool(
        dir,
        era,
        target,
        "notes_get",
        &["--tool-arg", &format!("note_id={id}")],
    );
    assert_eq!(got["result"]["id"], id, "{era}: {got}");
    assert_eq!(got["result"]["body"], "zanzibar quokka", "{era}: {got}");
    assert_eq!(got["result"]["title"], title.as_str(), "{era}: {got}");
}

#[test]
fn inspector_lists_and_calls_notes_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    for era in ERAS {
        check_notes(dir.path(), era, Target::Stdio("notes"));
    }
}

#[test]
fn inspector_lists_and_reads_notes_resources_and_prompts_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    let notes = Target::Stdio("notes");
    for era in ERAS {
        let listed = inspect(dir.path(), era, notes, "resources/list", &[]);
        let first = &listed["resources"][0];
        assert_eq!(first["uri"], "note://1", "{era}: {listed}");
        assert_eq!(first["mimeType"], "application/json", "{era}: {first}");
        assert!(
            first["name"].as_str().is_some_and(|n| !n.is_empty()),
            "{era}: {first}"
        );
        // The Inspector follows every nextCursor: all notes, each once, in id order, over
        // several pages of 50.
        let ids: Vec<i64> = listed["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let uri = r["uri"].as_str().unwrap();
                uri.strip_prefix("note://").unwrap().parse().unwrap()
            })
            .collect();
        assert!(ids.len() > 50, "{era}: {} notes", ids.len());
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{era}: {ids:?}");

        let templates = inspect(dir.path(), era, notes, "resources/templates/list", &[]);
        assert_eq!(
            templates["resourceTemplates"][0]["uriTemplate"], "note://{id}",
            "{era}: {templates}"
        );

        let read = inspect(
            dir.path(),
            era,
            notes,
            "resources/read",
            &["--uri", "note://1"],
        );
        let contents = &read["contents"][0];
        assert_eq!(contents["uri"], "note://1", "{era}: {read}");
        let note: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
        assert_eq!(note["result"]["id"], 1, "{era}: {note}");
        assert_eq!(note["result"]["title"], first["name"], "{era}: {note}");

        let prompts = inspect(dir.path(), era, notes, "prompts/list", &[]);
        let names: Vec<&str> = prompts["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(names.contains(&"todos_from_meeting"), "{era}: {names:?}");

        let prompt = inspect(
            dir.path(),
            era,
            notes,
            "prompts/get",
            &[
                "--prompt-name",
                "todos_from_meeting",
                "--prompt-args",
                "meeting=quarterly zanzibar",
            ],
        );
        let message = &prompt["messages"][0];
        assert_eq!(message["role"], "user", "{era}: {prompt}");
        let text = message["content"]["text"].as_str().unwrap();
        assert!(text.contains("\"quarterly zanzibar\""), "{era}: {text}");
    }
}

/// A `toolgate.toml` importing the pinned npm server-everything over stdio, rating only
/// `get-sum` (low, read): every other tool of it is unrated, so high risk.
fn gateway_config(dir: &Path) -> std::path::PathBuf {
    let everything = node::installed(
        node::node_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        "@modelcontextprotocol/server-everything",
    );
    let servers = serde_json::json!({"mcpServers": {"everything": {
        "command": node::node().display().to_string(),
        "args": [everything.display().to_string(), "stdio"],
    }}});
    std::fs::write(dir.join("servers.json"), servers.to_string()).unwrap();
    let config = dir.join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp]\nconfig = \"{}\"\nreceipts = \"{}\"\n\
             [mcp.servers.everything.tools.get-sum]\nrisk = \"low\"\neffect = \"read\"\n",
            dir.join("servers.json").display(),
            dir.join("receipts.sqlite").display()
        ),
    )
    .unwrap();
    config
}

/// The text of a tool result's content blocks, joined.
fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("content blocks: {result}"))
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn inspector_through_the_gateway_lists_and_calls_server_everything_in_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    let config = gateway_config(dir.path());
    for era in ERAS {
        let target = Target::Gateway(&config);
        let listed = tool_names(&inspect(dir.path(), era, target, "tools/list", &[]));
        for name in [
            "everything__echo",
            "everything__get_sum",
            "everything__get_env",
        ] {
            assert!(listed.contains(&name.to_string()), "{era}: {listed:?}");
        }
        assert!(
            listed.iter().all(|n| n.starts_with("everything__")),
            "{listed:?}"
        );

        let sum = inspect(
            dir.path(),
            era,
            target,
            "tools/call",
            &[
                "--tool-name",
                "everything__get_sum",
                "--tool-args-json",
                r#"{"a":2,"b":3}"#,
            ],
        );
        assert_eq!(sum["isError"], false, "{era}: {sum}");
        assert!(result_text(&sum).contains("5"), "{era}: {sum}");
        let untrusted = sum["content"].as_array().unwrap().iter().any(|b| {
            b["_meta"]["toolgate/untrusted"].is_object() || b["_meta"]["toolgate/untrusted"] == true
        });
        assert!(
            untrusted,
            "{era}: the upstream's text is not marked untrusted: {sum}"
        );

        // Unrated, so high risk: the Inspector cannot answer an approval request, so the call
        // is denied and never forwarded.
        let (status, echo, _) = inspect_run(
            dir.path(),
            era,
            target,
            "tools/call",
            &[
                "--tool-name",
                "everything__echo",
                "--tool-args-json",
                r#"{"message":"hi"}"#,
            ],
        );
        assert!(!status.success(), "{era}: {echo}");
        assert_eq!(echo["isError"], true, "{era}: {echo}");
        assert!(result_text(&echo).contains("approval"), "{era}: {echo}");

        // One trace in front of the third-party server: each call's decision is in it.
        for (tool, outcome) in [
            ("everything__get_sum", "ok"),
            ("everything__echo", "approval_denied"),
        ] {
            let path = dir
                .path()
                .join(format!("{era}-gateway-tools_call-{tool}.trace.jsonl"));
            let events: Vec<Value> = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let decision = events
                .iter()
                .find(|e| e["event"] == "tool_call" && e["gen_ai.tool.name"] == tool)
                .unwrap_or_else(|| panic!("{era}: no decision for {tool}: {events:#?}"));
            assert_eq!(decision["outcome"], outcome, "{era}: {decision}");
        }
    }
    assert!(
        dir.path().join("servers.lock.json").exists(),
        "first use pins the server"
    );
}

#[test]
fn inspector_through_the_gateway_in_front_of_another_toolgate_calls_its_books() {
    let dir = tempfile::tempdir().unwrap();
    let servers = serde_json::json!({"mcpServers": {"books": {
        "command": env!("CARGO_BIN_EXE_toolgate"),
        "args": ["serve", "--stdio", "--toolset", "books-v2", "--db",
                 dir.path().join("upstream-books.sqlite").display().to_string()],
    }}});
    std::fs::write(dir.path().join("servers.json"), servers.to_string()).unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp]\nconfig = \"{}\"\nreceipts = \"{}\"\n[mcp.servers.books]\nrisk = \"low\"\neffect = \"read\"\n",
            dir.path().join("servers.json").display(),
            dir.path().join("receipts.sqlite").display()
        ),
    )
    .unwrap();
    let target = Target::Gateway(&config);
    let listed = tool_names(&inspect(dir.path(), "modern", target, "tools/list", &[]));
    assert_eq!(
        listed,
        [
            "books__books_get",
            "books__books_search",
            "books__books_set_status",
            "books__books_tag"
        ]
    );
    let got = inspect(
        dir.path(),
        "modern",
        target,
        "tools/call",
        &[
            "--tool-name",
            "books__books_get",
            "--tool-args-json",
            r#"{"ids":[1]}"#,
        ],
    );
    assert_eq!(got["isError"], false, "{got}");
    assert!(result_text(&got).contains("Suzanne Collins"), "{got}");
}
