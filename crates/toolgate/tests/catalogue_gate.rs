//! The catalogue gate, run as CI runs it: every toolset now against its committed release
//! snapshot (catalogue/releases/<toolset>.json), and a deliberately changed copy caught with
//! the right kinds and exit code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{text, toolgate};
use serde_json::{Value, json};
use toolgate_catalogue::Snapshot;
use toolgate_wiring::ToolsetName;

fn releases() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../catalogue/releases")
}

/// The reviewed policy changes since the releases, when there are any.
fn reviewed() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../catalogue/reviewed.json");
    path.exists().then_some(path)
}

fn snapshot_now(toolset: &str, dir: &Path) -> PathBuf {
    let out = dir.join(format!("{toolset}.json"));
    let run = toolgate(
        &[
            "catalogue",
            "snapshot",
            "--toolset",
            toolset,
            "--out",
            out.to_str().unwrap(),
        ],
        dir,
    );
    assert!(run.status.success(), "{toolset}: {}", text(&run.stderr));
    out
}

fn check(old: &Path, new: &Path, extra: &[&str], dir: &Path) -> (i32, String, String) {
    let mut args = vec![
        "catalogue",
        "check",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let run = toolgate(&args, dir);
    (
        run.status.code().unwrap(),
        text(&run.stdout),
        text(&run.stderr),
    )
}

#[test]
fn every_toolset_keeps_the_contract_of_its_committed_release() {
    let dir = tempfile::tempdir().unwrap();
    let accept = reviewed();
    for toolset in ToolsetName::ALL {
        let name = toolset.as_str();
        let release = releases().join(format!("{name}.json"));
        assert!(
            release.exists(),
            "{name} has no release snapshot: `toolgate catalogue snapshot --toolset {name} --out catalogue/releases/{name}.json`"
        );
        let now = snapshot_now(name, dir.path());
        let mut extra = vec![];
        let accept_arg;
        if let Some(file) = &accept {
            accept_arg = file.to_str().unwrap().to_string();
            extra = vec!["--accept", accept_arg.as_str()];
        }
        let (code, stdout, stderr) = check(&release, &now, &extra, dir.path());
        assert_eq!(
            code, 0,
            "{name} breaks its release contract or has an unreviewed policy change:\n{stdout}{stderr}"
        );
    }
}

/// books-v2's release with a field removed from one tool's input and another tool's risk
/// lowered (and with it its approval), resealed as a snapshot would be.
fn changed_copy(release: &Snapshot) -> (Snapshot, String, String) {
    let mut changed = release.clone();
    let narrowed = changed
        .tools
        .iter_mut()
        .find(|t| {
            t.input_schema["properties"]
                .as_object()
                .is_some_and(|p| !p.is_empty())
        })
        .unwrap();
    let field = narrowed.input_schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    narrowed.input_schema["properties"]
        .as_object_mut()
        .unwrap()
        .remove(&field);
    if let Some(required) = narrowed.input_schema["required"].as_array_mut() {
        required.retain(|r| r != &json!(field));
    }
    narrowed.reseal();
    let narrowed_name = narrowed.name.clone();
    let lowered = changed
        .tools
        .iter_mut()
        .find(|t| t.risk != toolgate_core::Risk::Low)
        .unwrap();
    lowered.risk = toolgate_core::Risk::Low;
    lowered.approval_in.clear();
    lowered.reseal();
    let lowered_name = lowered.name.clone();
    (changed, narrowed_name, lowered_name)
}

#[test]
fn a_changed_copy_is_caught_with_the_right_kinds_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let release_path = releases().join("books-v2.json");
    let release = Snapshot::from_json(&std::fs::read_to_string(&release_path).unwrap()).unwrap();
    let (changed, narrowed, lowered) = changed_copy(&release);
    let changed_path = dir.path().join("changed.json");
    std::fs::write(&changed_path, changed.to_json()).unwrap();

    let (code, stdout, stderr) = check(&release_path, &changed_path, &["--json"], dir.path());
    assert_eq!(code, 1, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let rows: Vec<(String, String, String)> = report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["tool"].as_str().unwrap().to_string(),
                c["rule"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        rows.contains(&(
            narrowed.clone(),
            "input_field_removed".into(),
            "breaking".into()
        )),
        "{rows:?}"
    );
    assert!(
        rows.contains(&(
            lowered.clone(),
            "risk_lowered".into(),
            "policy (unreviewed)".into()
        )),
        "{rows:?}"
    );
    assert_eq!(report["verdict"]["passes"], false);

    // The table says the same in words.
    let (code, table, _) = check(&release_path, &changed_path, &[], dir.path());
    assert_eq!(code, 1);
    assert!(
        table.contains("input_field_removed") && table.contains("FAILS"),
        "{table}"
    );

    // Only the policy change, reviewed with the entries the JSON offers: passes. Unreviewed: fails.
    let mut policy_only = release.clone();
    let tool = policy_only
        .tools
        .iter_mut()
        .find(|t| t.name == lowered)
        .unwrap();
    *tool = changed.tool(&lowered).unwrap().clone();
    let policy_path = dir.path().join("policy.json");
    std::fs::write(&policy_path, policy_only.to_json()).unwrap();
    let (code, stdout, _) = check(&release_path, &policy_path, &["--json"], dir.path());
    assert_eq!(code, 1, "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let review = json!({"format": 1, "accepted": report["unreviewed_policy_changes"]});
    let review_path = dir.path().join("reviewed.json");
    std::fs::write(&review_path, review.to_string()).unwrap();
    let accept = review_path.to_str().unwrap();
    let (code, stdout, stderr) = check(
        &release_path,
        &policy_path,
        &["--accept", accept],
        dir.path(),
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("policy (reviewed)"), "{stdout}");
    // A review does not excuse a breaking change.
    let (code, _, _) = check(
        &release_path,
        &changed_path,
        &["--accept", accept],
        dir.path(),
    );
    assert_eq!(code, 1);
}

#[test]
fn unreadable_input_exits_2_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let release_path = releases().join("books-v1.json");
    let mut newer: Value =
        serde_json::from_str(&std::fs::read_to_string(&release_path).unwrap()).unwrap();
    newer["format"] = json!(2);
    let newer_path = dir.path().join("newer.json");
    std::fs::write(&newer_path, newer.to_string()).unwrap();
    let missing = dir.path().join("missing.json");
    let bad_review = dir.path().join("review.json");
    std::fs::write(
        &bad_review,
        r#"{"format": 1, "accepted": [], "everything": true}"#,
    )
    .unwrap();
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "a snapshot from a newer format",
            vec![release_path.to_str().unwrap(), newer_path.to_str().unwrap()],
            "format 2 is newer than this toolgate reads (format 1)",
        ),
        (
            "a missing file",
            vec![missing.to_str().unwrap(), release_path.to_str().unwrap()],
            "cannot be read",
        ),
        (
            "a review file with a field it does not know",
            vec![
                release_path.to_str().unwrap(),
                release_path.to_str().unwrap(),
                "--accept",
                bad_review.to_str().unwrap(),
            ],
            "unknown field",
        ),
    ];
    for (what, args, expected) in cases {
        let mut all = vec!["catalogue", "check"];
        all.extend(args);
        let run = toolgate(&all, dir.path());
        assert_eq!(run.status.code(), Some(2), "{what}");
        assert!(
            text(&run.stderr).contains(expected),
            "{what}: {}",
            text(&run.stderr)
        );
    }
    // The same release checked against itself is clean.
    let (code, stdout, _) = check(&release_path, &release_path, &[], dir.path());
    assert_eq!(code, 0);
    assert!(stdout.contains("no differences"), "{stdout}");
}

