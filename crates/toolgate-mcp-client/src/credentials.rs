//! The OAuth tokens toolgate holds as a client of MCP servers: one JSON file only the user can
//! read, and rmcp's [`CredentialStore`] over one entry of it.
//!
//! Guarantees:
//! - entries are keyed by (issuer, resource): a token is audience-bound to the resource it was
//!   asked for (RFC 8707), so two servers behind one authorization server never share one; both
//!   parts are compared exactly, as sent and as the authorization server's metadata says;
//! - the file is created with mode 0600 (its folder, when created, 0700) and is only ever
//!   replaced whole: written to a temporary file created 0600 in the same folder, fsynced,
//!   renamed over the old one, and the folder fsynced, so a crash leaves the old file or the new
//!   one, never a torn one, and its mode is never widened;
//! - every change is a read-modify-write under an exclusive lock on a sidecar `<file>.lock`
//!   (0600), so two toolgate processes refreshing different servers do not lose each other's
//!   entries;
//! - tokens are never logged or printed: [`StoredCredentials`]' `Debug` redacts them, and
//!   nothing here formats one.
//!
//! Refuses (fails closed, nothing read or written): an existing file, or lock file, whose mode
//! lets its group or others read or write it (the error names `chmod 600`); a path that is a
//! symbolic link or not a regular file; a file that is not the JSON this module writes.
//!
//! Not done: refresh coordination across processes ([`CredentialStore::acquire_refresh_guard`]
//! is left at rmcp's default). Two processes refreshing the same entry at once may both
//! refresh; with refresh-token rotation the loser's next refresh is rejected and its user is
//! told to log in again.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

use crate::vault::TokenVault;
use crate::vault_keys::SealError;

/// The default file name, in the user data folder.
pub const DEFAULT_TOKEN_FILE: &str = "mcp-tokens.json";

/// The format written; another is refused.
const FORMAT_VERSION: u32 = 1;

/// Which token: the authorization server that issued it and the resource it is for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CredentialKey {
    /// The issuer identifier, exactly as the authorization server's metadata gives it.
    pub issuer: String,
    /// The resource indicator (RFC 8707) the token was asked for, exactly as sent.
    pub resource: String,
}

impl CredentialKey {
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> Self {
        CredentialKey {
            issuer: issuer.into(),
            resource: resource.into(),
        }
    }
}

/// One entry of the file.
#[derive(Clone, Serialize, Deserialize)]
pub struct TokenEntry {
    #[serde(flatten)]
    pub key: CredentialKey,
    pub credentials: StoredCredentials,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    version: u32,
    entries: Vec<TokenEntry>,
}

/// Why the token file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    #[error(
        "the token file {path} has mode {mode:04o}, so others on this machine may read or change it: refused; run `chmod 600 {path}`"
    )]
    TooOpen { path: String, mode: u32 },
    #[error("the token file {path} is not a regular file (a link or a folder): refused")]
    NotAFile { path: String },
    #[error("cannot read the token file {path}: {detail}")]
    Read { path: String, detail: String },
    #[error("the token file {path} is not one toolgate wrote: {detail}")]
    Malformed { path: String, detail: String },
    #[error("cannot write the token file {path}: {detail}")]
    Write { path: String, detail: String },
    #[error("the token vault cannot be used: {0}")]
    Vault(String),
    #[error(transparent)]
    Sealed(#[from] SealError),
    #[error("the vault entry of {holder} for {resource} is refused: {error}")]
    Entry {
        holder: String,
        resource: String,
        error: SealError,
    },
}

/// Why a file of mode `mode` must not hold tokens, if it must not: any permission bit for the
/// group or for others.
pub fn mode_refusal(mode: u32) -> Option<u32> {
    let permissions = mode & 0o7777;
    (permissions & 0o077 != 0).then_some(permissions)
}

/// `entries` with the entry for `key` replaced by `credentials` (or removed when `None`), in
/// key order.
pub fn with_entry(
    mut entries: Vec<TokenEntry>,
    key: &CredentialKey,
    credentials: Option<StoredCredentials>,
) -> Vec<TokenEntry> {
    entries.retain(|e| e.key != *key);
    if let Some(credentials) = credentials {
        entries.push(TokenEntry {
            key: key.clone(),
            credentials,
        });
    }
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries
}

