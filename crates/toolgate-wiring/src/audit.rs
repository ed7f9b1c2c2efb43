//! The audit every front end records into: with a team's shared store, its `decisions` table
//! ([`crate::SharedStore::audit`]); otherwise a SQLite audit file, `audit.sqlite`, which the
//! front end places beside the toolset's store file (in the user data folder by default,
//! [`audit_file`]), one for every toolset there and for a gateway that serves none, so a
//! person searches one place (`toolgate audit`).
//!
//! Why a file of its own rather than a table in a toolset's store file: the audit outlives a
//! store's reset (an eval restores the store before every run), covers calls no toolset store
//! sees (a gateway's imported tools), and its writer never waits on a toolset's one connection.
//!
//! Guarantees: an [`AuditGuard`] (the file's, or the shared store's writer) writes what it was
//! given before it is dropped (it waits, at most [`FLUSH_LIMIT`], and says so when that is not
//! enough), so a command that ends right after its last call still leaves every record in the
//! audit. The search API itself is `toolgate-store`'s, re-exported here for the front ends.
//! Refuses: no place for the file (no flag, no data folder) or a file that cannot be opened, at
//! open, before any call is made.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toolgate_core::trace::TraceSink;
/// The audit's search API and its parts ([`AuditStore`], [`query`], [`export`], ...), for the
/// front ends that read the audit.
pub use toolgate_store::audit::*;

use crate::error::WiringError;
use crate::store::data_folder;

/// The audit file's name in the data folder.
pub const AUDIT_FILE: &str = "audit.sqlite";

/// How long dropping a [`FileAudit`] waits for its queue to be written.
pub const FLUSH_LIMIT: Duration = Duration::from_secs(10);

/// The audit file: `flag`, else `<data folder>/audit.sqlite`.
pub fn audit_file(flag: Option<&Path>) -> Result<PathBuf, WiringError> {
    match flag {
        Some(path) => Ok(path.to_path_buf()),
        None => Ok(data_folder()?.join(AUDIT_FILE)),
    }
}

/// What names this process in each row: `front/host/pid`.
pub fn instance_name(front: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{front}/{}/{}", host.trim(), std::process::id())
}

/// A SQLite audit sink that writes what it holds when dropped.
#[derive(Debug)]
pub struct FileAudit {
    sink: SqliteAudit,
}

impl FileAudit {
    /// Opens (creating when missing) the audit file at `path`, recording as `instance`.
    pub fn open(path: &Path, instance: String) -> Result<FileAudit, WiringError> {
        Ok(FileAudit {
            sink: SqliteAudit::open(path, instance)?,
        })
    }

    /// The sink to hand a dispatcher's trace (alongside the JSONL trace, with a `Tee`).
    pub fn sink(&self) -> Arc<dyn TraceSink> {
        Arc::new(self.sink.clone())
    }

    pub fn path(&self) -> &Path {
        self.sink.path()
    }
}

impl Drop for FileAudit {
    fn drop(&mut self) {
        if !self.sink.flush_within(FLUSH_LIMIT) {
            eprintln!(
                "toolgate: the audit file {} did not take the last decision records within {} s; \
                 the JSONL trace (--trace) has them when kept",
                self.sink.path().display(),
                FLUSH_LIMIT.as_secs()
            );
        }
    }
}

/// Keeps a command's audit writing until the command ends: dropped, it waits for the queue.
#[derive(Debug)]
pub enum AuditGuard {
    File(FileAudit),
    /// The shared store's writer (dropped outside the runtime it runs on, it waits there).
    Shared(crate::shared::PgAudit),
}

impl Drop for AuditGuard {
    fn drop(&mut self) {
        // A file audit flushes itself when dropped.
        if let AuditGuard::Shared(audit) = self
            && audit.flush_blocking(FLUSH_LIMIT) == Some(false)
        {
            eprintln!(
                "toolgate: the shared store's audit table did not take the last decision records \
                 within {} s; the JSONL trace (--trace) has them when kept",
                FLUSH_LIMIT.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgate_core::{CallRequest, Dispatcher, Principal};

    #[test]
    fn the_flag_wins_and_the_default_is_in_the_data_folder() {
        let flag = Path::new("/tmp/elsewhere/audit.sqlite");
        assert_eq!(audit_file(Some(flag)).unwrap(), flag);
        if let Ok(folder) = data_folder() {
            assert_eq!(audit_file(None).unwrap(), folder.join(AUDIT_FILE));
        }
    }

    #[test]
    fn a_dropped_file_audit_has_written_every_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/audit.sqlite");
        let audit = FileAudit::open(&path, instance_name("test")).unwrap();
        let registry = toolgate_core::Registry::new(Vec::new()).unwrap();
        let dispatcher = Dispatcher::new(Arc::new(registry))
            .unwrap()
            .with_trace(audit.sink());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            for i in 0..20 {
                let call = CallRequest::new(
                    Principal::local("alice", &[]),
                    "run-1",
                    "no_such_tool",
                    json!({"i": i}),
                );
                assert!(dispatcher.call(call).await.is_error());
            }
        });
        drop(dispatcher);
        drop(audit);
        let conn = rusqlite::Connection::open(&path).unwrap();
        let (count, refused): (i64, i64) = conn
            .query_row(
                "SELECT count(*), sum(outcome = 'not_found') FROM decisions WHERE principal = 'alice'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((count, refused), (20, 20));
    }
}
