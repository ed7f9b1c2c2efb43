//! The notes store: one SQLite file (WAL) holding the notes, a full-text index over their
//! titles and bodies, the email drafts (with their send state), the idempotency receipts of
//! writes, and the log of undone writes.
//!
//! Guarantees: `init` and `init_sample` refuse to overwrite an existing file and leave no half
//! file when they fail; `open` refuses a file that is not a toolgate notes database (a books
//! database included); the FTS5 index follows every insert, update and delete of a note through
//! triggers, so no code path can forget it; note ids are never reused (AUTOINCREMENT), so an
//! undo handle naming a note can never hit a different note; the email drafts table is created
//! on `open` too when missing (so databases made before it get it), and a draft that is being
//! sent or was sent cannot have its recipients, subject or body changed (a trigger refuses it);
//! `reset` restores the state the file was created with (empty, or the bundled notebook, and no
//! drafts) in one transaction, so a failure leaves the previous state.
//!
//! For a team, the same tables live in the shared PostgreSQL database (migration V5,
//! [`NotesStore::on_postgres`]): every statement of the toolset runs unchanged there (the search
//! differs, see [`crate::search_sql`]). The first instance to open an empty notes table fills
//! it with the bundled sample notebook, in one transaction; `reset` there restores that
//! notebook and deletes only the notes toolset's own rows (notes, drafts, undone marks) and the
//! receipts of its tools ([`OWN_RECEIPTS`]), never another toolset's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::params;
use toolgate_core::idempotency;
use toolgate_core::sql::{Dialect, Sql, SqlError, in_write_transaction};
use toolgate_core::{ToolError, ToolOutput, sql_params};
use toolgate_store::file::{self, FileError};
use toolgate_store::postgres::PgStore;
use toolgate_store::shared_conn::SharedConnection;

use crate::notebook_index::{IndexPolicy, IndexState, NotebookIndex, index_dir};
use crate::rows::{self, NewNote};
use crate::sample::{self, SampleError};
use crate::search::{self, SearchArgs};
use crate::search_index::SearchIndex;

const SCHEMA_VERSION: &str = "1";
/// Tells a notes database from any other toolgate database (they share `toolgate_meta`).
const STORE_NAME: &str = "notes";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "{path} already exists; use `toolgate notes reset --db {path}` to restore it, or choose another path"
    )]
    AlreadyExists { path: String },
    #[error("{path} does not exist; create it with `toolgate notes init --db {path}`")]
    Missing { path: String },
    #[error(
        "{path} is not a toolgate notes database (no toolgate_meta saying store = {STORE_NAME}, schema version {SCHEMA_VERSION})"
    )]
    NotANotesDatabase { path: String },
    #[error("cannot create the folder for {path}: {source}")]
    Folder {
        path: String,
        source: std::io::Error,
    },
    #[error("SQLite error on {path}: {source}")]
    Sqlite {
        path: String,
        source: rusqlite::Error,
    },
    /// The store could not be used (unreachable, or lost to an earlier failure).
    #[error("the notes store {path} failed: {source}")]
    Store {
        path: String,
        source: Box<ToolError>,
    },
    /// A statement failed (either database); nothing of its transaction was kept.
    #[error("a statement on the notes store {path} failed: {source}")]
    Statement { path: String, source: SqlError },
    #[error(transparent)]
    Sample(#[from] SampleError),
    /// The search index could not be prepared (searches still work, ranked by FTS5).
    #[error("the search index of {path} is not available: {why}")]
    SearchIndex { path: String, why: String },
}

impl StoreError {
    /// `error` of the store file at `path`, in this store's words.
    fn of_file(path: &Path, error: FileError) -> Self {
        let path = path.display().to_string();
        match error {
            FileError::AlreadyExists => StoreError::AlreadyExists { path },
            FileError::Missing => StoreError::Missing { path },
            FileError::Folder(source) => StoreError::Folder { path, source },
            FileError::Sqlite(source) => StoreError::Sqlite { path, source },
        }
    }
}

/// What a database was created with, and so what `reset` restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// No notes.
    Empty,
    /// The bundled notebook plus [`SAMPLE_GENERATED`] generated notes.
    Sample,
}

