//! A top-k index beside the notebook: `notes_search`'s page of matches (every word or any word,
//! optionally of one kind) ranked exactly as FTS5 ranks it, without FTS5's cost of reading every
//! match's positions to score it (issue 39: FTS5 scores every match, about 0.7 µs each, so a
//! search of a common word grows with the notebook).
//!
//! What it holds: one tantivy document per note: its FTS5 terms ([`Fts5Terms`], the notebook's
//! own tokenizer), each title term [`TITLE_REPEATS`] times so a term's frequency in the document
//! is FTS5's weighted frequency (`bm25(notes_fts, 8.0, 1.0)`), and as fast fields the note's id,
//! kind, date and number of tokens (FTS5's row length; tantivy's own field norms are lossy and
//! count the repeats, so they are off).
//!
//! How it ranks: it walks the posting lists of the query's terms itself (intersection or union),
//! counts every live match of the kind asked (the exact total `notes_search` reports), and
//! scores a match with [`Bm25Query`] (FTS5's arithmetic, bit for bit) only when the best score
//! its terms allow could still enter the page; ties go to the newer note, then the higher id,
//! as in [`crate::search_sql::page`]. The table's statistics (rows, tokens, rows holding each
//! term) are counted over live documents only, so deleted notes weigh nothing: a segment's
//! documents never change, so its rows and tokens are counted once, less its deleted documents
//! (listed again when their number changes), and a term's rows are its document frequency less
//! the deleted documents its postings hold. Why not
//! tantivy's collectors: its BM25 sums per field, uses another IDF and quantized lengths, so its
//! top documents are not FTS5's; its posting lists and fast columns are what is reused.
//!
//! Guarantees: the same ids in the same order and the same total as the FTS5 statement on the
//! same notes (test `tests/search_index.rs` on a 10k notebook for the query mix). Refuses, with
//! [`IndexError::Unsupported`], a query it cannot answer exactly (a word FTS5 tokenizes into
//! other than one term, a term FTS5 cut short, or one longer than tantivy indexes), so the
//! caller searches FTS5 instead; never answers from a guess.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

use tantivy::columnar::{Cardinality, Column, ColumnValues};
use tantivy::index::{SegmentId, SegmentReader};
use tantivy::postings::{Postings, SegmentPostings};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{MAX_TOKEN_LEN, PreTokenizedString, Token};
use tantivy::{
    DocId, DocSet, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TERMINATED,
    TantivyDocument, Term,
};
use toolgate_core::sql::{Sql, SqlError, SqlRow};
use toolgate_core::sql_params;

use crate::bm25::{Bm25Query, TableStats};
use crate::fts5_terms::{Fts5Terms, RowTerms, may_be_cut};
use crate::rows::Kind;

/// A title term is indexed this many times: FTS5's title weight as whole instances (a test
/// keeps it equal to [`crate::search_sql::TITLE_WEIGHT`]).
pub const TITLE_REPEATS: u32 = 8;

/// Changes a catch-up applies on a search's path (a few hundred milliseconds of tokenizing);
/// an index further behind, after a reset or a large import, is rebuilt on a thread instead
/// while FTS5 answers.
pub const MAX_CATCH_UP_CHANGES: i64 = 5_000;

