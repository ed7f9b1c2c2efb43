//! books-v4: books-v3 changed where the embedded model's v3 runs failed
//! (`evals/runs/books-v3-*`). Each change names the failure it targets:
//!
//! - *Placeholder filters* (v3: `author "none"`, `tag` set to the tag being added, `rating_min
//!   1` with `rating_max 1`, `year_min 0`; every row hidden, so counts of 0 and writes that
//!   matched nothing): a placeholder is left out of the call, never matched, and the result
//!   says so (`ignored`). Placeholders are: an empty text or a filler word ([`PLACEHOLDERS`])
//!   in a text filter; year 0 (there is none) or a single year at the schema's limits; an empty
//!   rating range (equal bounds), a minimum of 5 or a maximum below 1; a write's filter on the
//!   very value it writes (`has_tag` equal to the tag it adds, `current_status` equal to the
//!   status it sets). Bounds that cover every book (`min_rating 0`, `published_after -3000`)
//!   are dropped without a note: they change nothing.
//! - *Range direction* (v3: "before 1900" sent as `year_min -1900`, "before 1990" as `year_min
//!   1990`, "after 2010" put in the title): years are asked in the user's words,
//!   `published_before`, `published_after` (both exclusive) and `published_in`.
//! - *Filters that hide the answer* (v3: `status "want_to_read"` on a count, `year 1800` on
//!   "the oldest book"): a search that matches nothing gives, for each filter, how many books
//!   match without it, and `next_call`, the arguments to send instead (leaving out the filters
//!   that match no book even alone, else the one whose removal widens the match least; none
//!   when no filter would be left: a lone filter that matches nothing is an answer, 0); a write
//!   that matches nothing is refused with the same corrected call as its example.
//! - *Miscounting and wrong figures* (v3: answered the page length, or the first book's id, for
//!   "how many"): a search result begins with a sentence that leads with the count (`found`),
//!   and each listed book gives its id last.
//! - *Superlatives answered from the wrong row* (v3: "highest rated" answered from a `limit 1`
//!   page sorted by popularity): `of_all_matches` names the highest and lowest rated and the
//!   earliest and latest book of the whole match, whatever the page. `sort` values are named
//!   as users say them (`highest_rated`, `earliest`).
//! - *Tag in the wrong field* (v3: `"tag": "ancient", "add": []`): `books_tag` takes the tag in
//!   `tag` (required) and an `action` (add by default); the tag filter is `has_tag`.
//! - *Repeated writes to the round cap* (v3: the same limited write eight times, each result
//!   saying "updated 10"): a write's result says it is done and that the same call again
//!   changes nothing (an identical call in the same run replays this very result from its
//!   receipt); a different call that selects books already in that state says "Nothing
//!   changed" and that the user can be answered.
//! - `books_get` is gone (v3 runs fetched ids they already had, or guessed ids): the search
//!   rows carry every field a task reads.
//!
//! Guarantees, as in v3: writes take the search's filters and no ids; never the whole
//! catalogue (a write with no filter left after placeholders are dropped needs `sort` and
//! `limit`); at most [`MAX_CHANGED`] books per call; no match changes nothing; crossed ranges
//! are refused; the approval preview lists the books the call would change, computed from the
//! same normalized filters as the write. Refuses: everything v3 refuses, plus a placeholder as
//! the tag to add.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolgate_core::idempotency::WriteEffect;
use toolgate_core::sql::Sql;
use toolgate_core::tool::DeclarationError;
use toolgate_core::{Effect, Risk, Tool, ToolBuilder, ToolError, ToolOutput};

use crate::filter::{BookFilter, NO_LANGUAGE, StatusFilter};
use crate::rows::BookRow;
use crate::store::BooksStore;
use crate::v2::{self, NewStatus, SortOrder};
use crate::writes::{self, Selected, Unselected};

pub use crate::writes::MAX_CHANGED;
/// Words a small model writes into a text filter it was not asked to fill.
pub const PLACEHOLDERS: [&str; 16] = [
    "none", "n/a", "na", "null", "nil", "any", "all", "*", "unknown", "-", "?", "no", "nothing",
    "empty", "anyone", "everyone",
];
/// The `language` value that finds books with no language code.
pub const MISSING_LANGUAGE: &str = "missing";
/// The schema's year limits; a single year at either is a filler, not a question.
const YEAR_FLOOR: i64 = -3000;
const YEAR_CEILING: i64 = 2100;
const DEFAULT_LIMIT: u32 = 10;
const SEARCH_MAX_BYTES: usize = 16 * 1024;

/// Orders, named as a user says them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    #[default]
    MostPopular,
    HighestRated,
    LowestRated,
    Earliest,
    Latest,
    Title,
}

impl Sort {
    fn order(self) -> SortOrder {
        match self {
            Sort::MostPopular => SortOrder::Popularity,
            Sort::HighestRated => SortOrder::RatingDesc,
            Sort::LowestRated => SortOrder::RatingAsc,
            Sort::Earliest => SortOrder::YearAsc,
            Sort::Latest => SortOrder::YearDesc,
            Sort::Title => SortOrder::Title,
        }
    }

    fn words(self) -> &'static str {
        match self {
            Sort::MostPopular => "most popular first",
            Sort::HighestRated => "highest rated first",
            Sort::LowestRated => "lowest rated first",
            Sort::Earliest => "earliest first",
            Sort::Latest => "latest first",
            Sort::Title => "by title",
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Sort::MostPopular => "most_popular",
            Sort::HighestRated => "highest_rated",
            Sort::LowestRated => "lowest_rated",
            Sort::Earliest => "earliest",
            Sort::Latest => "latest",
            Sort::Title => "title",
        }
    }
}

