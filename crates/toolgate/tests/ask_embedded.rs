//! `toolgate ask` end to end on the real embedded model (fetched and verified beforehand by
//! scripts/fetch-model.py, which the test command runs). One question, a few dozen generated
//! tokens, bounded by the round cap.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

#[test]
fn ask_counts_suzanne_collins_books_with_books_search() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("books.sqlite");
    let trace = dir.path().join("trace.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "ask",
            "--toolset",
            "books-v2",
            "--model",
            "embedded",
            "--ctx",
            "8192",
            "--max-rounds",
            "4",
        ])
        .arg("--db")
        .arg(&db)
        .arg("--trace")
        .arg(&trace)
        .arg("How many books by Suzanne Collins are in the list?")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");

    let expected: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM books WHERE authors LIKE '%Suzanne Collins%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let answer = stdout
        .lines()
        .find_map(|l| l.strip_prefix("answer: "))
        .unwrap_or_else(|| panic!("no answer line in:\n{stdout}"));
    let numbers: Vec<i64> = answer
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(
        numbers.contains(&expected),
        "answer {answer:?} should state {expected}"
    );

    let events: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let searches: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "tool_call" && e["gen_ai.tool.name"] == "books_search")
        .collect();
    assert!(!searches.is_empty(), "books_search was called: {events:#?}");
    assert!(searches.iter().any(|e| e["outcome"] == "ok"));
    let end = events
        .iter()
        .find(|e| e["event"] == "run_end")
        .expect("run_end event");
    assert_eq!(end["stop"]["kind"], "final_answer");
    assert!(
        events.iter().any(
            |e| e["event"] == "model_turn" && e["gen_ai.usage.input_tokens"].as_u64() > Some(0)
        )
    );
}
