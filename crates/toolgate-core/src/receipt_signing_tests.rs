#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::*;

fn facts() -> ReceiptFacts {
    ReceiptFacts {
        tool: "notes_create".into(),
        version: 2,
        principal: ReceiptPrincipal {
            tenant: "local".into(),
            id: "alice".into(),
        },
        args_digest: "9f86d081884c7d65".into(),
        effect: EffectSummary {
            idempotency_key: "key-1".into(),
            result: json!({"id": 7, "title": "Budget"}),
            undoable: true,
        },
        time_unix: 1_764_000_000,
    }
}

fn signer() -> ReceiptSigner {
    ReceiptSigner::generate().unwrap().0
}

fn ring_of(signers: &[&ReceiptSigner]) -> KeyRing {
    let mut ring = KeyRing::new();
    for s in signers {
        ring.add_signer(s);
    }
    ring
}

#[test]
fn a_signed_receipt_verifies_with_its_public_key() {
    let signer = signer();
    let receipt = signer.sign(facts());
    assert_eq!(receipt.format, FORMAT);
    assert_eq!(receipt.key_id, signer.key_id());
    assert_eq!(receipt.key_id.len(), 16);
    let mut ring = KeyRing::new();
    ring.add_base64(&signer.public_key_base64()).unwrap();
    let verified = verify(&receipt, &ring).unwrap();
    assert_eq!(verified.receipt(), &receipt);
    // And read back from its JSON.
    let text = serde_json::to_string(&receipt).unwrap();
    assert!(verify_json(&text, &ring).is_ok());
}

#[test]
fn a_replayed_receipt_carries_the_same_signature() {
    // Ed25519 is deterministic and only recorded facts are signed.
    let signer = signer();
    assert_eq!(signer.sign(facts()), signer.sign(facts()));
}

#[test]
fn tampering_with_any_signed_field_fails_verification() {
    let signer = signer();
    let ring = ring_of(&[&signer]);
    let good = signer.sign(facts());
    type Tamper = fn(&mut SignedReceipt);
    let table: &[(&str, Tamper)] = &[
        ("tool", |r| r.tool = "notes_delete".into()),
        ("version", |r| r.version += 1),
        ("principal.tenant", |r| r.principal.tenant = "other".into()),
        ("principal.id", |r| r.principal.id = "mallory".into()),
        ("args_digest", |r| r.args_digest = "0000000000000000".into()),
        ("effect.idempotency_key", |r| {
            r.effect.idempotency_key = "key-2".into()
        }),
        ("effect.result", |r| {
            r.effect.result["title"] = json!("Bonus")
        }),
        ("effect.undoable", |r| r.effect.undoable = false),
        ("time_unix", |r| r.time_unix += 1),
    ];
    for (field, tamper) in table {
        let mut receipt = good.clone();
        tamper(&mut receipt);
        assert_eq!(
            verify(&receipt, &ring),
            Err(VerifyError::BadSignature {
                key_id: signer.key_id().into()
            }),
            "{field}"
        );
    }
    // The signature itself, one byte changed.
    let mut receipt = good.clone();
    let mut bytes = STANDARD.decode(&receipt.signature).unwrap();
    bytes[0] ^= 1;
    receipt.signature = STANDARD.encode(bytes);
    assert!(matches!(
        verify(&receipt, &ring),
        Err(VerifyError::BadSignature { .. })
    ));
}

#[test]
fn a_changed_format_or_unreadable_signature_is_malformed() {
    let signer = signer();
    let ring = ring_of(&[&signer]);
    let good = signer.sign(facts());
    let mut other_format = good.clone();
    other_format.format = "toolgate-receipt-v0".into();
    let mut not_base64 = good.clone();
    not_base64.signature = "not base64!".into();
    for receipt in [other_format, not_base64] {
        assert!(matches!(
            verify(&receipt, &ring),
            Err(VerifyError::Malformed(_))
        ));
    }
    // An extra field is not silently ignored.
    let mut extra = serde_json::to_value(&good).unwrap();
    extra["extra"] = json!(1);
    let extra = extra.to_string();
    for text in ["", "[]", "{\"format\": \"toolgate-receipt-v1\"}", &extra] {
        assert!(
            matches!(verify_json(text, &ring), Err(VerifyError::Malformed(_))),
            "{text}"
        );
    }
}

