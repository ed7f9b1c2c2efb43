//! A team's shared store: one PostgreSQL database (`--store postgres://...`, or `[store] url`)
//! holding the toolsets' data with their receipts, the approval tickets and the decision records
//! (the audit table), for any number of instances at once.
//!
//! Guarantees: [`SharedStore::connect`] opens only a database whose schema this binary knows
//! (migrating an older one, refusing a newer one, each failure typed with what to fix); every
//! store and ledger handed out uses the one pool; the book catalogue and the notebook are
//! filled with their initial contents by whichever instance finds them empty first. Refuses
//! nothing the layers below accept.

use std::sync::Arc;

use toolgate_books::BooksStore;
use toolgate_core::ApprovalLedger;
use toolgate_notes::NotesStore;
pub use toolgate_store::SharedConnection;
pub use toolgate_store::postgres::audit::PgAudit;
use toolgate_store::postgres::tickets::PgTickets;
use toolgate_store::postgres::{PgSettings, PgStore};

use crate::error::WiringError;
use crate::store::Store;
use crate::toolset::StoreKind;

/// An open shared database.
#[derive(Clone, Debug)]
pub struct SharedStore {
    pg: PgStore,
}

impl SharedStore {
    /// Connects to the database at `url` with a bounded pool and brings its schema up to date.
    pub async fn connect(url: &str) -> Result<SharedStore, WiringError> {
        let pg = PgStore::connect(url, PgSettings::default()).await?;
        Ok(SharedStore { pg })
    }

    /// `postgres://host:port/database` (never the password).
    pub fn shown(&self) -> String {
        format!("postgres://{}", self.pg.shown())
    }

    /// The store of `kind` in this database, with its initial contents when it has none.
    pub async fn store(&self, kind: StoreKind) -> Result<Store, WiringError> {
        match kind {
            StoreKind::Books => Ok(Store::Books(
                BooksStore::on_postgres(self.pg.clone()).await?,
            )),
            StoreKind::Notes => Ok(Store::Notes(
                NotesStore::on_postgres(self.pg.clone()).await?,
            )),
        }
    }

    /// A trace sink that writes this instance's decision records to the audit table (started
    /// on the current tokio runtime). `instance` names this process in each row.
    pub fn audit(&self, instance: String) -> PgAudit {
        PgAudit::start(self.pg.clone(), instance)
    }

    /// The audit table of every instance, for searching (`toolgate audit`, the console).
    pub fn audit_store(&self) -> toolgate_store::audit::AuditStore {
        toolgate_store::audit::AuditStore::on_postgres(self.pg.clone())
    }

    /// Where the imported tools' forwarded writes are claimed and settled, in this database, so
    /// a retry at any instance finds the claim.
    pub fn mcp_receipts(&self) -> toolgate_store::SharedConnection {
        toolgate_store::SharedConnection::postgres(self.pg.clone(), "MCP receipts database")
    }

    /// Where each user's sealed downstream tokens are kept, in this database, so every
    /// instance calls an upstream with the same user's token.
    pub fn token_vault(&self) -> toolgate_store::SharedConnection {
        toolgate_store::SharedConnection::postgres(self.pg.clone(), "token vault")
    }

    /// Where the 2025-11-25 MCP sessions of every instance are recorded, so any instance
    /// continues one another opened.
    pub fn mcp_sessions(&self) -> toolgate_store::SharedConnection {
        toolgate_store::SharedConnection::postgres(self.pg.clone(), "MCP sessions")
    }

    /// The database as a required health check of an instance (`/readyz`).
    pub fn health_check(&self) -> Arc<dyn toolgate_core::health::HealthCheck> {
        Arc::new(self.pg.clone())
    }

    /// The approval tickets every instance on this database shares.
    pub fn ledger(&self) -> Arc<ApprovalLedger> {
        Arc::new(ApprovalLedger::on(PgTickets::new(self.pg.clone())))
    }
}
