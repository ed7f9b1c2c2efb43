//! Verifiable receipts: a write's receipt signed with Ed25519, so anyone holding the public key
//! can check what was done, by whom and when, without trusting the store or the audit that
//! shows it.
//!
//! The signed payload is the canonical JSON ([`crate::canonical::canonical_json`]) of every
//! field of a [`SignedReceipt`] except `signature`: `format`, `key_id`, `tool`, `version`,
//! `principal` (tenant and id), `args_digest` (the digest of the canonical arguments, as in the
//! decision record), `effect` (the idempotency key, the recorded result, redacted, and whether
//! it can be undone) and `time_unix` (when the effect was recorded). Ed25519 is deterministic
//! and every field comes from the recorded receipt, so a replayed write (an idempotent retry)
//! carries the very same signature as the first call: the time of the replay is never signed.
//!
//! Guarantees: [`verify`] accepts a receipt only when its key id names a key of the
//! [`KeyRing`], the signature over exactly these fields checks with that key, and the format
//! is this one; a change to any field, a signature made with another key, or a key id swapped
//! for another key's is refused with its own [`VerifyError`]. [`VerifiedReceipt::for_principal`]
//! refuses a valid receipt made for someone else. Key rotation: a ring holds the current key and
//! any older public keys, so receipts signed before a rotation verify for as long as their key
//! is listed, and fail once it is removed.
//!
//! Why `ring`: it is already in the dependency tree (rustls), maintained, and its Ed25519 is
//! the one the TLS stack trusts; nothing here implements cryptography. Key files are read and
//! written by [`crate::receipt_keys`].

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::canonical::{canonical_json, sha256_hex};
use crate::principal::Principal;

/// The format every receipt of this version names.
pub const FORMAT: &str = "toolgate-receipt-v1";

/// The length of an Ed25519 public key, in bytes.
const PUBLIC_KEY_BYTES: usize = 32;

/// Who a receipt's write was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptPrincipal {
    pub tenant: String,
    pub id: String,
}

/// What the write did, as recorded with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffectSummary {
    /// The idempotency key the effect is recorded under.
    pub idempotency_key: String,
    /// The result the write returned when it happened, redacted.
    pub result: Value,
    /// Whether the effect recorded how to undo it.
    pub undoable: bool,
}

/// The facts a receipt signs, before it is signed: all from the recorded receipt and the call.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiptFacts {
    pub tool: String,
    pub version: u32,
    pub principal: ReceiptPrincipal,
    pub args_digest: String,
    pub effect: EffectSummary,
    /// When the effect was recorded (never the time of a replay).
    pub time_unix: u64,
}

/// A signed receipt, as shown to a caller, kept in the decision record and read back by
/// [`verify`]. Unknown fields are refused when one is read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedReceipt {
    pub format: String,
    /// The signing key's id ([`key_id`] of its public key).
    pub key_id: String,
    pub tool: String,
    pub version: u32,
    pub principal: ReceiptPrincipal,
    pub args_digest: String,
    pub effect: EffectSummary,
    pub time_unix: u64,
    /// The Ed25519 signature over [`SignedReceipt::signed_bytes`], base64 (standard, padded).
    pub signature: String,
}

impl SignedReceipt {
    /// The bytes the signature covers: the canonical JSON of every field but `signature`.
    pub fn signed_bytes(&self) -> Vec<u8> {
        canonical_json(&json!({
            "format": self.format,
            "key_id": self.key_id,
            "tool": self.tool,
            "version": self.version,
            "principal": self.principal,
            "args_digest": self.args_digest,
            "effect": self.effect,
            "time_unix": self.time_unix,
        }))
        .into_bytes()
    }
}

/// A key's id: the first 16 hex digits of the SHA-256 of its public key.
pub fn key_id(public_key: &[u8]) -> String {
    sha256_hex(public_key).chars().take(16).collect()
}

/// Why a key could not be made from bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the private key is not an Ed25519 key in PKCS#8 form ({0})")]
    NotPkcs8(String),
    #[error("a public key is 32 bytes in base64; this is {0}")]
    BadPublicKey(String),
    #[error("the system random source failed while making a key")]
    Random,
}

/// The signing key the dispatcher holds: signs each write's receipt. Cheap to clone.
#[derive(Clone)]
pub struct ReceiptSigner {
    pair: Arc<Ed25519KeyPair>,
    key_id: String,
}

impl std::fmt::Debug for ReceiptSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiptSigner")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl ReceiptSigner {
    /// The signer of a PKCS#8 Ed25519 private key (v2 as `ring` writes it, or v1 as
    /// `openssl genpkey -algorithm ed25519` does).
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, KeyError> {
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(pkcs8)
            .map_err(|e| KeyError::NotPkcs8(e.to_string()))?;
        let key_id = key_id(pair.public_key().as_ref());
        Ok(ReceiptSigner {
            pair: Arc::new(pair),
            key_id,
        })
    }

    /// A new random key: the signer and its PKCS#8 (v2) document, to be kept secret.
    pub fn generate() -> Result<(Self, Vec<u8>), KeyError> {
        let pkcs8 =
            Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).map_err(|_| KeyError::Random)?;
        let bytes = pkcs8.as_ref().to_vec();
        Ok((ReceiptSigner::from_pkcs8(&bytes)?, bytes))
    }

    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    pub fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// The public key in base64, as `[receipts] verify_keys` and [`KeyRing::add_base64`] take it.
    pub fn public_key_base64(&self) -> String {
        STANDARD.encode(self.public_key())
    }

    /// Signs `facts` under this key.
    pub fn sign(&self, facts: ReceiptFacts) -> SignedReceipt {
        let mut receipt = SignedReceipt {
            format: FORMAT.into(),
            key_id: self.key_id.clone(),
            tool: facts.tool,
            version: facts.version,
            principal: facts.principal,
            args_digest: facts.args_digest,
            effect: facts.effect,
            time_unix: facts.time_unix,
            signature: String::new(),
        };
        let signature = self.pair.sign(&receipt.signed_bytes());
        receipt.signature = STANDARD.encode(signature.as_ref());
        receipt
    }
}

