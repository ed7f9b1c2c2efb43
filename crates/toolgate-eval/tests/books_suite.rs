//! The shipped books suite is what the issue asks for, and its checks mean something: each
//! task's expected state is unique (no tie at a top-k boundary), the initial store fails every
//! update check, and the gold state passes it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::Value;
use toolgate_books::BooksStore;
use toolgate_eval::checks::{self, ResolvedCheck};
use toolgate_eval::suite::{Split, Suite};

fn suite() -> Suite {
    Suite::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals/books.toml")).unwrap()
}

fn scalar(store: &BooksStore, sql: &str) -> f64 {
    store
        .with_conn(|c| c.query_row(sql, [], |r| r.get::<_, f64>(0)).unwrap())
        .unwrap()
}

#[test]
fn books_suite_has_the_seed_shape() {
    let suite = suite();
    assert_eq!(suite.tasks.len(), 20);
    let count = |cat: &str| suite.tasks.iter().filter(|t| t.category == cat).count();
    assert_eq!(
        (count("lookup"), count("update"), count("multistep")),
        (8, 8, 4)
    );
    let heldout = suite
        .tasks
        .iter()
        .filter(|t| t.split == Split::Heldout)
        .count();
    assert!(
        (6..=7).contains(&heldout),
        "about a third held out: {heldout}"
    );
}

#[test]
fn top_k_tasks_have_no_tie_at_the_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let store = BooksStore::init(&dir.path().join("b.sqlite")).unwrap();
    let boundaries = [
        (
            "rowling 2nd vs 3rd",
            "SELECT average_rating FROM books WHERE authors LIKE '%Rowling%' ORDER BY average_rating DESC LIMIT 1 OFFSET 1",
            "SELECT average_rating FROM books WHERE authors LIKE '%Rowling%' ORDER BY average_rating DESC LIMIT 1 OFFSET 2",
        ),
        (
            "tolkien 1st vs 2nd",
            "SELECT average_rating FROM books WHERE authors LIKE '%Tolkien%' ORDER BY average_rating DESC LIMIT 1",
            "SELECT average_rating FROM books WHERE authors LIKE '%Tolkien%' ORDER BY average_rating DESC LIMIT 1 OFFSET 1",
        ),
        (
            "oldest 3rd vs 4th",
            "SELECT -original_publication_year FROM books WHERE original_publication_year IS NOT NULL ORDER BY original_publication_year LIMIT 1 OFFSET 2",
            "SELECT -original_publication_year FROM books WHERE original_publication_year IS NOT NULL ORDER BY original_publication_year LIMIT 1 OFFSET 3",
        ),
        (
            "2005 1st vs 2nd",
            "SELECT average_rating FROM books WHERE original_publication_year = 2005 ORDER BY average_rating DESC LIMIT 1",
            "SELECT average_rating FROM books WHERE original_publication_year = 2005 ORDER BY average_rating DESC LIMIT 1 OFFSET 1",
        ),
        (
            "austen last vs next",
            "SELECT -average_rating FROM books WHERE authors LIKE '%Jane Austen%' ORDER BY average_rating LIMIT 1",
            "SELECT -average_rating FROM books WHERE authors LIKE '%Jane Austen%' ORDER BY average_rating LIMIT 1 OFFSET 1",
        ),
        (
            "brown first vs next",
            "SELECT -original_publication_year FROM books WHERE authors LIKE '%Dan Brown%' ORDER BY original_publication_year LIMIT 1",
            "SELECT -original_publication_year FROM books WHERE authors LIKE '%Dan Brown%' ORDER BY original_publication_year LIMIT 1 OFFSET 1",
        ),
    ];
    for (name, inside, outside) in boundaries {
        assert!(
            scalar(&store, inside) > scalar(&store, outside),
            "{name} is a tie"
        );
    }
}

#[test]
fn initial_state_fails_every_update_and_the_gold_state_passes() {
    let dir = tempfile::tempdir().unwrap();
    let store = BooksStore::init(&dir.path().join("b.sqlite")).unwrap();
    for task in suite().tasks.iter().filter(|t| t.category != "lookup") {
        store.reset().unwrap();
        let resolved: Vec<ResolvedCheck> = store
            .with_conn(|c| checks::resolve_all(&task.checks, &task.prompt, c).unwrap())
            .unwrap();
        let judged = |answer: Option<&str>| -> Vec<bool> {
            store
                .with_conn(|c| {
                    resolved
                        .iter()
                        .map(|r| checks::judge(r, c, answer).passed)
                        .collect()
                })
                .unwrap()
        };
        assert!(
            judged(Some("done")).iter().any(|p| !p),
            "{}: the untouched store must fail",
            task.id
        );
        // Gold: write exactly the expected rows.
        for check in &resolved {
            if let ResolvedCheck::StateSql { query, expected } = check {
                let column = if query.contains("my_status") {
                    "my_status"
                } else {
                    "my_tags"
                };
                assert!(
                    !expected.is_empty() || query.contains("WHERE my_"),
                    "{}",
                    task.id
                );
                for row in expected {
                    let (Value::Number(id), Value::String(value)) = (&row[0], &row[1]) else {
                        panic!("{}: {row:?}", task.id)
                    };
                    store
                        .with_conn(|c| {
                            c.execute(
                                &format!("UPDATE books SET {column} = ?1 WHERE book_id = ?2"),
                                rusqlite::params![value, id.as_i64()],
                            )
                            .unwrap()
                        })
                        .unwrap();
                }
            }
        }
        assert!(
            judged(Some("done")).iter().all(|p| *p),
            "{}: the gold state must pass",
            task.id
        );
    }
}

#[test]
fn lookup_expectations_resolve_to_the_documented_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = BooksStore::init(&dir.path().join("b.sqlite")).unwrap();
    let suite = suite();
    let expected = |id: &str| -> ResolvedCheck {
        let task = suite.tasks.iter().find(|t| t.id == id).unwrap();
        store
            .with_conn(|c| checks::resolve_all(&task.checks, &task.prompt, c).unwrap())
            .unwrap()
            .swap_remove(0)
    };
    for (id, value) in [
        ("collins-count", 3.0),
        ("king-count", 7.0),
        ("pre-1900-count", 30.0),
        ("no-language-count", 5.0),
    ] {
        let resolved = expected(id);
        assert!(
            matches!(resolved, ResolvedCheck::AnswerNumber { expected, .. } if expected == value),
            "{id}: {resolved:?}"
        );
    }
}
