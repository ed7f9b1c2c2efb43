//! books-v2: the catalogue as tools shaped for a model's tasks. Namespaced names, filters
//! instead of dumps, several ids per write, readable titles with every id, loud pagination,
//! and errors that say how to fix the call.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::idempotency::WriteEffect;
use toolgate_core::spec::Expected;
use toolgate_core::sql::Sql;
use toolgate_core::tool::DeclarationError;
use toolgate_core::{Effect, Risk, Tool, ToolBuilder, ToolError, ToolOutput};

use crate::filter::BookFilter;
pub use crate::filter::{SortOrder, StatusFilter};
use crate::rows::{self, BookRow};
use crate::store::BooksStore;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormat {
    #[default]
    Concise,
    Detailed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NewStatus {
    WantToRead,
    Reading,
    Read,
    None,
}

pub(crate) fn status_text(status: NewStatus) -> Option<&'static str> {
    match status {
        NewStatus::WantToRead => Some("want_to_read"),
        NewStatus::Reading => Some("reading"),
        NewStatus::Read => Some("read"),
        NewStatus::None => None,
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Part of an author's name, case-insensitive; matches any author of a multi-author book.
    #[schemars(length(min = 1, max = 100))]
    pub author: Option<String>,
    /// Part of the title, case-insensitive.
    #[schemars(length(min = 1, max = 200))]
    pub title: Option<String>,
    /// Earliest original publication year, inclusive ("after 2010" is 2011). Negative is BC.
    #[schemars(range(min = -3000, max = 2100))]
    pub year_min: Option<i64>,
    /// Latest original publication year, inclusive ("before 1900" is 1899).
    #[schemars(range(min = -3000, max = 2100))]
    pub year_max: Option<i64>,
    /// Lowest average rating, inclusive (ratings run from 1 to 5).
    #[schemars(range(min = 0, max = 5))]
    pub rating_min: Option<f64>,
    /// Highest average rating, inclusive.
    #[schemars(range(min = 0, max = 5))]
    pub rating_max: Option<f64>,
    /// Language code exactly as stored, e.g. "eng", "en-US", "spa"; "none" finds books with no
    /// language code.
    #[schemars(length(min = 2, max = 10))]
    pub language: Option<String>,
    /// The user's reading status; "none" means no status set.
    pub status: Option<StatusFilter>,
    /// One of the user's tags, matched whole (e.g. "fav").
    #[schemars(length(min = 1, max = 32))]
    pub tag: Option<String>,
    /// Order of results; default "popularity" (most ratings first). Ties list by id.
    pub sort: Option<SortOrder>,
    /// How many books to return, 1-50; default 10.
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
    /// How many matching books to skip (for the next page); default 0.
    #[schemars(range(min = 0, max = 10000))]
    pub offset: Option<u32>,
    /// "concise" (default): id, title, authors, year, rating. "detailed": every field.
    pub response_format: Option<ResponseFormat>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetArgs {
    /// Book ids, 1 to 20 of them, e.g. [1, 2].
    #[schemars(length(min = 1, max = 20))]
    #[schemars(extend("uniqueItems" = true))]
    pub ids: Vec<i64>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetStatusArgs {
    /// Ids of every book to change, 1 to 100 of them.
    #[schemars(length(min = 1, max = 100))]
    #[schemars(extend("uniqueItems" = true))]
    pub ids: Vec<i64>,
    /// The new status; "none" clears it.
    pub status: NewStatus,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TagArgs {
    /// Ids of every book to tag, 1 to 100 of them.
    #[schemars(length(min = 1, max = 100))]
    #[schemars(extend("uniqueItems" = true))]
    pub ids: Vec<i64>,
    /// Tags to add, e.g. ["fav"]. Letters, digits, spaces, - and _; stored lower-case.
    #[serde(default)]
    #[schemars(
        length(max = 10),
        inner(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,31}$"))
    )]
    pub add: Vec<String>,
    /// Tags to remove.
    #[serde(default)]
    #[schemars(
        length(max = 10),
        inner(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,31}$"))
    )]
    pub remove: Vec<String>,
}

const DEFAULT_LIMIT: u32 = 10;
const SEARCH_MAX_BYTES: usize = 16 * 1024;

pub fn tools(store: &BooksStore) -> Result<Vec<Tool>, DeclarationError> {
    Ok(vec![
        search(store, false)?,
        get(store, false)?,
        set_status(store)?,
        tag(store)?,
    ])
}

