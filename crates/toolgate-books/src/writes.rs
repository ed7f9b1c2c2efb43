//! What the writes by filter of books-v3 and books-v4 share: which books a write selects, what
//! the approver is shown, and the wiring of a write tool around them.
//!
//! Guarantees: a selection holds at most [`MAX_CHANGED`] books; a selection that matches no
//! book, or more than [`MAX_CHANGED`] with no `limit`, is refused ([`Unselected`]) before
//! anything is written; the approval preview and the write select with the same function on
//! the same arguments, so a human never approves one set of books and gets another. The words
//! of a refusal, and the write's own result, stay each version's own: they are what its model
//! read in its runs.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use toolgate_core::idempotency::WriteEffect;
use toolgate_core::sql::Sql;
use toolgate_core::tool::DeclarationError;
use toolgate_core::{Tool, ToolBuilder, ToolError};

use crate::filter::BookFilter;
use crate::rows::BookRow;
use crate::store::BooksStore;
use crate::v2::SortOrder;

/// Most books one write changes; a larger match must be narrowed or given a `limit`.
pub const MAX_CHANGED: u32 = 100;
/// Most titles an approval preview lists (the count is always exact).
const PREVIEW_TITLES: usize = 20;

/// The books a write selects, in its order, and how many matched before `limit`.
#[derive(Debug)]
pub(crate) struct Selected {
    pub(crate) matched: i64,
    pub(crate) books: Vec<BookRow>,
}

/// Why a write selects no books; each version words the refusal for its model.
#[derive(Debug)]
pub(crate) enum Unselected {
    /// No book matches the filter.
    NoMatch,
    /// More than [`MAX_CHANGED`] books match and no `limit` bounds the write.
    TooMany { matched: i64 },
    /// The filter was refused (an unknown language code) or the store failed (boxed: it is
    /// large, and the other variants are not).
    Failed(Box<ToolError>),
}

impl From<ToolError> for Unselected {
    fn from(error: ToolError) -> Self {
        Unselected::Failed(Box::new(error))
    }
}

/// The books `filter` picks in `order`: the first `limit` (at most [`MAX_CHANGED`]).
pub(crate) fn select(
    conn: &dyn Sql,
    filter: &BookFilter<'_>,
    order: SortOrder,
    limit: Option<u32>,
) -> Result<Selected, Unselected> {
    let clause = filter.to_sql(conn)?;
    let matched = clause.count(conn)?;
    if matched == 0 {
        return Err(Unselected::NoMatch);
    }
    if limit.is_none() && matched > i64::from(MAX_CHANGED) {
        return Err(Unselected::TooMany { matched });
    }
    let take = limit.unwrap_or(MAX_CHANGED).min(MAX_CHANGED);
    let books = clause.books(conn, order, take, 0)?;
    Ok(Selected { matched, books })
}

/// What the approver sees: how many books and which (the first [`PREVIEW_TITLES`] titles).
pub(crate) fn preview(selected: &Selected) -> Value {
    let titles: Vec<String> = selected
        .books
        .iter()
        .take(PREVIEW_TITLES)
        .map(|b| format!("{}: {} ({})", b.book_id, b.title, b.authors))
        .collect();
    let mut shown = json!({"changes": selected.books.len(), "books": titles});
    if selected.books.len() > PREVIEW_TITLES {
        shown["and_more"] = json!(selected.books.len() - PREVIEW_TITLES);
    }
    shown
}

/// Finishes a write by filter declared in `builder`: the preview shows what `select` picks,
/// and the write, run once per idempotency key, applies `apply` to what `select` picks in its
/// own transaction.
pub(crate) fn by_filter<A>(
    builder: ToolBuilder<A>,
    store: &BooksStore,
    select: fn(&dyn Sql, &A) -> Result<Selected, ToolError>,
    apply: fn(&dyn Sql, &A, &Selected) -> Result<WriteEffect, ToolError>,
) -> Result<Tool, DeclarationError>
where
    A: JsonSchema + DeserializeOwned + Send + 'static,
{
    let preview_store = store.clone();
    let write_store = store.clone();
    builder
        .approval_preview(move |args: &A| {
            let selected = preview_store.with_sql(|session| select(session, args))?;
            Ok(preview(&selected))
        })
        .receipts(store.receipt_log())
        .write(move |ctx, args: A| {
            let store = write_store.clone();
            async move {
                store
                    .write_once_sql(&ctx, move |tx| {
                        let selected = select(tx, &args)?;
                        apply(tx, &args, &selected)
                    })
                    .await
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_catalogue<T>(work: impl FnOnce(&dyn Sql) -> T) -> T {
        let dir = tempfile::tempdir().unwrap();
        let store = BooksStore::init(&dir.path().join("books.sqlite")).unwrap();
        store.with_sql(|session| Ok(work(session))).unwrap()
    }

    fn outcome(selected: Result<Selected, Unselected>) -> String {
        match selected {
            Ok(s) => format!("{} of {}", s.books.len(), s.matched),
            Err(Unselected::NoMatch) => "no match".into(),
            Err(Unselected::TooMany { matched }) => format!("too many: {matched}"),
            Err(Unselected::Failed(error)) => format!("failed: {}", error.message),
        }
    }

    #[test]
    fn a_write_never_selects_more_than_max_changed_nor_an_empty_match() {
        let everything = BookFilter::default();
        let collins = BookFilter {
            author: Some("Suzanne Collins"),
            ..BookFilter::default()
        };
        let nobody = BookFilter {
            author: Some("Nobody Anybody"),
            ..BookFilter::default()
        };
        // (filter, limit, what is selected of how many matched, or why nothing is)
        let cases = [
            (everything, None, "too many: 300"),
            (everything, Some(150), "100 of 300"),
            (everything, Some(2), "2 of 300"),
            (collins, None, "3 of 3"),
            (nobody, None, "no match"),
        ];
        with_catalogue(|conn| {
            for (filter, limit, expected) in cases {
                let got = outcome(select(conn, &filter, SortOrder::Popularity, limit));
                assert_eq!(got, expected, "{filter:?} limit {limit:?}");
            }
        });
    }

    #[test]
    fn a_preview_of_many_books_lists_the_first_titles_and_counts_every_book() {
        let selected =
            with_catalogue(|conn| select(conn, &BookFilter::default(), SortOrder::Title, Some(25)));
        let Ok(selected) = selected else {
            panic!("25 books select")
        };
        let shown = preview(&selected);
        assert_eq!(shown["changes"], 25);
        assert_eq!(shown["books"].as_array().unwrap().len(), PREVIEW_TITLES);
        assert_eq!(shown["and_more"], 25 - PREVIEW_TITLES);
        let first = &selected.books[0];
        assert_eq!(
            shown["books"][0],
            format!("{}: {} ({})", first.book_id, first.title, first.authors)
        );
    }
}
