//! Tool search: a `tool_search` tool that finds other tools by what they do, for runs that
//! offer more tools than a model should read on every turn (the loop sends a small standing
//! set plus this tool, and appends the definitions a search finds; see `toolgate-agent`).
//!
//! Guarantees: the index is SQLite FTS5 (BM25, Porter stemming) over each tool's name and
//! rendered description, built once when the tool is declared; ranking is by BM25 with the name
//! weighted above the description, ties broken by name, so the same query over the same
//! catalogue always gives the same list; a search returns only tools the calling principal may
//! call (the same [`Principal::may_see`] question the registry's listing asks) and the run's
//! phases let it reach now (the dispatcher's [`run_catalogue`](crate::Dispatcher::run_catalogue)), never
//! `tool_search` itself, and at most [`MAX_LIMIT`] of them. `tool_search` is an ordinary low-risk
//! read tool: it is reached only through the dispatcher, like every call.
//!
//! Refuses: a catalogue that already has a tool named `tool_search` ([`ToolSearchError::NameTaken`]);
//! a query with no searchable word (an `invalid_argument` the model can act on). A search that
//! matches nothing is not an error: the result says so and suggests other words.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, params};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ToolError;
use crate::principal::Principal;
use crate::registry::{Registry, RegistryError};
use crate::spec::{Effect, Risk, ToolSpec};
use crate::tool::{DeclarationError, Tool, ToolBuilder, ToolOutput};

/// The search tool's name.
pub const TOOL_SEARCH: &str = "tool_search";
/// Matches returned when the model does not say how many.
pub const DEFAULT_LIMIT: usize = 5;
/// The most matches one search returns.
pub const MAX_LIMIT: usize = 10;
/// BM25 weights of the indexed columns (name, description): a word in the name counts more.
const NAME_WEIGHT: f64 = 3.0;
const DESCRIPTION_WEIGHT: f64 = 1.0;

/// Why a search tool could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolSearchError {
    #[error(
        "the catalogue already has a tool named `{TOOL_SEARCH}`; rename it, the search tool needs the name"
    )]
    NameTaken,
    #[error("cannot build the tool search index in SQLite: {0}")]
    Index(#[from] rusqlite::Error),
    #[error(transparent)]
    Declaration(#[from] DeclarationError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// What the search tool's index keeps about one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: String,
    /// What it does, the first part of its description: what a search result shows.
    does: String,
    scopes: Vec<String>,
}

/// An FTS5 index over tool names and descriptions, in an in-memory SQLite database.
pub struct ToolIndex {
    conn: Mutex<Connection>,
    entries: Vec<Entry>,
}

impl std::fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolIndex")
            .field("tools", &self.entries.len())
            .finish_non_exhaustive()
    }
}

/// One match: a tool the caller may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub name: String,
    pub does: String,
}

impl ToolIndex {
    /// Indexes `specs` (a spec named `tool_search` is left out).
    pub fn new<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> Result<Self, ToolSearchError> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(
            "CREATE VIRTUAL TABLE tools USING fts5(name, description, tokenize = 'porter unicode61');",
        )?;
        let mut entries = Vec::new();
        {
            let mut insert =
                conn.prepare("INSERT INTO tools (rowid, name, description) VALUES (?1, ?2, ?3)")?;
            for spec in specs.into_iter().filter(|s| s.name != TOOL_SEARCH) {
                let rowid = i64::try_from(entries.len()).unwrap_or(i64::MAX);
                insert.execute(params![rowid, spec.name, spec.rendered_description()])?;
                entries.push(Entry {
                    name: spec.name.clone(),
                    does: spec.description.does.trim().to_string(),
                    scopes: spec.policy.scopes.clone(),
                });
            }
        }
        Ok(ToolIndex {
            conn: Mutex::new(conn),
            entries,
        })
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The best `limit` matches for `query` among the tools `principal` may call, best first.
    pub fn search(
        &self,
        principal: &Principal,
        query: &str,
        limit: usize,
    ) -> Result<Vec<Hit>, ToolError> {
        self.search_open(principal, query, limit, |_| true)
    }

    /// [`Self::search`] among the tools `open` also admits (those the run's phases let it
    /// reach now), so a search never offers what the dispatcher would refuse.
    pub fn search_open(
        &self,
        principal: &Principal,
        query: &str,
        limit: usize,
        open: impl Fn(&str) -> bool,
    ) -> Result<Vec<Hit>, ToolError> {
        let Some(expression) = match_expression(query) else {
            return Err(
                ToolError::invalid("query", "the query has no word to search for")
                    .with_received(json!(query))
                    .with_example(json!({"query": "send an email"}))
                    .with_hint("describe what the tool should do, in a few words"),
            );
        };
        let ranked = {
            let conn = self
                .conn
                .lock()
                .map_err(|_| ToolError::internal("the tool index is unusable after a panic"))?;
            ranked_rows(&conn, &expression).map_err(|e| {
                ToolError::internal(format!("the tool index could not be read: {e}"))
            })?
        };
        let visible: Vec<usize> = ranked
            .into_iter()
            .filter_map(|row| usize::try_from(row).ok())
            .filter(|&row| {
                self.entries
                    .get(row)
                    .is_some_and(|e| principal.may_see(&e.name, &e.scopes) && open(&e.name))
            })
            .collect();
        Ok(first_distinct(visible, limit.clamp(1, MAX_LIMIT))
            .into_iter()
            .filter_map(|row| self.entries.get(row))
            .map(|e| Hit {
                name: e.name.clone(),
                does: e.does.clone(),
            })
            .collect())
    }
}

