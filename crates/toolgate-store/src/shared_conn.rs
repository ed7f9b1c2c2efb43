//! One SQLite connection shared by a toolset's handlers: blocking work runs on tokio's blocking
//! pool, one call at a time, and a poisoned lock (a panic while holding it) is an `internal`
//! error rather than a second panic.

use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::Connection;

use toolgate_core::error::ToolError;
use toolgate_core::idempotency::{
    IdempotencyKey, Receipt, ReceiptLog, WriteEffect, recorded, run_once,
};
use toolgate_core::tool::ExecContext;

#[derive(Clone, Debug)]
pub struct SharedConnection {
    inner: Arc<Mutex<Connection>>,
    /// What the store is, for error messages ("the books store").
    name: &'static str,
}

impl SharedConnection {
    pub fn new(conn: Connection, name: &'static str) -> Self {
        SharedConnection {
            inner: Arc::new(Mutex::new(conn)),
            name,
        }
    }

    pub fn lock(&self) -> Result<MutexGuard<'_, Connection>, ToolError> {
        self.inner.lock().map_err(|_| unavailable(self.name))
    }

    /// Runs `work` on the connection on a blocking thread (SQLite calls block).
    pub async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, ToolError> + Send + 'static,
    ) -> Result<T, ToolError> {
        let inner = Arc::clone(&self.inner);
        let name = self.name;
        tokio::task::spawn_blocking(move || {
            let mut guard = inner.lock().map_err(|_| unavailable(name))?;
            work(&mut guard)
        })
        .await
        .map_err(|_| ToolError::internal(format!("the {name} task failed")))?
    }

    /// Runs a write handler's effect at most once for the call's idempotency key, on a
    /// blocking thread, recording the receipt in the same transaction.
    pub async fn write_once(
        &self,
        ctx: &ExecContext,
        effect: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<WriteEffect, ToolError>
        + Send
        + 'static,
    ) -> Result<Receipt, ToolError> {
        let key = ctx.write_key()?.clone();
        let now = ctx.now_unix;
        self.blocking(move |conn| run_once(conn, &key, now, effect))
            .await
    }

    /// Runs `work` on the connection on this thread (for commands and tests).
    pub fn with_conn<T>(&self, work: impl FnOnce(&mut Connection) -> T) -> Result<T, ToolError> {
        let mut guard = self.lock()?;
        Ok(work(&mut guard))
    }
}

impl ReceiptLog for SharedConnection {
    fn recorded(&self, key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError> {
        let conn = self.lock()?;
        recorded(&conn, key)
    }
}

fn unavailable(name: &str) -> ToolError {
    ToolError::internal(format!(
        "the {name} is unavailable after an earlier failure"
    ))
}
