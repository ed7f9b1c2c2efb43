//! The real binary, run as a user would.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::{text, toolgate};
use serde_json::Value;

#[test]
fn books_init_then_reset_and_refusals_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data/books.sqlite");
    let db_arg = db.to_str().unwrap();
    let out = toolgate(&["books", "init", "--db", db_arg], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("300 books"));

    let again = toolgate(&["books", "init", "--db", db_arg], dir.path());
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("already exists"),
        "{}",
        text(&again.stderr)
    );
    assert!(text(&again.stderr).contains("books reset"));

    let reset = toolgate(&["books", "reset", "--db", db_arg], dir.path());
    assert!(reset.status.success(), "{}", text(&reset.stderr));
    assert!(text(&reset.stdout).contains("initial state"));

    let missing = toolgate(&["books", "reset", "--db", "nope.sqlite"], dir.path());
    assert!(!missing.status.success());
    assert!(
        text(&missing.stderr).contains("books init"),
        "{}",
        text(&missing.stderr)
    );
}

#[test]
fn books_db_defaults_to_config_then_data_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(&["books", "init"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        dir.path()
            .join(".local/share/toolgate/books.sqlite")
            .exists()
    );

    std::fs::write(
        dir.path().join("toolgate.toml"),
        "[books]\ndb = \"from-config.sqlite\"\n",
    )
    .unwrap();
    let out = toolgate(&["books", "init"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.path().join("from-config.sqlite").exists());

    std::fs::write(dir.path().join("bad.toml"), "[books]\ndatabase = \"x\"\n").unwrap();
    let out = toolgate(&["--config", "bad.toml", "books", "init"], dir.path());
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("unknown field"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn tools_json_lists_every_tool_with_risk_reason_and_token_costs() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(&["tools", "--format", "json", "--schema"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let toolsets = report["toolsets"].as_array().unwrap();
    let names: Vec<&str> = toolsets
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // Every toolset the wiring knows, in its listing order.
    let known: Vec<&str> = toolgate_wiring::ToolsetName::ALL
        .iter()
        .map(|t| t.as_str())
        .collect();
    assert_eq!(names, known);
    assert_eq!(names.first(), Some(&"books-v1"));
    assert!(names.contains(&"notes") && names.contains(&"notes-v10"));
    for toolset in toolsets {
        assert!(toolset["definition_tokens"].as_u64().unwrap() > 0);
        for tool in toolset["tools"].as_array().unwrap() {
            assert!(["low", "medium", "high"].contains(&tool["risk"].as_str().unwrap()));
            assert!(!tool["reason"].as_str().unwrap().is_empty());
            assert_eq!(
                tool["model_view"]["input_schema"]["additionalProperties"],
                false
            );
        }
    }
    let list_items = toolsets[0]["result_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["call"] == "list_items {}")
        .unwrap()["tokens"]
        .as_u64()
        .unwrap();
    let search = toolsets[1]["result_tokens"][1]["tokens"].as_u64().unwrap();
    assert!(list_items > 10 * search, "v1 {list_items} vs v2 {search}");
}

#[test]
fn tools_table_for_one_toolset_and_bad_flags_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(&["tools", "--toolset", "books-v2"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("books_set_status  medium"), "{stdout}");
    assert!(!stdout.contains("list_items"));
    let bad = toolgate(&["tools", "--toolset", "books-v9"], dir.path());
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("books-v1"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn ask_with_a_bad_model_or_missing_key_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.sqlite");
    let db = db.to_str().unwrap();
    let bad = toolgate(
        &["ask", "--db", db, "--model", "gemini:pro", "hi"],
        dir.path(),
    );
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("openai-compat:URL"),
        "{}",
        text(&bad.stderr)
    );

    let no_key = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["ask", "--db", db, "--model", "anthropic:claude-x", "hi"])
        .current_dir(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .unwrap();
    assert!(!no_key.status.success());
    assert!(
        text(&no_key.stderr).contains("ANTHROPIC_API_KEY"),
        "{}",
        text(&no_key.stderr)
    );

    let missing_model = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "ask",
            "--db",
            db,
            "--model",
            "embedded:/nonexistent/model.gguf",
            "hi",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!missing_model.status.success());
    assert!(
        text(&missing_model.stderr).contains("fetch-model.py"),
        "{}",
        text(&missing_model.stderr)
    );
}

/// The repository's `evals` folder (suites and committed real runs).
fn repo_evals() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals")
}

#[test]
fn eval_report_re_renders_the_committed_real_eval_byte_for_byte() {
    let committed = repo_evals().join("runs/books-dev-embedded");
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("books-dev");
    std::fs::create_dir(&run_dir).unwrap();
    for file in ["plan.json", "runs.jsonl"] {
        std::fs::copy(committed.join(file), run_dir.join(file)).unwrap();
    }
    let out = toolgate(&["eval", "report", run_dir.to_str().unwrap()], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("books-v2 is better than books-v1"),
        "{}",
        text(&out.stdout)
    );
    for file in ["report.md", "report.json", "chart.svg"] {
        assert_eq!(
            std::fs::read_to_string(run_dir.join(file)).unwrap(),
            std::fs::read_to_string(committed.join(file)).unwrap(),
            "{file} differs from the committed one"
        );
    }

    // The embedded model's calls are grammar-constrained: this eval has no trace pair, and
    // the command says why instead of printing nothing.
    let pair = toolgate(
        &["eval", "trace-pair", run_dir.to_str().unwrap()],
        dir.path(),
    );
    assert!(!pair.status.success());
    assert!(
        text(&pair.stderr).contains("grammar-constrained"),
        "{}",
        text(&pair.stderr)
    );
}

/// A copy of the committed notes eval's plan with one run whose answer lists note numbers:
/// the lenient check passed it for the count 3, the strict one does not.
fn lenient_pass_fixture(run_dir: &std::path::Path) {
    let committed = repo_evals().join("runs/notes-dev-embedded");
    std::fs::create_dir(run_dir).unwrap();
    std::fs::copy(committed.join("plan.json"), run_dir.join("plan.json")).unwrap();
    let runs = std::fs::read_to_string(committed.join("runs.jsonl")).unwrap();
    let mut record: Value = runs
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["task"] == "read-design-meeting-count")
        .unwrap();
    record["answer"] = "Your design team meeting notes are notes 1, 2, 3 and 4.".into();
    record["ending"] = "final_answer".into();
    record["ending_detail"] = "".into();
    record["success"] = true.into();
    record["failure"] = Value::Null;
    record["checks"] = serde_json::json!([
        {"kind": "answer_number", "passed": true, "detail": "expected 3, answer had [1.0, 2.0, 3.0, 4.0]"}
    ]);
    std::fs::write(run_dir.join("runs.jsonl"), format!("{record}\n")).unwrap();
}

#[test]
fn eval_rescore_fails_a_run_the_lenient_check_passed_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("notes-dev");
    lenient_pass_fixture(&run_dir);
    let run_arg = run_dir.to_str().unwrap();
    let runs_before = std::fs::read_to_string(run_dir.join("runs.jsonl")).unwrap();

    // The wrong suite is refused, and nothing is written.
    let books = repo_evals().join("books.toml");
    let wrong = toolgate(
        &[
            "eval",
            "rescore",
            run_arg,
            "--suite",
            books.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(!wrong.status.success());
    assert!(
        text(&wrong.stderr).contains("is not the suite"),
        "{}",
        text(&wrong.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(run_dir.join("runs.jsonl")).unwrap(),
        runs_before
    );
    assert!(!run_dir.join("report.md").exists());

    let notes = repo_evals().join("notes.toml");
    let out = toolgate(
        &[
            "eval",
            "rescore",
            run_arg,
            "--suite",
            notes.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("notes: 1 runs, successes 1 -> 0")
            && said.contains("pass -> fail: read-design-meeting-count #1: answer_number: expected 3 as the answer's first figure; the answer has no figure of its own")
            && said.contains("numbers naming a record, not figures: [\"1\", \"2\", \"3\", \"4\"]"),
        "{said}"
    );
    let rescored: Value = serde_json::from_str(
        std::fs::read_to_string(run_dir.join("runs.jsonl"))
            .unwrap()
            .trim(),
    )
    .unwrap();
    assert_eq!(rescored["success"], false);
    assert_eq!(rescored["failure"], "wrong_answer");
    assert_eq!(rescored["checks"][0]["passed"], false);
    // Every other field is as recorded.
    let mut original: Value = serde_json::from_str(runs_before.trim()).unwrap();
    for key in ["success", "failure", "checks"] {
        original[key] = rescored[key].clone();
    }
    assert_eq!(rescored, original);
    // The report is re-rendered from the rescored runs.
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(report.contains("| notes | 1 × 1 | 0%"), "{report}");
}

#[test]
fn eval_refuses_bad_settings_before_loading_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let suite = repo_evals().join("books.toml");
    let suite = suite.to_str().unwrap();
    let out_dir = dir.path().join("never-made");
    let out_arg = out_dir.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["eval", "--suite", "missing.toml", "--out", out_arg],
            "cannot read the suite missing.toml",
        ),
        (
            &[
                "eval", "--suite", suite, "--tasks", "nope", "--out", out_arg,
            ],
            "no task with id `nope`",
        ),
        (
            &[
                "eval",
                "--suite",
                suite,
                "--toolset",
                "notes",
                "--out",
                out_arg,
            ],
            "toolset notes does not work on a Books suite",
        ),
        (&["eval", "report", out_arg], "never-made"),
    ];
    for (args, expected) in cases {
        let out = toolgate(args, dir.path());
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("loading"), "{args:?}: {stderr}");
        assert!(!out_dir.exists(), "{args:?} made the output folder");
    }
}

#[test]
fn serving_http_beyond_this_machine_without_authorization_is_refused_unless_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.sqlite");
    let db = db.to_str().unwrap();
    let public = toolgate(
        &[
            "serve",
            "--http",
            "0.0.0.0:0",
            "--toolset",
            "notes",
            "--db",
            db,
        ],
        dir.path(),
    );
    assert!(!public.status.success());
    let said = text(&public.stderr);
    assert!(
        said.contains("loopback")
            && said.contains("--insecure-no-auth")
            && said.contains("[serve.auth]"),
        "{said}"
    );
    // Refused before anything is opened: no notebook is created, and the reason is said once.
    assert!(
        !dir.path().join("notes.sqlite").exists(),
        "a refused address created the database"
    );
    assert_eq!(said.matches("refusing to serve").count(), 1, "{said}");
    assert!(!said.contains("could not start"), "{said}");

    let config = dir.path().join("toolgate.toml");
    std::fs::write(
        &config,
        "[serve.auth]\nissuer = \"https://as.example\"\nresource = \"https://mcp.example/mcp\"\n\
         [serve.auth.scopes]\n\"notes:all\" = [\"notes\"]\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let both = toolgate(
        &[
            "--config",
            config,
            "serve",
            "--http",
            "127.0.0.1:0",
            "--insecure-no-auth",
            "--db",
            db,
        ],
        dir.path(),
    );
    assert!(!both.status.success());
    assert!(
        text(&both.stderr).contains("contradicts"),
        "{}",
        text(&both.stderr)
    );

    // An authorization server off the egress allowlist is never asked: the server does not
    // start, and says why.
    let unlisted = toolgate(
        &[
            "--config",
            config,
            "serve",
            "--http",
            "127.0.0.1:0",
            "--db",
            db,
        ],
        dir.path(),
    );
    assert!(!unlisted.status.success());
    let said = text(&unlisted.stderr);
    assert!(
        said.contains("as.example") && said.contains("keys cannot be had"),
        "{said}"
    );

    // Named: found in the folder, a file with [serve.auth] is refused until trusted.
    let flags_without_http = toolgate(
        &[
            "--config",
            config,
            "serve",
            "--stdio",
            "--auth-issuer",
            "https://as.example",
            "--db",
            db,
        ],
        dir.path(),
    );
    assert!(!flags_without_http.status.success());
    assert!(text(&flags_without_http.stderr).contains("--http only"));
}

