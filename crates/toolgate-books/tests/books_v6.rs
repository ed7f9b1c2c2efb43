//! books-v6 on the real catalogue through the real dispatcher: every write task, asked with
//! its books first, changes exactly the right books; the call books-v4's runs ended on (the tag
//! alone) is refused by the schema; a refusal's example is in this design's shape and works
//! when sent as it is.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{WRITE_TASKS, done, fixture, on_both_stores, write_task};
use serde_json::json;
use toolgate_books::Toolset;
use toolgate_core::ErrorCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_task_asked_with_its_books_first_changes_exactly_the_right_books() {
    on_both_stores(|| async {
        // (suite task, the call in v6's shape); common::WRITE_TASKS holds what each must change.
        let calls = [
            ("collins-read", json!({"books": {"author": "Suzanne Collins"}, "status": "read"})),
            ("riordan-reading", json!({"books": {"author": "Rick Riordan"}, "status": "reading"})),
            ("brown-want", json!({"books": {"author": "Dan Brown"}, "status": "want_to_read"})),
            (
                "king-early-read",
                json!({"books": {"author": "Stephen King", "published_before": 1990}, "status": "read"}),
            ),
            (
                "recent-good-want",
                json!({"books": {"published_after": 2010, "min_rating": 4.2}, "status": "want_to_read"}),
            ),
            ("austen-classic", json!({"books": {"author": "Jane Austen"}, "tag": "classic"})),
            ("green-ya", json!({"books": {"author": "John Green"}, "tag": "ya"})),
            ("spanish-tag", json!({"books": {"language": "spa"}, "tag": "spanish"})),
            (
                "rowling-fav",
                json!({"books": {"author": "Rowling", "sort": "highest_rated", "limit": 2}, "tag": "fav"}),
            ),
            (
                "oldest-three-ancient",
                json!({"books": {"sort": "earliest", "limit": 3}, "tag": "ancient"}),
            ),
            (
                "best-2005-want",
                json!({"books": {"published_in": 2005, "sort": "highest_rated", "limit": 1}, "status": "want_to_read"}),
            ),
            (
                "tolkien-top-read",
                json!({"books": {"author": "Tolkien", "sort": "highest_rated", "limit": 1}, "status": "read"}),
            ),
        ];
        for task in &WRITE_TASKS {
            assert!(
                calls.iter().any(|(name, _)| *name == task.name),
                "{}: no v6 call",
                task.name
            );
        }
        for (name, args) in calls {
            let task = write_task(name);
            let f = fixture(Toolset::V6);
            let content = done(&f.call(task.tool, args).await, name);
            let n = f.assert_wrote(name, task, &content);
            assert_eq!(content["changed"], json!(n), "{name}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tag_alone_is_refused_and_every_refusal_teaches_a_call_that_works_as_it_is() {
    on_both_stores(|| async {
        // The call books-v4's runs ended on, in either shape: the schema refuses it unrun.
        for args in [
            json!({"tag": "spanish", "action": "add"}),
            json!({"language": "spa", "tag": "spanish"}),
        ] {
            let f = fixture(Toolset::V6);
            let outcome = f.call("books_tag", args.clone()).await;
            assert_eq!(
                outcome.error().map(|e| e.code),
                Some(ErrorCode::InvalidArgument),
                "{args}: {}",
                outcome.model_text()
            );
            assert_eq!(f.books_changed(), 0, "{args} changed nothing");
        }
        // Books named by nothing: v4's refusal, its example in v6's shape.
        let f = fixture(Toolset::V6);
        let refused = f
            .call(
                "books_tag",
                json!({"books": {"author": "none"}, "tag": "spanish"}),
            )
            .await;
        let error = refused.error().unwrap();
        assert_eq!(error.code, ErrorCode::InvalidArgument);
        assert_eq!(error.field.as_deref(), Some("books.author"));
        assert_eq!(
            error.example,
            Some(json!({"books": {"author": "George Orwell"}, "tag": "spanish"}))
        );
        assert_eq!(f.books_changed(), 0);
        // No match: the example is the corrected call, and sent as it is, it works.
        let f = fixture(Toolset::V6);
        let refused = f
            .call(
                "books_set_status",
                json!({"books": {"author": "Suzanne Collins", "current_status": "reading"}, "status": "read"}),
            )
            .await;
        let error = refused.error().unwrap();
        assert_eq!(error.code, ErrorCode::NotFound);
        let example = error.example.clone().unwrap();
        assert_eq!(
            example,
            json!({"books": {"author": "Suzanne Collins"}, "status": "read"})
        );
        assert_eq!(f.books_changed(), 0);
        done(
            &f.call("books_set_status", example).await,
            "the corrected call",
        );
        assert_eq!(
            f.sql_i64("SELECT count(*) FROM books WHERE my_status = 'read'"),
            3
        );
    })
    .await;
}
