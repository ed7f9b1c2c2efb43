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
    let rows_with: Vec<u64> = terms.iter().map(|t| t.rows_with_term).collect();
    // FTS5 adds the column weight once per instance; sums of small whole numbers are exact,
    // so adding them by multiplication gives the same f64.
    let freqs = terms.iter().map(|term| {
        f64::from(term.title_hits) * title_weight + f64::from(term.body_hits) * body_weight
    });
    Bm25Query::new(table, &rows_with).score(freqs, row_tokens)
}

/// One query over one table: what FTS5 computes once per query (the average row length and
/// each phrase's IDF), to score many rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Bm25Query {
    /// `None` for an empty table, whose every score is 0.
    avgdl: Option<f64>,
    idf: Vec<f64>,
}

/// Room for rounding in [`Bm25Query::best_possible`]: a bound a hair looser than exact
/// arithmetic, so a row is never skipped because the bound rounded the other way.
const BOUND_SLACK: f64 = 1e-9;

impl Bm25Query {
    /// The query whose phrases `rows_with_term` rows of `table` hold, phrase by phrase.
    pub fn new(table: TableStats, rows_with_term: &[u64]) -> Self {
        Bm25Query {
            avgdl: (table.rows > 0).then(|| table.tokens as f64 / table.rows as f64),
            idf: rows_with_term.iter().map(|&n| idf(table.rows, n)).collect(),
        }
    }

    /// The score of a row of `row_tokens` tokens whose weighted frequency of each phrase (the
    /// sum of the column weights of its instances; 0 for a phrase it lacks) is
    /// `weighted_freqs`, phrase by phrase.
    pub fn score(&self, weighted_freqs: impl IntoIterator<Item = f64>, row_tokens: u64) -> f64 {
        let Some(avgdl) = self.avgdl else {
            return 0.0;
        };
        let d = row_tokens as f64;
        let mut total = 0.0;
        for (idf, freq) in self.idf.iter().zip(weighted_freqs) {
            total += idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * d / avgdl)));
        }
        -total
    }

    /// A score no row holding only the phrases `present` can beat (lower ranks first): each
    /// phrase's term of the sum is below `idf * (k1 + 1)` whatever the row's frequency and
    /// length.
    pub fn best_possible(&self, present: impl IntoIterator<Item = usize>) -> f64 {
        let most: f64 = present
            .into_iter()
            .filter_map(|phrase| self.idf.get(phrase))
            .map(|idf| idf * (K1 + 1.0))
            .sum();
        -most * (1.0 + BOUND_SLACK)
    }

    /// A score no row with these weighted frequencies can beat when no row of the table is
    /// shorter than `shortest_row` tokens: a term of the sum only falls as the row grows.
    pub fn best_possible_at(
        &self,
        weighted_freqs: impl IntoIterator<Item = f64>,
        shortest_row: u64,
    ) -> f64 {
        self.score(weighted_freqs, shortest_row) * (1.0 + BOUND_SLACK)
    }
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

    #[test]
    fn no_row_scores_better_than_the_best_possible_bound_of_its_phrases() {
        let table = TableStats {
            rows: 10_000,
            tokens: 400_000,
        };
        let query = Bm25Query::new(table, &[3, 4_000, 9_000]);
        // (weighted frequencies, row length): short rows full of the words come closest.
        let rows: [([f64; 3], u64); 5] = [
            ([1.0, 0.0, 0.0], 1),
            ([800.0, 0.0, 0.0], 1),
            ([1e6, 1e6, 1e6], 1),
            ([8.0, 9.0, 1.0], 40),
            ([0.0, 1.0, 0.0], 400),
        ];
        for (freqs, len) in rows {
            let present: Vec<usize> = (0..3).filter(|&i| freqs[i] > 0.0).collect();
            let score = query.score(freqs, len);
            let bound = query.best_possible(present.iter().copied());
            assert!(
                bound < score,
                "{freqs:?} {len}: bound {bound} against {score}"
            );
            // The bound is not loose by more than the slack for the phrases present.
            assert!(bound > query.best_possible(0..3) || present.len() == 3);
            // Knowing the frequencies and the shortest row bounds it closer, still from below.
            for shortest in [0, 1, len] {
                let closer = query.best_possible_at(freqs, shortest);
                assert!(
                    bound <= closer && closer < score,
                    "{freqs:?} {len} {shortest}"
                );
            }
        }
    }
}
