//! 2025-11-25 sessions any instance can serve: a session opened at one `toolgate serve --http`
//! continues at another, and after a restart, when the instances share a store.
//!
//! rmcp restores a session it does not hold from a [`SessionStore`]: it replays the session's
//! `initialize` (its parameters are what is stored) into a fresh worker and serves the request.
//! This is that store, one row per session in the team's database (`mcp_sessions`, migration
//! V8), with the principal the session belongs to beside it, so an instance that did not see the
//! session opened still serves it only to that principal.
//!
//! Why a table rather than sealing the state into the `Mcp-Session-Id` itself: rmcp already
//! restores from a store, and the owner binding and the end of a session (DELETE, and a session
//! older than [`MAX_SESSION_AGE_SECS`]) must hold at every instance at once, which a
//! self-contained id cannot give without a revocation list, i.e. a table anyway.
//!
//! Guarantees: a session is restored only while its row exists and is younger than
//! [`MAX_SESSION_AGE_SECS`]; a row without an owner serves nobody behind authorization (the
//! front fails closed, as for a session it never saw); a store that cannot be read refuses the
//! request (rmcp answers it with an error), never serves it as another session.
//!
//! Not shared: what each session was shown (its taint sources) stays in the instance that
//! showed it; see docs/a-teams-shared-store.md.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::store::{
    SessionState, SessionStore, SessionStoreError,
};
use toolgate_core::sql_params;
use toolgate_wiring::shared::SharedConnection;

use super::sessions::Owner;

/// How long a session may be continued after it was opened, at any instance.
pub const MAX_SESSION_AGE_SECS: i64 = 24 * 3600;

/// The sessions of every instance on one store.
#[derive(Clone)]
pub struct SharedSessions {
    conn: SharedConnection,
}

impl std::fmt::Debug for SharedSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedSessions")
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn store_error(error: impl std::fmt::Display) -> SessionStoreError {
    Box::new(std::io::Error::other(format!(
        "the shared session store: {error}"
    )))
}

impl SharedSessions {
    /// The sessions in `conn` (a store whose schema has `mcp_sessions`).
    pub fn new(conn: SharedConnection) -> Arc<SharedSessions> {
        Arc::new(SharedSessions { conn })
    }

    /// `columns` of the row of `session`, if the store knows it and it is not too old.
    async fn open_row(
        &self,
        session: &str,
        columns: &'static str,
    ) -> Result<Option<toolgate_core::sql::SqlRow>, SessionStoreError> {
        let (id, oldest) = (session.to_string(), now_secs() - MAX_SESSION_AGE_SECS);
        self.conn
            .read_sql(move |sql| {
                Ok(sql.query_opt(
                    &format!(
                        "SELECT {columns} FROM mcp_sessions WHERE id = ?1 AND opened_at >= ?2"
                    ),
                    sql_params![id, oldest],
                )?)
            })
            .await
            .map_err(store_error)
    }

    /// The principal `session` belongs to, if the store knows the session (and it is not too
    /// old).
    pub(super) async fn owner(&self, session: &str) -> Result<Option<Owner>, SessionStoreError> {
        let row = self.open_row(session, "owner_tenant, owner_id").await?;
        let Some(row) = row else {
            return Ok(None);
        };
        match (
            row.opt_text(0).map_err(store_error)?,
            row.opt_text(1).map_err(store_error)?,
        ) {
            (Some(tenant), Some(id)) => Ok(Some(Owner::named(tenant, id))),
            _ => Ok(None),
        }
    }

    /// Records that `session` belongs to `owner` (its `initialize` was just answered).
    pub(super) async fn bind(&self, session: &str, owner: &Owner) -> Result<(), SessionStoreError> {
        let (id, tenant, who, now) = (
            session.to_string(),
            owner.tenant().to_string(),
            owner.id().to_string(),
            now_secs(),
        );
        self.conn
            .blocking_sql(move |session| {
                Ok(session.execute(
                    "INSERT INTO mcp_sessions (id, state, owner_tenant, owner_id, opened_at)
                     VALUES (?1, NULL, ?2, ?3, ?4)
                     ON CONFLICT (id) DO UPDATE SET owner_tenant = excluded.owner_tenant, owner_id = excluded.owner_id",
                    sql_params![id, tenant, who, now],
                )?)
            })
            .await
            .map(drop)
            .map_err(store_error)
    }
}

#[async_trait::async_trait]
impl SessionStore for SharedSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let row = self.open_row(session_id, "state").await?;
        let Some(row) = row else {
            return Ok(None);
        };
        match row.opt_text(0).map_err(store_error)? {
            Some(state) => serde_json::from_str(&state).map(Some).map_err(store_error),
            // Bound to its owner, its handshake not recorded yet: nothing to restore from.
            None => Ok(None),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let text = serde_json::to_string(state).map_err(store_error)?;
        let (id, now) = (session_id.to_string(), now_secs());
        self.conn
            .blocking_sql(move |session| {
                Ok(session.execute(
                    "INSERT INTO mcp_sessions (id, state, owner_tenant, owner_id, opened_at)
                     VALUES (?1, ?2, NULL, NULL, ?3)
                     ON CONFLICT (id) DO UPDATE SET state = excluded.state",
                    sql_params![id, text, now],
                )?)
            })
            .await
            .map(drop)
            .map_err(store_error)
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let id = session_id.to_string();
        self.conn
            .blocking_sql(move |session| {
                Ok(session.execute("DELETE FROM mcp_sessions WHERE id = ?1", sql_params![id])?)
            })
            .await
            .map(drop)
            .map_err(store_error)
    }
}
