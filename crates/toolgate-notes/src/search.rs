//! Full-text search over titles and bodies: BM25-ranked (FTS5 `bm25()`, titles weighted above
//! bodies), each hit a bounded snippet rather than the whole note. On PostgreSQL the same code
//! runs over a `tsvector` ranked by `ts_rank_cd` with the same weights: the statements that
//! differ, and where that ranking differs from BM25, are in [`crate::search_sql`].
//!
//! Guarantees: no user text can produce an FTS5 syntax error or reach FTS5 as an operator:
//! [`fts_query`] keeps only words and quotes each one, so `"`, `*`, `-`, `:`, `^`, `(`, `NEAR`,
//! `AND`, `OR` and `NOT` are searched as plain text or dropped; every word must match, and only
//! when no note has them all does the search fall back to any word (and says so); a hit never
//! carries more than a title cut to [`TITLE_MAX_CHARS`] and a snippet of a few short fragments
//! centred on where the words matched ([`crate::snippet`]); text of untrusted notes (clips, anything flagged untrusted) is returned only in the
//! untrusted list, never in the content; truncation is loud (`total_matches`, `next_offset`,
//! a note saying how to get more); ties rank newer notes first, so paging is deterministic.
//!
//! Two designs share this code ([`SearchDesign`]). `notes` (v1) returns snippets only and
//! takes `limit` and `response_format`. `notes-v2` ([`SearchArgsV2`]) was changed where the
//! embedded model failed its read tasks (evals/runs/notes-all-sampled-embedded): it asked for
//! `limit: 1` or a `kind` that excluded the note holding the answer, and read snippets that
//! stopped short of it. So v2 takes only the words, a kind and an offset; returns five hits;
//! gives the first hit of the first page its whole text (cut at [`WHOLE_TEXT_MAX_CHARS`]; an
//! untrusted note's only in the untrusted list); when a kind filter leaves nothing, shows the
//! notes of any kind that match (and says so), and when it hides matches of other kinds, says
//! how many; and ends with a next step naming the call that reads another hit.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::sql::{Dialect, Sql, SqlError, SqlValue};
use toolgate_core::{ToolError, ToolOutput, UntrustedText, sql_params};

use crate::rows::{self, Kind, NoteRow};
use crate::search_index::{PageRequest, SearchIndex};
use crate::search_sql;
use crate::snippet::{SnippetShape, centred_snippet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormat {
    #[default]
    Concise,
    Detailed,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Words to look for in titles and bodies, e.g. "design team budget". Plain words only: quotes, *, -, : and words such as NEAR or OR are searched as ordinary text.
    #[schemars(length(min = 1, max = 200))]
    pub query: String,
    /// Only notes of this kind, e.g. "meeting"; default any kind.
    pub kind: Option<Kind>,
    /// How many notes to return, 1-20; default 5.
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<u32>,
    /// How many matching notes to skip (for the next page); default 0.
    #[schemars(range(min = 0, max = 10000))]
    pub offset: Option<u32>,
    /// "concise" (default): id, title, date, notebook, kind and a short snippet. "detailed": also tags, due date, source URL and a longer snippet. Neither returns whole notes.
    pub response_format: Option<ResponseFormat>,
}

impl SearchArgs {
    /// A concise first page for `query`.
    pub fn query(query: &str) -> Self {
        SearchArgs {
            query: query.into(),
            kind: None,
            limit: None,
            offset: None,
            response_format: None,
        }
    }
}

/// `notes_search`'s arguments in the `notes-v2` design: no `limit`, no `response_format`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgsV2 {
    /// Words to look for in titles and bodies, e.g. "design team budget". Plain words only: quotes, *, -, : and words such as NEAR or OR are searched as ordinary text.
    #[schemars(length(min = 1, max = 200))]
    pub query: String,
    /// Only notes of this kind, e.g. "meeting"; default any kind. When no note of the kind matches, notes of any kind are shown.
    pub kind: Option<Kind>,
    /// How many matching notes to skip (for the next page); default 0.
    #[schemars(range(min = 0, max = 10000))]
    pub offset: Option<u32>,
}