impl Contents {
    fn as_str(self) -> &'static str {
        match self {
            Contents::Empty => "empty",
            Contents::Sample => "sample",
        }
    }

    fn parse(text: &str) -> Option<Contents> {
        [Contents::Empty, Contents::Sample]
            .into_iter()
            .find(|c| c.as_str() == text)
    }

    /// The notes a database with these contents starts with, in insertion (id) order.
    pub fn notes(self) -> Result<Vec<NewNote>, SampleError> {
        match self {
            Contents::Empty => Ok(Vec::new()),
            Contents::Sample => {
                let mut notes = sample::sample_notes()?;
                notes.extend(sample::generate_notes(SAMPLE_GENERATED, SAMPLE_SEED));
                Ok(notes)
            }
        }
    }
}

/// How many generated filler notes the sample database holds beside the bundled notebook.
pub const SAMPLE_GENERATED: usize = 300;
/// The generator seed of the sample database (fixed, so every sample database is identical).
pub const SAMPLE_SEED: u64 = 20_251_202;

/// A note as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteTitle {
    pub id: i64,
    pub title: String,
    /// note, todo, meeting or clip.
    pub kind: String,
}

/// The receipts of the notes toolset's tools in a receipts table other toolsets share (the
/// PostgreSQL store's): `notes_*`, `email_*`, `web_clip` and `create_todos_from_meeting`.
pub const OWN_RECEIPTS: &str =
    "(tool LIKE 'notes\\_%' ESCAPE '\\' OR tool LIKE 'email\\_%' ESCAPE '\\'
     OR tool IN ('web_clip', 'create_todos_from_meeting'))";

/// A handle on one notes database; cheap to clone.
#[derive(Clone, Debug)]
pub struct NotesStore {
    /// The SQLite file, or `postgres://host:port/database` (no password) for a shared store.
    path: PathBuf,
    conn: SharedConnection,
    /// The top-k search index of a large SQLite notebook ([`IndexPolicy`]); None on
    /// PostgreSQL and for smaller notebooks, whose searches FTS5 ranks.
    search_index: Option<Arc<NotebookIndex>>,
}

const SCHEMA: &str = "
CREATE TABLE notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    notebook TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '',
    due TEXT CHECK (due IS NULL OR due GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]'),
    created TEXT NOT NULL CHECK (created GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]'),
    kind TEXT NOT NULL CHECK (kind IN ('note', 'todo', 'meeting', 'clip')),
    source_url TEXT,
    untrusted INTEGER NOT NULL CHECK (untrusted IN (0, 1)),
    done INTEGER CHECK (done IN (0, 1)),
    meeting_id INTEGER,
    CHECK ((kind = 'todo') = (done IS NOT NULL)),
    CHECK (kind <> 'clip' OR untrusted = 1)
);
CREATE INDEX notes_by_meeting ON notes (meeting_id) WHERE meeting_id IS NOT NULL;
CREATE VIRTUAL TABLE notes_fts USING fts5(
    title, body, content = 'notes', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes BEGIN
    INSERT INTO notes_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER notes_fts_delete AFTER DELETE ON notes BEGIN
    INSERT INTO notes_fts (notes_fts, rowid, title, body)
    VALUES ('delete', old.id, old.title, old.body);
END;
CREATE TRIGGER notes_fts_update AFTER UPDATE OF title, body ON notes BEGIN
    INSERT INTO notes_fts (notes_fts, rowid, title, body)
    VALUES ('delete', old.id, old.title, old.body);
    INSERT INTO notes_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TABLE notes_undone (receipt_key TEXT PRIMARY KEY, undone_at INTEGER NOT NULL);
CREATE TABLE toolgate_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
";

/// The email drafts (see `crate::email`): created idempotently, so `open` adds it to databases
/// made before it existed. `recipients` is a JSON list of addresses; `send_key` is the
/// idempotency key of the send that claimed the draft; ids are never reused.
const DRAFTS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS email_drafts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    recipients TEXT NOT NULL CHECK (
        json_valid(recipients) AND json_type(recipients) = 'array'
        AND json_array_length(recipients) >= 1
    ),
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    created INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'sending', 'sent')),
    send_key TEXT,
    message_id TEXT,
    sent_at INTEGER,
    CHECK ((status = 'draft') = (send_key IS NULL)),
    CHECK ((status = 'sent') = (message_id IS NOT NULL)),
    CHECK ((status = 'sent') = (sent_at IS NOT NULL))
);
CREATE TRIGGER IF NOT EXISTS email_drafts_frozen
BEFORE UPDATE OF recipients, subject, body ON email_drafts
WHEN old.status <> 'draft'
BEGIN
    SELECT RAISE(ABORT, 'a draft that is being sent or was sent cannot be changed');
