//! The token vault's contract, held on both stores: a SQLite file, then a fresh database of the
//! test's own PostgreSQL cluster (migrated by the store's own migrations, V6 among them).
//! Each test is named after what it prevents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use base64::Engine;
use rmcp::transport::auth::StoredCredentials;
use toolgate_core::sql_params;
use toolgate_mcp_client::credentials::{CredentialError, CredentialKey};
use toolgate_mcp_client::vault::TokenVault;
use toolgate_mcp_client::vault_keys::{SealError, VaultKeys};
use toolgate_store::SharedConnection;
use toolgate_store::postgres::both::{fresh_store, on_both_stores, on_postgres};

const ALICE: &str = r#"["https://as.example","alice"]"#;
const BOB: &str = r#"["https://as.example","bob"]"#;

fn keys(lines: &[(&str, u8)]) -> Arc<VaultKeys> {
    let text: Vec<String> = lines
        .iter()
        .map(|(id, byte)| {
            format!(
                "{id} {}",
                base64::engine::general_purpose::STANDARD.encode([*byte; 32])
            )
        })
        .collect();
    Arc::new(VaultKeys::parse(&text.join("\n")).unwrap())
}

fn x() -> CredentialKey {
    CredentialKey::new("https://as.example", "https://x.example/mcp")
}

fn y() -> CredentialKey {
    CredentialKey::new("https://as.example", "https://y.example/mcp")
}

fn credentials(client: &str) -> StoredCredentials {
    StoredCredentials::new(client.into(), None, vec!["notes:read".into()], Some(1))
}

/// One store for a test body: its connection, and how to open the vault on it with `keys`.
struct Place {
    conn: SharedConnection,
    _dir: tempfile::TempDir,
}

fn place() -> Place {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vault.sqlite");
    let conn = if on_postgres() {
        fresh_store(|pg| async move { SharedConnection::postgres(pg, "token vault") })
    } else {
        // Created by the vault (0600 and its table), then shared with the test's raw writes.
        TokenVault::open_sqlite(&path, keys(&[("k0", 0)])).unwrap();
        SharedConnection::new(rusqlite::Connection::open(&path).unwrap(), "token vault")
    };
    Place { conn, _dir: dir }
}

impl Place {
    fn vault(&self, keys: Arc<VaultKeys>) -> TokenVault {
        TokenVault::on(self.conn.clone(), keys)
    }

