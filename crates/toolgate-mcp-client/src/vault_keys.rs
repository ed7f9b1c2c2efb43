//! The keys that seal each user's downstream tokens at rest, and the sealing itself.
//!
//! A key file holds one key per line, `KEY-ID BASE64`, 32 random bytes each (`#` starts a
//! comment). The first key is current: it seals everything written. The others only open what
//! was sealed under them, so keys rotate by adding a new first line, running `toolgate mcp
//! rekey` (which seals every entry again under the first key), then deleting the old line.
//!
//! Guarantees:
//! - a sealed token is ChaCha20-Poly1305 (ring's AEAD) under a fresh random 96-bit nonce, with
//!   the entry's place as associated data: its holder (tenant and user), issuer and resource.
//!   A sealed value copied to another user's row, or to another server's, does not open;
//!   a changed byte does not open; either is refused, never passed on;
//! - the key id is stored beside the sealed value, so a value sealed under a key the file no
//!   longer holds is refused with that key's id, not mistaken for tampering;
//! - keys are never printed: [`VaultKeys`]' `Debug` shows only their ids.
//!
//! Refuses (nothing sealed or opened): a key file readable or writable by group or others, an
//! empty one, a line that is not `ID BASE64`, a key that is not 32 bytes, two keys with one id.
//!
//! Our own code only for the file format and the associated data: the cipher is ring's.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

use crate::credentials::mode_refusal;

/// Bytes in a key.
pub const KEY_BYTES: usize = 32;
/// Longest key id.
const KEY_ID_MAX: usize = 64;
/// What the associated data starts with: the format, so another use of the same key never
/// opens these values.
const AAD_LABEL: &str = "toolgate downstream token v1";

/// Why a key file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFileError {
    #[error("cannot read the vault key file {path}: {detail}")]
    Read { path: String, detail: String },
    #[error(
        "the vault key file {path} has mode {mode:04o}, so others on this machine may read it: refused; run `chmod 600 {path}`"
    )]
    TooOpen { path: String, mode: u32 },
    #[error(
        "the vault key file holds no key: add a line `KEY-ID BASE64` with 32 random bytes (`head -c 32 /dev/urandom | base64`)"
    )]
    Empty,
    #[error("line {line} of the vault key file is refused: {why}")]
    BadLine { line: usize, why: String },
    #[error("the vault key file names the key `{id}` twice")]
    DuplicateId { id: String },
}

/// Why a sealed value was not opened (or a value not sealed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error(
        "a stored token is sealed under the key `{key_id}`, which the vault key file no longer holds: put that key back (after the current one) and run `toolgate mcp rekey`, or log in again"
    )]
    UnknownKey { key_id: String },
    #[error(
        "a stored token does not open with the key `{key_id}`: it was changed, or it was sealed for another user or server; refused"
    )]
    DoesNotOpen { key_id: String },
    #[error("a stored token is not a sealed value this version writes")]
    Malformed,
    #[error("no random nonce could be drawn, so nothing was sealed")]
    Random,
}

/// Where a sealed value belongs: it opens only there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding<'a> {
    /// The user it belongs to ([`toolgate_core::approval::holder`]: tenant and id).
    pub holder: &'a str,
    pub issuer: &'a str,
    pub resource: &'a str,
}

impl Binding<'_> {
    fn associated_data(&self) -> Vec<u8> {
        // A JSON array: each part quoted, so no choice of parts can collide with another.
        serde_json::Value::from(vec![AAD_LABEL, self.holder, self.issuer, self.resource])
            .to_string()
            .into_bytes()
    }
}

/// A sealed value and the id of the key it was sealed under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub key_id: String,
    /// Base64 of the nonce, the ciphertext and its tag.
    pub text: String,
}

struct VaultKey {
    id: String,
    key: LessSafeKey,
}

/// The keys of a key file, the current one first.
pub struct VaultKeys {
    keys: Vec<VaultKey>,
    random: SystemRandom,
}

impl std::fmt::Debug for VaultKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VaultKeys")
            .field("ids", &self.ids())
            .finish_non_exhaustive()
    }
}

impl VaultKeys {
    /// Reads the key file at `path` (it must be private to its owner).
    pub fn load(path: &Path) -> Result<VaultKeys, KeyFileError> {
        use std::os::unix::fs::PermissionsExt;
        let shown = path.display().to_string();
        let read = |e: std::io::Error| KeyFileError::Read {
            path: shown.clone(),
            detail: e.to_string(),
        };
        let metadata = std::fs::metadata(path).map_err(read)?;
        if let Some(mode) = mode_refusal(metadata.permissions().mode()) {
            return Err(KeyFileError::TooOpen { path: shown, mode });
        }
        VaultKeys::parse(&std::fs::read_to_string(path).map_err(read)?)
    }

