//! Receipt key files: the signing key on disk, and the public keys a ring verifies with.
//!
//! A signing key file is a PKCS#8 Ed25519 private key in PEM (`-----BEGIN PRIVATE KEY-----`,
//! base64 of the DER, `-----END PRIVATE KEY-----`), as [`write_new_key`] writes it and as
//! `openssl genpkey -algorithm ed25519` does; bare base64 of the DER is read too. Its public key
//! goes beside it in `FILE.pub` (one line of base64), for verifiers.
//!
//! Guarantees: a signing key is read only from a regular file owned by the user running us with
//! no permission bits for group or others (mode 0600 or stricter); otherwise the file is refused
//! with an error naming it and the fix (`chmod 600 FILE`), before its key is used. A new key
//! file is created with mode 0600 and never overwrites one that exists. Refuses: a file that
//! holds no Ed25519 key, and a verifying entry that is neither a public key nor a key file.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::receipt_signing::{KeyError, KeyRing, ReceiptSigner};

const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";

/// Why a key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("cannot read the receipt key file {path}: {detail}")]
    Read { path: String, detail: String },
    #[error("the receipt key file {path} is not a regular file")]
    NotAFile { path: String },
    #[error(
        "the receipt signing key {path} has mode {mode:o}, so others may read it; a signing key must be private to you: run `chmod 600 {path}`"
    )]
    TooOpen { path: String, mode: u32 },
    #[error(
        "the receipt signing key {path} is owned by uid {owner}, not by you (uid {me}); a signing key must be your own file: copy it to one you own and run `chmod 600` on it"
    )]
    NotOwned { path: String, owner: u32, me: u32 },
    #[error("the receipt key file {path} holds no usable key: {source}")]
    NotAKey { path: String, source: KeyError },
    #[error("cannot write the new receipt key file {path}: {detail}")]
    Write { path: String, detail: String },
}

/// Why a file of mode `mode` must not hold a signing key, if it must not: any permission bit
/// for the group or for others.
pub fn mode_refusal(mode: u32) -> Option<u32> {
    let permissions = mode & 0o7777;
    (permissions & 0o077 != 0).then_some(permissions)
}

/// Loads the signing key at `path`, after checking it is a private regular file of ours.
pub fn load_signer(path: &Path) -> Result<ReceiptSigner, KeyFileError> {
    let text = read_private(path)?;
    parse_private(&text).map_err(|source| KeyFileError::NotAKey {
        path: path.display().to_string(),
        source,
    })
}

fn read_private(path: &Path) -> Result<String, KeyFileError> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let shown = || path.display().to_string();
    let read = |e: std::io::Error| KeyFileError::Read {
        path: shown(),
        detail: e.to_string(),
    };
    let metadata = std::fs::metadata(path).map_err(read)?;
    if !metadata.is_file() {
        return Err(KeyFileError::NotAFile { path: shown() });
    }
    if let Some(mode) = mode_refusal(metadata.permissions().mode()) {
        return Err(KeyFileError::TooOpen {
            path: shown(),
            mode,
        });
    }
    let me = rustix::process::geteuid().as_raw();
    if metadata.uid() != me {
        return Err(KeyFileError::NotOwned {
            path: shown(),
            owner: metadata.uid(),
            me,
        });
    }
    std::fs::read_to_string(path).map_err(read)
}

/// The signer of a key file's text: PEM, or bare base64 of the PKCS#8 document.
pub fn parse_private(text: &str) -> Result<ReceiptSigner, KeyError> {
    let body: String = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != PEM_BEGIN && *l != PEM_END)
        .collect();
    let der = STANDARD
        .decode(body)
        .map_err(|_| KeyError::NotPkcs8("not PEM or base64".into()))?;
    ReceiptSigner::from_pkcs8(&der)
}

/// The PEM text of a PKCS#8 document.
pub fn pem(pkcs8: &[u8]) -> String {
    let encoded = STANDARD.encode(pkcs8);
    let mut out = String::from(PEM_BEGIN);
    out.push('\n');
    for chunk in encoded.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(PEM_END);
    out.push('\n');
    out
}