/// A reading-status filter; `no_status` finds books without one (not "none", a filler word).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusIs {
    WantToRead,
    Reading,
    Read,
    NoStatus,
}

impl StatusIs {
    fn arg(self) -> &'static str {
        match self {
            StatusIs::WantToRead => "want_to_read",
            StatusIs::Reading => "reading",
            StatusIs::Read => "read",
            StatusIs::NoStatus => "no_status",
        }
    }

    fn filter(self) -> StatusFilter {
        match self {
            StatusIs::WantToRead => StatusFilter::WantToRead,
            StatusIs::Reading => StatusFilter::Reading,
            StatusIs::Read => StatusFilter::Read,
            StatusIs::NoStatus => StatusFilter::None,
        }
    }

    /// The filter that selects books already holding `status` (a write's echo).
    fn of_new(status: NewStatus) -> StatusIs {
        match status {
            NewStatus::WantToRead => StatusIs::WantToRead,
            NewStatus::Reading => StatusIs::Reading,
            NewStatus::Read => StatusIs::Read,
            NewStatus::None => StatusIs::NoStatus,
        }
    }
}

/// What `books_tag` does with its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum TagAction {
    #[default]
    Add,
    Remove,
}

/// The filters as a call gave them, or after [`normalize`]; owned so a corrected call can be
/// written back ([`Filters::to_args`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filters {
    pub author: Option<String>,
    pub title: Option<String>,
    /// Exclusive.
    pub published_after: Option<i64>,
    /// Exclusive.
    pub published_before: Option<i64>,
    pub published_in: Option<i64>,
    pub min_rating: Option<f64>,
    pub max_rating: Option<f64>,
    pub language: Option<String>,
    pub current_status: Option<StatusIs>,
    pub has_tag: Option<String>,
}

/// One filter of a call, as a unit a result can report on (a range is one part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Author,
    Title,
    Years,
    Rating,
    Language,
    Status,
    Tag,
}

impl Part {
    const ALL: [Part; 7] = [
        Part::Author,
        Part::Title,
        Part::Years,
        Part::Rating,
        Part::Language,
        Part::Status,
        Part::Tag,
    ];
}

fn is_placeholder(text: &str) -> bool {
    let text = text.trim();
    text.is_empty() || PLACEHOLDERS.iter().any(|p| p.eq_ignore_ascii_case(text))
}

/// Leaves out every placeholder (see the module documentation), returning the filters left and
/// one note per placeholder. Pure.
pub fn normalize(given: &Filters) -> (Filters, Vec<String>) {
    let mut f = given.clone();
    let mut ignored = Vec::new();
    for (name, value) in [
        ("author", &mut f.author),
        ("title", &mut f.title),
        ("has_tag", &mut f.has_tag),
        ("language", &mut f.language),
    ] {
        if let Some(text) = value.as_deref()
            && is_placeholder(text)
        {
            let extra = if name == "language" {
                format!("; for books with no language code use \"{MISSING_LANGUAGE}\"")
            } else {
                String::new()
            };
            ignored.push(format!(
                "{name} \"{text}\": a placeholder, not a filter{extra}"
            ));
            *value = None;
        }
    }
    for (name, value) in [
        ("published_after", &mut f.published_after),
        ("published_before", &mut f.published_before),
        ("published_in", &mut f.published_in),
    ] {
        if *value == Some(0) {
            ignored.push(format!("{name} 0: there is no year 0"));
            *value = None;
        }
    }
    if let Some(year) = f.published_in
        && (year <= YEAR_FLOOR || year >= YEAR_CEILING)
    {
        ignored.push(format!(
            "published_in {year}: the limit of the year range, not a year"
        ));
        f.published_in = None;
    }
    // Bounds every book meets filter nothing: dropped without a note.
    if f.published_after.is_some_and(|y| y <= YEAR_FLOOR) {
        f.published_after = None;
    }
    if f.published_before.is_some_and(|y| y >= YEAR_CEILING) {
        f.published_before = None;
    }
    match (f.min_rating, f.max_rating) {
        (Some(lo), Some(hi)) if lo == hi => {
            ignored.push(format!(
                "min_rating {lo} with max_rating {hi}: an empty range; give min_rating alone for \"{lo} or higher\""
            ));
            f.min_rating = None;
            f.max_rating = None;
        }
        _ => {}
    }
    if let Some(lo) = f.min_rating {
        if lo >= 5.0 {
            ignored.push(format!("min_rating {lo}: no average rating reaches it"));
            f.min_rating = None;
        } else if lo <= 0.0 {
            f.min_rating = None;
        }
    }
    if let Some(hi) = f.max_rating {
        if hi < 1.0 {
            ignored.push(format!("max_rating {hi}: no average rating is that low"));
            f.max_rating = None;
        } else if hi >= 5.0 {
            f.max_rating = None;
        }
    }
    (f, ignored)
}

impl Filters {
    fn is_empty(&self) -> bool {
        Part::ALL.iter().all(|p| !self.has(*p))
    }

    fn has(&self, part: Part) -> bool {
        match part {
            Part::Author => self.author.is_some(),
            Part::Title => self.title.is_some(),
            Part::Years => {
                self.published_after.is_some()
                    || self.published_before.is_some()
                    || self.published_in.is_some()
            }
            Part::Rating => self.min_rating.is_some() || self.max_rating.is_some(),
            Part::Language => self.language.is_some(),
            Part::Status => self.current_status.is_some(),
            Part::Tag => self.has_tag.is_some(),
        }
    }

    /// The parts this call filters by, in [`Part::ALL`] order.
    pub fn parts(&self) -> Vec<Part> {
        Part::ALL.into_iter().filter(|p| self.has(*p)).collect()
    }

