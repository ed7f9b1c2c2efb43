use serde_json::json;

use super::*;

const PROGRAM: &str = "/opt/toolgate/bin/toolgate";

fn request<'a>(toolsets: &'a [String], wrap_all: bool) -> InstallRequest<'a> {
    InstallRequest {
        program: PROGRAM,
        toolsets,
        wrap_all,
    }
}

fn notes() -> Vec<String> {
    vec!["notes".to_string()]
}

fn planned(host: Host, text: &str, wrap_all: bool) -> (HostFile, Plan) {
    let file = parse(host, text).unwrap();
    let toolsets = notes();
    let plan = plan(&file, &request(&toolsets, wrap_all)).unwrap();
    (file, plan)
}

fn entry<'a>(plan: &'a Plan, host: Host, name: &str) -> &'a Value {
    &plan.document[host.servers_key()][name]
}

#[test]
fn a_malformed_host_file_is_refused_and_left_untouched() {
    let cases: [(&str, &str); 6] = [
        ("{\"mcpServers\": {", "not valid JSON"),
        (
            "{\n  // my servers\n  \"mcpServers\": {}\n}",
            "comments and trailing commas",
        ),
        ("{\"mcpServers\": {},}", "not valid JSON"),
        ("[1, 2]", "top level is not a JSON object"),
        (
            "{\"mcpServers\": [\"fs\"]}",
            "\"mcpServers\" is not an object",
        ),
        (
            "{\"mcpServers\": {\"fs\": \"npx\"}}",
            "server \"fs\" is not an object",
        ),
    ];
    for (text, said) in cases {
        let refused = parse(Host::ClaudeDesktop, text).unwrap_err().to_string();
        assert!(refused.contains(said), "{text:?}: {refused}");
    }
    // VS Code's servers are under `servers`.
    let refused = parse(Host::Vscode, "{\"servers\": 3}").unwrap_err();
    assert!(refused.to_string().contains("\"servers\""), "{refused}");
}

#[test]
fn another_hosts_file_is_refused_not_given_a_second_servers_object() {
    let cases = [
        (Host::Vscode, "{\"mcpServers\": {}}", "--host claude-code"),
        (
            Host::Cursor,
            "{\"servers\": {}, \"inputs\": []}",
            "--host vscode",
        ),
        (
            Host::ClaudeDesktop,
            "{\"servers\": {}}",
            "not Claude Desktop's",
        ),
    ];
    for (host, text, said) in cases {
        let refused = parse(host, text).unwrap_err();
        assert!(
            matches!(refused, HostFileError::OtherHostsFormat { .. })
                && refused.to_string().contains(said),
            "{host}: {refused}"
        );
    }
    // Both keys: the host's own is edited, the other left as it is.
    assert!(parse(Host::Cursor, "{\"servers\": {}, \"mcpServers\": {}}").is_ok());
}

#[test]
fn an_unknown_host_is_refused_by_name() {
    for name in ["claude", "windsurf", "", "Cursor"] {
        let refused = name.parse::<Host>().unwrap_err().to_string();
        assert!(refused.contains("unknown host"), "{name}: {refused}");
    }
    for host in Host::ALL {
        assert_eq!(host.as_str().parse::<Host>().unwrap(), host);
    }
}

#[test]
fn each_host_file_is_found_where_its_host_documents_it() {
    let home = Path::new("/home/me");
    let cases = [
        (
            Host::ClaudeDesktop,
            "linux",
            "/home/me/.config/Claude/claude_desktop_config.json",
        ),
        (
            Host::ClaudeDesktop,
            "macos",
            "/home/me/Library/Application Support/Claude/claude_desktop_config.json",
        ),
        (Host::ClaudeCode, "linux", "/home/me/.claude.json"),
        (Host::Cursor, "macos", "/home/me/.cursor/mcp.json"),
        (Host::Vscode, "linux", "/home/me/.config/Code/User/mcp.json"),
        (
            Host::Vscode,
            "macos",
            "/home/me/Library/Application Support/Code/User/mcp.json",
        ),
    ];
    for (host, os, want) in cases {
        assert_eq!(host.default_file(home, os).unwrap(), Path::new(want));
    }
    assert!(Host::Cursor.default_file(home, "windows").is_err());
}

