//! A real OTLP receiver for tests: it listens where an OpenTelemetry exporter would send to a
//! collector, decodes what the exporter really sent (with `opentelemetry-proto`'s generated
//! messages) and keeps it, flattened, for assertions.
//!
//! Contract:
//! - [`Receiver::start`] binds two listeners on 127.0.0.1, on ephemeral ports only: OTLP/HTTP
//!   with protobuf bodies ([`Receiver::http_endpoint`]: `POST /v1/traces`, `POST /v1/metrics`)
//!   and OTLP/gRPC ([`Receiver::grpc_endpoint`]: `TraceService` and `MetricsService`). Logs and
//!   JSON bodies are not served (404 and 415).
//! - Both serve on the receiver's own thread and runtime, so a test may block (or not) in any
//!   runtime of its own. [`Receiver::stop`], or dropping the receiver, stops both listeners and
//!   closes every open connection before it returns: an exporter pointed there afterwards meets
//!   a closed port, as with a collector that is down. What was received stays readable.
//! - [`ReceiverOptions`] (or the setters, at any time) add a delay before every answer (a slow
//!   collector: what arrives is recorded at once, only the answer waits) and make every export
//!   answer an error (HTTP 503, gRPC `unavailable`) without recording it.
//! - An HTTP body over [`MAX_BODY_BYTES`] is answered 413 without being read past the bound; a
//!   body that does not decode is answered 400. Both are counted and nothing is recorded; no
//!   input makes the receiver panic. gRPC messages are bounded by the same size, enforced by
//!   tonic.
//! - Waits ([`Receiver::wait_for_spans`] and the like) poll what was received every few
//!   milliseconds until a condition holds or the timeout passes, never longer.
//!
//! Why our own: no OpenTelemetry Collector or Jaeger can run where the tests run, and an
//! exporter's own in-memory test exporters would skip the encoding and the transport, which are
//! what the telemetry tests must see.

mod decode;
mod grpc;
mod http_front;
mod state;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::sync::oneshot;

pub use decode::{
    AttributeValue, Attributes, DataPoint, MetricKind, PointValue, ReceivedEvent, ReceivedMetric,
    ReceivedSpan, SpanKind, SpanStatus, StatusCode, Temporality, Transport,
};
pub use state::{Headers, RequestCounts};

use state::{Behaviour, Shared};

/// The largest export body accepted, over either transport (16 MiB).
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// How often a wait looks at what was received.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// How the receiver answers; the default answers at once, with success.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReceiverOptions {
    /// Waited before every answer, over both transports: a slow collector.
    pub delay: Duration,
    /// Answer every export with an error (HTTP 503, gRPC `unavailable`) and record nothing:
    /// a collector that refuses.
    pub fail: bool,
}

impl ReceiverOptions {
    /// Waits `delay` before every answer.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Answers every export with an error.
    pub fn failing(mut self) -> Self {
        self.fail = true;
        self
    }
}

/// A wait that ran out of time. It names what had arrived, for the failure message.
#[derive(Debug, thiserror::Error)]
#[error("waited {waited:?} for {what} ({condition}); {} arrived: {arrived:?}", arrived.len())]
pub struct WaitTimedOut {
    /// `"spans"` or `"metrics"`.
    pub what: &'static str,
    /// What was waited for, as the [`Until`] describes itself.
    pub condition: String,
    pub waited: Duration,
    /// The names of what had arrived when the wait gave up.
    pub arrived: Vec<String>,
}

/// What a wait waits for: a count, or any condition on everything received so far.
pub struct Until<T> {
    condition: String,
    holds: Box<dyn Fn(&[T]) -> bool + Send + Sync>,
}

impl<T> Until<T> {
    /// At least `count` received.
    pub fn count(count: usize) -> Self {
        Until {
            condition: format!("at least {count}"),
            holds: Box::new(move |items| items.len() >= count),
        }
    }

    /// `holds` is true of everything received so far; `condition` says what it means, for the
    /// failure message.
    pub fn condition(
        condition: impl Into<String>,
        holds: impl Fn(&[T]) -> bool + Send + Sync + 'static,
    ) -> Self {
        Until {
            condition: condition.into(),
            holds: Box::new(holds),
        }
    }
}

impl<T> std::fmt::Debug for Until<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Until")
            .field("condition", &self.condition)
            .finish_non_exhaustive()
    }
}

