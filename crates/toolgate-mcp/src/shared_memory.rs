//! What each session (or stateless principal) was shown, kept where every instance on a team's
//! store reads it: the taint sources a later call is checked against, wherever it lands.
//!
//! One process remembers what its calls returned (the results' trusted content and untrusted
//! texts) and hands them to the session's later calls, so a value copied from a web page or a
//! clipped note into a high-risk call is flagged ([`toolgate_core::taint`]). Behind a load
//! balancer the later call may land on another instance: this store (`mcp_taint_memory`,
//! migration V9) holds the same entries, the newest [`MAX_REMEMBERED_TEXTS`] of each kind per
//! session, for a day.
//!
//! Guarantees: a call on a shared store is checked against what its session was shown at every
//! instance; when the store cannot be read, the call is refused before it runs (fail closed:
//! checking it without its sources would pass what should be flagged). A write that fails
//! leaves the entry in this instance's own memory only (calls landing here still see it); a
//! session's entries outlive its `DELETE` until they expire (the session cannot be used).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toolgate_core::sql_params;
use toolgate_core::taint::UntrustedSource;
use toolgate_wiring::shared::SharedConnection;

use crate::server::MAX_REMEMBERED_TEXTS;

/// How long a session's entries are kept (as long as a session is continued).
const KEEP_SECS: i64 = 24 * 3600;

/// One untrusted text as stored: its described parts and its normalized text.
#[derive(Serialize, Deserialize)]
struct StoredSource {
    source: UntrustedSource,
    normalized: String,
}

/// The taint memory of every instance on one store.
pub struct SharedMemory {
    conn: SharedConnection,
}

impl std::fmt::Debug for SharedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedMemory")
    }
}

/// Why the shared memory could not be used.
#[derive(Debug, thiserror::Error)]
#[error("the shared taint memory: {0}")]
pub struct MemoryError(String);

fn failed(error: impl std::fmt::Display) -> MemoryError {
    MemoryError(error.to_string())
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl SharedMemory {
    /// The memory in `conn` (a store whose schema has `mcp_taint_memory`).
    pub fn new(conn: SharedConnection) -> Arc<SharedMemory> {
        Arc::new(SharedMemory { conn })
    }

    /// What `key` was shown, oldest first: trusted results and untrusted texts.
    pub(crate) async fn load(
        &self,
        key: &str,
    ) -> Result<(Vec<String>, Vec<UntrustedSource>), MemoryError> {
        let (key, oldest) = (key.to_string(), now_secs() - KEEP_SECS);
        let rows = self
            .conn
            .read_sql(move |sql| {
                Ok(sql.query(
                    "SELECT kind, entry FROM mcp_taint_memory WHERE memory_key = ?1 AND at >= ?2 ORDER BY id",
                    sql_params![key, oldest],
                )?)
            })
            .await
            .map_err(failed)?;
        let (mut trusted, mut untrusted) = (Vec::new(), Vec::new());
        for row in rows {
            let (kind, entry) = (row.text(0).map_err(failed)?, row.text(1).map_err(failed)?);
            match kind.as_str() {
                "trusted" => trusted.push(entry),
                "untrusted" => {
                    let stored: StoredSource = serde_json::from_str(&entry).map_err(failed)?;
                    untrusted.push(stored.source.restored(&stored.normalized));
                }
                other => return Err(MemoryError(format!("an entry of unknown kind `{other}`"))),
            }
        }
        Ok((trusted, untrusted))
    }

    /// Adds what one call showed `key`, keeping the newest entries of each kind.
    pub(crate) async fn append(
        &self,
        key: &str,
        trusted: Option<String>,
        untrusted: &[UntrustedSource],
    ) -> Result<(), MemoryError> {
        let mut entries: Vec<(&'static str, String)> =
            trusted.into_iter().map(|t| ("trusted", t)).collect();
        for source in untrusted {
            let stored = StoredSource {
                source: source.clone(),
                normalized: source.normalized().to_string(),
            };
            entries.push(("untrusted", serde_json::to_string(&stored).map_err(failed)?));
        }
        if entries.is_empty() {
            return Ok(());
        }
        let (key, now) = (key.to_string(), now_secs());
        let keep = i64::try_from(MAX_REMEMBERED_TEXTS).unwrap_or(i64::MAX);
        self.conn
            .blocking_sql(move |session| {
                for (kind, entry) in &entries {
                    session.execute(
                        "INSERT INTO mcp_taint_memory (memory_key, kind, entry, at) VALUES (?1, ?2, ?3, ?4)",
                        sql_params![key.clone(), *kind, entry.clone(), now],
                    )?;
                }
                session.execute(
                    "DELETE FROM mcp_taint_memory WHERE at < ?1",
                    sql_params![now - KEEP_SECS],
                )?;
                for kind in ["trusted", "untrusted"] {
                    session.execute(
                        "DELETE FROM mcp_taint_memory WHERE memory_key = ?1 AND kind = ?2 AND id NOT IN \
                         (SELECT id FROM mcp_taint_memory WHERE memory_key = ?1 AND kind = ?2 ORDER BY id DESC LIMIT ?3)",
                        sql_params![key.clone(), kind, keep],
                    )?;
                }
                Ok(())
            })
            .await
            .map_err(failed)
    }
}