/// `books_search`; with `answers_repeats`, a loop may answer an exact repeat from the earlier
/// result (books-v3).
pub(crate) fn search(store: &BooksStore, answers_repeats: bool) -> Result<Tool, DeclarationError> {
    let store = store.clone();
    let builder = ToolBuilder::<SearchArgs>::new("books_search", 1);
    let builder = if answers_repeats {
        builder.answers_repeats()
    } else {
        builder
    };
    builder
        .describe(
            "Finds books in the user's catalogue by any mix of author, title, year range, rating range, language, reading status and tag, sorted and paged.",
            "to find, count or rank books (the result's total_matches answers \"how many\"), or to get the ids needed before changing books.",
            Some("you already know the ids and need every field: use books_get. Do not page through everything to count: read total_matches."),
            "total_matches, the page of books (id, title, authors, year, rating; status and tags when set), and next_offset when more match.",
        )
        .example_returns(
            "every book by Rowling, best rated first",
            json!({"author": "Rowling", "sort": "rating_desc"}),
            Expected::values(&[("/total_matches", json!(9)), ("/books/0/id", json!(25))]),
        )
        .example("published after 2010 with rating 4.2 or more", json!({"year_min": 2011, "rating_min": 4.2, "limit": 50}))
        .policy(Risk::Low, Effect::Read, "It only reads the local catalogue.")
        .max_output_bytes(SEARCH_MAX_BYTES)
        .more_hint("call books_search again with offset set to next_offset, or narrow the filters")
        .parallel_safe()
        .check(|args: &SearchArgs, _| check_ranges(args))
        .read(move |_ctx, args: SearchArgs| {
            let store = store.clone();
            async move { store.read_sql(move |conn| run_search(conn, &args)).await.map(ToolOutput::new) }
        })
}

fn check_ranges(args: &SearchArgs) -> Result<(), ToolError> {
    args.filter().check_ranges()
}

impl SearchArgs {
    /// The filters of this search, as every books tool that matches books reads them.
    pub fn filter(&self) -> BookFilter<'_> {
        BookFilter {
            author: self.author.as_deref(),
            title: self.title.as_deref(),
            year_min: self.year_min,
            year_max: self.year_max,
            rating_min: self.rating_min,
            rating_max: self.rating_max,
            language: self.language.as_deref(),
            status: self.status,
            tag: self.tag.as_deref(),
        }
    }
}

pub(crate) fn run_search(conn: &dyn Sql, args: &SearchArgs) -> Result<Value, ToolError> {
    let filter = args.filter().to_sql(conn)?;
    let total = filter.count(conn)?;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let offset = args.offset.unwrap_or(0);
    let sort = args.sort.unwrap_or_default();
    let page = filter.books(conn, sort, limit, offset)?;
    let format = args.response_format.unwrap_or_default();
    let books: Vec<Value> = page
        .iter()
        .map(|b| match format {
            ResponseFormat::Concise => b.concise(),
            ResponseFormat::Detailed => b.detailed(),
        })
        .collect();
    let shown_to = i64::from(offset) + books.len() as i64;
    let mut result = json!({ "total_matches": total, "offset": offset, "books": books });
    if shown_to < total {
        result["next_offset"] = json!(shown_to);
        result["note"] = json!(format!(
            "showing {} of {total} matches; {} more: call again with offset {shown_to}, or narrow the filters",
            page.len(),
            total - shown_to
        ));
    } else if total == 0 {
        result["note"] = json!(
            "no book matched every filter; author and title match parts of names (e.g. \"Rowling\"), year and rating bounds are inclusive"
        );
    }
    Ok(result)
}

fn unknown_ids_error(missing: &[i64]) -> ToolError {
    let list: Vec<String> = missing.iter().map(i64::to_string).collect();
    ToolError::not_found(format!("no book has id {}", list.join(", ")))
        .with_field("ids")
        .with_received(json!(missing))
        .with_hint("ids are the numbers books_search returns with each title; nothing was changed")
}

/// `books_get`; `answers_repeats` as for [`search`].
pub(crate) fn get(store: &BooksStore, answers_repeats: bool) -> Result<Tool, DeclarationError> {
    let store = store.clone();
    let builder = ToolBuilder::<GetArgs>::new("books_get", 1);
    let builder = if answers_repeats {
        builder.answers_repeats()
    } else {
        builder
    };
    builder
        .describe(
            "Gets every field of up to 20 books by id: title, authors, year, rating, ratings count, language, status and tags.",
            "you have ids (from books_search) and need fields the search did not show.",
            Some("you need to find books or count them: use books_search."),
            "books (every field) and not_found (ids with no book).",
        )
        .example("books 1 and 2", json!({"ids": [1, 2]}))
        .policy(Risk::Low, Effect::Read, "It only reads the local catalogue.")
        .parallel_safe()
        .read(move |_ctx, args: GetArgs| {
            let store = store.clone();
            async move {
                let (found, missing) = store.read_sql(move |conn| rows::by_ids(conn, &args.ids)).await?;
                if found.is_empty() {
                    return Err(unknown_ids_error(&missing));
                }
                let books: Vec<Value> = found.iter().map(BookRow::detailed).collect();
                Ok(ToolOutput::new(json!({"books": books, "not_found": missing})))
            }
        })
}

