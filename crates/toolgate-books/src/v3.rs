//! books-v3: books-v2 changed where the embedded model's runs showed it failing.
//!
//! - Writes take the same filters as `books_search` (plus `sort` and `limit`) and apply to
//!   every match, and their result names each changed book. They take no ids at all: in v2
//!   every update task failed because the model wrote to ids it had not searched for, and a
//!   first v3 that still accepted ids beside the filters saw the model send the same guessed
//!   ids with a correct filter (`evals/runs/books-v3-dev-embedded-with-ids`).
//! - `books_search` and `books_get` answer an exact repeat (same arguments, nothing written
//!   since) from the earlier result with a notice, in a loop that honours
//!   `answers_repeats`: the runs showed the same call repeated until the round cap.
//!
//! Guarantees of the writes: never the whole catalogue (a write without a filter is refused
//! unless a `limit` bounds it); at most [`MAX_CHANGED`] books per call (more matches without a
//! `limit` is refused with the count); no match changes nothing and says so; the approval
//! preview lists the books the call would change, and
//! the dispatcher binds it into the approval, so a human never approves one set and gets
//! another. v2's reads are reused unchanged.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_core::idempotency::WriteEffect;
use toolgate_core::spec::{Expected, JsonType};
use toolgate_core::sql::Sql;
use toolgate_core::tool::DeclarationError;
use toolgate_core::{Effect, Risk, Tool, ToolBuilder, ToolError};

use crate::filter::{BookFilter, StatusFilter};
use crate::store::BooksStore;
use crate::v2::{self, NewStatus, SortOrder};
use crate::writes::{self, Selected, Unselected};

pub use crate::writes::MAX_CHANGED;

/// Declares a write's arguments: the selection every v3 write shares (the search's filters,
/// sort, limit), then the write's own fields. One list, so the writes cannot drift
/// from each other or from the search.
macro_rules! selection_args {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Part of an author's name.
            #[schemars(length(min = 1, max = 100))]
            pub author: Option<String>,
            /// Part of the title.
            #[schemars(length(min = 1, max = 200))]
            pub title: Option<String>,
            /// Earliest year, inclusive ("after 2010" is 2011).
            #[schemars(range(min = -3000, max = 2100))]
            pub year_min: Option<i64>,
            /// Latest year, inclusive ("before 1900" is 1899).
            #[schemars(range(min = -3000, max = 2100))]
            pub year_max: Option<i64>,
            /// Lowest average rating, inclusive.
            #[schemars(range(min = 0, max = 5))]
            pub rating_min: Option<f64>,
            /// Highest average rating, inclusive.
            #[schemars(range(min = 0, max = 5))]
            pub rating_max: Option<f64>,
            /// Language code ("eng", "spa"); "none" for no code.
            #[schemars(length(min = 2, max = 10))]
            pub language: Option<String>,
            /// Only books whose status is now this.
            pub current_status: Option<StatusFilter>,
            /// Only books that have this tag.
            #[schemars(length(min = 1, max = 32))]
            pub tag: Option<String>,
            /// Order in which `limit` takes matches.
            pub sort: Option<SortOrder>,
            /// Change only the first N matches in sort order (2 with "rating_desc": the 2 best).
            #[schemars(range(min = 1, max = 100))]
            pub limit: Option<u32>,
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl $name {
            fn selection(&self) -> Selection<'_> {
                Selection {
                    filter: BookFilter {
                        author: self.author.as_deref(),
                        title: self.title.as_deref(),
                        year_min: self.year_min,
                        year_max: self.year_max,
                        rating_min: self.rating_min,
                        rating_max: self.rating_max,
                        language: self.language.as_deref(),
                        status: self.current_status,
                        tag: self.tag.as_deref(),
                    },
                    sort: self.sort.unwrap_or_default(),
                    limit: self.limit,
                }
            }
        }
    };
}

selection_args! {
    pub struct SetStatusArgs {
        /// The new reading status; "none" clears it.
        pub status: NewStatus,
    }
}

selection_args! {
    pub struct TagArgs {
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
}

/// Which books a write applies to.
#[derive(Debug, Clone, Copy)]
struct Selection<'a> {
    filter: BookFilter<'a>,
    sort: SortOrder,
    limit: Option<u32>,
}

pub fn tools(store: &BooksStore) -> Result<Vec<Tool>, DeclarationError> {
    Ok(vec![
        v2::search(store, true)?,
        v2::get(store, true)?,
        set_status(store)?,
        tag(store)?,
    ])
}

/// Refuses what a selection can tell without the store: nothing to bound it (no filter, no
/// limit), crossed ranges.
fn check_selection(selection: &Selection<'_>) -> Result<(), ToolError> {
    if selection.filter.is_empty() && selection.limit.is_none() {
        return Err(ToolError::invalid(
            "author",
            "give at least one filter (author, title, years, rating, language, current_status, tag), or sort with limit: a write never applies to the whole catalogue",
        )
        .with_example(json!({"author": "Suzanne Collins", "status": "read"})));
    }
    selection.filter.check_ranges()
}