    /// These filters without `part`.
    pub fn without(&self, part: Part) -> Filters {
        let mut f = self.clone();
        match part {
            Part::Author => f.author = None,
            Part::Title => f.title = None,
            Part::Years => {
                f.published_after = None;
                f.published_before = None;
                f.published_in = None;
            }
            Part::Rating => {
                f.min_rating = None;
                f.max_rating = None;
            }
            Part::Language => f.language = None,
            Part::Status => f.current_status = None,
            Part::Tag => f.has_tag = None,
        }
        f
    }

    /// Only `part` of these filters.
    pub fn only(&self, part: Part) -> Filters {
        Part::ALL
            .into_iter()
            .filter(|p| *p != part)
            .fold(self.clone(), |f, p| f.without(p))
    }

    /// The part in words, as the call wrote it (`published before 1990`).
    pub fn label(&self, part: Part) -> String {
        let mut words: Vec<String> = Vec::new();
        match part {
            Part::Author => words.extend(self.author.as_ref().map(|a| format!("author \"{a}\""))),
            Part::Title => words.extend(self.title.as_ref().map(|t| format!("title \"{t}\""))),
            Part::Years => {
                words.extend(self.published_in.map(|y| format!("published in {y}")));
                words.extend(self.published_after.map(|y| format!("published after {y}")));
                words.extend(
                    self.published_before
                        .map(|y| format!("published before {y}")),
                );
            }
            Part::Rating => {
                words.extend(self.min_rating.map(|r| format!("rating {r} or higher")));
                words.extend(self.max_rating.map(|r| format!("rating {r} or lower")));
            }
            Part::Language => words.extend(self.language.as_ref().map(|l| {
                if l.eq_ignore_ascii_case(MISSING_LANGUAGE) {
                    "no language code".to_string()
                } else {
                    format!("language \"{l}\"")
                }
            })),
            Part::Status => {
                words.extend(self.current_status.map(|s| format!("status {}", s.arg())))
            }
            Part::Tag => words.extend(self.has_tag.as_ref().map(|t| format!("tag \"{t}\""))),
        }
        words.join(", ")
    }

    /// Every filter in words; "" for none.
    pub fn describe(&self) -> String {
        self.parts()
            .into_iter()
            .map(|p| self.label(p))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The filters as a call's arguments (the names the tools take).
    pub fn to_args(&self) -> Map<String, Value> {
        let mut args = Map::new();
        let mut put = |name: &str, value: Option<Value>| {
            if let Some(value) = value {
                args.insert(name.into(), value);
            }
        };
        put("author", self.author.as_ref().map(|v| json!(v)));
        put("title", self.title.as_ref().map(|v| json!(v)));
        put("published_after", self.published_after.map(|v| json!(v)));
        put("published_before", self.published_before.map(|v| json!(v)));
        put("published_in", self.published_in.map(|v| json!(v)));
        put("min_rating", self.min_rating.map(|v| json!(v)));
        put("max_rating", self.max_rating.map(|v| json!(v)));
        put("language", self.language.as_ref().map(|v| json!(v)));
        put(
            "current_status",
            self.current_status.map(|v| json!(v.arg())),
        );
        put("has_tag", self.has_tag.as_ref().map(|v| json!(v)));
        args
    }

    /// The inclusive year bounds these filters mean.
    fn year_bounds(&self) -> (Option<i64>, Option<i64>) {
        let lows = [self.published_after.map(|y| y + 1), self.published_in];
        let highs = [self.published_before.map(|y| y - 1), self.published_in];
        (
            lows.into_iter().flatten().max(),
            highs.into_iter().flatten().min(),
        )
    }

    /// Refuses bounds that no year or rating can meet together.
    pub fn check_ranges(&self) -> Result<(), ToolError> {
        if let (Some(lo), Some(hi)) = self.year_bounds()
            && lo > hi
        {
            return Err(ToolError::invalid(
                "published_after",
                format!("no year is {}", self.label(Part::Years)),
            )
            .with_hint("published_after and published_before leave out the year they name; for one year give published_in alone")
            .with_example(json!({"published_after": 2010, "published_before": 2016})));
        }
        if let (Some(lo), Some(hi)) = (self.min_rating, self.max_rating)
            && lo > hi
        {
            return Err(ToolError::invalid(
                "min_rating",
                format!("min_rating ({lo}) is above max_rating ({hi})"),
            )
            .with_example(json!({"min_rating": 4.0, "max_rating": 4.5})));
        }
        Ok(())
    }

    /// The shared SQL filter for these filters.
    fn book_filter(&self) -> BookFilter<'_> {
        let (year_min, year_max) = self.year_bounds();
        BookFilter {
            author: self.author.as_deref(),
            title: self.title.as_deref(),
            year_min,
            year_max,
            rating_min: self.min_rating,
            rating_max: self.max_rating,
            language: self.language.as_deref().map(|l| {
                if l.trim().eq_ignore_ascii_case(MISSING_LANGUAGE) {
                    NO_LANGUAGE
                } else {
                    l
                }
            }),
            status: self.current_status.map(StatusIs::filter),
            tag: self.has_tag.as_deref(),
        }
    }

    fn count(&self, conn: &dyn Sql) -> Result<i64, ToolError> {
        self.book_filter().to_sql(conn)?.count(conn)
    }
}

/// What to try when a match is empty: the count without each part, and the filters to send
/// instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Widening {
    /// (part in words, books matching without it).
    pub without: Vec<(String, i64)>,
    /// The parts that match no book even alone.
    pub empty_alone: Vec<String>,
    /// The filters to send instead; `None` when no single removal finds a book.
    pub instead: Option<Filters>,
}