#[test]
fn a_receipt_signed_by_a_key_not_in_the_ring_fails() {
    let ours = signer();
    let theirs = signer();
    let ring = ring_of(&[&ours]);
    let receipt = theirs.sign(facts());
    assert_eq!(
        verify(&receipt, &ring),
        Err(VerifyError::UnknownKey {
            key_id: theirs.key_id().into()
        })
    );
    // Re-keyed: signed by another key but naming ours.
    let mut rekeyed = facts_signed_as(&theirs, ours.key_id());
    assert!(matches!(
        verify(&rekeyed, &ring),
        Err(VerifyError::BadSignature { .. })
    ));
    rekeyed.key_id = theirs.key_id().into();
    assert!(matches!(
        verify(&rekeyed, &ring),
        Err(VerifyError::UnknownKey { .. })
    ));
}

/// A receipt signed by `signer` whose key id field claims `claimed`.
fn facts_signed_as(signer: &ReceiptSigner, claimed: &str) -> SignedReceipt {
    let mut receipt = signer.sign(facts());
    receipt.key_id = claimed.into();
    // Re-sign over the claimed id with the wrong key.
    receipt.signature = STANDARD.encode(signer.pair.sign(&receipt.signed_bytes()).as_ref());
    receipt
}

#[test]
fn another_principals_receipt_fails_for_this_principal() {
    let signer = signer();
    let ring = ring_of(&[&signer]);
    let receipt = signer.sign(facts());
    let alice = Principal::local("alice", &[]);
    let bob = Principal::local("bob", &[]);
    let mut for_alice = facts();
    for_alice.principal.tenant = alice.tenant.clone();
    let receipt_for_alice = signer.sign(for_alice);
    assert!(
        verify(&receipt_for_alice, &ring)
            .unwrap()
            .for_principal(&alice)
            .is_ok()
    );
    assert!(matches!(
        verify(&receipt_for_alice, &ring)
            .unwrap()
            .for_principal(&bob),
        Err(VerifyError::Mismatch {
            field: "principal",
            ..
        })
    ));
    // Another tenant's alice is someone else too.
    let mut other_tenant = facts();
    other_tenant.principal.tenant = format!("{}-other", alice.tenant);
    let theirs = signer.sign(other_tenant);
    assert!(
        verify(&theirs, &ring)
            .unwrap()
            .for_principal(&alice)
            .is_err()
    );
    assert!(verify(&receipt, &ring).is_ok());
}

#[test]
fn after_rotation_old_receipts_verify_while_their_key_is_listed() {
    let old = signer();
    let new = signer();
    let before = old.sign(facts());
    // Rotated: the new key signs, the old public key is still listed.
    let mut ring = ring_of(&[&new, &old]);
    let after = new.sign(facts());
    assert!(verify(&before, &ring).is_ok());
    assert!(verify(&after, &ring).is_ok());
    assert_ne!(before.signature, after.signature);
    // The old key retired: its receipts no longer verify, the new ones still do.
    assert!(ring.remove(old.key_id()));
    assert_eq!(
        verify(&before, &ring),
        Err(VerifyError::UnknownKey {
            key_id: old.key_id().into()
        })
    );
    assert!(verify(&after, &ring).is_ok());
}

#[test]
fn a_public_key_of_the_wrong_length_or_encoding_is_refused() {
    let mut ring = KeyRing::new();
    assert!(ring.add(&[0u8; 31]).is_err());
    assert!(ring.add_base64("!!").is_err());
    assert!(ring.add_base64(&STANDARD.encode([1u8; 33])).is_err());
    assert!(ring.is_empty());
    assert!(ReceiptSigner::from_pkcs8(b"not a key").is_err());
}
