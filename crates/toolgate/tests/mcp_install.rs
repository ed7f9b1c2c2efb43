//! `toolgate mcp install` / `uninstall` on copies of each host's configuration file, written
//! here as the hosts write them (with keys toolgate knows nothing of): the diff shown, the
//! answer asked on standard input, the backup, the rewritten entries, uninstall restoring the
//! file byte for byte, and malformed files refused with the file unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::text;
use serde_json::{Value, json};

const PROGRAM: &str = "/opt/toolgate/bin/toolgate";

/// The binary in `dir` (HOME there), with `answer` on standard input.
fn run(dir: &Path, args: &[&str], answer: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Claude Desktop's claude_desktop_config.json (two-space indentation, as it writes it).
fn claude_desktop() -> String {
    serde_json::to_string_pretty(&json!({
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {
            "filesystem": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Desktop"]
            },
            "github": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-github"],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"}
            }
        },
        "isUsingBuiltInNodeForMcp": false
    }))
    .unwrap()
}

/// Claude Code's ~/.claude.json: its own state around the user-scope servers.
fn claude_code() -> String {
    serde_json::to_string_pretty(&json!({
        "numStartups": 12,
        "installMethod": "npm",
        "autoUpdates": true,
        "tipsHistory": {"memory-command": 3},
        "mcpServers": {
            "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp"},
            "airtable": {
                "type": "stdio",
                "command": "npx",
                "args": ["-y", "airtable-mcp-server"],
                "env": {"AIRTABLE_API_KEY": "key_example"}
            }
        },
        "projects": {"/home/me/project": {"allowedTools": [], "hasTrustDialogAccepted": true}},
        "userID": "0123abcd"
    }))
    .unwrap()
        + "\n"
}

/// Cursor's ~/.cursor/mcp.json, written with four-space indentation.
fn cursor() -> String {
    let value = json!({
        "mcpServers": {
            "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
            "remote": {"url": "https://mcp.example.com/mcp", "headers": {"X-Team": "blue"}}
        }
    });
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(&value, &mut serializer).unwrap();
    String::from_utf8(out).unwrap() + "\n"
}

/// VS Code's mcp.json: `servers`, a `type` on each entry, and `inputs`.
fn vscode() -> String {
    serde_json::to_string_pretty(&json!({
        "inputs": [{"type": "promptString", "id": "perplexity-key",
                    "description": "Perplexity API Key", "password": true}],
        "servers": {
            "perplexity": {
                "type": "stdio",
                "command": "npx",
                "args": ["-y", "server-perplexity-ask"],
                "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}"}
            },
            "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"]}
        }
    }))
    .unwrap()
        + "\n"
}

fn backups(dir: &Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with(&format!("{name}.toolgate-backup-")) && !n.ends_with(".written")
        })
        .collect();
    found.sort();
    found
}

