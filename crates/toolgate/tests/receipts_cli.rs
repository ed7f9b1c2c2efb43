//! Signed receipts end to end, through the built binary: `toolgate receipts keygen` makes a
//! key, `toolgate serve --stdio` (driven by a real MCP client, rmcp's) signs the receipt of a
//! real `notes_create` write with it and records it in the audit, and `toolgate receipts
//! verify` checks it. Shows: a receipt verifies, and its retry (a replay) carries the same
//! signature; a tampered receipt fails (exit 1); after a rotation the old receipt verifies
//! while its public key is listed and fails once it is not; a key file others may read is
//! refused by both the server and `verify` with the fix (`chmod 600 FILE`); input that is not
//! JSON exits 2.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use common::{text, toolgate};

/// Writes a config file naming `signing_key` and `verify_keys`; returns its path.
fn write_config(dir: &Path, name: &str, signing_key: &Path, verify_keys: &[PathBuf]) -> PathBuf {
    let path = dir.join(name);
    let keys: Vec<String> = verify_keys
        .iter()
        .map(|k| format!("{:?}", k.display().to_string()))
        .collect();
    std::fs::write(
        &path,
        format!(
            "[receipts]\nsigning_key = {:?}\nverify_keys = [{}]\n",
            signing_key.display().to_string(),
            keys.join(", ")
        ),
    )
    .unwrap();
    path
}