/// The building writer's memory before it flushes a segment.
const BUILD_BUDGET_BYTES: usize = 200_000_000;
/// The catch-up writer's (a few notes at a time; tantivy's floor is 15 MB a thread).
const CATCH_UP_BUDGET_BYTES: usize = 20_000_000;
/// Notes tokenized per round trip through the scratch FTS5 table.
const BUILD_BATCH: usize = 1_000;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("the search index failed: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("reading the search index failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the search index's tokenizer failed: {0}")]
    Tokenizer(#[from] rusqlite::Error),
    #[error("reading the notebook for the search index failed: {0}")]
    Read(SqlError),
    /// The index on disk is not this notebook's as it is now: rebuild it.
    #[error("the search index is stale: {0}")]
    Stale(String),
    /// A note the index cannot hold as the notebook does (a kind or a date out of the schema).
    #[error("note {id} cannot be indexed: {why}")]
    Note { id: i64, why: String },
    /// The index lacks a value every document has (a damaged index): search FTS5 instead.
    #[error("the search index is damaged: {0}")]
    Damaged(String),
    /// A query the index cannot answer exactly: search FTS5 instead.
    #[error("the search index cannot answer this query exactly: {0}")]
    Unsupported(String),
    #[error("the search index's tokenizer lock was poisoned by an earlier panic")]
    Poisoned,
}

/// The fields of a note's document.
#[derive(Debug, Clone, Copy)]
struct Fields {
    terms: Field,
    id: Field,
    kind: Field,
    created: Field,
    tokens: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let terms = builder.add_text_field(
        "terms",
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_index_option(IndexRecordOption::WithFreqs)
                .set_fieldnorms(false),
        ),
    );
    let id = builder.add_u64_field("id", INDEXED | FAST);
    let kind = builder.add_u64_field("kind", FAST);
    let created = builder.add_u64_field("created", FAST);
    let tokens = builder.add_u64_field("tokens", FAST);
    (
        builder.build(),
        Fields {
            terms,
            id,
            kind,
            created,
            tokens,
        },
    )
}

/// A kind as the index stores it.
fn kind_code(kind: Kind) -> u64 {
    match kind {
        Kind::Note => 0,
        Kind::Todo => 1,
        Kind::Meeting => 2,
        Kind::Clip => 3,
    }
}

/// A `YYYY-MM-DD` date as a number that sorts as the text does (`2025-11-28` is 20251128);
/// `None` for anything else.
pub fn date_number(date: &str) -> Option<u64> {
    let bytes = date.as_bytes();
    let shaped = bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit());
    if !shaped {
        return None;
    }
    date.bytes()
        .filter(u8::is_ascii_digit)
        .try_fold(0u64, |n, b| Some(n * 10 + u64::from(b - b'0')))
}

/// A note's document: its terms (title terms repeated), id, kind, date and token count.
fn document(fields: Fields, id: u64, terms: &RowTerms, kind: u64, created: u64) -> TantivyDocument {
    let title = terms
        .title
        .iter()
        .flat_map(|t| std::iter::repeat_n(t, TITLE_REPEATS as usize));
    let tokens: Vec<Token> = title
        .chain(terms.body.iter())
        .enumerate()
        .map(|(position, text)| Token {
            offset_from: 0,
            offset_to: 0,
            position,
            text: text.clone(),
            position_length: 1,
        })
        .collect();
    let mut doc = TantivyDocument::default();
    doc.add_pre_tokenized_text(
        fields.terms,
        PreTokenizedString {
            text: String::new(),
            tokens,
        },
    );
    doc.add_u64(fields.id, id);
    doc.add_u64(fields.kind, kind);
    doc.add_u64(fields.created, created);
    doc.add_u64(fields.tokens, (terms.title.len() + terms.body.len()) as u64);
    doc
}

/// One page of matches, as [`crate::search_sql::page`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexPage {
    pub ids: Vec<i64>,
    /// Every match of the kind asked, not only the page's.
    pub total: u64,
}

/// What a page asks for.
#[derive(Debug, Clone, Copy)]
pub struct PageRequest {
    /// Every term must match (else any term).
    pub every: bool,
    pub kind: Option<Kind>,
    pub limit: u32,
    pub offset: u32,
}

/// The index of one notebook.
pub struct SearchIndex {
    reader: IndexReader,
    fields: Fields,
    /// Tokenizes query words as the notebook does; a connection is not shared between threads.
    tokenizer: Mutex<Fts5Terms>,
    /// What each segment holds, counted once per segment (and per count of its deletes).
    facts: Mutex<HashMap<SegmentId, SegmentFacts>>,
    /// The writer that applies changes, and the last change applied.
    writer: Mutex<Applied>,
    /// Pages answered (so a caller that falls back to FTS5 on any failure can be shown not to).
    served: AtomicU64,
    /// Set when a catch-up refused to run on a search's path ([`Self::is_stale`]).
    stale: AtomicBool,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("applied", &self.applied().ok())
            .finish_non_exhaustive()
    }
}

