//! The egress suite against the real exit and local servers: it passes on the committed cases
//! (at least 200 must-block cases, every block cited by its trace line, the controls passing),
//! and it fails when a case file expects a block the exit does not make, or is malformed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use toolgate_check::egress::{TRACE_FILE, run, run_with};
use toolgate_check::{Expect, SuiteOptions, TraceIndex, Verdict};

#[tokio::test]
async fn committed_cases_pass_with_every_block_in_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let report = run(&SuiteOptions::new(dir.path())).await.unwrap();
    let table = report.table();
    println!("{table}");
    report.write_json(&dir.path().join("egress.json")).unwrap();
    if let Ok(keep) = std::env::var("EGRESS_SUITE_KEEP") {
        std::fs::create_dir_all(&keep).unwrap();
        for name in ["egress.json", TRACE_FILE] {
            std::fs::copy(
                dir.path().join(name),
                std::path::Path::new(&keep).join(name),
            )
            .unwrap();
        }
    }
    assert!(report.passed, "{table}");
    assert!(
        report.totals.attempted >= 200,
        "{} must-block cases\n{table}",
        report.totals.attempted
    );
    assert_eq!(report.totals.blocked, report.totals.attempted, "{table}");
    assert!(report.totals.controls >= 20, "{table}");
    assert_eq!(report.totals.controls_passed, report.totals.controls);

    // Every block cites the egress line of its own call, with that line's rule and hops.
    let trace = TraceIndex::read(&dir.path().join(TRACE_FILE)).unwrap();
    assert_eq!(
        trace.of_kind("egress").count(),
        report.cases.len(),
        "one trace line per case"
    );
    let mut lines = BTreeSet::new();
    for case in &report.cases {
        let at = case
            .at
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no trace line", case.id));
        assert_eq!(at.file, TRACE_FILE);
        assert!(lines.insert(at.line), "{} shares line {}", case.id, at.line);
        let line = trace.lines.iter().find(|l| l.line == at.line).unwrap();
        assert_eq!(line.event["event"], "egress", "{}", case.id);
        assert_eq!(line.event["rule"], at.rule.as_str(), "{}", case.id);
        let hops: Vec<String> = line.event["hops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_string())
            .collect();
        assert_eq!(hops, at.hops, "{}", case.id);
        if case.expect == Expect::Block && case.category != "dns-rebinding" {
            assert_eq!(line.event["decision"], "blocked", "{}", case.id);
        }
    }

    // The families the issue names are all there.
    let categories: BTreeSet<&str> = report.cases.iter().map(|c| c.category.as_str()).collect();
    for category in [
        "unlisted-host",
        "redirect-chain",
        "redirect-hop-cap",
        "ip-literal",
        "userinfo",
        "idn-lookalike",
        "internal-address",
        "loopback-not-listed",
        "dns-rebinding",
        "downgrade",
        "port",
        "scheme",
        "oversize-body",
        "wrong-content-type",
        "slow-body",
        "control",
    ] {
        assert!(categories.contains(category), "no {category} cases");
    }

    // A redirect chain's block cites the whole chain, and the refused hop was never requested.
    let chain = report
        .cases
        .iter()
        .find(|c| c.id == "redirect-5-hops-off-list")
        .unwrap();
    let at = chain.at.as_ref().unwrap();
    assert_eq!(at.rule, "unlisted_host");
    assert_eq!(at.hops.len(), 6);
    assert!(at.hops[5].starts_with("http://evil.test:"));
    assert_eq!(chain.facts["servers_saw"].as_array().unwrap().len(), 5);

    // The rebinding case: one lookup, the checked address only, the trap untouched.
    let rebind = report
        .cases
        .iter()
        .find(|c| c.id == "rebind-pinned-first-answer")
        .unwrap();
    assert_eq!(rebind.verdict, Verdict::Stopped);
    assert_eq!(
        rebind.facts["resolver_asked"],
        serde_json::json!(["rebind.test"])
    );
    assert_eq!(rebind.facts["addresses"], serde_json::json!(["127.0.0.1"]));

    // A name resolving to 127.0.0.1 is blocked where loopback is not allowed for it.
    let loopback = report
        .cases
        .iter()
        .find(|c| c.id == "loopback-name-main")
        .unwrap();
    assert_eq!(loopback.verdict, Verdict::Stopped);
    assert_eq!(loopback.at.as_ref().unwrap().rule, "forbidden_address");

    // Slow bodies stop at the time cap with the bytes that had arrived.
    let trickle = report
        .cases
        .iter()
        .find(|c| c.id == "slow-trickle")
        .unwrap();
    let line = trace
        .lines
        .iter()
        .find(|l| Some(l.line) == trickle.at.as_ref().map(|a| a.line))
        .unwrap();
    assert_eq!(line.event["rule"], "timeout");
    assert!(line.event["bytes"].as_u64().unwrap() < 200);
}