    /// The keys of a key file's text.
    pub fn parse(text: &str) -> Result<VaultKeys, KeyFileError> {
        let mut keys: Vec<VaultKey> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |why: &str| KeyFileError::BadLine {
                line: index + 1,
                why: why.into(),
            };
            let mut parts = line.split_whitespace();
            let (Some(id), Some(encoded), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(bad("expected `KEY-ID BASE64`"));
            };
            if !valid_key_id(id) {
                return Err(bad("a key id is 1 to 64 letters, digits, `.`, `_` or `-`"));
            }
            let bytes = STANDARD
                .decode(encoded)
                .map_err(|_| bad("the key is not base64"))?;
            if bytes.len() != KEY_BYTES {
                return Err(bad(&format!(
                    "the key is {} bytes; a key is {KEY_BYTES} random bytes",
                    bytes.len()
                )));
            }
            if keys.iter().any(|k| k.id == id) {
                return Err(KeyFileError::DuplicateId { id: id.into() });
            }
            let unbound = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
                .map_err(|_| bad("the key is refused by the cipher"))?;
            keys.push(VaultKey {
                id: id.into(),
                key: LessSafeKey::new(unbound),
            });
        }
        if keys.is_empty() {
            return Err(KeyFileError::Empty);
        }
        Ok(VaultKeys {
            keys,
            random: SystemRandom::new(),
        })
    }

    /// The key ids, the current one first.
    pub fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.id.as_str()).collect()
    }

    /// The id of the key that seals.
    pub fn current_id(&self) -> &str {
        // `parse` refuses a file without keys.
        self.keys.first().map_or("", |k| k.id.as_str())
    }

    /// `plaintext` sealed under the current key for `binding`.
    pub fn seal(&self, binding: &Binding<'_>, plaintext: &[u8]) -> Result<Sealed, SealError> {
        let current = self.keys.first().ok_or(SealError::Random)?;
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| SealError::Random)?;
        let mut in_out = plaintext.to_vec();
        current
            .key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(binding.associated_data()),
                &mut in_out,
            )
            .map_err(|_| SealError::Random)?;
        let mut whole = nonce.to_vec();
        whole.extend_from_slice(&in_out);
        Ok(Sealed {
            key_id: current.id.clone(),
            text: STANDARD.encode(whole),
        })
    }

    /// The plaintext of `sealed`, if it opens for `binding`.
    pub fn open(&self, binding: &Binding<'_>, sealed: &Sealed) -> Result<Vec<u8>, SealError> {
        let key = self
            .keys
            .iter()
            .find(|k| k.id == sealed.key_id)
            .ok_or_else(|| SealError::UnknownKey {
                key_id: sealed.key_id.clone(),
            })?;
        let whole = STANDARD
            .decode(&sealed.text)
            .map_err(|_| SealError::Malformed)?;
        if whole.len() < NONCE_LEN + CHACHA20_POLY1305.tag_len() {
            return Err(SealError::Malformed);
        }
        let (nonce, ciphertext) = whole.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Malformed)?;
        let mut in_out = ciphertext.to_vec();
        let plaintext = key
            .key
            .open_in_place(nonce, Aad::from(binding.associated_data()), &mut in_out)
            .map_err(|_| SealError::DoesNotOpen {
                key_id: key.id.clone(),
            })?;
        Ok(plaintext.to_vec())
    }
}