/// What a search returns beyond its hits; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchDesign {
    /// `notes`: snippets only; a kind filter is applied as asked.
    Snippets,
    /// `notes-v2`: the best match's whole text, a kind filter that never hides every match.
    BestMatchWhole,
}

/// How a hit names its dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitDates {
    /// `notes` to `notes-v7`: the note's own date as `date`, then a to-do's `due`.
    Date,
    /// `notes-v8`: a to-do's `due` right after the title, the note's own date as `written`.
    /// On notes-v6's dev runs the embedded model answered "when is my expense report due?"
    /// with the to-do's `date` (the day it was written) in 3 runs of 3, the `due` beside it.
    DueFirst,
}

/// One search, in either design.
#[derive(Debug, Clone, Copy)]
struct Request<'a> {
    query: &'a str,
    kind: Option<Kind>,
    limit: u32,
    offset: u32,
    format: ResponseFormat,
    design: SearchDesign,
    dates: HitDates,
    /// The notebook's top-k index, when it has one ready.
    index: Option<&'a SearchIndex>,
}

/// The first hit of a `notes-v2` first page carries at most this much of its note's text
/// (the hand-written notes of the sample notebook are all shorter).
pub const WHOLE_TEXT_MAX_CHARS: usize = 1_500;

pub const DEFAULT_LIMIT: u32 = 5;
/// Titles in hits are cut to this many characters.
pub const TITLE_MAX_CHARS: usize = 100;
/// A concise snippet: two fragments of 12 words (about 30-40 model tokens).
pub const CONCISE_SNIPPET: SnippetShape = SnippetShape {
    fragments: 2,
    words: 12,
};
/// A detailed snippet: three fragments of 16 words.
pub const DETAILED_SNIPPET: SnippetShape = SnippetShape {
    fragments: 3,
    words: 16,
};
/// Words of a query that are searched; the rest are dropped (and the result says so).
pub const MAX_TERMS: usize = 12;

/// Words too common to narrow a search; dropped from a query that has other words.
const STOPWORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "by", "did", "do", "does",
    "for", "from", "had", "has", "have", "how", "i", "in", "is", "it", "its", "me", "my", "not",
    "of", "on", "or", "our", "the", "their", "them", "there", "this", "to", "was", "we", "were",
    "what", "when", "where", "which", "who", "why", "with", "you", "your",
];

/// A query made safe for FTS5 MATCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtsQuery {
    /// The words searched, lower-case, in order, without duplicates.
    pub terms: Vec<String>,
    /// Words of the query that were not searched (common words, or past [`MAX_TERMS`]).
    pub dropped: Vec<String>,
}

impl FtsQuery {
    /// Every word must match.
    pub fn all_words(&self) -> Option<String> {
        (!self.terms.is_empty()).then(|| self.quoted().join(" AND "))
    }

    /// Any word may match (BM25 still ranks notes with more of them first).
    pub fn any_word(&self) -> Option<String> {
        (!self.terms.is_empty()).then(|| self.quoted().join(" OR "))
    }

    fn quoted(&self) -> Vec<String> {
        self.terms
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
            .collect()
    }
}

/// Turns user text into FTS5 terms: words are runs of letters and digits (everything else
/// separates them, as FTS5's own tokenizer does), lower-cased, deduplicated; common words are
/// dropped unless nothing else is left; each term is later quoted, so it is never an operator.
pub fn fts_query(text: &str) -> FtsQuery {
    let mut words: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        let word = word.to_lowercase();
        if !word.is_empty() && !words.contains(&word) {
            words.push(word);
        }
    }
    let has_content_word = words.iter().any(|w| !STOPWORDS.contains(&w.as_str()));
    let mut terms = Vec::new();
    let mut dropped = Vec::new();
    for word in words {
        if (has_content_word && STOPWORDS.contains(&word.as_str())) || terms.len() >= MAX_TERMS {
            dropped.push(word);
        } else {
            terms.push(word);
        }
    }
    FtsQuery { terms, dropped }
}