    async fn raw(&self, sql: &'static str, params: Vec<String>) {
        self.conn
            .blocking_sql(move |session| {
                let values: Vec<toolgate_core::sql::SqlValue> =
                    params.into_iter().map(Into::into).collect();
                Ok(session.execute(sql, &values)?)
            })
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_token_is_found_only_for_that_user_and_that_server() {
    on_both_stores(|| async {
        let place = place();
        let vault = place.vault(keys(&[("k1", 1)]));
        vault
            .put(ALICE, &x(), Some(credentials("alice-x")), 1)
            .await
            .unwrap();
        assert_eq!(
            vault.get(ALICE, &x()).await.unwrap().unwrap().client_id,
            "alice-x"
        );
        // Bob has none, and alice has none for another server of the same issuer.
        assert!(vault.get(BOB, &x()).await.unwrap().is_none());
        assert!(vault.get(ALICE, &y()).await.unwrap().is_none());
        // Replacing and removing touch only that entry.
        vault
            .put(BOB, &x(), Some(credentials("bob-x")), 2)
            .await
            .unwrap();
        vault
            .put(ALICE, &x(), Some(credentials("alice-x2")), 3)
            .await
            .unwrap();
        assert_eq!(vault.entries(ALICE).await.unwrap(), vec![x()]);
        vault.put(ALICE, &x(), None, 4).await.unwrap();
        assert!(vault.get(ALICE, &x()).await.unwrap().is_none());
        assert_eq!(
            vault.get(BOB, &x()).await.unwrap().unwrap().client_id,
            "bob-x"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_token_copied_to_another_users_row_does_not_open() {
    on_both_stores(|| async {
        let place = place();
        let vault = place.vault(keys(&[("k1", 1)]));
        vault.put(ALICE, &x(), Some(credentials("alice-x")), 1).await.unwrap();
        vault.put(BOB, &x(), Some(credentials("bob-x")), 1).await.unwrap();
        // Someone with write access to the table gives bob alice's sealed value.
        place
            .raw(
                "UPDATE downstream_tokens SET sealed = (SELECT sealed FROM downstream_tokens WHERE holder = ?1) WHERE holder = ?2",
                vec![ALICE.into(), BOB.into()],
            )
            .await;
        match vault.get(BOB, &x()).await {
            Err(CredentialError::Sealed(SealError::DoesNotOpen { key_id })) => {
                assert_eq!(key_id, "k1")
            }
            other => panic!("bob's row with alice's value: {other:?}"),
        }
        // Nothing in the table is a token in clear.
        let rows = place
            .conn
            .read_sql(|sql| {
                Ok(sql.query(
                    "SELECT sealed FROM downstream_tokens WHERE holder = ?1",
                    sql_params![ALICE],
                )?)
            })
            .await
            .unwrap();
        assert!(!rows[0].text(0).unwrap().contains("alice-x"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_reseals_every_entry_and_a_retired_key_is_named_not_guessed() {
    on_both_stores(|| async {
        let place = place();
        let old = place.vault(keys(&[("2026-06", 6)]));
        old.put(ALICE, &x(), Some(credentials("alice-x")), 1)
            .await
            .unwrap();
        old.put(BOB, &y(), Some(credentials("bob-y")), 1)
            .await
            .unwrap();

        // The new key goes first; the old one still opens until rekey.
        let rotated = place.vault(keys(&[("2026-12", 12), ("2026-06", 6)]));
        assert_eq!(
            rotated.get(ALICE, &x()).await.unwrap().unwrap().client_id,
            "alice-x"
        );
        let done = rotated.rekey(2).await.unwrap();
        assert_eq!((done.resealed, done.current), (2, 0));
        assert_eq!(done.key_id, "2026-12");
        assert_eq!(rotated.rekey(3).await.unwrap().resealed, 0);

        // With the old line deleted, everything still opens.
        let new_only = place.vault(keys(&[("2026-12", 12)]));
        assert_eq!(
            new_only.get(BOB, &y()).await.unwrap().unwrap().client_id,
            "bob-y"
        );

        // A vault whose key file lost the key says which key, and rekey changes nothing.
        let lost = place.vault(keys(&[("2027-01", 1)]));
        match lost.get(ALICE, &x()).await {
            Err(CredentialError::Sealed(SealError::UnknownKey { key_id })) => {
                assert_eq!(key_id, "2026-12")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            lost.rekey(4).await,
            Err(CredentialError::Entry { .. })
        ));
        assert_eq!(
            new_only.get(ALICE, &x()).await.unwrap().unwrap().client_id,
            "alice-x"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rekey_that_meets_a_changed_entry_changes_nothing() {
    on_both_stores(|| async {
        let place = place();
        let old = place.vault(keys(&[("old", 1)]));
        old.put(ALICE, &x(), Some(credentials("alice-x")), 1)
            .await
            .unwrap();
        old.put(BOB, &x(), Some(credentials("bob-x")), 1)
            .await
            .unwrap();
        // Bob's entry is changed behind the vault's back.
        place
            .raw(
                "UPDATE downstream_tokens SET sealed = ?1 WHERE holder = ?2",
                vec![
                    base64::engine::general_purpose::STANDARD.encode([7u8; 60]),
                    BOB.into(),
                ],
            )
            .await;
        let rotated = place.vault(keys(&[("new", 2), ("old", 1)]));
        match rotated.rekey(2).await {
            Err(CredentialError::Entry { holder, .. }) => assert_eq!(holder, BOB),
            other => panic!("{other:?}"),
        }
        // Alice's entry (sorted first, so resealed before bob's failed) was rolled back: it is
        // still under the old key, which alone still opens it.
        let old_only = place.vault(keys(&[("old", 1)]));
        assert_eq!(
            old_only.get(ALICE, &x()).await.unwrap().unwrap().client_id,
            "alice-x"
        );
    })
    .await;
}

#[tokio::test]
async fn a_vault_file_others_may_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vault.sqlite");
    TokenVault::open_sqlite(&path, keys(&[("k1", 1)])).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = TokenVault::open_sqlite(&path, keys(&[("k1", 1)])).unwrap_err();
    assert!(refused.to_string().contains("chmod 600"), "{refused}");
}