fn valid_key_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= KEY_ID_MAX
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_line(id: &str, byte: u8) -> String {
        format!("{id} {}", STANDARD.encode([byte; KEY_BYTES]))
    }

    const ALICE_X: Binding<'static> = Binding {
        holder: r#"["https://as.example","alice"]"#,
        issuer: "https://as.example",
        resource: "https://x.example/mcp",
    };

    #[test]
    fn a_malformed_or_weak_key_file_is_refused() {
        let good = key_line("k1", 7);
        let short = format!("k1 {}", STANDARD.encode([1u8; 16]));
        let cases: Vec<(String, Option<&str>)> = vec![
            (good.clone(), None),
            (format!("# comment\n\n{good}  # trailing\n"), None),
            (String::new(), Some("holds no key")),
            ("# only a comment\n".into(), Some("holds no key")),
            (short, Some("16 bytes")),
            ("k1 not*base64".into(), Some("not base64")),
            ("k1".into(), Some("expected `KEY-ID BASE64`")),
            (format!("{good} extra"), Some("expected `KEY-ID BASE64`")),
            (key_line("bad/id", 1), Some("a key id is")),
            (
                format!("{good}\n{}", key_line("k1", 8)),
                Some("names the key `k1` twice"),
            ),
        ];
        for (text, refused) in cases {
            match (VaultKeys::parse(&text), refused) {
                (Ok(keys), None) => assert_eq!(keys.ids(), vec!["k1"], "{text:?}"),
                (Err(e), Some(words)) => assert!(e.to_string().contains(words), "{text:?}: {e}"),
                (Ok(_), Some(words)) => panic!("{text:?} was accepted; expected {words}"),
                (Err(e), None) => panic!("{text:?} was refused: {e}"),
            }
        }
    }

    #[test]
    fn a_token_sealed_for_one_user_or_server_opens_nowhere_else() {
        let keys = VaultKeys::parse(&key_line("k1", 7)).unwrap();
        let sealed = keys.seal(&ALICE_X, b"alice's token for x").unwrap();
        assert_eq!(
            keys.open(&ALICE_X, &sealed).unwrap(),
            b"alice's token for x"
        );
        let elsewhere = [
            Binding {
                holder: r#"["https://as.example","bob"]"#,
                ..ALICE_X
            },
            Binding {
                resource: "https://y.example/mcp",
                ..ALICE_X
            },
            Binding {
                issuer: "https://other.example",
                ..ALICE_X
            },
            // Parts that concatenate to the same bytes are still another place.
            Binding {
                holder: r#"["https://as.example","alice"]https://as.example"#,
                issuer: "",
                resource: "https://x.example/mcp",
            },
        ];
        for binding in elsewhere {
            assert_eq!(
                keys.open(&binding, &sealed),
                Err(SealError::DoesNotOpen {
                    key_id: "k1".into()
                }),
                "{binding:?}"
            );
        }
    }

    #[test]
    fn a_changed_sealed_value_is_refused() {
        let keys = VaultKeys::parse(&key_line("k1", 7)).unwrap();
        let sealed = keys.seal(&ALICE_X, b"token").unwrap();
        let mut bytes = STANDARD.decode(&sealed.text).unwrap();
        for position in [0, NONCE_LEN, bytes.len() - 1] {
            bytes[position] ^= 1;
            let changed = Sealed {
                key_id: "k1".into(),
                text: STANDARD.encode(&bytes),
            };
            assert!(
                matches!(
                    keys.open(&ALICE_X, &changed),
                    Err(SealError::DoesNotOpen { .. })
                ),
                "byte {position}"
            );
            bytes[position] ^= 1;
        }
        for text in ["", "AAAA", "not base64!"] {
            let malformed = Sealed {
                key_id: "k1".into(),
                text: text.into(),
            };
            assert_eq!(keys.open(&ALICE_X, &malformed), Err(SealError::Malformed));
        }
    }

    #[test]
    fn a_rotated_key_still_opens_and_a_retired_one_is_named() {
        let old = VaultKeys::parse(&key_line("2026-06", 1)).unwrap();
        let sealed_old = old.seal(&ALICE_X, b"token").unwrap();
        let rotated = VaultKeys::parse(&format!(
            "{}\n{}",
            key_line("2026-12", 2),
            key_line("2026-06", 1)
        ))
        .unwrap();
        assert_eq!(rotated.current_id(), "2026-12");
        assert_eq!(rotated.open(&ALICE_X, &sealed_old).unwrap(), b"token");
        let resealed = rotated.seal(&ALICE_X, b"token").unwrap();
        assert_eq!(resealed.key_id, "2026-12");
        let retired = VaultKeys::parse(&key_line("2026-12", 2)).unwrap();
        assert_eq!(retired.open(&ALICE_X, &resealed).unwrap(), b"token");
        assert_eq!(
            retired.open(&ALICE_X, &sealed_old),
            Err(SealError::UnknownKey {
                key_id: "2026-06".into()
            })
        );
        // A key of the same id but other bytes is not the key.
        let impostor = VaultKeys::parse(&key_line("2026-06", 9)).unwrap();
        assert!(matches!(
            impostor.open(&ALICE_X, &sealed_old),
            Err(SealError::DoesNotOpen { .. })
        ));
    }

    #[test]
    fn two_seals_of_one_token_differ_and_keys_never_show() {
        let keys = VaultKeys::parse(&key_line("k1", 7)).unwrap();
        let a = keys.seal(&ALICE_X, b"token").unwrap();
        let b = keys.seal(&ALICE_X, b"token").unwrap();
        assert_ne!(a.text, b.text, "a fresh nonce each time");
        let shown = format!("{keys:?}");
        assert!(shown.contains("k1"));
        assert!(
            !shown.contains(&STANDARD.encode([7u8; KEY_BYTES])),
            "{shown}"
        );
    }

    #[test]
    fn a_key_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        std::fs::write(&path, key_line("k1", 7)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let refused = VaultKeys::load(&path).unwrap_err();
        assert!(refused.to_string().contains("chmod 600"), "{refused}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(VaultKeys::load(&path).unwrap().ids(), vec!["k1"]);
    }
}