#[test]
fn unknown_keys_of_the_host_file_survive_the_edit() {
    let text = r#"{
    "numStartups": 42,
    "theme": "dark",
    "mcpServers": {
        "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me"], "env": {"DEBUG": "1"}, "disabled": false, "autoApprove": ["read_file"]}
    },
    "projects": {"/home/me/p": {"allowedTools": []}}
}
"#;
    let (file, plan) = planned(Host::ClaudeCode, text, true);
    let keys: Vec<&str> = plan.document.keys().map(String::as_str).collect();
    assert_eq!(keys, ["numStartups", "theme", "mcpServers", "projects"]);
    assert_eq!(
        plan.document["projects"],
        json!({"/home/me/p": {"allowedTools": []}})
    );
    let fs = entry(&plan, Host::ClaudeCode, "fs").as_object().unwrap();
    let keys: Vec<&str> = fs.keys().map(String::as_str).collect();
    assert_eq!(keys, ["command", "args", "env", "disabled", "autoApprove"]);
    assert_eq!(fs["env"], json!({"DEBUG": "1"}));
    // The four-space indentation and the final newline are the file's.
    let rendered = render(&file, &plan.document);
    assert!(
        rendered.starts_with("{\n    \"numStartups\": 42,"),
        "{rendered}"
    );
    assert!(rendered.ends_with("}\n"));
}

#[test]
fn wrapping_rewrites_each_entry_to_toolgate_wrap_with_its_env_passed_on_by_name() {
    let text = r#"{"mcpServers": {
  "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me"]},
  "github": {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x"}},
  "linear": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${LINEAR_TOKEN}"}}
}}"#;
    let (_, plan) = planned(Host::ClaudeCode, text, true);
    let cases = [
        (
            "filesystem",
            json!({"command": PROGRAM, "args": ["wrap", "--name", "filesystem", "--", "npx", "-y",
                "@modelcontextprotocol/server-filesystem", "/home/me"]}),
        ),
        (
            "github",
            json!({"command": PROGRAM, "args": ["wrap", "--name", "github", "--env",
                "GITHUB_PERSONAL_ACCESS_TOKEN", "--", "docker", "run", "-i", "--rm",
                "ghcr.io/github/github-mcp-server"],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x"}}),
        ),
        (
            "linear",
            json!({"type": "stdio", "command": PROGRAM, "args": ["wrap", "--name", "linear",
                "--url", "https://mcp.example.com/mcp",
                "--header-env", "Authorization=TOOLGATE_HEADER_AUTHORIZATION"],
                "env": {"TOOLGATE_HEADER_AUTHORIZATION": "Bearer ${LINEAR_TOKEN}"}}),
        ),
    ];
    for (name, want) in cases {
        assert_eq!(entry(&plan, Host::ClaudeCode, name), &want, "{name}");
        assert!(
            plan.changes
                .contains(&Change::Wrapped { name: name.into() }),
            "{name}: {:?}",
            plan.changes
        );
    }
    assert_eq!(
        entry(&plan, Host::ClaudeCode, "toolgate-notes"),
        &json!({"command": PROGRAM, "args": ["serve", "--stdio", "--toolset", "notes"]})
    );
}

#[test]
fn wrapping_twice_does_not_wrap_a_wrapped_entry() {
    let text = r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}}}"#;
    let (file, once) = planned(Host::Cursor, text, true);
    let again_text = render(&file, &once.document);
    let (_, twice) = planned(Host::Cursor, &again_text, true);
    assert_eq!(twice.document, once.document);
    assert!(!twice.writes(), "{:?}", twice.changes);
    assert!(
        twice
            .changes
            .contains(&Change::AlreadyWrapped { name: "fs".into() })
    );
    assert!(twice.changes.contains(&Change::Unchanged {
        name: "toolgate-notes".into()
    }));
    // An entry a person pointed at toolgate by another path is toolgate's too.
    let by_hand =
        r#"{"mcpServers": {"fs": {"command": "toolgate", "args": ["wrap", "--", "npx", "x"]}}}"#;
    let (_, plan) = planned(Host::Cursor, by_hand, true);
    assert!(
        plan.changes
            .contains(&Change::AlreadyWrapped { name: "fs".into() })
    );
}