/// The catch-up writer and how far it got; one lock, so two catch-ups never interleave.
struct Applied {
    writer: IndexWriter<TantivyDocument>,
    seq: i64,
    notebook: String,
}

/// The notebook's change log's last position (0 when empty).
fn latest_change(conn: &dyn Sql) -> Result<i64, IndexError> {
    conn.query_i64(
        "SELECT coalesce(max(seq), 0) FROM notes_search_changes",
        &[],
    )
    .map_err(IndexError::Read)
}

/// Commits what `writer` holds, recording the notebook and its change log's position.
fn commit(
    writer: &mut IndexWriter<TantivyDocument>,
    notebook: &str,
    seq: i64,
) -> Result<(), IndexError> {
    let mut prepared = writer.prepare_commit()?;
    prepared.set_payload(&format!("{notebook} {seq}"));
    prepared.commit()?;
    Ok(())
}

/// The notebook and position the index's last commit recorded.
fn payload(index: &Index) -> Result<(String, i64), IndexError> {
    let payload = index.load_metas()?.payload.unwrap_or_default();
    payload
        .split_once(' ')
        .and_then(|(notebook, seq)| Some((notebook.to_string(), seq.parse().ok()?)))
        .ok_or_else(|| {
            IndexError::Stale(format!(
                "its last commit says {payload:?}, not a notebook and a position"
            ))
        })
}

impl SearchIndex {
    /// Indexes every note of the notebook `conn` holds, in memory (`dir` None) or in the empty
    /// folder `dir`, as one segment, for the notebook named `notebook` (its
    /// `search_index_id`). The change log's position is read first, so a note written while
    /// the build reads is indexed again by the next [`Self::catch_up`], never missed.
    pub fn build(conn: &dyn Sql, dir: Option<&Path>, notebook: &str) -> Result<Self, IndexError> {
        Self::build_counting(conn, dir, notebook, &AtomicU64::new(0))
    }

    /// [`Self::build`], adding to `indexed` the notes indexed as it goes (for progress).
    pub fn build_counting(
        conn: &dyn Sql,
        dir: Option<&Path>,
        notebook: &str,
        indexed: &AtomicU64,
    ) -> Result<Self, IndexError> {
        let (schema, fields) = schema();
        let index = match dir {
            Some(dir) => Index::create_in_dir(dir, schema)?,
            None => Index::create_in_ram(schema),
        };
        let seq = latest_change(conn)?;
        let tokenizer = Fts5Terms::new()?;
        let mut writer: IndexWriter<TantivyDocument> =
            index.writer_with_num_threads(1, BUILD_BUDGET_BYTES)?;
        let mut after = 0i64;
        loop {
            let rows = conn
                .query(
                    "SELECT id, title, body, kind, created FROM notes WHERE id > ?1 ORDER BY id LIMIT ?2",
                    sql_params![after, BUILD_BATCH as i64],
                )
                .map_err(IndexError::Read)?;
            let Some(last) = rows.last() else {
                break;
            };
            after = last.i64(0).map_err(IndexError::Read)?;
            add_rows(&writer, fields, &tokenizer, &rows)?;
            indexed.fetch_add(rows.len() as u64, AtomicOrdering::Relaxed);
        }
        commit(&mut writer, notebook, seq)?;
        let segments = index.searchable_segment_ids()?;
        if segments.len() > 1 {
            writer.merge(&segments).wait()?;
        }
        writer.wait_merging_threads()?;
        Self::ready(index, fields, tokenizer, notebook, seq)
    }

    /// Opens the index in `dir` that [`Self::build`] made for the notebook `notebook`; refused
    /// ([`IndexError::Stale`]) when it was made for another notebook or with another schema.
    pub fn open(dir: &Path, notebook: &str) -> Result<Self, IndexError> {
        let index = Index::open_in_dir(dir)?;
        let (expected, fields) = schema();
        if index.schema() != expected {
            return Err(IndexError::Stale("its schema is another version's".into()));
        }
        let (of, seq) = payload(&index)?;
        if of != notebook {
            return Err(IndexError::Stale(format!(
                "it was built for notebook {of}, not {notebook}"
            )));
        }
        Self::ready(index, fields, Fts5Terms::new()?, notebook, seq)
    }

