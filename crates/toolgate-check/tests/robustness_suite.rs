//! The robustness suite against the real MCP server (stdio over a pipe, HTTP on 127.0.0.1):
//! it passes on the committed cases, and it fails when it should (a wrong expected code, a
//! control that is refused, a server that is gone), and a malformed case file is a clear error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use toolgate_check::robustness::{self, CaseFile, Harness};
use toolgate_check::{CheckError, Expect, Observed, SuiteOptions, TraceIndex, Verdict};

fn one_case(text: &str) -> robustness::WireCase {
    let file: CaseFile = toml::from_str(text).unwrap();
    file.case.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_suite_passes_on_the_committed_cases_and_cites_every_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let report = robustness::run(&SuiteOptions::new(dir.path()))
        .await
        .unwrap();
    let took = started.elapsed();
    println!("{}", report.table());
    println!("{}", serde_json::to_string_pretty(&report.figures).unwrap());
    for case in &report.cases {
        println!("{}: {}", case.id, case.detail);
    }
    if !report.passed {
        // What the server answered to each failing case, from the transcript.
        let transcript =
            std::fs::read_to_string(dir.path().join(robustness::TRANSCRIPT_FILE)).unwrap();
        for case in report.cases.iter().filter(|c| c.verdict.fails()) {
            for line in transcript
                .lines()
                .filter(|l| l.contains(&format!("\"case\":\"{}\"", case.id)))
            {
                println!("{line}");
            }
        }
    }
    assert!(report.passed, "{}", report.table());
    assert!(took < Duration::from_secs(60), "the suite took {took:?}");

    // Both transports and the load run were exercised, with controls beside the refusals.
    let stdio = report
        .cases
        .iter()
        .filter(|c| c.id.starts_with("stdio-"))
        .count();
    let http = report
        .cases
        .iter()
        .filter(|c| c.id.starts_with("http-"))
        .count();
    assert!(stdio >= 20 && http >= 15, "{stdio} stdio, {http} http");
    assert!(report.totals.controls >= 4, "{:?}", report.totals);

    // Every refusal cites a line that exists and says what it is cited for.
    let transcript = TraceIndex::read(&dir.path().join(robustness::TRANSCRIPT_FILE)).unwrap();
    let trace = TraceIndex::read(&dir.path().join(robustness::TRACE_FILE)).unwrap();
    for case in report.cases.iter().filter(|c| c.expect == Expect::Block) {
        assert_eq!(
            case.verdict,
            Verdict::Stopped,
            "{}: {}",
            case.id,
            case.detail
        );
        let at = case.at.as_ref().unwrap();
        let index = if at.file == robustness::TRANSCRIPT_FILE {
            &transcript
        } else {
            &trace
        };
        let line = index.lines.iter().find(|l| l.line == at.line).unwrap();
        if at.file == robustness::TRACE_FILE {
            assert_eq!(line.event["event"], "tool_call", "{}", case.id);
        } else {
            assert_eq!(line.event["case"], case.id.as_str());
        }
    }
    // The argument refusals are the dispatcher's own trace lines, with their code.
    let bad_args = report
        .cases
        .iter()
        .find(|c| c.id == "stdio-call-argument-wrong-type")
        .unwrap();
    let at = bad_args.at.as_ref().unwrap();
    assert_eq!(at.file, robustness::TRACE_FILE);
    let line = trace.lines.iter().find(|l| l.line == at.line).unwrap();
    assert_eq!(line.event["error.type"], "invalid_argument");

    // The load run: every write exactly one effect, memory within its bound.
    let load = &report.figures["load"][0];
    assert!(load["writes"].as_u64().unwrap() > 10, "{load}");
    assert_eq!(load["writes_with_duplicate_effects"], 0, "{load}");
    assert_eq!(load["writes_answered_but_missing"], 0, "{load}");
    assert_eq!(load["failures"], 0, "{load}");
    assert!(
        load["write_sends"].as_u64() > load["writes"].as_u64(),
        "retries were sent: {load}"
    );
    // Every send but the first of each write was answered from its receipt, and the trace says so.
    assert_eq!(
        load["replays_in_trace"].as_u64().unwrap()
            + load["writes_with_one_effect"].as_u64().unwrap(),
        load["write_sends"].as_u64().unwrap(),
        "{load}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_expected_code_a_refused_control_and_a_stopped_server_fail() {
    let dir = tempfile::tempdir().unwrap();
    let mut harness = Harness::start(dir.path()).await.unwrap();

    // The guard answers -32700 here; a case that expects -32600 must not pass.
    let wrong_code = one_case(
        "[[case]]\nid = \"x-wrong-code\"\ncategory = \"not-json\"\ntransport = \"stdio\"\n\
         send = \"not json\"\nexpect = { error = -32600 }\n",
    );
    let result = harness.run_wire(&wrong_code).await;
    assert_eq!(result.verdict, Verdict::Leaked, "{}", result.detail);
    assert!(result.detail.contains("-32700"), "{}", result.detail);

    // Over HTTP, the right code with the wrong status fails too.
    let wrong_status = one_case(
        "[[case]]\nid = \"x-wrong-status\"\ncategory = \"oversize\"\ntransport = \"http\"\n\
         parts = [['{\"pad\": \"', 1], [\"y\", 2000000], ['\"}', 1]]\n\
         expect = { error = -32600, http_status = 400 }\n",
    );
    let result = harness.run_wire(&wrong_status).await;
    assert_eq!(result.verdict, Verdict::Leaked, "{}", result.detail);
    assert!(result.detail.contains("HTTP 413"), "{}", result.detail);

    // A control the server refuses is wrongly blocked.
    let refused_control = one_case(
        "[[case]]\nid = \"x-control\"\ncategory = \"c\"\ntransport = \"http\"\n\
         send = \"not json\"\nexpect = { result = true }\n",
    );
    let result = harness.run_wire(&refused_control).await;
    assert_eq!(result.verdict, Verdict::WronglyBlocked, "{}", result.detail);

    // A silence that is in fact an answer fails.
    let not_silent = one_case(
        "[[case]]\nid = \"x-not-silent\"\ncategory = \"c\"\ntransport = \"stdio\"\n\
         send = '{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"ping\"}'\n\
         expect = { silence = true }\n",
    );
    let result = harness.run_wire(&not_silent).await;
    assert_eq!(result.verdict, Verdict::Leaked, "{}", result.detail);

    // The server is stopped: a case sent to it cannot be checked, and neither can a load run.
    harness.stop_http().await;
    let gone = one_case(
        "[[case]]\nid = \"x-gone\"\ncategory = \"not-json\"\ntransport = \"http\"\n\
         send = \"not json\"\nexpect = { error = -32700, http_status = 400 }\n",
    );
    let result = harness.run_wire(&gone).await;
    assert!(
        matches!(result.observed, Observed::Error { .. }),
        "{:?}",
        result.observed
    );
    assert_eq!(result.verdict, Verdict::Error);
    let load: CaseFile = toml::from_str(
        "[[load]]\nid = \"x-load\"\nclients = 2\nduration_ms = 300\nretries = 2\nrss_growth_mib = 64\n",
    )
    .unwrap();
    let (result, _) = harness.run_load(&load.load[0]).await;
    assert_eq!(result.verdict, Verdict::Error, "{}", result.detail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extra_case_file_with_a_wrong_expectation_fails_the_whole_report() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("mine.toml");
    std::fs::write(
        &extra,
        "[[case]]\nid = \"mine-wrong-code\"\ncategory = \"truncated-json\"\ntransport = \"http\"\n\
         send = '{\"jsonrpc\": \"2.0\", '\nexpect = { error = -32601, http_status = 400 }\n",
    )
    .unwrap();
    let files = robustness::load(std::slice::from_ref(&extra)).unwrap();
    assert_eq!(files.last().unwrap().origin, extra.display().to_string());
    let mut harness = Harness::start(&dir.path().join("out")).await.unwrap();
    let case = &files.last().unwrap().file.case[0];
    let result = harness.run_wire(case).await;
    let results = harness.finish(vec![result]).await;
    let report = toolgate_check::SuiteReport::new("robustness", vec![], vec![], results, 1);
    assert!(!report.passed);
    assert_eq!(report.totals.leaked, 1, "{}", report.table());
}

#[test]
fn a_malformed_case_file_is_a_clear_error_naming_the_file_and_case() {
    let dir = tempfile::tempdir().unwrap();
    let table = [
        (
            "[[case]]\nid = \"a\"\ncategory = \"c\"\ntransport = \"stdio\"\nsend = \"x\"\n\
             expect = { error = 1 }\ncolour = \"red\"\n",
            "colour",
        ),
        (
            "[[case]]\nid = \"b\"\ncategory = \"c\"\ntransport = \"stdio\"\nsend = \"x\"\n\
             send_hex = \"00\"\nexpect = { error = 1 }\n",
            "case `b`",
        ),
        (
            "[[case]]\nid = \"c\"\ncategory = \"c\"\ntransport = \"stdio\"\nsend = \"x\"\n\
             expect = { error = 1, http_status = 400 }\n",
            "http_status",
        ),
        (
            "[[load]]\nid = \"d\"\nclients = 1000\nduration_ms = 1000\nretries = 3\n\
             rss_growth_mib = 1\n",
            "clients",
        ),
        (
            "[[case]]\nid = \"stdio-not-json\"\ncategory = \"c\"\ntransport = \"stdio\"\n\
             send = \"x\"\nexpect = { error = 1 }\n",
            "already used",
        ),
        ("[[case]]\nid = \"e\"\n", "missing field"),
    ];
    for (i, (text, want)) in table.into_iter().enumerate() {
        let path = dir.path().join(format!("bad-{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let err = robustness::load(std::slice::from_ref(&path)).unwrap_err();
        assert!(matches!(err, CheckError::Cases { .. }), "{err}");
        let message = err.to_string();
        assert!(message.contains(&format!("bad-{i}.toml")), "{message}");
        assert!(message.contains(want), "{want}: {message}");
    }
}

/// The longer load run (30 s); `cargo test -p toolgate-check --test robustness_suite --
/// --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "30 s of load; run on demand"]
async fn the_long_load_run_keeps_one_effect_per_write_and_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../security/robustness/long/load-30s.toml");
    let file: CaseFile = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut harness = Harness::start(dir.path()).await.unwrap();
    let (result, figures) = harness.run_load(&file.load[0]).await;
    println!("{}", serde_json::to_string_pretty(&figures).unwrap());
    let results = harness.finish(vec![result]).await;
    assert_eq!(
        results[0].verdict,
        Verdict::Stopped,
        "{}",
        results[0].detail
    );
}