/// The token file.
#[derive(Debug, Clone)]
pub struct TokenFile {
    path: PathBuf,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl TokenFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        TokenFile { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    fn lock_path(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Every entry (none when the file does not exist yet).
    pub fn entries(&self) -> Result<Vec<TokenEntry>, CredentialError> {
        let Some(text) = read_private(&self.path)? else {
            return Ok(Vec::new());
        };
        let document: Document =
            serde_json::from_str(&text).map_err(|e| CredentialError::Malformed {
                path: self.shown(),
                detail: e.to_string(),
            })?;
        if document.version != FORMAT_VERSION {
            return Err(CredentialError::Malformed {
                path: self.shown(),
                detail: format!(
                    "format version {} is not {FORMAT_VERSION}",
                    document.version
                ),
            });
        }
        Ok(document.entries)
    }

    /// The credentials stored for `key`.
    pub fn get(&self, key: &CredentialKey) -> Result<Option<StoredCredentials>, CredentialError> {
        Ok(self
            .entries()?
            .into_iter()
            .find(|e| e.key == *key)
            .map(|e| e.credentials))
    }

    /// Stores `credentials` for `key` (removes the entry when `None`), under the lock.
    pub fn put(
        &self,
        key: &CredentialKey,
        credentials: Option<StoredCredentials>,
    ) -> Result<(), CredentialError> {
        let _lock = self.lock()?;
        let entries = with_entry(self.entries()?, key, credentials);
        self.write(&Document {
            version: FORMAT_VERSION,
            entries,
        })
    }

    fn lock(&self) -> Result<File, CredentialError> {
        let fail = |detail: String| CredentialError::Write {
            path: self.lock_path().display().to_string(),
            detail,
        };
        self.ensure_folder()?;
        let path = self.lock_path();
        check_existing(&path)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| fail(e.to_string()))?;
        file.lock().map_err(|e| fail(e.to_string()))?;
        Ok(file)
    }

    fn ensure_folder(&self) -> Result<(), CredentialError> {
        match self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) if !dir.exists() => std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| CredentialError::Write {
                    path: self.shown(),
                    detail: format!("cannot create its folder: {e}"),
                }),
            Some(_) | None => Ok(()),
        }
    }

    fn write(&self, document: &Document) -> Result<(), CredentialError> {
        let fail = |detail: String| CredentialError::Write {
            path: self.shown(),
            detail,
        };
        let text = serde_json::to_string_pretty(document).map_err(|e| fail(e.to_string()))?;
        let dir = match self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) => dir.to_path_buf(),
            None => PathBuf::from("."),
        };
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| DEFAULT_TOKEN_FILE.into());
        let temp = dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let result = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            file.write_all(text.as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&temp, &self.path)?;
            File::open(&dir)?.sync_all()
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&temp);
            return Err(fail(e.to_string()));
        }
        Ok(())
    }
}

/// Refuses an existing `path` that is not a regular file or is open to others.
pub(crate) fn check_existing(path: &Path) -> Result<bool, CredentialError> {
    let shown = || path.display().to_string();
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(CredentialError::Read {
                path: shown(),
                detail: e.to_string(),
            });
        }
    };
    if !metadata.file_type().is_file() {
        return Err(CredentialError::NotAFile { path: shown() });
    }
    if let Some(mode) = mode_refusal(metadata.permissions().mode()) {
        return Err(CredentialError::TooOpen {
            path: shown(),
            mode,
        });
    }
    Ok(true)
}

/// The text of `path` after checking it is a private regular file; `None` when missing.
fn read_private(path: &Path) -> Result<Option<String>, CredentialError> {
    if !check_existing(path)? {
        return Ok(None);
    }
    std::fs::read_to_string(path)
        .map(Some)
        .map_err(|e| CredentialError::Read {
            path: path.display().to_string(),
            detail: e.to_string(),
        })
}

/// Whose tokens a connection uses: the person running toolgate (`toolgate mcp login`'s file),
/// or one user of a gateway (their entries in the vault).
#[derive(Debug, Clone)]
pub enum TokenHolder {
    File(Arc<TokenFile>),
    /// `holder` is [`toolgate_core::approval::holder`] of the user, `user` their id as shown.
    Vault {
        vault: Arc<TokenVault>,
        holder: String,
        user: String,
    },
}

impl TokenHolder {
    /// The credentials held for `key`.
    pub async fn get(
        &self,
        key: &CredentialKey,
    ) -> Result<Option<StoredCredentials>, CredentialError> {
        match self {
            TokenHolder::File(file) => {
                let (file, key) = (Arc::clone(file), key.clone());
                tokio::task::spawn_blocking(move || file.get(&key))
                    .await
                    .map_err(|e| CredentialError::Vault(e.to_string()))?
            }
            TokenHolder::Vault { vault, holder, .. } => vault.get(holder, key).await,
        }
    }

