//! Subcommand dispatch and the error type every command returns.

mod ask;
mod audit;
mod books;
pub(crate) mod catalogue;
mod check;
mod config;
mod demo;
mod eval;
mod mcp;
mod mcp_install;
mod notes;
mod receipts;
pub(crate) mod release;
mod replay;
mod serve;
mod tool_search;
mod tools;
mod wrap;

use std::path::{Path, PathBuf};

use toolgate_wiring::{Store, StoreKind, WiringError};

use crate::cli::{Cli, Command, McpCommands};
use crate::config::{Config, ConfigError};

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] toolgate_books::StoreError),
    #[error(transparent)]
    NotesStore(#[from] toolgate_notes::StoreError),
    #[error(transparent)]
    Import(#[from] toolgate_notes::ImportError),
    #[error(transparent)]
    Undo(#[from] toolgate_notes::UndoError),
    #[error(transparent)]
    Wiring(#[from] WiringError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Model(#[from] toolgate_llm::LlmError),
    #[error(transparent)]
    ModelSpec(#[from] crate::model_spec::ModelSpecError),
    #[error(transparent)]
    Eval(#[from] toolgate_eval::runner::RunnerError),
    #[error(transparent)]
    Suite(#[from] toolgate_eval::suite::SuiteError),
    #[error(transparent)]
    Rescore(#[from] toolgate_eval::rescore::RescoreError),
    #[error(transparent)]
    ToolSearchEval(#[from] toolgate_eval::tool_search::ToolSearchEvalError),
    #[error("{0}")]
    Usage(String),
    #[error("the run did not finish: {0}")]
    RunFailed(String),
    #[error(
        "no run in {dir} met an invalid_argument error, then fixed its own call and passed, so there is no trace pair to show. Unless the eval ran with --unconstrained, the embedded model's calls are grammar-constrained to each tool's schema, so only the tools' own checks (a relative date, an empty tag list) can produce one; run more tasks or sampled runs (--temperature), --unconstrained, or a remote model (--model)"
    )]
    NoTracePair { dir: String },
    #[error(transparent)]
    Serve(#[from] toolgate_mcp::ServeError),
    #[error(transparent)]
    Imports(#[from] toolgate_mcp_client::imports::ImportsError),
    #[error(transparent)]
    OpenImports(#[from] toolgate_wiring::OpenImportsError),
    #[error(transparent)]
    Check(#[from] toolgate_check::CheckError),
    #[error("{0}")]
    ChecksFailed(String),
    #[error("measuring `{call}` failed: {message}")]
    Measurement { call: String, message: String },
    #[error(transparent)]
    Wrap(#[from] toolgate_wiring::wrap::WrapError),
    #[error("{path}: refused, left untouched: {source}")]
    HostFile {
        path: String,
        source: toolgate_wiring::host_config::HostFileError,
    },
}

pub fn run(cli: Cli) -> Result<(), CommandError> {
    // Before any configuration is loaded: trusting one must not need it trusted already.
    if let Command::Config(command) = cli.command {
        return config::run(command);
    }
    // A host's file is edited without any configuration of ours.
    match cli.command {
        Command::Mcp(McpCommands::Install(args)) => return mcp_install::install(&args),
        Command::Mcp(McpCommands::Uninstall(args)) => return mcp_install::uninstall(&args),
        // Compares two files: no configuration needed, none that could refuse to load.
        Command::Catalogue(catalogue::CatalogueCommand::Check(args)) => {
            return catalogue::check(&args);
        }
        // Reads the configuration the manifest names, not the one found here.
        Command::Release(release::ReleaseCommand::Verify(args)) => return release::verify(&args),
        _ => {}
    }
    let config = Config::load(cli.config.as_deref())?;
    match cli.command {
        Command::Tools(args) => tools::run(&config, cli.mcp_config.as_deref(), &args),
        Command::Books(command) => books::run(&config, command),
        Command::Ask(args) => ask::ask(&config, cli.mcp_config.as_deref(), &args),
        Command::Chat(args) => ask::chat(&config, cli.mcp_config.as_deref(), &args),
        Command::Eval(command) => eval::run(&config, command),
        Command::Notes(command) => notes::run(&config, command),
        Command::Demo(args) => demo::run(&config, &args),
        Command::Serve(args) => serve::run(&config, cli.mcp_config.as_deref(), &args),
        Command::Mcp(McpCommands::Imports(command)) => {
            mcp::run(&config, cli.mcp_config.as_deref(), command)
        }
        Command::Mcp(McpCommands::Install(args)) => mcp_install::install(&args),
        Command::Mcp(McpCommands::Uninstall(args)) => mcp_install::uninstall(&args),
        Command::Wrap(args) => wrap::run(config, cli.mcp_config.as_deref(), &args),
        Command::Check(args) => check::run(&config, &args),
        Command::Config(command) => config::run(command),
        Command::Audit(command) => audit::run(&config, command),
        Command::Catalogue(command) => catalogue::run(&config, cli.mcp_config.as_deref(), command),
        Command::Replay(args) => replay::run(&config, &args),
        Command::Receipts(command) => receipts::run(&config, command),
        Command::Release(release::ReleaseCommand::Manifest(args)) => {
            release::manifest(&config, cli.config.as_deref(), &args)
        }
        Command::Release(release::ReleaseCommand::Verify(args)) => release::verify(&args),
    }
}

/// `trace` with the audit beside it: the shared store's table (`shared`, already started) or,
/// without a shared store, the SQLite audit file at `audit_file()`. The guard writes out what
/// the audit holds when dropped: keep it until the last call, and drop it outside the runtime
/// (before the runtime itself).
fn with_audit(
    trace: std::sync::Arc<dyn toolgate_core::trace::TraceSink>,
    shared: Option<toolgate_wiring::shared::PgAudit>,
    audit_file: impl FnOnce() -> Result<PathBuf, CommandError>,
    front: &str,
) -> Result<
    (
        std::sync::Arc<dyn toolgate_core::trace::TraceSink>,
        toolgate_wiring::audit::AuditGuard,
    ),
    CommandError,
> {
    use toolgate_core::trace::Tee;
    use toolgate_wiring::audit::{AuditGuard, FileAudit, instance_name};
    if let Some(audit) = shared {
        let sink = std::sync::Arc::new(Tee(vec![trace, std::sync::Arc::new(audit.clone())]));
        return Ok((sink, AuditGuard::Shared(audit)));
    }
    let file = FileAudit::open(&audit_file()?, instance_name(front))?;
    let sink = std::sync::Arc::new(Tee(vec![trace, file.sink()]));
    Ok((sink, AuditGuard::File(file)))
}

/// Where a command that records calls keeps its SQLite audit file: `flag` (`--audit-db`), else
/// beside the file of the toolset's store (`store`: its kind and `--db`), so the audit lives
/// with the store it audits (as the shared store's table does), else the data folder's.
fn audit_file_of(
    config: &Config,
    flag: Option<&Path>,
    store: Option<(StoreKind, Option<&Path>)>,
) -> Result<PathBuf, CommandError> {
    if let Some(path) = flag {
        return Ok(path.to_path_buf());
    }
    let beside_store = store
        .map(|(kind, db)| config.store_path(kind, db))
        .transpose()?
        .and_then(|path| {
            path.parent()
                .map(|folder| folder.join(toolgate_wiring::audit::AUDIT_FILE))
        });
    match beside_store {
        Some(path) => Ok(path),
        None => Ok(toolgate_wiring::audit::audit_file(None)?),
    }
}

/// A runtime for a server: one worker per core this process may run on (as pinned), so workers
/// never contend for one core.
fn server_runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .enable_io()
        .build()?)
}

/// A runtime for commands that drive the (async) dispatcher.
fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .enable_io()
        .build()?)
}

/// The store of `kind` for a command that runs on `rt`: in the team's shared database when
/// `--store` (or `[store] url`, unless `--db` asks for a file) names one, with that database
/// for approval tickets and audit; else the file, created with its initial contents (and
/// saying so) when missing.
fn open_located_store(
    config: &Config,
    kind: StoreKind,
    db: Option<&Path>,
    store: Option<&str>,
    rt: &tokio::runtime::Runtime,
) -> Result<(Store, Option<toolgate_wiring::SharedStore>), CommandError> {
    match config.shared_store_url(store, db) {
        Some(url) => {
            let (store, shared) = rt.block_on(async {
                let shared = toolgate_wiring::SharedStore::connect(&url).await?;
                let store = shared.store(kind).await?;
                Ok::<_, WiringError>((store, shared))
            })?;
            Ok((store, Some(shared)))
        }
        None => Ok((open_store(kind, &config.store_path(kind, db)?)?, None)),
    }
}

/// Opens the store of `kind` at `path`, creating it with its initial contents (and saying so)
/// when missing.
fn open_store(kind: StoreKind, path: &Path) -> Result<Store, CommandError> {
    if !path.exists() {
        eprintln!(
            "toolgate: creating {} at {}",
            kind.initial_contents(),
            path.display()
        );
    }
    Ok(Store::open_or_init(kind, path)?)
}
