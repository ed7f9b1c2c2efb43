//! The top-k search index's life beside one notebook file ([`crate::search_index`]): where it
//! lives (the folder `<notebook file>.search-index`), which notebooks get one
//! ([`IndexPolicy`]: large ones, where FTS5's ranking of every match is what a search waits
//! for), building it on a thread of its own while FTS5 answers, opening it again on the next
//! start, and rebuilding it when it is not this notebook's as it is now, or when a search finds
//! it further behind than a search should wait for (more than
//! [`crate::search_index::MAX_CATCH_UP_CHANGES`] changes: a reset, a large import).
//!
//! Guarantees: a search never waits for a build and never reads an index that is behind: until
//! the index is ready, and whenever it cannot catch up or answer, `notes_search` ranks with
//! FTS5 and gives the same page. One process owns a notebook's index at a time (an exclusive
//! lock on `<folder>.lock`, held while the store lives): another process opening the same
//! notebook searches with FTS5 and never touches the folder. A build goes to `<folder>.partial`
//! and replaces the folder only when complete, so a crash leaves the old index or none, never a
//! half one. Refuses nothing the caller must handle: what went wrong is kept as the
//! [`IndexState`] a command can show.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::search_index::{IndexError, SearchIndex};

/// Which notebooks get an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexPolicy {
    /// None: FTS5 ranks every search.
    Off,
    /// Notebooks whose highest note id is at least this (ids are never reused, so it bounds the
    /// notes ever written; a notebook that grows past it gets its index on the next start).
    FromNotes(i64),
}

/// At 10,000 notes FTS5 answers the query mix in 6 ms at p99; at 100,000 in 62 ms
/// (docs/measurements.md): the index pays for its folder and its build from here.
pub const DEFAULT_MIN_NOTES: i64 = 20_000;

impl Default for IndexPolicy {
    fn default() -> Self {
        IndexPolicy::FromNotes(DEFAULT_MIN_NOTES)
    }
}

/// Where a notebook's index is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexState {
    /// Being opened, caught up or built; FTS5 answers meanwhile.
    Preparing,
    /// In use.
    Ready,
    /// Not used; why (another process owns it, or it could not be built).
    Unavailable(String),
}

/// The index folder of the notebook file `db`.
pub fn index_dir(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".search-index");
    PathBuf::from(name)
}

/// `dir` with `suffix` added to its name.
fn beside(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// What a preparing thread does.
#[derive(Debug, Clone, Copy)]
enum Preparation {
    /// Open the folder's index and catch it up, or build one when it cannot be used.
    OpenOrBuild,
    /// Build a new one in place of the folder's.
    Rebuild,
}

enum State {
    Preparing,
    Ready(Arc<SearchIndex>),
    Unavailable(String),
}

/// One notebook's index, owned by this process while the store lives.
pub struct NotebookIndex {
    /// The notebook file, its `search_index_id`, and the index folder.
    db: PathBuf,
    notebook: String,
    dir: PathBuf,
    state: Mutex<State>,
    settled: Condvar,
    /// Notes indexed by a build under way.
    indexed: Arc<AtomicU64>,
    /// The exclusive lock on the folder (released when the last store clone is dropped).
    _lock: Option<File>,
}

impl std::fmt::Debug for NotebookIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotebookIndex")
            .field("state", &self.state())
            .finish()
    }
}

impl NotebookIndex {
    /// Starts preparing the index of the notebook file `db`, whose `search_index_id` is
    /// `notebook`: opened (and caught up) when its folder holds this notebook's, else built.
    pub fn start(db: &Path, notebook: String) -> Arc<Self> {
        let dir = index_dir(db);
        let (state, lock) = match lock_folder(&dir) {
            Ok(lock) => (State::Preparing, Some(lock)),
            Err(why) => (State::Unavailable(why), None),
        };
        let owned = lock.is_some();
        let index = Arc::new(NotebookIndex {
            db: db.to_path_buf(),
            notebook,
            dir,
            state: Mutex::new(state),
            settled: Condvar::new(),
            indexed: Arc::new(AtomicU64::new(0)),
            _lock: lock,
        });
        if owned {
            index.prepare_on_a_thread(Preparation::OpenOrBuild);
        }
        index
    }

    /// Prepares the index on a thread of its own; the state is `Preparing` until it settles.
    fn prepare_on_a_thread(self: &Arc<Self>, how: Preparation) {
        let worker = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("notes-search-index".into())
            .spawn(move || {
                let prepared = worker.prepare(how);
                let outcome = match prepared {
                    Ok(ready) => State::Ready(Arc::new(ready)),
                    Err(e) => State::Unavailable(format!("it could not be prepared: {e}")),
                };
                worker.settle(outcome);
            });
        if let Err(e) = spawned {
            self.settle(State::Unavailable(format!(
                "no thread could be started to prepare it: {e}"
            )));
        }
    }

    fn settle(&self, outcome: State) {
        if let Ok(mut state) = self.state.lock() {
            *state = outcome;
        }
        self.settled.notify_all();
    }