/// Picks what to drop from filters that match nothing. `alone` and `without` hold, per part,
/// the count of that part alone and of every other part. Pure: drops every part that matches
/// nothing alone, else the one part whose removal widens the match least.
pub fn widen(filters: &Filters, counts: &[(Part, i64, i64)]) -> Widening {
    let without = counts
        .iter()
        .map(|(p, _, w)| (filters.label(*p), *w))
        .collect();
    let empty: Vec<Part> = counts
        .iter()
        .filter(|(_, alone, _)| *alone == 0)
        .map(|(p, _, _)| *p)
        .collect();
    let instead = if !empty.is_empty() {
        Some(empty.iter().fold(filters.clone(), |f, p| f.without(*p)))
    } else {
        counts
            .iter()
            .filter(|(_, _, w)| *w > 0)
            .min_by_key(|(_, _, w)| *w)
            .map(|(p, _, _)| filters.without(*p))
    };
    Widening {
        without,
        empty_alone: empty.iter().map(|p| filters.label(*p)).collect(),
        instead,
    }
}

fn widening(conn: &dyn Sql, filters: &Filters) -> Result<Widening, ToolError> {
    let mut counts = Vec::new();
    for part in filters.parts() {
        let alone = filters.only(part).count(conn)?;
        let without = filters.without(part).count(conn)?;
        counts.push((part, alone, without));
    }
    Ok(widen(filters, &counts))
}

/// "7 books match author \"Stephen King\"": the count first, so an answer copying it leads
/// with the figure asked for.
pub fn found_sentence(total: i64, described: &str) -> String {
    let books = if total == 1 { "book" } else { "books" };
    if described.is_empty() {
        format!("{total} {books} in the catalogue")
    } else {
        let verb = if total == 1 { "matches" } else { "match" };
        format!("{total} {books} {verb} {described}")
    }
}

/// Declares an argument struct with the filters every v4 tool shares, then its own fields
/// (v6's `books` object too).
macro_rules! filter_args {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Part of an author's name, e.g. "Orwell". Leave out unless the user names one.
            #[schemars(length(max = 100))]
            pub author: Option<String>,
            /// Part of the title.
            #[schemars(length(max = 200))]
            pub title: Option<String>,
            /// Only books first published after this year, not including it ("after 2010" is 2010).
            #[schemars(range(min = -3000, max = 2100))]
            pub published_after: Option<i64>,
            /// Only books first published before this year ("before 1900" is 1900).
            #[schemars(range(min = -3000, max = 2100))]
            pub published_before: Option<i64>,
            /// Only books first published in this year.
            #[schemars(range(min = -3000, max = 2100))]
            pub published_in: Option<i64>,
            /// Lowest average rating, inclusive ("4.2 or higher" is 4.2).
            #[schemars(range(min = 0, max = 5))]
            pub min_rating: Option<f64>,
            /// Highest average rating, inclusive.
            #[schemars(range(min = 0, max = 5))]
            pub max_rating: Option<f64>,
            /// Language code ("eng", "spa"); "missing" for books with no code.
            #[schemars(length(max = 10))]
            pub language: Option<String>,
            /// Only books whose reading status is now this.
            pub current_status: Option<StatusIs>,
            /// Only books that have this tag.
            #[schemars(length(max = 32))]
            pub has_tag: Option<String>,
            /// Order; with limit, "the 2 highest-rated" is highest_rated and 2.
            pub sort: Option<Sort>,
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl $name {
            /// The filters as given (before [`normalize`]).
            pub fn filters(&self) -> Filters {
                Filters {
                    author: self.author.clone(),
                    title: self.title.clone(),
                    published_after: self.published_after,
                    published_before: self.published_before,
                    published_in: self.published_in,
                    min_rating: self.min_rating,
                    max_rating: self.max_rating,
                    language: self.language.clone(),
                    current_status: self.current_status,
                    has_tag: self.has_tag.clone(),
                }
            }

            /// The arguments made of `filters`, `sort` and its own fields, in their order.
            #[allow(clippy::too_many_arguments)]
            pub fn from_parts(filters: Filters, sort: Option<Sort>, $($field: $ty,)*) -> Self {
                let Filters {
                    author,
                    title,
                    published_after,
                    published_before,
                    published_in,
                    min_rating,
                    max_rating,
                    language,
                    current_status,
                    has_tag,
                } = filters;
                $name {
                    author,
                    title,
                    published_after,
                    published_before,
                    published_in,
                    min_rating,
                    max_rating,
                    language,
                    current_status,
                    has_tag,
                    sort,
                    $($field,)*
                }
            }
        }
    };
}

pub(crate) use filter_args;

filter_args! {
    pub struct SearchArgs {
        /// How many books to list, 1-100; default 10. The counts cover every match anyway.
        #[schemars(range(min = 1, max = 100))]
        pub limit: Option<u32>,
        /// How many matching books to skip (the next page); default 0.
        #[schemars(range(min = 0, max = 10000))]
        pub offset: Option<u32>,
    }
}

filter_args! {
    pub struct SetStatusArgs {
        /// Change only the first N matches in sort order.
        #[schemars(range(min = 1, max = 100))]
        pub limit: Option<u32>,
        /// The new reading status; "none" clears it.
        pub status: NewStatus,
    }
}

filter_args! {
    pub struct TagArgs {
        /// Change only the first N matches in sort order.
        #[schemars(range(min = 1, max = 100))]
        pub limit: Option<u32>,
        /// The tag to add (or remove), e.g. "fav". Letters, digits, spaces, - and _.
        #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,31}$"))]
        pub tag: String,
        /// "add" (default) or "remove".
        pub action: Option<TagAction>,
    }
}

pub fn tools(store: &BooksStore) -> Result<Vec<Tool>, DeclarationError> {
    Ok(vec![search(store)?, set_status(store)?, tag(store)?])
}

