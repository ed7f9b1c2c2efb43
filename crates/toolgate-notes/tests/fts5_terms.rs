//! `Fts5Terms` against the notebook's own index: for every note of a real notebook (the sample
//! and generated notes), the terms the scratch table gives are the terms `notes_fts` holds for
//! that note, column by column and in token order; and the tokenizer is the one the store's
//! schema declares.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use toolgate_notes::fts5_terms::{Fts5Terms, RowTerms, TOKENIZER};
use toolgate_notes::{NotesStore, generate_notes};

#[test]
fn a_notes_terms_are_exactly_what_the_notebooks_index_holds() {
    let dir = tempfile::tempdir().unwrap();
    let store = NotesStore::init_sample(&dir.path().join("notes.sqlite")).unwrap();
    store.insert_notes(&generate_notes(500, 11)).unwrap();
    store
        .with_conn(|conn| {
            let declared: String = conn
                .query_row(
                    "SELECT sql FROM sqlite_master WHERE name = 'notes_fts'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert!(declared.contains(&format!("'{TOKENIZER}'")), "{declared}");
            let mut stmt = conn
                .prepare("SELECT id, title, body FROM notes ORDER BY id")
                .unwrap();
            let notes: Vec<(i64, String, String)> = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(notes.len() > 500);
            let rows: Vec<(i64, &str, &str)> = notes
                .iter()
                .map(|(id, title, body)| (*id, title.as_str(), body.as_str()))
                .collect();
            let ours = Fts5Terms::new().unwrap().rows(&rows).unwrap();
            conn.execute_batch(
                "CREATE VIRTUAL TABLE temp.indexed USING fts5vocab(main, notes_fts, instance);",
            )
            .unwrap();
            let mut stmt = conn
                .prepare("SELECT doc, col, term FROM temp.indexed ORDER BY doc, col, offset")
                .unwrap();
            let mut indexed: BTreeMap<i64, RowTerms> = notes
                .iter()
                .map(|(id, _, _)| (*id, RowTerms::default()))
                .collect();
            let found = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })
                .unwrap();
            for row in found {
                let (doc, col, term) = row.unwrap();
                let entry = indexed.get_mut(&doc).unwrap();
                match col.as_str() {
                    "title" => entry.title.push(term),
                    _ => entry.body.push(term),
                }
            }
            assert_eq!(ours.len(), indexed.len());
            for (id, terms) in &indexed {
                assert_eq!(&ours[id], terms, "note {id}");
            }
        })
        .unwrap();
}
