//! books-v3's writes by filter, on the real catalogue through the real dispatcher: each update
//! task of the suite is one call without ids, ids are refused, and what a filter write refuses
//! changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{WRITE_TASKS, done, fixture, on_both_stores};
use serde_json::{Value, json};
use toolgate_books::Toolset;
use toolgate_core::ErrorCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_update_task_of_the_suite_is_one_call_without_ids() {
    on_both_stores(|| async {
        // (suite task, the v3 call that does it); common::WRITE_TASKS holds what each must change.
        let calls: [(&str, Value); 12] = [
            (
                "collins-read",
                json!({"author": "Suzanne Collins", "status": "read"}),
            ),
            (
                "riordan-reading",
                json!({"author": "Rick Riordan", "status": "reading"}),
            ),
            (
                "brown-want",
                json!({"author": "Dan Brown", "status": "want_to_read"}),
            ),
            (
                "king-early-read",
                json!({"author": "Stephen King", "year_max": 1989, "status": "read"}),
            ),
            (
                "recent-good-want",
                json!({"year_min": 2011, "rating_min": 4.2, "status": "want_to_read"}),
            ),
            (
                "austen-classic",
                json!({"author": "Jane Austen", "add": ["classic"]}),
            ),
            ("green-ya", json!({"author": "John Green", "add": ["ya"]})),
            (
                "spanish-tag",
                json!({"language": "spa", "add": ["spanish"]}),
            ),
            (
                "rowling-fav",
                json!({"author": "Rowling", "sort": "rating_desc", "limit": 2, "add": ["fav"]}),
            ),
            (
                "tolkien-top-read",
                json!({"author": "Tolkien", "sort": "rating_desc", "limit": 1, "status": "read"}),
            ),
            (
                "oldest-three-ancient",
                json!({"sort": "year_asc", "limit": 3, "add": ["ancient"]}),
            ),
            (
                "best-2005-want",
                json!({"year_min": 2005, "year_max": 2005, "sort": "rating_desc", "limit": 1, "status": "want_to_read"}),
            ),
        ];
        for task in &WRITE_TASKS {
            let (_, args) = calls
                .iter()
                .find(|(name, _)| *name == task.name)
                .unwrap_or_else(|| panic!("{}: no v3 call", task.name));
            let f = fixture(Toolset::V3);
            let content = done(&f.call(task.tool, args.clone()).await, task.name);
            let n = f.assert_wrote(task.name, task, &content);
            assert_eq!(content["updated"], json!(n), "{}", task.name);
            for book in content["books"].as_array().unwrap() {
                assert!(
                    book["title"].as_str().is_some_and(|t| !t.is_empty()),
                    "{}",
                    task.name
                );
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_that_leaves_matches_unchanged_says_how_many() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V3);
        let rowling = f.sql_i64("SELECT count(*) FROM books WHERE authors LIKE '%Rowling%'");
        let out = f
            .call(
                "books_tag",
                json!({"author": "Rowling", "sort": "rating_desc", "limit": 2, "add": ["fav"]}),
            )
            .await;
        let content = out.observation().unwrap().content.clone();
        assert_eq!(content["matched"], json!(rowling));
        assert_eq!(content["updated"], json!(2));
        assert!(
            content["note"]
                .as_str()
                .unwrap()
                .contains(&format!("first 2 of {rowling}")),
            "{content}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_cannot_be_bounded_or_matched_change_nothing() {
    on_both_stores(|| async {
        // (what it prevents, call, arguments, code, words the message must have)
        let cases: [(&str, &str, Value, ErrorCode, &str); 6] = [
            (
                "a write to the whole catalogue",
                "books_set_status",
                json!({"status": "read"}),
                ErrorCode::InvalidArgument,
                "never applies to the whole catalogue",
            ),
            (
                "a write to the whole catalogue by tags",
                "books_tag",
                json!({"add": ["x"]}),
                ErrorCode::InvalidArgument,
                "never applies to the whole catalogue",
            ),
            (
                "more than 100 books in one call",
                "books_set_status",
                json!({"rating_min": 0, "status": "read"}),
                ErrorCode::InvalidArgument,
                "300 books match",
            ),
            (
                "a filter nothing matches",
                "books_tag",
                json!({"author": "Nobody Anybody", "add": ["x"]}),
                ErrorCode::NotFound,
                "nothing was changed",
            ),
            (
                "a guessed id (v3 writes take none)",
                "books_set_status",
                json!({"ids": [1, 2, 3], "status": "read"}),
                ErrorCode::InvalidArgument,
                "`ids` is not a field",
            ),
            (
                "crossed ranges",
                "books_set_status",
                json!({"year_min": 2000, "year_max": 1990, "status": "read"}),
                ErrorCode::InvalidArgument,
                "year_min",
            ),
        ];
        for (prevents, tool, args, code, words) in cases {
            let f = fixture(Toolset::V3);
            let out = f.call(tool, args).await;
            let err = out
                .error()
                .cloned()
                .unwrap_or_else(|| panic!("{prevents}: accepted"));
            assert_eq!(err.code, code, "{prevents}: {err:?}");
            assert!(err.message.contains(words), "{prevents}: {}", err.message);
            assert_eq!(f.books_changed(), 0, "{prevents}: nothing changed");
            assert_eq!(
                f.sql_i64("SELECT count(*) FROM tool_receipts"),
                0,
                "{prevents}"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_match_names_the_filters_that_match_nothing_alone() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V3);
        // As the embedded model wrote it: every optional field filled with a placeholder.
        let out = f
            .call(
                "books_tag",
                json!({"author": "none", "year_min": 0, "year_max": 0, "language": "spa", "add": ["spanish"]}),
            )
            .await;
        let err = out.error().cloned().unwrap();
        assert_eq!(err.code, ErrorCode::NotFound);
        let hint = err.hint.unwrap();
        assert!(
            hint.contains("author \"none\"") && hint.contains("year_max 0"),
            "{hint}"
        );
        assert!(!hint.contains("language"), "spa matches books: {hint}");
        assert!(hint.contains("Leave out every filter"), "{hint}");
        // Filters that each match but not together say so instead.
        let out = f
            .call(
                "books_set_status",
                json!({"author": "Suzanne Collins", "year_max": 1900, "status": "read"}),
            )
            .await;
        let hint = out.error().cloned().unwrap().hint.unwrap();
        assert!(hint.contains("not together"), "{hint}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approver_sees_which_books_a_filter_write_would_change() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V3);
        let preview = f
            .denied_preview(
                "books_set_status",
                json!({"author": "Suzanne Collins", "status": "read"}),
            )
            .await;
        let collins =
            f.sql_i64("SELECT count(*) FROM books WHERE authors LIKE '%Suzanne Collins%'");
        assert_eq!(preview["changes"], json!(collins));
        let titles: Vec<&str> = preview["books"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(titles.len() as i64, collins);
        assert!(
            titles.iter().all(|t| t.contains("Suzanne Collins")),
            "{titles:?}"
        );
        assert!(
            titles.iter().any(|t| t.contains("Hunger Games")),
            "{titles:?}"
        );
        assert_eq!(
            f.sql_i64("SELECT count(*) FROM books WHERE my_status IS NOT NULL"),
            0,
            "denied: nothing changed"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_filter_write_is_applied_once_and_undo_restores_the_previous_state() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V3);
        let args = json!({"author": "Jane Austen", "add": ["classic"]});
        let first = f.call("books_tag", args.clone()).await;
        let second = f.call("books_tag", args).await;
        assert!(!first.record.duplicate);
        assert!(second.record.duplicate);
        assert_eq!(first.model_value(), second.model_value());
        let undo = first.record.undo.clone().unwrap();
        assert_eq!(undo["tool"], "books_tag");
        let restore = undo["restore"].as_array().unwrap();
        let austen = f.sql_i64("SELECT count(*) FROM books WHERE authors LIKE '%Jane Austen%'");
        assert_eq!(restore.len() as i64, austen);
        assert!(restore.iter().all(|r| r["tags"] == ""), "{restore:?}");
    })
    .await;
}

#[test]
fn v3_reads_answer_repeats_and_its_writes_do_not() {
    let f = fixture(Toolset::V3);
    for spec in f.dispatcher.registry().specs() {
        assert_eq!(
            spec.executor.answers_repeats, !spec.executor.writes,
            "{}",
            spec.name
        );
    }
    let v2 = fixture(Toolset::V2);
    assert!(
        v2.dispatcher
            .registry()
            .specs()
            .all(|s| !s.executor.answers_repeats),
        "v2 is unchanged"
    );
}