/// The books `selection` picks, in its order; refuses no match, and more than
/// [`MAX_CHANGED`] matches without a limit.
fn select(conn: &dyn Sql, selection: &Selection<'_>) -> Result<Selected, ToolError> {
    match writes::select(conn, &selection.filter, selection.sort, selection.limit) {
        Ok(selected) => Ok(selected),
        Err(Unselected::NoMatch) => Err(no_match(conn, &selection.filter)?),
        Err(Unselected::TooMany { matched }) => Err(ToolError::invalid(
            "limit",
            format!("{matched} books match; one call changes at most {MAX_CHANGED}"),
        )
        .with_hint("narrow the filters, or set limit (and sort) to change the first ones")),
        Err(Unselected::Failed(error)) => Err(*error),
    }
}

/// The error for a selection nothing matches: it names the filters that match no book even
/// on their own (a small model fills every optional field, `author: "none"`, `year_max: 0`),
/// so the fix is to leave them out.
fn no_match(conn: &dyn Sql, filter: &BookFilter<'_>) -> Result<ToolError, ToolError> {
    let mut empty = Vec::new();
    for (label, alone) in filter.parts() {
        if alone.to_sql(conn)?.count(conn)? == 0 {
            empty.push(label);
        }
    }
    let error = ToolError::not_found("no book matched every filter; nothing was changed");
    Ok(if empty.is_empty() {
        error.with_hint(
            "each filter matches some books, but not together; books_search with the same filters shows what matches",
        )
    } else {
        error.with_hint(format!(
            "these filters match no book even alone: {}. Leave out every filter the user did not ask for (an absent field does not filter)",
            empty.join(", ")
        ))
    })
}

/// Adds `matched` to a write's result, and a note when `limit` left matches unchanged.
fn with_matched(mut effect: WriteEffect, selected: &Selected) -> WriteEffect {
    let changed = selected.books.len() as i64;
    effect.result["matched"] = json!(selected.matched);
    if changed < selected.matched {
        effect.result["note"] = json!(format!(
            "changed the first {changed} of {} matching books (limit)",
            selected.matched
        ));
    }
    effect
}

fn set_status(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let builder = ToolBuilder::<SetStatusArgs>::new("books_set_status", 2)
        .describe(
            "Sets the user's reading status (want_to_read, reading, read, or none to clear) on every book that matches the filters, the same filters as books_search.",
            "the user asks to mark books: give the filters that describe them (author, years, rating...), with sort and limit for \"the N best/oldest\"; it takes no ids.",
            Some("you want to label books with words such as \"fav\": use books_tag."),
            "matched (how many books fit), updated, and each changed book's id, title, new status and previous status.",
        )
        .example_returns(
            "mark every book by Suzanne Collins as read",
            json!({"author": "Suzanne Collins", "status": "read"}),
            Expected::values(&[("/matched", json!(3)), ("/updated", json!(3)), ("/books/0/status", json!("read"))]),
        )
        .example("the 2 highest-rated books from 2005 as want_to_read", json!({"year_min": 2005, "year_max": 2005, "sort": "rating_desc", "limit": 2, "status": "want_to_read"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It changes only the user's own reading status, and the previous values are kept for undo.",
        )
        .check(|args: &SetStatusArgs, _| check_selection(&args.selection()));
    writes::by_filter(
        builder,
        store,
        |conn, args| select(conn, &args.selection()),
        |tx, args, selected| {
            let effect = v2::set_status_of(tx, &selected.books, args.status)?;
            Ok(with_matched(effect, selected))
        },
    )
}

fn tag(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let builder = ToolBuilder::<TagArgs>::new("books_tag", 2)
        .describe(
            "Adds and/or removes the user's own tags (e.g. \"fav\") on every book that matches the filters, the same filters as books_search.",
            "the user asks to tag or untag books: give the filters that describe them, with sort and limit for \"the N best/oldest\"; it takes no ids.",
            Some("you want to mark reading progress: use books_set_status."),
            "matched (how many books fit), updated, and each changed book's id, title and tags after the change.",
        )
        .example_returns(
            "tag every Jane Austen book classic",
            json!({"author": "Jane Austen", "add": ["classic"]}),
            Expected::shape(&[("/updated", JsonType::Integer), ("/books/0/tags", JsonType::Array)]),
        )
        .example("tag the 3 oldest books ancient", json!({"sort": "year_asc", "limit": 3, "add": ["ancient"]}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It changes only the user's own tags, and the previous tags are kept for undo.",
        )
        .check(|args: &TagArgs, _| {
            if args.add.is_empty() && args.remove.is_empty() {
                return Err(ToolError::invalid("add", "nothing to do: give tags in add, remove, or both")
                    .with_example(json!({"author": "Jane Austen", "add": ["classic"]})));
            }
            check_selection(&args.selection())
        });
    writes::by_filter(
        builder,
        store,
        |conn, args| select(conn, &args.selection()),
        |tx, args, selected| {
            let effect = v2::retag(tx, &selected.books, &args.add, &args.remove)?;
            Ok(with_matched(effect, selected))
        },
    )
}
