//! What an instance says about itself to whoever routes requests to it (`/readyz` of the HTTP
//! server): one [`Check`] per dependency, each made by the part that owns it (the shared
//! database, each imported server's breaker).
//!
//! Guarantees: a check answers within its own bound (an implementation that must wait on the
//! network bounds the wait itself); [`ready`] is false when any required check failed, and only
//! then, so a dependency that only some tools need (an imported server) is reported without
//! taking the whole instance out of rotation.

use crate::future::BoxFuture;

/// One dependency's state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// What was checked (`database`, `upstream:books`).
    pub name: String,
    /// Whether it works now.
    pub ready: bool,
    /// Whether the instance can serve at all without it.
    pub required: bool,
    /// A short state (`reachable`, `unreachable`, `closed`, `open`, `half_open`); never a
    /// secret or a server's own words.
    pub state: String,
}

/// Something that can say whether it works.
pub trait HealthCheck: Send + Sync {
    fn check(&self) -> BoxFuture<'_, Check>;
}

/// Which tools are out of service now: their server is down and configured to hide them
/// (`on_outage = "hide"`), so a front end lists only what can be called, and tells the clients
/// that keep a session when that changes.
pub trait Availability: Send + Sync {
    /// The names of the tools hidden now.
    fn hidden(&self) -> std::collections::BTreeSet<String>;
    /// A receiver that sees a new value each time the hidden set changed.
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;
}

/// Whether an instance with these checks should receive requests.
pub fn ready(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.ready || !c.required)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(ready: bool, required: bool) -> Check {
        Check {
            name: "x".into(),
            ready,
            required,
            state: String::new(),
        }
    }

    #[test]
    fn only_a_failed_required_check_takes_the_instance_out_of_rotation() {
        let cases = [
            ("nothing to check", vec![], true),
            (
                "all well",
                vec![check(true, true), check(true, false)],
                true,
            ),
            (
                "an upstream down",
                vec![check(true, true), check(false, false)],
                true,
            ),
            (
                "the database down",
                vec![check(false, true), check(true, false)],
                false,
            ),
        ];
        for (label, checks, want) in cases {
            assert_eq!(ready(&checks), want, "{label}");
        }
    }
}
