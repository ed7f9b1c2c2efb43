//! The embedded catalogue: the first 300 rows of goodbooks-10k (CC BY-SA 4.0, Zygmunt Zając;
//! see data/goodbooks-10k/README.md). Embedded so that the product never reads a data folder at
//! run time and a reset needs nothing but the binary.
//!
//! Guarantees: empty cells become `None` (NULL in SQLite), never 0 or "".

use serde::Deserialize;

/// The CSV as shipped in the repository.
pub const BOOKS_CSV: &str = include_str!("../../../data/goodbooks-10k/books-300.csv");

/// Attribution that must travel with the data.
pub const ATTRIBUTION: &str =
    "goodbooks-10k by Zygmunt Zając, CC BY-SA 4.0 (first 300 rows of books.csv)";

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Book {
    pub book_id: i64,
    pub title: String,
    pub authors: String,
    pub original_publication_year: Option<i64>,
    pub average_rating: f64,
    pub ratings_count: i64,
    pub language_code: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("row {row} of the book CSV is malformed: {source}")]
    Row { row: usize, source: csv::Error },
}

/// Parses book rows from CSV text with the seven catalogue columns.
pub fn parse_books(csv_text: &str) -> Result<Vec<Book>, DataError> {
    let mut reader = csv::ReaderBuilder::new().from_reader(csv_text.as_bytes());
    reader
        .deserialize::<Book>()
        .enumerate()
        .map(|(i, row)| {
            row.map(|mut book| {
                // csv maps an empty cell to None only for Option<T> fields it can parse;
                // be explicit for strings, where "" would otherwise survive as Some("").
                if book
                    .language_code
                    .as_deref()
                    .is_some_and(|c| c.trim().is_empty())
                {
                    book.language_code = None;
                }
                book
            })
            .map_err(|source| DataError::Row { row: i + 2, source })
        })
        .collect()
}

/// The embedded catalogue.
pub fn embedded_books() -> Result<Vec<Book>, DataError> {
    parse_books(BOOKS_CSV)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_cells_become_none_not_zero() {
        let books = parse_books(
            "book_id,title,authors,original_publication_year,average_rating,ratings_count,language_code\n\
             7,T,A,,4.5,10,\n",
        )
        .unwrap();
        assert_eq!(books[0].original_publication_year, None);
        assert_eq!(books[0].language_code, None);
    }

    #[test]
    fn malformed_row_names_its_line() {
        let err = parse_books(
            "book_id,title,authors,original_publication_year,average_rating,ratings_count,language_code\n\
             x,T,A,2000,4.5,10,eng\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("row 2"), "{err}");
    }
}
