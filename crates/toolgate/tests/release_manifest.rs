//! `toolgate release manifest` and `release verify`, run as a release is cut: the built binary
//! on a copy of a small tree (a configuration, one eval suite, one run folder). The same tree
//! gives a byte-identical manifest; changing one file makes `verify` exit 1 naming exactly
//! that entry; a manifest it cannot use (newer format, missing, edited) exits 2.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

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
            |text| text + "{}\n",
            "run evals/runs/books-dev",
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
