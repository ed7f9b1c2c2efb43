//! Book filters as SQL: the one translation of "author, title, year range, rating range,
//! language, status, tag" into a `WHERE` clause with bound parameters, shared by
//! `books_search` and by books-v3's writes that apply to every match, so a write changes
//! exactly the books the same filters would list.
//!
//! Guarantees: every value is a bound parameter (never spliced into SQL); author and title
//! match parts case-insensitively with LIKE wildcards escaped; a tag matches whole; a language
//! code the catalogue does not have is refused with the codes it has. An empty filter is
//! `WHERE`-less: refusing writes to the whole catalogue is the writer's job
//! ([`BookFilter::is_empty`]).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_core::ToolError;
use toolgate_core::sql::{Dialect, Sql, SqlValue};

use crate::rows::{self, BookRow};

/// The `language` value that finds books whose language code is empty.
pub const NO_LANGUAGE: &str = "none";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusFilter {
    WantToRead,
    Reading,
    Read,
    None,
}

/// What to match; every field given must hold (AND). Borrowed from a tool's arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct BookFilter<'a> {
    pub author: Option<&'a str>,
    pub title: Option<&'a str>,
    pub year_min: Option<i64>,
    pub year_max: Option<i64>,
    pub rating_min: Option<f64>,
    pub rating_max: Option<f64>,
    pub language: Option<&'a str>,
    pub status: Option<StatusFilter>,
    pub tag: Option<&'a str>,
}

/// A `WHERE` clause (empty, or starting with a space) and its parameters in order.
#[derive(Debug, Clone, PartialEq)]
pub struct WhereSql {
    pub sql: String,
    pub params: Vec<SqlValue>,
}

impl WhereSql {
    /// How many books the clause matches.
    pub fn count(&self, conn: &dyn Sql) -> Result<i64, ToolError> {
        rows::count(
            conn,
            &format!("SELECT count(*) FROM books{}", self.sql),
            self.params.clone(),
        )
    }

    /// The matching books in `order`: `limit` of them after the first `offset`.
    pub fn books(
        self,
        conn: &dyn Sql,
        order: SortOrder,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<BookRow>, ToolError> {
        let mut params = self.params;
        params.push(SqlValue::Integer(i64::from(limit)));
        params.push(SqlValue::Integer(i64::from(offset)));
        rows::query(
            conn,
            &format!(
                "SELECT {} FROM books{} ORDER BY {} LIMIT ? OFFSET ?",
                rows::COLUMNS,
                self.sql,
                order.order_by(conn.dialect())
            ),
            params,
        )
    }
}

/// What [`WhereSql::search`] found: how many books match, the page, and the first match in each
/// of the orders asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Searched {
    pub total: i64,
    pub page: Vec<BookRow>,
    /// One per order asked for; `None` when nothing matches.
    pub firsts: Vec<Option<BookRow>>,
}

impl WhereSql {
    /// The count of the matches, a page of them (`limit` after `offset` in `order`) and the first
    /// match in each of `firsts`. On PostgreSQL in one statement: one round trip where a
    /// statement each took six (about 390 µs per search against 1,095,
    /// `benches/store_backends.rs`). On SQLite, in process, a statement each, which its planner
    /// runs faster than the one statement (about 230 µs against 395). Both give the same answer
    /// (`tests/books_v4.rs` runs on both).
    pub fn search(
        self,
        conn: &dyn Sql,
        order: SortOrder,
        limit: u32,
        offset: u32,
        firsts: &[SortOrder],
    ) -> Result<Searched, ToolError> {
        match conn.dialect() {
            Dialect::Sqlite => {
                self.search_statement_by_statement(conn, order, limit, offset, firsts)
            }
            Dialect::Postgres => self.search_in_one_statement(conn, order, limit, offset, firsts),
        }
    }

    fn search_statement_by_statement(
        self,
        conn: &dyn Sql,
        order: SortOrder,
        limit: u32,
        offset: u32,
        firsts: &[SortOrder],
    ) -> Result<Searched, ToolError> {
        let total = self.count(conn)?;
        let mut found = Vec::with_capacity(firsts.len());
        for first in firsts {
            found.push(self.clone().books(conn, *first, 1, 0)?.pop());
        }
        let page = self.books(conn, order, limit, offset)?;
        Ok(Searched {
            total,
            page,
            firsts: found,
        })
    }

