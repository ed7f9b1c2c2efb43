//! The console's sessions and sign-ins under way in a team's PostgreSQL database (tables
//! `console_sessions` and `console_logins`, migration V14), so that instances behind a load
//! balancer share them: a sign-in's callback may reach another instance than the one that
//! started it, and a signed-in person's requests may reach any instance.
//!
//! Guarantees:
//! - Only [`record_key`]s (SHA-256) of the session id, the sign-in's `state` and the login
//!   binder are stored: a reader of the database cannot sign in as anyone, nor finish another
//!   person's sign-in.
//! - A sign-in is taken by one `DELETE ... RETURNING`: at most one callback, at any instance,
//!   gets its verifier, and only within [`LOGIN_TIME`] from the browser that started it.
//! - A session is found only before its expiry and never after sign-out at any instance.
//!   Expiry is decided by the instances' clocks (Unix milliseconds, [`is_live`]) in every
//!   statement, as the MCP sessions' table does; expired rows are purged whenever a new row of
//!   their table is written, so no row bound is needed.
//! - Fail closed: a database that cannot be read or written means not signed in (the console
//!   asks the person to sign in) or a refused sign-in, never a session found for someone else.
//!
//! Refuses: a store that is not PostgreSQL ([`SharedSessions::on`]); the single-process server
//! keeps its records in memory ([`crate::sessions::SessionBook`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use toolgate_core::sql::Dialect;
use toolgate_core::{BoxFuture, Principal, sql_params};
use toolgate_store::SharedConnection;

use crate::sessions::{
    LOGIN_TIME, Session, SessionError, SessionRecords, expiry_of, is_live, login_admits, random_id,
    record_key,
};

/// The sessions and sign-ins of every instance on one database.
#[derive(Clone)]
pub struct SharedSessions {
    conn: SharedConnection,
    lifetime: Duration,
}

impl std::fmt::Debug for SharedSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSessions")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl SharedSessions {
    /// Sessions that last `lifetime` from sign-in, kept in the PostgreSQL database `conn` is
    /// on; `None` for any other store.
    pub fn on(conn: SharedConnection, lifetime: Duration) -> Option<SharedSessions> {
        (conn.dialect() == Dialect::Postgres).then_some(SharedSessions { conn, lifetime })
    }

    async fn start(&self, state: &str, verifier: &str) -> Result<String, SessionError> {
        let binder = random_id().ok_or(SessionError::NoRandomness)?;
        let now = now_unix_ms();
        let row = (
            record_key(state),
            verifier.to_string(),
            record_key(&binder),
            expiry_of(now, LOGIN_TIME),
        );
        self.conn
            .blocking_sql(move |db| {
                db.execute(
                    "DELETE FROM console_logins WHERE expires_unix_ms <= ?1",
                    sql_params![now],
                )?;
                db.execute(
                    "INSERT INTO console_logins (state_hash, verifier, binder_hash, expires_unix_ms)
                     VALUES (?1, ?2, ?3, ?4)",
                    sql_params![row.0, row.1, row.2, row.3],
                )?;
                Ok(())
            })
            .await
            .map_err(|_| SessionError::Store)?;
        Ok(binder)
    }

    async fn finish(&self, state: &str, binder: Option<&str>) -> Option<String> {
        let key = record_key(state);
        let taken = self
            .conn
            .blocking_sql(move |db| {
                Ok(db.query_opt(
                    "DELETE FROM console_logins WHERE state_hash = ?1
                     RETURNING verifier, binder_hash, expires_unix_ms",
                    sql_params![key],
                )?)
            })
            .await
            .ok()??;
        let verifier = taken.text(0).ok()?;
        let binder_key = taken.text(1).ok()?;
        let expires = taken.i64(2).ok()?;
        login_admits(&binder_key, binder, is_live(expires, now_unix_ms())).then_some(verifier)
    }

    async fn open_session(&self, principal: Principal) -> Result<String, SessionError> {
        let id = random_id().ok_or(SessionError::NoRandomness)?;
        let csrf = random_id().ok_or(SessionError::NoRandomness)?;
        let principal = serde_json::to_string(&principal).map_err(|_| SessionError::Store)?;
        let now = now_unix_ms();
        let row = (
            record_key(&id),
            principal,
            csrf,
            expiry_of(now, self.lifetime),
        );
        self.conn
            .blocking_sql(move |db| {
                db.execute(
                    "DELETE FROM console_sessions WHERE expires_unix_ms <= ?1",
                    sql_params![now],
                )?;
                db.execute(
                    "INSERT INTO console_sessions (id_hash, principal, csrf, expires_unix_ms)
                     VALUES (?1, ?2, ?3, ?4)",
                    sql_params![row.0, row.1, row.2, row.3],
                )?;
                Ok(())
            })
            .await
            .map_err(|_| SessionError::Store)?;
        Ok(id)
    }

    async fn find_session(&self, id: &str) -> Option<Session> {
        let key = record_key(id);
        let now = now_unix_ms();
        let row = self
            .conn
            .blocking_sql(move |db| {
                Ok(db.query_opt(
                    "SELECT principal, csrf, expires_unix_ms FROM console_sessions
                     WHERE id_hash = ?1 AND expires_unix_ms > ?2",
                    sql_params![key, now],
                )?)
            })
            .await
            .ok()??;
        // The statement already left out expired rows; checked again here so the decision
        // does not rest on one place alone.
        if !is_live(row.i64(2).ok()?, now) {
            return None;
        }
        let principal: Principal = serde_json::from_str(&row.text(0).ok()?).ok()?;
        Some(Session {
            principal,
            csrf: row.text(1).ok()?,
        })
    }

    async fn close_session(&self, id: &str) -> Result<(), SessionError> {
        let key = record_key(id);
        self.conn
            .blocking_sql(move |db| {
                db.execute(
                    "DELETE FROM console_sessions WHERE id_hash = ?1",
                    sql_params![key],
                )?;
                Ok(())
            })
            .await
            .map_err(|_| SessionError::Store)
    }
}

impl SessionRecords for SharedSessions {
    fn lifetime(&self) -> Duration {
        self.lifetime
    }

    fn start_login<'a>(
        &'a self,
        state: &'a str,
        verifier: &'a str,
    ) -> BoxFuture<'a, Result<String, SessionError>> {
        Box::pin(self.start(state, verifier))
    }

    fn finish_login<'a>(
        &'a self,
        state: &'a str,
        binder: Option<&'a str>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.finish(state, binder))
    }

    fn open(&self, principal: Principal) -> BoxFuture<'_, Result<String, SessionError>> {
        Box::pin(self.open_session(principal))
    }

    fn find<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Option<Session>> {
        Box::pin(self.find_session(id))
    }

    fn close<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), SessionError>> {
        Box::pin(self.close_session(id))
    }
}