/// `toolgate --config CONFIG receipts verify -` with `input` on standard input.
fn verify_stdin(dir: &Path, config: &Path, input: &str) -> Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "--config",
            config.to_str().unwrap(),
            "receipts",
            "verify",
            "-",
        ])
        .current_dir(dir)
        .env_remove("XDG_DATA_HOME")
        .env("HOME", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn verify_file(dir: &Path, config: &Path, receipt: &Value) -> Output {
    let file = dir.join("receipt.json");
    std::fs::write(&file, serde_json::to_string_pretty(receipt).unwrap()).unwrap();
    toolgate(
        &[
            "--config",
            config.to_str().unwrap(),
            "receipts",
            "verify",
            file.to_str().unwrap(),
        ],
        dir,
    )
}

/// Serves the notes over stdio with `config`, creates one note twice (the retry replays),
/// and closes the session; the receipts the host got in each result's `_meta`.
async fn write_a_note_twice(dir: &Path, config: &Path) -> Vec<Value> {
    let client = common::stdio::serve_configured(dir, config, "notes", "notes.sqlite").await;
    let note = json!({"title": "Receipt check", "body": "The zanzibar figure is 42."});
    let mut received = Vec::new();
    for _ in 0..2 {
        let params = CallToolRequestParams::new("notes_create".to_string())
            .with_arguments(note.as_object().cloned().unwrap());
        let result = client.call_tool(params).await.expect("a tool result");
        assert_ne!(result.is_error, Some(true), "{result:?}");
        let meta = result
            .meta
            .map(|m| Value::Object(m.0))
            .unwrap_or(Value::Null);
        received.push(meta["toolgate/receipt"].clone());
    }
    client.cancel().await.unwrap();
    received
}

/// The decision records of `notes_create` in the audit file, oldest first, once both are there.
async fn recorded_writes(dir: &Path) -> Vec<Value> {
    let audit = dir.join("audit.sqlite");
    let args = [
        "audit",
        "search",
        "--json",
        "--tool",
        "notes_create",
        "--audit-db",
        audit.to_str().unwrap(),
    ];
    // The server writes its audit out as it exits after the session closes.
    for _ in 0..100 {
        if audit.exists() {
            let out = toolgate(&args, dir);
            if out.status.success() {
                let page: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
                let mut entries = page["entries"].as_array().unwrap().clone();
                if entries.len() == 2 {
                    entries.reverse();
                    return entries.into_iter().map(|e| e["record"].clone()).collect();
                }
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the audit never held both writes");
}

fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let out = toolgate(&["receipts", "keygen", "--out", key.to_str().unwrap()], dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    let id = printed
        .lines()
        .find_map(|l| l.strip_prefix("key id: "))
        .unwrap()
        .to_string();
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    assert!(printed.contains("public key: "), "{printed}");
    (key, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writes_receipt_is_signed_verified_tamper_evident_and_survives_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (old_key, old_id) = keygen(dir, "old.key");
    let config = write_config(dir, "signing.toml", &old_key, &[]);

    let received = write_a_note_twice(dir, &config).await;
    let records = recorded_writes(dir).await;
    let (first, replay) = (&records[0]["receipt"], &records[1]["receipt"]);
    // The host got the very receipts the audit holds, in each result's `_meta`.
    assert_eq!(received, [first.clone(), replay.clone()]);
    assert_eq!(records[1]["duplicate"], true, "{records:#?}");
    assert_eq!(first["key_id"], old_id.as_str());
    assert_eq!(first["tool"], "notes_create");
    assert_eq!(first["principal"]["id"], "local-user");
    assert_eq!(first["args_digest"], records[0]["args_hash"]);
    // A retry returns the stored receipt: the very same signed receipt.
    assert_eq!(first, replay);

    // Verified, from a file and as JSON lines on standard input.
    let out = verify_file(dir, &config, first);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("verified: notes_create"));
    let lines = format!("{first}\n{replay}\n");
    let out = verify_stdin(dir, &config, &lines);
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert_eq!(text(&out.stdout).matches("verified").count(), 2);
    // The audit's export as it is: the writes' receipts verified, other lines skipped.
    let audit = dir.join("audit.sqlite");
    let export = toolgate(
        &[
            "audit",
            "export",
            "--format",
            "jsonl",
            "--audit-db",
            audit.to_str().unwrap(),
        ],
        dir,
    );
    assert!(export.status.success(), "{}", text(&export.stderr));
    let out = verify_stdin(dir, &config, &text(&export.stdout));
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert_eq!(text(&out.stdout).matches("verified").count(), 2);

    // Tampered: each changed field fails, exit 1.
    type Tamper = fn(&mut Value);
    let tampered: &[(&str, Tamper)] = &[
        ("tool", |r| r["tool"] = json!("notes_delete")),
        ("principal", |r| r["principal"]["id"] = json!("mallory")),
        ("effect", |r| r["effect"]["result"] = json!({"id": 999})),
        ("time", |r| r["time_unix"] = json!(1)),
    ];
    for (field, tamper) in tampered {
        let mut receipt = first.clone();
        tamper(&mut receipt);
        let out = verify_file(dir, &config, &receipt);
        assert_eq!(out.status.code(), Some(1), "{field}: {}", text(&out.stdout));
        assert!(
            text(&out.stdout).contains("failed: the signature does not match"),
            "{field}: {}",
            text(&out.stdout)
        );
    }
    // One bad receipt among good ones fails the run.
    let mut bad = first.clone();
    bad["version"] = json!(99);
    let out = verify_stdin(dir, &config, &format!("{first}\n{bad}\n"));
    assert_eq!(out.status.code(), Some(1));

    // Rotated: a new signing key, the old public key still listed: the old receipt verifies.
    let (new_key, new_id) = keygen(dir, "new.key");
    assert_ne!(new_id, old_id);
    let old_pub = PathBuf::from(format!("{}.pub", old_key.display()));
    let rotated = write_config(dir, "rotated.toml", &new_key, &[old_pub]);
    let out = verify_file(dir, &config, first);
    assert!(out.status.success());
    let out = verify_file(dir, &rotated, first);
    assert!(out.status.success(), "{}", text(&out.stdout));
    // The old key retired: its receipts fail, naming the key.
    let retired = write_config(dir, "retired.toml", &new_key, &[]);
    let out = verify_file(dir, &retired, first);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains(&format!("signed by key {old_id}, which is not among")),
        "{}",
        text(&out.stdout)
    );

    // Not JSON at all: exit 2.
    let out = verify_stdin(dir, &config, "this is not a receipt\n");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn a_signing_key_file_others_may_read_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (key, _) = keygen(dir, "receipts.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = write_config(dir, "signing.toml", &key, &[]);
    let fix = format!("chmod 600 {}", key.display());

    // The server does not start with it.
    let db = dir.join("notes.sqlite");
    let served = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["--config", config.to_str().unwrap()])
        .args(["serve", "--stdio", "--toolset", "notes"])
        .args(["--db", db.to_str().unwrap()])
        .current_dir(dir)
        .env_remove("XDG_DATA_HOME")
        .env("HOME", dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!served.status.success());
    let stderr = text(&served.stderr);
    assert!(
        stderr.contains(&fix) && stderr.contains("mode 644"),
        "{stderr}"
    );

    // Nor does verify use it: exit 2 with the same fix.
    let out = verify_file(dir, &config, &json!({}));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(&fix), "{}", text(&out.stderr));

    // Fixed as told, it is used.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = verify_file(dir, &config, &json!({}));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("failed: not a receipt"));
}
