//! What the clients of a gateway see while an imported server is down (`[mcp.servers.NAME]
//! on_outage`):
//! - `fail` (the default): its tools stay listed, and a call is answered at once, unsent, with
//!   a typed, retryable `transient_dependency` error that says when to retry (the breaker's);
//! - `hide`: while its breaker is open or half open, its tools are left out of `tools/list`
//!   ([`Availability`]), the front end tells the clients that keep a session
//!   (`notifications/tools/list_changed`), and again when they return.
//!
//! No call reaches a hidden tool, so nothing would ever probe its server: the watcher does. It
//! looks every tick; a hiding server whose cool-down has passed gets the breaker's one probe,
//! a `tools/list` (bounded by the list timeout), and its outcome closes the breaker or opens it
//! again. Every change of the hidden set is announced.
//!
//! Guarantees: the hidden set is a pure function of the servers' modes and breaker states
//! ([`hidden_tools`]); the watcher runs only while the [`OutageWatch`] exists (it holds it
//! weakly) and only when some server hides; a probe is the breaker's (at most one in flight).

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde::Deserialize;
use toolgate_core::health::Availability;

use super::breaker::{Admission, BreakerState, Reached};
use super::forwarded::reached_by;
use super::upstream::Upstream;

/// How often the watcher looks.
pub const WATCH_TICK: Duration = Duration::from_millis(250);

/// `on_outage` of a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutageMode {
    /// Listed; calls answered with a typed `unavailable` error (retryable, with retry-after).
    #[default]
    Fail,
    /// Left out of `tools/list` while down; announced when they return.
    Hide,
}

/// The tools hidden now: every tool of a server that hides and whose breaker is not closed.
pub fn hidden_tools<'a>(
    servers: impl IntoIterator<Item = (OutageMode, BreakerState, &'a [String])>,
) -> BTreeSet<String> {
    servers
        .into_iter()
        .filter(|(mode, state, _)| {
            *mode == OutageMode::Hide && !matches!(state, BreakerState::Closed { .. })
        })
        .flat_map(|(_, _, tools)| tools.iter().cloned())
        .collect()
}

/// One imported server as the watcher sees it.
pub struct Watched {
    pub mode: OutageMode,
    /// The gateway's session with it (whose breaker counts every caller's calls).
    pub upstream: Arc<Upstream>,
    /// Our names of its offered tools.
    pub tools: Vec<String>,
}

/// The imported servers' availability, watched.
pub struct OutageWatch {
    servers: Vec<Watched>,
    changes: tokio::sync::watch::Sender<u64>,
}

impl OutageWatch {
    /// Watches `servers` (on the current tokio runtime, every `tick`, when one of them hides).
    pub fn start(servers: Vec<Watched>, tick: Duration) -> Arc<OutageWatch> {
        let (changes, _) = tokio::sync::watch::channel(0);
        let watch = Arc::new(OutageWatch { servers, changes });
        if watch.servers.iter().any(|s| s.mode == OutageMode::Hide) {
            tokio::spawn(watch_loop(Arc::downgrade(&watch), tick));
        }
        watch
    }

    fn current(&self) -> BTreeSet<String> {
        hidden_tools(
            self.servers
                .iter()
                .map(|s| (s.mode, s.upstream.breaker().state(), s.tools.as_slice())),
        )
    }

    /// Probes each hiding server whose cool-down has passed.
    async fn probe_due(&self) {
        let now = Instant::now();
        for server in self.servers.iter().filter(|s| s.mode == OutageMode::Hide) {
            let breaker = server.upstream.breaker();
            let due = match breaker.state() {
                BreakerState::Open { until } => until <= now,
                BreakerState::HalfOpen { probing } => !probing,
                BreakerState::Closed { .. } => false,
            };
            if !due || breaker.admit() != Admission::Probe {
                continue;
            }
            let reached = match server.upstream.list_tools().await {
                Ok(_) => Reached::Answered,
                Err(error) => reached_by(&error),
            };
            breaker.record(reached);
        }
    }
}

impl Availability for OutageWatch {
    fn hidden(&self) -> BTreeSet<String> {
        self.current()
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

async fn watch_loop(watch: Weak<OutageWatch>, tick: Duration) {
    let mut last = BTreeSet::new();
    loop {
        tokio::time::sleep(tick).await;
        let Some(watch) = watch.upgrade() else {
            return;
        };
        watch.probe_due().await;
        let now = watch.current();
        if now != last {
            last = now;
            watch.changes.send_modify(|generation| *generation += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_hiding_server_that_is_down_leaves_the_list() {
        let later = Instant::now() + Duration::from_secs(5);
        let a = vec!["a__x".to_string(), "a__y".to_string()];
        let b = vec!["b__z".to_string()];
        let closed = BreakerState::Closed { failures: 2 };
        let open = BreakerState::Open { until: later };
        let probing = BreakerState::HalfOpen { probing: true };
        let cases: Vec<(Vec<(OutageMode, BreakerState, &[String])>, Vec<&str>)> = vec![
            (vec![(OutageMode::Hide, closed, &a)], vec![]),
            (vec![(OutageMode::Hide, open, &a)], vec!["a__x", "a__y"]),
            (vec![(OutageMode::Hide, probing, &a)], vec!["a__x", "a__y"]),
            // `fail` keeps its tools listed whatever the breaker says.
            (vec![(OutageMode::Fail, open, &a)], vec![]),
            (
                vec![(OutageMode::Hide, open, &a), (OutageMode::Hide, closed, &b)],
                vec!["a__x", "a__y"],
            ),
        ];
        for (servers, want) in cases {
            let got = hidden_tools(servers.clone());
            let want: BTreeSet<String> = want.into_iter().map(str::to_string).collect();
            assert_eq!(got, want, "{servers:?}");
        }
    }

    #[test]
    fn outage_modes_are_spelled_as_in_the_configuration() {
        #[derive(Deserialize)]
        struct Entry {
            on_outage: OutageMode,
        }
        let parse = |text: &str| toml::from_str::<Entry>(text).map(|e| e.on_outage);
        assert_eq!(parse("on_outage = \"hide\"").unwrap(), OutageMode::Hide);
        assert_eq!(parse("on_outage = \"fail\"").unwrap(), OutageMode::Fail);
        assert!(parse("on_outage = \"retry\"").is_err());
    }
}
