//! `--store` on `toolgate notes reset|import|undo` and `toolgate eval`, through the real binary
//! against a real PostgreSQL server (the test process's own cluster on 127.0.0.1): the notes
//! commands work on the shared notebook; an eval runs on a database of its own beside the one
//! the URL names and drops it afterwards, and a role that may not create one is told what to
//! grant. The eval's model is a real HTTP server on 127.0.0.1 speaking the OpenAI chat format,
//! answering every request with one recorded reply.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use common::{text, toolgate};
use toolgate_store::postgres::cluster;

const ANSWER: &str = include_str!("../../toolgate-llm/tests/golden/openai_chat/response_text.json");

/// Runs `sql` (statements without results) on the database at `url`.
fn execute(url: &str, sql: &str) {
    runtime().block_on(async {
        let store = toolgate_store::postgres::PgStore::connect(url, Default::default())
            .await
            .unwrap();
        store
            .client()
            .await
            .unwrap()
            .batch_execute(sql)
            .await
            .unwrap();
    })
}

/// The first column of the first row of `sql` on the database at `url`, as an integer.
fn count(url: &str, sql: &str) -> i64 {
    runtime().block_on(async {
        let store = toolgate_store::postgres::PgStore::connect(url, Default::default())
            .await
            .unwrap();
        let client = store.client().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0)
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// The number before `word` in `line` ("holds 120 notes" -> 120).
fn number_before(line: &str, word: &str) -> i64 {
    let before = &line[..line
        .find(word)
        .unwrap_or_else(|| panic!("{word} in {line}"))];
    before
        .split(|c: char| !c.is_ascii_digit())
        .rfind(|s| !s.is_empty())
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn notes_reset_import_and_undo_work_on_the_shared_notebook() {
    let dir = tempfile::tempdir().unwrap();
    let url = cluster::shared().unwrap().fresh_database().unwrap();
    let init = toolgate(&["notes", "init", "--store", &url], dir.path());
    assert!(init.status.success(), "{}", text(&init.stderr));
    let sample = number_before(&text(&init.stdout), "notes");

    let folder = dir.path().join("import");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("garden.md"),
        "---\ntitle: Garden shed paint\nnotebook: Garden\n---\nSage green, two coats.\n",
    )
    .unwrap();
    let import = toolgate(
        &["notes", "import", folder.to_str().unwrap(), "--store", &url],
        dir.path(),
    );
    assert!(import.status.success(), "{}", text(&import.stderr));
    let said = text(&import.stdout);
    assert!(said.contains("1 imported"), "{said}");
    assert!(!said.contains("toolgate-test-password"), "{said}");
    assert_eq!(
        count(
            &url,
            "SELECT count(*) FROM notes WHERE title = 'Garden shed paint'"
        ),
        1
    );
    let again = toolgate(
        &["notes", "import", folder.to_str().unwrap(), "--store", &url],
        dir.path(),
    );
    assert!(
        text(&again.stdout).contains("0 imported, 1 duplicate(s)"),
        "{}",
        text(&again.stdout)
    );

    let undo = toolgate(&["notes", "undo", "--store", &url], dir.path());
    assert!(undo.status.success(), "{}", text(&undo.stderr));
    assert!(
        text(&undo.stdout).contains("nothing to undo"),
        "no tool wrote here yet: {}",
        text(&undo.stdout)
    );

    let reset = toolgate(&["notes", "reset", "--store", &url], dir.path());
    assert!(reset.status.success(), "{}", text(&reset.stderr));
    let said = text(&reset.stdout);
    assert!(said.starts_with("restored postgres://127.0.0.1:"), "{said}");
    assert_eq!(number_before(&said, "notes;"), sample, "{said}");
    assert_eq!(count(&url, "SELECT count(*) FROM notes"), sample);

    let both = toolgate(
        &["notes", "reset", "--store", &url, "--db", "n.sqlite"],
        dir.path(),
    );
    assert!(!both.status.success());
    assert!(
        text(&both.stderr).contains("cannot be used with"),
        "{}",
        text(&both.stderr)
    );
}

/// Answers every chat completion with [`ANSWER`]; returns the base URL.
fn answer_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                let header = line.trim_end().to_ascii_lowercase();
                if header.is_empty() {
                    break;
                }
                if let Some(value) = header.strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let mut out = stream;
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{ANSWER}",
                ANSWER.len()
            );
            let _ = out.flush();
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

/// One task whose answer check passes on the recorded reply, and a state check that needs
/// the SQLite functions the eval makes on PostgreSQL (`group_concat`, `json_each`).
const SUITE: &str = r#"
[suite]
name = "notes-store-mini"
store = "notes"

[[task]]
id = "greet"
category = "lookup"
split = "dev"
prompt = "Say hello to me."
[[task.check]]
kind = "answer_contains"
expected = ["assist"]
[[task.check]]
kind = "state_sql"
query = "SELECT (SELECT count(*) FROM email_drafts), (SELECT group_concat(a, ',') FROM (SELECT lower(value) AS a FROM json_each('[\"B@x.org\", \"a@x.org\"]') ORDER BY 1)), instr('abc', 'c')"
expected = [[0, "a@x.org,b@x.org", 3]]
"#;

fn eval(dir: &std::path::Path, store: &str, out: &str) -> std::process::Output {
    std::fs::write(dir.join("suite.toml"), SUITE).unwrap();
    let model = format!("openai-compat:{}#scripted", answer_server());
    toolgate(
        &[
            "eval",
            "--suite",
            "suite.toml",
            "--toolset",
            "notes",
            "--runs",
            "1",
            "--model",
            &model,
            "--out",
            out,
            "--store",
            store,
        ],
        dir,
    )
}

#[test]
fn an_eval_runs_on_a_database_of_its_own_and_drops_it() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::shared().unwrap();
    let server = cluster.fresh_database().unwrap();
    let run = eval(dir.path(), &server, "run");
    assert!(
        run.status.success(),
        "{}\n{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    let runs = std::fs::read_to_string(dir.path().join("run/runs.jsonl")).unwrap();
    let record: serde_json::Value = serde_json::from_str(runs.lines().next().unwrap()).unwrap();
    assert_eq!(record["success"], true, "{record:#}");
    assert_eq!(record["checks"][1]["passed"], true, "{record:#}");
    assert_eq!(
        count(
            &cluster.url(),
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'toolgate_eval_%'"
        ),
        0,
        "the eval's database was dropped"
    );
    assert_eq!(
        count(&server, "SELECT count(*) FROM notes"),
        0,
        "the database the URL names was not filled: the eval ran beside it"
    );
}

#[test]
fn a_role_that_may_not_create_databases_is_told_what_to_grant() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster::shared().unwrap();
    execute(
        &cluster.url(),
        "DO $$ BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'plain') THEN
                CREATE ROLE plain LOGIN PASSWORD 'plain-password';
            END IF;
         END $$",
    );
    let url = format!(
        "postgres://plain:plain-password@127.0.0.1:{}/toolgate",
        cluster.port()
    );
    let run = eval(dir.path(), &url, "refused");
    assert!(!run.status.success());
    let err = text(&run.stderr);
    assert!(
        err.contains("the role plain may not create databases on 127.0.0.1:")
            && err.contains("ALTER ROLE plain CREATEDB"),
        "{err}"
    );
    assert!(!err.contains("plain-password"), "{err}");
}