fn set_status(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let store = store.clone();
    ToolBuilder::<SetStatusArgs>::new("books_set_status", 1)
        .describe(
            "Sets the user's reading status (want_to_read, reading, read, or none to clear) on one or more books at once.",
            "the user asks to mark books; pass every id in one call.",
            Some("you want to label books with words such as \"fav\": use books_tag. To find the ids first, use books_search."),
            "each changed book's id, title, new status and previous status.",
        )
        .example("mark books 1 and 3 as read", json!({"ids": [1, 3], "status": "read"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It changes only the user's own reading status, and the previous values are kept for undo.",
        )
        .receipts(store.receipt_log())
        .write(move |ctx, args: SetStatusArgs| {
            let store = store.clone();
            async move { store.write_once_sql(&ctx, move |tx| apply_status(tx, &args)).await }
        })
}

fn apply_status(conn: &dyn Sql, args: &SetStatusArgs) -> Result<WriteEffect, ToolError> {
    let (before, missing) = rows::by_ids(conn, &args.ids)?;
    if !missing.is_empty() {
        return Err(unknown_ids_error(&missing));
    }
    set_status_of(conn, &before, args.status)
}

/// Sets `status` on every book of `before` (as read in this transaction), with the undo.
pub(crate) fn set_status_of(
    conn: &dyn Sql,
    before: &[BookRow],
    status: NewStatus,
) -> Result<WriteEffect, ToolError> {
    let status = status_text(status);
    let mut changed = Vec::new();
    let mut undo = Vec::new();
    for book in before {
        rows::set_status(conn, book.book_id, status)?;
        changed.push(json!({"id": book.book_id, "title": book.title, "status": status, "previous_status": book.my_status}));
        undo.push(json!({"id": book.book_id, "status": book.my_status}));
    }
    Ok(WriteEffect {
        result: json!({"updated": changed.len(), "books": changed}),
        undo: Some(json!({"tool": "books_set_status", "restore": undo})),
    })
}

fn tag(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let store = store.clone();
    ToolBuilder::<TagArgs>::new("books_tag", 1)
        .describe(
            "Adds and/or removes the user's own tags (e.g. \"fav\") on one or more books at once.",
            "the user asks to tag or untag books; pass every id in one call.",
            Some("you want to mark reading progress: use books_set_status. To find the ids first, use books_search."),
            "each book's id, title and tags after the change.",
        )
        .example("tag books 2 and 25 as fav", json!({"ids": [2, 25], "add": ["fav"]}))
        .example("remove the tag old from book 7", json!({"ids": [7], "remove": ["old"]}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It changes only the user's own tags, and the previous tags are kept for undo.",
        )
        .check(|args: &TagArgs, _| {
            if args.add.is_empty() && args.remove.is_empty() {
                return Err(ToolError::invalid("add", "nothing to do: give tags in add, remove, or both")
                    .with_example(json!({"ids": [2], "add": ["fav"]})));
            }
            Ok(())
        })
        .receipts(store.receipt_log())
        .write(move |ctx, args: TagArgs| {
            let store = store.clone();
            async move { store.write_once_sql(&ctx, move |tx| apply_tags(tx, &args)).await }
        })
}

fn apply_tags(conn: &dyn Sql, args: &TagArgs) -> Result<WriteEffect, ToolError> {
    let (before, missing) = rows::by_ids(conn, &args.ids)?;
    if !missing.is_empty() {
        return Err(unknown_ids_error(&missing));
    }
    retag(conn, &before, &args.add, &args.remove)
}

/// Adds `add` and removes `remove` on every book of `before` (as read in this transaction),
/// with the undo.
pub(crate) fn retag(
    conn: &dyn Sql,
    before: &[BookRow],
    add: &[String],
    remove: &[String],
) -> Result<WriteEffect, ToolError> {
    let remove: Vec<String> = remove.iter().map(|t| t.trim().to_lowercase()).collect();
    let mut changed = Vec::new();
    let mut undo = Vec::new();
    for book in before {
        let kept = book
            .tags()
            .into_iter()
            .filter(|t| !remove.iter().any(|r| r == t));
        let tags = rows::join_tags(kept.chain(add.iter().map(String::as_str)));
        rows::set_tags(conn, book.book_id, &tags)?;
        changed.push(
            json!({"id": book.book_id, "title": book.title, "tags": rows::split_tags(&tags)}),
        );
        undo.push(json!({"id": book.book_id, "tags": book.my_tags}));
    }
    Ok(WriteEffect {
        result: json!({"updated": changed.len(), "books": changed}),
        undo: Some(json!({"tool": "books_tag", "restore": undo})),
    })
}