/// Install with --wrap-all on a copy of `host`'s file, answering yes; then uninstall.
/// `wrapped` names the entries that must now go through `toolgate wrap --name NAME` with the
/// arguments expected after `--name NAME`.
fn install_then_uninstall(host: &str, name: &str, original: &str, wrapped: &[(&str, Value)]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, original).unwrap();
    let path = file.to_str().unwrap();
    let args = [
        "mcp",
        "install",
        "--host",
        host,
        "--file",
        path,
        "--wrap-all",
        "--program",
        PROGRAM,
    ];

    // Asked, and answered no: nothing is written.
    let declined = run(dir.path(), &args, "n\n");
    assert!(declined.status.success(), "{}", text(&declined.stderr));
    assert!(text(&declined.stderr).contains("write these changes? [y/N]"));
    assert!(text(&declined.stdout).contains("nothing written"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);
    assert!(backups(dir.path(), name).is_empty());

    let out = run(dir.path(), &args, "y\n");
    assert!(out.status.success(), "{host}: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // The diff: the old file's lines, ours added.
    assert!(
        stdout.contains(&format!("--- {path}\n+++ {path} (with toolgate)\n")),
        "{host}: {stdout}"
    );
    assert!(
        stdout.contains("+") && stdout.contains("\"toolgate-notes\""),
        "{stdout}"
    );
    for (entry, _) in wrapped {
        assert!(
            stdout.contains(&format!("{entry}: wrapped")),
            "{host}: {stdout}"
        );
    }

    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let before: Value = serde_json::from_str(original).unwrap();
    let key = if host == "vscode" {
        "servers"
    } else {
        "mcpServers"
    };
    // Every other key survives, in its order.
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&written), keys(&before), "{host}");
    for (k, v) in before.as_object().unwrap() {
        if k != key {
            assert_eq!(&written[k], v, "{host}: {k}");
        }
    }
    let servers = &written[key];
    assert_eq!(servers["toolgate-notes"]["command"], PROGRAM);
    assert_eq!(
        servers["toolgate-notes"]["args"],
        json!(["serve", "--stdio", "--toolset", "notes"])
    );
    for (entry, rest) in wrapped {
        let got = &servers[*entry];
        assert_eq!(got["command"], PROGRAM, "{host}: {entry}: {got}");
        let mut want = vec![json!("wrap"), json!("--name"), json!(entry)];
        want.extend(rest.as_array().unwrap().iter().cloned());
        assert_eq!(got["args"], Value::Array(want), "{host}: {entry}");
        match before[key][*entry].get("headers") {
            // The entry's env is kept for the host to set on toolgate.
            None => assert_eq!(
                got.get("env"),
                before[key][*entry].get("env"),
                "{host}: {entry}"
            ),
            // An HTTP entry's header values move into its env, off the command line.
            Some(headers) => {
                let values = |m: &Value| {
                    let mut v: Vec<String> = m
                        .as_object()
                        .unwrap()
                        .values()
                        .map(|x| x.as_str().unwrap().to_string())
                        .collect();
                    v.sort();
                    v
                };
                assert_eq!(values(&got["env"]), values(headers), "{host}: {entry}");
                for value in values(headers) {
                    assert!(!got["args"].to_string().contains(&value), "{host}: {entry}");
                }
            }
        }
    }

    // The backup is the file as it was, byte for byte.
    let saved = backups(dir.path(), name);
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(std::fs::read_to_string(&saved[0]).unwrap(), original);

    // Installing again changes nothing: wrapped entries are not wrapped twice.
    let again = run(dir.path(), &args, "");
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("nothing to change"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(backups(dir.path(), name).len(), 1);

    let restored = run(
        dir.path(),
        &["mcp", "uninstall", "--host", host, "--file", path],
        "",
    );
    assert!(restored.status.success(), "{}", text(&restored.stderr));
    assert_eq!(std::fs::read(&file).unwrap(), original.as_bytes(), "{host}");
    assert!(backups(dir.path(), name).is_empty());
}

#[test]
fn claude_desktop_file_is_installed_into_and_restored_byte_for_byte() {
    install_then_uninstall(
        "claude-desktop",
        "claude_desktop_config.json",
        &claude_desktop(),
        &[
            (
                "filesystem",
                json!([
                    "--",
                    "npx",
                    "-y",
                    "@modelcontextprotocol/server-filesystem",
                    "/home/me/Desktop"
                ]),
            ),
            (
                "github",
                json!([
                    "--env",
                    "GITHUB_PERSONAL_ACCESS_TOKEN",
                    "--",
                    "npx",
                    "-y",
                    "@modelcontextprotocol/server-github"
                ]),
            ),
        ],
    );
}

#[test]
fn claude_code_file_is_installed_into_and_restored_byte_for_byte() {
    install_then_uninstall(
        "claude-code",
        ".claude.json",
        &claude_code(),
        &[
            ("sentry", json!(["--url", "https://mcp.sentry.dev/mcp"])),
            (
                "airtable",
                json!([
                    "--env",
                    "AIRTABLE_API_KEY",
                    "--",
                    "npx",
                    "-y",
                    "airtable-mcp-server"
                ]),
            ),
        ],
    );
}

#[test]
fn cursor_file_is_installed_into_and_restored_byte_for_byte() {
    install_then_uninstall(
        "cursor",
        "mcp.json",
        &cursor(),
        &[
            (
                "memory",
                json!(["--", "npx", "-y", "@modelcontextprotocol/server-memory"]),
            ),
            (
                "remote",
                json!([
                    "--url",
                    "https://mcp.example.com/mcp",
                    "--header-env",
                    "X-Team=TOOLGATE_HEADER_X_TEAM"
                ]),
            ),
        ],
    );
}

#[test]
fn vscode_file_is_installed_into_and_restored_byte_for_byte() {
    install_then_uninstall(
        "vscode",
        "mcp.json",
        &vscode(),
        &[
            (
                "perplexity",
                json!([
                    "--env",
                    "PERPLEXITY_API_KEY",
                    "--",
                    "npx",
                    "-y",
                    "server-perplexity-ask"
                ]),
            ),
            ("fetch", json!(["--", "uvx", "mcp-server-fetch"])),
        ],
    );
}