#[test]
fn eval_tool_search_refuses_bad_settings_before_loading_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = repo_evals().join("tool-search/tasks.toml");
    let catalogue = repo_evals().join("tool-search/catalogue.json");
    let (tasks, catalogue) = (tasks.to_str().unwrap(), catalogue.to_str().unwrap());
    let out_dir = dir.path().join("never-made");
    let out_arg = out_dir.to_str().unwrap();
    let cases: [(&str, &str, &str); 3] = [
        (tasks, "5", "not among the first 5 tools"),
        (tasks, "10,900", "out of range"),
        ("missing.toml", "10", "missing.toml"),
    ];
    for (tasks, sizes, expected) in cases {
        let args = [
            "eval",
            "tool-search",
            "--tasks",
            tasks,
            "--catalogue",
            catalogue,
            "--sizes",
            sizes,
            "--out",
            out_arg,
        ];
        let out = toolgate(&args, dir.path());
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("loading"), "{args:?}: {stderr}");
        assert!(!out_dir.exists(), "{args:?} made the output folder");
    }
}

#[test]
fn eval_tool_search_report_re_renders_the_committed_measurement_byte_for_byte() {
    let committed = repo_evals().join("runs/tool-search-embedded");
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("ts");
    std::fs::create_dir(&run_dir).unwrap();
    for file in ["plan.json", "runs.jsonl"] {
        std::fs::copy(committed.join(file), run_dir.join(file)).unwrap();
    }
    let tasks = repo_evals().join("tool-search/tasks.toml");
    let catalogue = repo_evals().join("tool-search/catalogue.json");
    let out = toolgate(
        &[
            "eval",
            "tool-search",
            "--tasks",
            tasks.to_str().unwrap(),
            "--catalogue",
            catalogue.to_str().unwrap(),
            "--out",
            run_dir.to_str().unwrap(),
            "--report-only",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    for file in ["report.md", "report.json"] {
        assert_eq!(
            std::fs::read_to_string(run_dir.join(file)).unwrap(),
            std::fs::read_to_string(committed.join(file)).unwrap(),
            "{file} differs from the committed one"
        );
    }
}

#[test]
fn unconstrained_calls_are_refused_for_a_model_whose_strictness_is_the_providers() {
    let dir = tempfile::tempdir().unwrap();
    let suite = repo_evals().join("books.toml");
    let out = toolgate(
        &[
            "eval",
            "--suite",
            suite.to_str().unwrap(),
            "--toolset",
            "books-v2",
            "--unconstrained",
            "--model",
            "anthropic:claude-x",
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--unconstrained applies to the embedded model only"),
        "{}",
        text(&out.stderr)
    );
}

/// The book's risk table is generated: the block between its markers is exactly what
/// `toolgate tools --format markdown` prints, so a changed risk, effect or reason cannot leave
/// the documentation behind.
#[test]
fn the_risk_table_in_the_docs_is_what_toolgate_tools_prints() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(&["tools", "--format", "markdown"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.starts_with("| toolset | tool | risk | effect | reason |"),
        "{printed}"
    );
    assert!(printed.contains("| notes | `email_send` | high | irreversible |"));
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/risk-table.md"
    ))
    .unwrap();
    let begin = "<!-- generated: toolgate tools --format markdown -->\n";
    let end = "<!-- end of generated table -->";
    let start = page.find(begin).expect("the begin marker") + begin.len();
    let stop = page[start..].find(end).expect("the end marker") + start;
    assert_eq!(
        &page[start..stop],
        printed,
        "docs/risk-table.md is out of date: replace the block between its markers with the output of `cargo run -p toolgate -- tools --format markdown`"
    );
}