#[test]
fn imported_tools_are_snapshotted_and_a_rating_lowered_is_a_policy_change() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let servers = json!({"mcpServers": {"books": {
        "command": env!("CARGO_BIN_EXE_toolgate"),
        "args": ["serve", "--stdio", "--toolset", "books-v2", "--db",
                 dir.join("books.sqlite").display().to_string()],
    }}});
    std::fs::write(dir.join("servers.json"), servers.to_string()).unwrap();
    // Configuration files of their own names: a ./toolgate.toml would configure the child too.
    let rated = |file: &str, set_status_risk: &str| {
        std::fs::write(
            dir.join(file),
            format!(
                "[mcp.servers.books]\nrisk = \"low\"\neffect = \"read\"\n\
                 [mcp.servers.books.tools.books_set_status]\nrisk = \"{set_status_risk}\"\neffect = \"undoable_write\"\n"
            ),
        )
        .unwrap();
    };
    rated("before.toml", "high");
    rated("after.toml", "medium");
    for (config, out) in [("before.toml", "old.json"), ("after.toml", "new.json")] {
        let run = toolgate(
            &[
                "--config",
                config,
                "--mcp-config",
                "servers.json",
                "catalogue",
                "snapshot",
                "--out",
                out,
            ],
            dir,
        );
        assert!(run.status.success(), "{}", text(&run.stderr));
    }
    let old = Snapshot::from_json(&std::fs::read_to_string(dir.join("old.json")).unwrap()).unwrap();
    assert!(old.source.starts_with("mcp:"), "{}", old.source);
    assert!(old.tool("books__books_get").is_some(), "{:?}", old.tools);
    let (code, stdout, stderr) = check(
        &dir.join("old.json"),
        &dir.join("new.json"),
        &["--json"],
        dir,
    );
    assert_eq!(code, 1, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let rules: Vec<(&str, &str)> = report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["tool"].as_str().unwrap(), c["rule"].as_str().unwrap()))
        .collect();
    assert!(
        rules.contains(&("books__books_set_status", "risk_lowered")),
        "{rules:?}"
    );
    assert!(
        rules.contains(&("books__books_set_status", "approval_dropped")),
        "{rules:?}"
    );
    // Both at once is one catalogue too many.
    let run = toolgate(
        &[
            "--mcp-config",
            "servers.json",
            "catalogue",
            "snapshot",
            "--toolset",
            "books-v1",
        ],
        dir,
    );
    assert!(!run.status.success());
    assert!(
        text(&run.stderr).contains("not both"),
        "{}",
        text(&run.stderr)
    );
}