    fn search_in_one_statement(
        self,
        conn: &dyn Sql,
        order: SortOrder,
        limit: u32,
        offset: u32,
        firsts: &[SortOrder],
    ) -> Result<Searched, ToolError> {
        let dialect = conn.dialect();
        // The page is part `firsts.len()`; each first is its own part, numbered in order.
        let mut parts: Vec<String> = firsts
            .iter()
            .enumerate()
            .map(|(i, first)| {
                format!(
                    "SELECT * FROM (SELECT *, {i} AS which FROM matches ORDER BY {} LIMIT 1) AS first_{i}",
                    first.order_by(dialect)
                )
            })
            .collect();
        parts.push(format!(
            "SELECT * FROM (SELECT *, {} AS which FROM matches ORDER BY {} LIMIT ? OFFSET ?) AS page",
            firsts.len(),
            order.order_by(dialect)
        ));
        let sql = format!(
            "WITH matches AS (SELECT {} FROM books{}) \
             SELECT *, (SELECT count(*) FROM matches) AS total FROM ({}) AS parts",
            rows::COLUMNS,
            self.sql,
            parts.join(" UNION ALL ")
        );
        let mut params = self.params;
        params.push(SqlValue::Integer(i64::from(limit)));
        params.push(SqlValue::Integer(i64::from(offset)));
        let mut searched = Searched {
            total: 0,
            page: Vec::new(),
            firsts: vec![None; firsts.len()],
        };
        for row in conn.query(&sql, &params)? {
            let columns = row.0.len();
            let (which, total) = (row.i64(columns - 2)?, row.i64(columns - 1)?);
            searched.total = total;
            let book = rows::from_row(&row)?;
            match usize::try_from(which) {
                Ok(i) if i < firsts.len() => searched.firsts[i] = Some(book),
                _ => searched.page.push(book),
            }
        }
        Ok(searched)
    }
}

impl<'a> BookFilter<'a> {
    /// True when nothing narrows the match: every book matches.
    pub fn is_empty(&self) -> bool {
        self.author.is_none()
            && self.title.is_none()
            && self.year_min.is_none()
            && self.year_max.is_none()
            && self.rating_min.is_none()
            && self.rating_max.is_none()
            && self.language.is_none()
            && self.status.is_none()
            && self.tag.is_none()
    }

    /// Each filter given, alone, with how the call wrote it (`author "none"`, `year_max 0`), so
    /// an empty match can name the filters that match no book by themselves.
    pub fn parts(&self) -> Vec<(String, BookFilter<'a>)> {
        let none = BookFilter::default();
        let mut parts = Vec::new();
        let texts = [
            (
                "author",
                self.author,
                BookFilter {
                    author: self.author,
                    ..none
                },
            ),
            (
                "title",
                self.title,
                BookFilter {
                    title: self.title,
                    ..none
                },
            ),
            (
                "language",
                self.language,
                BookFilter {
                    language: self.language,
                    ..none
                },
            ),
            (
                "tag",
                self.tag,
                BookFilter {
                    tag: self.tag,
                    ..none
                },
            ),
        ];
        for (name, value, alone) in texts {
            if let Some(value) = value {
                parts.push((format!("{name} \"{value}\""), alone));
            }
        }
        // A range is one part: `year_min 0` and `year_max 0` each match books, "year 0" none.
        let ranges = [
            (
                "year",
                self.year_min.map(|v| v as f64),
                self.year_max.map(|v| v as f64),
                BookFilter {
                    year_min: self.year_min,
                    year_max: self.year_max,
                    ..none
                },
            ),
            (
                "rating",
                self.rating_min,
                self.rating_max,
                BookFilter {
                    rating_min: self.rating_min,
                    rating_max: self.rating_max,
                    ..none
                },
            ),
        ];
        for (name, min, max, alone) in ranges {
            let label = match (min, max) {
                (Some(lo), Some(hi)) => format!("{name}_min {lo} with {name}_max {hi}"),
                (Some(lo), None) => format!("{name}_min {lo}"),
                (None, Some(hi)) => format!("{name}_max {hi}"),
                (None, None) => continue,
            };
            parts.push((label, alone));
        }
        if let Some(status) = self.status {
            let shown = status_text(status).unwrap_or("none");
            parts.push((
                format!("status \"{shown}\""),
                BookFilter {
                    status: Some(status),
                    ..none
                },
            ));
        }
        parts
    }

