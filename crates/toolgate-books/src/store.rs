//! The catalogue store: one SQLite file (WAL) holding the books, the user's status and tags,
//! and the idempotency receipts of writes to them; or, for a team, the same tables in the shared
//! PostgreSQL database ([`BooksStore::on_postgres`]), where the handlers' statements run
//! unchanged.
//!
//! Guarantees: `init` refuses to overwrite an existing file and leaves no half file when it
//! fails; `reset` restores the initial state (catalogue rows, no statuses, no tags, no
//! receipts) in one transaction, so a failure leaves the previous state; `open` refuses a file
//! that is not a toolgate books database.

use std::path::{Path, PathBuf};

use rusqlite::params;
use toolgate_core::idempotency;
use toolgate_core::sql::{Sql, SqlError, in_write_transaction};
use toolgate_core::{ToolError, sql_params};
use toolgate_store::file::{self, FileError};
use toolgate_store::postgres::PgStore;
use toolgate_store::shared_conn::SharedConnection;

use crate::data::{Book, DataError, embedded_books};

const SCHEMA_VERSION: &str = "1";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "{path} already exists; use `toolgate books reset --db {path}` to restore it, or choose another path"
    )]
    AlreadyExists { path: String },
    #[error("{path} does not exist; create it with `toolgate books init --db {path}`")]
    Missing { path: String },
    #[error(
        "{path} is not a toolgate books database (no books table with schema version {SCHEMA_VERSION})"
    )]
    NotABooksDatabase { path: String },
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
    #[error("the books store in {database} failed: {source}")]
    Shared {
        database: String,
        source: Box<ToolError>,
    },
    #[error(transparent)]
    Data(#[from] DataError),
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

/// A handle on one books database; cheap to clone.
#[derive(Clone, Debug)]
pub struct BooksStore {
    /// The SQLite file, or `postgres://host:port/database` (no password) for a shared store.
    path: PathBuf,
    conn: SharedConnection,
}

const SCHEMA: &str = "
CREATE TABLE books (
    book_id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    authors TEXT NOT NULL,
    original_publication_year INTEGER,
    average_rating REAL NOT NULL,
    ratings_count INTEGER NOT NULL,
    language_code TEXT,
    my_tags TEXT NOT NULL DEFAULT '',
    my_status TEXT CHECK (my_status IN ('want_to_read', 'reading', 'read'))
);
CREATE TABLE toolgate_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
";

impl BooksStore {
    /// Creates a new database file at `path` from the embedded catalogue.
    pub fn init(path: &Path) -> Result<Self, StoreError> {
        let books = embedded_books()?;
        file::create(path, |conn| {
            conn.execute_batch(SCHEMA)?;
            idempotency::install(conn)?;
            let tx = conn.transaction()?;
            tx.execute(
                "INSERT INTO toolgate_meta (key, value) VALUES ('schema_version', ?1), ('attribution', ?2)",
                params![SCHEMA_VERSION, crate::data::ATTRIBUTION],
            )?;
            insert_books(&*tx, &books).map_err(sqlite_side)?;
            tx.commit()
        })
        .map_err(|e| StoreError::of_file(path, e))?;
        Self::open(path)
    }

    /// The books in the shared PostgreSQL database `store` (its schema already migrated); an
    /// empty catalogue is filled with the embedded one first, in one transaction, by whichever
    /// instance gets there first.
    pub async fn on_postgres(store: PgStore) -> Result<Self, StoreError> {
        let books = embedded_books()?;
        let location = format!("postgres://{}", store.shown());
        let conn = SharedConnection::postgres(store, "books store");
        conn.blocking_sql(move |session| {
            in_write_transaction(session, |tx| {
                if tx.query_i64("SELECT count(*) FROM books", &[])? == 0 {
                    insert_books(tx, &books)?;
                }
                Ok::<_, ToolError>(())
            })
        })
        .await
        .map_err(|source| StoreError::Shared {
            database: location.clone(),
            source: Box::new(source),
        })?;
        Ok(BooksStore {
            path: PathBuf::from(location),
            conn,
        })
    }

    /// Opens an existing books database.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let conn = file::open_existing(path).map_err(|e| StoreError::of_file(path, e))?;
        let sql = |source| StoreError::Sqlite {
            path: shown.clone(),
            source,
        };
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        let version: Option<String> = conn
            .query_row(
                "SELECT value FROM toolgate_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .ok();
        if version.as_deref() != Some(SCHEMA_VERSION) {
            return Err(StoreError::NotABooksDatabase { path: shown });
        }
        idempotency::install(&conn).map_err(sql)?;
        Ok(BooksStore {
            path: path.to_path_buf(),
            conn: SharedConnection::new(conn, "books store"),
        })
    }

    /// Opens `path`, creating it first if it does not exist.
    pub fn open_or_init(path: &Path) -> Result<Self, StoreError> {
        if path.exists() {
            Self::open(path)
        } else {
            Self::init(path)
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Restores the initial state in one transaction (on a shared store: the books and the
    /// receipts of the books tools, none of another toolset's).
    pub fn reset(&self) -> Result<(), StoreError> {
        let books = embedded_books()?;
        if self.conn.dialect() == toolgate_core::sql::Dialect::Postgres {
            return self
                .conn
                .with_sql(|session| {
                    in_write_transaction(session, |tx| {
                        tx.execute("DELETE FROM books", &[])?;
                        tx.execute(
                            "DELETE FROM tool_receipts WHERE tool LIKE 'books\\_%' ESCAPE '\\'",
                            &[],
                        )?;
                        insert_books(tx, &books)?;
                        Ok::<_, ToolError>(())
                    })
                })
                .map_err(|source| StoreError::Shared {
                    database: self.path.display().to_string(),
                    source: Box::new(source),
                });
        }
        let shown = self.path.display().to_string();
        let sql = |source| StoreError::Sqlite {
            path: shown.clone(),
            source,
        };
        let mut conn = self.conn.lock().map_err(|_| StoreError::Sqlite {
            path: shown.clone(),
            source: rusqlite::Error::InvalidQuery,
        })?;
        let tx = conn.transaction().map_err(sql)?;
        tx.execute_batch("DELETE FROM books; DELETE FROM tool_receipts;")
            .map_err(sql)?;
        insert_books(&*tx, &books)
            .map_err(sqlite_side)
            .map_err(sql)?;
        tx.commit().map_err(sql)
    }
}

/// The shared connection's calls (`read`, `blocking`, `write_once`, `with_conn`,
/// `receipt_log`) are the store's: the handlers and commands call them on the store.
impl std::ops::Deref for BooksStore {
    type Target = SharedConnection;

    fn deref(&self) -> &SharedConnection {
        &self.conn
    }
}

fn insert_books(tx: &dyn Sql, books: &[Book]) -> Result<(), SqlError> {
    for b in books {
        tx.execute(
            "INSERT INTO books (book_id, title, authors, original_publication_year, average_rating,
                                ratings_count, language_code, my_tags, my_status)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, '', NULL)",
            sql_params![
                b.book_id,
                &b.title,
                &b.authors,
                b.original_publication_year,
                b.average_rating,
                b.ratings_count,
                b.language_code.as_deref()
            ],
        )?;
    }
    Ok(())
}

/// A statement failure inside a SQLite-only step (creating or resetting the file), carried in
/// rusqlite's error so the file step reports it.
fn sqlite_side(e: SqlError) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}
