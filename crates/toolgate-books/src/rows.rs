//! Reading and writing book rows: the SQL both toolsets share. Pure of any tool concerns.

use serde::Serialize;
use serde_json::{Value, json};
use toolgate_core::ToolError;
use toolgate_core::sql::{Sql, SqlError, SqlRow, SqlValue};
use toolgate_core::sql_params;

/// A book as stored, with the user's own columns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BookRow {
    pub book_id: i64,
    pub title: String,
    pub authors: String,
    pub original_publication_year: Option<i64>,
    pub average_rating: f64,
    pub ratings_count: i64,
    pub language_code: Option<String>,
    pub my_tags: String,
    pub my_status: Option<String>,
}

pub const COLUMNS: &str = "book_id, title, authors, original_publication_year, average_rating, \
                           ratings_count, language_code, my_tags, my_status";

/// A book from the first columns of `row` ([`COLUMNS`], in order; later columns are ignored).
pub(crate) fn from_row(row: &SqlRow) -> Result<BookRow, SqlError> {
    Ok(BookRow {
        book_id: row.i64(0)?,
        title: row.text(1)?,
        authors: row.text(2)?,
        original_publication_year: row.opt_i64(3)?,
        average_rating: row.f64(4)?,
        ratings_count: row.i64(5)?,
        language_code: row.opt_text(6)?,
        my_tags: row.text(7)?,
        my_status: row.opt_text(8)?,
    })
}

impl BookRow {
    pub fn tags(&self) -> Vec<&str> {
        split_tags(&self.my_tags)
    }

    /// The short form a model reads in lists: readable title with its id.
    pub fn concise(&self) -> Value {
        let mut v = json!({
            "id": self.book_id,
            "title": self.title,
            "authors": self.authors,
            "year": self.original_publication_year,
            "rating": self.average_rating,
        });
        if let Some(status) = &self.my_status {
            v["status"] = json!(status);
        }
        if !self.my_tags.is_empty() {
            v["tags"] = json!(self.tags());
        }
        v
    }

    /// Every field, named for a reader rather than for the database.
    pub fn detailed(&self) -> Value {
        json!({
            "id": self.book_id,
            "title": self.title,
            "authors": self.authors,
            "year": self.original_publication_year,
            "rating": self.average_rating,
            "ratings_count": self.ratings_count,
            "language": self.language_code,
            "status": self.my_status,
            "tags": self.tags(),
        })
    }
}

pub use toolgate_store::taglist::{join_tags, split_tags};

pub fn all(conn: &dyn Sql) -> Result<Vec<BookRow>, ToolError> {
    query(
        conn,
        &format!("SELECT {COLUMNS} FROM books ORDER BY book_id"),
        Vec::new(),
    )
}

pub fn by_id(conn: &dyn Sql, id: i64) -> Result<Option<BookRow>, ToolError> {
    Ok(query(
        conn,
        &format!("SELECT {COLUMNS} FROM books WHERE book_id = ?1"),
        vec![SqlValue::Integer(id)],
    )?
    .pop())
}

/// Rows for `ids`, in the order given; ids with no row are returned separately.
pub fn by_ids(conn: &dyn Sql, ids: &[i64]) -> Result<(Vec<BookRow>, Vec<i64>), ToolError> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for id in ids {
        match by_id(conn, *id)? {
            Some(row) => found.push(row),
            None => missing.push(*id),
        }
    }
    Ok((found, missing))
}

pub fn query(conn: &dyn Sql, sql: &str, params: Vec<SqlValue>) -> Result<Vec<BookRow>, ToolError> {
    let rows = conn
        .query(sql, &params)?
        .iter()
        .map(from_row)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn count(conn: &dyn Sql, sql: &str, params: Vec<SqlValue>) -> Result<i64, ToolError> {
    Ok(conn.query_i64(sql, &params)?)
}

pub fn set_status(conn: &dyn Sql, id: i64, status: Option<&str>) -> Result<(), ToolError> {
    conn.execute(
        "UPDATE books SET my_status = ?1 WHERE book_id = ?2",
        sql_params![status, id],
    )?;
    Ok(())
}

pub fn set_tags(conn: &dyn Sql, id: i64, tags: &str) -> Result<(), ToolError> {
    conn.execute(
        "UPDATE books SET my_tags = ?1 WHERE book_id = ?2",
        sql_params![tags, id],
    )?;
    Ok(())
}

/// The distinct language codes in the catalogue, for error messages.
pub fn language_codes(conn: &dyn Sql) -> Result<Vec<String>, ToolError> {
    let codes = conn
        .query(
            "SELECT DISTINCT language_code FROM books WHERE language_code IS NOT NULL ORDER BY 1",
            &[],
        )?
        .iter()
        .map(|r| r.text(0))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_normalized_on_join() {
        assert_eq!(join_tags(["Fav", " classic ", "fav", ""]), "classic,fav");
        assert_eq!(split_tags("classic,fav"), ["classic", "fav"]);
        assert!(split_tags("").is_empty());
    }
}
