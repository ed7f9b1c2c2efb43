//! The shared database's schema: versioned migration files
//! (`crates/toolgate-store/migrations/V{n}__{name}.sql`) embedded in the binary and applied at
//! start by refinery, in the table `toolgate_schema_history`.
//!
//! Guarantees: instances starting together apply each migration once (they take turns under a
//! PostgreSQL advisory lock); a database that records a version this binary does not have is
//! refused before anything runs ([`PgError::SchemaNewer`]), and so is one whose applied
//! migration differs from the binary's file of the same version. A migration that fails leaves
//! the schema at the last version that succeeded (each runs in its own transaction).

use tokio_postgres::Client;

use super::error::PgError;

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// The table refinery records applied versions in.
pub const HISTORY_TABLE: &str = "toolgate_schema_history";

/// A fixed key for `pg_advisory_lock`, so concurrent starts migrate one at a time.
const MIGRATION_LOCK: i64 = 0x746f_6f6c_6761_7465; // "toolgate"

/// The newest schema version this binary knows.
pub fn known_version() -> i64 {
    embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| i64::from(m.version()))
        .max()
        .unwrap_or(0)
}

/// Whether a database at schema version `found` (`None`: never migrated) may be opened by a
/// binary that knows versions up to `known`.
pub fn may_open(found: Option<i64>, known: i64) -> bool {
    found.is_none_or(|found| found <= known)
}

/// Applies the missing migrations, or refuses a newer schema. `database` names it in errors.
pub(crate) async fn bring_up_to_date(client: &mut Client, database: &str) -> Result<(), PgError> {
    let failed = |e: tokio_postgres::Error| PgError::from_client(database, &e);
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(failed)?;
    let outcome = migrate_locked(client, database).await;
    // The lock ends with the session anyway; unlocking lets the next instance go on at once.
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(failed);
    outcome.and(unlocked.map(|_| ()))
}

async fn migrate_locked(client: &mut Client, database: &str) -> Result<(), PgError> {
    let found = recorded_version(client)
        .await
        .map_err(|e| PgError::from_client(database, &e))?;
    let known = known_version();
    if !may_open(found, known) {
        return Err(PgError::SchemaNewer {
            database: database.into(),
            found: found.unwrap_or(0),
            known,
        });
    }
    let mut runner = embedded::migrations::runner()
        .set_abort_divergent(true)
        .set_abort_missing(true);
    runner
        .set_migration_table_name(HISTORY_TABLE)
        .run_async(client)
        .await
        .map(|_| ())
        .map_err(|e| PgError::Migration {
            database: database.into(),
            detail: e.to_string(),
        })
}

/// The newest version recorded in the history table, or `None` when there is no table yet.
async fn recorded_version(client: &Client) -> Result<Option<i64>, tokio_postgres::Error> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL",
            &[&format!("public.{HISTORY_TABLE}")],
        )
        .await?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let row = client
        .query_one(
            &format!("SELECT max(version)::bigint FROM {HISTORY_TABLE}"),
            &[],
        )
        .await?;
    Ok(row.get::<_, Option<i64>>(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_newer_than_the_binary_is_never_opened() {
        let cases = [
            ("a fresh database", None, 3, true),
            ("an older schema", Some(2), 3, true),
            ("the same schema", Some(3), 3, true),
            ("a newer schema", Some(4), 3, false),
        ];
        for (label, found, known, want) in cases {
            assert_eq!(may_open(found, known), want, "{label}");
        }
    }

    #[test]
    fn the_embedded_migrations_start_at_one_and_have_no_gaps() {
        let mut versions: Vec<i64> = embedded::migrations::runner()
            .get_migrations()
            .iter()
            .map(|m| i64::from(m.version()))
            .collect();
        versions.sort_unstable();
        let expected: Vec<i64> = (1..=versions.len() as i64).collect();
        assert_eq!(versions, expected);
        assert_eq!(known_version(), versions.len() as i64);
    }
}
