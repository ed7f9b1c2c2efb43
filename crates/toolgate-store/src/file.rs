//! A store's SQLite file: created whole or not at all, opened only when it exists.
//!
//! Guarantees: [`create`] refuses a path that exists, makes the missing folders, builds the
//! file under a temporary name (`.partial` beside it) and renames it into place only once the
//! build succeeded; a failed build's partial file is removed, so a failed create leaves no file
//! at the path and no half file beside it. [`open_existing`] refuses a missing file (SQLite
//! would quietly create an empty one) and waits up to five seconds for a lock another
//! connection holds rather than failing at once. What the file holds is the store's business:
//! neither looks inside.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

/// How long a connection waits for another one's lock before a call fails as busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a store's file could not be created or opened; each store says it in its own words
/// (with the command that fixes it).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("the file already exists")]
    AlreadyExists,
    #[error("the file does not exist")]
    Missing,
    #[error("cannot create the file's folder or move the file into place: {0}")]
    Folder(#[source] std::io::Error),
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// Creates the store file `path`, `build` writing its schema and first contents.
pub fn create(
    path: &Path,
    build: impl FnOnce(&mut Connection) -> rusqlite::Result<()>,
) -> Result<(), FileError> {
    if path.exists() {
        return Err(FileError::AlreadyExists);
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(FileError::Folder)?;
    }
    let partial = path.with_extension("partial");
    // A leftover of an earlier create that was killed.
    let _ = std::fs::remove_file(&partial);
    // The connection is closed when the closure returns, before the file is moved or removed.
    let built = Connection::open(&partial).and_then(|mut conn| build(&mut conn));
    if let Err(e) = built {
        let _ = std::fs::remove_file(&partial);
        return Err(FileError::Sqlite(e));
    }
    std::fs::rename(&partial, path).map_err(FileError::Folder)
}

/// Opens the existing store file `path`.
pub fn open_existing(path: &Path) -> Result<Connection, FileError> {
    if !path.exists() {
        return Err(FileError::Missing);
    }
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_row(conn: &mut Connection) -> rusqlite::Result<()> {
        conn.execute_batch("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (7);")
    }

    #[test]
    fn a_created_file_opens_with_what_the_build_wrote_in_a_folder_made_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/folder/store.sqlite");
        create(&path, one_row).unwrap();
        let conn = open_existing(&path).unwrap();
        let v: i64 = conn.query_row("SELECT v FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(v, 7);
        assert!(!path.with_extension("partial").exists());
    }

    #[test]
    fn create_refuses_an_existing_file_and_leaves_it_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        std::fs::write(&path, "not a database").unwrap();
        assert!(matches!(
            create(&path, one_row),
            Err(FileError::AlreadyExists)
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"not a database");
    }

    #[test]
    fn a_failed_build_leaves_no_file_and_no_half_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let failing = |conn: &mut Connection| {
            one_row(conn)?;
            conn.execute_batch("INSERT INTO missing_table VALUES (1);")
        };
        assert!(matches!(create(&path, failing), Err(FileError::Sqlite(_))));
        assert!(!path.exists());
        assert!(!path.with_extension("partial").exists());
    }

    #[test]
    fn opening_a_missing_file_is_refused_rather_than_creating_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        assert!(matches!(open_existing(&path), Err(FileError::Missing)));
        assert!(!path.exists());
    }
}
