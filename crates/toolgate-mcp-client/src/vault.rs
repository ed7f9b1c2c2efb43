//! Each user's own downstream OAuth tokens, for a gateway that acts for many users: one table
//! (`downstream_tokens`) in a SQLite file or in the team's PostgreSQL database, each entry keyed
//! by (holder, issuer, resource) and sealed at rest under the vault keys ([`super::vault_keys`]).
//!
//! Guarantees:
//! - a user's call reaches an upstream only with that user's own entry: the holder (tenant and
//!   user id) is part of the key and of the sealed value's associated data, so another user's
//!   row, even copied into place, does not open;
//! - the token itself is never stored in clear: only the key id, the place and the sealed value;
//! - [`TokenVault::rekey`] seals every entry again under the current key in one write
//!   transaction: all of them or, when one does not open, none (the error names it);
//! - the SQLite file is created with mode 0600, like the single user's token file.
//!
//! Refuses: an entry that does not open (changed, misplaced, or under a key the key file no
//! longer holds), each with its typed reason; a database that cannot be reached (typed, with
//! what failed), never treated as "no token".

use std::path::Path;
use std::sync::Arc;

use rmcp::transport::auth::StoredCredentials;
use toolgate_core::ToolError;
use toolgate_core::sql::{Sql, SqlError, in_write_transaction};
use toolgate_core::sql_params;
use toolgate_store::SharedConnection;

use super::credentials::{CredentialError, CredentialKey};
use super::vault_keys::{Binding, Sealed, VaultKeys};

/// Each user's sealed tokens.
#[derive(Clone, Debug)]
pub struct TokenVault {
    conn: SharedConnection,
    keys: Arc<VaultKeys>,
}

/// What [`TokenVault::rekey`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rekeyed {
    /// Entries sealed again under the current key.
    pub resealed: usize,
    /// Entries already under it.
    pub current: usize,
    /// The current key's id.
    pub key_id: String,
}

fn database(error: impl std::fmt::Display) -> CredentialError {
    CredentialError::Vault(error.to_string())
}