pub(crate) fn search(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let store = store.clone();
    ToolBuilder::<SearchArgs>::new("books_search", 1)
        .answers_repeats()
        .describe(
            "Finds, counts and ranks books in the user's catalogue. Give only the filters the user asked for; an absent filter matches every book.",
            "the user asks how many, which, the highest/lowest rated or the earliest/latest book.",
            Some("the user asks to change books: books_set_status and books_tag take the same filters."),
            "found (the count in words), total_matches, books, of_all_matches (highest and lowest rated, earliest and latest of every match), and next_call when nothing matched.",
        )
        .example("how many books by George Orwell", json!({"author": "George Orwell"}))
        .example("books first published before 1950", json!({"published_before": 1950}))
        .example("Orwell's highest-rated book", json!({"author": "Orwell", "sort": "highest_rated", "limit": 1}))
        .policy(Risk::Low, Effect::Read, "It only reads the local catalogue.")
        .max_output_bytes(SEARCH_MAX_BYTES)
        .more_hint("call books_search again with offset set to next_offset, or narrow the filters")
        .parallel_safe()
        .check(|args: &SearchArgs, _| normalize(&args.filters()).0.check_ranges())
        .read(move |_ctx, args: SearchArgs| {
            let store = store.clone();
            async move { store.read_sql(move |conn| run_search(conn, &args)).await.map(ToolOutput::new) }
        })
}

fn title_with(book: &BookRow, what: &str) -> String {
    match what {
        "rating" => format!("{} (rating {})", book.title, book.average_rating),
        _ => match book.original_publication_year {
            Some(year) => format!("{} ({year})", book.title),
            None => book.title.clone(),
        },
    }
}

/// A listed book, title first and its id last: a v3 run answered "how many" with the first
/// number of the list, the first book's id.
fn listed(book: &BookRow) -> Value {
    let mut row = json!({
        "title": book.title,
        "authors": book.authors,
        "year": book.original_publication_year,
        "rating": book.average_rating,
    });
    if let Some(status) = &book.my_status {
        row["status"] = json!(status);
    }
    if !book.my_tags.is_empty() {
        row["tags"] = json!(book.tags());
    }
    row["id"] = json!(book.book_id);
    row
}

fn run_search(conn: &dyn Sql, args: &SearchArgs) -> Result<Value, ToolError> {
    let (filters, ignored) = normalize(&args.filters());
    filters.check_ranges()?;
    let clause = filters.book_filter().to_sql(conn)?;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let offset = args.offset.unwrap_or(0);
    let sort = args.sort.unwrap_or_default();
    let extremes = [
        ("highest_rated", SortOrder::RatingDesc, "rating"),
        ("lowest_rated", SortOrder::RatingAsc, "rating"),
        ("earliest", SortOrder::YearAsc, "year"),
        ("latest", SortOrder::YearDesc, "year"),
    ];
    let orders: Vec<SortOrder> = extremes.iter().map(|(_, order, _)| *order).collect();
    let searched = clause.search(conn, sort.order(), limit, offset, &orders)?;
    let (total, page) = (searched.total, searched.page);
    let described = filters.describe();
    let mut found = found_sentence(total, &described);
    let shown_to = i64::from(offset) + page.len() as i64;
    if total > 0 && (offset > 0 || shown_to < total) {
        found.push_str(&format!(
            "; listed {} to {shown_to}, {}",
            i64::from(offset) + 1,
            sort.words()
        ));
    }
    found.push('.');
    let books: Vec<Value> = page.iter().map(listed).collect();
    let mut result = json!({"found": found, "total_matches": total, "books": books});
    if total >= 2 {
        let mut of_all = Map::new();
        for ((name, _, what), first) in extremes.iter().zip(&searched.firsts) {
            if let Some(book) = first {
                of_all.insert((*name).into(), json!(title_with(book, what)));
            }
        }
        result["of_all_matches"] = Value::Object(of_all);
    }
    if !ignored.is_empty() {
        result["ignored"] = json!(ignored);
    }
    if shown_to < total {
        result["next_offset"] = json!(shown_to);
    }
    if total == 0 && !filters.is_empty() {
        let widening = widening(conn, &filters)?;
        let without: Vec<String> = widening
            .without
            .iter()
            .map(|(label, n)| format!("without {label}: {n}"))
            .collect();
        result["without_each_filter"] = json!(without);
        if let Some(instead) = widening.instead.filter(|f| !f.is_empty()) {
            let mut next = instead.to_args();
            if let Some(sort) = args.sort {
                next.insert("sort".into(), json!(sort.arg()));
            }
            if let Some(limit) = args.limit {
                next.insert("limit".into(), json!(limit));
            }
            result["next_call"] = Value::Object(next);
            result["note"] = json!(
                "no book matches every filter: if the user did not ask for a filter, call again with next_call"
            );
        }
    }
    Ok(result)
}

/// Which books a write applies to, after placeholders are dropped.
#[derive(Debug, Clone)]
struct Selection {
    filters: Filters,
    ignored: Vec<String>,
    sort: Sort,
    limit: Option<u32>,
    /// The write's own arguments, for a corrected call's example.
    own: Map<String, Value>,
}

impl Selection {
    fn new(
        given: &Filters,
        sort: Option<Sort>,
        limit: Option<u32>,
        own: Map<String, Value>,
    ) -> Self {
        let (filters, ignored) = normalize(given);
        Selection {
            filters,
            ignored,
            sort: sort.unwrap_or_default(),
            limit,
            own,
        }
    }

    /// The call's arguments with `filters` in place of its own.
    fn call_with(&self, filters: &Filters) -> Value {
        let mut args = filters.to_args();
        if self.sort != Sort::default() || self.limit.is_some() {
            args.insert("sort".into(), json!(self.sort.arg()));
        }
        if let Some(limit) = self.limit {
            args.insert("limit".into(), json!(limit));
        }
        args.extend(self.own.clone());
        Value::Object(args)
    }