#[test]
fn entries_wrap_cannot_carry_whole_are_left_as_they_are_with_the_reason() {
    let text = r#"{"servers": {
  "old": {"type": "sse", "url": "https://old.example.com/sse"},
  "withfile": {"type": "stdio", "command": "node", "args": ["s.js"], "envFile": "${workspaceFolder}/.env"},
  "login": {"type": "http", "url": "https://mcp.example.com/mcp", "oauth": {"clientId": "abc"}},
  "bad name!": {"type": "stdio", "command": "node"},
  "neither": {"type": "stdio"}
}}"#;
    let (file, plan) = planned(Host::Vscode, text, true);
    for (name, reason) in [
        ("old", "SSE"),
        ("withfile", "envFile"),
        ("login", "oauth"),
        ("bad name!", "namespace"),
        ("neither", "neither a command nor a URL"),
    ] {
        let change = plan
            .changes
            .iter()
            .find(|c| matches!(c, Change::Kept { name: n, .. } if n == name))
            .unwrap_or_else(|| panic!("{name} was not kept: {:?}", plan.changes));
        assert!(change.to_string().contains(reason), "{change}");
        assert_eq!(
            entry(&plan, Host::Vscode, name),
            &file.document["servers"][name]
        );
    }
}

#[test]
fn vscode_entries_say_their_type_and_an_http_entry_becomes_stdio() {
    let text = r#"{"inputs": [{"type": "promptString", "id": "token", "password": true}],
  "servers": {"remote": {"type": "http", "url": "https://api.example.com/mcp"},
              "local": {"command": "uvx", "args": ["mcp-server-fetch"]}}}"#;
    let (_, plan) = planned(Host::Vscode, text, true);
    assert_eq!(
        entry(&plan, Host::Vscode, "remote"),
        &json!({"type": "stdio", "command": PROGRAM,
                "args": ["wrap", "--name", "remote", "--url", "https://api.example.com/mcp"]})
    );
    assert_eq!(entry(&plan, Host::Vscode, "local")["type"], "stdio");
    assert_eq!(
        entry(&plan, Host::Vscode, "toolgate-notes"),
        &json!({"type": "stdio", "command": PROGRAM,
                "args": ["serve", "--stdio", "--toolset", "notes"]})
    );
    assert!(plan.document["inputs"].is_array());
}

#[test]
fn another_programs_entry_under_a_toolsets_name_is_refused_not_overwritten() {
    let text = r#"{"mcpServers": {"toolgate-notes": {"command": "python", "args": ["notes.py"]}}}"#;
    let file = parse(Host::ClaudeDesktop, text).unwrap();
    let toolsets = notes();
    let refused = plan(&file, &request(&toolsets, false)).unwrap_err();
    assert!(matches!(refused, HostFileError::NameTaken(ref n) if n == "toolgate-notes"));
}

#[test]
fn without_wrap_all_other_entries_are_not_touched() {
    let text = r#"{"mcpServers": {"fs": {"command": "npx", "args": ["x"]}}}"#;
    let (file, plan) = planned(Host::ClaudeDesktop, text, false);
    assert_eq!(
        entry(&plan, Host::ClaudeDesktop, "fs"),
        &file.document["mcpServers"]["fs"]
    );
    assert_eq!(plan.changes.len(), 1, "{:?}", plan.changes);
    // A file with no servers key gets one.
    let (_, plan) = planned(Host::ClaudeDesktop, "{\"globalShortcut\": \"\"}", false);
    assert!(entry(&plan, Host::ClaudeDesktop, "toolgate-notes").is_object());
}

#[test]
fn the_diff_shows_only_what_changes() {
    let text = "{\n  \"theme\": \"dark\",\n  \"mcpServers\": {}\n}\n";
    let (file, plan) = planned(Host::ClaudeDesktop, text, false);
    let shown = diff("claude.json", text, &render(&file, &plan.document));
    assert!(
        shown.starts_with("--- claude.json\n+++ claude.json (with toolgate)\n"),
        "{shown}"
    );
    assert!(shown.contains("-  \"mcpServers\": {}\n"), "{shown}");
    assert!(shown.contains("+    \"toolgate-notes\": {\n"), "{shown}");
    assert!(shown.contains("   \"theme\": \"dark\",\n"), "{shown}");
}