    /// Stores (or, with `None`, removes) the credentials for `key`.
    pub async fn put(
        &self,
        key: &CredentialKey,
        credentials: Option<StoredCredentials>,
    ) -> Result<(), CredentialError> {
        match self {
            TokenHolder::File(file) => {
                let (file, key) = (Arc::clone(file), key.clone());
                tokio::task::spawn_blocking(move || file.put(&key, credentials))
                    .await
                    .map_err(|e| CredentialError::Vault(e.to_string()))?
            }
            TokenHolder::Vault { vault, holder, .. } => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                vault.put(holder, key, credentials, now).await
            }
        }
    }

    /// Refuses a holder that could not store a token (before anyone is sent to log in).
    pub async fn check(&self) -> Result<(), CredentialError> {
        match self {
            TokenHolder::File(file) => {
                let file = Arc::clone(file);
                tokio::task::spawn_blocking(move || file.entries().map(drop))
                    .await
                    .map_err(|e| CredentialError::Vault(e.to_string()))?
            }
            TokenHolder::Vault { vault, holder, .. } => vault.entries(holder).await.map(drop),
        }
    }

    /// Where the tokens are kept, for messages (never a token).
    pub fn shown(&self) -> String {
        match self {
            TokenHolder::File(file) => file.path().display().to_string(),
            TokenHolder::Vault { vault, user, .. } => format!(
                "the token vault, as {user}'s own (sealed under the key `{}`)",
                vault.current_key()
            ),
        }
    }

    /// One user's entries in `vault`.
    pub fn user(vault: &Arc<TokenVault>, principal: &toolgate_core::Principal) -> TokenHolder {
        TokenHolder::Vault {
            vault: Arc::clone(vault),
            holder: toolgate_core::approval::holder(principal),
            user: principal.id.clone(),
        }
    }

    /// rmcp's credential slot for `key` of this holder.
    pub fn slot(&self, key: CredentialKey) -> HeldCredentials {
        HeldCredentials {
            holder: self.clone(),
            key,
        }
    }
}

/// rmcp's credential slot for one (issuer, resource) entry of a [`TokenHolder`].
#[derive(Debug, Clone)]
pub struct HeldCredentials {
    holder: TokenHolder,
    key: CredentialKey,
}

#[async_trait::async_trait]
impl CredentialStore for HeldCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.holder
            .get(&self.key)
            .await
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.holder
            .put(&self.key, Some(credentials))
            .await
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.holder
            .put(&self.key, None)
            .await
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.into(), None, vec!["notes:read".into()], Some(1))
    }

    #[test]
    fn token_file_readable_by_others_is_refused() {
        let cases = [
            (0o100600, None),
            (0o100400, None),
            (0o100700, None),
            (0o100644, Some(0o644)),
            (0o100640, Some(0o640)),
            (0o100604, Some(0o604)),
            (0o100620, Some(0o620)),
            (0o100602, Some(0o602)),
            (0o100666, Some(0o666)),
        ];
        for (mode, want) in cases {
            assert_eq!(mode_refusal(mode), want, "{mode:o}");
        }
    }

    #[test]
    fn two_servers_behind_one_issuer_never_share_a_token() {
        let a = CredentialKey::new("https://as.example", "https://one.example/mcp");
        let b = CredentialKey::new("https://as.example", "https://two.example/mcp");
        let other_issuer = CredentialKey::new("https://other.example", "https://one.example/mcp");
        // Exact strings: a trailing slash is another resource, never silently the same one.
        let slash = CredentialKey::new("https://as.example", "https://one.example/mcp/");
        let entries = with_entry(Vec::new(), &a, Some(credentials("ca")));
        let entries = with_entry(entries, &b, Some(credentials("cb")));
        let entries = with_entry(entries, &other_issuer, Some(credentials("co")));
        let find = |key: &CredentialKey| {
            entries
                .iter()
                .find(|e| e.key == *key)
                .map(|e| e.credentials.client_id.clone())
        };
        assert_eq!(find(&a).as_deref(), Some("ca"));
        assert_eq!(find(&b).as_deref(), Some("cb"));
        assert_eq!(find(&other_issuer).as_deref(), Some("co"));
        assert_eq!(find(&slash), None);
        // Replacing one entry leaves the others; removing it removes only it.
        let entries = with_entry(entries, &a, Some(credentials("ca2")));
        assert_eq!(entries.len(), 3);
        let entries = with_entry(entries, &a, None);
        assert_eq!(entries.len(), 2);
        assert!(entries.iter().all(|e| e.key != a));
    }

    #[test]
    fn token_file_is_created_private_and_never_widened() {
        let dir = tempfile::tempdir().unwrap();
        let file = TokenFile::new(dir.path().join("sub/mcp-tokens.json"));
        let key = CredentialKey::new("https://as.example", "https://one.example/mcp");
        file.put(&key, Some(credentials("c1"))).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(file.path()), 0o600);
        assert_eq!(mode(&dir.path().join("sub")), 0o700);
        assert_eq!(file.get(&key).unwrap().unwrap().client_id, "c1");
        file.put(&key, Some(credentials("c2"))).unwrap();
        assert_eq!(mode(file.path()), 0o600);
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");

        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let refused = file.get(&key).unwrap_err();
        assert!(refused.to_string().contains("chmod 600"), "{refused}");
        assert!(file.put(&key, None).is_err());
        assert_eq!(mode(file.path()), 0o644, "a refused file is left as it is");
    }

    #[test]
    fn a_linked_or_foreign_token_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        std::fs::write(&real, "{}").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            TokenFile::new(&link).entries(),
            Err(CredentialError::NotAFile { .. })
        ));
        assert!(matches!(
            TokenFile::new(&real).entries(),
            Err(CredentialError::Malformed { .. })
        ));
    }
}
