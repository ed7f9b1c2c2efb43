//! What the receiver has been told (delay, failing) and what it has received, shared by both
//! listeners and the test. Locks are held only to copy in or out, never across an await; a
//! poisoned lock (a panic elsewhere while holding it) is still read, since the data is plain.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use crate::decode::{self, ReceivedMetric, ReceivedSpan, Transport};

/// How the receiver answers.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Behaviour {
    pub(crate) delay: Duration,
    pub(crate) fail: bool,
}

/// How one export request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Accepted,
    FailedOnPurpose,
    Malformed,
    TooLarge,
    Refused,
}

/// Export requests per outcome, for one transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Decoded, recorded and answered with success.
    pub accepted: u64,
    /// Answered with an error because the receiver was told to fail (nothing recorded).
    pub failed_on_purpose: u64,
    /// A body that did not decode (HTTP 400; gRPC decode errors are answered by tonic and not
    /// counted).
    pub malformed: u64,
    /// A body over the bound (HTTP 413; gRPC's are refused by tonic and not counted).
    pub too_large: u64,
    /// Another path, method or content type (HTTP 404, 405, 415).
    pub refused: u64,
}

impl RequestCounts {
    /// Every request counted, whatever its outcome.
    pub fn total(&self) -> u64 {
        self.accepted + self.failed_on_purpose + self.malformed + self.too_large + self.refused
    }

    fn add(&mut self, outcome: Outcome) {
        let slot = match outcome {
            Outcome::Accepted => &mut self.accepted,
            Outcome::FailedOnPurpose => &mut self.failed_on_purpose,
            Outcome::Malformed => &mut self.malformed,
            Outcome::TooLarge => &mut self.too_large,
            Outcome::Refused => &mut self.refused,
        };
        *slot = slot.saturating_add(1);
    }
}

/// A request's headers as sent: lower-case names, values that are visible ASCII (others are
/// left out), in the order received.
pub type Headers = Vec<(String, String)>;

#[derive(Debug, Default)]
pub(crate) struct Received {
    pub(crate) spans: Vec<ReceivedSpan>,
    pub(crate) metrics: Vec<ReceivedMetric>,
    pub(crate) trace_requests: Vec<(Transport, ExportTraceServiceRequest)>,
    /// Each accepted trace export's request headers (gRPC: its metadata), in order.
    pub(crate) trace_headers: Vec<(Transport, Headers)>,
    pub(crate) metrics_requests: Vec<(Transport, ExportMetricsServiceRequest)>,
    pub(crate) http: RequestCounts,
    pub(crate) grpc: RequestCounts,
}

impl Received {
    fn counts_mut(&mut self, transport: Transport) -> &mut RequestCounts {
        match transport {
            Transport::Http => &mut self.http,
            Transport::Grpc => &mut self.grpc,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Shared {
    behaviour: Mutex<Behaviour>,
    received: Mutex<Received>,
}

impl Shared {
    pub(crate) fn new(behaviour: Behaviour) -> Self {
        Shared {
            behaviour: Mutex::new(behaviour),
            received: Mutex::new(Received::default()),
        }
    }

    pub(crate) fn behaviour(&self) -> Behaviour {
        *self
            .behaviour
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_behaviour(&self, change: impl FnOnce(&mut Behaviour)) {
        change(
            &mut self
                .behaviour
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
    }

    pub(crate) fn received(&self) -> MutexGuard<'_, Received> {
        self.received.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn count(&self, transport: Transport, outcome: Outcome) {
        self.received().counts_mut(transport).add(outcome);
    }

    pub(crate) fn record_traces(
        &self,
        transport: Transport,
        headers: Headers,
        request: ExportTraceServiceRequest,
    ) {
        let spans = decode::spans_of(transport, &request);
        let mut received = self.received();
        received.spans.extend(spans);
        received.trace_requests.push((transport, request));
        received.trace_headers.push((transport, headers));
        received.counts_mut(transport).add(Outcome::Accepted);
    }

    pub(crate) fn record_metrics(
        &self,
        transport: Transport,
        request: ExportMetricsServiceRequest,
    ) {
        let metrics = decode::metrics_of(transport, &request);
        let mut received = self.received();
        received.metrics.extend(metrics);
        received.metrics_requests.push((transport, request));
        received.counts_mut(transport).add(Outcome::Accepted);
    }
}