/// A running receiver; see the module documentation for its contract.
#[derive(Debug)]
pub struct Receiver {
    shared: Arc<Shared>,
    http_addr: SocketAddr,
    grpc_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Binds both listeners on 127.0.0.1 (ephemeral ports) and starts serving on a thread of
    /// the receiver's own.
    pub fn start(options: ReceiverOptions) -> io::Result<Receiver> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let http_listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let grpc_listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let http_addr = http_listener.local_addr()?;
        let grpc_addr = grpc_listener.local_addr()?;
        http_listener.set_nonblocking(true)?;
        grpc_listener.set_nonblocking(true)?;
        let (http_listener, grpc_listener) = {
            let _entered = runtime.enter();
            (
                tokio::net::TcpListener::from_std(http_listener)?,
                tokio::net::TcpListener::from_std(grpc_listener)?,
            )
        };
        let shared = Arc::new(Shared::new(Behaviour {
            delay: options.delay,
            fail: options.fail,
        }));
        runtime.spawn(http_front::serve(http_listener, Arc::clone(&shared)));
        runtime.spawn(grpc::serve(grpc_listener, Arc::clone(&shared)));
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("otlp-receiver".to_string())
            .spawn(move || {
                // Told to stop, or the receiver is gone (the sender dropped): either way, stop.
                let _ = runtime.block_on(stopped);
                // Dropping the runtime drops every task: both listeners and every connection
                // close here, mid-request or not.
                drop(runtime);
            })?;
        Ok(Receiver {
            shared,
            http_addr,
            grpc_addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, the base an OTLP/HTTP exporter appends `/v1/traces` to (give
    /// the full signal path when an exporter's builder takes it as is).
    pub fn http_endpoint(&self) -> String {
        format!("http://{}", self.http_addr)
    }

    /// `http://127.0.0.1:PORT` of the gRPC listener.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://{}", self.grpc_addr)
    }

    /// The HTTP listener's address.
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The gRPC listener's address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// Changes the delay waited before every answer, from the next request on.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.set_behaviour(|b| b.delay = delay);
    }

    /// Starts (`true`) or stops (`false`) answering every export with an error.
    pub fn set_failing(&self, fail: bool) {
        self.shared.set_behaviour(|b| b.fail = fail);
    }

    /// Stops both listeners and closes their connections; returns once they are closed.
    /// Calling it again does nothing.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            // The thread may already be gone; then there is nothing to tell.
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic on that thread has already been reported by the panic hook.
            let _ = thread.join();
        }
    }

    /// Every span received, in the order received.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.shared.received().spans.clone()
    }

    /// Every metric received, one entry per metric per export, in the order received.
    pub fn metrics(&self) -> Vec<ReceivedMetric> {
        self.shared.received().metrics.clone()
    }

    /// The trace export requests as decoded, for what the flattening leaves out.
    pub fn trace_requests(&self) -> Vec<(Transport, ExportTraceServiceRequest)> {
        self.shared.received().trace_requests.clone()
    }

    /// The request headers (gRPC: metadata) of each trace export accepted, in order.
    pub fn trace_request_headers(&self) -> Vec<(Transport, Headers)> {
        self.shared.received().trace_headers.clone()
    }

    /// The metrics export requests as decoded, for what the flattening leaves out.
    pub fn metrics_requests(&self) -> Vec<(Transport, ExportMetricsServiceRequest)> {
        self.shared.received().metrics_requests.clone()
    }

    /// Export requests received over `transport`, by outcome.
    pub fn request_counts(&self, transport: Transport) -> RequestCounts {
        let received = self.shared.received();
        match transport {
            Transport::Http => received.http,
            Transport::Grpc => received.grpc,
        }
    }

    /// Forgets everything received and every count.
    pub fn clear(&self) {
        *self.shared.received() = state::Received::default();
    }

    /// Waits (asynchronously) until `until` holds of the spans received, for at most `timeout`.
    pub async fn wait_for_spans(
        &self,
        until: Until<ReceivedSpan>,
        timeout: Duration,
    ) -> Result<Vec<ReceivedSpan>, WaitTimedOut> {
        let wait = Wait::new("spans", until, timeout);
        loop {
            match wait.look(self.spans(), |span| span.name.clone()) {
                Look::Done(result) => return result,
                Look::Again(pause) => tokio::time::sleep(pause).await,
            }
        }
    }

    /// Waits (asynchronously) until `until` holds of the metrics received, for at most
    /// `timeout`.
    pub async fn wait_for_metrics(
        &self,
        until: Until<ReceivedMetric>,
        timeout: Duration,
    ) -> Result<Vec<ReceivedMetric>, WaitTimedOut> {
        let wait = Wait::new("metrics", until, timeout);
        loop {
            match wait.look(self.metrics(), |metric| metric.name.clone()) {
                Look::Done(result) => return result,
                Look::Again(pause) => tokio::time::sleep(pause).await,
            }
        }
    }

    /// [`Receiver::wait_for_spans`] for a thread that may block (not a runtime's worker).
    pub fn wait_for_spans_blocking(
        &self,
        until: Until<ReceivedSpan>,
        timeout: Duration,
    ) -> Result<Vec<ReceivedSpan>, WaitTimedOut> {
        let wait = Wait::new("spans", until, timeout);
        loop {
            match wait.look(self.spans(), |span| span.name.clone()) {
                Look::Done(result) => return result,
                Look::Again(pause) => std::thread::sleep(pause),
            }
        }
    }

    /// [`Receiver::wait_for_metrics`] for a thread that may block (not a runtime's worker).
    pub fn wait_for_metrics_blocking(
        &self,
        until: Until<ReceivedMetric>,
        timeout: Duration,
    ) -> Result<Vec<ReceivedMetric>, WaitTimedOut> {
        let wait = Wait::new("metrics", until, timeout);
        loop {
            match wait.look(self.metrics(), |metric| metric.name.clone()) {
                Look::Done(result) => return result,
                Look::Again(pause) => std::thread::sleep(pause),
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One wait in progress: it ends when its condition holds or its time is up, and says how long
/// to pause before looking again (never past the deadline).
struct Wait<T> {
    what: &'static str,
    until: Until<T>,
    started: Instant,
    timeout: Duration,
}

enum Look<T> {
    Done(Result<Vec<T>, WaitTimedOut>),
    Again(Duration),
}

impl<T> Wait<T> {
    fn new(what: &'static str, until: Until<T>, timeout: Duration) -> Self {
        Wait {
            what,
            until,
            started: Instant::now(),
            timeout,
        }
    }

    fn look(&self, items: Vec<T>, name: impl Fn(&T) -> String) -> Look<T> {
        if (self.until.holds)(&items) {
            return Look::Done(Ok(items));
        }
        let waited = self.started.elapsed();
        match self.timeout.checked_sub(waited) {
            Some(left) if !left.is_zero() => Look::Again(POLL_EVERY.min(left)),
            _ => Look::Done(Err(WaitTimedOut {
                what: self.what,
                condition: self.until.condition.clone(),
                waited,
                arrived: items.iter().map(name).collect(),
            })),
        }
    }
}
