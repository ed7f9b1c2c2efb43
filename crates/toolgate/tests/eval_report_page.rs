//! `toolgate eval report DIR --html FILE`, opened in a real browser (Debian's headless chromium
//! driven by the pinned playwright-core; see tests/common/browser.rs): the page shows the
//! verdict, the confidence intervals and a run's transcript, opened by keyboard; a transcript
//! holding markup and script shows it as text and runs nothing; a folder that is not an eval is
//! refused. A copy of a committed run folder is rendered, never the folder itself (the command
//! rewrites report.md, report.json and chart.svg).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/browser.rs"]
mod browser;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use browser::{Page, file_url};
use serde_json::{Value, json};

/// Two toolsets, two tasks, one run each: a verdict with a paired difference.
const RUN_FOLDER: &str = "evals/runs/books-2tasks-embedded";

const HOSTILE: &str = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=1\"></details><h1>forged</h1>";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A copy of the committed run folder in `into`.
fn copy_run_folder(into: &Path) -> PathBuf {
    let from = workspace().join(RUN_FOLDER);
    let dir = into.join("run");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["plan.json", "runs.jsonl", "report.json"] {
        std::fs::copy(from.join(name), dir.join(name)).unwrap();
    }
    dir
}

/// `toolgate eval report DIR --html PAGE` from the workspace root, where evals/<suite>.toml is.
fn render(dir: &Path, page: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["eval", "report"])
        .arg(dir)
        .arg("--html")
        .arg(page)
        .current_dir(workspace())
        .output()
        .expect("the binary runs")
}

fn rendered(dir: &Path, page: &Path) {
    let out = render(dir, page);
    assert!(
        out.status.success(),
        "eval report --html failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(page.exists(), "no page at {}", page.display());
}

fn texts(report: &browser::PageReport, selector: &str) -> Vec<String> {
    report
        .texts(selector)
        .iter()
        .map(|s| s.text.clone())
        .collect()
}

/// Nothing ran and nothing tried to: no dialog, no uncaught error, no console error, no request
/// off this machine.
fn assert_inert(report: &browser::PageReport) {
    assert!(report.dialogs.is_empty(), "dialogs: {:?}", report.dialogs);
    assert!(
        report.page_errors.is_empty(),
        "page errors: {:?}",
        report.page_errors
    );
    assert!(
        report.console_errors().is_empty(),
        "console errors: {:?}",
        report.console_errors()
    );
    assert!(report.blocked.is_empty(), "requests: {:?}", report.blocked);
}

#[test]
fn report_page_hides_no_interval_verdict_or_transcript_from_a_keyboard_user() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_run_folder(tmp.path());
    let page = tmp.path().join("report.html");
    rendered(&dir, &page);

    let report = Page::new(file_url(&page))
        .press("#run-2 > summary", "Enter")
        .text("h1")
        .text("h2")
        .text("section[aria-labelledby=toolsets] tbody tr")
        .text("section[aria-labelledby=verdict]")
        .text("#run-1")
        .text("#run-2")
        .eval("document.documentElement.lang")
        .eval("document.querySelectorAll('th[scope]').length === document.querySelectorAll('th').length")
        .screenshot(&tmp.path().join("report.png"))
        .open();

    let title = "Eval: books on embedded:qwen2.5-coder-1.5b-instruct-q4_k_m";
    assert_eq!(report.title.as_deref(), Some(title));
    assert_eq!(texts(&report, "h1"), [title]);
    assert_eq!(
        texts(&report, "h2"),
        [
            "Verdict",
            "Success by toolset",
            "Results by task",
            "Transcripts"
        ]
    );
    // Each toolset's success with its CI, from the committed report.json's figures.
    let rows = texts(&report, "section[aria-labelledby=toolsets] tbody tr");
    assert!(
        rows[0].starts_with("books-v1") && rows[0].contains("0%\t[0%, 0%]"),
        "{rows:?}"
    );
    assert!(
        rows[1].starts_with("books-v2") && rows[1].contains("50%\t[0%, 100%]"),
        "{rows:?}"
    );
    let verdict = &texts(&report, "section[aria-labelledby=verdict]")[0];
    assert!(
        verdict.contains("Success difference (books-v2 − books-v1), paired over tasks: +50.0 points, 95% CI [+0.0 points, +100.0 points]."),
        "{verdict}"
    );
    assert!(
        verdict.contains("books-v2 is better than books-v1 on cost"),
        "{verdict}"
    );

    // The second run's <details>, opened with Enter, shows its prompt, calls and answer; the
    // first, left closed, shows only its summary line.
    let opened = &report.texts("#run-2")[0];
    assert!(opened.visible);
    assert!(
        opened
            .text
            .contains("books-v2 · collins-count · run 1: pass"),
        "{}",
        opened.text
    );
    assert!(
        opened.text.contains("User\n"),
        "the task's prompt: {}",
        opened.text
    );
    assert!(
        opened.text.contains("Assistant, round 1: calls"),
        "{}",
        opened.text
    );
    assert!(opened.text.contains("Tool result"), "{}", opened.text);
    assert!(
        opened.text.contains("Assistant, final answer"),
        "{}",
        opened.text
    );
    let closed = &report.texts("#run-1")[0].text;
    assert!(!closed.contains("Tool result"), "{closed}");

    assert_eq!(report.eval("document.documentElement.lang"), &json!("en"));
    assert_eq!(
        report.eval("document.querySelectorAll('th[scope]').length === document.querySelectorAll('th').length"),
        &Value::Bool(true),
        "every table header has a scope"
    );
    assert_inert(&report);
    assert!(tmp.path().join("report.png").exists());
}

