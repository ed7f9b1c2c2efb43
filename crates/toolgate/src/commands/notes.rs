//! `toolgate notes init|reset|import|undo`.

use toolgate_notes::{NotesStore, import_dir, undo_last};

use toolgate_wiring::StoreKind;

use super::CommandError;
use crate::cli::NotesCommand;
use crate::config::Config;

fn count_notes(store: &NotesStore) -> i64 {
    store
        .with_conn(|c| {
            c.query_row("SELECT count(*) FROM notes", [], |r| r.get(0))
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

pub fn run(config: &Config, command: NotesCommand) -> Result<(), CommandError> {
    match command {
        NotesCommand::Init { db, empty } => {
            let path = config.store_path(StoreKind::Notes, db.as_deref())?;
            let store = if empty {
                NotesStore::init(&path)?
            } else {
                NotesStore::init_sample(&path)?
            };
            let what = if empty {
                "an empty notebook"
            } else {
                "the sample notebook"
            };
            println!(
                "created {} with {what} ({} notes)",
                store.path().display(),
                count_notes(&store)
            );
        }
        NotesCommand::Reset { db } => {
            let store = NotesStore::open(&config.store_path(StoreKind::Notes, db.as_deref())?)?;
            store.reset()?;
            println!(
                "restored {} to what it was created with ({} notes; drafts, receipts and undo history cleared)",
                store.path().display(),
                count_notes(&store)
            );
        }
        NotesCommand::Import { dir, db } => {
            let path = config.store_path(StoreKind::Notes, db.as_deref())?;
            let store = if path.exists() {
                NotesStore::open(&path)?
            } else {
                NotesStore::init(&path)?
            };
            let report = import_dir(&store, &dir)?;
            for file in &report.imported {
                println!(
                    "imported  {} -> note {} \"{}\"",
                    file.file, file.id, file.title
                );
            }
            for file in &report.duplicates {
                println!("duplicate {} (already there)", file.file);
            }
            for file in &report.rejected {
                eprintln!("rejected  {}: {}", file.file, file.reason);
            }
            if !report.ignored.is_empty() {
                println!(
                    "ignored {} file(s) that are not Markdown",
                    report.ignored.len()
                );
            }
            println!(
                "{} imported, {} duplicate(s), {} rejected into {}",
                report.imported.len(),
                report.duplicates.len(),
                report.rejected.len(),
                store.path().display()
            );
            if !report.rejected.is_empty() {
                return Err(CommandError::RunFailed(format!(
                    "{} file(s) were rejected (listed above); fix them and import again",
                    report.rejected.len()
                )));
            }
        }
        NotesCommand::Undo { count, db } => {
            let store = NotesStore::open(&config.store_path(StoreKind::Notes, db.as_deref())?)?;
            let undone = undo_last(&store, count as usize)?;
            if undone.is_empty() {
                println!("nothing to undo");
            }
            for action in &undone {
                println!("undid {}: {}", action.tool, action.summary);
            }
        }
    }
    Ok(())
}