#[test]
fn a_malformed_host_file_is_refused_and_left_untouched() {
    let cases = [
        (
            "cursor",
            "{\"mcpServers\": {\"memory\": {\"command\": \"npx\",}}}",
            "not valid JSON",
        ),
        (
            "vscode",
            "{\n  // my servers\n  \"servers\": {}\n}\n",
            "comments and trailing commas",
        ),
        (
            "claude-desktop",
            "{\"mcpServers\": [\"filesystem\"]}",
            "\"mcpServers\" is not an object",
        ),
        ("claude-code", "[]", "not a JSON object"),
        // Claude's format given as VS Code's: not given a second servers object.
        (
            "vscode",
            "{\"mcpServers\": {\"memory\": {\"command\": \"npx\"}}}",
            "another host's format",
        ),
    ];
    for (host, body, said) in cases {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("host.json");
        std::fs::write(&file, body).unwrap();
        let out = run(
            dir.path(),
            &[
                "mcp",
                "install",
                "--host",
                host,
                "--file",
                file.to_str().unwrap(),
                "--yes",
            ],
            "",
        );
        assert!(!out.status.success(), "{host}: {}", text(&out.stdout));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("refused, left untouched") && stderr.contains(said),
            "{host}: {stderr}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), body);
        let entries = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(entries, 1, "{host}: no backup, no temporary file");
    }
    // An unknown host is refused by name before any file is read.
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &["mcp", "install", "--host", "windsurf", "--yes"],
        "",
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("windsurf"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn uninstall_refuses_to_restore_over_edits_made_since_our_write_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp.json");
    let original = cursor();
    std::fs::write(&file, &original).unwrap();
    let path = file.to_str().unwrap();
    let out = run(
        dir.path(),
        &[
            "mcp",
            "install",
            "--host",
            "cursor",
            "--file",
            path,
            "--yes",
            "--program",
            PROGRAM,
        ],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::write(&file, "{\"mcpServers\": {}}\n").unwrap();
    let uninstall = ["mcp", "uninstall", "--host", "cursor", "--file", path];
    let refused = run(dir.path(), &uninstall, "");
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("--force"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "{\"mcpServers\": {}}\n"
    );
    let mut forced = uninstall.to_vec();
    forced.push("--force");
    let out = run(dir.path(), &forced, "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);
}

#[test]
fn the_default_file_is_the_hosts_own_under_home() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join(".cursor");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("mcp.json"), cursor()).unwrap();
    let out = run(
        dir.path(),
        &["mcp", "install", "--host", "cursor", "--yes"],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("mcp.json")).unwrap()).unwrap();
    // Without --program, the host starts this very binary, by its full path.
    assert_eq!(
        written["mcpServers"]["toolgate-notes"]["command"],
        std::fs::canonicalize(env!("CARGO_BIN_EXE_toolgate"))
            .unwrap()
            .to_str()
            .unwrap()
    );
    // Without --wrap-all the other servers are as they were.
    assert_eq!(written["mcpServers"]["memory"]["command"], "npx");
}

#[test]
fn a_host_file_that_does_not_exist_yet_is_created_and_uninstall_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    // Claude Desktop installed (its folder exists) but its configuration never edited.
    let folder = dir.path().join(".config/Claude");
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("claude_desktop_config.json");
    let install = [
        "mcp",
        "install",
        "--host",
        "claude-desktop",
        "--yes",
        "--program",
        PROGRAM,
    ];
    let out = run(dir.path(), &install, "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("will be created"),
        "{}",
        text(&out.stdout)
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        written,
        json!({"mcpServers": {"toolgate-notes": {"command": PROGRAM,
            "args": ["serve", "--stdio", "--toolset", "notes"]}}})
    );
    let out = run(
        dir.path(),
        &["mcp", "uninstall", "--host", "claude-desktop"],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!file.exists(), "{}", text(&out.stdout));
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0);

    // A host whose folder is missing is not installed here: refused, nothing created.
    let out = run(
        dir.path(),
        &["mcp", "install", "--host", "cursor", "--yes"],
        "",
    );
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("is Cursor installed?"), "{stderr}");
    assert!(!dir.path().join(".cursor").exists());
}
