//! books-v6: books-v4's tools, whose writes name their books first.
//!
//! Why: the embedded model's calls are written under a grammar made from the tool's schema
//! (llama.cpp's converter), which writes an object's required properties first. books-v4's
//! `books_tag` requires only `tag` (and `books_set_status` only `status`), so every v4 write
//! began with the tag, whatever its examples showed; in 5 of books-v4's 15 failed dev runs
//! (`evals/runs/books-v5-dev-sampled-embedded`) the model closed the call right after it
//! (`{"tag": "spanish", "action": "add"}`), the refusal ("which books?") followed, and the run
//! ended there. Here a write takes a required `books` object, listed before the change, that
//! holds the same filters, `sort` and `limit` as books-v4's: the grammar makes the model say
//! which books before what to do to them (`{"books": {"language": "spa"}, "tag": "spanish"}`).
//!
//! Guarantees: the search is books-v4's, unchanged; a write is books-v4's write on the same
//! filters moved to the top level ([`flat_tag`], [`flat_status`]), so it selects, previews,
//! refuses and records exactly what books-v4 does with those filters; a refusal's example and
//! field are written in this shape (`books.author`), so a corrected call can be copied as it
//! is. Refuses: everything books-v4 refuses, and a call without `books` (the schema).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolgate_core::idempotency::WriteEffect;
use toolgate_core::sql::Sql;
use toolgate_core::tool::DeclarationError;
use toolgate_core::{Effect, Risk, Tool, ToolBuilder, ToolError};

use crate::store::BooksStore;
use crate::v2::NewStatus;
use crate::v4::{self, Filters, Sort, StatusIs, TagAction, filter_args};
use crate::writes::{self, Selected};

filter_args! {
    /// Which books a write changes: the same filters as books_search.
    pub struct Books {
        /// Change only the first N matches in sort order.
        #[schemars(range(min = 1, max = 100))]
        pub limit: Option<u32>,
    }
}

/// `books_set_status`'s arguments: the books, then the status.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetStatusArgs {
    /// Which books: only the filters that describe them, and sort with limit for "the N highest-rated/earliest".
    pub books: Books,
    /// The new reading status; "none" clears it.
    pub status: NewStatus,
}

/// `books_tag`'s arguments: the books, then the tag.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TagArgs {
    /// Which books: only the filters that describe them, and sort with limit for "the N highest-rated/earliest".
    pub books: Books,
    /// The tag to add (or remove), e.g. "fav". Letters, digits, spaces, - and _.
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,31}$"))]
    pub tag: String,
    /// "add" (default) or "remove".
    pub action: Option<TagAction>,
}

/// The top-level names of books-v4's write arguments that this design keeps in `books`.
const BOOKS_FIELDS: [&str; 12] = [
    "author",
    "title",
    "published_after",
    "published_before",
    "published_in",
    "min_rating",
    "max_rating",
    "language",
    "current_status",
    "has_tag",
    "sort",
    "limit",
];

pub fn tools(store: &BooksStore) -> Result<Vec<Tool>, DeclarationError> {
    Ok(vec![v4::search(store)?, set_status(store)?, tag(store)?])
}

/// books-v4's status write with the same books.
pub fn flat_status(args: &SetStatusArgs) -> v4::SetStatusArgs {
    let books = &args.books;
    v4::SetStatusArgs::from_parts(books.filters(), books.sort, books.limit, args.status)
}

/// books-v4's tag write with the same books.
pub fn flat_tag(args: &TagArgs) -> v4::TagArgs {
    let books = &args.books;
    v4::TagArgs::from_parts(
        books.filters(),
        books.sort,
        books.limit,
        args.tag.clone(),
        args.action,
    )
}

/// A books-v4 call's arguments in this design's shape: the books' fields moved into `books`.
pub fn nest(args: &Value) -> Value {
    let Value::Object(fields) = args else {
        return args.clone();
    };
    let mut books = Map::new();
    let mut rest = Map::new();
    for (key, value) in fields {
        if BOOKS_FIELDS.contains(&key.as_str()) {
            books.insert(key.clone(), value.clone());
        } else {
            rest.insert(key.clone(), value.clone());
        }
    }
    let mut nested = Map::new();
    nested.insert("books".into(), Value::Object(books));
    nested.extend(rest);
    Value::Object(nested)
}

/// A books-v4 refusal in this design's shape: its example nested, its field under `books`.
fn nested_error(mut error: ToolError) -> ToolError {
    if let Some(example) = error.example.take() {
        error.example = Some(nest(&example));
    }
    if let Some(field) = error.field.take() {
        let top = field.split(['.', '[']).next().unwrap_or_default();
        error.field = Some(if BOOKS_FIELDS.contains(&top) {
            format!("books.{field}")
        } else {
            field
        });
    }
    error
}

fn select_status(conn: &dyn Sql, args: &SetStatusArgs) -> Result<Selected, ToolError> {
    v4::select_status(conn, &flat_status(args)).map_err(nested_error)
}

fn apply_status(
    tx: &dyn Sql,
    args: &SetStatusArgs,
    selected: &Selected,
) -> Result<WriteEffect, ToolError> {
    v4::apply_status(tx, &flat_status(args), selected).map_err(nested_error)
}

fn select_tag(conn: &dyn Sql, args: &TagArgs) -> Result<Selected, ToolError> {
    v4::select_tag(conn, &flat_tag(args)).map_err(nested_error)
}

