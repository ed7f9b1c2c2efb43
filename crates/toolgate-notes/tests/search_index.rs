//! The top-k index (`toolgate_notes::search_index`) against the FTS5 statement `notes_search`
//! ranks with today (`search_sql::page`), on a real notebook: the sample notebook and 10,000
//! generated notes (the benchmark's 10k size and seed). For every query of the benchmark's mix
//! and a few that stress the tokenizer, every word and any word, every kind filter and pages
//! deep into the results, the index must give the same ids in the same order and the same total.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use rusqlite::Connection;
use toolgate_core::sql::Dialect;
use toolgate_notes::notebook_index::{IndexPolicy, IndexState, index_dir};
use toolgate_notes::search::fts_query;
use toolgate_notes::search_index::{IndexError, MAX_CATCH_UP_CHANGES, PageRequest, SearchIndex};
use toolgate_notes::search_sql;
use toolgate_notes::{Kind, NotesStore, generate_notes};

/// The benchmark's generator seed.
const SEED: u64 = 7;

/// The query mix and queries where stemming, folding and duplicates matter.
fn queries() -> Vec<&'static str> {
    let mut queries = toolgate_notes::sample::SEARCH_QUERY_MIX.to_vec();
    queries.extend([
        "budgets budgeting",
        "Budget BUDGET",
        "run running runs",
        "café cafe",
        "design 48",
        "q1 final",
        "nothing-matches-this xylophone",
    ]);
    queries
}

