//! The stores the toolsets work on: the book catalogue and the notebook, behind one type.
//!
//! Guarantees: [`Store::open`] opens only an existing store of the asked kind (each store's own
//! checks refuse a file of the wrong kind); [`Store::open_or_init`] creates a missing one with
//! its initial contents (the 300-book catalogue, the sample notebook); [`Store::reset`]
//! restores those contents. [`StoreConfig::path`] picks a store's file: the flag, else the
//! configured file, else the user data folder, and refuses ([`WiringError::NoDataFolder`])
//! when there is none.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toolgate_books::BooksStore;
use toolgate_core::ToolError;
use toolgate_notes::NotesStore;

use crate::error::WiringError;
use crate::toolset::StoreKind;

/// An open store of one kind.
pub enum Store {
    Books(BooksStore),
    Notes(NotesStore),
}

impl Store {
    /// Opens the existing store of `kind` at `path`.
    pub fn open(kind: StoreKind, path: &Path) -> Result<Store, WiringError> {
        Ok(match kind {
            StoreKind::Books => Store::Books(BooksStore::open(path)?),
            StoreKind::Notes => Store::Notes(NotesStore::open(path)?),
        })
    }

    /// Opens the store of `kind` at `path`, creating it with its initial contents when missing.
    pub fn open_or_init(kind: StoreKind, path: &Path) -> Result<Store, WiringError> {
        Ok(match kind {
            StoreKind::Books => Store::Books(BooksStore::open_or_init(path)?),
            StoreKind::Notes => Store::Notes(NotesStore::open_or_init_sample(path)?),
        })
    }

    pub fn kind(&self) -> StoreKind {
        match self {
            Store::Books(_) => StoreKind::Books,
            Store::Notes(_) => StoreKind::Notes,
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            Store::Books(s) => s.path(),
            Store::Notes(s) => s.path(),
        }
    }

    /// Restores the contents the store was created with.
    pub fn reset(&self) -> Result<(), WiringError> {
        match self {
            Store::Books(s) => Ok(s.reset()?),
            Store::Notes(s) => Ok(s.reset()?),
        }
    }

    /// Runs `work` on the store's connection on this thread (for checks and commands).
    pub fn with_conn<T>(
        &self,
        work: impl FnOnce(&mut rusqlite::Connection) -> T,
    ) -> Result<T, ToolError> {
        match self {
            Store::Books(s) => s.with_conn(work),
            Store::Notes(s) => s.with_conn(work),
        }
    }
}

/// Where one store lives (`[books]` / `[notes]` in `toolgate.toml`).
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// The database file.
    pub db: Option<PathBuf>,
}

impl StoreConfig {
    /// The file of the store of `kind`: `flag`, else the configured file, else
    /// `<data folder>/toolgate/<kind's default file>`.
    pub fn path(&self, kind: StoreKind, flag: Option<&Path>) -> Result<PathBuf, WiringError> {
        if let Some(p) = flag.or(self.db.as_deref()) {
            return Ok(p.to_path_buf());
        }
        Ok(data_folder()?.join(kind.default_file()))
    }
}

/// `$XDG_DATA_HOME/toolgate`, else `$HOME/.local/share/toolgate`.
/// The user data folder: `$XDG_DATA_HOME/toolgate`, else `~/.local/share/toolgate`.
pub fn data_folder() -> Result<PathBuf, WiringError> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("toolgate"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".local/share/toolgate"))
        .ok_or(WiringError::NoDataFolder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_opens_resets_and_refuses_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        for kind in [StoreKind::Books, StoreKind::Notes] {
            let path = dir.path().join(kind.default_file());
            assert!(Store::open(kind, &path).is_err(), "{kind:?}");
            let store = Store::open_or_init(kind, &path).unwrap();
            assert_eq!(store.kind(), kind);
            assert_eq!(store.path(), path);
            store.reset().unwrap();
            let again = Store::open(kind, &path).unwrap();
            assert_eq!(again.kind(), kind);
        }
    }

    #[test]
    fn the_flag_wins_over_the_configured_file() {
        let configured = StoreConfig {
            db: Some(PathBuf::from("conf.sqlite")),
        };
        let flag = Path::new("flag.sqlite");
        assert_eq!(configured.path(StoreKind::Books, Some(flag)).unwrap(), flag);
        assert_eq!(
            configured.path(StoreKind::Notes, None).unwrap(),
            Path::new("conf.sqlite")
        );
    }
}
