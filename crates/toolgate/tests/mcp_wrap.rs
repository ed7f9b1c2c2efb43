//! `toolgate wrap` in front of the real @modelcontextprotocol/server-filesystem (installed,
//! pinned, by `scripts/setup.sh`), driven by the official MCP Inspector in CLI mode in both
//! protocol eras, as a host would start it: `toolgate wrap --risk low:read --risk
//! create_directory=medium:undoable_write -- node …/server-filesystem/dist/index.js FOLDER`. The tools are listed under our names with our
//! risks; a read runs; a write needs approval, which the Inspector cannot give (it shows no
//! elicitation form), so it is declined and the folder is unchanged. And as a host that shows
//! forms (elicitation declared, JSON-RPC written by hand on stdin, and the official Python SDK's
//! client as `scripts/setup.sh` installs it): the write is asked about first; declined, the
//! folder is unchanged; accepted, the file is written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{node, text};
use serde_json::{Value, json};

const ERAS: [&str; 2] = ["legacy", "modern"];

fn filesystem_server() -> PathBuf {
    node::installed(
        node::node_dir().join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"),
        "@modelcontextprotocol/server-filesystem",
    )
}

/// `wrap` before the server's command line, for `folder`.
fn wrap_args(folder: &Path, extra: &[&str]) -> Vec<String> {
    // Reads are low risk; create_directory is not marked destructive by the server, so it is
    // rated here as the write it is (the destructive ones are raised to high anyway).
    let mut args: Vec<String> = ["wrap", "--risk", "low:read", "--risk"]
        .into_iter()
        .chain(["create_directory=medium:undoable_write"])
        .map(String::from)
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push("--".into());
    args.push(node::node().display().to_string());
    args.push(filesystem_server().display().to_string());
    args.push(folder.display().to_string());
    args
}

/// One Inspector run against `toolgate wrap … FOLDER` (HOME in `dir`): its exit status, the
/// parsed `result` and its stderr.
fn inspect(
    dir: &Path,
    era: &str,
    method: &str,
    extra: &[&str],
    tag: &str,
) -> (std::process::ExitStatus, Value, String) {
    let out_path = dir.join(format!("{era}-{tag}.out"));
    let err_path = dir.join(format!("{era}-{tag}.err"));
    let trace = dir.join(format!("{era}-{tag}.trace.jsonl"));
    let wrap = wrap_args(&dir.join("shared"), &["--trace", trace.to_str().unwrap()]);
    let mut child = Command::new(node::node())
        .arg(node::inspector())
        .arg("--cli")
        .args(["--format", "json", "--protocol-era", era])
        .args(["--method", method])
        .args(extra)
        .args(["-e", &format!("HOME={}", dir.display())])
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_toolgate"))
        .args(&wrap)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .expect("node runs the Inspector");
    let status = node::wait_bounded(&mut child, Duration::from_secs(90), "the Inspector");
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    let mut reply: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{era} {method}: one JSON object on stdout ({e}, {status}): {stdout}\nstderr: {stderr}"
        )
    });
    (status, reply["result"].take(), stderr)
}

fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("content blocks: {result}"))
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The folder's files and their contents.
fn snapshot(folder: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

fn decision(trace: &Path, tool: &str) -> Value {
    let events: Vec<Value> = std::fs::read_to_string(trace)
        .unwrap_or_else(|e| panic!("{}: {e}", trace.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    events
        .into_iter()
        .find(|e| e["event"] == "tool_call" && e["gen_ai.tool.name"] == tool)
        .unwrap_or_else(|| panic!("no decision for {tool} in {}", trace.display()))
}

#[test]
fn wrap_lists_server_filesystem_under_our_names_and_risks_reads_and_declines_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("hello.txt"), "hello from the shared folder\n").unwrap();
    let before = snapshot(&shared);

    // `--list`: our names, risks and where each came from, then exit.
    let listed = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(wrap_args(&shared, &["--list"]))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env_remove("XDG_DATA_HOME")
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let table = text(&listed.stdout);
    let row = |tool: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("server_filesystem__{tool} ")))
            .unwrap_or_else(|| panic!("no {tool} row: {table}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // TOOL, REMOTE NAME, RISK, EFFECT, RISK FROM...
    assert_eq!(row("read_text_file")[2..4], ["low", "read"], "{table}");
    assert_eq!(row("list_directory")[2..4], ["low", "read"], "{table}");
    assert_eq!(
        row("create_directory")[2..5],
        ["medium", "undoable_write", "config"],
        "{table}"
    );
    // The server marks write_file destructive: our low rating is raised to high.
    assert_eq!(row("write_file")[2], "high", "{table}");
    assert!(table.contains("raised"), "{table}");
    assert!(
        text(&listed.stderr).contains("wrapping server-filesystem"),
        "{}",
        text(&listed.stderr)
    );
    let lock = dir
        .path()
        .join(".local/share/toolgate/wrap/server_filesystem.lock.json");
    assert!(
        lock.exists(),
        "first use pins the server in the data folder"
    );

    for era in ERAS {
        let (status, tools, stderr) = inspect(dir.path(), era, "tools/list", &[], "list");
        assert!(status.success(), "{era}: {tools}\n{stderr}");
        let tools = tools["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert!(
            names.iter().all(|n| n.starts_with("server_filesystem__")),
            "{era}: {names:?}"
        );
        let tool = |name: &str| {
            tools
                .iter()
                .find(|t| t["name"] == format!("server_filesystem__{name}"))
                .unwrap_or_else(|| panic!("{era}: no {name} in {names:?}"))
        };
        // Our ratings, as the hints a host shows.
        assert_eq!(tool("read_text_file")["annotations"]["readOnlyHint"], true);
        assert_eq!(tool("write_file")["annotations"]["readOnlyHint"], false);
        assert_eq!(tool("write_file")["annotations"]["destructiveHint"], true);

        let target = shared.join(format!("{era}-new.txt"));
        let args = serde_json::json!({"path": target, "content": "written through the gateway"});
        let (status, write, _) = inspect(
            dir.path(),
            era,
            "tools/call",
            &[
                "--tool-name",
                "server_filesystem__write_file",
                "--tool-args-json",
                &args.to_string(),
            ],
            "write",
        );
        assert!(!status.success(), "{era}: {write}");
        assert_eq!(write["isError"], true, "{era}: {write}");
        assert!(result_text(&write).contains("approval"), "{era}: {write}");
        assert_eq!(
            snapshot(&shared),
            before,
            "{era}: the declined write changed the folder"
        );
        let denied = decision(
            &dir.path().join(format!("{era}-write.trace.jsonl")),
            "server_filesystem__write_file",
        );
        assert_eq!(denied["outcome"], "approval_denied", "{era}: {denied}");

        let args = serde_json::json!({"path": shared.join("hello.txt")});
        let (status, read, stderr) = inspect(
            dir.path(),
            era,
            "tools/call",
            &[
                "--tool-name",
                "server_filesystem__read_text_file",
                "--tool-args-json",
                &args.to_string(),
            ],
            "read",
        );
        assert!(status.success(), "{era}: {read}\n{stderr}");
        assert_eq!(read["isError"], false, "{era}: {read}");
        assert!(
            result_text(&read).contains("hello from the shared folder"),
            "{era}: {read}"
        );
        let ran = decision(
            &dir.path().join(format!("{era}-read.trace.jsonl")),
            "server_filesystem__read_text_file",
        );
        assert_eq!(ran["outcome"], "ok", "{era}: {ran}");
    }
}

#[test]
fn wrap_refuses_what_it_cannot_serve_with_the_remedy() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["wrap"], "--url"),
        (
            &["wrap", "--risk", "lowest", "--", "npx", "-y", "pkg"],
            "not a risk level",
        ),
        (&["wrap", "--url", "http://127.0.0.1:9/mcp"], "--name"),
        (
            &["wrap", "--name", "my server", "--", "node", "s.js"],
            "cannot namespace",
        ),
    ];
    for (args, said) in cases {
        let out = common::toolgate(args, dir.path());
        assert!(!out.status.success(), "{args:?}");
        assert!(
            text(&out.stderr).contains(said),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

/// `toolgate wrap` as a host's child: JSON-RPC lines on its stdin and stdout.
struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Host {
    fn start(dir: &Path, folder: &Path) -> Host {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(wrap_args(folder, &[]))
            .current_dir(dir)
            .env("HOME", dir)
            .env_remove("XDG_DATA_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(File::create(dir.join("host.err")).unwrap())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Host {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a line on stdout in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout is JSON ({e}): {line}"))
    }

    /// Asks for `write_file` of `content` to `path` as call `id`; returns the form it is shown.
    fn write(&mut self, id: u64, path: &Path, content: &str) -> Value {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "server_filesystem__write_file",
            "arguments": {"path": path, "content": content}}}),
        );
        let question = self.next();
        assert_eq!(question["method"], "elicitation/create", "{question}");
        question
    }

    fn answer(&mut self, question: &Value, result: Value, id: u64) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": question["id"], "result": result}));
        let reply = self.next();
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_host_that_shows_forms_is_asked_before_a_write_and_a_decline_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("hello.txt"), "hello\n").unwrap();
    let before = snapshot(&shared);
    let mut host = Host::start(dir.path(), &shared);
    let params = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "a-host", "version": "0"}});
    host.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}));
    let reply = host.next();
    assert_eq!(reply["id"], 1, "{reply}");
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let target = shared.join("note.txt");
    let question = host.write(2, &target, "declined text");
    let asked = question["params"].to_string();
    assert!(asked.contains("server_filesystem__write_file"), "{asked}");
    let declined = host.answer(&question, json!({"action": "decline"}), 2);
    assert_eq!(declined["result"]["isError"], true, "{declined}");
    assert_eq!(
        snapshot(&shared),
        before,
        "the declined write changed the folder"
    );

    let question = host.write(3, &target, "approved text");
    let approved = host.answer(
        &question,
        json!({"action": "accept", "content": {"approve": true}}),
        3,
    );
    assert_eq!(approved["result"]["isError"], false, "{approved}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "approved text");
}