    fn ready(
        index: Index,
        fields: Fields,
        tokenizer: Fts5Terms,
        notebook: &str,
        seq: i64,
    ) -> Result<Self, IndexError> {
        let writer = index.writer_with_num_threads(1, CATCH_UP_BUDGET_BYTES)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(SearchIndex {
            reader,
            fields,
            tokenizer: Mutex::new(tokenizer),
            facts: Mutex::new(HashMap::new()),
            writer: Mutex::new(Applied {
                writer,
                seq,
                notebook: notebook.to_string(),
            }),
            served: AtomicU64::new(0),
            stale: AtomicBool::new(false),
        })
    }

    /// Whether a catch-up found the index too far behind (or ahead of) the notebook to be
    /// brought up to date on a search's path: it is to be rebuilt.
    pub fn is_stale(&self) -> bool {
        self.stale.load(AtomicOrdering::Relaxed)
    }

    /// How many pages the index has answered.
    pub fn pages_served(&self) -> u64 {
        self.served.load(AtomicOrdering::Relaxed)
    }

    /// The last change of the notebook the index holds.
    pub fn applied(&self) -> Result<i64, IndexError> {
        Ok(self.writer.lock().map_err(|_| IndexError::Poisoned)?.seq)
    }

    /// Applies the notebook's changes since the index's last one (notes written, changed or
    /// deleted through any connection, recorded by the notebook's triggers): each changed note
    /// is deleted from the index and, when it still exists, added again as it is now; then the
    /// index commits with the new position and the searcher reloads. Nothing to do costs one
    /// read of the log's last position. Refused ([`IndexError::Stale`]) when the log is behind
    /// the index (another notebook file, or one restored from a copy): rebuild it.
    pub fn catch_up(&self, conn: &dyn Sql) -> Result<(), IndexError> {
        let latest = latest_change(conn)?;
        let mut applied = self.writer.lock().map_err(|_| IndexError::Poisoned)?;
        if latest == applied.seq {
            return Ok(());
        }
        if latest < applied.seq {
            self.stale.store(true, AtomicOrdering::Relaxed);
            return Err(IndexError::Stale(format!(
                "the notebook's change log ends at {latest}, before the index's {}",
                applied.seq
            )));
        }
        if latest - applied.seq > MAX_CATCH_UP_CHANGES {
            // Not on a search's path: the owner rebuilds it on a thread of its own.
            self.stale.store(true, AtomicOrdering::Relaxed);
            return Err(IndexError::Stale(format!(
                "{} changes since the index's last one, more than a search waits for",
                latest - applied.seq
            )));
        }
        let changed = conn
            .query(
                "SELECT DISTINCT note FROM notes_search_changes WHERE seq > ?1 AND seq <= ?2",
                sql_params![applied.seq, latest],
            )
            .map_err(IndexError::Read)?
            .iter()
            .map(|row| row.i64(0))
            .collect::<Result<Vec<i64>, _>>()
            .map_err(IndexError::Read)?;
        let tokenizer = self.tokenizer.lock().map_err(|_| IndexError::Poisoned)?;
        for chunk in changed.chunks(BUILD_BATCH) {
            for id in chunk {
                let id = u64::try_from(*id).map_err(|_| IndexError::Note {
                    id: *id,
                    why: "its id is negative".into(),
                })?;
                applied
                    .writer
                    .delete_term(Term::from_field_u64(self.fields.id, id));
            }
            let ids =
                serde_json::to_string(chunk).map_err(|e| IndexError::Damaged(e.to_string()))?;
            let rows = conn
                .query(
                    "SELECT id, title, body, kind, created FROM notes
                     WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id",
                    sql_params![ids],
                )
                .map_err(IndexError::Read)?;
            add_rows(&applied.writer, self.fields, &tokenizer, &rows)?;
        }
        let notebook = applied.notebook.clone();
        commit(&mut applied.writer, &notebook, latest)?;
        applied.seq = latest;
        self.reader.reload()?;
        Ok(())
    }

