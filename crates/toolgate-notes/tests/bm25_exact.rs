//! `toolgate_notes::bm25::score` against FTS5's own `bm25(notes_fts, 8.0, 1.0)` on a real
//! notebook of generated notes: for every note that each query of the benchmark's mix matches
//! (every word, then any word), the pure function given FTS5's counts (read through
//! `fts5vocab`, and the query's terms by `Fts5Terms`, a scratch FTS5 table with the notebook's
//! own tokenizer) returns the very `f64` FTS5 returns. This is what lets an index outside SQLite
//! rank notes exactly as `notes_search` does (issue 39).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use rusqlite::Connection;
use toolgate_notes::bm25::{TableStats, TermInRow, score};
use toolgate_notes::fts5_terms::Fts5Terms;
use toolgate_notes::search::fts_query;
use toolgate_notes::{NotesStore, generate_notes};

/// The benchmark's query mix.
const QUERIES: &[&str] = toolgate_notes::sample::SEARCH_QUERY_MIX;

struct Counts {
    table: TableStats,
    row_tokens: HashMap<i64, u64>,
}

fn counts(conn: &Connection) -> Counts {
    conn.execute_batch(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.notes_instances USING fts5vocab(main, notes_fts, instance);
         CREATE VIRTUAL TABLE IF NOT EXISTS temp.notes_rows USING fts5vocab(main, notes_fts, row);",
    )
    .unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM notes", [], |r| r.get(0))
        .unwrap();
    let mut stmt = conn
        .prepare("SELECT doc, count(*) FROM temp.notes_instances GROUP BY doc")
        .unwrap();
    let row_tokens: HashMap<i64, u64> = stmt
        .query_map([], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let tokens = row_tokens.values().sum();
    Counts {
        table: TableStats {
            rows: rows as u64,
            tokens,
        },
        row_tokens,
    }
}

/// Per note, the instances of `term` in (title, body); and how many notes hold it.
fn term_hits(conn: &Connection, term: &str) -> (HashMap<i64, (u32, u32)>, u64) {
    let mut stmt = conn
        .prepare(
            "SELECT doc, col, count(*) FROM temp.notes_instances WHERE term = ?1 GROUP BY doc, col",
        )
        .unwrap();
    let mut hits: HashMap<i64, (u32, u32)> = HashMap::new();
    let rows = stmt
        .query_map([term], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (doc, col, n) = row.unwrap();
        let entry = hits.entry(doc).or_default();
        match col.as_str() {
            "title" => entry.0 += n as u32,
            "body" => entry.1 += n as u32,
            other => panic!("column {other}"),
        }
    }
    let with = hits.len() as u64;
    (hits, with)
}

#[test]
fn bm25_scores_every_match_of_the_query_mix_exactly_as_fts5_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = NotesStore::init_sample(&dir.path().join("notes.sqlite")).unwrap();
    store.insert_notes(&generate_notes(3_000, 7)).unwrap();
    store
        .with_conn(|conn| {
            let counts = counts(conn);
            let tokenizer = Fts5Terms::new().unwrap();
            assert!(counts.table.rows > 3_000);
            let mut compared = 0;
            for query in QUERIES {
                let parsed = fts_query(query);
                // Each quoted word of the expression is one phrase of one token.
                let terms: Vec<String> = parsed
                    .terms
                    .iter()
                    .map(|word| {
                        let tokens = tokenizer.of(word).unwrap();
                        assert_eq!(tokens.len(), 1, "{word}: {tokens:?}");
                        tokens[0].clone()
                    })
                    .collect();
                let hits: Vec<(HashMap<i64, (u32, u32)>, u64)> =
                    terms.iter().map(|t| term_hits(conn, t)).collect();
                for expression in [parsed.all_words(), parsed.any_word()].into_iter().flatten() {
                    let mut stmt = conn
                        .prepare(
                            "SELECT rowid, bm25(notes_fts, 8.0, 1.0) FROM notes_fts WHERE notes_fts MATCH ?1",
                        )
                        .unwrap();
                    let ranked: Vec<(i64, f64)> = stmt
                        .query_map([&expression], |r| Ok((r.get(0)?, r.get(1)?)))
                        .unwrap()
                        .collect::<Result<_, _>>()
                        .unwrap();
                    for (id, fts5) in ranked {
                        let in_row: Vec<TermInRow> = hits
                            .iter()
                            .map(|(per_note, with)| {
                                let (title_hits, body_hits) =
                                    per_note.get(&id).copied().unwrap_or((0, 0));
                                TermInRow {
                                    rows_with_term: *with,
                                    title_hits,
                                    body_hits,
                                }
                            })
                            .collect();
                        let ours = score(counts.table, &in_row, counts.row_tokens[&id], (8.0, 1.0));
                        assert_eq!(
                            ours.to_bits(),
                            fts5.to_bits(),
                            "{expression} note {id}: ours {ours}, FTS5 {fts5}"
                        );
                        compared += 1;
                    }
                }
            }
            // The mix matches thousands of notes: the comparison is not vacuous.
            assert!(compared > 1_000, "{compared}");
        })
        .unwrap();
}
