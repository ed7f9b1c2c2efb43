//! The approval ledger's tickets in PostgreSQL, shared by every instance on the database.
//!
//! Guarantees: redeeming reads the ticket `FOR UPDATE`, decides with the same pure function as
//! the SQLite ledger ([`toolgate_core::redeemable`]) and marks it used in one transaction, so of
//! any number of instances redeeming one ticket at once exactly one succeeds and the others get
//! `already_used`. A database that cannot be reached is `ledger_failed`: the call that needed the
//! approval does not run.
//!
//! The approval inbox's decisions (migration V10) follow the same rule: recording one reads the
//! ticket `FOR UPDATE`, decides with [`toolgate_core::decidable`] and writes in one
//! transaction, so of any number of people deciding one ticket through any instances, exactly
//! one decision is recorded.

use toolgate_core::BoxFuture;
use toolgate_core::approval::{
    DecisionState, HumanDecision, InboxTicket, decidable, stored_client, stored_request,
};
use toolgate_core::{Denial, OpenTickets, StoredTicket, TicketState, TicketStore, redeemable};

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

    async fn connection(&self) -> Result<deadpool_postgres::Object, Denial> {
        self.store
            .client()
            .await
            .map_err(|e| Denial::LedgerFailed { detail: e.message })
    }

    async fn insert_now(&self, ticket: StoredTicket) -> Result<(), Denial> {
        let client = self.connection().await?;
        let request: serde_json::Value =
            serde_json::from_str(&ticket.request).unwrap_or(serde_json::Value::Null);
        client
            .execute(
                "INSERT INTO approval_tickets
                     (token, binding, holder, tool, request, expires_at, inbox)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &ticket.token,
                    &ticket.binding,
                    &ticket.holder,
                    &ticket.tool,
                    &request,
                    &ticket.expires_at_unix,
                    &ticket.inbox,
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
        let mut client = self.connection().await?;
        let tx = client.transaction().await.map_err(ledger_failed)?;
        let state = tx
            .query_opt(
                "SELECT binding, holder, expires_at, used_at,
                        inbox AND NOT coalesce(approved, false)
                 FROM approval_tickets WHERE token = $1 FOR UPDATE",
                &[&token],
            )
            .await
            .map_err(ledger_failed)?
            .map(|row| TicketState {
                binding: row.get(0),
                holder: row.get(1),
                expires_at_unix: row.get(2),
                used_at_unix: row.get(3),
                awaits_inbox_yes: row.get(4),
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
        let client = self.connection().await?;
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

/// The columns [`inbox_row`] reads.
const INBOX_SELECT: &str = "SELECT token, binding, holder, tool, request::text, \
     extract(epoch FROM issued_at)::bigint, expires_at, used_at, decided_by, approved, \
     decision_reason, decided_at FROM approval_tickets";

fn inbox_row(row: &tokio_postgres::Row) -> InboxTicket {
    let binding: String = row.get(1);
    let tool: String = row.get(3);
    let request: String = row.get(4);
    let decided_by: Option<String> = row.get(8);
    let approved: Option<bool> = row.get(9);
    let decision = match (decided_by, approved) {
        (Some(decided_by), Some(approved)) => Some(HumanDecision {
            decided_by,
            approved,
            reason: row.get::<_, Option<String>>(10).unwrap_or_default(),
            decided_at_unix: row.get::<_, Option<i64>>(11).unwrap_or_default(),
        }),
        _ => None,
    };
    InboxTicket {
        token: row.get(0),
        request: stored_request(&request, &binding, &tool),
        binding,
        holder: row.get(2),
        opened_at_unix: row.get(5),
        expires_at_unix: row.get(6),
        used_at_unix: row.get(7),
        decision,
    }
}

impl PgTickets {
    async fn pending_now(&self, now_unix: i64, limit: u32) -> Result<Vec<InboxTicket>, Denial> {
        let client = self.connection().await?;
        let rows = client
            .query(
                &format!(
                    "{INBOX_SELECT} WHERE inbox AND used_at IS NULL AND decided_by IS NULL
                     AND expires_at > $1 ORDER BY issued_at DESC, token LIMIT $2"
                ),
                &[&now_unix, &i64::from(limit)],
            )
            .await
            .map_err(ledger_failed)?;
        Ok(rows.iter().map(inbox_row).collect())
    }

    async fn open_now(&self, now_unix: i64) -> Result<OpenTickets, Denial> {
        let client = self.connection().await?;
        let rows = client
            .query(
                "SELECT inbox, count(*) FROM approval_tickets
                 WHERE used_at IS NULL AND decided_by IS NULL AND expires_at > $1
                 GROUP BY inbox",
                &[&now_unix],
            )
            .await
            .map_err(ledger_failed)?;
        let mut open = OpenTickets::default();
        for row in &rows {
            let count = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
            if row.get::<_, bool>(0) {
                open.inbox = count;
            } else {
                open.host = count;
            }
        }
        Ok(open)
    }

    async fn ticket_now(&self, token: &str) -> Result<Option<InboxTicket>, Denial> {
        let client = self.connection().await?;
        let row = client
            .query_opt(
                &format!("{INBOX_SELECT} WHERE token = $1 AND inbox"),
                &[&token],
            )
            .await
            .map_err(ledger_failed)?;
        Ok(row.as_ref().map(inbox_row))
    }

    async fn decide_now(
        &self,
        token: &str,
        binding: &str,
        decision: &HumanDecision,
    ) -> Result<(), Denial> {
        let mut client = self.connection().await?;
        let tx = client.transaction().await.map_err(ledger_failed)?;
        let state = tx
            .query_opt(
                "SELECT binding, expires_at, used_at, decided_by IS NOT NULL FROM approval_tickets
                 WHERE token = $1 AND inbox FOR UPDATE",
                &[&token],
            )
            .await
            .map_err(ledger_failed)?
            .map(|row| DecisionState {
                binding: row.get(0),
                expires_at_unix: row.get(1),
                used_at_unix: row.get(2),
                decided: row.get(3),
            });
        decidable(state.as_ref(), binding, decision.decided_at_unix)?;
        let marked = tx
            .execute(
                "UPDATE approval_tickets
                 SET decided_by = $1, approved = $2, decision_reason = $3, decided_at = $4
                 WHERE token = $5 AND decided_by IS NULL AND used_at IS NULL",
                &[
                    &decision.decided_by,
                    &decision.approved,
                    &decision.reason,
                    &decision.decided_at_unix,
                    &token,
                ],
            )
            .await
            .map_err(ledger_failed)?;
        if marked != 1 {
            return Err(Denial::AlreadyUsed);
        }
        tx.commit().await.map_err(ledger_failed)
    }
}

impl TicketStore for PgTickets {
    fn pending<'a>(
        &'a self,
        now_unix: i64,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<InboxTicket>, Denial>> {
        Box::pin(self.pending_now(now_unix, limit))
    }

    fn open_tickets<'a>(&'a self, now_unix: i64) -> BoxFuture<'a, Result<OpenTickets, Denial>> {
        Box::pin(self.open_now(now_unix))
    }

    fn ticket<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<InboxTicket>, Denial>> {
        Box::pin(self.ticket_now(token))
    }

    fn decide<'a>(
        &'a self,
        token: &'a str,
        binding: &'a str,
        decision: &'a HumanDecision,
    ) -> BoxFuture<'a, Result<(), Denial>> {
        Box::pin(self.decide_now(token, binding, decision))
    }

    fn client<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<String>, Denial>> {
        Box::pin(async move {
            let client = self.connection().await?;
            let row = client
                .query_opt(
                    "SELECT request::text FROM approval_tickets WHERE token = $1 AND inbox",
                    &[&token],
                )
                .await
                .map_err(ledger_failed)?;
            Ok(row.and_then(|r| stored_client(&r.get::<_, String>(0))))
        })
    }

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
