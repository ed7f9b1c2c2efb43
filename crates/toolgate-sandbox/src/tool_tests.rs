use super::*;
use std::os::unix::fs::PermissionsExt as _;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn an_export_readable_by_other_users_is_sealed_to_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::set_permissions(&notes, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(notes.join("1.md"), "note").unwrap();
    std::fs::set_permissions(notes.join("1.md"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(dir.path().join("index.json"), "[]").unwrap();
    seal_export(dir.path(), None).unwrap();
    assert_eq!(mode(dir.path()), 0o700);
    assert_eq!(mode(&notes), 0o700);
    assert_eq!(mode(&notes.join("1.md")), 0o600);
    assert_eq!(mode(&dir.path().join("index.json")), 0o600);
}

#[test]
fn an_export_holding_a_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
    assert!(seal_export(dir.path(), None).is_err());
}

#[test]
fn a_run_that_hits_a_bound_tells_the_model_which_and_the_bounds() {
    use crate::run::LimitHit;
    let mut report = ended(
        Some(1),
        None,
        None,
        vec![LimitHit::Memory, LimitHit::WorkFolder],
    );
    report.bounds.work_used_bytes = 256 << 20;
    let content = observation(&report, Vec::new()).content;
    assert_eq!(content["bounded_by"], "cgroup_v1");
    assert_eq!(content["limits_hit"], json!(["memory", "work_folder"]));
    assert_eq!(content["limits"]["memory_mb"], 1024);
    assert_eq!(content["limits"]["work_mb"], 256);
}

/// A report of a run that ended with `exit_code` (and `signal`, `stopped`, `limits_hit`), its
/// stderr a traceback.
fn ended(
    exit_code: Option<i32>,
    signal: Option<i32>,
    stopped: Option<crate::run::Stopped>,
    limits_hit: Vec<crate::run::LimitHit>,
) -> RunReport {
    use crate::run::{Bounds, Captured};
    let text = |t: &str| Captured {
        text: t.to_owned(),
        total_bytes: t.len(),
        truncated: false,
    };
    RunReport {
        exit_code,
        signal,
        stopped,
        stdout: text("partial\n"),
        stderr: text("Traceback (most recent call last):\nKeyError: 'body'\n"),
        tool_calls: 2,
        landlock: true,
        seccomp: true,
        elapsed_ms: 5,
        bounds: Bounds {
            layer: crate::BoundLayer::CgroupV1,
            memory_bytes: 1 << 30,
            processes: 32,
            address_space_bytes: 1 << 30,
            tmp_bytes: 64 << 20,
            work: crate::WorkBound::Tmpfs,
            work_bytes: 256 << 20,
            work_used_bytes: 0,
            usage: crate::cgroup::Usage::default(),
        },
        limits_hit,
    }
}

#[test]
fn only_a_script_that_failed_by_itself_is_refused_and_its_output_is_kept_untrusted() {
    use crate::run::{LimitHit, Stopped};
    let cases = [
        (
            "a script that raised",
            ended(Some(1), None, None, vec![]),
            true,
        ),
        (
            "a script that exited 0",
            ended(Some(0), None, None, vec![]),
            false,
        ),
        (
            "a script killed by a signal",
            ended(None, Some(9), None, vec![]),
            false,
        ),
        (
            "a script the wall clock stopped",
            ended(Some(1), None, Some(Stopped::WallClock), vec![]),
            false,
        ),
        (
            "a script that hit the memory bound",
            ended(Some(1), None, None, vec![LimitHit::Memory]),
            false,
        ),
    ];
    for (what, report, refused) in cases {
        let output = observation(&report, Vec::new());
        let error = failed_script(&report, &output);
        assert_eq!(error.is_some(), refused, "{what}");
        if let Some(error) = error {
            assert_eq!(
                error.code,
                toolgate_core::ErrorCode::InvalidArgument,
                "{what}"
            );
            assert_eq!(error.field.as_deref(), Some("code"));
            assert!(
                error
                    .message
                    .contains("exit code 1 after 2 tool calls (their effects stand)")
            );
            assert_eq!(refused_exit_code(&error.message), Some(1));
            // The traceback is someone else's text: only in the untrusted list, never in the
            // message the model reads as ours.
            assert!(!error.message.contains("KeyError"));
            let sources: Vec<&str> = error.untrusted.iter().map(|u| u.source.as_str()).collect();
            assert_eq!(sources, ["code_execution stdout", "code_execution stderr"]);
            assert!(error.untrusted[1].text.contains("KeyError: 'body'"));
        }
    }
}

fn model_view(name: &str, schema: Value) -> ModelView {
    ModelView {
        name: name.to_owned(),
        description: "a tool".to_owned(),
        input_schema: schema,
        output_schema: None,
    }
}

#[test]
fn a_worked_example_never_calls_a_function_the_conversation_lacks() {
    let paged_notes = model_view(
        "notes_search",
        json!({"type":"object","properties":{"query":{"type":"string"},"offset":{"type":"integer"}},"required":["query"]}),
    );
    let unpaged_notes = model_view(
        "notes_search",
        json!({"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}),
    );
    let books = model_view(
        "books_search",
        json!({"type":"object","properties":{"author":{"type":"string"},"offset":{"type":"integer"}}}),
    );
    let cases = [
        (
            vec![paged_notes.clone()],
            Paging::ByPage,
            Some(PAGING_EXAMPLE),
        ),
        (
            vec![paged_notes.clone()],
            Paging::AlsoAllPages,
            Some(ALL_PAGES_EXAMPLE),
        ),
        (vec![books.clone()], Paging::ByPage, None),
        (vec![books.clone()], Paging::AlsoAllPages, None),
        // Without `offset` there is neither a page to ask for nor a `notes_search_all`.
        (vec![unpaged_notes.clone()], Paging::AlsoAllPages, None),
        (vec![unpaged_notes], Paging::ByPage, None),
        (
            vec![books, paged_notes],
            Paging::AlsoAllPages,
            Some(ALL_PAGES_EXAMPLE),
        ),
        (vec![], Paging::ByPage, None),
    ];
    for (tools, paging, expected) in cases {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            worked_example(&tools, paging),
            expected,
            "{names:?} {paging:?}"
        );
    }
}

#[test]
fn every_worked_example_reads_the_tool_it_names() {
    for (example, function) in [
        (PAGING_EXAMPLE, "t.notes_search("),
        (ALL_PAGES_EXAMPLE, "t.notes_search_all("),
    ] {
        assert!(
            function.starts_with(&format!("t.{}", example.reads))
                && example.code.contains(function),
            "{example:?}"
        );
    }
}