/// FTS5's page: ids in order and the total (counted apart when the page is past the end).
fn fts5_page(conn: &Connection, expr: &str, request: PageRequest) -> (Vec<i64>, u64) {
    let kind = request.kind.map(Kind::as_str);
    let mut stmt = conn.prepare(&search_sql::page(Dialect::Sqlite)).unwrap();
    let rows: Vec<(i64, i64)> = stmt
        .query_map(
            rusqlite::params![expr, kind, request.limit, request.offset],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let total = match rows.first() {
        Some((_, total)) => *total as u64,
        None => conn
            .query_row(
                search_sql::count(Dialect::Sqlite),
                rusqlite::params![expr, kind],
                |r| r.get::<_, i64>(0),
            )
            .unwrap() as u64,
    };
    (rows.into_iter().map(|(id, _)| id).collect(), total)
}

fn requests() -> Vec<PageRequest> {
    let kinds = [
        None,
        Some(Kind::Note),
        Some(Kind::Todo),
        Some(Kind::Meeting),
        Some(Kind::Clip),
    ];
    let pages = [(5, 0), (20, 0), (5, 5), (20, 100), (5, 10_000)];
    let mut requests = Vec::new();
    for every in [true, false] {
        for kind in kinds {
            for (limit, offset) in pages {
                requests.push(PageRequest {
                    every,
                    kind,
                    limit,
                    offset,
                });
            }
        }
    }
    requests
}

/// Compares every request of every query; returns how many pages held at least one id.
fn compare_all(conn: &Connection, index: &SearchIndex) -> usize {
    let mut non_empty = 0;
    for query in queries() {
        let parsed = fts_query(query);
        let terms = index.query_terms(&parsed.terms).unwrap();
        for request in requests() {
            let expr = if request.every {
                parsed.all_words()
            } else {
                parsed.any_word()
            }
            .unwrap();
            let (ids, total) = fts5_page(conn, &expr, request);
            let page = index.page(&terms, request).unwrap();
            assert_eq!(
                (&page.ids, page.total),
                (&ids, total),
                "{query:?} {request:?}"
            );
            non_empty += usize::from(!ids.is_empty());
        }
    }
    non_empty
}

/// A notebook of the sample notes and `generated` more, in a temporary folder.
fn notebook(generated: usize) -> (tempfile::TempDir, NotesStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = NotesStore::init_sample(&dir.path().join("notes.sqlite")).unwrap();
    if generated > 0 {
        store
            .insert_notes(&generate_notes(generated, SEED))
            .unwrap();
    }
    (dir, store)
}

#[test]
fn the_index_ranks_every_page_of_the_query_mix_as_fts5_does_on_the_10k_notebook() {
    let (dir, store) = notebook(10_000);
    let index_dir = dir.path().join("index");
    std::fs::create_dir(&index_dir).unwrap();
    store
        .with_conn(|conn| {
            let index = SearchIndex::build(&*conn, Some(&index_dir), "test").unwrap();
            let non_empty = compare_all(conn, &index);
            // The comparison is not vacuous: most pages hold notes.
            assert!(non_empty > 300, "{non_empty} non-empty pages");
        })
        .unwrap();
}

#[test]
fn after_writes_deletes_and_changes_the_caught_up_index_still_ranks_as_fts5_does() {
    let (_dir, store) = notebook(2_000);
    let index = store
        .with_conn(|conn| SearchIndex::build(&*conn, None, "test").unwrap())
        .unwrap();
    // Writes through the store's own connection, as the tools make them.
    let mut extra = generate_notes(300, SEED + 1);
    extra[0].title = "Budget budget budget".into();
    extra[0].body = "budget".into();
    let added = store.insert_notes(&extra).unwrap();
    store
        .with_conn(|conn| {
            conn.execute_batch(&format!(
                "DELETE FROM notes WHERE id IN (3, 5, 40, {});
                 UPDATE notes SET title = 'Sourdough budget review', body = 'travel budget quarterly report' WHERE id = 7;
                 UPDATE notes SET kind = 'meeting' WHERE id IN (8, 9) AND kind = 'note';
                 UPDATE notes SET created = '2031-01-01' WHERE id = 11;
                 UPDATE notes SET tags = 'unrelated' WHERE id = 12;",
                added[5]
            ))
            .unwrap();
            assert!(index.applied().unwrap() > 0);
            let before = index.applied().unwrap();
            index.catch_up(&*conn).unwrap();
            assert!(index.applied().unwrap() > before);
            let non_empty = compare_all(conn, &index);
            assert!(non_empty > 100, "{non_empty} non-empty pages");
            // Nothing new: catching up again changes nothing.
            let applied = index.applied().unwrap();
            index.catch_up(&*conn).unwrap();
            assert_eq!(index.applied().unwrap(), applied);
            // More deletes in segments that already have some, and in the new one.
            conn.execute_batch(&format!(
                "DELETE FROM notes WHERE id IN (1, 2, 7, {});
                 UPDATE notes SET body = body || ' budget' WHERE id BETWEEN 100 AND 160;",
                added[0]
            ))
            .unwrap();
            index.catch_up(&*conn).unwrap();
            compare_all(conn, &index);
        })
        .unwrap();
}

/// Every query of the mix through the store's search, in both designs' wire form.
fn answers(store: &NotesStore) -> Vec<String> {
    queries()
        .iter()
        .flat_map(|q| {
            let mut args = toolgate_notes::SearchArgs::query(q);
            let first = store.search(&args).unwrap();
            args.kind = Some(Kind::Meeting);
            args.offset = Some(3);
            let filtered = store.search(&args).unwrap();
            [first, filtered].map(|out| format!("{} {:?}", out.content, out.untrusted))
        })
        .collect()
}

#[test]
fn a_large_notebook_opens_with_its_index_and_searches_answer_as_without_it() {
    let (dir, store) = notebook(1_500);
    let path = dir.path().join("notes.sqlite");
    let without = answers(&store);
    assert!(store.search_index().is_none(), "small notebooks have none");

    let indexed = NotesStore::open_with(&path, IndexPolicy::FromNotes(1_000)).unwrap();
    let state = indexed.wait_for_search_index(Duration::from_secs(60));
    assert_eq!(state, Some(IndexState::Ready));
    assert!(index_dir(&path).is_dir());
    assert_eq!(answers(&indexed), without);
    let served = indexed.search_index().unwrap().pages_served();
    assert!(
        served >= 2 * queries().len() as u64,
        "the index answered {served} pages"
    );

    // A second opening of the same notebook does not touch the index another owns.
    let second = NotesStore::open_with(&path, IndexPolicy::FromNotes(1_000)).unwrap();
    let state = second.wait_for_search_index(Duration::from_secs(60));
    assert!(
        matches!(&state, Some(IndexState::Unavailable(why)) if why.contains("another process")),
        "{state:?}"
    );
    // Its writes reach the owner's index, whose next search catches up.
    second
        .insert_notes(&[toolgate_notes::NewNote::note(
            "Zanzibar budget",
            "zanzibar zanzibar",
            "Personal",
            "2026-01-01",
        )])
        .unwrap();
    let both: Vec<_> = [&indexed, &second].map(answers).into_iter().collect();
    assert_eq!(both[0], both[1]);
    assert_ne!(both[0], without, "the new note is found");
    assert!(indexed.search_index().unwrap().pages_served() > served);
    assert!(second.search_index().is_none());

    // Opened again on the next start: the same index, caught up, not built again.
    let files = index_files(&path);
    drop((indexed, second));
    let again = NotesStore::open_with(&path, IndexPolicy::FromNotes(1_000)).unwrap();
    let state = again.wait_for_search_index(Duration::from_secs(60));
    assert_eq!(state, Some(IndexState::Ready));
    assert_eq!(index_files(&path), files);
    assert_eq!(answers(&again), both[0]);
    assert!(again.search_index().unwrap().pages_served() > 0);
}

/// The names of the index's files (a rebuilt index has segments of other names).
fn index_files(notebook: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(index_dir(notebook))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    names
}

#[test]
fn an_index_of_another_notebook_or_a_half_built_one_is_replaced_not_trusted() {
    let (dir_a, store_a) = notebook(1_200);
    let (dir_b, store_b) = notebook(0);
    store_b
        .insert_notes(&generate_notes(1_200, SEED + 9))
        .unwrap();
    let (path_a, path_b) = (
        dir_a.path().join("notes.sqlite"),
        dir_b.path().join("notes.sqlite"),
    );
    let expected_b = answers(&store_b);
    drop(store_a);
    {
        let a = NotesStore::open_with(&path_a, IndexPolicy::FromNotes(0)).unwrap();
        assert_eq!(
            a.wait_for_search_index(Duration::from_secs(60)),
            Some(IndexState::Ready)
        );
    }
    // A's index copied beside B (a restored backup, a copied folder), and a build left half
    // done by a crash.
    copy_dir(&index_dir(&path_a), &index_dir(&path_b));
    let partial = dir_b.path().join("notes.sqlite.search-index.partial");
    std::fs::create_dir(&partial).unwrap();
    std::fs::write(partial.join("junk"), "half").unwrap();

    let b = NotesStore::open_with(&path_b, IndexPolicy::FromNotes(0)).unwrap();
    assert_eq!(
        b.wait_for_search_index(Duration::from_secs(60)),
        Some(IndexState::Ready)
    );
    assert_eq!(answers(&b), expected_b);
    assert!(b.search_index().unwrap().pages_served() > 0);
    assert!(!partial.exists(), "the leftover is gone");
}

#[test]
fn an_index_too_far_behind_is_rebuilt_on_a_thread_while_fts5_answers() {
    let (dir, _store) = notebook(1_200);
    let path = dir.path().join("notes.sqlite");
    let indexed = NotesStore::open_with(&path, IndexPolicy::FromNotes(0)).unwrap();
    assert_eq!(
        indexed.wait_for_search_index(Duration::from_secs(60)),
        Some(IndexState::Ready)
    );
    // More writes than a search catches up with (an import, a reset), through another
    // connection.
    let writer = NotesStore::open_with(&path, IndexPolicy::Off).unwrap();
    let extra = MAX_CATCH_UP_CHANGES as usize + 500;
    writer
        .insert_notes(&generate_notes(extra, SEED + 3))
        .unwrap();
    let expected = answers(&writer);

    // The first search finds it too far behind: FTS5 answers it, the index is rebuilt.
    assert_eq!(answers(&indexed), expected);
    let state = indexed.wait_for_search_index(Duration::from_secs(120));
    assert_eq!(state, Some(IndexState::Ready));
    let rebuilt = indexed.search_index().unwrap();
    assert!(!rebuilt.is_stale());
    assert_eq!(answers(&indexed), expected);
    assert!(rebuilt.pages_served() > 0, "the rebuilt index answers");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn a_word_fts5_splits_or_drops_is_refused_so_the_caller_searches_fts5() {
    let (_dir, store) = notebook(0);
    store
        .with_conn(|conn| {
            let index = SearchIndex::build(&*conn, None, "test").unwrap();
            // A combining mark alone is a letter to Rust's split but no token to unicode61;
            // FTS5 cuts a long token short, and other words would not be told apart.
            for word in [
                "\u{0301}".to_string(),
                "a".repeat(40_000),
                "中".repeat(12_000),
            ] {
                let refused = index.query_terms(std::slice::from_ref(&word));
                assert!(
                    matches!(refused, Err(IndexError::Unsupported(_))),
                    "a word of {} bytes: {:?}",
                    word.len(),
                    refused.map(|t| t.len())
                );
            }
            assert_eq!(index.query_terms(&["Budgets".into()]).unwrap(), ["budget"]);
        })
        .unwrap();
}
