//! The notebook's own terms for any text: what FTS5 indexes for a note's title and body, and
//! what it searches for a query word, produced by FTS5 itself.
//!
//! Why: an index beside `notes_fts` (issue 39: a top-k index that does not rank every match
//! inside FTS5) must match exactly the notes FTS5 matches, stemming, case folding and
//! diacritics included. Re-implementing FTS5's `unicode61` tokenizer and its Porter stemmer
//! would be a copy that drifts; instead the text goes through a scratch FTS5 table in memory,
//! made with the notebook's tokenizer ([`TOKENIZER`]), and its `fts5vocab` instance table gives
//! back each token as FTS5 indexed it.
//!
//! Guarantees: [`Fts5Terms::rows`] returns, per row, the terms of the title and of the body in
//! token order, the same multiset FTS5's own index holds for that row (test
//! `a_notes_terms_are_exactly_what_the_notebooks_index_holds`); the scratch table is emptied
//! after every call, so calls do not see each other. Refuses nothing: text without a token
//! gives an empty list.

use std::collections::BTreeMap;

use rusqlite::Connection;

/// The notebook's FTS5 tokenizer (`notes_fts` in the store's schema; a test keeps them equal).
pub const TOKENIZER: &str = "porter unicode61 remove_diacritics 2";

/// FTS5 keeps this many bytes of a longer token, cut where the bytes end even inside a
/// character: such a term is given with the cut character replaced (U+FFFD), and is not
/// exactly FTS5's.
pub const LONGEST_TERM_BYTES: usize = 32_768;

/// Whether `term` may be cut short or altered by the cut (see [`LONGEST_TERM_BYTES`]).
pub fn may_be_cut(term: &str) -> bool {
    term.len() >= LONGEST_TERM_BYTES || term.contains('\u{FFFD}')
}

/// A row's terms, column by column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowTerms {
    pub title: Vec<String>,
    pub body: Vec<String>,
}

/// A scratch FTS5 table that tokenizes as the notebook does.
pub struct Fts5Terms {
    scratch: Connection,
}

impl Fts5Terms {
    pub fn new() -> Result<Self, rusqlite::Error> {
        let scratch = Connection::open_in_memory()?;
        scratch.execute_batch(&format!(
            "CREATE VIRTUAL TABLE scratch USING fts5(title, body, content = '', tokenize = '{TOKENIZER}');
             CREATE VIRTUAL TABLE scratch_terms USING fts5vocab(scratch, instance);"
        ))?;
        Ok(Fts5Terms { scratch })
    }

    /// The terms of each `(id, title, body)`, by id.
    pub fn rows(
        &self,
        rows: &[(i64, &str, &str)],
    ) -> Result<BTreeMap<i64, RowTerms>, rusqlite::Error> {
        let tx = self.scratch.unchecked_transaction()?;
        {
            let mut insert =
                tx.prepare_cached("INSERT INTO scratch (rowid, title, body) VALUES (?1, ?2, ?3)")?;
            for (id, title, body) in rows {
                insert.execute(rusqlite::params![id, title, body])?;
            }
        }
        let mut terms: BTreeMap<i64, RowTerms> = rows
            .iter()
            .map(|(id, _, _)| (*id, RowTerms::default()))
            .collect();
        {
            let mut read = tx.prepare_cached(
                "SELECT doc, col, term FROM scratch_terms ORDER BY doc, col, offset",
            )?;
            let mut found = read.query([])?;
            while let Some(row) = found.next()? {
                let (doc, col): (i64, String) = (row.get(0)?, row.get(1)?);
                // FTS5 cuts a term at LONGEST_TERM_BYTES, maybe inside a character.
                let term = match row.get_ref(2)? {
                    rusqlite::types::ValueRef::Text(bytes) => {
                        String::from_utf8_lossy(bytes).into_owned()
                    }
                    other => {
                        return Err(rusqlite::Error::InvalidColumnType(
                            2,
                            "term".into(),
                            other.data_type(),
                        ));
                    }
                };
                let entry = terms.entry(doc).or_default();
                if col == "title" {
                    entry.title.push(term);
                } else {
                    entry.body.push(term);
                }
            }
        }
        // Contentless, so the whole index can be dropped at once: a `DELETE` would leave
        // tombstones that every later call's vocabulary scan reads (the scratch table of a
        // 100k-note build made each query's terms cost 1 ms).
        tx.execute("INSERT INTO scratch (scratch) VALUES ('delete-all')", [])?;
        tx.commit()?;
        Ok(terms)
    }

    /// The terms of one piece of text (a query word gives one term, or none).
    pub fn of(&self, text: &str) -> Result<Vec<String>, rusqlite::Error> {
        let mut rows = self.rows(&[(1, "", text)])?;
        Ok(rows.remove(&1).map(|r| r.body).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_become_the_terms_fts5_stems_folds_and_strips_of_accents() {
        let terms = Fts5Terms::new().unwrap();
        // (text, its terms)
        let cases: [(&str, &[&str]); 6] = [
            ("Budgets", &["budget"]),
            ("running runners", &["run", "runner"]),
            ("Café naïve", &["cafe", "naiv"]),
            ("$48,000", &["48", "000"]),
            ("?! …", &[]),
            ("\u{0301}", &[]),
        ];
        for (text, expected) in cases {
            assert_eq!(terms.of(text).unwrap(), expected, "{text}");
        }
    }

    #[test]
    fn a_token_past_the_longest_term_is_cut_and_marked_as_cut() {
        let terms = Fts5Terms::new().unwrap();
        // (text, bytes of its one term)
        let cases = [
            ("a".repeat(40_000), LONGEST_TERM_BYTES),
            ("中".repeat(12_000), LONGEST_TERM_BYTES + 1),
            ("a".repeat(1_000), 1_000),
        ];
        for (text, bytes) in cases {
            let cut = terms.of(&text).unwrap();
            assert_eq!(cut.len(), 1);
            // One cut character becomes U+FFFD (3 bytes) in place of the 2 bytes kept.
            assert_eq!(cut[0].len(), bytes, "{}", &text[..3]);
            assert_eq!(may_be_cut(&cut[0]), bytes > 1_000);
        }
    }

    #[test]
    fn calls_do_not_see_each_other_and_columns_stay_apart() {
        let terms = Fts5Terms::new().unwrap();
        let first = terms.rows(&[(7, "Design team", "budget settled")]).unwrap();
        assert_eq!(
            first[&7],
            RowTerms {
                title: vec!["design".into(), "team".into()],
                body: vec!["budget".into(), "settl".into()],
            }
        );
        let second = terms.rows(&[(8, "", "garden")]).unwrap();
        assert_eq!(second.len(), 1, "{second:?}");
        assert_eq!(second[&8].body, ["garden"]);
    }
}
