//! `notes_search`'s statements on each database: the only place the two differ. The words, the
//! every-word-then-any-word steps, the kind filter, paging, the snippets and everything a hit
//! shows are [`crate::search`]'s, shared.
//!
//! SQLite: FTS5 (`notes_fts`, porter stemmer over unicode61 with diacritics removed), ranked by
//! `bm25(notes_fts, 8.0, 1.0)`; FTS5's `highlight()` marks the matched words of a body.
//!
//! PostgreSQL: the generated `tsvector` column `notes.search` of migration V5 (the `english`
//! configuration; titles weighted A, bodies D) under a GIN index. The same words make the
//! query: each quoted as a lexeme of `to_tsquery('english', ..)`, joined by `&` (every word) or
//! `|` (any word). Hits are ranked by `ts_rank_cd` with weights {D 0.125, C 0, B 0, A 1.0} (the
//! 8 : 1 title-to-body weighting FTS5's bm25 is given) and normalization 1 (divided by one plus
//! the log of the note's length), then newer first and higher id first, as on SQLite.
//! `ts_headline(.., 'HighlightAll=true')` marks the matched words of the whole body with the
//! same marks FTS5's `highlight()` is given, so the Rust snippet code centres its fragments on
//! them exactly as on SQLite.
//!
//! Where PostgreSQL's ranking and matching differ from SQLite's:
//! - Ranking: `ts_rank_cd` is cover density (how close together the matched words are, and
//!   how often they occur), not BM25: it has no inverse document frequency, so a rare word
//!   counts no more than a common one, and length is damped by a logarithm rather than BM25's
//!   ratio to the average note length. Notes that match equally well may come in another
//!   order, and an any-word search may put a note with many mentions of one common word above
//!   one with a rarer word once.
//! - Stemming: the `english` Snowball stemmer, not FTS5's Porter stemmer; most words stem alike.
//!   Accents are kept (FTS5 removes them): "café" does not match "cafe".
//! - Common words: the `english` configuration drops its stop words from the query and the
//!   index. A search made only of such words ("what was it") matches nothing on PostgreSQL,
//!   where FTS5 matches them as words; one with other words matches as on SQLite.

use toolgate_core::sql::Dialect;

use crate::search::FtsQuery;
use crate::snippet::{MARK_CLOSE, MARK_OPEN};

/// Title weight against a body weight of 1, in both rankings.
pub const TITLE_WEIGHT: f64 = 8.0;

/// The match expression for every word (`every`) or any word of `query`, in `dialect`'s query
/// language; `None` when the query has no word.
pub fn expression(query: &FtsQuery, every: bool, dialect: Dialect) -> Option<String> {
    match dialect {
        Dialect::Sqlite if every => query.all_words(),
        Dialect::Sqlite => query.any_word(),
        Dialect::Postgres => {
            let joiner = if every { " & " } else { " | " };
            (!query.terms.is_empty()).then(|| {
                query
                    .terms
                    .iter()
                    // Terms are letters and digits only; quoting keeps any of them a lexeme.
                    .map(|t| format!("'{}'", t.replace('\'', "''")))
                    .collect::<Vec<_>>()
                    .join(joiner)
            })
        }
    }
}

/// One page of matches of `?1`, of kind `?2` when not NULL, best first, `?3` rows from `?4`:
/// the ids and the number of all matches (`count(*) OVER ()`).
pub fn page(dialect: Dialect) -> String {
    match dialect {
        Dialect::Sqlite => format!(
            "WITH matched AS MATERIALIZED (
                 SELECT rowid AS id, bm25(notes_fts, {TITLE_WEIGHT:.1}, 1.0) AS score
                 FROM notes_fts WHERE notes_fts MATCH ?1
             )
             SELECT m.id, count(*) OVER () FROM matched m JOIN notes n ON n.id = m.id
             WHERE ?2 IS NULL OR n.kind = ?2
             ORDER BY m.score, n.created DESC, m.id DESC
             LIMIT ?3 OFFSET ?4"
        ),
        Dialect::Postgres => format!(
            "WITH matched AS MATERIALIZED (
                 SELECT n.id, n.kind, n.created,
                        ts_rank_cd('{{{body}, 0, 0, 1.0}}', n.search, q, 1) AS score
                 FROM notes n, to_tsquery('english', ?1) q WHERE n.search @@ q
             )
             SELECT m.id, count(*) OVER () FROM matched m
             WHERE ?2::text IS NULL OR m.kind = ?2
             ORDER BY m.score DESC, m.created DESC, m.id DESC
             LIMIT ?3 OFFSET ?4",
            body = 1.0 / TITLE_WEIGHT
        ),
    }
}

/// How many notes match `?1` (of kind `?2` when not NULL): for a page past the last match.
pub fn count(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => {
            "SELECT count(*) FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid
             WHERE notes_fts MATCH ?1 AND (?2 IS NULL OR n.kind = ?2)"
        }
        Dialect::Postgres => {
            "SELECT count(*) FROM notes n, to_tsquery('english', ?1) q
             WHERE n.search @@ q AND (?2::text IS NULL OR n.kind = ?2)"
        }
    }
}

/// The body of note `?2` with the matches of `?1` marked (no row when it does not match), and
/// the parameters that follow the match expression and the id.
pub fn highlight(dialect: Dialect) -> (&'static str, Vec<String>) {
    match dialect {
        Dialect::Sqlite => (
            "SELECT highlight(notes_fts, 1, ?3, ?4) FROM notes_fts
             WHERE notes_fts MATCH ?1 AND rowid = ?2",
            vec![MARK_OPEN.to_string(), MARK_CLOSE.to_string()],
        ),
        Dialect::Postgres => (
            "SELECT ts_headline('english', n.body, q, ?3) FROM notes n, to_tsquery('english', ?1) q
             WHERE n.id = ?2 AND n.search @@ q",
            vec![format!(
                "StartSel=\"{MARK_OPEN}\", StopSel=\"{MARK_CLOSE}\", HighlightAll=true"
            )],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::fts_query;

    #[test]
    fn postgres_expressions_quote_every_word_and_join_them_as_asked() {
        let query = fts_query("design team's budget OR NOT");
        assert_eq!(
            expression(&query, true, Dialect::Postgres).as_deref(),
            Some("'design' & 'team' & 's' & 'budget'")
        );
        assert_eq!(
            expression(&query, false, Dialect::Postgres).as_deref(),
            Some("'design' | 'team' | 's' | 'budget'")
        );
        assert_eq!(expression(&query, true, Dialect::Sqlite), query.all_words());
        assert_eq!(expression(&fts_query("?!"), true, Dialect::Postgres), None);
    }
}