/// The public keys receipts are verified with, by key id: the current signing key's and the
/// older ones still listed after a rotation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRing {
    keys: BTreeMap<String, Vec<u8>>,
}

impl KeyRing {
    pub fn new() -> Self {
        KeyRing::default()
    }

    /// Adds a public key; returns its id.
    pub fn add(&mut self, public_key: &[u8]) -> Result<String, KeyError> {
        if public_key.len() != PUBLIC_KEY_BYTES {
            return Err(KeyError::BadPublicKey(format!(
                "{} bytes",
                public_key.len()
            )));
        }
        let id = key_id(public_key);
        self.keys.insert(id.clone(), public_key.to_vec());
        Ok(id)
    }

    /// Adds a public key given in base64; returns its id.
    pub fn add_base64(&mut self, text: &str) -> Result<String, KeyError> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|_| KeyError::BadPublicKey("not base64".into()))?;
        self.add(&bytes)
    }

    /// Adds the public half of `signer`; returns its id.
    pub fn add_signer(&mut self, signer: &ReceiptSigner) -> String {
        self.keys
            .insert(signer.key_id.clone(), signer.public_key().to_vec());
        signer.key_id.clone()
    }

    /// Removes the key `id` (a retired key whose receipts must no longer verify).
    pub fn remove(&mut self, id: &str) -> bool {
        self.keys.remove(id).is_some()
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Why a receipt did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Not a receipt: not JSON of this shape, an unknown format, a signature not in base64.
    #[error("not a receipt: {0}")]
    Malformed(String),
    /// Signed by a key the ring does not hold (another signer, or a key retired since).
    #[error("signed by key {key_id}, which is not among the verifying keys")]
    UnknownKey { key_id: String },
    /// The signature does not match the fields under the named key: a field was changed, or it
    /// was signed by another key under this key's id.
    #[error("the signature does not match the receipt's fields under key {key_id}")]
    BadSignature { key_id: String },
    /// A valid receipt, but not the one expected (another principal's).
    #[error("the receipt's {field} is {found}, not {expected}")]
    Mismatch {
        field: &'static str,
        expected: String,
        found: String,
    },
}

/// A receipt whose signature checked; made only by [`verify`].
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedReceipt {
    receipt: SignedReceipt,
}

impl VerifiedReceipt {
    pub fn receipt(&self) -> &SignedReceipt {
        &self.receipt
    }

    pub fn key_id(&self) -> &str {
        &self.receipt.key_id
    }

    /// This receipt if it was made for `principal` (same tenant and id), else a
    /// [`VerifyError::Mismatch`] naming the principal.
    pub fn for_principal(self, principal: &Principal) -> Result<Self, VerifyError> {
        let made_for = &self.receipt.principal;
        if made_for.tenant != principal.tenant || made_for.id != principal.id {
            return Err(VerifyError::Mismatch {
                field: "principal",
                expected: format!("{}/{}", principal.tenant, principal.id),
                found: format!("{}/{}", made_for.tenant, made_for.id),
            });
        }
        Ok(self)
    }
}

/// Checks `receipt` against the keys of `keys`; see the module documentation.
pub fn verify(receipt: &SignedReceipt, keys: &KeyRing) -> Result<VerifiedReceipt, VerifyError> {
    if receipt.format != FORMAT {
        return Err(VerifyError::Malformed(format!(
            "format `{}` is not `{FORMAT}`",
            receipt.format
        )));
    }
    let signature = STANDARD
        .decode(&receipt.signature)
        .map_err(|_| VerifyError::Malformed("the signature is not base64".into()))?;
    let Some(public_key) = keys.keys.get(&receipt.key_id) else {
        return Err(VerifyError::UnknownKey {
            key_id: receipt.key_id.clone(),
        });
    };
    UnparsedPublicKey::new(&ED25519, public_key)
        .verify(&receipt.signed_bytes(), &signature)
        .map_err(|_| VerifyError::BadSignature {
            key_id: receipt.key_id.clone(),
        })?;
    Ok(VerifiedReceipt {
        receipt: receipt.clone(),
    })
}

/// Reads a receipt from JSON text and checks it ([`verify`]); text that is not a receipt is
/// [`VerifyError::Malformed`].
pub fn verify_json(text: &str, keys: &KeyRing) -> Result<VerifiedReceipt, VerifyError> {
    let receipt: SignedReceipt =
        serde_json::from_str(text).map_err(|e| VerifyError::Malformed(e.to_string()))?;
    verify(&receipt, keys)
}

#[cfg(test)]
#[path = "receipt_signing_tests.rs"]
mod tests;
