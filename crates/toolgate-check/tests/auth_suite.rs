//! The authorization suite end to end: its own authorization server and two real MCP HTTP
//! servers on 127.0.0.1, the committed cases, and the ways it must fail. Each test is named
//! after what it shows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::Value;
use toolgate_check::auth::{self, LOG_FILE, TRACE_FILE};
use toolgate_check::{CheckError, SuiteOptions, SuiteReport, TraceIndex, Verdict};

async fn run_with(extra: &[&Path], out: &Path) -> Result<SuiteReport, CheckError> {
    let mut options = SuiteOptions::new(out);
    options.extra_cases = extra.iter().map(|p| p.to_path_buf()).collect();
    auth::run(&options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committed_cases_pass_and_every_block_cites_its_auth_line() {
    let out = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let report = run_with(&[], out.path()).await.unwrap();
    let table = report.table();
    println!("{table}");
    println!("{}", serde_json::to_string_pretty(&report.figures).unwrap());
    assert!(report.passed, "{table}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );

    // What the issue asks for is there, and was stopped.
    for category in [
        "no-token",
        "expired",
        "not-yet-valid",
        "wrong-issuer",
        "wrong-audience",
        "bad-signature",
        "unknown-kid",
        "alg-none",
        "alg-confusion",
        "insufficient-scope",
        "replay",
        "clock-skew",
        "presentation",
        "token-leak",
    ] {
        assert!(
            report
                .cases
                .iter()
                .any(|c| c.category == category && c.verdict == Verdict::Stopped),
            "no stopped case in {category}: {table}"
        );
    }
    let controls = report
        .cases
        .iter()
        .filter(|c| c.category == "control")
        .count();
    assert!(controls >= 5, "{table}");
    assert_eq!(report.figures["leeway_secs"], 60, "{}", report.figures);

    // Each cited line really is the server's decision, read back from the file.
    let trace = TraceIndex::read(&out.path().join(TRACE_FILE)).unwrap();
    for case in report
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::Stopped && c.category != "token-leak")
    {
        let at = case.at.as_ref().unwrap();
        assert_eq!(at.file, TRACE_FILE);
        let line = trace.lines.iter().find(|l| l.line == at.line).unwrap();
        assert_eq!(line.event["event"], "auth", "{}: {}", case.id, line.event);
        if at.rule == "withheld" {
            assert_eq!(line.event["decision"], "allow", "{}", case.id);
        } else {
            assert_eq!(line.event["decision"], "refuse", "{}", case.id);
            assert_eq!(line.event["rule"], at.rule.as_str(), "{}", case.id);
        }
        assert!(
            line.event.get("token").is_none() && !line.event.to_string().contains("eyJ"),
            "{}",
            line.event
        );
    }
    // A refused call ran nothing: no decision record of notes_create for a blocked case's note.
    let created: Vec<&Value> = trace
        .of_kind("tool_call")
        .filter(|l| l.event["gen_ai.tool.name"] == "notes_create" && l.event["outcome"] == "ok")
        .map(|l| &l.event)
        .collect();
    for blocked in report
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::Stopped && c.category != "token-leak")
    {
        let title = format!("auth-suite {}", blocked.id);
        assert!(
            !created
                .iter()
                .any(|e| e["arguments"].to_string().contains(&title)),
            "{} ran notes_create",
            blocked.id
        );
    }
    // The log was captured, and the leak check looked at every source.
    assert!(out.path().join(LOG_FILE).exists());
    let sources: Vec<&str> = report
        .cases
        .iter()
        .filter(|c| c.category == "token-leak")
        .map(|c| c.at.as_ref().unwrap().file.as_str())
        .collect();
    for wanted in [TRACE_FILE, LOG_FILE, "auth-notes-main.sqlite", "auth.json"] {
        assert!(sources.contains(&wanted), "{sources:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_the_server_lets_through_fails_as_leaked_and_an_unsendable_case_as_not_checked() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("mine.toml");
    // A perfectly valid token, claimed to be expired.
    std::fs::write(
        &cases,
        r#"
[[case]]
id = "reviewer-thinks-this-is-expired"
category = "expired"
expect = "block"
status = 401
rule = "expired"
[case.token]
exp = "now+300"

# A token no HTTP header can carry: the case cannot be checked, and that fails too.
[[case]]
id = "unsendable"
category = "malformed"
expect = "block"
status = 400
rule = "malformed_header"
[case.token]
raw = "line\nbreak"
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let report = run_with(&[&cases], &out).await.unwrap();
    assert!(!report.passed, "{}", report.table());
    let case = report
        .cases
        .iter()
        .find(|c| c.id == "reviewer-thinks-this-is-expired")
        .unwrap();
    assert_eq!(case.verdict, Verdict::Leaked, "{}", case.detail);
    assert_eq!(case.facts["ran"], true, "{}", case.facts);
    assert_eq!(case.facts["status"], 200, "{}", case.facts);
    assert!(report.table().contains("LEAKED"));
    assert_eq!(report.totals.leaked, 1, "{}", report.table());
    let unsendable = report.cases.iter().find(|c| c.id == "unsendable").unwrap();
    assert_eq!(unsendable.verdict, Verdict::Error, "{}", unsendable.detail);
    assert!(report.table().contains("NOT CHECKED"));
    // Everything else still holds.
    assert!(
        report
            .cases
            .iter()
            .filter(|c| c.id != case.id && c.id != unsendable.id)
            .all(|c| !c.verdict.fails()),
        "{}",
        report.table()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_that_reaches_the_report_fails_the_leak_check() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("careless.toml");
    // A case that writes its own (raw) token into its description, which the report carries.
    std::fs::write(
        &cases,
        r#"
[[case]]
id = "describes-its-token"
category = "malformed"
what = "sends planted.Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0 as the token"
expect = "block"
status = 401
rule = "malformed_token"
[case.token]
raw = "planted.Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0"
"#,
    )
    .unwrap();
    let report = run_with(&[&cases], &dir.path().join("out")).await.unwrap();
    assert!(!report.passed, "{}", report.table());
    let case = report
        .cases
        .iter()
        .find(|c| c.id == "describes-its-token")
        .unwrap();
    assert_eq!(
        case.verdict,
        Verdict::Stopped,
        "the request itself was refused"
    );
    let leak = report
        .cases
        .iter()
        .find(|c| c.id == "no-token-in-auth-json")
        .unwrap();
    assert_eq!(leak.verdict, Verdict::Leaked, "{}", leak.detail);
    assert!(
        leak.detail.contains("describes-its-token"),
        "{}",
        leak.detail
    );
    let at = leak.at.as_ref().unwrap();
    assert_eq!(
        (at.file.as_str(), at.rule.as_str()),
        ("auth.json", "token_in_report")
    );
    // The trace and the log never saw it.
    for clean in [
        "no-token-in-auth-trace-jsonl",
        "no-token-in-auth-server-log",
    ] {
        let row = report.cases.iter().find(|c| c.id == clean).unwrap();
        assert_eq!(row.verdict, Verdict::Stopped, "{}", row.detail);
    }
}

#[tokio::test]
async fn a_malformed_case_file_is_a_clear_error_naming_the_file_and_case() {
    let dir = tempfile::tempdir().unwrap();
    let bad = [
        (
            "unknown-field.toml",
            "[[case]]\nid = \"a\"\ncategory = \"c\"\nexpect = \"allow\"\ncolour = \"red\"\n",
            "colour",
        ),
        (
            "bad-time.toml",
            "[[case]]\nid = \"late\"\ncategory = \"c\"\nexpect = \"block\"\nstatus = 401\nrule = \"expired\"\n[case.token]\nexp = \"yesterday\"\n",
            "case `late`",
        ),
        (
            "no-rule.toml",
            "[[case]]\nid = \"vague\"\ncategory = \"c\"\nexpect = \"block\"\nstatus = 401\n",
            "needs `rule`",
        ),
        (
            "duplicate.toml",
            "[[case]]\nid = \"no-token\"\ncategory = \"c\"\nexpect = \"allow\"\n",
            "security/auth/tokens.toml",
        ),
    ];
    for (name, text, needle) in bad {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = dir.path().join(format!("out-{name}"));
        let err = run_with(&[&path], &out).await.unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, CheckError::Cases { .. }), "{message}");
        assert!(message.contains(name), "{name}: {message}");
        assert!(message.contains(needle), "{name}: {message}");
        // Nothing ran: no trace was written.
        assert!(!out.join(TRACE_FILE).exists(), "{name}");
    }
}
