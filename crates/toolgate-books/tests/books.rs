//! The book catalogue on the real data, through the real dispatcher.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fixture, on_both_stores};
use serde_json::{Value, json};
use toolgate_books::{BooksStore, StoreError, Toolset};
use toolgate_core::ErrorCode;
use toolgate_core::registry::contract_problems;

/// o200k_base token counts, as the eval and `toolgate tools` report them.
mod tokens {
    pub fn count(text: &str) -> usize {
        tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(text)
            .len()
    }
}

#[test]
fn catalogue_has_the_documented_shape() {
    let f = fixture(Toolset::V2);
    assert_eq!(f.sql_i64("SELECT count(*) FROM books"), 300);
    assert_eq!(f.sql_i64("SELECT min(book_id) FROM books"), 1);
    assert_eq!(f.sql_i64("SELECT max(book_id) FROM books"), 300);
    assert_eq!(
        f.sql_i64("SELECT count(*) FROM books WHERE language_code IS NULL"),
        5
    );
    assert_eq!(
        f.sql_i64("SELECT count(*) FROM books WHERE original_publication_year IS NULL"),
        1
    );
    assert_eq!(
        f.sql_i64(
            "SELECT count(*) FROM books WHERE language_code = '' OR original_publication_year = 0"
        ),
        0
    );
    assert_eq!(f.books_changed(), 0);
}

#[test]
fn every_registered_tool_honours_the_contract() {
    for toolset in Toolset::ALL {
        let f = fixture(toolset);
        let specs: Vec<_> = f.dispatcher.registry().specs().collect();
        assert!(!specs.is_empty());
        let problems = contract_problems(specs.iter().copied());
        assert!(problems.is_empty(), "{}: {problems:#?}", toolset.name());
        for spec in specs {
            assert!(
                !spec.policy.reason.trim().is_empty(),
                "{} has no risk reason",
                spec.name
            );
        }
    }
}

