//! The catalogue's release contract: a [`snapshot`] of every tool a toolset offers (model view,
//! schemas, policy, bounds, error codes, deprecation), and a pure comparison of two snapshots
//! ([`classify::check`]) that says which differences break callers, which change policy and
//! must be reviewed ([`review`]), and which are compatible; and the release [`manifest`] that
//! names a release's configuration, catalogues, eval suites and last eval results by digest.
//!
//! Guarantees: a snapshot is read only in a format this build knows (a newer one is refused,
//! naming both formats) and with no field it does not know; the comparison never does I/O and
//! reports every difference it finds as data. Refuses: serving two versions of a tool side by
//! side is not this crate's job (a removed tool is simply gone from the new catalogue).

pub mod classify;
pub mod manifest;
pub mod review;
mod schema_diff;
pub mod snapshot;

pub use classify::{Change, ChangeKind, Report, Rule, check};
pub use review::{Accepted, Review, ReviewError};
pub use snapshot::{FORMAT, Snapshot, SnapshotError, ToolEntry};

/// The stable error code names, one a line (`#` comments), as committed.
pub const STABLE_ERROR_CODES: &str = include_str!("../stable-error-codes.txt");

/// The names listed in [`STABLE_ERROR_CODES`].
pub fn stable_error_codes() -> Vec<&'static str> {
    STABLE_ERROR_CODES
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}