    /// The index's terms for the query's words, one per word in order; refused when a word is
    /// not exactly one term (FTS5 would search it as a phrase).
    pub fn query_terms(&self, words: &[String]) -> Result<Vec<String>, IndexError> {
        let tokenizer = self.tokenizer.lock().map_err(|_| IndexError::Poisoned)?;
        let rows: Vec<(i64, &str, &str)> = words
            .iter()
            .zip(1..)
            .map(|(word, row)| (row, "", word.as_str()))
            .collect();
        let mut terms = tokenizer.rows(&rows)?;
        words
            .iter()
            .zip(1..)
            .map(|(word, row)| {
                let mut body = terms.remove(&row).map(|r| r.body).unwrap_or_default();
                match (body.pop(), body.is_empty()) {
                    (Some(term), true) if !may_be_cut(&term) && term.len() <= MAX_TOKEN_LEN => {
                        Ok(term)
                    }
                    _ => Err(IndexError::Unsupported(format!(
                        "a word of {} bytes is not one whole term",
                        word.len()
                    ))),
                }
            })
            .collect()
    }

    /// The page of notes matching `terms` ([`Self::query_terms`]) that `request` asks for.
    pub fn page(&self, terms: &[String], request: PageRequest) -> Result<IndexPage, IndexError> {
        let searcher = self.reader.searcher();
        let (live, deleted) = self.table_stats(&searcher)?;
        let terms: Vec<Term> = terms
            .iter()
            .map(|t| Term::from_field_text(self.fields.terms, t))
            .collect();
        let mut rows_with = vec![0u64; terms.len()];
        for (segment, deleted) in searcher.segment_readers().iter().zip(&deleted) {
            let inverted = segment.inverted_index(self.fields.terms)?;
            for (count, term) in rows_with.iter_mut().zip(&terms) {
                *count += live_rows_with(&inverted, term, deleted)?;
            }
        }
        let query = Bm25Query::new(live.table, &rows_with);
        let keep = (request.offset as usize).saturating_add(request.limit as usize);
        let mut walk = Walk {
            query: &query,
            shortest_row: live.shortest_row,
            every: request.every,
            kind: request.kind.map(kind_code),
            best: Best::new(keep),
            total: 0,
        };
        for segment in searcher.segment_readers() {
            walk.segment(segment, self.fields, &terms)?;
        }
        let ids = walk
            .best
            .into_sorted()
            .into_iter()
            .skip(request.offset as usize)
            .map(|r| r.id as i64)
            .collect();
        self.served.fetch_add(1, AtomicOrdering::Relaxed);
        Ok(IndexPage {
            ids,
            total: walk.total,
        })
    }

    /// Rows, tokens and the shortest row of the live documents, and each segment's deleted
    /// documents, from facts cached per segment (see [`SegmentFacts`]).
    fn table_stats(
        &self,
        searcher: &Searcher,
    ) -> Result<(LiveStats, Vec<Arc<Vec<DocId>>>), IndexError> {
        let mut cache = self.facts.lock().map_err(|_| IndexError::Poisoned)?;
        let present: Vec<SegmentId> = searcher
            .segment_readers()
            .iter()
            .map(SegmentReader::segment_id)
            .collect();
        cache.retain(|id, _| present.contains(id));
        let mut stats = LiveStats {
            table: TableStats { rows: 0, tokens: 0 },
            shortest_row: u64::MAX,
        };
        let mut deleted = Vec::with_capacity(present.len());
        for segment in searcher.segment_readers() {
            let facts = match cache.entry(segment.segment_id()) {
                std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
                std::collections::hash_map::Entry::Vacant(entry) => {
                    entry.insert(SegmentFacts::count(segment)?)
                }
            };
            let live = facts.live(segment)?;
            stats.table.rows += live.rows;
            stats.table.tokens += live.tokens;
            stats.shortest_row = stats.shortest_row.min(facts.shortest_row);
            deleted.push(Arc::clone(&facts.deleted.1));
        }
        Ok((stats, deleted))
    }
}

