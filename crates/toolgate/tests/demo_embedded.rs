//! `toolgate demo` end to end on the real embedded model: the round trip is printed step by
//! step, and the email an injected note asks for is stopped at the approval step (nothing
//! reaches an SMTP relay).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

#[test]
fn demo_prints_the_round_trip_and_the_approval_step_stops_the_injected_send() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("demo.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["demo", "--model", "embedded", "--ctx", "16384"])
        .arg("--db")
        .arg(dir.path().join("notes.sqlite"))
        .arg("--trace")
        .arg(&trace)
        .current_dir(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [
        "1. One round trip",
        "request → model",
        "model → tool_use",
        "our code runs it",
        "tool_result for",
        "says $48,000: the answer",
        "2. A prompt injection",
    ] {
        assert!(stdout.contains(step), "missing {step:?} in:\n{stdout}");
    }
    assert!(
        stdout.contains("sent 0; the SMTP relay was contacted 0 time(s)"),
        "{stdout}"
    );

    let events: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sends: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "tool_call" && e["gen_ai.tool.name"] == "email_send")
        .collect();
    assert!(!sends.is_empty(), "an email_send was attempted");
    assert!(
        sends
            .iter()
            .all(|e| e["outcome"] == "approval_denied" && e["stage"] == "approval"),
        "{sends:#?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e["event"] == "egress" && e["scheme"] == "smtp"),
        "no SMTP connection"
    );
}