/// Where a key file's public key is written: `FILE.pub`.
pub fn public_key_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".pub");
    PathBuf::from(name)
}

/// Makes a new signing key at `path` (mode 0600, refused if the file exists) and its public
/// key at `FILE.pub`.
pub fn write_new_key(path: &Path) -> Result<ReceiptSigner, KeyFileError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let shown = |p: &Path| p.display().to_string();
    let (signer, pkcs8) = ReceiptSigner::generate().map_err(|source| KeyFileError::NotAKey {
        path: shown(path),
        source,
    })?;
    let write = |p: &Path, text: &str, mode: u32| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(p)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| KeyFileError::Write {
                path: shown(p),
                detail: e.to_string(),
            })
    };
    write(path, &pem(&pkcs8), 0o600)?;
    write(
        &public_key_path(path),
        &format!("{}\n", signer.public_key_base64()),
        0o644,
    )?;
    Ok(signer)
}

/// Adds one `[receipts] verify_keys` entry to `ring`: a public key in base64, or the path of a
/// file holding one (`FILE.pub`) or of a private key file (checked as a signing key is).
pub fn add_verify_entry(ring: &mut KeyRing, entry: &str) -> Result<String, KeyFileError> {
    if let Ok(id) = ring.add_base64(entry) {
        return Ok(id);
    }
    let path = Path::new(entry);
    let shown = || path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| KeyFileError::Read {
        path: shown(),
        detail: e.to_string(),
    })?;
    if text.contains(PEM_BEGIN) {
        let signer = load_signer(path)?;
        return Ok(ring.add_signer(&signer));
    }
    ring.add_base64(&text)
        .map_err(|source| KeyFileError::NotAKey {
            path: shown(),
            source,
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_new_key_file_is_private_and_loads_back_with_the_same_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.key");
        let made = write_new_key(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        let loaded = load_signer(&path).unwrap();
        assert_eq!(loaded.key_id(), made.key_id());
        // Never overwritten.
        assert!(matches!(
            write_new_key(&path),
            Err(KeyFileError::Write { .. })
        ));
        // The public key file and the key file both serve as verifying entries.
        let mut ring = KeyRing::new();
        let pub_path = public_key_path(&path);
        let id = add_verify_entry(&mut ring, pub_path.to_str().unwrap()).unwrap();
        assert_eq!(id, made.key_id());
        assert_eq!(
            add_verify_entry(&mut ring, path.to_str().unwrap()).unwrap(),
            id
        );
        assert_eq!(
            add_verify_entry(&mut ring, &made.public_key_base64()).unwrap(),
            id
        );
    }

    #[test]
    fn a_receipt_key_file_readable_by_others_is_refused_naming_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.key");
        write_new_key(&path).unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let error = load_signer(&path).unwrap_err();
            assert!(matches!(error, KeyFileError::TooOpen { .. }), "{mode:o}");
            let text = error.to_string();
            assert!(
                text.contains(&format!("chmod 600 {}", path.display())),
                "{text}"
            );
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(load_signer(&path).is_ok());
    }

    #[test]
    fn a_receipt_key_file_without_a_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("receipts.key");
        std::fs::write(&path, "hello\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            load_signer(&path),
            Err(KeyFileError::NotAKey { .. })
        ));
        assert!(matches!(
            load_signer(&dir.path().join("missing.key")),
            Err(KeyFileError::Read { .. })
        ));
        assert!(matches!(
            load_signer(dir.path()),
            Err(KeyFileError::NotAFile { .. })
        ));
        let mut ring = KeyRing::new();
        assert!(add_verify_entry(&mut ring, path.to_str().unwrap()).is_err());
    }

    #[test]
    fn an_openssl_style_pem_key_is_read() {
        let (signer, pkcs8) = ReceiptSigner::generate().unwrap();
        let parsed = parse_private(&pem(&pkcs8)).unwrap();
        assert_eq!(parsed.key_id(), signer.key_id());
        assert_eq!(
            parse_private(&STANDARD.encode(&pkcs8)).unwrap().key_id(),
            signer.key_id()
        );
    }
}