    /// Refuses bounds that cannot both hold, saying how to write the range.
    pub fn check_ranges(&self) -> Result<(), ToolError> {
        if let (Some(lo), Some(hi)) = (self.year_min, self.year_max)
            && lo > hi
        {
            return Err(ToolError::invalid(
                "year_min",
                format!("year_min ({lo}) is after year_max ({hi})"),
            )
            .with_hint("both bounds are inclusive; for a single year set both to it")
            .with_example(json!({"year_min": 2011, "year_max": 2015})));
        }
        if let (Some(lo), Some(hi)) = (self.rating_min, self.rating_max)
            && lo > hi
        {
            return Err(ToolError::invalid(
                "rating_min",
                format!("rating_min ({lo}) is above rating_max ({hi})"),
            )
            .with_example(json!({"rating_min": 4.0, "rating_max": 4.5})));
        }
        Ok(())
    }

    /// The clause for this filter; `conn` is read only to check a language code.
    pub fn to_sql(&self, conn: &dyn Sql) -> Result<WhereSql, ToolError> {
        let mut clauses: Vec<String> = Vec::new();
        let mut params: Vec<SqlValue> = Vec::new();
        // SQLite's LIKE ignores ASCII case; PostgreSQL's ILIKE is its match.
        let like = match conn.dialect() {
            Dialect::Sqlite => "LIKE",
            Dialect::Postgres => "ILIKE",
        };
        if let Some(author) = self.author {
            clauses.push(format!("authors {like} ? ESCAPE '\\'"));
            params.push(SqlValue::Text(like_pattern(author)));
        }
        if let Some(title) = self.title {
            clauses.push(format!("title {like} ? ESCAPE '\\'"));
            params.push(SqlValue::Text(like_pattern(title)));
        }
        let bounds = [
            (
                "original_publication_year >= ?",
                self.year_min.map(SqlValue::Integer),
            ),
            (
                "original_publication_year <= ?",
                self.year_max.map(SqlValue::Integer),
            ),
            ("average_rating >= ?", self.rating_min.map(SqlValue::Real)),
            ("average_rating <= ?", self.rating_max.map(SqlValue::Real)),
        ];
        for (clause, value) in bounds {
            if let Some(value) = value {
                clauses.push(clause.into());
                params.push(value);
            }
        }
        if let Some(language) = self.language.map(str::trim) {
            if language.eq_ignore_ascii_case(NO_LANGUAGE) {
                clauses.push("language_code IS NULL".into());
            } else {
                check_language(conn, language)?;
                clauses.push("language_code = ?".into());
                params.push(SqlValue::Text(language.into()));
            }
        }
        if let Some(status) = self.status {
            match status_text(status) {
                None => clauses.push("my_status IS NULL".into()),
                Some(text) => {
                    clauses.push("my_status = ?".into());
                    params.push(SqlValue::Text(text.into()));
                }
            }
        }
        if let Some(tag) = self.tag {
            clauses.push("(',' || my_tags || ',') LIKE ? ESCAPE '\\'".into());
            params.push(SqlValue::Text(format!(
                "%,{},%",
                escape_like(&tag.trim().to_lowercase())
            )));
        }
        let sql = if clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", clauses.join(" AND "))
        };
        Ok(WhereSql { sql, params })
    }
}

fn status_text(status: StatusFilter) -> Option<&'static str> {
    match status {
        StatusFilter::WantToRead => Some("want_to_read"),
        StatusFilter::Reading => Some("reading"),
        StatusFilter::Read => Some("read"),
        StatusFilter::None => None,
    }
}

fn check_language(conn: &dyn Sql, language: &str) -> Result<(), ToolError> {
    let codes = rows::language_codes(conn)?;
    if codes.iter().any(|c| c == language) {
        return Ok(());
    }
    Err(ToolError::invalid(
        "language",
        format!("no book has language code \"{language}\""),
    )
    .with_expected(format!(
        "one of {}, or \"{NO_LANGUAGE}\" for books with no language code",
        codes.join(", ")
    ))
    .with_received(json!(language))
    .with_example(json!({"language": "eng"})))
}

