//! The soak run against the real `toolgate serve --http` binary as a child process: a short
//! one (10 s, 4 clients, both revisions) counts one effect per write and the server's own
//! memory; the soak file is valid and never among the compiled-in cases; a soak that cannot
//! start its server is not checked (fails closed), and its child never outlives it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use toolgate_check::robustness::{self, CaseFile, SoakCase, soak};
use toolgate_check::{TraceIndex, Verdict};

/// The `toolgate` binary of this build (`target/<profile>/toolgate`, beside `deps/` where this
/// test runs); `cargo test --workspace` builds it before any test runs.
fn toolgate_exe() -> PathBuf {
    let this = std::env::current_exe().unwrap();
    let exe = this.parent().unwrap().parent().unwrap().join("toolgate");
    assert!(
        exe.is_file(),
        "{} is missing: build it first (cargo build -p toolgate)",
        exe.display()
    );
    exe
}

fn soak_case(text: &str) -> SoakCase {
    let mut file: CaseFile = toml::from_str(text).unwrap();
    file.soak.remove(0)
}

fn soak_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../security/robustness/soak.toml")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_counts_one_effect_per_write_and_the_servers_own_memory() {
    let dir = tempfile::tempdir().unwrap();
    let case = soak_case(
        "[[soak]]\nid = \"soak-short\"\nclients = 4\nduration_ms = 10000\nretries = 2\n\
         rss_growth_mib = 64\n",
    );
    let result = soak::run_case(&case, dir.path(), Ok(toolgate_exe())).await;
    let f = &result.facts;
    println!(
        "{}\n{}",
        result.detail,
        serde_json::to_string_pretty(f).unwrap()
    );
    assert_eq!(result.verdict, Verdict::Stopped, "{}", result.detail);

    // Both revisions were served, with no error.
    for (revision, figures) in ["2025-11-25", "2026-07-28"]
        .iter()
        .zip(f["revisions"].as_array().unwrap())
    {
        assert_eq!(figures["revision"], *revision);
        assert_eq!(figures["clients"], 2);
        assert!(figures["successes"].as_u64().unwrap() > 10, "{figures}");
        assert_eq!(figures["errors"], 0, "{figures}");
        assert!(figures["p99_ms"].as_f64().unwrap() >= figures["p50_ms"].as_f64().unwrap());
    }
    assert!(f["revisions"][0]["sessions_opened"].as_u64().unwrap() >= 2);

    // Every acknowledged write is exactly one note; retries replayed their receipt.
    let acknowledged = f["writes_acknowledged"].as_u64().unwrap();
    assert!(acknowledged > 10, "{f}");
    assert_eq!(f["writes_with_one_effect"], acknowledged, "{f}");
    assert_eq!(f["notes_created"], acknowledged, "{f}");
    assert_eq!(f["writes_with_duplicate_effects"], 0);
    assert!(f["replays_in_trace"].as_u64().unwrap() > 0, "{f}");

    // The memory is the child's, not this process's, sampled about once a second.
    let pid = f["server_pid"].as_u64().unwrap();
    assert_ne!(pid, u64::from(std::process::id()));
    assert!(f["rss_samples"].as_u64().unwrap() >= 8, "{f}");
    assert!(f["rss_warm_kib"].as_u64().unwrap() > 1000, "{f}");
    assert!(f["rss_end_kib"].as_u64().unwrap() > 1000, "{f}");
    let (_, trace, _, rss) = soak::files(&case.id);
    let samples = std::fs::read_to_string(dir.path().join(rss)).unwrap();
    assert!(samples.lines().count() >= 9, "{samples}");

    // The cited line is a replayed write in the server's own trace.
    let at = result.at.as_ref().unwrap();
    assert_eq!(at.file, trace);
    let index = TraceIndex::read(&dir.path().join(&trace)).unwrap();
    let line = index.lines.iter().find(|l| l.line == at.line).unwrap();
    assert_eq!(line.event["duplicate"], true);
    assert_eq!(line.event["gen_ai.tool.name"], "notes_create");

    // The server was stopped with the run.
    assert!(
        !PathBuf::from(format!("/proc/{pid}")).exists(),
        "pid {pid} outlived the soak"
    );
}

#[test]
fn the_soak_file_is_valid_and_never_compiled_in() {
    let files = robustness::load(&[soak_file()]).unwrap();
    let soaks: Vec<_> = files.iter().flat_map(|f| &f.file.soak).collect();
    assert_eq!(soaks.len(), 1);
    assert_eq!(soaks[0].clients, 32);
    assert_eq!(soaks[0].duration_ms, 600_000);
    // Nothing compiled in is a soak, so `toolgate check all` never starts one.
    for (name, text) in robustness::BUILTIN {
        assert!(!name.contains("soak"), "{name}");
        let file: CaseFile = toml::from_str(text).unwrap();
        assert!(file.soak.is_empty(), "{name} has a soak");
    }
    let builtin = robustness::load(&[]).unwrap();
    assert!(builtin.iter().all(|f| f.file.soak.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soak_that_cannot_start_its_server_is_not_checked() {
    let dir = tempfile::tempdir().unwrap();
    let case = soak_case(
        "[[soak]]\nid = \"s\"\nclients = 2\nduration_ms = 1000\nretries = 2\nrss_growth_mib = 1\n",
    );
    // Not toolgate (this test harness), and a server that exits at once.
    let refused = soak::run_case(&case, dir.path(), soak::this_toolgate()).await;
    assert_eq!(refused.verdict, Verdict::Error, "{}", refused.detail);
    assert!(
        refused.detail.contains("is not toolgate"),
        "{}",
        refused.detail
    );
    let gone = soak::run_case(&case, dir.path(), Ok(PathBuf::from("/bin/false"))).await;
    assert_eq!(gone.verdict, Verdict::Error, "{}", gone.detail);
    assert!(
        gone.detail.contains("toolgate serve exited"),
        "{}",
        gone.detail
    );
}
