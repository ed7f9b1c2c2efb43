//! `[console]`'s notifications are refused before anything is served when they could not be
//! sent as configured: a webhook without the environment variable of its signing secret (or
//! one naming a variable that is not set), mail notices without `[smtp]`, a misspelt key. Each
//! refusal names what to fix; the secret itself never comes from the file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::text;

const AUTH: &str = "[serve.auth]\nissuer = \"https://as.example\"\nresource = \"https://mcp.example/mcp\"\n[serve.auth.scopes]\n\"a\" = [\"notes\"]\n";

/// The server's refusal of `console` (the rest of `[console]`), with `env` set.
fn refused(console: &str, env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolgate.toml");
    std::fs::write(
        &path,
        format!(
            "{AUTH}[console]\nclient_id = \"c\"\n{console}[console.approvers]\nscopes = [\"a\"]\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "--config",
            path.to_str().unwrap(),
            "serve",
            "--http",
            "127.0.0.1:0",
        ])
        .current_dir(dir.path())
        .env_remove("XDG_DATA_HOME")
        .env_remove("TOOLGATE_TEST_UNSET_SECRET")
        .env("HOME", dir.path())
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(!out.status.success(), "served: {}", text(&out.stderr));
    text(&out.stderr)
}

#[test]
fn a_notification_that_could_not_be_sent_as_configured_is_refused_naming_the_fix() {
    let hook = "webhook_url = \"https://hooks.example.com/t\"\n";
    let unsigned = refused(hook, &[]);
    assert!(unsigned.contains("webhook_secret_env"), "{unsigned}");
    let unset = refused(
        &format!("{hook}webhook_secret_env = \"TOOLGATE_TEST_UNSET_SECRET\"\n"),
        &[],
    );
    assert!(
        unset.contains("TOOLGATE_TEST_UNSET_SECRET") && unset.contains("not set"),
        "{unset}"
    );
    let no_relay = refused("notify_email = [\"approvers@example.com\"]\n", &[]);
    assert!(no_relay.contains("[smtp]"), "{no_relay}");
    // A secret written into the file is not a key the section takes.
    let inline = refused(
        &format!("{hook}webhook_secret = \"s3cret\"\n"),
        &[("TOOLGATE_WEBHOOK_SECRET", "x")],
    );
    assert!(
        inline.contains("unknown field `webhook_secret`")
            && inline.contains("`webhook_secret_env`"),
        "the refusal names the keys the section takes: {inline}"
    );
}