impl TokenVault {
    /// The vault in the SQLite file at `path`, created (0600) when missing.
    pub fn open_sqlite(path: &Path, keys: Arc<VaultKeys>) -> Result<TokenVault, CredentialError> {
        use std::os::unix::fs::OpenOptionsExt;
        let shown = path.display().to_string();
        let failed = |e: &dyn std::fmt::Display| {
            CredentialError::Vault(format!("cannot open the token vault {shown}: {e}"))
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| failed(&e))?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| failed(&e))?;
        super::credentials::check_existing(path)?;
        let conn = rusqlite::Connection::open(path).map_err(|e| failed(&e))?;
        conn.execute_batch(toolgate_store::schema::DOWNSTREAM_TOKENS)
            .map_err(|e| failed(&e))?;
        Ok(TokenVault {
            conn: SharedConnection::new(conn, "token vault"),
            keys,
        })
    }

    /// The vault in a store whose schema already has the table (the team's PostgreSQL
    /// database, migrated at connect).
    pub fn on(conn: SharedConnection, keys: Arc<VaultKeys>) -> TokenVault {
        TokenVault { conn, keys }
    }

    /// The id of the key new entries are sealed under.
    pub fn current_key(&self) -> &str {
        self.keys.current_id()
    }

    /// `holder`'s credentials for `key`, opened; `None` when it has none.
    pub async fn get(
        &self,
        holder: &str,
        key: &CredentialKey,
    ) -> Result<Option<StoredCredentials>, CredentialError> {
        let (h, k) = (holder.to_string(), key.clone());
        let row = self
            .conn
            .read_sql(move |sql| {
                Ok(sql.query_opt(
                    "SELECT key_id, sealed FROM downstream_tokens WHERE holder = ?1 AND issuer = ?2 AND resource = ?3",
                    sql_params![h, k.issuer, k.resource],
                )?)
            })
            .await
            .map_err(database)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let sealed = Sealed {
            key_id: row.text(0).map_err(database)?,
            text: row.text(1).map_err(database)?,
        };
        let plain = self.keys.open(&binding(holder, key), &sealed)?;
        serde_json::from_slice(&plain)
            .map(Some)
            .map_err(|e| CredentialError::Vault(format!("an opened entry is not a token: {e}")))
    }

    /// Stores `credentials` as `holder`'s for `key`, sealed under the current key; `None`
    /// removes the entry.
    pub async fn put(
        &self,
        holder: &str,
        key: &CredentialKey,
        credentials: Option<StoredCredentials>,
        now_unix: u64,
    ) -> Result<(), CredentialError> {
        let (h, k) = (holder.to_string(), key.clone());
        let Some(credentials) = credentials else {
            return self
                .conn
                .blocking_sql(move |session| {
                    Ok(session.execute(
                        "DELETE FROM downstream_tokens WHERE holder = ?1 AND issuer = ?2 AND resource = ?3",
                        sql_params![h, k.issuer, k.resource],
                    )?)
                })
                .await
                .map(drop)
                .map_err(database);
        };
        let plain = serde_json::to_vec(&credentials)
            .map_err(|e| CredentialError::Vault(format!("a token could not be encoded: {e}")))?;
        let sealed = self.keys.seal(&binding(holder, key), &plain)?;
        let now = i64::try_from(now_unix).unwrap_or(i64::MAX);
        self.conn
            .blocking_sql(move |session| {
                Ok(session.execute(
                    "INSERT INTO downstream_tokens (holder, issuer, resource, key_id, sealed, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (holder, issuer, resource)
                     DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed, updated_at = excluded.updated_at",
                    sql_params![h, k.issuer, k.resource, sealed.key_id, sealed.text, now],
                )?)
            })
            .await
            .map(drop)
            .map_err(database)
    }

    /// The (issuer, resource) pairs `holder` has tokens for.
    pub async fn entries(&self, holder: &str) -> Result<Vec<CredentialKey>, CredentialError> {
        let h = holder.to_string();
        let rows = self
            .conn
            .read_sql(move |sql| {
                Ok(sql.query(
                    "SELECT issuer, resource FROM downstream_tokens WHERE holder = ?1 ORDER BY issuer, resource",
                    sql_params![h],
                )?)
            })
            .await
            .map_err(database)?;
        rows.iter()
            .map(|row| Ok(CredentialKey::new(row.text(0)?, row.text(1)?)))
            .collect::<Result<_, SqlError>>()
            .map_err(database)
    }

    /// Seals every entry not under the current key again under it, all in one transaction.
    pub async fn rekey(&self, now_unix: u64) -> Result<Rekeyed, CredentialError> {
        let keys = Arc::clone(&self.keys);
        let now = i64::try_from(now_unix).unwrap_or(i64::MAX);
        self.conn
            // An entry that does not open fails the whole transaction: nothing is resealed.
            .blocking_sql(move |session| {
                Ok(in_write_transaction(session, |sql| {
                    reseal_all(sql, &keys, now)
                }))
            })
            .await
            .map_err(database)?
    }
}

/// Inside a write transaction: every entry under an older key opened and sealed again.
fn reseal_all(sql: &dyn Sql, keys: &VaultKeys, now: i64) -> Result<Rekeyed, CredentialError> {
    let current = keys.current_id().to_string();
    let rows = sql.query(
        "SELECT holder, issuer, resource, key_id, sealed FROM downstream_tokens ORDER BY holder, issuer, resource",
        &[],
    )?;
    let mut done = Rekeyed {
        resealed: 0,
        current: 0,
        key_id: current.clone(),
    };
    for row in &rows {
        let (holder, issuer, resource) = (row.text(0)?, row.text(1)?, row.text(2)?);
        let sealed = Sealed {
            key_id: row.text(3)?,
            text: row.text(4)?,
        };
        if sealed.key_id == current {
            done.current += 1;
            continue;
        }
        let place = Binding {
            holder: &holder,
            issuer: &issuer,
            resource: &resource,
        };
        let resealed = match keys
            .open(&place, &sealed)
            .and_then(|p| keys.seal(&place, &p))
        {
            Ok(resealed) => resealed,
            Err(error) => {
                return Err(CredentialError::Entry {
                    holder,
                    resource,
                    error,
                });
            }
        };
        sql.execute(
            "UPDATE downstream_tokens SET key_id = ?1, sealed = ?2, updated_at = ?3 WHERE holder = ?4 AND issuer = ?5 AND resource = ?6",
            sql_params![resealed.key_id, resealed.text, now, holder, issuer, resource],
        )?;
        done.resealed += 1;
    }
    Ok(done)
}

fn binding<'a>(holder: &'a str, key: &'a CredentialKey) -> Binding<'a> {
    Binding {
        holder,
        issuer: &key.issuer,
        resource: &key.resource,
    }
}

impl From<SqlError> for CredentialError {
    fn from(error: SqlError) -> Self {
        database(error)
    }
}

impl From<ToolError> for CredentialError {
    fn from(error: ToolError) -> Self {
        database(error)
    }
}
