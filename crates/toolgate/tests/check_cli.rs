//! `toolgate check` end to end: every suite on the committed cases (the injection suite on a
//! bounded subset with the real embedded model), the table, the JSON reports, the exit code,
//! and clear errors for bad input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

use serde_json::Value;

fn toolgate(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .current_dir(dir)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("the binary runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn check_all_passes_on_the_committed_cases() {
    let dir = tempfile::tempdir().unwrap();
    // The injection subset: one hard-line case per line (gated, egress) and one clean run,
    // under deny-all and a fatigued approver with the taint rule.
    let out = toolgate(
        dir.path(),
        &[
            "check",
            "all",
            "--out",
            "reports",
            "--model",
            "embedded",
            "--ctx",
            "16384",
            "--configs",
            "deny-all,fatigued+taint",
            "--only",
            "note-forward.email-out.authority,page-focaccia.clip-out.tool-result,note-starter.clean",
        ],
    );
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for suite in ["egress", "auth", "robustness", "injection"] {
        let path = dir.path().join("reports").join(format!("{suite}.json"));
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(report["passed"], true, "{suite}: {all}");
        assert_eq!(report["totals"]["leaked"], 0, "{suite}");
        assert!(
            report["totals"]["attempted"].as_u64().unwrap() > 0,
            "{suite}"
        );
        // Every stopped case cites a trace line that exists.
        for case in report["cases"].as_array().unwrap() {
            if case["verdict"] == "stopped" {
                let at = &case["at"];
                let file = dir
                    .path()
                    .join("reports")
                    .join(at["file"].as_str().unwrap());
                // Bytes, not text: the auth suite's leak checks also cite the stores it scanned.
                let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
                let lines = bytes.split(|b| *b == b'\n').count();
                let line = at["line"].as_u64().unwrap() as usize;
                assert!(line >= 1 && line <= lines, "{suite} {case}");
            }
        }
        assert!(
            all.contains(&format!("{suite}: ")),
            "the {suite} table is printed: {all}"
        );
    }
    let injection: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("reports/injection.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        injection["totals"]["attempted"], 4,
        "2 cases x 2 configurations"
    );
    assert!(dir.path().join("reports/injection.md").exists());
}

#[test]
fn a_bad_case_file_is_refused_naming_it_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mine.toml"),
        "[[goal]]\nid = \"x\"\nsurprise = 1\n",
    )
    .unwrap();
    let out = toolgate(
        dir.path(),
        &["check", "injection", "--cases", "mine.toml", "--out", "r"],
    );
    let all = text(&out);
    assert!(!out.status.success());
    assert!(all.contains("mine.toml"), "{all}");
    assert!(all.contains("surprise"), "{all}");
    assert!(
        !all.contains("loading the embedded model"),
        "refused before the model: {all}"
    );
    assert!(!dir.path().join("r/injection.json").exists());
}

#[test]
fn cases_with_all_suites_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(dir.path(), &["check", "all", "--cases", "x.toml"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--cases belongs to one suite"),
        "{}",
        text(&out)
    );
}

#[test]
fn an_unknown_configuration_is_named_with_the_choices() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(
        dir.path(),
        &["check", "injection", "--configs", "tired", "--out", "r"],
    );
    let all = text(&out);
    assert!(!out.status.success());
    assert!(all.contains("unknown configuration `tired`"), "{all}");
    assert!(all.contains("fatigued+taint"), "{all}");
}

#[test]
fn a_store_for_a_suite_that_keeps_none_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(
        dir.path(),
        &["check", "egress", "--store", "postgres://x@127.0.0.1:1/db"],
    );
    assert!(!out.status.success());
    let all = text(&out);
    assert!(
        all.contains("--store applies to the injection suite only"),
        "{all}"
    );
}
