//! The approval store's open tickets as a metric: the observable gauge
//! `toolgate.approval.tickets.open`, by `toolgate.approval.ticket.kind` (`host`: the question
//! went back to the caller's host, whose retried call brings the answer; `inbox`: waiting for a
//! person in the approval inbox).
//!
//! Guarantees:
//! - The count is read from the store at each metric export, not kept in process: a ticket that
//!   expires unanswered, or is answered through another instance or after a restart, is counted
//!   right. On a shared store every instance reports the same whole-store count (take the
//!   maximum across instances, not the sum).
//! - A count that fails, or takes longer than [`COUNT_BOUND`], reports no point for that
//!   export (a gap, never a made-up zero), and holds the export up at most that long.
//! - The count runs on the runtime the store was opened on (its pool's connections live
//!   there), spawned onto it and waited for on the SDK's reader thread; a runtime that has shut
//!   down reports nothing instead of panicking.
//!
//! Calls waiting on a person in the call (`toolgate.approvals.pending`) are counted apart, in
//! process: a call that waits on an inbox ticket is one of each.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Meter, ObservableGauge};
use toolgate_core::telemetry::names;
use toolgate_core::{ApprovalLedger, OpenTickets};

/// The longest a metric export waits for the store's count.
pub const COUNT_BOUND: Duration = Duration::from_secs(2);

/// The gauge of `ledger`'s open tickets, counted on `runtime` at each export.
pub(crate) fn open_tickets_gauge(
    meter: &Meter,
    ledger: Arc<ApprovalLedger>,
    runtime: tokio::runtime::Handle,
) -> ObservableGauge<u64> {
    meter
        .u64_observable_gauge(names::METRIC_APPROVAL_TICKETS_OPEN)
        .with_unit("{ticket}")
        .with_description("Approval tickets waiting for a person's answer, in the whole store")
        .with_callback(move |observer| {
            if let Some(open) = count(&ledger, &runtime) {
                for (kind, value) in points(open) {
                    observer.observe(value, &[KeyValue::new(names::APPROVAL_TICKET_KIND, kind)]);
                }
            }
        })
        .build()
}

/// The points one count reports, a kind each.
pub fn points(open: OpenTickets) -> [(&'static str, u64); 2] {
    [("host", open.host), ("inbox", open.inbox)]
}

/// The store's count now, or `None` when it failed, ran past [`COUNT_BOUND`] or the runtime is
/// gone.
fn count(ledger: &Arc<ApprovalLedger>, runtime: &tokio::runtime::Handle) -> Option<OpenTickets> {
    let (sender, receiver) = mpsc::sync_channel(1);
    let ledger = Arc::clone(ledger);
    // Spawned rather than `block_on`: that panics inside a runtime and needs a live timer.
    // A runtime that has shut down drops the task, and with it the sender.
    runtime.spawn(async move {
        let _ = sender.send(ledger.open_tickets(SystemTime::now()).await);
    });
    match receiver.recv_timeout(COUNT_BOUND) {
        Ok(Ok(open)) => Some(open),
        Ok(Err(_)) | Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_its_own_point_so_host_and_inbox_tickets_are_never_summed() {
        let cases = [
            (OpenTickets::default(), [("host", 0), ("inbox", 0)]),
            (
                OpenTickets { host: 3, inbox: 0 },
                [("host", 3), ("inbox", 0)],
            ),
            (
                OpenTickets { host: 1, inbox: 7 },
                [("host", 1), ("inbox", 7)],
            ),
        ];
        for (open, want) in cases {
            assert_eq!(points(open), want, "{open:?}");
        }
    }
}
