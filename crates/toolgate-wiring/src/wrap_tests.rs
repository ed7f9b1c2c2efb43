use super::*;

fn command(words: &[&str]) -> Upstream {
    Upstream::Command(words.iter().map(|w| w.to_string()).collect())
}

fn request(upstream: Upstream) -> WrapRequest {
    WrapRequest {
        upstream,
        name: None,
        env: Vec::new(),
        risks: Vec::new(),
        lock: None,
    }
}

#[test]
fn a_server_is_named_after_its_package_or_script_not_its_runner() {
    let cases: [(Upstream, Option<&str>); 11] = [
        (
            command(&[
                "npx",
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/home/me",
            ]),
            Some("server-filesystem"),
        ),
        (
            command(&[
                "npx",
                "-y",
                "@modelcontextprotocol/server-everything@2025.9.25",
            ]),
            Some("server-everything"),
        ),
        (
            command(&["uvx", "mcp-server-fetch"]),
            Some("mcp-server-fetch"),
        ),
        (
            command(&["uvx", "mcp-server-git==0.6"]),
            Some("mcp-server-git"),
        ),
        (
            command(&[
                "/usr/bin/node",
                "/x/node_modules/@m/server-filesystem/dist/index.js",
                "/d",
            ]),
            Some("server-filesystem"),
        ),
        (command(&["python3", "weather.py"]), Some("weather")),
        (
            command(&["pnpm", "dlx", "@acme/mcp-tasks"]),
            Some("mcp-tasks"),
        ),
        (
            command(&["/opt/bin/github-mcp-server", "stdio"]),
            Some("github-mcp-server"),
        ),
        (command(&["npx"]), None),
        (
            Upstream::Url {
                url: "https://mcp.linear.app/mcp".into(),
                headers: vec![],
                header_env: vec![],
            },
            Some("mcp.linear.app"),
        ),
        (
            Upstream::Url {
                url: "http://127.0.0.1:8765/mcp".into(),
                headers: vec![],
                header_env: vec![],
            },
            Some("127.0.0.1"),
        ),
    ];
    for (upstream, want) in cases {
        assert_eq!(derived_name(&upstream).as_deref(), want, "{upstream:?}");
    }
}

#[test]
fn a_name_that_cannot_namespace_tools_is_refused_with_the_remedy() {
    let url = request(Upstream::Url {
        url: "http://127.0.0.1:8765/mcp".into(),
        headers: vec![],
        header_env: vec![],
    });
    let refused = server_name(&url).unwrap_err().to_string();
    assert!(refused.contains("--name"), "{refused}");
    let mut named = url.clone();
    named.name = Some("local".into());
    assert_eq!(
        server_name(&named).unwrap(),
        ("local".into(), "local".into())
    );
    named.name = Some("my server".into());
    assert!(matches!(server_name(&named), Err(WrapError::BadName(_))));
    let fs = request(command(&[
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem",
    ]));
    assert_eq!(
        server_name(&fs).unwrap(),
        ("server-filesystem".into(), "server_filesystem".into())
    );
}

#[test]
fn risk_flags_rate_the_server_or_one_tool_and_bad_ones_are_refused() {
    let flags: Vec<String> = [
        "low:read",
        "write_file=high",
        "edit_file = medium:undoable_write",
    ]
    .map(String::from)
    .to_vec();
    let rated = ratings(None, &flags).unwrap().unwrap();
    assert_eq!(
        rated.server,
        Rating {
            risk: Some(Risk::Low),
            effect: Some(Effect::Read)
        }
    );
    assert_eq!(rated.tools["write_file"].risk, Some(Risk::High));
    assert_eq!(rated.tools["write_file"].effect, None);
    assert_eq!(rated.tools["edit_file"].effect, Some(Effect::UndoableWrite));
    for bad in ["lowest", "=high", "low:sideways", "x=", ""] {
        let refused = ratings(None, &[bad.to_string()]).unwrap_err();
        assert!(
            matches!(refused, WrapError::BadRisk { .. }),
            "{bad}: {refused}"
        );
    }
}

#[test]
fn flags_rate_over_the_configured_ratings_and_no_flag_keeps_them() {
    let configured: ServerRatings =
        toml::from_str("risk = \"medium\"\n[tools.read_file]\nrisk = \"low\"").unwrap();
    assert_eq!(
        ratings(Some(&configured), &[]).unwrap(),
        Some(configured.clone())
    );
    let over = ratings(Some(&configured), &["high".to_string()])
        .unwrap()
        .unwrap();
    assert_eq!(over.server.risk, Some(Risk::High));
    assert_eq!(over.tools["read_file"].risk, Some(Risk::Low));
    assert_eq!(ratings(None, &[]).unwrap(), None);
}