#[test]
fn hostile_tool_result_in_a_transcript_cannot_run_script_or_forge_page_markup() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_run_folder(tmp.path());
    // The first run's first tool result and its answer hold markup, as a note body or a fetched
    // page would.
    let runs_path = dir.join("runs.jsonl");
    let text = std::fs::read_to_string(&runs_path).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[0]["calls"][0]["result"] = json!(HOSTILE);
    lines[0]["answer"] = json!(HOSTILE);
    let rewritten: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&runs_path, rewritten.join("\n") + "\n").unwrap();
    let page = tmp.path().join("report.html");
    rendered(&dir, &page);

    let report = Page::new(file_url(&page))
        .press("#run-1 > summary", "Enter")
        .text("h1")
        .text("#run-1 pre")
        .eval("typeof window.pwned")
        .eval("document.querySelectorAll('script, img, iframe, object, embed').length")
        .eval("document.querySelectorAll('details').length")
        .open();

    assert_eq!(report.eval("typeof window.pwned"), &json!("undefined"));
    assert_eq!(
        report.eval("document.querySelectorAll('script, img, iframe, object, embed').length"),
        &json!(0)
    );
    // No heading forged, no <details> closed early: one per run, as in runs.jsonl.
    assert_eq!(
        texts(&report, "h1"),
        ["Eval: books on embedded:qwen2.5-coder-1.5b-instruct-q4_k_m"]
    );
    assert_eq!(
        report.eval("document.querySelectorAll('details').length"),
        &json!(lines.len())
    );
    // The markup is shown as the text it is, to a person who opens the run.
    let shown: Vec<_> = report
        .texts("#run-1 pre")
        .iter()
        .filter(|s| s.visible && s.text == HOSTILE)
        .collect();
    assert_eq!(
        shown.len(),
        2,
        "the result and the answer: {:?}",
        report.texts("#run-1 pre")
    );
    assert_inert(&report);
}

#[test]
fn a_folder_that_is_not_an_eval_gets_no_page_and_is_told_what_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("report.html");
    let out = render(tmp.path(), &page);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not the folder of a suite eval"),
        "{stderr}"
    );
    assert!(!page.exists());

    // A tool-search folder is sent to the command that renders it.
    std::fs::write(
        tmp.path().join("plan.json"),
        r#"{"suite_digest":"x","catalogue_digest":"y","model":"m","sizes":[10],"runs":1}"#,
    )
    .unwrap();
    let out = render(tmp.path(), &page);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("toolgate eval tool-search --out"),
        "{stderr}"
    );
    assert!(!page.exists());
}

#[test]
fn a_missing_browser_fails_naming_the_setup_script() {
    let missing = tempfile::tempdir().unwrap().path().join("no-chromium");
    let panic = std::panic::catch_unwind(|| browser::chromium_at(Some(missing.into())))
        .expect_err("a missing chromium is a failure");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("run scripts/setup.sh"), "{message}");
}