/// The words of `text` the search matches on, as one query a person would type: lower-cased,
/// without duplicates, common words and punctuation, at most [`MAX_TERMS`]. Searching it finds
/// what searching `text` finds (the search drops the same words); `None` when no word is left.
pub fn keyword_query(text: &str) -> Option<String> {
    let terms = fts_query(text).terms;
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// Cuts `text` to at most `max` characters, marking the cut with an ellipsis.
pub fn cut_chars(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

struct Page {
    ids: Vec<i64>,
    total: i64,
}

fn page(
    conn: &dyn Sql,
    expr: &str,
    kind: Option<Kind>,
    limit: u32,
    offset: u32,
) -> Result<Page, ToolError> {
    let kind = kind.map(Kind::as_str);
    let rows = conn
        .query(
            &search_sql::page(conn.dialect()),
            sql_params![expr, kind, limit, offset],
        )
        .map_err(search_error)?
        .iter()
        .map(|r| Ok((r.i64(0)?, r.i64(1)?)))
        .collect::<Result<Vec<_>, SqlError>>()
        .map_err(search_error)?;
    let total = match rows.first() {
        Some((_, total)) => *total,
        None if offset > 0 => conn
            .query_i64(search_sql::count(conn.dialect()), sql_params![expr, kind])
            .map_err(search_error)?,
        None => 0,
    };
    Ok(Page {
        ids: rows.into_iter().map(|(id, _)| id).collect(),
        total,
    })
}

/// Where a search's pages come from: the notebook's top-k index ([`crate::search_index`]) when
/// it has one, caught up with every write and able to answer the query exactly; else the
/// database's own statement. The page is the same either way (the index ranks as FTS5 does), so
/// any failure of the index is answered by FTS5 rather than shown.
struct Pager<'a> {
    conn: &'a dyn Sql,
    index: Option<(&'a SearchIndex, Vec<String>)>,
}

impl<'a> Pager<'a> {
    fn new(conn: &'a dyn Sql, index: Option<&'a SearchIndex>, query: &FtsQuery) -> Self {
        let index = index
            .filter(|_| conn.dialect() == Dialect::Sqlite)
            .and_then(|index| {
                index.catch_up(conn).ok()?;
                Some((index, index.query_terms(&query.terms).ok()?))
            });
        Pager { conn, index }
    }

    /// One page of the matches of every word (`every`) or any word: `expr` for the database.
    fn page(
        &self,
        expr: &str,
        every: bool,
        kind: Option<Kind>,
        limit: u32,
        offset: u32,
    ) -> Result<Page, ToolError> {
        if let Some((index, terms)) = &self.index {
            let request = PageRequest {
                every,
                kind,
                limit,
                offset,
            };
            if let Ok(found) = index.page(terms, request)
                && let Ok(total) = i64::try_from(found.total)
            {
                return Ok(Page {
                    ids: found.ids,
                    total,
                });
            }
        }
        page(self.conn, expr, kind, limit, offset)
    }
}

/// A failed MATCH is our bug (the query is built to be valid), never the caller's.
fn search_error(e: SqlError) -> ToolError {
    match &e {
        SqlError::Failed { detail } if detail.contains("fts5") || detail.contains("tsquery") => {
            ToolError::internal("the search index refused a query it should have accepted")
        }
        _ => e.into(),
    }
}

/// The body of note `id` with the database's own matches of `expr` marked, cut into centred
/// fragments.
fn snippet(conn: &dyn Sql, expr: &str, id: i64, shape: SnippetShape) -> Result<String, ToolError> {
    let (sql, marks) = search_sql::highlight(conn.dialect());
    let mut params = vec![SqlValue::from(expr), SqlValue::from(id)];
    params.extend(marks.into_iter().map(SqlValue::from));
    let rows = conn.query(sql, &params).map_err(search_error)?;
    let Some(row) = rows.first() else {
        return Err(search_error(SqlError::Failed {
            detail: format!("note {id} of the page did not match when highlighted"),
        }));
    };
    let marked = row.opt_text(0).map_err(search_error)?;
    Ok(centred_snippet(&marked.unwrap_or_default(), shape))
}

/// What a hit shows of its note's text.
enum HitText {
    Snippet(String),
    /// The whole text, cut at [`WHOLE_TEXT_MAX_CHARS`].
    Whole(String),
}

fn hit(
    note: &NoteRow,
    text: HitText,
    (format, dates): (ResponseFormat, HitDates),
    untrusted: &mut Vec<UntrustedText>,
    sources: &mut Vec<String>,
) -> Value {
    let mut v = json!({
        "id": note.id,
        "title": cut_chars(&note.title, TITLE_MAX_CHARS),
    });
    match dates {
        HitDates::Date => {
            v["date"] = json!(note.created);
            v["notebook"] = json!(note.notebook);
            v["kind"] = json!(note.kind.as_str());
            if let Some(due) = &note.due {
                v["due"] = json!(due);
            }
        }
        HitDates::DueFirst => {
            if let Some(due) = &note.due {
                v["due"] = json!(due);
            }
            v["written"] = json!(note.created);
            v["notebook"] = json!(note.notebook);
            v["kind"] = json!(note.kind.as_str());
        }
    }
    if let Some(done) = note.done {
        v["done"] = json!(done);
    }
    if format == ResponseFormat::Detailed {
        v["tags"] = json!(note.tags());
        if let Some(meeting) = note.meeting_id {
            v["meeting_id"] = json!(meeting);
        }
        if let Some(url) = &note.source_url {
            v["source_url"] = json!(url);
        }
    }
    if note.untrusted {
        // The title and the text came from outside: neither goes into the content.
        let source = note.untrusted_source();
        if let Some(map) = v.as_object_mut() {
            map.remove("title");
        }
        v["untrusted"] = json!(true);
        v["text"] = json!(format!("see untrusted_content for note {}", note.id));
        let (HitText::Snippet(shown) | HitText::Whole(shown)) = &text;
        untrusted.push(UntrustedText {
            source,
            text: format!("{} — {shown}", cut_chars(&note.title, TITLE_MAX_CHARS)),
        });
        if let Some(url) = &note.source_url {
            sources.push(url.clone());
        }
    } else {
        match text {
            HitText::Snippet(snippet) => v["snippet"] = json!(snippet),
            HitText::Whole(whole) => v["text"] = json!(whole),
        }
    }
    v
}

/// Runs one search in the `notes` design; see the module documentation.
pub fn run_search(
    conn: &dyn Sql,
    index: Option<&SearchIndex>,
    args: &SearchArgs,
) -> Result<ToolOutput, ToolError> {
    search(
        conn,
        &Request {
            query: &args.query,
            kind: args.kind,
            limit: args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, 20),
            offset: args.offset.unwrap_or(0),
            format: args.response_format.unwrap_or_default(),
            design: SearchDesign::Snippets,
            dates: HitDates::Date,
            index,
        },
    )
}

/// Runs one search in the `notes-v2` design, its hits' dates named as `dates` says; see the
/// module documentation.
pub fn run_search_v2(
    conn: &dyn Sql,
    index: Option<&SearchIndex>,
    args: &SearchArgsV2,
    dates: HitDates,
) -> Result<ToolOutput, ToolError> {
    search(
        conn,
        &Request {
            query: &args.query,
            kind: args.kind,
            limit: DEFAULT_LIMIT,
            offset: args.offset.unwrap_or(0),
            format: ResponseFormat::Detailed,
            design: SearchDesign::BestMatchWhole,
            dates,
            index,
        },
    )
}

/// The two steps of a search, as its result names them.
const ALL_WORDS: &str = "all_words";
const ANY_WORD: &str = "any_word";

/// Which matches a search shows: the words it matched on, the kind it kept, its page.
struct Found {
    expr: String,
    mode: &'static str,
    /// The kind filter applied (`None` when none was asked, or when v2 dropped it because no
    /// note of that kind matched).
    kind: Option<Kind>,
    page: Page,
}

/// Every word first, then any word; in v2, a kind that leaves nothing is dropped at each step
/// before falling back further, since the words say more about the note than its kind.
fn find(
    pager: &Pager<'_>,
    query: &FtsQuery,
    (all, any): (String, String),
    request: &Request<'_>,
) -> Result<Found, ToolError> {
    let mut steps = vec![(all, ALL_WORDS)];
    if query.terms.len() > 1 {
        steps.push((any, ANY_WORD));
    }
    let relax = request.design == SearchDesign::BestMatchWhole && request.kind.is_some();
    let mut last = None;
    for (expr, mode) in steps {
        let every = mode == ALL_WORDS;
        let page_of = |kind| pager.page(&expr, every, kind, request.limit, request.offset);
        let filtered = page_of(request.kind)?;
        if filtered.total > 0 {
            return Ok(Found {
                kind: request.kind,
                page: filtered,
                expr,
                mode,
            });
        }
        if relax {
            let any_kind = page_of(None)?;
            if any_kind.total > 0 {
                return Ok(Found {
                    kind: None,
                    page: any_kind,
                    expr,
                    mode,
                });
            }
        }
        last = Some(Found {
            kind: request.kind,
            page: filtered,
            expr,
            mode,
        });
    }
    last.ok_or_else(|| ToolError::internal("a search with words ran no step"))
}

fn search(conn: &dyn Sql, request: &Request<'_>) -> Result<ToolOutput, ToolError> {
    let query = fts_query(request.query);
    let offset = request.offset;
    let dialect = conn.dialect();
    let (Some(all), Some(any)) = (
        search_sql::expression(&query, true, dialect),
        search_sql::expression(&query, false, dialect),
    ) else {
        return Ok(ToolOutput::new(json!({
            "total_matches": 0,
            "offset": offset,
            "hits": [],
            "note": "the query has no words to search for; use words that appear in the notes, e.g. \"design team budget\"",
        })));
    };
    let pager = Pager::new(conn, request.index, &query);
    let found = find(&pager, &query, (all, any), request)?;
    let (expr, mode) = (found.expr.as_str(), found.mode);
    let shape = match request.format {
        ResponseFormat::Concise => CONCISE_SNIPPET,
        ResponseFormat::Detailed => DETAILED_SNIPPET,
    };
    let whole_first = request.design == SearchDesign::BestMatchWhole && offset == 0;
    let mut untrusted = Vec::new();
    let mut sources = Vec::new();
    let mut hits = Vec::with_capacity(found.page.ids.len());
    for id in &found.page.ids {
        let Some(note) = rows::by_id(conn, *id)? else {
            continue;
        };
        let text = if whole_first && hits.is_empty() {
            HitText::Whole(cut_chars(&note.body, WHOLE_TEXT_MAX_CHARS))
        } else {
            HitText::Snippet(snippet(conn, expr, *id, shape)?)
        };
        hits.push(hit(
            &note,
            text,
            (request.format, request.dates),
            &mut untrusted,
            &mut sources,
        ));
    }
    let total = found.page.total;
    let shown_to = i64::from(offset) + hits.len() as i64;
    let mut content = json!({
        "match": mode,
        "total_matches": total,
        "offset": offset,
        "hits": hits,
    });
    let mut notes: Vec<String> = Vec::new();
    if let (Some(asked), None) = (request.kind, found.kind)
        && total > 0
    {
        notes.push(format!(
            "no note of kind {} matches; these are notes of any kind",
            asked.as_str()
        ));
    }
    if mode == ANY_WORD && total > 0 {
        notes.push(format!(
            "no note contains every word of \"{}\"; these contain some of them, best first",
            query.terms.join(" ")
        ));
    }
    if shown_to < total {
        content["next_offset"] = json!(shown_to);
        notes.push(format!(
            "showing {} of {total} matches; {} more: call again with offset {shown_to}, or add words to narrow",
            hits.len(),
            total - shown_to
        ));
    } else if total == 0 {
        let filter = if request.kind.is_some() {
            ", or drop the kind filter"
        } else {
            ""
        };
        notes.push(format!(
            "no note matches \"{}\"; try fewer or different words (a person, project or place), or check the spelling{filter}",
            query.terms.join(" ")
        ));
    } else if offset > 0 && hits.is_empty() {
        notes.push(format!(
            "offset {offset} is past the last of {total} matches; start again at offset 0"
        ));
    }
    if !query.dropped.is_empty() {
        notes.push(format!(
            "not searched: {} (too common, or past {MAX_TERMS} words)",
            query.dropped.join(", ")
        ));
    }
    if request.design == SearchDesign::BestMatchWhole {
        if found.kind.is_some() && total > 0 {
            let any_kind = pager.page(expr, mode == ALL_WORDS, None, 1, 0)?.total;
            if any_kind > total {
                notes.push(format!(
                    "{} more notes of other kinds also match; search without kind to see them",
                    any_kind - total
                ));
            }
        }
        if whole_first && !hits.is_empty() {
            content["next_step"] = json!(
                "the first hit's whole text is above: if it answers the question, answer from it; to read another hit whole, call notes_get with its id"
            );
        }
    }
    if !notes.is_empty() {
        content["note"] = json!(notes.join("; "));
    }
    Ok(ToolOutput {
        content,
        untrusted,
        sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keyword_query_searches_exactly_what_the_message_searches() {
        let cases = [
            (
                "Who attended the platform team sync about the database migration? List everyone except me.",
                Some("attended platform team sync database migration list everyone except"),
            ),
            (
                "Tag every design team meeting note with q1-design.",
                Some("tag every design team meeting note q1"),
            ),
            (
                "budget\" OR kind:clip NEAR(\"x\") *",
                Some("budget kind clip near x"),
            ),
            ("what is it", Some("what is it")),
            ("?!  --", None),
            ("", None),
        ];
        for (message, keywords) in cases {
            let query = keyword_query(message);
            assert_eq!(query.as_deref(), keywords, "{message}");
            if let Some(query) = query {
                assert_eq!(
                    fts_query(&query).terms,
                    fts_query(message).terms,
                    "{message}"
                );
            }
        }
    }

    #[test]
    fn fts_query_table_prevents_syntax_errors_and_operator_injection() {
        // (case, input, terms searched, all-words expression)
        let cases: [(&str, &str, &[&str], Option<&str>); 10] = [
            (
                "plain words are ANDed",
                "design team budget",
                &["design", "team", "budget"],
                Some(r#""design" AND "team" AND "budget""#),
            ),
            (
                "a double quote cannot open a phrase",
                r#"budget "settled"#,
                &["budget", "settled"],
                Some(r#""budget" AND "settled""#),
            ),
            (
                "a star cannot make a prefix query",
                "budg*",
                &["budg"],
                Some(r#""budg""#),
            ),
            (
                "NEAR and OR are searched as words",
                "design NEAR budget OR x",
                &["design", "near", "budget", "x"],
                Some(r#""design" AND "near" AND "budget" AND "x""#),
            ),
            (
                "a minus cannot exclude and a colon cannot pick a column",
                "-title:budget",
                &["title", "budget"],
                Some(r#""title" AND "budget""#),
            ),
            (
                "punctuation alone searches nothing",
                r#""*-:^()"#,
                &[],
                None,
            ),
            (
                "common words are dropped when other words remain",
                "What budget did we settle on?",
                &["budget", "settle"],
                Some(r#""budget" AND "settle""#),
            ),
            (
                "common words are kept when nothing else is left",
                "the",
                &["the"],
                Some(r#""the""#),
            ),
            (
                "repeated words are searched once, case-insensitively",
                "Budget budget BUDGET",
                &["budget"],
                Some(r#""budget""#),
            ),
            (
                "non-ASCII letters are words",
                "café Zürich",
                &["café", "zürich"],
                Some(r#""café" AND "zürich""#),
            ),
        ];
        for (name, input, terms, all) in cases {
            let q = fts_query(input);
            assert_eq!(q.terms, terms, "{name}");
            assert_eq!(q.all_words().as_deref(), all, "{name}");
        }
    }

    #[test]
    fn long_queries_are_capped_and_say_what_was_dropped() {
        let text: Vec<String> = (0..20).map(|i| format!("w{i}")).collect();
        let q = fts_query(&text.join(" "));
        assert_eq!(q.terms.len(), MAX_TERMS);
        assert_eq!(q.dropped.len(), 20 - MAX_TERMS);
    }

    #[test]
    fn cut_chars_table_keeps_short_text_and_marks_cuts() {
        for (text, max, want) in [
            ("short", 10, "short"),
            ("  padded  ", 10, "padded"),
            ("abcdefghij", 5, "abcd…"),
            ("ééééé", 3, "éé…"),
        ] {
            assert_eq!(cut_chars(text, max), want, "{text}");
        }
    }
}