/// Adds each `(id, title, body, kind, created)` row as a document.
fn add_rows(
    writer: &IndexWriter<TantivyDocument>,
    fields: Fields,
    tokenizer: &Fts5Terms,
    rows: &[SqlRow],
) -> Result<(), IndexError> {
    let notes = rows
        .iter()
        .map(|row| {
            Ok((
                row.i64(0)?,
                row.text(1)?,
                row.text(2)?,
                row.text(3)?,
                row.text(4)?,
            ))
        })
        .collect::<Result<Vec<_>, SqlError>>()
        .map_err(IndexError::Read)?;
    let texts: Vec<(i64, &str, &str)> = notes
        .iter()
        .map(|(id, title, body, _, _)| (*id, title.as_str(), body.as_str()))
        .collect();
    let terms = tokenizer.rows(&texts)?;
    for (id, _, _, kind, created) in &notes {
        let note = |why: &str| IndexError::Note {
            id: *id,
            why: why.to_string(),
        };
        let kind =
            Kind::parse(kind).ok_or_else(|| note("its kind is not note, todo, meeting or clip"))?;
        let created = date_number(created).ok_or_else(|| note("its date is not YYYY-MM-DD"))?;
        let id_number = u64::try_from(*id).map_err(|_| note("its id is negative"))?;
        let empty = RowTerms::default();
        let row = terms.get(id).unwrap_or(&empty);
        writer.add_document(document(fields, id_number, row, kind_code(kind), created))?;
    }
    Ok(())
}

/// Rows and tokens of the live documents, and the fewest tokens of any of them.
#[derive(Debug, Clone, Copy)]
struct LiveStats {
    table: TableStats,
    shortest_row: u64,
}

/// A fast column every document of a segment has a value in (so read without the optional
/// index); opening one that is not is a damaged index.
struct FullColumn(std::sync::Arc<dyn ColumnValues<u64>>);

impl FullColumn {
    fn open(segment: &SegmentReader, name: &str) -> Result<Self, IndexError> {
        let column: Column<u64> = segment.fast_fields().u64(name)?;
        if column.get_cardinality() != Cardinality::Full {
            return Err(IndexError::Damaged(format!(
                "some documents have no {name} or several"
            )));
        }
        Ok(FullColumn(column.values))
    }

    fn get(&self, doc: DocId) -> u64 {
        self.0.get_val(doc)
    }
}

/// What a segment holds (its documents never change; deletes only mark them), counted once:
/// its rows and tokens with the deleted ones, and the deleted documents themselves for the
/// segment's current number of deletes.
struct SegmentFacts {
    rows: u64,
    tokens: u64,
    /// No document of the segment is shorter (deleted or not: still a bound for the live ones).
    shortest_row: u64,
    /// The deleted documents, for this many deletes, and their tokens.
    deleted: (u32, Arc<Vec<DocId>>, u64),
}

impl SegmentFacts {
    fn count(segment: &SegmentReader) -> Result<Self, IndexError> {
        let tokens = FullColumn::open(segment, "tokens")?;
        let mut facts = SegmentFacts {
            rows: u64::from(segment.max_doc()),
            tokens: 0,
            shortest_row: u64::MAX,
            deleted: (0, Arc::new(Vec::new()), 0),
        };
        for doc in 0..segment.max_doc() {
            let row = tokens.get(doc);
            facts.tokens += row;
            facts.shortest_row = facts.shortest_row.min(row);
        }
        Ok(facts)
    }

    /// The live rows and tokens; the deleted documents are listed again when their number
    /// changed (a scan of the segment's bitset, once per delete count).
    fn live(&mut self, segment: &SegmentReader) -> Result<TableStats, IndexError> {
        let deletes = segment.num_deleted_docs();
        if deletes != self.deleted.0 {
            let tokens = FullColumn::open(segment, "tokens")?;
            let docs: Vec<DocId> = (0..segment.max_doc())
                .filter(|&doc| segment.is_deleted(doc))
                .collect();
            let deleted_tokens = docs.iter().map(|&doc| tokens.get(doc)).sum();
            self.deleted = (deletes, Arc::new(docs), deleted_tokens);
        }
        Ok(TableStats {
            rows: self.rows - self.deleted.1.len() as u64,
            tokens: self.tokens - self.deleted.2,
        })
    }
}

