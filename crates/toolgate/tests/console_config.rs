//! `[console]` is refused before anything is served when it cannot be safe: without
//! `[serve.auth]` (nobody could sign in through the authorization server), over stdio, or
//! with a ticket wait the dispatcher would cut short; a misspelt key is refused when the file
//! loads. Each refusal names what to fix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{text, toolgate};

fn refused(config: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolgate.toml");
    std::fs::write(&path, config).unwrap();
    let mut all = vec!["--config", path.to_str().unwrap(), "serve"];
    all.extend_from_slice(args);
    let out = toolgate(&all, dir.path());
    assert!(!out.status.success(), "served: {}", text(&out.stderr));
    text(&out.stderr)
}

const CONSOLE: &str =
    "[console]\nclient_id = \"toolgate-console\"\n[console.approvers]\nscopes = [\"approvals\"]\n";

#[test]
fn a_console_without_authorization_is_refused() {
    let over_http = refused(CONSOLE, &["--http", "127.0.0.1:0"]);
    assert!(over_http.contains("[serve.auth]"), "{over_http}");
    let over_stdio = refused(CONSOLE, &["--stdio"]);
    assert!(over_stdio.contains("serve --http"), "{over_stdio}");
}

#[test]
fn a_console_setting_that_cannot_hold_is_refused_when_the_file_loads_or_serves() {
    let auth = "[serve.auth]\nissuer = \"https://as.example\"\nresource = \"https://mcp.example/mcp\"\n[serve.auth.scopes]\n\"a\" = [\"notes\"]\n";
    let long_wait = refused(
        &format!(
            "{auth}[console]\nclient_id = \"c\"\nticket_secs = 600\n[console.approvers]\nscopes = [\"a\"]\n"
        ),
        &["--http", "127.0.0.1:0"],
    );
    assert!(long_wait.contains("ticket_secs"), "{long_wait}");
    let unknown = refused(
        &format!("{auth}[console]\nclient_id = \"c\"\napprover = \"alice\"\n"),
        &["--http", "127.0.0.1:0"],
    );
    assert!(unknown.contains("approver"), "a misspelt key: {unknown}");
}