    /// Refuses what needs no store: nothing left to bound the write, crossed ranges.
    fn check(&self) -> Result<(), ToolError> {
        if self.filters.is_empty() && self.limit.is_none() {
            let mut message = String::from(
                "which books? a write never applies to the whole catalogue: give the filter the user's request names (author, title, published_before, published_after, published_in, min_rating, max_rating, language, current_status, has_tag), or sort with limit, and call again now",
            );
            if !self.ignored.is_empty() {
                message.push_str(&format!("; ignored: {}", self.ignored.join("; ")));
            }
            let mut example = Map::new();
            example.insert("author".into(), json!("George Orwell"));
            example.extend(self.own.clone());
            return Err(ToolError::invalid("author", message).with_example(Value::Object(example)));
        }
        self.filters.check_ranges()
    }
}

fn select(conn: &dyn Sql, selection: &Selection) -> Result<Selected, ToolError> {
    let filter = selection.filters.book_filter();
    match writes::select(conn, &filter, selection.sort.order(), selection.limit) {
        Ok(selected) => Ok(selected),
        Err(Unselected::NoMatch) => Err(no_match(conn, selection)?),
        Err(Unselected::TooMany { matched }) => {
            let mut example = selection.call_with(&selection.filters);
            example["sort"] = json!(selection.sort.arg());
            example["limit"] = json!(1);
            Err(ToolError::invalid(
                "limit",
                format!(
                    "{matched} books match {}; one call changes at most {MAX_CHANGED}",
                    selection.filters.describe()
                ),
            )
            .with_hint("narrow the filters to what the user asked (published_in for one year), or give sort and limit for \"the N highest-rated\"")
            .with_example(example))
        }
        Err(Unselected::Failed(error)) => Err(*error),
    }
}

/// The refusal of a write nothing matches, with the corrected call as its example.
fn no_match(conn: &dyn Sql, selection: &Selection) -> Result<ToolError, ToolError> {
    let widening = widening(conn, &selection.filters)?;
    let mut error = ToolError::not_found(format!(
        "no book matches {}; nothing was changed",
        selection.filters.describe()
    ));
    let mut hint: Vec<String> = widening
        .without
        .iter()
        .map(|(label, n)| format!("without {label}: {n} books"))
        .collect();
    if !widening.empty_alone.is_empty() {
        hint.insert(
            0,
            format!(
                "these match no book even alone: {}",
                widening.empty_alone.join(", ")
            ),
        );
    }
    hint.push("leave out every filter the user did not ask for".into());
    error = error.with_hint(hint.join("; "));
    if let Some(instead) = widening.instead.filter(|f| !f.is_empty()) {
        error = error.with_example(selection.call_with(&instead));
    }
    Ok(error)
}

/// The write's result: a sentence first (how many changed, which), then v3's fields.
fn finish(
    mut effect: WriteEffect,
    selection: &Selection,
    selected: &Selected,
    changed: usize,
    did: &str,
) -> WriteEffect {
    let n = selected.books.len();
    let titles: Vec<&str> = selected.books.iter().map(|b| b.title.as_str()).collect();
    let summary = if changed == 0 {
        format!(
            "Nothing changed: the {n} selected books already {did}. The user's request is done; answer it."
        )
    } else {
        format!(
            "Changed {changed} books ({did}): {}. Done: the same call again changes nothing.",
            titles.join("; ")
        )
    };
    let mut result = json!({"summary": summary, "matched": selected.matched, "changed": changed});
    if let Value::Object(fields) = std::mem::take(&mut effect.result) {
        for (k, v) in fields {
            if k != "updated" {
                result[k] = v;
            }
        }
    }
    if (n as i64) < selected.matched {
        result["note"] = json!(format!(
            "limit {}: changed the first {n} of {} matching books ({}); the other {} are unchanged",
            selection.limit.unwrap_or(MAX_CHANGED),
            selected.matched,
            selection.sort.words(),
            selected.matched - n as i64
        ));
    }
    if !selection.ignored.is_empty() {
        result["ignored"] = json!(selection.ignored);
    }
    effect.result = result;
    effect
}

fn status_selection(args: &SetStatusArgs) -> Selection {
    let mut given = args.filters();
    let mut echo = None;
    // A filter on the status being set selects books the write cannot change.
    if given.current_status == Some(StatusIs::of_new(args.status)) {
        echo = given.current_status.take();
    }
    let mut own = Map::new();
    own.insert(
        "status".into(),
        json!(v2::status_text(args.status).unwrap_or("none")),
    );
    let mut selection = Selection::new(&given, args.sort, args.limit, own);
    if let Some(status) = echo {
        selection.ignored.push(format!(
            "current_status {}: the status this call sets, so it would select only books it cannot change",
            status.arg()
        ));
    }
    selection
}

fn tag_selection(args: &TagArgs) -> Selection {
    let mut given = args.filters();
    let action = args.action.unwrap_or_default();
    let echo = action == TagAction::Add
        && given
            .has_tag
            .as_deref()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case(args.tag.trim()));
    if echo {
        given.has_tag = None;
    }
    let mut own = Map::new();
    own.insert("tag".into(), json!(args.tag));
    if action == TagAction::Remove {
        own.insert("action".into(), json!("remove"));
    }
    let mut selection = Selection::new(&given, args.sort, args.limit, own);
    if echo {
        selection.ignored.push(format!(
            "has_tag \"{}\": the tag this call adds, so it would select only books that already have it",
            args.tag
        ));
    }
    selection
}

