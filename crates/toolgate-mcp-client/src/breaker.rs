//! A circuit breaker per imported server: after `failures_to_open` calls in a row that could
//! not reach the server, its calls are refused at once, without sending anything, until a
//! cool-down has passed; then one call goes through as a probe, and its outcome closes the
//! breaker or opens it again for another cool-down.
//!
//! The decisions are data: [`admit`] and [`after`] are pure functions of the state, the
//! settings and the time, table-tested; [`Breaker`] only holds the state behind a lock.
//!
//! What counts as a failure is the transport's: the server could not be started, reached, or
//! did not answer in time. A server that answers, even with an error, is up.
//! Guarantees: a refused call sends nothing and says when to retry; at most one probe is in
//! flight while half open; a poisoned lock fails closed (the call is refused). Each change of
//! state is reported as `toolgate.upstream.state` once a call with telemetry on has used the
//! breaker ([`Breaker::report_to`], [`crate::telemetry`]).

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use toolgate_core::telemetry::Telemetry;

/// When a breaker opens and how long it stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Calls in a row that could not reach the server before its calls are refused.
    pub failures_to_open: u32,
    /// How long calls are refused before one probe is let through.
    pub cool_down: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            failures_to_open: 5,
            cool_down: Duration::from_secs(30),
        }
    }
}

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through; `failures` in a row so far.
    Closed { failures: u32 },
    /// Calls are refused until `until`.
    Open { until: Instant },
    /// One probe is out (`probing`), or may go (`!probing`).
    HalfOpen { probing: bool },
}

impl BreakerState {
    /// The state's name, for health reports: `closed`, `open`, `half_open`.
    pub fn name(&self) -> &'static str {
        match self {
            BreakerState::Closed { .. } => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen { .. } => "half_open",
        }
    }
}

/// What to do with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Send,
    /// Send it as the one probe of a half-open breaker.
    Probe,
    /// Refuse it; the breaker may let a probe through after `retry_after`.
    Refuse {
        retry_after: Duration,
    },
}

/// How a call that was sent ended, as the breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reached {
    /// The server answered (a result or an error of its own).
    Answered,
    /// The server could not be reached, or did not answer in time.
    Unreachable,
    /// Nothing was learnt about the server (the call was canceled, or refused on our side
    /// before it left): counted neither way, but a probe that ends so lets the next call probe.
    Abandoned,
}

/// Whether a call may go now, and the state after deciding.
pub fn admit(
    state: BreakerState,
    settings: &BreakerSettings,
    now: Instant,
) -> (Admission, BreakerState) {
    match state {
        BreakerState::Closed { .. } => (Admission::Send, state),
        BreakerState::Open { until } if now < until => (
            Admission::Refuse {
                retry_after: until - now,
            },
            state,
        ),
        BreakerState::Open { .. } | BreakerState::HalfOpen { probing: false } => {
            (Admission::Probe, BreakerState::HalfOpen { probing: true })
        }
        BreakerState::HalfOpen { probing: true } => (
            Admission::Refuse {
                retry_after: settings.cool_down.min(Duration::from_secs(1)),
            },
            state,
        ),
    }
}

/// The state after a call that was sent ended `reached`.
pub fn after(
    state: BreakerState,
    reached: Reached,
    settings: &BreakerSettings,
    now: Instant,
) -> BreakerState {
    let open = BreakerState::Open {
        until: now + settings.cool_down,
    };
    match (state, reached) {
        (BreakerState::HalfOpen { .. }, Reached::Abandoned) => {
            BreakerState::HalfOpen { probing: false }
        }
        (_, Reached::Abandoned) => state,
        (_, Reached::Answered) => BreakerState::Closed { failures: 0 },
        (BreakerState::Closed { failures }, Reached::Unreachable) => {
            let failures = failures.saturating_add(1);
            if failures >= settings.failures_to_open {
                open
            } else {
                BreakerState::Closed { failures }
            }
        }
        (BreakerState::HalfOpen { .. }, Reached::Unreachable) => open,
        // A call admitted before the breaker opened ended after it: the breaker stays open.
        (BreakerState::Open { .. }, Reached::Unreachable) => state,
    }
}

/// One server's breaker, shared by its tools.
#[derive(Debug)]
pub struct Breaker {
    settings: BreakerSettings,
    state: Mutex<BreakerState>,
    /// Where its state changes are reported (`toolgate.upstream.state`), once a call with
    /// telemetry on has used it ([`Breaker::report_to`]).
    reporting: OnceLock<Reporting>,
}

#[derive(Debug)]
struct Reporting {
    server: String,
    telemetry: Telemetry,
}

impl Breaker {
    pub fn new(settings: BreakerSettings) -> Self {
        Breaker {
            settings,
            state: Mutex::new(BreakerState::Closed { failures: 0 }),
            reporting: OnceLock::new(),
        }
    }

    /// Reports this breaker's state, as server `server`'s, through `telemetry` from now on
    /// (its state now first), when `telemetry` is on and it reports nowhere yet.
    pub fn report_to(&self, server: &str, telemetry: &Telemetry) {
        if !telemetry.is_on() || self.reporting.get().is_some() {
            return;
        }
        let reporting = Reporting {
            server: server.to_string(),
            telemetry: telemetry.clone(),
        };
        if self.reporting.set(reporting).is_ok() {
            self.changed(None, self.state().name());
        }
    }