#[test]
fn the_servers_file_names_variables_and_never_holds_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut asked = request(command(&[
        "docker",
        "run",
        "-i",
        "ghcr.io/github/github-mcp-server",
    ]));
    asked.name = Some("github".into());
    asked.env = vec!["GITHUB_TOKEN".into(), "NOT_SET".into()];
    asked.risks = vec!["low".into()];
    let ours = BTreeMap::from([("GITHUB_TOKEN".to_string(), "ghp_secret".to_string())]);
    let prepared = prepare(&McpSettings::default(), &asked, dir.path(), &ours).unwrap();
    let text = std::fs::read_to_string(&prepared.servers_file).unwrap();
    assert!(!text.contains("ghp_secret"), "{text}");
    let document: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        document,
        json!({"mcpServers": {"github": {"command": "docker",
            "args": ["run", "-i", "ghcr.io/github/github-mcp-server"],
            "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}}})
    );
    assert_eq!(prepared.unset_env, ["NOT_SET"]);
    let file_name = prepared
        .servers_file
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        file_name.starts_with("github.") && file_name.ends_with(".json"),
        "{file_name}"
    );
    assert_eq!(prepared.servers_file.parent(), Some(dir.path()));
    assert_eq!(
        prepared.settings.config.as_deref(),
        Some(prepared.servers_file.as_path())
    );
    assert_eq!(
        prepared.settings.lock,
        Some(dir.path().join("github.lock.json")),
        "the lock is keyed by the name"
    );
    assert_eq!(
        prepared.settings.servers["github"].server.risk,
        Some(Risk::Low)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&prepared.servers_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }
    // The one-server file is what the import path reads.
    let servers = toolgate_mcp_client::config::parse(&text, &ours).unwrap();
    assert_eq!(servers.len(), 1);
}

#[test]
fn a_url_is_imported_over_http_with_its_headers_and_bad_headers_are_refused() {
    let upstream = Upstream::Url {
        url: "https://mcp.example.com/mcp".into(),
        headers: vec!["Authorization: Bearer ${TOKEN}".into()],
        header_env: vec![],
    };
    assert_eq!(
        servers_document("remote", &upstream, &[]).unwrap(),
        json!({"mcpServers": {"remote": {"type": "http", "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": "Bearer ${TOKEN}"}}}})
    );
    let bad = Upstream::Url {
        url: "https://mcp.example.com/mcp".into(),
        headers: vec!["no colon".into()],
        header_env: vec![],
    };
    assert!(matches!(
        servers_document("r", &bad, &[]),
        Err(WrapError::BadHeader(_))
    ));
    assert!(matches!(
        servers_document("r", &upstream, &["X".into()]),
        Err(WrapError::EnvWithUrl)
    ));
    assert!(matches!(
        servers_document("c", &command(&["x"]), &["1BAD".into()]),
        Err(WrapError::BadEnv(_))
    ));
}

#[test]
fn two_command_lines_under_one_name_never_share_a_file_but_share_the_pins() {
    let dir = tempfile::tempdir().unwrap();
    let none = BTreeMap::new();
    let mut first = request(command(&[
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/a",
    ]));
    first.name = Some("filesystem".into());
    let mut second = first.clone();
    second.upstream = command(&["npx", "-y", "@modelcontextprotocol/server-filesystem", "/b"]);
    let a = prepare(&McpSettings::default(), &first, dir.path(), &none).unwrap();
    let b = prepare(&McpSettings::default(), &second, dir.path(), &none).unwrap();
    let again = prepare(&McpSettings::default(), &first, dir.path(), &none).unwrap();
    assert_ne!(a.servers_file, b.servers_file);
    assert_eq!(a.servers_file, again.servers_file);
    assert!(
        std::fs::read_to_string(&a.servers_file)
            .unwrap()
            .contains("\"/a\"")
    );
    assert!(
        std::fs::read_to_string(&b.servers_file)
            .unwrap()
            .contains("\"/b\"")
    );
    assert_eq!(a.settings.lock, b.settings.lock);
    // --lock names another.
    let mut locked = first.clone();
    locked.lock = Some(dir.path().join("mine.lock.json"));
    let c = prepare(&McpSettings::default(), &locked, dir.path(), &none).unwrap();
    assert_eq!(c.settings.lock, Some(dir.path().join("mine.lock.json")));
}

#[test]
fn a_header_from_a_variable_is_written_as_a_reference_never_its_value() {
    let upstream = Upstream::Url {
        url: "https://mcp.example.com/mcp".into(),
        headers: vec![],
        header_env: vec!["Authorization=TOOLGATE_HEADER_AUTHORIZATION".into()],
    };
    assert_eq!(
        servers_document("remote", &upstream, &[]).unwrap(),
        json!({"mcpServers": {"remote": {"type": "http", "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": "${TOOLGATE_HEADER_AUTHORIZATION}"}}}})
    );
    for bad in [
        "Authorization",
        "=VAR",
        "Authorization=",
        "Author ization=VAR",
        "A=1VAR",
        "A=V-R",
    ] {
        assert!(
            matches!(header_from_env(bad), Err(WrapError::BadHeaderEnv(_))),
            "{bad}"
        );
    }
}