fn set_status(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let builder = ToolBuilder::<SetStatusArgs>::new("books_set_status", 3)
        .describe(
            "Sets the user's reading status (want_to_read, reading, read, or none to clear) on every book that matches the filters, the same filters as books_search.",
            "the user asks to mark books: give only the filters that describe them, and sort with limit for \"the N highest-rated/earliest\"; it takes no ids.",
            Some("you want to label books with words such as \"fav\": use books_tag."),
            "summary (how many changed, which), matched, changed, each book's new and previous status.",
        )
        .example("mark every book by Agatha Christie as read", json!({"author": "Agatha Christie", "status": "read"}))
        .example("the 2 highest-rated books first published in 1999 as want_to_read", json!({"published_in": 1999, "sort": "highest_rated", "limit": 2, "status": "want_to_read"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It changes only the user's own reading status, and the previous values are kept for undo.",
        )
        .check(|args: &SetStatusArgs, _| check_status(args));
    writes::by_filter(builder, store, select_status, apply_status)
}

/// Refuses a status write that needs no store to refuse (no books named, crossed ranges).
pub(crate) fn check_status(args: &SetStatusArgs) -> Result<(), ToolError> {
    status_selection(args).check()
}

/// The books a status write changes.
pub(crate) fn select_status(conn: &dyn Sql, args: &SetStatusArgs) -> Result<Selected, ToolError> {
    select(conn, &status_selection(args))
}

/// Sets the status on the selected books; the result says what changed.
pub(crate) fn apply_status(
    tx: &dyn Sql,
    args: &SetStatusArgs,
    selected: &Selected,
) -> Result<WriteEffect, ToolError> {
    let new = v2::status_text(args.status);
    let changed = selected
        .books
        .iter()
        .filter(|b| b.my_status.as_deref() != new)
        .count();
    let effect = v2::set_status_of(tx, &selected.books, args.status)?;
    let did = format!("have status {}", new.unwrap_or("none"));
    Ok(finish(
        effect,
        &status_selection(args),
        selected,
        changed,
        &did,
    ))
}

fn tag(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let builder = ToolBuilder::<TagArgs>::new("books_tag", 3)
        .describe(
            "Adds (or removes) one of the user's own tags, e.g. \"fav\", on every book that matches the filters, the same filters as books_search.",
            "the user asks to tag or untag books: the tag goes in tag; give only the filters that describe the books, and sort with limit for \"the N highest-rated/earliest\"; it takes no ids.",
            Some("you want to mark reading progress: use books_set_status."),
            "summary (how many changed, which), matched, changed, each book's tags after the change.",
        )
        .example("tag every George Orwell book dystopia", json!({"author": "George Orwell", "tag": "dystopia"}))
        .example("tag the 3 earliest books old", json!({"sort": "earliest", "limit": 3, "tag": "old"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It changes only the user's own tags, and the previous tags are kept for undo.",
        )
        .check(|args: &TagArgs, _| check_tag(args));
    writes::by_filter(builder, store, select_tag, apply_tag)
}

/// Refuses a tag write that needs no store to refuse (a placeholder tag, no books named,
/// crossed ranges).
pub(crate) fn check_tag(args: &TagArgs) -> Result<(), ToolError> {
    if is_placeholder(&args.tag) {
        return Err(ToolError::invalid(
            "tag",
            format!(
                "\"{}\" is a placeholder, not a tag: give the tag the user named",
                args.tag
            ),
        )
        .with_example(json!({"author": "George Orwell", "tag": "classic"})));
    }
    tag_selection(args).check()
}

/// The books a tag write changes.
pub(crate) fn select_tag(conn: &dyn Sql, args: &TagArgs) -> Result<Selected, ToolError> {
    select(conn, &tag_selection(args))
}

/// Adds or removes the tag on the selected books; the result says what changed.
pub(crate) fn apply_tag(
    tx: &dyn Sql,
    args: &TagArgs,
    selected: &Selected,
) -> Result<WriteEffect, ToolError> {
    let tag = args.tag.trim().to_lowercase();
    let remove = args.action == Some(TagAction::Remove);
    let changed = selected
        .books
        .iter()
        .filter(|b| b.tags().contains(&tag.as_str()) == remove)
        .count();
    let (added, removed) = if remove {
        (Vec::new(), vec![tag.clone()])
    } else {
        (vec![tag.clone()], Vec::new())
    };
    let effect = v2::retag(tx, &selected.books, &added, &removed)?;
    let did = if remove {
        format!("lack the tag \"{tag}\"")
    } else {
        format!("have the tag \"{tag}\"")
    };
    Ok(finish(
        effect,
        &tag_selection(args),
        selected,
        changed,
        &did,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(f: impl FnOnce(&mut Filters)) -> Filters {
        let mut filters = Filters::default();
        f(&mut filters);
        filters
    }

    #[test]
    fn placeholders_never_filter_and_each_is_named() {
        // (what a v3 run sent, what is left, how many notes)
        let cases: Vec<(Filters, Filters, usize)> = vec![
            (
                given(|f| {
                    f.author = Some("none".into());
                    f.title = Some(" N/A ".into());
                    f.language = Some("spa".into());
                }),
                given(|f| f.language = Some("spa".into())),
                2,
            ),
            (
                given(|f| {
                    f.author = Some("Jane Austen".into());
                    f.min_rating = Some(1.0);
                    f.max_rating = Some(1.0);
                }),
                given(|f| f.author = Some("Jane Austen".into())),
                1,
            ),
            (
                given(|f| {
                    f.published_after = Some(0);
                    f.published_before = Some(0);
                    f.min_rating = Some(0.0);
                    f.max_rating = Some(0.0);
                    f.has_tag = Some(String::new());
                }),
                Filters::default(),
                4,
            ),
            (
                given(|f| {
                    f.published_in = Some(-3000);
                    f.min_rating = Some(5.0);
                    f.language = Some("none".into());
                }),
                Filters::default(),
                3,
            ),
        ];
        for (sent, left, notes) in cases {
            let (kept, ignored) = normalize(&sent);
            assert_eq!(kept, left, "{sent:?}");
            assert_eq!(ignored.len(), notes, "{ignored:?}");
        }
    }

    #[test]
    fn real_filters_and_bounds_that_cover_everything_are_not_reported() {
        let sent = given(|f| {
            f.author = Some("Stephen King".into());
            f.published_before = Some(1990);
            f.published_after = Some(-3000);
            f.min_rating = Some(4.2);
            f.max_rating = Some(5.0);
            f.language = Some("missing".into());
        });
        let (kept, ignored) = normalize(&sent);
        assert!(ignored.is_empty(), "{ignored:?}");
        assert_eq!(
            kept,
            given(|f| {
                f.author = Some("Stephen King".into());
                f.published_before = Some(1990);
                f.min_rating = Some(4.2);
                f.language = Some("missing".into());
            })
        );
    }

    #[test]
    fn years_in_the_users_words_become_inclusive_bounds() {
        let cases = [
            (
                given(|f| f.published_before = Some(1900)),
                (None, Some(1899)),
            ),
            (
                given(|f| f.published_after = Some(2010)),
                (Some(2011), None),
            ),
            (
                given(|f| f.published_in = Some(2005)),
                (Some(2005), Some(2005)),
            ),
            (
                given(|f| {
                    f.published_in = Some(2005);
                    f.published_after = Some(2000);
                }),
                (Some(2005), Some(2005)),
            ),
        ];
        for (filters, bounds) in cases {
            assert_eq!(filters.year_bounds(), bounds, "{filters:?}");
            assert!(filters.check_ranges().is_ok());
        }
        let crossed = given(|f| {
            f.published_after = Some(2010);
            f.published_before = Some(2011);
        });
        let err = crossed.check_ranges().expect_err("no year is between");
        assert_eq!(err.field.as_deref(), Some("published_after"));
    }

    #[test]
    fn an_empty_match_drops_the_filters_that_match_nothing_alone() {
        let filters = given(|f| {
            f.author = Some("Suzanne Collins".into());
            f.current_status = Some(StatusIs::WantToRead);
        });
        // (part, alone, without)
        let w = widen(&filters, &[(Part::Author, 3, 0), (Part::Status, 0, 3)]);
        assert_eq!(w.empty_alone, ["status want_to_read"]);
        assert_eq!(
            w.instead,
            Some(given(|f| f.author = Some("Suzanne Collins".into())))
        );
        assert_eq!(
            w.without,
            [
                ("author \"Suzanne Collins\"".to_string(), 0),
                ("status want_to_read".to_string(), 3)
            ]
        );
    }

    #[test]
    fn without_an_empty_part_the_least_widening_removal_is_suggested() {
        let filters = given(|f| {
            f.author = Some("Dan Brown".into());
            f.published_in = Some(1955);
        });
        let w = widen(&filters, &[(Part::Author, 6, 4), (Part::Years, 4, 6)]);
        assert!(w.empty_alone.is_empty());
        assert_eq!(w.instead, Some(filters.without(Part::Author)));
        let nothing = widen(&filters, &[(Part::Author, 6, 0), (Part::Years, 4, 0)]);
        assert_eq!(nothing.instead, None, "no single removal finds a book");
    }

    #[test]
    fn the_count_leads_the_found_sentence() {
        let cases = [
            (
                3,
                "author \"Suzanne Collins\"",
                "3 books match author \"Suzanne Collins\"",
            ),
            (1, "no language code", "1 book matches no language code"),
            (300, "", "300 books in the catalogue"),
            (
                0,
                "published before 1900",
                "0 books match published before 1900",
            ),
        ];
        for (total, described, sentence) in cases {
            assert_eq!(found_sentence(total, described), sentence);
        }
    }

    #[test]
    fn a_corrected_call_is_written_with_the_tools_argument_names() {
        let filters = given(|f| {
            f.author = Some("Orwell".into());
            f.published_before = Some(1950);
            f.min_rating = Some(4.0);
            f.language = Some("missing".into());
            f.current_status = Some(StatusIs::NoStatus);
            f.has_tag = Some("fav".into());
        });
        assert_eq!(
            Value::Object(filters.to_args()),
            json!({"author": "Orwell", "published_before": 1950, "min_rating": 4.0,
                   "language": "missing", "current_status": "no_status", "has_tag": "fav"})
        );
        assert_eq!(
            filters.describe(),
            "author \"Orwell\", published before 1950, rating 4 or higher, no language code, status no_status, tag \"fav\""
        );
    }

    #[test]
    fn a_write_never_filters_on_the_value_it_writes() {
        let tag: TagArgs = serde_json::from_value(
            json!({"language": "spa", "has_tag": "Spanish", "tag": "spanish"}),
        )
        .unwrap();
        let selection = tag_selection(&tag);
        assert_eq!(
            selection.filters,
            given(|f| f.language = Some("spa".into()))
        );
        assert_eq!(selection.ignored.len(), 1);
        let untag: TagArgs = serde_json::from_value(
            json!({"has_tag": "spanish", "tag": "spanish", "action": "remove"}),
        )
        .unwrap();
        assert!(
            tag_selection(&untag).ignored.is_empty(),
            "removing keeps the filter"
        );
        let status: SetStatusArgs = serde_json::from_value(
            json!({"author": "Rick Riordan", "current_status": "reading", "status": "reading"}),
        )
        .unwrap();
        let selection = status_selection(&status);
        assert_eq!(selection.filters.current_status, None);
        assert_eq!(selection.ignored.len(), 1);
    }
}