/// Row ids of every match, best first (BM25, name weighted; ties by name).
fn ranked_rows(conn: &Connection, expression: &str) -> Result<Vec<i64>, rusqlite::Error> {
    let mut statement = conn.prepare_cached(
        "SELECT rowid FROM tools WHERE tools MATCH ?1 ORDER BY bm25(tools, ?2, ?3), name",
    )?;
    let rows = statement
        .query_map(params![expression, NAME_WEIGHT, DESCRIPTION_WEIGHT], |r| {
            r.get(0)
        })?
        .collect::<Result<Vec<i64>, _>>()?;
    Ok(rows)
}

/// Words too common to say anything about which tool fits.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how", "i", "in",
    "is", "it", "me", "my", "of", "on", "or", "please", "some", "that", "the", "this", "to",
    "tool", "tools", "want", "what", "which", "with", "you", "your",
];

/// The words of a query worth matching: lower-case runs of letters and digits (so `_`, `-` and
/// punctuation separate words, as the index's tokenizer does), stopwords and one-letter words
/// dropped, each kept once in order of first appearance.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    query
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() > 1 && !STOPWORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

/// The FTS5 expression for a query: any of its terms (each quoted, so no word is read as FTS5
/// syntax), `None` when it has no term. BM25 then ranks tools matching more and rarer terms
/// first.
pub fn match_expression(query: &str) -> Option<String> {
    let terms = query_terms(query);
    if terms.is_empty() {
        return None;
    }
    Some(
        terms
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "")))
            .collect::<Vec<_>>()
            .join(" OR "),
    )
}

/// The first `limit` items, each once, in order.
fn first_distinct(items: Vec<usize>, limit: usize) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    items
        .into_iter()
        .filter(|i| seen.insert(*i))
        .take(limit)
        .collect()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// What the tool you need should do, in a few words, e.g. "send an email".
    #[schemars(length(min = 1, max = 200))]
    query: String,
    /// How many tools to find, 1 to 10; default 5.
    #[schemars(range(min = 1, max = 10))]
    limit: Option<u8>,
}

/// The `tool_search` tool over `specs` (every tool it may find; each search still keeps only
/// those the caller may call).
pub fn tool_search_tool<'a>(
    specs: impl IntoIterator<Item = &'a ToolSpec>,
) -> Result<Tool, ToolSearchError> {
    let index = Arc::new(ToolIndex::new(specs)?);
    let tool = ToolBuilder::<SearchArgs>::new(TOOL_SEARCH, 1)
        .describe(
            "Finds tools by what they do and adds the best matches to your tool list.",
            "the task needs a tool that is not in your tool list yet: search for it with a few words saying what it should do, then call the tool it finds.",
            Some("a tool already in your list fits the task: call that tool directly."),
            "the names and purposes of up to `limit` matching tools, best first; their full definitions are in your tool list from the next turn on.",
        )
        .example("find a tool", json!({"query": "send an email"}))
        .policy(
            Risk::Low,
            Effect::Read,
            "It only reads the names and descriptions of tools the caller may already call.",
        )
        .parallel_safe()
        .more_hint("ask for fewer tools with `limit`")
        .read(move |ctx, args: SearchArgs| {
            let index = Arc::clone(&index);
            async move {
                let limit = args.limit.map_or(DEFAULT_LIMIT, usize::from);
                let hits = index.search_open(&ctx.principal, &args.query, limit, |name| {
                    ctx.tools.open_in_run(name)
                })?;
                Ok(ToolOutput::new(search_result(&args.query, &hits)))
            }
        })?;
    Ok(tool)
}

/// What the model reads after a search: the matches, and what to do next.
pub fn search_result(query: &str, hits: &[Hit]) -> Value {
    let tools: Vec<Value> = hits
        .iter()
        .map(|h| json!({"name": h.name, "does": h.does}))
        .collect();
    let next = if hits.is_empty() {
        "No tool matches. Search again with other words (what the tool should do, not the task's details)."
    } else {
        "These tools are now in your tool list: call the one that fits the task."
    };
    json!({"query": query, "tools": tools, "next": next})
}

/// The tool names a `tool_search` result lists, in order (empty for anything else).
pub fn names_in_result(content: &Value) -> Vec<String> {
    content["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A registry of `tools` plus a `tool_search` that finds any of them.
pub fn registry_with_search(tools: Vec<Tool>) -> Result<Registry, ToolSearchError> {
    if tools.iter().any(|t| t.spec.name == TOOL_SEARCH) {
        return Err(ToolSearchError::NameTaken);
    }
    let search = tool_search_tool(tools.iter().map(|t| &t.spec))?;
    Ok(Registry::new(tools.into_iter().chain([search]))?)
}

#[cfg(test)]
#[path = "tool_search_tests.rs"]
mod tests;