    /// Reports a change from `left` to `now`, where it reports.
    fn changed(&self, left: Option<&'static str>, now: &'static str) {
        if let Some(reporting) = self.reporting.get() {
            crate::telemetry::record_state(
                &reporting.telemetry,
                &reporting.server,
                &crate::telemetry::state_points(left, now),
            );
        }
    }

    /// Decides about a call now (a poisoned lock refuses it for one cool-down).
    pub fn admit(&self) -> Admission {
        let (admission, left, now) = {
            let Ok(mut state) = self.state.lock() else {
                return Admission::Refuse {
                    retry_after: self.settings.cool_down,
                };
            };
            let left = state.name();
            let (admission, next) = admit(*state, &self.settings, Instant::now());
            *state = next;
            (admission, left, next.name())
        };
        self.changed(Some(left), now);
        admission
    }

    /// Counts how a sent call ended.
    pub fn record(&self, reached: Reached) {
        let changed = self.state.lock().ok().map(|mut state| {
            let left = state.name();
            *state = after(*state, reached, &self.settings, Instant::now());
            (left, state.name())
        });
        if let Some((left, now)) = changed {
            self.changed(Some(left), now);
        }
    }

    /// Where the breaker stands now.
    pub fn state(&self) -> BreakerState {
        self.state.lock().map(|s| *s).unwrap_or(BreakerState::Open {
            until: Instant::now() + self.settings.cool_down,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> BreakerSettings {
        BreakerSettings {
            failures_to_open: 3,
            cool_down: Duration::from_secs(10),
        }
    }

    #[test]
    fn a_server_that_keeps_failing_is_not_called_until_the_cool_down_passed() {
        let t0 = Instant::now();
        let s = settings();
        let mut state = BreakerState::Closed { failures: 0 };
        for i in 1..=3 {
            let (admission, next) = admit(state, &s, t0);
            assert_eq!(admission, Admission::Send, "call {i}");
            state = after(next, Reached::Unreachable, &s, t0);
        }
        assert_eq!(
            state,
            BreakerState::Open {
                until: t0 + s.cool_down
            }
        );
        let cases = [
            (
                t0,
                Admission::Refuse {
                    retry_after: Duration::from_secs(10),
                },
            ),
            (
                t0 + Duration::from_secs(4),
                Admission::Refuse {
                    retry_after: Duration::from_secs(6),
                },
            ),
            (t0 + Duration::from_secs(10), Admission::Probe),
        ];
        for (now, want) in cases {
            assert_eq!(
                admit(state, &s, now).0,
                want,
                "{:?} after opening",
                now - t0
            );
        }
    }

    #[test]
    fn only_one_probe_is_in_flight_and_its_outcome_decides() {
        let s = settings();
        let t1 = Instant::now() + Duration::from_secs(60);
        let open = BreakerState::Open { until: t1 };
        let (probe, probing) = admit(open, &s, t1);
        assert_eq!(probe, Admission::Probe);
        assert!(
            matches!(admit(probing, &s, t1).0, Admission::Refuse { .. }),
            "a second call waits for the probe"
        );
        assert_eq!(
            after(probing, Reached::Answered, &s, t1),
            BreakerState::Closed { failures: 0 }
        );
        assert_eq!(
            after(probing, Reached::Unreachable, &s, t1),
            BreakerState::Open {
                until: t1 + s.cool_down
            },
            "a failed probe opens the breaker for another cool-down"
        );
    }

    #[test]
    fn an_answer_between_failures_resets_the_count() {
        let s = settings();
        let now = Instant::now();
        let two = after(
            after(
                BreakerState::Closed { failures: 0 },
                Reached::Unreachable,
                &s,
                now,
            ),
            Reached::Unreachable,
            &s,
            now,
        );
        assert_eq!(two, BreakerState::Closed { failures: 2 });
        let answered = after(two, Reached::Answered, &s, now);
        assert_eq!(answered, BreakerState::Closed { failures: 0 });
        assert_eq!(
            after(answered, Reached::Unreachable, &s, now),
            BreakerState::Closed { failures: 1 }
        );
    }

    #[test]
    fn a_probe_that_learnt_nothing_lets_the_next_call_probe_instead_of_waiting_forever() {
        let s = settings();
        let now = Instant::now();
        let probing = BreakerState::HalfOpen { probing: true };
        let abandoned = after(probing, Reached::Abandoned, &s, now);
        assert_eq!(admit(abandoned, &s, now).0, Admission::Probe);
        let closed = BreakerState::Closed { failures: 2 };
        assert_eq!(
            after(closed, Reached::Abandoned, &s, now),
            closed,
            "not counted either way"
        );
    }

    #[test]
    fn a_late_failure_of_a_call_sent_before_opening_keeps_it_open_without_extending() {
        let s = settings();
        let now = Instant::now();
        let open = BreakerState::Open {
            until: now + s.cool_down,
        };
        assert_eq!(
            after(open, Reached::Unreachable, &s, now + Duration::from_secs(5)),
            open
        );
    }
}
