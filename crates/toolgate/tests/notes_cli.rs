//! `toolgate notes ...`, `toolgate tools --toolset notes` and the config file, run as a user
//! would.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{text, toolgate};

#[test]
fn notes_init_import_undo_and_reset() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.sqlite");
    let db = db.to_str().unwrap();
    let out = toolgate(&["notes", "init", "--db", db], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("sample notebook"));

    let md = dir.path().join("md");
    std::fs::create_dir_all(&md).unwrap();
    std::fs::write(
        md.join("good.md"),
        "---\ntitle: Garden plan\ntags: [home]\n---\nTomatoes by the fence.\n",
    )
    .unwrap();
    std::fs::write(
        md.join("bad.md"),
        "---\ntitle: Broken\ndue: Friday\n---\nbody\n",
    )
    .unwrap();
    let out = toolgate(
        &["notes", "import", md.to_str().unwrap(), "--db", db],
        dir.path(),
    );
    assert!(
        !out.status.success(),
        "a rejected file makes the command fail"
    );
    assert!(
        text(&out.stdout).contains("imported  good.md"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("bad.md"),
        "{}",
        text(&out.stderr)
    );

    let conn = rusqlite::Connection::open(db).unwrap();
    let garden: i64 = conn
        .query_row(
            "SELECT count(*) FROM notes WHERE title = 'Garden plan'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(garden, 1);

    let out = toolgate(&["notes", "undo", "--db", db], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("nothing to undo"),
        "imports are not tool writes: {}",
        text(&out.stdout)
    );

    let out = toolgate(&["notes", "reset", "--db", db], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let garden: i64 = conn
        .query_row(
            "SELECT count(*) FROM notes WHERE title = 'Garden plan'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(garden, 0, "reset restores the sample");

    let again = toolgate(&["notes", "init", "--db", db], dir.path());
    assert!(!again.status.success());
}

#[test]
fn tools_for_notes_show_every_risk_and_a_bad_allowlist_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(&["tools", "--toolset", "notes"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for row in [
        "email_send                 high",
        "notes_delete               high",
        "web_clip                   medium",
        "notes_search               low",
    ] {
        assert!(stdout.contains(row), "{row} in {stdout}");
    }

    std::fs::write(
        dir.path().join("toolgate.toml"),
        "[[egress.allow]]\nhost = \"*\"\n",
    )
    .unwrap();
    let out = toolgate(&["tools", "--toolset", "notes"], dir.path());
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("egress"),
        "{}",
        text(&out.stderr)
    );

    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../toolgate.example.toml"),
        dir.path().join("toolgate.toml"),
    )
    .unwrap();
    // Named with --config: found in the folder it is refused until trusted (its egress
    // allowlist widens where tools connect), which mcp_cli tests.
    let out = toolgate(
        &["--config", "toolgate.toml", "tools", "--toolset", "notes"],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "the documented example loads: {}",
        text(&out.stderr)
    );
}

#[test]
fn notes_index_prepares_the_search_index_then_opens_it_again_and_refuses_a_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.sqlite");
    let db_arg = db.to_str().unwrap();
    let out = toolgate(&["notes", "init", "--db", db_arg], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = toolgate(&["notes", "index", "--db", db_arg], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("is ready"), "{said}");
    let folder = dir.path().join("notes.sqlite.search-index");
    assert!(folder.join("meta.json").is_file(), "{said}");

    // Again: the index there is opened and caught up, not built anew.
    let meta = std::fs::read(folder.join("meta.json")).unwrap();
    let out = toolgate(&["notes", "index", "--db", db_arg], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(folder.join("meta.json")).unwrap(), meta);

    let missing = dir.path().join("nowhere.sqlite");
    let out = toolgate(
        &["notes", "index", "--db", missing.to_str().unwrap()],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("notes init"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.path().join("nowhere.sqlite.search-index").exists());
}