END;
";

/// The change log the search index catches up from (see `crate::search_index`): every insert,
/// delete and change of what the index holds appends the note's id, in the writing
/// transaction, so no connection or process can change a note unseen. Created idempotently
/// on `open`, with the notebook's random `search_index_id` an index on disk must carry.
const SEARCH_CHANGES_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS notes_search_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    note INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS notes_search_inserted AFTER INSERT ON notes BEGIN
    INSERT INTO notes_search_changes (note) VALUES (new.id);
END;
CREATE TRIGGER IF NOT EXISTS notes_search_deleted AFTER DELETE ON notes BEGIN
    INSERT INTO notes_search_changes (note) VALUES (old.id);
END;
CREATE TRIGGER IF NOT EXISTS notes_search_changed
AFTER UPDATE OF id, title, body, kind, created ON notes BEGIN
    INSERT INTO notes_search_changes (note) VALUES (old.id);
    INSERT INTO notes_search_changes (note) SELECT new.id WHERE new.id <> old.id;
END;
INSERT OR IGNORE INTO toolgate_meta (key, value)
VALUES ('search_index_id', lower(hex(randomblob(16))));
";

impl NotesStore {
    /// Creates a new, empty notes database at `path`.
    pub fn init(path: &Path) -> Result<Self, StoreError> {
        Self::create(path, Contents::Empty)
    }

    /// Creates a new notes database at `path` holding the bundled sample notebook and
    /// [`SAMPLE_GENERATED`] generated notes (the same every time).
    pub fn init_sample(path: &Path) -> Result<Self, StoreError> {
        Self::create(path, Contents::Sample)
    }

    fn create(path: &Path, contents: Contents) -> Result<Self, StoreError> {
        let notes = contents.notes()?;
        file::create(path, |conn| {
            conn.execute_batch(SCHEMA)?;
            conn.execute_batch(DRAFTS_SCHEMA)?;
            idempotency::install(conn)?;
            let tx = conn.transaction()?;
            tx.execute(
                "INSERT INTO toolgate_meta (key, value)
                 VALUES ('store', ?1), ('schema_version', ?2), ('contents', ?3)",
                params![STORE_NAME, SCHEMA_VERSION, contents.as_str()],
            )?;
            insert_all(&*tx, &notes).map_err(sqlite_side)?;
            tx.commit()
        })
        .map_err(|e| StoreError::of_file(path, e))?;
        Self::open(path)
    }

    /// The notes in the shared PostgreSQL database `store` (its schema already migrated); an
    /// empty notes table is filled with the bundled sample notebook first (what
    /// [`Self::init_sample`] holds), in one transaction, by whichever instance gets there first.
    pub async fn on_postgres(store: PgStore) -> Result<Self, StoreError> {
        let notes = Contents::Sample.notes()?;
        let location = format!("postgres://{}", store.shown());
        let conn = SharedConnection::postgres(store, "notes store");
        conn.blocking_sql(move |session| {
            in_write_transaction(session, |tx| {
                if tx.query_i64("SELECT count(*) FROM notes", &[])? == 0 {
                    insert_all(tx, &notes)?;
                }
                Ok::<_, ToolError>(())
            })
        })
        .await
        .map_err(|source| StoreError::Store {
            path: location.clone(),
            source: Box::new(source),
        })?;
        Ok(NotesStore {
            path: PathBuf::from(location),
            conn,
            search_index: None,
        })
    }

