//! `code_execution` beside a toolset: the sandbox it runs in, the tools its scripts may call
//! (every other tool of the dispatcher), and for the notes toolset the notebook exported
//! read-only into each run.
//!
//! Guarantees: the sandbox is checked when the dispatcher is built (bubblewrap, the
//! interpreter and the init must exist), so a front end that offers code fails at start with
//! the layer and its fix rather than at the model's first script; `tool_search` and
//! `code_execution` itself are not callable from code.

use std::path::Path;
use std::sync::Arc;

use toolgate_core::Tool;
use toolgate_notes::NotesStore;
use toolgate_sandbox::{
    CodeTool, DataExport, FailedScripts, Paging, Sandbox, SandboxConfig, Workspaces,
};

use crate::error::WiringError;
use crate::store::Store;

/// Offer `code_execution` with this sandbox.
#[derive(Debug, Clone)]
pub struct CodeOptions {
    pub sandbox: SandboxConfig,
    /// Mount the notebook read-only at `/sandbox/data` (notes toolset only).
    pub export_notes: bool,
    /// Whether scripts also get `<tool>_all` for each paged tool (`toolgate_sandbox::Paging`).
    pub paging: Paging,
    /// Whether a script that fails comes back as a refused call (`toolgate_sandbox::FailedScripts`).
    pub failed_scripts: FailedScripts,
}

/// The notebook, exported fresh for every script (a script sees what the tools would).
struct NotesExport {
    store: NotesStore,
}

impl DataExport for NotesExport {
    fn export(&self, into: &Path) -> Result<String, String> {
        let summary = self
            .store
            .with_conn(|conn| toolgate_notes::export::export_notebook(conn, into))
            .and_then(|r| r)
            .map_err(|e| e.message)?;
        Ok(format!(
            "{} notes ({} untrusted)",
            summary.notes, summary.untrusted
        ))
    }
}

/// Tools a script may not call.
const NOT_FROM_CODE: &[&str] = &[toolgate_sandbox::tool::TOOL_NAME, "tool_search"];

/// The `code_execution` tool for a dispatcher of `tools` on `store`.
pub fn code_tool(
    options: &CodeOptions,
    store: &Store,
    tools: &[Tool],
) -> Result<Tool, WiringError> {
    let sandbox = Sandbox::new(options.sandbox.clone())?;
    let data: Option<Arc<dyn DataExport>> = match (options.export_notes, store) {
        (true, Store::Notes(notes)) => Some(Arc::new(NotesExport {
            store: notes.clone(),
        })),
        (true, Store::Books(_)) => {
            return Err(WiringError::Sandbox(
                toolgate_sandbox::SandboxError::Config(
                    "only the notes toolset can export its data into the sandbox".to_owned(),
                ),
            ));
        }
        (false, _) => None,
    };
    let views = tools
        .iter()
        .filter(|t| !NOT_FROM_CODE.contains(&t.spec.name.as_str()))
        .map(|t| t.spec.model_view())
        .collect();
    let workspaces = Arc::new(Workspaces::with_limit(sandbox.config().limits.work_bytes)?);
    Ok(toolgate_sandbox::code_execution(CodeTool {
        sandbox,
        workspaces,
        tools: views,
        data,
        paging: options.paging,
        failed_scripts: options.failed_scripts,
    })?)
}
