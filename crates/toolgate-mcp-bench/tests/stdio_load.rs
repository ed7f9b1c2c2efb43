//! The stdio load client against the real bare rmcp server over stdio, both processes real:
//! the numbers it prints come from answers it checked, and a failing call is counted, not
//! hidden.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// `mcp-stdio-load` with `load_args`, serving `bare-rmcp-server --stdio` with `server_args`;
/// its output line.
fn load(load_args: &[&str], server_args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-stdio-load"))
        .args([
            "--warmup",
            "0.2",
            "--duration",
            "0.5",
            "--timeout-ms",
            "5000",
        ])
        .args(load_args)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_bare-rmcp-server"))
        .args(["--stdio", "--max-seconds", "60"])
        .args(server_args)
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn field(line: &str, name: &str) -> String {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .to_owned()
}

#[test]
fn calls_over_stdio_are_answered_counted_and_timed_at_both_revisions() {
    let db = tempfile::tempdir().unwrap();
    let books = db.path().join("books.db");
    for revision in ["2025-11-25", "2026-07-28"] {
        for server in [vec![], vec!["--books-db", books.to_str().unwrap()]] {
            let out = load(&["--revision", revision], &server);
            let ok: u64 = field(&out, "ok").parse().unwrap();
            assert!(ok > 0, "{revision} {server:?}: {out}");
            assert_eq!(field(&out, "failed"), "0", "{revision} {server:?}: {out}");
            let p50: u64 = field(&out, "p50_us").parse().unwrap();
            let p99: u64 = field(&out, "p99_us").parse().unwrap();
            assert!(0 < p50 && p50 <= p99, "{out}");
            let rss: u64 = field(&out, "server_peak_rss_kb").parse().unwrap();
            let anon: u64 = field(&out, "server_anon_kb").parse().unwrap();
            let file: u64 = field(&out, "server_file_kb").parse().unwrap();
            assert!(0 < anon && 0 < file && anon + file <= rss, "{out}");
        }
    }
}

#[test]
fn a_call_the_server_refuses_is_a_failure_with_its_reason() {
    let out = load(&["--revision", "2025-11-25", "--tool", "books_nope"], &[]);
    assert_eq!(field(&out, "ok"), "0", "{out}");
    assert_ne!(field(&out, "failed"), "0", "{out}");
    assert!(
        out.contains("failure: JSON-RPC error:") && out.contains("unknown tool books_nope"),
        "{out}"
    );
}

#[test]
fn bad_arguments_or_window_are_refused_before_any_server_starts() {
    for (args, says) in [
        (["--arguments", "nope"], "--arguments is not JSON"),
        (["--duration", "0"], "--duration 0.1..=600 s"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("started");
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-stdio-load"))
            .args(["--revision", "2025-11-25"])
            .args(args)
            .args(["--", "touch"])
            .arg(&marker)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(says),
            "{stderr}"
        );
        assert!(!marker.exists(), "the server was started for {args:?}");
    }
}