fn apply_tag(tx: &dyn Sql, args: &TagArgs, selected: &Selected) -> Result<WriteEffect, ToolError> {
    v4::apply_tag(tx, &flat_tag(args), selected).map_err(nested_error)
}

fn set_status(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let builder = ToolBuilder::<SetStatusArgs>::new("books_set_status", 3)
        .describe(
            "Sets the user's reading status (want_to_read, reading, read, or none to clear) on every book that matches the filters in books, the same filters as books_search.",
            "the user asks to mark books: first say which books in books (only the filters that describe them, and sort with limit for \"the N highest-rated/earliest\"), then the status; it takes no ids.",
            Some("you want to label books with words such as \"fav\": use books_tag."),
            "summary (how many changed, which), matched, changed, each book's new and previous status.",
        )
        .example("mark every book by Agatha Christie as read", json!({"books": {"author": "Agatha Christie"}, "status": "read"}))
        .example("the 2 highest-rated books first published in 1999 as want_to_read", json!({"books": {"published_in": 1999, "sort": "highest_rated", "limit": 2}, "status": "want_to_read"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It changes only the user's own reading status, and the previous values are kept for undo.",
        )
        .check(|args: &SetStatusArgs, _| v4::check_status(&flat_status(args)).map_err(nested_error));
    writes::by_filter(builder, store, select_status, apply_status)
}

fn tag(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let builder = ToolBuilder::<TagArgs>::new("books_tag", 3)
        .describe(
            "Adds (or removes) one of the user's own tags, e.g. \"fav\", on every book that matches the filters in books, the same filters as books_search.",
            "the user asks to tag or untag books: first say which books in books (only the filters that describe them, and sort with limit for \"the N highest-rated/earliest\"), then the tag in tag; it takes no ids.",
            Some("you want to mark reading progress: use books_set_status."),
            "summary (how many changed, which), matched, changed, each book's tags after the change.",
        )
        .example("tag every George Orwell book dystopia", json!({"books": {"author": "George Orwell"}, "tag": "dystopia"}))
        .example("tag the 3 earliest books old", json!({"books": {"sort": "earliest", "limit": 3}, "tag": "old"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It changes only the user's own tags, and the previous tags are kept for undo.",
        )
        .check(|args: &TagArgs, _| v4::check_tag(&flat_tag(args)).map_err(nested_error));
    writes::by_filter(builder, store, select_tag, apply_tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v4_example_is_nested_so_a_corrected_call_can_be_copied_as_it_is() {
        // (books-v4's arguments, this design's)
        let cases = [
            (
                json!({"author": "George Orwell", "tag": "classic"}),
                json!({"books": {"author": "George Orwell"}, "tag": "classic"}),
            ),
            (
                json!({"published_in": 2005, "sort": "highest_rated", "limit": 1, "status": "read"}),
                json!({"books": {"published_in": 2005, "sort": "highest_rated", "limit": 1}, "status": "read"}),
            ),
            (
                json!({"tag": "x", "action": "remove"}),
                json!({"books": {}, "tag": "x", "action": "remove"}),
            ),
        ];
        for (flat, nested) in cases {
            assert_eq!(nest(&flat), nested, "{flat}");
        }
        assert_eq!(nest(&json!("not an object")), json!("not an object"));
    }

    #[test]
    fn a_refused_filter_is_named_where_this_design_takes_it() {
        let refused = ToolError::invalid("published_after", "crossed")
            .with_example(json!({"published_after": 2010, "published_before": 2016}));
        let nested = nested_error(refused);
        assert_eq!(nested.field.as_deref(), Some("books.published_after"));
        assert_eq!(
            nested.example,
            Some(json!({"books": {"published_after": 2010, "published_before": 2016}}))
        );
        let on_tag = nested_error(ToolError::invalid("tag", "a placeholder"));
        assert_eq!(on_tag.field.as_deref(), Some("tag"));
    }

    #[test]
    fn the_flat_write_carries_every_filter_sort_and_limit_of_the_books() {
        let args: TagArgs = serde_json::from_value(json!({
            "books": {"author": "Austen", "title": "Emma", "published_after": 1800,
                      "published_before": 1900, "published_in": 1815, "min_rating": 3.0,
                      "max_rating": 5.0, "language": "eng", "current_status": "read",
                      "has_tag": "old", "sort": "earliest", "limit": 2},
            "tag": "classic", "action": "remove"
        }))
        .unwrap();
        let flat = flat_tag(&args);
        assert_eq!(flat.filters(), args.books.filters());
        assert_eq!(
            (flat.sort, flat.limit, flat.tag.as_str(), flat.action),
            (
                Some(Sort::Earliest),
                Some(2),
                "classic",
                Some(TagAction::Remove)
            )
        );
        let status: SetStatusArgs = serde_json::from_value(
            json!({"books": {"author": "King", "current_status": "no_status"}, "status": "read"}),
        )
        .unwrap();
        let flat = flat_status(&status);
        assert_eq!(flat.filters(), status.books.filters());
        assert_eq!(flat.filters().current_status, Some(StatusIs::NoStatus));
        assert_eq!(flat.status, NewStatus::Read);
    }

    #[test]
    fn a_write_without_books_or_with_a_flat_filter_is_refused_by_its_shape() {
        assert!(serde_json::from_value::<TagArgs>(json!({"tag": "x"})).is_err());
        assert!(
            serde_json::from_value::<TagArgs>(json!({"author": "Austen", "tag": "x"})).is_err()
        );
        assert!(serde_json::from_value::<TagArgs>(json!({"books": {}, "tag": "x"})).is_ok());
    }
}