#[test]
fn only_this_files_backups_count_and_the_newest_wins() {
    let names = [
        "mcp.json",
        "mcp.json.toolgate-backup-100",
        "mcp.json.toolgate-backup-300",
        "mcp.json.toolgate-backup-300.written",
        "mcp.json.toolgate-backup-2x",
        "other.json.toolgate-backup-900",
        "mcp.json.toolgate-backup-20",
    ];
    assert_eq!(
        newest_backup("mcp.json", names),
        Some(("mcp.json.toolgate-backup-300", false))
    );
    assert_eq!(newest_backup("none.json", names), None);
    let absent = [
        "mcp.json.toolgate-backup-5",
        "mcp.json.toolgate-backup-9.absent",
    ];
    assert_eq!(
        newest_backup("mcp.json", absent),
        Some(("mcp.json.toolgate-backup-9.absent", true))
    );
    assert_eq!(
        backup_path(Path::new("/a/mcp.json"), 7, false),
        Path::new("/a/mcp.json.toolgate-backup-7")
    );
    assert_eq!(
        backup_path(Path::new("/a/mcp.json"), 7, true),
        Path::new("/a/mcp.json.toolgate-backup-7.absent")
    );
}

#[test]
fn a_file_that_did_not_exist_is_created_and_uninstall_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("claude_desktop_config.json");
    let file = absent(Host::ClaudeDesktop);
    let toolsets = notes();
    let plan = plan(&file, &request(&toolsets, true)).unwrap();
    let text = render(&file, &plan.document);
    assert!(
        text.starts_with("{\n  \"mcpServers\": {\n    \"toolgate-notes\""),
        "{text}"
    );
    // Planned on no file: refused once one has appeared.
    std::fs::write(&path, "{}").unwrap();
    assert!(matches!(
        write_with_backup(&path, None, &text, 1),
        Err(HostFileError::ChangedSinceRead { .. })
    ));
    std::fs::remove_file(&path).unwrap();
    let written = write_with_backup(&path, None, &text, 1).unwrap();
    assert!(written.backup.to_string_lossy().ends_with(".absent"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    let restored = restore(&path, false).unwrap();
    assert!(restored.removed);
    assert!(!path.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_file_changed_since_our_write_is_not_restored_over_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.json");
    let original = b"{\"mcpServers\": {}}";
    std::fs::write(&path, original).unwrap();
    let written = write_with_backup(
        &path,
        Some(&original[..]),
        "{\"mcpServers\": {\"x\": {}}}\n",
        1000,
    )
    .unwrap();
    assert_eq!(std::fs::read(&written.backup).unwrap(), original);
    std::fs::write(&path, "{\"edited\": true}").unwrap();
    let refused = restore(&path, false).unwrap_err();
    assert!(
        matches!(refused, HostFileError::ChangedSinceWrite { .. }),
        "{refused}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"edited\": true}");
    restore(&path, true).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), original);
    assert!(matches!(
        restore(&path, false),
        Err(HostFileError::NoBackup { .. })
    ));
}

#[test]
fn a_file_changed_between_reading_and_writing_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.json");
    std::fs::write(&path, "{\"a\": 2}").unwrap();
    let refused = write_with_backup(&path, Some(&b"{\"a\": 1}"[..]), "{}", 5).unwrap_err();
    assert!(matches!(refused, HostFileError::ChangedSinceRead { .. }));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\": 2}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "no backup, no temporary file");
}

#[test]
fn a_wrapped_http_entrys_header_values_stay_off_the_command_line() {
    let text = r#"{"mcpServers": {
  "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer sk-live-123", "X-Team": "blue", "x_team": "red"}},
  "odd": {"url": "https://mcp.example.com/mcp", "headers": {"X Team": "blue"}},
  "withenv": {"url": "https://mcp.example.com/mcp", "env": {"A": "b"}}
}}"#;
    let (_, plan) = planned(Host::Cursor, text, true);
    let remote = entry(&plan, Host::Cursor, "remote");
    let args = remote["args"].to_string();
    assert!(!args.contains("sk-live-123"), "{args}");
    assert!(!args.contains("blue"), "{args}");
    assert_eq!(
        remote["env"],
        json!({"TOOLGATE_HEADER_AUTHORIZATION": "Bearer sk-live-123",
            "TOOLGATE_HEADER_X_TEAM": "blue", "TOOLGATE_HEADER_X_TEAM_2": "red"})
    );
    assert!(
        args.contains(r#""--header-env","X-Team=TOOLGATE_HEADER_X_TEAM""#),
        "{args}"
    );
    assert!(
        args.contains(r#""--header-env","x_team=TOOLGATE_HEADER_X_TEAM_2""#),
        "{args}"
    );
    for name in ["odd", "withenv"] {
        assert!(
            plan.changes
                .iter()
                .any(|c| matches!(c, Change::Kept { name: n, .. } if n == name)),
            "{name}: {:?}",
            plan.changes
        );
    }
}