/// The official Python SDK's client (`mcp`, pinned, in the venv `scripts/setup.sh` makes under
/// `$TOOLGATE_PYTHON_MCP_DIR`, by default `~/.cache/toolgate/python-mcp`): one session with
/// `toolgate wrap` over stdio; its elicitation callback declines the first form and approves
/// the second. Prints one JSON object per step.
const PYTHON_SESSION: &str = r#"
import asyncio, json, os, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
import mcp_types as types

program, home, folder, *wrap = sys.argv[1:]
asked = []

async def answer(context, params):
    asked.append(params.message)
    if len(asked) == 1:
        return types.ElicitResult(action="decline")
    return types.ElicitResult(action="accept", content={"approve": True})

def text(result):
    return " ".join(getattr(c, "text", "") for c in result.content)

async def main():
    server = StdioServerParameters(command=program, args=wrap, env={"HOME": home})
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, elicitation_callback=answer) as session:
            await session.initialize()
            tools = await session.list_tools()
            print(json.dumps({"tools": [t.name for t in tools.tools]}), flush=True)
            target = folder + "/sdk.txt"
            for step in ["declined", "approved"]:
                result = await session.call_tool(
                    "server_filesystem__write_file", {"path": target, "content": step})
                print(json.dumps({"step": step, "is_error": result.is_error,
                                  "text": text(result), "asked": len(asked),
                                  "folder": sorted(os.listdir(folder))}), flush=True)
            read_back = await session.call_tool(
                "server_filesystem__read_text_file", {"path": target})
            print(json.dumps({"step": "read", "is_error": read_back.is_error,
                              "text": text(read_back), "asked": len(asked)}), flush=True)

asyncio.run(main())
"#;

#[test]
fn the_python_sdk_client_is_asked_before_a_write_and_its_decline_changes_nothing() {
    let python = common::node::python_mcp_sdk();
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("hello.txt"), "hello\n").unwrap();
    let script = dir.path().join("session.py");
    std::fs::write(&script, PYTHON_SESSION).unwrap();
    let mut child = Command::new(python)
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_toolgate"))
        .arg(dir.path())
        .arg(&shared)
        .args(wrap_args(&shared, &[]))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::null())
        .stdout(File::create(dir.path().join("python.out")).unwrap())
        .stderr(File::create(dir.path().join("python.err")).unwrap())
        .spawn()
        .unwrap();
    let status = node::wait_bounded(&mut child, Duration::from_secs(120), "the Python client");
    let stdout = std::fs::read_to_string(dir.path().join("python.out")).unwrap();
    let stderr = std::fs::read_to_string(dir.path().join("python.err")).unwrap();
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    let steps: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(steps.len(), 4, "{stdout}");
    let tools: Vec<&str> = steps[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"server_filesystem__write_file"),
        "{tools:?}"
    );
    assert!(tools.iter().all(|t| t.starts_with("server_filesystem__")));
    // Declined: asked once, refused, nothing written.
    assert_eq!(steps[1]["step"], "declined");
    assert_eq!(steps[1]["asked"], 1, "{}", steps[1]);
    assert_eq!(steps[1]["is_error"], true, "{}", steps[1]);
    assert_eq!(steps[1]["folder"], json!(["hello.txt"]), "{}", steps[1]);
    // Approved: asked again, written.
    assert_eq!(steps[2]["asked"], 2, "{}", steps[2]);
    assert_eq!(steps[2]["is_error"], false, "{}", steps[2]);
    assert_eq!(
        steps[2]["folder"],
        json!(["hello.txt", "sdk.txt"]),
        "{}",
        steps[2]
    );
    // The read is low risk: not asked.
    assert_eq!(steps[3]["asked"], 2, "{}", steps[3]);
    assert!(
        steps[3]["text"].as_str().unwrap().contains("approved"),
        "{}",
        steps[3]
    );
    assert_eq!(
        std::fs::read_to_string(shared.join("sdk.txt")).unwrap(),
        "approved"
    );
}
