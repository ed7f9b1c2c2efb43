//! `toolgate notes init|reset|import|index|undo`, on a notebook file or in a team's shared store
//! (`--store`, or `[store] url`): the same code runs on both, through the notes store's `Sql`
//! calls.

use std::time::{Duration, Instant};

use toolgate_notes::notebook_index::{IndexPolicy, index_dir};
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
                return on_shared_notes(&url, |notes| {
                    println!(
                        "{} holds {} notes",
                        notes.path().display(),
                        count_notes(notes)
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
        NotesCommand::Reset { db, store } => {
            if let Some(url) = config.shared_store_url(store.as_deref(), db.as_deref()) {
                return on_shared_notes(&url, reset);
            }
            reset(&NotesStore::open(
                &config.store_path(StoreKind::Notes, db.as_deref())?,
            )?)?;
        }
        NotesCommand::Import { dir, db, store } => {
            if let Some(url) = config.shared_store_url(store.as_deref(), db.as_deref()) {
                return on_shared_notes(&url, |notes| import(notes, &dir));
            }
            let path = config.store_path(StoreKind::Notes, db.as_deref())?;
            let store = if path.exists() {
                NotesStore::open(&path)?
            } else {
                NotesStore::init(&path)?
            };
            import(&store, &dir)?;
        }
        NotesCommand::Index { db } => {
            let path = config.store_path(StoreKind::Notes, db.as_deref())?;
            let total = count_notes(&NotesStore::open_with(&path, IndexPolicy::Off)?);
            let started = Instant::now();
            let store = NotesStore::open_indexed(&path, Duration::from_secs(2), |indexed| {
                eprintln!("indexed {indexed} of {total} notes");
            })?;
            println!(
                "the search index of {} is ready ({total} notes, {:.1} s): {}",
                store.path().display(),
                started.elapsed().as_secs_f64(),
                index_dir(&path).display()
            );
        }
        NotesCommand::Undo { count, db, store } => {
            if let Some(url) = config.shared_store_url(store.as_deref(), db.as_deref()) {
                return on_shared_notes(&url, |notes| undo(notes, count));
            }
            undo(
                &NotesStore::open(&config.store_path(StoreKind::Notes, db.as_deref())?)?,
                count,
            )?;
        }
    }
    Ok(())
}

/// Runs `work` on the notebook in the shared store at `url` (filled with the sample when
/// empty), inside the runtime its connections live on.
fn on_shared_notes(
    url: &str,
    work: impl FnOnce(&NotesStore) -> Result<(), CommandError>,
) -> Result<(), CommandError> {
    runtime()?.block_on(async {
        let shared = SharedStore::connect(url).await?;
        match shared.store(StoreKind::Notes).await? {
            Store::Notes(notes) => work(&notes),
            Store::Books(_) => Err(CommandError::Usage(
                "the shared store gave a catalogue where the notebook was asked for".into(),
            )),
        }
    })
}

fn reset(store: &NotesStore) -> Result<(), CommandError> {
    store.reset()?;
    println!(
        "restored {} to what it was created with ({} notes; drafts, receipts and undo history cleared)",
        store.path().display(),
        count_notes(store)
    );
    Ok(())
}

fn import(store: &NotesStore, dir: &std::path::Path) -> Result<(), CommandError> {
    let report = import_dir(store, dir)?;
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
    Ok(())
}

fn undo(store: &NotesStore, count: u32) -> Result<(), CommandError> {
    let undone = undo_last(store, count as usize)?;
    if undone.is_empty() {
        println!("nothing to undo");
    }
    for action in &undone {
        println!("undid {}: {}", action.tool, action.summary);
    }
    Ok(())
}
