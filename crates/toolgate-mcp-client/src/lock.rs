//! The pin lock file (`toolgate-mcp.lock`, JSON): each server's [`ServerPins`]. Written whole to
//! a temporary file beside it and renamed into place, so a crash never leaves half a lock (a
//! half-written lock would unpin, or quarantine, everything). A lock that cannot be read is an
//! error, never an empty lock: reading it as empty would accept whatever the servers now say.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::pins::ServerPins;

/// The lock file's contents.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinLock {
    /// Format version; this code reads and writes 1.
    pub version: u32,
    pub servers: BTreeMap<String, ServerPins>,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot read the pin lock {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "the pin lock {path} is not valid ({reason}); fix or remove it, then pin again with `toolgate mcp pin`"
    )]
    Invalid { path: String, reason: String },
    #[error("cannot write the pin lock {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

pub const LOCK_VERSION: u32 = 1;

impl PinLock {
    /// The lock at `path`; an absent file is an empty lock (nothing pinned yet).
    pub fn load(path: &Path) -> Result<PinLock, LockError> {
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(PinLock {
                    version: LOCK_VERSION,
                    servers: BTreeMap::new(),
                });
            }
            Err(source) => {
                return Err(LockError::Read {
                    path: shown,
                    source,
                });
            }
        };
        let lock: PinLock = serde_json::from_str(&text).map_err(|e| LockError::Invalid {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        if lock.version != LOCK_VERSION {
            return Err(LockError::Invalid {
                path: shown,
                reason: format!(
                    "version {} (this toolgate reads {LOCK_VERSION})",
                    lock.version
                ),
            });
        }
        Ok(lock)
    }

    /// Writes the lock to `path`, replacing it whole.
    pub fn save(&self, path: &Path) -> Result<(), LockError> {
        let shown = path.display().to_string();
        let error = |source| LockError::Write {
            path: shown.clone(),
            source,
        };
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut partial = tempfile::NamedTempFile::new_in(folder).map_err(error)?;
        let mut text =
            serde_json::to_string_pretty(self).map_err(|e| error(std::io::Error::other(e)))?;
        text.push('\n');
        partial.write_all(text.as_bytes()).map_err(error)?;
        partial.as_file().sync_all().map_err(error)?;
        partial.persist(path).map_err(|e| error(e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pins::pin;
    use serde_json::json;

    #[test]
    fn a_saved_lock_reads_back_the_same_and_replaces_the_old_one_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolgate-mcp.lock");
        let mut lock = PinLock::load(&path).unwrap();
        assert!(lock.servers.is_empty());
        lock.servers.insert(
            "files".into(),
            pin(&[json!({"name": "read_file", "description": "Reads.", "inputSchema": {"type": "object"}})]),
        );
        lock.save(&path).unwrap();
        assert_eq!(PinLock::load(&path).unwrap(), lock);
        lock.servers.clear();
        lock.save(&path).unwrap();
        assert_eq!(PinLock::load(&path).unwrap(), lock);
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left beside the lock");
    }

    #[test]
    fn an_unreadable_lock_is_an_error_and_never_an_empty_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolgate-mcp.lock");
        for bad in [
            "{",
            r#"{"version": 2, "servers": {}}"#,
            r#"{"servers": {}, "extra": 1}"#,
        ] {
            std::fs::write(&path, bad).unwrap();
            let error = PinLock::load(&path).unwrap_err();
            assert!(matches!(error, LockError::Invalid { .. }), "{bad}: {error}");
            assert!(error.to_string().contains("toolgate mcp pin"), "{error}");
        }
    }
}