    /// Opens an existing notes database, with a search index when it is large
    /// ([`IndexPolicy::default`]).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, IndexPolicy::default())
    }

    /// Opens an existing notes database, with a search index when `policy` says so: prepared
    /// on a thread of its own, searches ranked by FTS5 until it is ready.
    pub fn open_with(path: &Path, policy: IndexPolicy) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let conn = file::open_existing(path).map_err(|e| StoreError::of_file(path, e))?;
        let sql = |source| StoreError::Sqlite {
            path: shown.clone(),
            source,
        };
        let meta = |key: &str| -> Option<String> {
            conn.query_row(
                "SELECT value FROM toolgate_meta WHERE key = ?1",
                params![key],
                |r| r.get(0),
            )
            .ok()
        };
        if meta("store").as_deref() != Some(STORE_NAME)
            || meta("schema_version").as_deref() != Some(SCHEMA_VERSION)
        {
            return Err(StoreError::NotANotesDatabase { path: shown });
        }
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        conn.execute_batch(DRAFTS_SCHEMA).map_err(sql)?;
        conn.execute_batch(SEARCH_CHANGES_SCHEMA).map_err(sql)?;
        idempotency::install(&conn).map_err(sql)?;
        let search_index = wants_index(&conn, path, policy)
            .map_err(sql)?
            .map(|notebook| NotebookIndex::start(path, notebook));
        Ok(NotesStore {
            path: path.to_path_buf(),
            conn: SharedConnection::new(conn, "notes store"),
            search_index,
        })
    }

    /// Opens the notebook file `path` and prepares its search index now, whatever its size
    /// (a command that builds it in the foreground), calling `progress` with the notes indexed
    /// so far every `every` until it is ready.
    pub fn open_indexed(
        path: &Path,
        every: Duration,
        mut progress: impl FnMut(u64),
    ) -> Result<Self, StoreError> {
        let store = Self::open_with(path, IndexPolicy::FromNotes(0))?;
        loop {
            let why = match store.wait_for_search_index(every) {
                Some(IndexState::Ready) => return Ok(store),
                Some(IndexState::Preparing) => {
                    progress(store.notes_indexed());
                    continue;
                }
                Some(IndexState::Unavailable(why)) => why,
                None => "the store started without one".to_string(),
            };
            return Err(StoreError::SearchIndex {
                path: path.display().to_string(),
                why,
            });
        }
    }

    /// Notes the search index's build under way has indexed so far.
    pub fn notes_indexed(&self) -> u64 {
        self.search_index
            .as_ref()
            .map_or(0, |index| index.notes_indexed())
    }

    /// The search index, when it is ready.
    pub fn search_index(&self) -> Option<Arc<SearchIndex>> {
        self.search_index.as_ref()?.ready()
    }

    /// Waits at most `timeout` for the search index to be prepared; its state then (None when
    /// this notebook has none).
    pub fn wait_for_search_index(&self, timeout: Duration) -> Option<IndexState> {
        Some(self.search_index.as_ref()?.wait(timeout))
    }

    /// Opens `path`, creating it with the sample notebook first if it does not exist.
    pub fn open_or_init_sample(path: &Path) -> Result<Self, StoreError> {
        if path.exists() {
            Self::open(path)
        } else {
            Self::init_sample(path)
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A failure through the shared connection, in this store's words.
    fn failed(&self, source: ToolError) -> StoreError {
        StoreError::Store {
            path: self.path.display().to_string(),
            source: Box::new(source),
        }
    }

    fn statement_failed(&self, source: SqlError) -> StoreError {
        StoreError::Statement {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// What the database was created with (and what [`Self::reset`] restores): on PostgreSQL
    /// always the sample notebook ([`Self::on_postgres`] fills an empty store with it).
    pub fn contents(&self) -> Result<Contents, StoreError> {
        if self.conn.dialect() == Dialect::Postgres {
            return Ok(Contents::Sample);
        }
        let text = self
            .conn
            .with_sql(|conn| {
                Ok(conn.query_opt(
                    "SELECT value FROM toolgate_meta WHERE key = 'contents'",
                    &[],
                )?)
            })
            .map_err(|e| self.failed(e))?
            .map(|row| row.text(0))
            .transpose()
            .map_err(|e| self.statement_failed(e))?;
        text.as_deref()
            .and_then(Contents::parse)
            .ok_or_else(|| StoreError::NotANotesDatabase {
                path: self.path.display().to_string(),
            })
    }

    /// Restores the initial state in one transaction: the notes the store was created with
    /// (ids from 1 again), no email drafts (ids from 1 again), no receipts, nothing undone. On
    /// PostgreSQL only the notes toolset's rows and its tools' receipts ([`OWN_RECEIPTS`]).
    pub fn reset(&self) -> Result<(), StoreError> {
        let notes = self.contents()?.notes()?;
        self.conn
            .with_sql(|session| {
                Ok(in_write_transaction(session, |tx| {
                    tx.execute_batch(&reset_statements(tx.dialect()))?;
                    insert_all(tx, &notes)
                }))
            })
            .map_err(|e| self.failed(e))?
            .map_err(|e| self.statement_failed(e))
    }

    /// Inserts `notes` in one transaction; returns their ids in order.
    pub fn insert_notes(&self, notes: &[NewNote]) -> Result<Vec<i64>, StoreError> {
        self.conn
            .with_sql(|session| {
                Ok(in_write_transaction(session, |tx| {
                    let mut ids = Vec::with_capacity(notes.len());
                    for note in notes {
                        ids.push(rows::insert(tx, note)?);
                    }
                    Ok::<_, SqlError>(ids)
                }))
            })
            .map_err(|e| self.failed(e))?
            .map_err(|e| self.statement_failed(e))
    }

    /// Runs `notes_search` directly on this thread (what the tool's handler runs, without the
    /// dispatcher), for commands and benchmarks.
    pub fn search(&self, args: &SearchArgs) -> Result<ToolOutput, ToolError> {
        let index = self.search_index();
        self.with_sql(|conn| search::run_search(conn, index.as_deref(), args))
    }

    /// Up to `limit` notes with an id over `after`, in id order: the pages a front end lists
    /// (MCP resources). Reading a note's contents goes through `notes_get`.
    pub fn titles_after(&self, after: i64, limit: u32) -> Result<Vec<NoteTitle>, ToolError> {
        self.conn
            .with_sql(|conn| {
                conn.query(
                    "SELECT id, title, kind FROM notes WHERE id > ?1 ORDER BY id LIMIT ?2",
                    sql_params![after, limit],
                )?
                .iter()
                .map(|row| {
                    Ok(NoteTitle {
                        id: row.i64(0)?,
                        title: row.text(1)?,
                        kind: row.text(2)?,
                    })
                })
                .collect::<Result<Vec<_>, SqlError>>()
                .map_err(ToolError::from)
            })
            .map_err(|e| ToolError::internal(format!("listing notes failed: {}", e.message)))
    }
}

/// The notebook's `search_index_id` when `policy` gives it an index: it is large enough, or it
/// has an index folder already (kept in step, not left to go stale).
fn wants_index(
    conn: &rusqlite::Connection,
    path: &Path,
    policy: IndexPolicy,
) -> Result<Option<String>, rusqlite::Error> {
    let IndexPolicy::FromNotes(min_notes) = policy else {
        return Ok(None);
    };
    let highest: i64 =
        conn.query_row("SELECT coalesce(max(id), 0) FROM notes", [], |r| r.get(0))?;
    if highest < min_notes && !index_dir(path).exists() {
        return Ok(None);
    }
    conn.query_row(
        "SELECT value FROM toolgate_meta WHERE key = 'search_index_id'",
        [],
        |r| r.get(0),
    )
    .map(Some)
}

/// What `reset` empties before the notes go back in, on `dialect`'s store.
fn reset_statements(dialect: Dialect) -> String {
    match dialect {
        Dialect::Sqlite => "DELETE FROM notes;
             DELETE FROM sqlite_sequence WHERE name = 'notes';
             DELETE FROM email_drafts;
             DELETE FROM sqlite_sequence WHERE name = 'email_drafts';
             DELETE FROM tool_receipts;
             DELETE FROM notes_undone;"
            .to_owned(),
        Dialect::Postgres => format!(
            "TRUNCATE notes, email_drafts, notes_undone RESTART IDENTITY;
             DELETE FROM tool_receipts WHERE {OWN_RECEIPTS};"
        ),
    }
}

/// Inserts `notes` in order (the caller's transaction).
fn insert_all(tx: &dyn Sql, notes: &[NewNote]) -> Result<(), SqlError> {
    for note in notes {
        rows::insert(tx, note)?;
    }
    Ok(())
}

/// A statement failure inside a SQLite-only step (creating the file), carried in rusqlite's
/// error so the file step reports it.
fn sqlite_side(e: SqlError) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}

/// The shared connection's calls (`read_sql`, `blocking_sql`, `write_once_sql`, `with_sql`,
/// `receipt_log`) are the store's: the handlers and commands call them on the store.
impl std::ops::Deref for NotesStore {
    type Target = SharedConnection;

    fn deref(&self) -> &SharedConnection {
        &self.conn
    }
}