/// Live documents of a segment holding `term`: its document frequency, less the segment's
/// `deleted` documents that hold it (each looked up in the postings, in order).
fn live_rows_with(
    inverted: &tantivy::InvertedIndexReader,
    term: &Term,
    deleted: &[DocId],
) -> Result<u64, IndexError> {
    let Some(info) = inverted.get_term_info(term)? else {
        return Ok(0);
    };
    let mut held_by_deleted = 0u64;
    if !deleted.is_empty() {
        let mut postings = inverted.read_postings_from_terminfo(&info, IndexRecordOption::Basic)?;
        for &doc in deleted {
            if postings.doc() == TERMINATED {
                break;
            }
            let at = if postings.doc() < doc {
                postings.seek(doc)
            } else {
                postings.doc()
            };
            held_by_deleted += u64::from(at == doc);
        }
    }
    Ok(u64::from(info.doc_freq) - held_by_deleted)
}

/// A scored match: lower scores rank first (FTS5's sign), then newer notes, then higher ids.
#[derive(Debug, Clone, Copy)]
struct Ranked {
    score: f64,
    created: u64,
    id: u64,
}

impl Ranked {
    /// `Less` when `self` ranks before `other`.
    fn rank(&self, other: &Ranked) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.created.cmp(&self.created))
            .then(other.id.cmp(&self.id))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.rank(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    /// The heap's greatest is the one ranked last.
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank(other)
    }
}

/// The `keep` best matches seen so far.
struct Best {
    keep: usize,
    heap: BinaryHeap<Ranked>,
}

impl Best {
    fn new(keep: usize) -> Self {
        Best {
            keep,
            heap: BinaryHeap::with_capacity(keep.min(10_240) + 1),
        }
    }

    /// The score a match must reach to enter (None while there is room).
    fn bar(&self) -> Option<f64> {
        (self.heap.len() >= self.keep)
            .then(|| self.heap.peek().map_or(f64::NEG_INFINITY, |w| w.score))
    }

    fn offer(&mut self, ranked: Ranked) {
        if self.keep == 0 {
            return;
        }
        if self.heap.len() < self.keep {
            self.heap.push(ranked);
        } else if let Some(worst) = self.heap.peek()
            && ranked.rank(worst) == Ordering::Less
        {
            self.heap.pop();
            self.heap.push(ranked);
        }
    }

    fn into_sorted(self) -> Vec<Ranked> {
        self.heap.into_sorted_vec()
    }
}

/// One search's walk over the segments.
struct Walk<'q> {
    query: &'q Bm25Query,
    /// No live row is shorter (for the bound a match must reach before it is scored).
    shortest_row: u64,
    every: bool,
    kind: Option<u64>,
    best: Best,
    total: u64,
}

