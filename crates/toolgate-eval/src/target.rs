//! What an eval runs against: a toolset and the store it works on, restored before every run.

use std::path::Path;
use std::sync::Arc;

use toolgate_books::{BooksStore, Toolset};
use toolgate_core::trace::TraceSink;
use toolgate_core::{Tool, ToolError};
use toolgate_egress::{AllowEntry, Egress, EgressConfig, SystemResolver};
use toolgate_notes::NotesStore;

use crate::runner::RunnerError;
use crate::suite::StoreKind;

/// A toolset an eval can compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvalToolset {
    Books(Toolset),
    Notes,
}

impl EvalToolset {
    pub fn name(self) -> &'static str {
        match self {
            EvalToolset::Books(t) => t.name(),
            EvalToolset::Notes => "notes",
        }
    }

    pub fn store(self) -> StoreKind {
        match self {
            EvalToolset::Books(_) => StoreKind::Books,
            EvalToolset::Notes => StoreKind::Notes,
        }
    }
}

/// The store of a suite.
pub enum EvalStore {
    Books(BooksStore),
    Notes(NotesStore),
}

impl EvalStore {
    /// Opens (or creates) the store of `kind` at `path`.
    pub fn open(kind: StoreKind, path: &Path) -> Result<EvalStore, RunnerError> {
        Ok(match kind {
            StoreKind::Books => EvalStore::Books(BooksStore::open_or_init(path)?),
            StoreKind::Notes => EvalStore::Notes(
                NotesStore::open_or_init_sample(path)
                    .map_err(|e| RunnerError::Usage(e.to_string()))?,
            ),
        })
    }

    pub fn reset(&self) -> Result<(), RunnerError> {
        match self {
            EvalStore::Books(s) => s.reset().map_err(RunnerError::from),
            EvalStore::Notes(s) => s.reset().map_err(|e| RunnerError::Usage(e.to_string())),
        }
    }

    pub fn with_conn<T>(
        &self,
        work: impl FnOnce(&mut rusqlite::Connection) -> T,
    ) -> Result<T, ToolError> {
        match self {
            EvalStore::Books(s) => s.with_conn(work),
            EvalStore::Notes(s) => s.with_conn(work),
        }
    }

    /// The toolset's tools on this store. Notes tools reach the web only through an egress
    /// exit that allows nothing but the eval's own page server (when there is one); there is
    /// no mail relay, so nothing can be sent.
    pub fn tools(
        &self,
        toolset: EvalToolset,
        pages_port: Option<u16>,
        trace: Arc<dyn TraceSink>,
    ) -> Result<Vec<Tool>, RunnerError> {
        match (self, toolset) {
            (EvalStore::Books(s), EvalToolset::Books(t)) => Ok(t.tools(s)?),
            (EvalStore::Notes(s), EvalToolset::Notes) => {
                let allow = pages_port
                    .map(|port| {
                        vec![AllowEntry {
                            host: "127.0.0.1".into(),
                            schemes: vec!["http".into()],
                            ports: Some(vec![port]),
                            allow_private: true,
                        }]
                    })
                    .unwrap_or_default();
                let config = EgressConfig {
                    allow,
                    ..EgressConfig::default()
                };
                let egress = Egress::new(config, Arc::new(SystemResolver), trace)
                    .map_err(|e| RunnerError::Usage(format!("eval egress: {e}")))?;
                Ok(toolgate_notes::assistant_tools(s, Arc::new(egress), None)?)
            }
            (_, t) => Err(RunnerError::Usage(format!(
                "toolset {} does not work on this suite's store",
                t.name()
            ))),
        }
    }
}
