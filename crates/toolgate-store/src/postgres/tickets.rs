//! The approval ledger's tickets in PostgreSQL, shared by every instance on the database.
//!
//! Guarantees: redeeming reads the ticket `FOR UPDATE`, decides with the same pure function as
//! the SQLite ledger ([`toolgate_core::redeemable`]) and marks it used in one transaction, so of
//! any number of instances redeeming one ticket at once exactly one succeeds and the others get
//! `already_used`. A database that cannot be reached is `ledger_failed`: the call that needed the
//! approval does not run.

use toolgate_core::BoxFuture;
use toolgate_core::{Denial, StoredTicket, TicketState, TicketStore, redeemable};

use super::PgStore;

/// Tickets in the shared database.
#[derive(Debug, Clone)]
pub struct PgTickets {
    store: PgStore,
}

impl PgTickets {
    pub fn new(store: PgStore) -> Self {
        PgTickets { store }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, Denial> {
        self.store
            .client()
            .await
            .map_err(|e| Denial::LedgerFailed { detail: e.message })
    }

    async fn insert_now(&self, ticket: StoredTicket) -> Result<(), Denial> {
        let client = self.client().await?;
        let request: serde_json::Value =
            serde_json::from_str(&ticket.request).unwrap_or(serde_json::Value::Null);
        client
            .execute(
                "INSERT INTO approval_tickets (token, binding, holder, tool, request, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &ticket.token,
                    &ticket.binding,
                    &ticket.holder,
                    &ticket.tool,
                    &request,
                    &ticket.expires_at_unix,
                ],
            )
            .await
            .map_err(ledger_failed)?;
        Ok(())
    }

    async fn redeem_now(
        &self,
        token: &str,
        binding: &str,
        holder: &str,
        now_unix: i64,
    ) -> Result<(), Denial> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(ledger_failed)?;
        let state = tx
            .query_opt(
                "SELECT binding, holder, expires_at, used_at FROM approval_tickets
                 WHERE token = $1 FOR UPDATE",
                &[&token],
            )
            .await
            .map_err(ledger_failed)?
            .map(|row| TicketState {
                binding: row.get(0),
                holder: row.get(1),
                expires_at_unix: row.get(2),
                used_at_unix: row.get(3),
            });
        redeemable(state.as_ref(), binding, holder, now_unix)?;
        let marked = tx
            .execute(
                "UPDATE approval_tickets SET used_at = $1 WHERE token = $2 AND used_at IS NULL",
                &[&now_unix, &token],
            )
            .await
            .map_err(ledger_failed)?;
        if marked != 1 {
            return Err(Denial::AlreadyUsed);
        }
        tx.commit().await.map_err(ledger_failed)
    }

    async fn spend_now(&self, token: &str, now_unix: i64) -> Result<(), Denial> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE approval_tickets SET used_at = $1 WHERE token = $2 AND used_at IS NULL",
                &[&now_unix, &token],
            )
            .await
            .map_err(ledger_failed)?;
        Ok(())
    }
}

impl TicketStore for PgTickets {
    fn insert<'a>(&'a self, ticket: StoredTicket) -> BoxFuture<'a, Result<(), Denial>> {
        Box::pin(self.insert_now(ticket))
    }

    fn redeem<'a>(
        &'a self,
        token: &'a str,
        binding: &'a str,
        holder: &'a str,
        now_unix: i64,
    ) -> BoxFuture<'a, Result<(), Denial>> {
        Box::pin(self.redeem_now(token, binding, holder, now_unix))
    }

    fn spend<'a>(&'a self, token: &'a str, now_unix: i64) -> BoxFuture<'a, Result<(), Denial>> {
        Box::pin(self.spend_now(token, now_unix))
    }
}

fn ledger_failed(e: tokio_postgres::Error) -> Denial {
    Denial::LedgerFailed {
        detail: format!("the shared approval ledger (PostgreSQL) failed: {e}"),
    }
}
