//! Importing a folder of Markdown notes (the format is in [`crate::frontmatter`]).
//!
//! Which files: every `.md` or `.markdown` file under the folder, sub-folders included, in
//! path order; names starting with `.` (hidden files and folders) and symbolic links are
//! skipped; other files are counted as ignored. A file in a sub-folder goes to the notebook
//! named after its top sub-folder unless its front matter names one; a file at the top goes to
//! `Inbox`. A file without a `created` date gets its modification date.
//!
//! Guarantees: every file is read and parsed before anything is written; a file that cannot be
//! read, is not UTF-8, is larger than [`MAX_FILE_BYTES`] or does not parse is rejected by name
//! with the reason and nothing of it is imported; the good files are written in one
//! transaction, so a store failure imports nothing; a file identical to a note already in the
//! store (same title, created date and text) is reported as a duplicate, not imported twice.

use std::path::{Path, PathBuf};

use serde::Serialize;
use toolgate_core::clock::{SystemClock, civil_from_unix_days, unix_secs};
use toolgate_core::sql::{SqlError, in_write_transaction};
use toolgate_core::{Clock, ToolError, sql_params};

use crate::frontmatter::note_from_markdown;
use crate::rows::{self, NewNote};
use crate::store::NotesStore;

/// Files larger than this are rejected.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// What an import did, file by file (paths relative to the imported folder, `/`-separated).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    pub imported: Vec<ImportedFile>,
    pub duplicates: Vec<DuplicateFile>,
    pub rejected: Vec<RejectedFile>,
    /// Files that are not Markdown (or are links), left alone.
    pub ignored: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportedFile {
    pub file: String,
    pub id: i64,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DuplicateFile {
    pub file: String,
    pub existing_id: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedFile {
    pub file: String,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path} is not a folder; pass the folder that holds the Markdown files")]
    NotAFolder { path: String },
    #[error("cannot list {path}: {source}")]
    List {
        path: String,
        source: std::io::Error,
    },
    #[error("the store failed while importing into {path}, nothing was imported: {source}")]
    Store { path: String, source: SqlError },
    #[error("the notes store {path} is unavailable, nothing was imported: {source}")]
    Unavailable {
        path: String,
        source: Box<ToolError>,
    },
}

fn is_markdown(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("md") || e.eq_ignore_ascii_case("markdown"))
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Every entry under `dir`, files only, sorted by path; links and hidden names are reported
/// separately as ignored.
fn walk(
    dir: &Path,
    files: &mut Vec<PathBuf>,
    ignored: &mut Vec<PathBuf>,
) -> Result<(), ImportError> {
    let list = |source| ImportError::List {
        path: dir.display().to_string(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(list)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(list)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let kind = entry.file_type().map_err(list)?;
        if kind.is_dir() {
            walk(&path, files, ignored)?;
        } else if kind.is_file() && is_markdown(&path) {
            files.push(path);
        } else {
            ignored.push(path);
        }
    }
    Ok(())
}

fn date_of(modified: std::io::Result<std::time::SystemTime>) -> Option<String> {
    let secs = unix_secs(modified.ok()?);
    let (y, m, d) = civil_from_unix_days(i64::try_from(secs / 86_400).ok()?);
    Some(format!("{y:04}-{m:02}-{d:02}"))
}

/// Reads and parses one file into a note.
fn read_note(root: &Path, path: &Path, today: &str) -> Result<NewNote, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "it has {} bytes; notes larger than {MAX_FILE_BYTES} bytes are not imported",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "it is not UTF-8 text (bad byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    let rel = path.strip_prefix(root).unwrap_or(path);
    let notebook = match rel.parent().and_then(|p| p.components().next()) {
        Some(top) => top.as_os_str().to_string_lossy().into_owned(),
        None => crate::tools::DEFAULT_NOTEBOOK.to_string(),
    };
    let created = date_of(meta.modified()).unwrap_or_else(|| today.to_string());
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    note_from_markdown(&name, &text, &notebook, &created).map_err(|e| e.to_string())
}

/// Imports the Markdown files under `dir` into `store`; see the module documentation.
pub fn import_dir(store: &NotesStore, dir: &Path) -> Result<ImportReport, ImportError> {
    if !dir.is_dir() {
        return Err(ImportError::NotAFolder {
            path: dir.display().to_string(),
        });
    }
    let mut files = Vec::new();
    let mut ignored = Vec::new();
    walk(dir, &mut files, &mut ignored)?;
    let today = SystemClock.today();
    let mut report = ImportReport {
        ignored: ignored.iter().map(|p| relative(dir, p)).collect(),
        ..ImportReport::default()
    };
    let mut parsed = Vec::new();
    for path in &files {
        let file = relative(dir, path);
        match read_note(dir, path, &today) {
            Ok(note) => parsed.push((file, note)),
            Err(reason) => report.rejected.push(RejectedFile { file, reason }),
        }
    }
    let shown = store.path().display().to_string();
    let written = store
        .with_sql(|session| {
            Ok(in_write_transaction(session, |tx| {
                let mut imported = Vec::new();
                let mut duplicates = Vec::new();
                for (file, note) in parsed {
                    let existing = tx
                        .query_opt(
                            "SELECT id FROM notes WHERE title = ?1 AND created = ?2 AND body = ?3
                             ORDER BY id LIMIT 1",
                            sql_params![&note.title, &note.created, &note.body],
                        )?
                        .map(|r| r.i64(0))
                        .transpose()?;
                    match existing {
                        Some(existing_id) => duplicates.push(DuplicateFile { file, existing_id }),
                        None => {
                            let id = rows::insert(tx, &note)?;
                            imported.push(ImportedFile {
                                file,
                                id,
                                title: note.title,
                            });
                        }
                    }
                }
                Ok::<_, SqlError>((imported, duplicates))
            }))
        })
        .map_err(|source| ImportError::Unavailable {
            path: shown.clone(),
            source: Box::new(source),
        })?;
    let (imported, duplicates) = written.map_err(|source| ImportError::Store {
        path: shown,
        source,
    })?;
    report.imported = imported;
    report.duplicates = duplicates;
    Ok(report)
}