impl Walk<'_> {
    fn segment(
        &mut self,
        segment: &SegmentReader,
        fields: Fields,
        terms: &[Term],
    ) -> Result<(), IndexError> {
        let inverted = segment.inverted_index(fields.terms)?;
        // (phrase, its postings); a phrase absent from the segment matches nothing here.
        let mut lists: Vec<(usize, SegmentPostings)> = Vec::with_capacity(terms.len());
        for (phrase, term) in terms.iter().enumerate() {
            match inverted.read_postings(term, IndexRecordOption::WithFreqs)? {
                Some(postings) => lists.push((phrase, postings)),
                None if self.every => return Ok(()),
                None => {}
            }
        }
        if lists.is_empty() {
            return Ok(());
        }
        let (ids, kinds, created, tokens) = (
            FullColumn::open(segment, "id")?,
            FullColumn::open(segment, "kind")?,
            FullColumn::open(segment, "created")?,
            FullColumn::open(segment, "tokens")?,
        );
        let mut freqs = vec![0u32; terms.len()];
        let mut present: Vec<usize> = Vec::with_capacity(terms.len());
        let mut doc = if self.every {
            next_common(&mut lists)
        } else {
            lowest(&lists)
        };
        while doc != TERMINATED {
            freqs.fill(0);
            present.clear();
            for (phrase, postings) in &lists {
                if postings.doc() == doc {
                    freqs[*phrase] = postings.term_freq();
                    present.push(*phrase);
                }
            }
            let live =
                !segment.is_deleted(doc) && self.kind.is_none_or(|kind| kinds.get(doc) == kind);
            if live {
                self.total += 1;
                let weighted = freqs.iter().map(|&f| f64::from(f));
                let may_enter = self.best.bar().is_none_or(|bar| {
                    self.query.best_possible(present.iter().copied()) <= bar
                        && self
                            .query
                            .best_possible_at(weighted.clone(), self.shortest_row)
                            <= bar
                });
                if may_enter {
                    let score = self.query.score(weighted, tokens.get(doc));
                    self.best.offer(Ranked {
                        score,
                        created: created.get(doc),
                        id: ids.get(doc),
                    });
                }
            }
            doc = if self.every {
                if let Some((_, first)) = lists.first_mut() {
                    first.advance();
                }
                next_common(&mut lists)
            } else {
                for (_, postings) in &mut lists {
                    if postings.doc() == doc {
                        postings.advance();
                    }
                }
                lowest(&lists)
            };
        }
        Ok(())
    }
}

/// The lowest document any list is on (the union's next).
fn lowest(lists: &[(usize, SegmentPostings)]) -> DocId {
    lists
        .iter()
        .map(|(_, p)| p.doc())
        .min()
        .unwrap_or(TERMINATED)
}

/// The next document every list holds, each list moved onto it (the intersection's next).
fn next_common(lists: &mut [(usize, SegmentPostings)]) -> DocId {
    let mut target = lists
        .iter()
        .map(|(_, p)| p.doc())
        .max()
        .unwrap_or(TERMINATED);
    'search: loop {
        if target == TERMINATED {
            return TERMINATED;
        }
        for (_, postings) in lists.iter_mut() {
            let doc = if postings.doc() < target {
                postings.seek(target)
            } else {
                postings.doc()
            };
            if doc > target {
                target = doc;
                continue 'search;
            }
        }
        return target;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search_sql::TITLE_WEIGHT;

    #[test]
    fn title_repeats_are_the_ranking_title_weight() {
        assert_eq!(f64::from(TITLE_REPEATS), TITLE_WEIGHT);
    }

    #[test]
    fn dates_sort_as_numbers_as_they_do_as_text_and_other_shapes_are_refused() {
        // (text, number)
        let cases = [
            ("2025-11-28", Some(20_251_128)),
            ("1999-01-01", Some(19_990_101)),
            ("2025-1-28", None),
            ("2025/11/28", None),
            ("20251128xx", None),
            ("२०२५-११-२८", None),
            ("", None),
        ];
        for (text, number) in cases {
            assert_eq!(date_number(text), number, "{text}");
        }
        assert!(date_number("2024-12-31") < date_number("2025-01-01"));
    }

    #[test]
    fn a_better_score_then_a_newer_note_then_a_higher_id_ranks_first() {
        let r = |score, created, id| Ranked { score, created, id };
        // (first, second): first ranks before second.
        let cases = [
            (r(-2.0, 1, 1), r(-1.0, 9, 9)),
            (r(-1.0, 9, 1), r(-1.0, 1, 9)),
            (r(-1.0, 5, 9), r(-1.0, 5, 1)),
        ];
        for (first, second) in cases {
            assert_eq!(first.rank(&second), Ordering::Less, "{first:?} {second:?}");
        }
        let mut best = Best::new(2);
        for ranked in [r(-1.0, 1, 1), r(-3.0, 1, 2), r(-2.0, 1, 3), r(-0.5, 1, 4)] {
            best.offer(ranked);
        }
        let kept: Vec<u64> = best.into_sorted().iter().map(|r| r.id).collect();
        assert_eq!(kept, [2, 3]);
    }
}
