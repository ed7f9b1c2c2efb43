//! Wiring a toolset to its store and exits: the one place the CLI turns a toolset name into
//! tools.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolgate_books::{BooksStore, Toolset};
use toolgate_core::Tool;
use toolgate_core::trace::TraceSink;
use toolgate_egress::{Egress, Resolver, SmtpRelay, SystemResolver};
use toolgate_notes::NotesStore;

use crate::cli::ToolsetName;
use crate::commands::CommandError;
use crate::config::Config;

/// A toolset ready for a dispatcher.
pub struct Wired {
    pub name: &'static str,
    pub tools: Vec<Tool>,
    pub store_path: PathBuf,
}

pub fn toolset_name(name: ToolsetName) -> &'static str {
    match name {
        ToolsetName::BooksV1 => Toolset::V1.name(),
        ToolsetName::BooksV2 => Toolset::V2.name(),
        ToolsetName::Notes => "notes",
    }
}

/// Opens (creating on first use) the toolset's store and binds its tools; the notes toolset
/// also gets the egress exit and, when configured, the SMTP relay, both tracing to `trace`.
pub fn wire(
    config: &Config,
    name: ToolsetName,
    db: Option<&Path>,
    trace: Arc<dyn TraceSink>,
) -> Result<Wired, CommandError> {
    match name {
        ToolsetName::BooksV1 | ToolsetName::BooksV2 => {
            let path = config.books_db(db)?;
            if !path.exists() {
                eprintln!(
                    "toolgate: creating the book catalogue at {}",
                    path.display()
                );
            }
            let store = BooksStore::open_or_init(&path)?;
            let toolset = if name == ToolsetName::BooksV1 {
                Toolset::V1
            } else {
                Toolset::V2
            };
            Ok(Wired {
                name: toolset.name(),
                tools: toolset.tools(&store)?,
                store_path: path,
            })
        }
        ToolsetName::Notes => {
            let path = config.notes_db(db)?;
            if !path.exists() {
                eprintln!(
                    "toolgate: creating the sample notebook at {}",
                    path.display()
                );
            }
            let store = NotesStore::open_or_init_sample(&path)?;
            let (egress, relay) = exits(config, trace)?;
            Ok(Wired {
                name: "notes",
                tools: toolgate_notes::assistant_tools(&store, egress, relay)?,
                store_path: path,
            })
        }
    }
}

/// The egress exit and the SMTP relay (if configured) from the config.
pub fn exits(
    config: &Config,
    trace: Arc<dyn TraceSink>,
) -> Result<(Arc<Egress>, Option<Arc<SmtpRelay>>), CommandError> {
    let resolver: Arc<dyn Resolver> = Arc::new(SystemResolver);
    let egress = Egress::new(
        config.egress.clone(),
        Arc::clone(&resolver),
        Arc::clone(&trace),
    )?;
    let relay = match &config.smtp {
        Some(smtp) => {
            let policy = config.egress_policy()?;
            Some(Arc::new(SmtpRelay::new(
                smtp.clone(),
                &policy,
                resolver,
                trace,
            )?))
        }
        None => None,
    };
    Ok((Arc::new(egress), relay))
}
