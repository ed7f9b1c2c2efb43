//! `toolgate tools --check`, run as CI runs it: every toolset's examples pass on a fresh store,
//! each reported by tool and label; the check takes no database of the user's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{text, toolgate};
use serde_json::Value;
use toolgate_wiring::ToolsetName;

#[test]
fn every_toolsets_examples_pass_and_each_is_named_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let run = toolgate(&["tools", "--check"], dir.path());
    let out = text(&run.stdout);
    assert!(run.status.success(), "{out}\n{}", text(&run.stderr));
    assert!(!out.contains("FAILED"), "{out}");
    for toolset in ToolsetName::ALL {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{toolset}: ")))
            .unwrap_or_else(|| panic!("no line for {toolset}: {out}"));
        let counts: Vec<&str> = line.split_whitespace().collect();
        // "<toolset>: N of M examples passed"
        assert_eq!(counts[1], counts[3], "{line}");
        assert_ne!(counts[3], "0", "{line}");
    }
    assert!(
        out.contains("  passed  books_search (every book by Rowling, best rated first)"),
        "{out}"
    );
}

#[test]
fn the_json_report_names_each_example_of_one_toolset() {
    let dir = tempfile::tempdir().unwrap();
    let run = toolgate(
        &["tools", "--check", "--toolset", "notes", "--format", "json"],
        dir.path(),
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let report: Value = serde_json::from_slice(&run.stdout).unwrap();
    let toolsets = report["toolsets"].as_array().unwrap();
    assert_eq!(toolsets.len(), 1);
    assert_eq!(toolsets[0]["name"], "notes");
    let examples = toolsets[0]["examples"].as_array().unwrap();
    let named = |tool: &str, label: &str| {
        examples
            .iter()
            .any(|e| e["tool"] == tool && e["label"] == label && e["passed"] == true)
    };
    assert!(named("notes_get", "read note 12"), "{report}");
    assert!(named("notes_create", "a to-do due on a date"), "{report}");
    assert!(named("web_clip", "clip a page"), "{report}");
}

#[test]
fn check_refuses_a_database_of_the_users() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mine.sqlite");
    let run = toolgate(
        &["tools", "--check", "--db", db.to_str().unwrap()],
        dir.path(),
    );
    assert!(!run.status.success());
    assert!(!db.exists());
}