fn escape_like(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// A LIKE pattern matching `text` anywhere, its own "%" or "_" matching themselves.
fn like_pattern(text: &str) -> String {
    format!("%{}%", escape_like(text.trim()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum SortOrder {
    #[default]
    Popularity,
    RatingDesc,
    RatingAsc,
    YearDesc,
    YearAsc,
    Title,
}

impl SortOrder {
    pub(crate) fn order_by(self, dialect: Dialect) -> &'static str {
        // book_id breaks ties, so equal ratings or years always list in the same order.
        match self {
            SortOrder::Popularity => "ratings_count DESC, book_id",
            SortOrder::RatingDesc => "average_rating DESC, book_id",
            SortOrder::RatingAsc => "average_rating ASC, book_id",
            SortOrder::YearDesc => {
                "original_publication_year IS NULL, original_publication_year DESC, book_id"
            }
            SortOrder::YearAsc => {
                "original_publication_year IS NULL, original_publication_year ASC, book_id"
            }
            // SQLite's NOCASE folds ASCII letters and compares bytes; so does lower() under the
            // byte order of the "C" collation, whatever the database's own locale.
            SortOrder::Title => match dialect {
                Dialect::Sqlite => "title COLLATE NOCASE, book_id",
                Dialect::Postgres => "lower(title) COLLATE \"C\", book_id",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql_of(filter: BookFilter<'_>) -> WhereSql {
        let conn = rusqlite::Connection::open_in_memory().expect("db");
        filter.to_sql(&conn).expect("sql")
    }

    #[test]
    fn wildcards_in_a_name_match_themselves() {
        let w = sql_of(BookFilter {
            author: Some(" 100%_a\\b "),
            ..BookFilter::default()
        });
        assert_eq!(w.sql, " WHERE authors LIKE ? ESCAPE '\\'");
        assert_eq!(w.params, [SqlValue::Text("%100\\%\\_a\\\\b%".into())]);
    }

    #[test]
    fn a_tag_never_matches_part_of_another_tag() {
        let w = sql_of(BookFilter {
            tag: Some("Fav"),
            ..BookFilter::default()
        });
        assert_eq!(w.params, [SqlValue::Text("%,fav,%".into())]);
    }

    #[test]
    fn values_are_bound_never_spliced() {
        let w = sql_of(BookFilter {
            title: Some("'; DROP TABLE books; --"),
            year_max: Some(1899),
            status: Some(StatusFilter::None),
            ..BookFilter::default()
        });
        assert_eq!(
            w.sql,
            " WHERE title LIKE ? ESCAPE '\\' AND original_publication_year <= ? AND my_status IS NULL"
        );
        assert_eq!(w.params.len(), 2);
        assert!(!w.sql.contains("DROP"));
    }

    #[test]
    fn an_empty_filter_is_reported_empty_and_has_no_clause() {
        assert!(BookFilter::default().is_empty());
        assert_eq!(sql_of(BookFilter::default()).sql, "");
        assert!(
            !BookFilter {
                rating_min: Some(4.0),
                ..BookFilter::default()
            }
            .is_empty()
        );
    }

    #[test]
    fn each_filter_given_is_one_part_named_as_the_call_wrote_it() {
        let filter = BookFilter {
            author: Some("none"),
            year_max: Some(0),
            rating_min: Some(4.5),
            status: Some(StatusFilter::None),
            ..BookFilter::default()
        };
        let labels: Vec<String> = filter.parts().into_iter().map(|(l, _)| l).collect();
        assert_eq!(
            labels,
            [
                "author \"none\"",
                "year_max 0",
                "rating_min 4.5",
                "status \"none\""
            ]
        );
        for (_, alone) in filter.parts() {
            assert_eq!(alone.parts().len(), 1, "each part holds one filter");
        }
        assert!(BookFilter::default().parts().is_empty());
    }

    #[test]
    fn crossed_bounds_are_refused_naming_the_field() {
        let cases = [
            (Some(2000), Some(1990), None, None, "year_min"),
            (None, None, Some(4.5), Some(4.0), "rating_min"),
        ];
        for (year_min, year_max, rating_min, rating_max, field) in cases {
            let filter = BookFilter {
                year_min,
                year_max,
                rating_min,
                rating_max,
                ..BookFilter::default()
            };
            let err = filter.check_ranges().expect_err("crossed");
            assert_eq!(err.field.as_deref(), Some(field));
        }
        let single_year = BookFilter {
            year_min: Some(2005),
            year_max: Some(2005),
            ..BookFilter::default()
        };
        assert!(single_year.check_ranges().is_ok());
    }
}
