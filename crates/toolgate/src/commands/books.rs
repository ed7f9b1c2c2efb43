//! `toolgate books init|reset`.

use toolgate_books::BooksStore;

use toolgate_wiring::StoreKind;

use super::CommandError;
use crate::cli::BooksCommand;
use crate::config::Config;

pub fn run(config: &Config, command: BooksCommand) -> Result<(), CommandError> {
    match command {
        BooksCommand::Init { db } => {
            let path = config.store_path(StoreKind::Books, db.as_deref())?;
            let store = BooksStore::init(&path)?;
            let rows = count_rows(&store);
            println!("created {} with {rows} books", store.path().display());
        }
        BooksCommand::Reset { db } => {
            let path = config.store_path(StoreKind::Books, db.as_deref())?;
            let store = BooksStore::open(&path)?;
            store.reset()?;
            let rows = count_rows(&store);
            println!(
                "restored {} to its initial state ({rows} books, no statuses, tags or receipts)",
                store.path().display()
            );
        }
    }
    Ok(())
}

fn count_rows(store: &BooksStore) -> i64 {
    store
        .with_conn(|c| {
            c.query_row("SELECT count(*) FROM books", [], |r| r.get(0))
                .unwrap_or(0)
        })
        .unwrap_or(0)
}