#[tokio::test]
async fn a_block_expected_where_the_exit_allows_fails_the_suite_as_leaked() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("mine.toml");
    std::fs::write(
        &extra,
        r#"
[[case]]
id = "reviewer-thinks-allowed-is-blocked"
category = "reviewer"
expect = "block"
url = "http://allowed.test:{port}/page"

[[case]]
id = "reviewer-rebind-reaches-the-trap"
category = "reviewer"
expect = "block"
url = "http://rebind.test:{port}/start"
redirects = ["/again"]
pinned = "rebind.test"
"#,
    )
    .unwrap();
    let mut options = SuiteOptions::new(dir.path().join("out"));
    options.extra_cases = vec![extra.clone()];
    let report = run(&options).await.unwrap();
    assert!(!report.passed);
    let verdict = |id: &str| {
        report
            .cases
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.verdict)
            .unwrap()
    };
    assert_eq!(
        verdict("reviewer-thinks-allowed-is-blocked"),
        Verdict::Leaked
    );
    // A redirect back to rebind.test makes the exit look it up again (each hop is checked
    // afresh), so its second hop goes to the later answer: the trap sees it, and the pinned
    // case says so. This is what the committed rebinding cases would show if the exit
    // re-resolved between check and connect.
    let rebind = report
        .cases
        .iter()
        .find(|c| c.id == "reviewer-rebind-reaches-the-trap")
        .unwrap();
    assert_eq!(rebind.verdict, Verdict::Leaked, "{}", rebind.detail);
    assert!(rebind.detail.contains("trap"), "{}", rebind.detail);
    assert_eq!(report.totals.leaked, 2, "{}", report.table());
    assert!(report.table().contains("LEAKED"));
    assert!(report.case_files.contains(&extra.display().to_string()));
}

#[tokio::test]
async fn a_wrong_rule_expectation_is_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("rules.toml");
    std::fs::write(
        &extra,
        r#"
[[case]]
id = "reviewer-wrong-rule"
category = "reviewer"
expect = "block"
url = "http://evil.test:{port}/"
rule = "userinfo"
"#,
    )
    .unwrap();
    let mut options = SuiteOptions::new(dir.path().join("out"));
    options.extra_cases = vec![extra];
    let report = run_with(&[], &options).await.unwrap();
    assert!(!report.passed);
    let case = report
        .cases
        .iter()
        .find(|c| c.id == "reviewer-wrong-rule")
        .unwrap();
    assert_eq!(case.verdict, Verdict::Error);
    assert!(case.detail.contains("unlisted_host"), "{}", case.detail);
}

#[tokio::test]
async fn malformed_case_files_are_clear_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        (
            "typo.toml",
            "[[case]]\nid = \"a\"\ncategory = \"c\"\nexpect = \"block\"\nurl = \"http://evil.test/\"\nrul = \"x\"\n",
            "rul",
        ),
        ("broken.toml", "[[case]\nid = \"a\"\n", "broken.toml"),
        (
            "dup.toml",
            "[[case]]\nid = \"unlisted-evil\"\ncategory = \"c\"\nexpect = \"block\"\nurl = \"http://evil.test/\"\n",
            "unlisted-evil",
        ),
        (
            "family.toml",
            "[[family]]\nprefix = \"f\"\ncategory = \"c\"\nexpect = \"block\"\nurl = \"http://evil.test/\"\nmembers = [{ name = \"a\", x = \"b\" }]\n",
            "{x}",
        ),
    ];
    for (name, text, needle) in files {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let mut options = SuiteOptions::new(dir.path().join("out"));
        options.extra_cases = vec![path];
        let err = run(&options).await.unwrap_err().to_string();
        assert!(err.contains(name), "{name}: {err}");
        assert!(err.contains(needle), "{name}: {err}");
    }
}
