//! FTS5's `bm25()` as a pure function, so a ranking outside SQLite (issue 39: a top-k index
//! that does not score every match inside FTS5) can order notes exactly as `notes_search` does
//! today (`bm25(notes_fts, 8.0, 1.0)`, then newer first, then higher id).
//!
//! Why our own: no library computes FTS5's variant. It is BM25 with k1 = 1.2 and b = 0.75 over
//! one row, not per column: a term's frequency in a row is the sum of its column weights over
//! its instances (a title instance counts 8, a body instance 1), the row's length is its
//! tokens in every column, and the average length is the table's tokens over its rows; a
//! term's IDF is ln((N - n + 0.5) / (n + 0.5)) for N rows of which n hold the term, raised to
//! 1e-6 when not positive. The score is negated (lower ranks first), as FTS5 returns it (`-1.0 * score`, the same bits).
//!
//! Guarantees: [`score`] performs FTS5's floating-point operations in FTS5's order
//! (`ext/fts5/fts5_aux.c`), so equal inputs give the same `f64`; the test
//! `bm25_scores_every_match_of_the_query_mix_exactly_as_fts5_does` compares it with FTS5 on a
//! generated notebook. Refuses nothing: an empty table has no average length, and its score
//! is 0 for every row, as FTS5's would be for the rows it cannot have.

/// FTS5's constants.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// FTS5's floor for a non-positive IDF (a term in more than half the rows).
const IDF_FLOOR: f64 = 1e-6;

/// What the table as a whole contributes: its rows and its tokens in every column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableStats {
    pub rows: u64,
    pub tokens: u64,
}

/// One query term in one row: how many rows of the table hold the term, and its instances in
/// this row per column (title, body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermInRow {
    pub rows_with_term: u64,
    pub title_hits: u32,
    pub body_hits: u32,
}

/// FTS5's IDF of a term that `rows_with_term` of `rows` rows hold.
pub fn idf(rows: u64, rows_with_term: u64) -> f64 {
    let (n_rows, n_hit) = (rows as f64, rows_with_term as f64);
    let idf = ((n_rows - n_hit + 0.5) / (n_hit + 0.5)).ln();
    if idf <= 0.0 { IDF_FLOOR } else { idf }
}

/// `bm25(notes_fts, title_weight, body_weight)` of a row of `row_tokens` tokens, for the query
/// `terms` in the query's order.
pub fn score(
    table: TableStats,
    terms: &[TermInRow],
    row_tokens: u64,
    (title_weight, body_weight): (f64, f64),
) -> f64 {
    if table.rows == 0 {
        return 0.0;
    }
    let avgdl = table.tokens as f64 / table.rows as f64;
    let d = row_tokens as f64;
    let mut total = 0.0;
    for term in terms {
        // FTS5 adds the column weight once per instance; sums of small whole numbers are exact,
        // so adding them by multiplication gives the same f64.
        let freq =
            f64::from(term.title_hits) * title_weight + f64::from(term.body_hits) * body_weight;
        total += idf(table.rows, term.rows_with_term)
            * ((freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * d / avgdl)));
    }
    -total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_term_in_most_rows_still_counts_a_little_and_a_rare_one_counts_more() {
        // (rows, rows with the term, idf is positive, idf is the floor)
        let cases = [
            (100, 1, true, false),
            (100, 49, true, false),
            (100, 50, false, true),
            (100, 51, false, true),
            (100, 100, false, true),
        ];
        for (rows, with, positive, floor) in cases {
            let idf = idf(rows, with);
            assert_eq!(idf > IDF_FLOOR, positive, "{rows} {with}: {idf}");
            assert_eq!(idf == IDF_FLOOR, floor, "{rows} {with}: {idf}");
        }
        assert!(idf(1000, 3) > idf(1000, 300));
    }

    #[test]
    fn a_title_hit_outranks_a_body_hit_and_a_longer_row_ranks_lower() {
        let table = TableStats {
            rows: 1000,
            tokens: 50_000,
        };
        let hit = |title_hits, body_hits| TermInRow {
            rows_with_term: 10,
            title_hits,
            body_hits,
        };
        let weights = (8.0, 1.0);
        // Lower is better, as FTS5 ranks.
        assert!(score(table, &[hit(1, 0)], 50, weights) < score(table, &[hit(0, 1)], 50, weights));
        assert!(score(table, &[hit(0, 1)], 20, weights) < score(table, &[hit(0, 1)], 200, weights));
        assert_eq!(score(table, &[hit(0, 0)], 50, weights), -0.0);
        let empty = TableStats { rows: 0, tokens: 0 };
        assert_eq!(score(empty, &[hit(1, 1)], 5, weights), 0.0);
    }
}
