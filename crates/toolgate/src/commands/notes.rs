//! `toolgate notes init|reset|import|undo`.

use toolgate_notes::{NotesStore, import_dir, undo_last};

use toolgate_wiring::{SharedStore, Store, StoreKind};

use super::{CommandError, runtime};
use crate::cli::NotesCommand;
use crate::config::Config;

fn count_notes(store: &NotesStore) -> i64 {
    store
        .with_sql(|c| Ok(c.query_i64("SELECT count(*) FROM notes", &[])?))
        .unwrap_or(0)
}

pub fn run(config: &Config, command: NotesCommand) -> Result<(), CommandError> {
    match command {
        NotesCommand::Init { db, empty, store } => {
            if let Some(url) = config.shared_store_url(store.as_deref(), db.as_deref()) {
                // Inside the runtime its connections live on.
                return runtime()?.block_on(async {
                    let shared = SharedStore::connect(&url).await?;
                    let Store::Notes(notes) = shared.store(StoreKind::Notes).await? else {
                        return Err(CommandError::Usage(
                            "the shared store gave a catalogue where the notebook was asked for"
                                .into(),
                        ));
                    };
                    println!(
                        "{} holds {} notes",
                        notes.path().display(),
                        count_notes(&notes)
                    );
                    Ok(())
                });
            }
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
