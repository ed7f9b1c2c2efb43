//! `toolgate books init|reset`, on a catalogue file or in a team's shared store.

use toolgate_books::BooksStore;

use toolgate_wiring::{SharedStore, Store, StoreKind};

use super::{CommandError, runtime};
use crate::cli::BooksCommand;
use crate::config::Config;

pub fn run(config: &Config, command: BooksCommand) -> Result<(), CommandError> {
    match command {
        BooksCommand::Init { db, store } => {
            if let Some(url) = config.shared_store_url(store.as_deref(), db.as_deref()) {
                return on_shared_books(&url, |store| {
                    let rows = count_rows(store);
                    println!("{} holds {rows} books", store.path().display());
                    Ok(())
                });
            }
            let path = config.store_path(StoreKind::Books, db.as_deref())?;
            let store = BooksStore::init(&path)?;
            let rows = count_rows(&store);
            println!("created {} with {rows} books", store.path().display());
        }
        BooksCommand::Reset { db, store } => {
            if let Some(url) = config.shared_store_url(store.as_deref(), db.as_deref()) {
                return on_shared_books(&url, reset);
            }
            reset(&BooksStore::open(
                &config.store_path(StoreKind::Books, db.as_deref())?,
            )?)?;
        }
    }
    Ok(())
}

fn reset(store: &BooksStore) -> Result<(), CommandError> {
    store.reset()?;
    let rows = count_rows(store);
    println!(
        "restored {} to its initial state ({rows} books, no statuses, tags or receipts)",
        store.path().display()
    );
    Ok(())
}

/// Runs `work` on the catalogue in the shared store at `url` (filled when empty), inside the
/// runtime its connections live on.
fn on_shared_books(
    url: &str,
    work: impl FnOnce(&BooksStore) -> Result<(), CommandError>,
) -> Result<(), CommandError> {
    runtime()?.block_on(async {
        let shared = SharedStore::connect(url).await?;
        match shared.store(StoreKind::Books).await? {
            Store::Books(books) => work(&books),
            Store::Notes(_) => Err(CommandError::Usage(
                "the shared store gave a notebook where the catalogue was asked for".into(),
            )),
        }
    })
}

fn count_rows(store: &BooksStore) -> i64 {
    store
        .with_sql(|c| Ok(c.query_i64("SELECT count(*) FROM books", &[])?))
        .unwrap_or(0)
}
