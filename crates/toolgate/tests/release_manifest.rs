//! `toolgate release manifest` and `release verify`, run as a release is cut: the built binary
//! on a copy of a small tree (a configuration, one eval suite, one run folder). The same tree
//! gives a byte-identical manifest; changing one file makes `verify` exit 1 naming exactly
//! that entry; a manifest it cannot use (newer format, missing, edited) exits 2; a run folder
//! an eval is still writing is skipped (named on stderr) and appears as added once finished.
//! And the repository's own release: the committed `catalogue/release-manifest.json` verifies
//! against the tree from the repository root, so a changed tool contract, suite or finished run
//! that was not recorded again fails CI, with the command that records it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{text, toolgate};
use serde_json::Value;

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// A small tree: `policy.toml`, `evals/books.toml` (the real suite) and one run folder with a
/// real run record and report.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("policy.toml"), "[books]\ndb = \"books.sqlite\"\n").unwrap();
    let run = root.join("evals/runs/books-dev");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(repo("evals/books.toml"), root.join("evals/books.toml")).unwrap();
    let source = repo("evals/runs/books-v5-dev-sampled-embedded");
    std::fs::copy(source.join("runs.jsonl"), run.join("runs.jsonl")).unwrap();
    std::fs::copy(source.join("report.json"), run.join("report.json")).unwrap();
    dir
}

fn manifest(dir: &Path, out: &str) -> String {
    let run = toolgate(
        &[
            "--config",
            "policy.toml",
            "release",
            "manifest",
            "--toolset",
            "books-v3",
            "--out",
            out,
        ],
        dir,
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    std::fs::read_to_string(dir.join(out)).unwrap()
}

fn verify(dir: &Path, file: &str) -> (i32, String, String) {
    let run = toolgate(&["release", "verify", file], dir);
    (
        run.status.code().unwrap(),
        text(&run.stdout),
        text(&run.stderr),
    )
}

#[test]
fn the_same_tree_gives_a_byte_identical_manifest_that_verifies() {
    let dir = tree();
    let first = manifest(dir.path(), "first.json");
    let second = manifest(dir.path(), "second.json");
    assert_eq!(first, second);
    let value: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(value["format"], 1);
    assert_eq!(value["config"]["path"], "policy.toml");
    assert_eq!(value["toolsets"][0]["name"], "books-v3");
    assert!(value["toolsets"][0]["tools"].as_array().unwrap().len() > 1);
    assert_eq!(value["suites"][0]["path"], "evals/books.toml");
    assert!(value["suites"][0]["tasks"].as_u64().unwrap() > 0);
    assert_eq!(value["runs"][0]["path"], "evals/runs/books-dev");
    assert!(value["runs"][0]["success"]["books-v5"].is_f64());
    let (code, out, err) = verify(dir.path(), "first.json");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("the tree is the release"), "{out}");
}

#[test]
fn a_changed_file_is_named_and_nothing_else() {
    type Edit = fn(String) -> String;
    let cases: [(&str, Edit, &str); 3] = [
        (
            "policy.toml",
            |text| text.replace("books.sqlite", "other.sqlite"),
            "config policy.toml",
        ),
        (
            "evals/books.toml",
            |text| text + "\n# one more line\n",
            "suite evals/books.toml",
        ),
        (
            "evals/runs/books-dev/runs.jsonl",
            |text| text.replacen("\"success\":false", "\"success\":true", 1),
            "run evals/runs/books-dev (runs_sha256)",
        ),
    ];
    for (file, edit, entry) in cases {
        let dir = tree();
        manifest(dir.path(), "release.json");
        let path = dir.path().join(file);
        let content = edit(std::fs::read_to_string(&path).unwrap());
        std::fs::write(&path, content).unwrap();
        let (code, out, err) = verify(dir.path(), "release.json");
        assert_eq!(code, 1, "{file}: {out}{err}");
        let named: Vec<&str> = out
            .lines()
            .filter(|l| {
                l.starts_with("changed") || l.starts_with("added") || l.starts_with("removed")
            })
            .collect();
        assert_eq!(named.len(), 1, "{file}: {out}");
        assert!(named[0].contains(entry), "{file}: {out}");
    }
}

