//! Signed receipts through the real dispatcher, on a real SQLite file: a write's decision
//! record carries its receipt signed over what was recorded, so a retry an hour later (a
//! replay) carries the very same signature; the receipt is bound to its principal; a
//! dispatcher without a signer leaves receipts unsigned. Each test is named after what it
//! prevents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate_core::idempotency::{
    self, IdempotencyKey, Receipt, ReceiptLog, WriteEffect, run_once_on,
};
use toolgate_core::receipt_signing::{KeyRing, ReceiptSigner, VerifyError, verify};
use toolgate_core::sql_params;
use toolgate_core::{
    CallRequest, Dispatcher, Effect, ManualClock, Principal, Registry, Risk, Tool, ToolBuilder,
    ToolError,
};

const NOW_UNIX: u64 = 20_786 * 86_400 + 9 * 3_600;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoteArgs {
    #[schemars(length(min = 1, max = 100))]
    title: String,
}

fn open_db(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode=WAL;
         CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL);",
    )
    .unwrap();
    idempotency::install(&conn).unwrap();
    conn
}

struct Receipts(PathBuf);

impl ReceiptLog for Receipts {
    fn recorded(&self, key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError> {
        idempotency::recorded(&open_db(&self.0), key)
    }
}

fn note_tool(db: PathBuf) -> Tool {
    ToolBuilder::<NoteArgs>::new("demo_note_add", 3)
        .describe(
            "Adds a note.",
            "the user asks to remember something.",
            None,
            "the note id.",
        )
        .example("add", json!({"title": "Buy milk"}))
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It adds a note the user can delete.",
        )
        .receipts(Receipts(db.clone()))
        .write(move |ctx, args: NoteArgs| {
            let db = db.clone();
            async move {
                let key = ctx.write_key()?.clone();
                tokio::task::spawn_blocking(move || {
                    run_once_on(&mut open_db(&db), &key, ctx.now_unix, |tx| {
                        let id = tx.query_i64(
                            "INSERT INTO notes (title) VALUES (?1) RETURNING id",
                            sql_params![&args.title],
                        )?;
                        Ok(WriteEffect {
                            result: json!({"note_id": id}),
                            undo: Some(json!({"delete": id})),
                        })
                    })
                })
                .await
                .map_err(|_| ToolError::internal("task failed"))?
            }
        })
        .unwrap()
}

fn dispatcher(db: &Path, clock: Arc<ManualClock>, signer: Option<ReceiptSigner>) -> Dispatcher {
    let registry = Registry::new([note_tool(db.to_path_buf())]).unwrap();
    let dispatcher = Dispatcher::new(Arc::new(registry))
        .unwrap()
        .with_clock(clock);
    match signer {
        Some(signer) => dispatcher.with_receipt_signer(signer),
        None => dispatcher,
    }
}

fn note(who: &str) -> CallRequest {
    CallRequest::new(
        Principal::local(who, &[]),
        "run-1",
        "demo_note_add",
        json!({"title": "Buy milk"}),
    )
}

#[tokio::test]
async fn a_replayed_write_carries_the_first_calls_signed_receipt_not_a_new_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.sqlite");
    let clock = Arc::new(ManualClock::at_unix(NOW_UNIX));
    let (signer, _) = ReceiptSigner::generate().unwrap();
    let mut ring = KeyRing::new();
    ring.add_signer(&signer);
    let d = dispatcher(&db, Arc::clone(&clock), Some(signer.clone()));

    let first = d.call(note("alice")).await;
    let signed = first.record.receipt.clone().expect("a signed receipt");
    let verified = verify(&signed, &ring).unwrap();
    let receipt = verified.receipt();
    assert_eq!(receipt.tool, "demo_note_add");
    assert_eq!(receipt.version, 3);
    assert_eq!(receipt.principal.id, "alice");
    assert_eq!(receipt.args_digest, first.record.args_hash);
    assert_eq!(
        Some(receipt.effect.idempotency_key.clone()),
        first.record.idempotency_key
    );
    assert!(receipt.effect.undoable);
    assert_eq!(receipt.time_unix, NOW_UNIX);

    clock.advance(Duration::from_secs(3_600));
    let again = d.call(note("alice")).await;
    assert!(again.record.duplicate);
    assert_eq!(again.record.receipt.as_ref(), Some(&signed));

    // Bound to its principal: bob's own write is his, and alice's receipt is not bob's.
    let by_bob = d.call(note("bob")).await;
    let bobs = by_bob.record.receipt.clone().unwrap();
    assert!(verify(&bobs, &ring).is_ok());
    assert!(matches!(
        verify(&signed, &ring)
            .unwrap()
            .for_principal(&Principal::local("bob", &[])),
        Err(VerifyError::Mismatch {
            field: "principal",
            ..
        })
    ));
}

#[tokio::test]
async fn without_a_signer_receipts_stay_unsigned_and_a_refused_write_gets_none() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.sqlite");
    let clock = Arc::new(ManualClock::at_unix(NOW_UNIX));
    let unsigned = dispatcher(&db, Arc::clone(&clock), None);
    let out = unsigned.call(note("alice")).await;
    assert!(out.observation().is_some(), "{:?}", out.result);
    assert!(out.record.receipt.is_none());
    let serialized = serde_json::to_value(&*out.record).unwrap();
    assert!(serialized.get("receipt").is_none());

    // A refused write has no receipt to sign.
    let (signer, _) = ReceiptSigner::generate().unwrap();
    let signing = dispatcher(&db, clock, Some(signer));
    let refused = signing
        .call(CallRequest::new(
            Principal::local("alice", &[]),
            "run-1",
            "demo_note_add",
            json!({"title": ""}),
        ))
        .await;
    assert!(refused.is_error());
    assert!(refused.record.receipt.is_none());
}