#[test]
fn contract_check_catches_a_description_without_a_sibling() {
    let f = fixture(Toolset::V2);
    let mut specs: Vec<_> = f.dispatcher.registry().specs().cloned().collect();
    specs[0].description.avoid_when = Some("never".into());
    let problems = contract_problems(specs.iter());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains(&specs[0].name));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn author_search_finds_every_rowling_book_including_multi_author_fields() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V2);
        let expected =
            f.sql_ids("SELECT book_id FROM books WHERE authors LIKE '%Rowling%' ORDER BY book_id");
        assert!(expected.len() >= 2);
        let multi = f.sql_i64(
            "SELECT count(*) FROM books WHERE authors LIKE '%Rowling%' AND authors LIKE '%,%'",
        );
        assert!(multi >= 1, "the data has multi-author Rowling rows");
        let out = f
            .call("books_search", json!({"author": "rowling", "limit": 50}))
            .await;
        let result = out.observation().cloned().expect("search succeeds");
        let mut got: Vec<i64> = result.content["books"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["id"].as_i64().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, expected);
        assert_eq!(result.content["total_matches"], json!(expected.len()));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn total_matches_answers_counts_without_listing_everything() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V2);
        let collins =
            f.sql_i64("SELECT count(*) FROM books WHERE authors LIKE '%Suzanne Collins%'");
        let out = f
            .call(
                "books_search",
                json!({"author": "Suzanne Collins", "limit": 1}),
            )
            .await;
        let content = out.observation().cloned().unwrap().content;
        assert_eq!(content["total_matches"], json!(collins));
        assert_eq!(content["books"].as_array().unwrap().len(), 1);
        assert_eq!(content["next_offset"], json!(1), "pagination is loud");
        assert!(content["note"].as_str().unwrap().contains("offset 1"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_and_sort_match_sql_including_ties_by_id() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V2);
        let cases = [
            (
                json!({"year_min": 2011, "rating_min": 4.2, "limit": 50, "sort": "rating_desc"}),
                "SELECT book_id FROM books WHERE original_publication_year >= 2011 AND average_rating >= 4.2 ORDER BY average_rating DESC, book_id",
            ),
            (
                json!({"year_max": 1899, "sort": "year_asc", "limit": 50}),
                "SELECT book_id FROM books WHERE original_publication_year <= 1899 ORDER BY original_publication_year, book_id",
            ),
            (
                json!({"language": "en-US", "limit": 50}),
                "SELECT book_id FROM books WHERE language_code = 'en-US' ORDER BY ratings_count DESC, book_id LIMIT 50",
            ),
            (
                json!({"language": "none", "limit": 50}),
                "SELECT book_id FROM books WHERE language_code IS NULL ORDER BY ratings_count DESC, book_id",
            ),
            (
                json!({"title": "harry potter", "sort": "title"}),
                "SELECT book_id FROM books WHERE title LIKE '%harry potter%' ORDER BY title COLLATE NOCASE, book_id LIMIT 10",
            ),
        ];
        for (args, sql) in cases {
            let out = f.call("books_search", args.clone()).await;
            let content = out
                .observation()
                .cloned()
                .unwrap_or_else(|| panic!("{args}: {:?}", out.result))
                .content;
            let got: Vec<i64> = content["books"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["id"].as_i64().unwrap())
                .collect();
            assert_eq!(got, f.sql_ids(sql), "{args}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_errors_teach_the_fix() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V2);
        let cases = [
            (
                json!({"author": "x", "sort": "best"}),
                ErrorCode::InvalidArgument,
                "sort",
                "rating_desc",
            ),
            (
                json!({"authr": "Rowling"}),
                ErrorCode::InvalidArgument,
                "authr",
                "author",
            ),
            (
                json!({"year_min": 2015, "year_max": 2011}),
                ErrorCode::InvalidArgument,
                "year_min",
                "inclusive",
            ),
            (
                json!({"language": "english"}),
                ErrorCode::InvalidArgument,
                "language",
                "eng",
            ),
            (
                json!({"limit": 500}),
                ErrorCode::InvalidArgument,
                "limit",
                "50",
            ),
        ];
        for (args, code, field, teaches) in cases {
            let out = f.call("books_search", args.clone()).await;
            let err = out.error().expect("refused");
            assert_eq!(err.code, code, "{args}");
            assert_eq!(err.field.as_deref(), Some(field), "{args}");
            let text = out.model_text();
            assert!(text.contains(teaches), "{args}: {text}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_errors_are_terse_status_lines() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V1);
        let out = f
            .call(
                "update_item",
                json!({"id": 1, "fields": {"my_status": "finished"}}),
            )
            .await;
        assert_eq!(out.model_text(), "400 Bad Request");
        let out = f.call("get_item", json!({"id": 9999})).await;
        assert_eq!(out.model_text(), "404 Not Found");
        assert_eq!(
            f.sql_i64("SELECT count(*) FROM books WHERE my_status IS NOT NULL"),
            0
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_status_with_an_unknown_id_changes_nothing() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V2);
        let out = f
            .call(
                "books_set_status",
                json!({"ids": [1, 2, 999], "status": "read"}),
            )
            .await;
        let err = out.error().cloned().unwrap();
        assert_eq!(err.code, ErrorCode::NotFound);
        assert!(err.message.contains("999"));
        assert_eq!(
            f.sql_i64("SELECT count(*) FROM books WHERE my_status IS NOT NULL"),
            0
        );
        assert_eq!(f.sql_i64("SELECT count(*) FROM tool_receipts"), 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_step_tag_top_two_rowling_books() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V2);
        let top = f
            .call(
                "books_search",
                json!({"author": "Rowling", "sort": "rating_desc", "limit": 2}),
            )
            .await;
        let ids: Vec<i64> = top.observation().cloned().unwrap().content["books"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["id"].as_i64().unwrap())
            .collect();
        let expected = f.sql_ids("SELECT book_id FROM books WHERE authors LIKE '%Rowling%' ORDER BY average_rating DESC, book_id LIMIT 2");
        assert_eq!(ids, expected);
        let tagged = f
            .call("books_tag", json!({"ids": ids, "add": ["Fav"]}))
            .await;
        assert!(!tagged.is_error(), "{}", tagged.model_text());
        assert_eq!(tagged.record.undo.as_ref().unwrap()["tool"], "books_tag");
        let mut fav = f.sql_ids("SELECT book_id FROM books WHERE my_tags = 'fav'");
        fav.sort();
        let mut want = expected.clone();
        want.sort();
        assert_eq!(fav, want);
        let found = f.call("books_search", json!({"tag": "fav"})).await;
        assert_eq!(
            found.observation().cloned().unwrap().content["total_matches"],
            json!(2)
        );
        let untag = f
            .call("books_tag", json!({"ids": [want[0]], "remove": ["fav"]}))
            .await;
        assert!(!untag.is_error());
        assert_eq!(
            f.sql_i64("SELECT count(*) FROM books WHERE my_tags = 'fav'"),
            1
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_write_in_the_same_run_is_applied_once() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V2);
        let args = json!({"ids": [5], "add": ["classic"]});
        let first = f.call("books_tag", args.clone()).await;
        let second = f.call("books_tag", args).await;
        assert!(!first.record.duplicate);
        assert!(second.record.duplicate);
        assert_eq!(first.model_value(), second.model_value());
        assert_eq!(f.sql_i64("SELECT count(*) FROM tool_receipts"), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_restores_the_initial_state() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V2);
        f.call(
            "books_set_status",
            json!({"ids": [1, 2, 3], "status": "reading"}),
        )
        .await
        .observation()
        .cloned()
        .unwrap();
        f.call("books_tag", json!({"ids": [4], "add": ["x"]}))
            .await
            .observation()
            .cloned()
            .unwrap();
        assert_eq!(f.books_changed(), 4);
        f.store.reset().unwrap();
        assert_eq!(f.books_changed(), 0);
        assert_eq!(f.sql_i64("SELECT count(*) FROM tool_receipts"), 0);
        assert_eq!(f.sql_i64("SELECT count(*) FROM books"), 300);
        // After a reset, the same call in the same run is a fresh write, not a replay.
        let again = f
            .call(
                "books_set_status",
                json!({"ids": [1, 2, 3], "status": "reading"}),
            )
            .await;
        assert!(!again.record.duplicate);
    })
    .await;
}

#[test]
fn init_refuses_to_overwrite_and_open_refuses_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.sqlite");
    BooksStore::init(&path).unwrap();
    assert!(matches!(
        BooksStore::init(&path),
        Err(StoreError::AlreadyExists { .. })
    ));
    let foreign = dir.path().join("other.sqlite");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x);")
        .unwrap();
    assert!(matches!(
        BooksStore::open(&foreign),
        Err(StoreError::NotABooksDatabase { .. })
    ));
    assert!(matches!(
        BooksStore::open(&dir.path().join("none.sqlite")),
        Err(StoreError::Missing { .. })
    ));
    assert!(!dir.path().join("b.partial").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_list_items_returns_every_row_at_full_token_cost() {
    on_both_stores(|| async {
        let f = fixture(Toolset::V1);
        let out = f.call("list_items", json!({})).await;
        let obs = out.observation().unwrap();
        assert!(obs.truncated.is_none(), "v1 returns everything");
        assert_eq!(obs.content.as_array().map(Vec::len), Some(300));
        let v1_tokens = tokens::count(&out.model_text());
        let v2 = fixture(Toolset::V2)
            .call("books_search", json!({"author": "Rowling"}))
            .await;
        let v2_tokens = tokens::count(&v2.model_text());
        println!(
            "list_items: {v1_tokens} tokens; books_search(author=Rowling): {v2_tokens} tokens"
        );
        // The seed estimates about 16,000 tokens for the full listing.
        assert!((12_000..=30_000).contains(&v1_tokens), "{v1_tokens}");
        assert!(v2_tokens * 10 < v1_tokens);
        let _: &Value = &obs.content;
    })
    .await;
}