#[test]
fn a_manifest_it_cannot_use_exits_2_saying_why() {
    let dir = tree();
    let text_now = manifest(dir.path(), "release.json");
    let mut newer: Value = serde_json::from_str(&text_now).unwrap();
    newer["format"] = Value::from(2);
    std::fs::write(dir.path().join("newer.json"), newer.to_string()).unwrap();
    std::fs::write(
        dir.path().join("edited.json"),
        text_now.replacen("\"books-v3\"", "\"books-v4\"", 1),
    )
    .unwrap();
    let cases = [
        (
            "newer.json",
            "format 2 is newer than this toolgate reads (format 1)",
        ),
        ("missing.json", "missing.json: cannot be read"),
        ("edited.json", "does not match its content"),
    ];
    for (file, reason) in cases {
        let (code, out, err) = verify(dir.path(), file);
        assert_eq!(code, 2, "{file}: {out}{err}");
        assert!(err.contains(reason), "{file}: {err}");
    }
}

/// A suite eval's folder as the eval leaves it while it runs: the real plan of a committed
/// eval and the first `runs` of its records, no report.
fn start_eval(root: &Path, name: &str, runs: usize) {
    let source = repo("evals/runs/books-v5-dev-sampled-embedded");
    let folder = root.join("evals/runs").join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(source.join("plan.json"), folder.join("plan.json")).unwrap();
    let records = std::fs::read_to_string(source.join("runs.jsonl")).unwrap();
    let first: String = records
        .lines()
        .take(runs)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(folder.join("runs.jsonl"), first).unwrap();
}

#[test]
fn an_eval_still_running_is_skipped_so_verify_passes_and_shows_as_added_once_finished() {
    let dir = tree();
    start_eval(dir.path(), "books-running", 10);
    let run = toolgate(
        &[
            "--config",
            "policy.toml",
            "release",
            "manifest",
            "--toolset",
            "books-v3",
            "--out",
            "release.json",
        ],
        dir.path(),
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let err = text(&run.stderr);
    assert!(
        err.contains(
            "skipped evals/runs/books-running: unfinished (10 of 78 runs, no report.json)"
        ),
        "{err}"
    );
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("release.json")).unwrap())
            .unwrap();
    let paths: Vec<&str> = recorded["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["evals/runs/books-dev"]);

    // More runs appended while the manifest is committed: nothing differs.
    start_eval(dir.path(), "books-running", 40);
    let (code, out, err) = verify(dir.path(), "release.json");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("unfinished (40 of 78 runs, no report.json)"),
        "{err}"
    );

    // Finished: every planned run and the report.
    start_eval(dir.path(), "books-running", 78);
    let source = repo("evals/runs/books-v5-dev-sampled-embedded");
    std::fs::copy(
        source.join("report.json"),
        dir.path().join("evals/runs/books-running/report.json"),
    )
    .unwrap();
    let (code, out, err) = verify(dir.path(), "release.json");
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("added    run evals/runs/books-running\n"),
        "{out}"
    );
    assert!(!err.contains("skipped"), "{err}");
}

/// The command that records the repository's release, run from the repository root.
const REGENERATE: &str = "cargo run -p toolgate -- --config toolgate.example.toml release manifest --evals evals --out catalogue/release-manifest.json";

#[test]
fn a_changed_contract_suite_or_finished_run_not_recorded_in_the_committed_release_fails() {
    let root = repo("");
    let committed = "catalogue/release-manifest.json";
    // HOME elsewhere: nothing the binary might write by default lands in the repository.
    let home = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["release", "verify", committed])
        .current_dir(&root)
        .env_remove("XDG_DATA_HOME")
        .env("HOME", home.path())
        .output()
        .unwrap();
    let out = text(&run.stdout);
    // The skipped folders and the reason verify could not run; not the scratch stores' notices.
    let err: String = text(&run.stderr)
        .lines()
        .filter(|l| !l.starts_with("toolgate: creating the"))
        .map(|l| format!("{l}\n"))
        .collect();
    let regenerate = format!(
        "If the change is intended, record the release again from the repository root and \
         commit the file (its diff is what the release changes):\n  {REGENERATE}"
    );
    assert_eq!(
        run.status.code(),
        Some(0),
        "{committed} does not record the tree:\n{out}{err}\n{regenerate}"
    );
    // Recorded as the command above records it: every toolset, the example configuration
    // (the policy the repository ships), the repository's evals.
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(committed)).unwrap()).unwrap();
    let names: Vec<&str> = recorded["toolsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut every: Vec<&str> = toolgate_wiring::ToolsetName::ALL
        .iter()
        .map(|t| t.as_str())
        .collect();
    every.sort_unstable();
    assert_eq!(
        names, every,
        "{committed} does not name every toolset.\n{regenerate}"
    );
    assert_eq!(
        recorded["config"]["path"], "toolgate.example.toml",
        "{regenerate}"
    );
    assert_eq!(recorded["evals_dir"], "evals", "{regenerate}");
}
