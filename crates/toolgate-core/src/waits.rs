//! Time spent waiting for a human, per call, so that an enclosing call's deadline pauses while
//! a call nested inside it waits for an approval: a person is never hurried by a tool's
//! deadline, and a handler that hangs on its own is still stopped.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(crate) struct HumanWaits {
    state: Mutex<WaitState>,
    changed: Notify,
    parent: Option<Arc<HumanWaits>>,
}

#[derive(Debug, Default)]
struct WaitState {
    active: usize,
    since: Option<Instant>,
    total: Duration,
}

impl HumanWaits {
    pub(crate) fn child_of(parent: Option<Arc<HumanWaits>>) -> Arc<Self> {
        Arc::new(HumanWaits {
            parent,
            ..HumanWaits::default()
        })
    }

    /// Marks a human wait on this call and every enclosing one until the guard drops.
    pub(crate) fn begin(self: &Arc<Self>) -> WaitGuard {
        let mut level = Some(Arc::clone(self));
        let mut marked = Vec::new();
        while let Some(waits) = level {
            if let Ok(mut state) = waits.state.lock() {
                if state.active == 0 {
                    state.since = Some(Instant::now());
                }
                state.active += 1;
            }
            waits.changed.notify_waiters();
            level = waits.parent.clone();
            marked.push(waits);
        }
        WaitGuard { marked }
    }

    /// Whether a human is being waited for now, and how long humans were waited for so far.
    pub(crate) fn paused(&self) -> (bool, Duration) {
        match self.state.lock() {
            Ok(state) => {
                let current = state.since.map(|s| s.elapsed()).unwrap_or_default();
                (state.active > 0, state.total + current)
            }
            // A poisoned lock cannot pause anything: the deadline applies as declared.
            Err(_) => (false, Duration::ZERO),
        }
    }

    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

pub(crate) struct WaitGuard {
    marked: Vec<Arc<HumanWaits>>,
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        for waits in &self.marked {
            if let Ok(mut state) = waits.state.lock() {
                state.active = state.active.saturating_sub(1);
                if state.active == 0
                    && let Some(since) = state.since.take()
                {
                    state.total += since.elapsed();
                }
            }
            waits.changed.notify_waiters();
        }
    }
}