    /// The index, when it is ready. One that a search found too far behind to catch up
    /// ([`SearchIndex::is_stale`]) is not: it is rebuilt on a thread, FTS5 answering meanwhile.
    pub fn ready(self: &Arc<Self>) -> Option<Arc<SearchIndex>> {
        let mut state = self.state.lock().ok()?;
        let index = match &*state {
            State::Ready(index) => Arc::clone(index),
            State::Preparing | State::Unavailable(_) => return None,
        };
        if !index.is_stale() {
            return Some(index);
        }
        // The old index is dropped here (searches under way keep their handle) before the new
        // one replaces its folder.
        *state = State::Preparing;
        self.indexed.store(0, Ordering::Relaxed);
        drop(state);
        drop(index);
        self.prepare_on_a_thread(Preparation::Rebuild);
        None
    }

    pub fn state(&self) -> IndexState {
        match self.state.lock().as_deref() {
            Ok(State::Preparing) => IndexState::Preparing,
            Ok(State::Ready(_)) => IndexState::Ready,
            Ok(State::Unavailable(why)) => IndexState::Unavailable(why.clone()),
            Err(_) => IndexState::Unavailable("its state lock was poisoned".into()),
        }
    }

    /// Notes a build under way has indexed so far (0 when it opened an existing index).
    pub fn notes_indexed(&self) -> u64 {
        self.indexed.load(Ordering::Relaxed)
    }

    /// Waits at most `timeout` for the index to be ready or unavailable; its state then.
    pub fn wait(&self, timeout: Duration) -> IndexState {
        let deadline = Instant::now() + timeout;
        let Ok(mut state) = self.state.lock() else {
            return self.state();
        };
        while matches!(*state, State::Preparing) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.settled.wait_timeout(state, left) {
                Ok((next, _)) => state = next,
                Err(_) => return IndexState::Unavailable("its state lock was poisoned".into()),
            }
        }
        drop(state);
        self.state()
    }
}

/// Takes the folder's lock, or says who has it.
fn lock_folder(dir: &Path) -> Result<File, String> {
    let path = beside(dir, ".lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("its lock file {} cannot be opened: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => {
            Err("another process keeps this notebook's search index; searches here use FTS5".into())
        }
        Err(TryLockError::Error(e)) => Err(format!("its lock file cannot be locked: {e}")),
    }
}

impl NotebookIndex {
    /// Opens and catches up the folder's index (unless asked to rebuild it), or builds a new
    /// one when there is none or it is not this notebook's; then drops the changes it holds
    /// from the notebook's log.
    fn prepare(&self, how: Preparation) -> Result<SearchIndex, IndexError> {
        let (dir, notebook) = (self.dir.as_path(), self.notebook.as_str());
        let conn = Connection::open(&self.db)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        let reopened = match how {
            Preparation::OpenOrBuild => dir.exists().then(|| {
                SearchIndex::open(dir, notebook).and_then(|i| i.catch_up(&conn).map(|()| i))
            }),
            Preparation::Rebuild => None,
        };
        let index = match reopened {
            Some(Ok(index)) => index,
            // Missing, stale, damaged or of another version: a new one replaces it.
            Some(Err(_)) | None => rebuild(&conn, dir, notebook, &self.indexed)?,
        };
        prune_log(&conn, &index)?;
        Ok(index)
    }
}

/// Drops the changes the index holds from the notebook's log, keeping the last one applied (the
/// position the index is compared with). Best effort: a busy notebook keeps its log until the
/// next preparation.
fn prune_log(conn: &Connection, index: &SearchIndex) -> Result<(), IndexError> {
    let _ = conn.execute(
        "DELETE FROM notes_search_changes WHERE seq < ?1",
        [index.applied()?],
    );
    Ok(())
}

/// Builds the index in `<dir>.partial`, then puts it in place of `dir`.
fn rebuild(
    conn: &Connection,
    dir: &Path,
    notebook: &str,
    indexed: &AtomicU64,
) -> Result<SearchIndex, IndexError> {
    let partial = beside(dir, ".partial");
    if partial.exists() {
        std::fs::remove_dir_all(&partial)?;
    }
    std::fs::create_dir_all(&partial)?;
    // Built, committed and closed before it moves: an open index keeps writing to its path.
    drop(SearchIndex::build_counting(
        conn,
        Some(&partial),
        notebook,
        indexed,
    )?);
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::rename(&partial, dir)?;
    let index = SearchIndex::open(dir, notebook)?;
    index.catch_up(conn)?;
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_and_its_companions_sit_beside_the_notebook_file() {
        let dir = index_dir(Path::new("/home/me/notes.sqlite"));
        assert_eq!(dir, Path::new("/home/me/notes.sqlite.search-index"));
        assert_eq!(
            beside(&dir, ".lock"),
            Path::new("/home/me/notes.sqlite.search-index.lock")
        );
    }
}
