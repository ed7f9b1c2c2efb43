//! OTLP export of toolgate's spans and metrics, started from `[telemetry]`.
//!
//! Guarantees:
//! - [`start`] validates the configuration first and starts nothing when `otlp_endpoint` is
//!   absent (`Ok(None)`: the caller uses `Telemetry::off()`, which costs one branch per call).
//! - Recording never waits on the collector. An ended span is handed to a bounded queue with a
//!   non-blocking send; when `queue_capacity` spans are already held (queued, or in a batch
//!   being exported) it is dropped and counted. Metrics are aggregated in memory where they
//!   are recorded and exported from the SDK's periodic reader thread.
//! - A collector that fails an export (refuses it, is not there, or answers after
//!   `export_timeout_ms`) is left alone for a backoff: 1 s after the first failure, doubling
//!   with each failure in a row up to 30 s ([`backoff_delay`]). Meanwhile a span that ends is
//!   dropped and counted where it ends: it is not queued, encoded or sent, so a collector that
//!   is down costs a call no more than one that is up. When the backoff ends, the next batch
//!   is tried; a success ends the run of failures. The span exporter does not retry a batch
//!   itself (its default policy would send it up to four times).
//! - Every sampled span that ends is counted exactly once, as exported (the collector accepted
//!   its batch) or dropped (no room, an export that failed or ran past `export_timeout_ms`, or
//!   left unexported at shutdown): once [`Exporting::shutdown`] has returned (without a
//!   timeout, which it reports), `spans_dropped() + spans_exported()` is the number of sampled
//!   spans that ended. The dropped count is also exported, as the counter
//!   `toolgate.telemetry.spans.dropped`.
//! - [`Exporting::flush`] and [`Exporting::shutdown`] (and dropping the [`Exporting`]) wait a
//!   bounded time: for spans, an export in progress (at most `export_timeout_ms`), then the
//!   spans still held, exported within one more `export_timeout_ms` or dropped, plus a second
//!   of grace; for metrics, the SDK reader's own bound (5 s).
//! - The endpoint, protocol and timeout come from `[telemetry]` alone (the exporter's
//!   `OTEL_EXPORTER_OTLP_*` environment variables do not override them); headers named in
//!   `OTEL_EXPORTER_OTLP_HEADERS` are added to the configured ones, as the exporter does.
//! - Sampling is `ParentBased(TraceIdRatioBased(sampling_ratio))`: a remote parent's decision
//!   is kept, a new trace is sampled at the configured ratio. The resource carries
//!   `service.name` (the configured one) and `service.version` (toolgate's).
//!
//! Why our own span processor ([`BoundedSpanProcessor`]): the SDK's `BatchSpanProcessor`
//! (opentelemetry_sdk 0.33, `trace/span_processor.rs`) also drops when its queue is full, but
//! keeps its drop count private and counts neither a failed export nor what is left at
//! shutdown, so toolgate could not tell an operator how many spans a slow or absent collector
//! cost. Ours owns one thread with a current-thread Tokio runtime on which the OTLP exporter
//! (reqwest for OTLP/HTTP, tonic for gRPC) is built and run; batches are up to 512 spans or one
//! second old.
//!
//! The metric exporter runs on the SDK's `PeriodicReader` thread, which polls the export with
//! `futures_executor::block_on`, outside any Tokio runtime. Its I/O therefore runs on a
//! one-worker Tokio runtime owned here: OTLP/HTTP requests are spawned onto it
//! ([`SpawnedHttpClient`]) and the gRPC channel is built inside it, so its connection tasks
//! live there.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry::global::BoxedTracer;
use opentelemetry::metrics::{Meter, MeterProvider as _, ObservableCounter, ObservableGauge};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::tonic_types::metadata::MetadataMap;
use opentelemetry_otlp::tonic_types::transport::ClientTlsConfig;
use opentelemetry_otlp::{
    ExporterBuildError, RetryPolicy, WithExportConfig, WithHttpConfig, WithTonicConfig,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{
    Sampler, SdkTracerProvider, Span, SpanData, SpanExporter as _, SpanProcessor,
};
use toolgate_core::telemetry::{Telemetry, TelemetryOptions};

use crate::config::{ConfigError, Protocol, Signal, TelemetryConfig, signal_endpoint};

/// The observable counter of spans dropped (no room, failed export, left at shutdown).
pub const METRIC_SPANS_DROPPED: &str = "toolgate.telemetry.spans.dropped";
/// The instrumentation scope of toolgate's tracer and meter.
pub const SCOPE: &str = "toolgate";
/// The most spans in one export.
pub const MAX_BATCH: usize = 512;
/// The longest a span waits for its batch to fill before the batch is exported anyway.
pub const BATCH_DELAY: Duration = Duration::from_secs(1);
/// Room in the queue beyond the spans, for flush, shutdown and resource messages.
const CONTROL_SLOTS: usize = 16;
/// Added to every bounded wait for the export thread, for scheduling.
const GRACE: Duration = Duration::from_secs(1);
/// How long a collector is left alone after its first failed export.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest a collector that keeps failing is left alone.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How long to leave the collector alone after `failures` failed exports in a row (none: no
/// wait): [`FIRST_BACKOFF`], doubled with each further failure, at most [`MAX_BACKOFF`].
pub fn backoff_delay(failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        n => FIRST_BACKOFF
            .saturating_mul(2u32.saturating_pow(n - 1))
            .min(MAX_BACKOFF),
    }
}

/// Why telemetry could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("could not build the HTTP client for the OTLP exporters: {0}")]
    HttpClient(#[source] reqwest::Error),
    #[error("could not build the OTLP {signal} exporter for {endpoint}: {source}")]
    Exporter {
        signal: &'static str,
        endpoint: String,
        #[source]
        source: ExporterBuildError,
    },
    #[error("could not start telemetry's {what}: {source}")]
    Start {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the span export thread ended before its exporter was built")]
    ExportThreadGone,
    #[error("flushing telemetry: {0}")]
    Flush(String),
    #[error("shutting telemetry down: {0}")]
    Shutdown(String),
}

/// The span counts the processor keeps; shared with [`Exporting`] and the dropped-span metric.
#[derive(Debug, Default)]
pub struct SpanCounts {
    /// Spans queued or in a batch being exported: at most the queue capacity.
    held: AtomicUsize,
    dropped: AtomicU64,
    exported: AtomicU64,
    /// Set by the export thread while the collector is left alone after a failed export:
    /// spans that end meanwhile are dropped where they end.
    backing_off: AtomicBool,
}

impl SpanCounts {
    /// Sampled spans that ended and were not exported.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::SeqCst)
    }

    /// Spans the collector accepted.
    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::SeqCst)
    }

    /// Spans queued or being exported right now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Whether the collector is being left alone after a failed export.
    pub fn backing_off(&self) -> bool {
        self.backing_off.load(Ordering::SeqCst)
    }

    /// Takes a place for one span, if fewer than `capacity` are held.
    fn reserve(&self, capacity: usize) -> bool {
        self.held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                (held < capacity).then_some(held + 1)
            })
            .is_ok()
    }

    fn count_unreserved_drop(&self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }

    fn release_dropped(&self, spans: usize) {
        self.dropped.fetch_add(spans as u64, Ordering::SeqCst);
        self.held.fetch_sub(spans, Ordering::SeqCst);
    }

    fn release_exported(&self, spans: usize) {
        self.exported.fetch_add(spans as u64, Ordering::SeqCst);
        self.held.fetch_sub(spans, Ordering::SeqCst);
    }
}

/// A span in the queue. Whatever path loses it (a full or closed queue hands it back, a queue
/// dropped at shutdown discards it) counts it as dropped, so no span goes uncounted.
struct Queued {
    span: Option<Box<SpanData>>,
    counts: Arc<SpanCounts>,
}

impl Queued {
    fn take(mut self) -> Option<SpanData> {
        self.span.take().map(|span| *span)
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if self.span.take().is_some() {
            self.counts.release_dropped(1);
        }
    }
}

enum Message {
    Span(Queued),
    Resource(Box<Resource>),
    /// Export everything held; answer whether all of it was exported.
    Flush(mpsc::Sender<bool>),
    /// Flush, shut the exporter down and end the thread.
    Shutdown(mpsc::Sender<bool>),
}

/// Where and how the span export thread sends.
#[derive(Clone)]
struct Target {
    protocol: Protocol,
    endpoint: String,
    headers: HashMap<String, String>,
    timeout: Duration,
}

/// A [`SpanProcessor`] with a bounded queue that drops and counts instead of blocking; see
/// the module documentation for why it exists.
#[derive(Debug)]
pub struct BoundedSpanProcessor {
    sender: SyncSender<Message>,
    counts: Arc<SpanCounts>,
    capacity: usize,
    /// The longest a flush may take: an export in progress, then one more export deadline.
    flush_bound: Duration,
    closed: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl BoundedSpanProcessor {
    /// Starts the export thread and builds the OTLP span exporter on it.
    fn start(config: &TelemetryConfig, endpoint: &str) -> Result<Self, TelemetryError> {
        let target = Target {
            protocol: config.protocol,
            endpoint: signal_endpoint(endpoint, config.protocol, Signal::Traces),
            headers: config.headers.clone().into_iter().collect(),
            timeout: config.export_timeout(),
        };
        let capacity = config.queue_capacity;
        let counts = Arc::new(SpanCounts::default());
        let (sender, receiver) = mpsc::sync_channel::<Message>(capacity + CONTROL_SLOTS);
        let (ready, started) = mpsc::channel::<Result<(), TelemetryError>>();
        let worker_counts = Arc::clone(&counts);
        let thread = std::thread::Builder::new()
            .name("toolgate-otlp-spans".to_string())
            .spawn(move || {
                let built = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|source| TelemetryError::Start {
                        what: "span export runtime",
                        source,
                    })
                    .and_then(|runtime| {
                        let exporter = {
                            let _entered = runtime.enter();
                            span_exporter(&target)?
                        };
                        Ok((runtime, exporter))
                    });
                match built {
                    Ok((runtime, exporter)) => {
                        let _ = ready.send(Ok(()));
                        Worker {
                            receiver,
                            runtime,
                            exporter,
                            counts: worker_counts,
                            timeout: target.timeout,
                            batch_limit: MAX_BATCH.min(capacity),
                            drain_limit: capacity + CONTROL_SLOTS,
                            failures: 0,
                            backoff_until: None,
                        }
                        .run();
                    }
                    Err(error) => {
                        let _ = ready.send(Err(error));
                    }
                }
            })
            .map_err(|source| TelemetryError::Start {
                what: "span export thread",
                source,
            })?;
        match started.recv() {
            Ok(Ok(())) => Ok(BoundedSpanProcessor {
                sender,
                counts,
                capacity,
                flush_bound: 2 * config.export_timeout() + GRACE,
                closed: AtomicBool::new(false),
                thread: Mutex::new(Some(thread)),
            }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(error)
            }
            Err(_) => {
                let _ = thread.join();
                Err(TelemetryError::ExportThreadGone)
            }
        }
    }

    /// The counts this processor keeps.
    pub fn counts(&self) -> Arc<SpanCounts> {
        Arc::clone(&self.counts)
    }

    /// Sends `message` and waits at most `bound` for the thread's answer. The send itself
    /// waits only while the queue is full of control messages, which the thread takes as fast
    /// as it exports.
    fn ask(
        &self,
        message: impl FnOnce(mpsc::Sender<bool>) -> Message,
        bound: Duration,
    ) -> OTelSdkResult {
        let (reply, answer) = mpsc::channel();
        self.sender
            .send(message(reply))
            .map_err(|_| OTelSdkError::AlreadyShutdown)?;
        match answer.recv_timeout(bound) {
            Ok(true) => Ok(()),
            Ok(false) => Err(OTelSdkError::InternalFailure(
                "some spans were dropped: the collector failed, was too slow or is not there"
                    .to_string(),
            )),
            Err(RecvTimeoutError::Timeout) => Err(OTelSdkError::Timeout(bound)),
            Err(RecvTimeoutError::Disconnected) => Err(OTelSdkError::InternalFailure(
                "the span export thread ended".to_string(),
            )),
        }
    }
}

impl SpanProcessor for BoundedSpanProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.closed.load(Ordering::Relaxed)
            || self.counts.backing_off.load(Ordering::Relaxed)
            || !self.counts.reserve(self.capacity)
        {
            self.counts.count_unreserved_drop();
            return;
        }
        let queued = Queued {
            span: Some(Box::new(span)),
            counts: Arc::clone(&self.counts),
        };
        // Never blocks. A full or closed queue hands the span back, and dropping it counts it.
        match self.sender.try_send(Message::Span(queued)) {
            Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        if self.closed.load(Ordering::SeqCst) {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        self.ask(Message::Flush, self.flush_bound)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        let answered = self.ask(Message::Shutdown, timeout);
        if !matches!(answered, Err(OTelSdkError::Timeout(_))) {
            // The thread has answered (or is gone): it ends at once.
            let thread = match self.thread.lock() {
                Ok(mut thread) => thread.take(),
                Err(poisoned) => poisoned.into_inner().take(),
            };
            if let Some(thread) = thread {
                let _ = thread.join();
            }
        }
        answered
    }

    fn set_resource(&mut self, resource: &Resource) {
        // Before any span: the provider sets it once, when it is built.
        let _ = self
            .sender
            .try_send(Message::Resource(Box::new(resource.clone())));
    }
}

/// The export thread: owns the queue's receiving end, the runtime and the exporter.
struct Worker {
    receiver: Receiver<Message>,
    runtime: tokio::runtime::Runtime,
    exporter: opentelemetry_otlp::SpanExporter,
    counts: Arc<SpanCounts>,
    timeout: Duration,
    /// A batch is exported when it holds this many spans (or is [`BATCH_DELAY`] old).
    batch_limit: usize,
    /// The most messages one flush takes from the queue, so spans that keep arriving cannot
    /// hold it forever.
    drain_limit: usize,
    /// Failed exports in a row.
    failures: u32,
    /// While the collector is left alone: when the backoff ends.
    backoff_until: Option<Instant>,
}

/// What a flush found in the queue besides spans.
#[derive(Default)]
struct Drained {
    flushes: Vec<mpsc::Sender<bool>>,
    shutdown: Option<mpsc::Sender<bool>>,
}

impl Worker {
    fn run(mut self) {
        let mut batch: Vec<SpanData> = Vec::with_capacity(self.batch_limit);
        let mut oldest: Option<Instant> = None;
        loop {
            if self
                .backoff_until
                .is_some_and(|until| until <= Instant::now())
            {
                self.backoff_until = None;
                self.counts.backing_off.store(false, Ordering::SeqCst);
            }
            // Woken by a message, a batch that is due, or the end of a backoff.
            let wake = [oldest.map(|since| since + BATCH_DELAY), self.backoff_until]
                .into_iter()
                .flatten()
                .min();
            let received = match wake {
                None => self
                    .receiver
                    .recv()
                    .map_err(|_| RecvTimeoutError::Disconnected),
                Some(at) => self
                    .receiver
                    .recv_timeout(at.saturating_duration_since(Instant::now())),
            };
            match received {
                Ok(Message::Span(queued)) => {
                    if let Some(span) = queued.take() {
                        batch.push(span);
                        oldest.get_or_insert_with(Instant::now);
                    }
                    if batch.len() >= self.batch_limit {
                        self.export_all(std::mem::take(&mut batch));
                        oldest = None;
                    }
                }
                Ok(Message::Resource(resource)) => self.exporter.set_resource(&resource),
                Ok(Message::Flush(reply)) => {
                    let (exported, drained) = self.flush(&mut batch);
                    oldest = None;
                    let _ = reply.send(exported);
                    for reply in drained.flushes {
                        let _ = reply.send(exported);
                    }
                    if let Some(reply) = drained.shutdown {
                        self.finish(reply, exported);
                        return;
                    }
                }
                Ok(Message::Shutdown(reply)) => {
                    let (exported, drained) = self.flush(&mut batch);
                    for reply in drained.flushes {
                        let _ = reply.send(exported);
                    }
                    self.finish(reply, exported);
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {
                    // The end of a backoff is taken at the top of the loop.
                    if oldest.is_some_and(|since| since + BATCH_DELAY <= Instant::now()) {
                        self.export_all(std::mem::take(&mut batch));
                        oldest = None;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.export_all(std::mem::take(&mut batch));
                    let _ = self.exporter.shutdown_with_timeout(self.timeout);
                    return;
                }
            }
        }
    }

    fn finish(self, reply: mpsc::Sender<bool>, exported: bool) {
        let shut = self.exporter.shutdown_with_timeout(self.timeout).is_ok();
        // Spans still queued are dropped with the receiver, and counted as they go.
        drop(self.receiver);
        let _ = reply.send(exported && shut);
    }

    /// Takes what is queued now into `batch` and exports all of it within one export
    /// deadline; returns whether all of it was exported.
    fn flush(&mut self, batch: &mut Vec<SpanData>) -> (bool, Drained) {
        let mut drained = Drained::default();
        for _ in 0..self.drain_limit {
            match self.receiver.try_recv() {
                Ok(Message::Span(queued)) => batch.extend(queued.take()),
                Ok(Message::Resource(resource)) => self.exporter.set_resource(&resource),
                Ok(Message::Flush(reply)) => drained.flushes.push(reply),
                Ok(Message::Shutdown(reply)) => drained.shutdown = Some(reply),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        (self.export_all(std::mem::take(batch)), drained)
    }

    /// Exports `spans` in batches, all within one export deadline; what the deadline leaves,
    /// and all of it while the collector is left alone, is dropped. Returns whether every span
    /// was exported.
    fn export_all(&mut self, mut spans: Vec<SpanData>) -> bool {
        let deadline = Instant::now() + self.timeout;
        let mut all = true;
        while !spans.is_empty() {
            let rest = spans.split_off(spans.len().min(self.batch_limit));
            let left = deadline.saturating_duration_since(Instant::now());
            all &= if left.is_zero() || self.backoff_until.is_some() {
                self.counts.release_dropped(spans.len());
                false
            } else {
                self.export(spans, left)
            };
            spans = rest;
        }
        all
    }

    fn export(&mut self, batch: Vec<SpanData>, limit: Duration) -> bool {
        let spans = batch.len();
        let exported = self.runtime.block_on(async {
            matches!(
                tokio::time::timeout(limit, self.exporter.export(batch)).await,
                Ok(Ok(()))
            )
        });
        if exported {
            self.failures = 0;
            self.counts.release_exported(spans);
        } else {
            // Backing off is visible before the loss is counted, so whoever sees the count
            // sees the backoff too.
            self.failures = self.failures.saturating_add(1);
            self.backoff_until = Some(Instant::now() + backoff_delay(self.failures));
            self.counts.backing_off.store(true, Ordering::SeqCst);
            self.counts.release_dropped(spans);
        }
        exported
    }
}

fn headers_for_grpc(headers: &HashMap<String, String>) -> MetadataMap {
    let mut map = http::HeaderMap::new();
    // `validate` has refused names and values that do not parse; none is skipped here.
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            map.insert(name, value);
        }
    }
    MetadataMap::from_headers(map)
}

/// TLS for an `https://` gRPC collector, verified against the system's roots (tonic's default
/// TLS configuration trusts no root at all).
fn grpc_tls<B: WithTonicConfig>(builder: B, endpoint: &str) -> B {
    if endpoint.starts_with("https://") {
        builder.with_tls_config(ClientTlsConfig::new().with_native_roots())
    } else {
        builder
    }
}

/// reqwest's async client as the OTLP/HTTP exporters use it: bounded by the export timeout,
/// no redirects (a redirect would carry the headers, an API key among them, elsewhere).
fn http_client(timeout: Duration) -> Result<reqwest::Client, TelemetryError> {
    ensure_crypto_provider();
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(TelemetryError::HttpClient)
}

/// Built on the export thread, inside its runtime (tonic's channel needs one). The exporter's
/// own retries are off: a failed batch is dropped and the processor backs off instead
/// ([`backoff_delay`]), where retries would hold the export thread, resend the batch up to
/// three times and let the queue fill behind it.
fn span_exporter(target: &Target) -> Result<opentelemetry_otlp::SpanExporter, TelemetryError> {
    let built = match target.protocol {
        Protocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(http_client(target.timeout)?)
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(target.endpoint.clone())
            .with_headers(target.headers.clone())
            .with_timeout(target.timeout)
            .with_retry_policy(RetryPolicy::disabled())
            .build(),
        Protocol::Grpc => grpc_tls(
            opentelemetry_otlp::SpanExporter::builder().with_tonic(),
            &target.endpoint,
        )
        .with_endpoint(target.endpoint.clone())
        .with_metadata(headers_for_grpc(&target.headers))
        .with_timeout(target.timeout)
        .with_retry_policy(RetryPolicy::disabled())
        .build(),
    };
    built.map_err(|source| TelemetryError::Exporter {
        signal: "traces",
        endpoint: target.endpoint.clone(),
        source,
    })
}

/// An [`HttpClient`] whose requests run on a runtime of ours: the SDK's periodic reader polls
/// the metric export outside any runtime, where reqwest's async client cannot run.
#[derive(Debug, Clone)]
pub struct SpawnedHttpClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for SpawnedHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move { client.send_bytes(request).await })
            .await
            .map_err(|joined| Box::new(joined) as HttpError)?
    }
}

fn metric_exporter(
    config: &TelemetryConfig,
    endpoint: &str,
    runtime: &tokio::runtime::Runtime,
) -> Result<opentelemetry_otlp::MetricExporter, TelemetryError> {
    let endpoint = signal_endpoint(endpoint, config.protocol, Signal::Metrics);
    let headers: HashMap<String, String> = config.headers.clone().into_iter().collect();
    let built = match config.protocol {
        Protocol::HttpProtobuf => opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(SpawnedHttpClient {
                client: http_client(config.export_timeout())?,
                runtime: runtime.handle().clone(),
            })
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(endpoint.clone())
            .with_headers(headers)
            .with_timeout(config.export_timeout())
            .build(),
        Protocol::Grpc => {
            let _entered = runtime.enter();
            grpc_tls(
                opentelemetry_otlp::MetricExporter::builder().with_tonic(),
                &endpoint,
            )
            .with_endpoint(endpoint.clone())
            .with_metadata(headers_for_grpc(&headers))
            .with_timeout(config.export_timeout())
            .build()
        }
    };
    built.map_err(|source| TelemetryError::Exporter {
        signal: "metrics",
        endpoint,
        source,
    })
}

/// Makes `ring` the process's rustls provider unless one is already installed (an https://
/// collector needs one; reqwest and tonic are built without a default).
fn ensure_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error means another provider was installed first; that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A runtime that is shut down without waiting, so that it may be dropped anywhere (dropping a
/// Tokio runtime inside another one's task panics).
struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl OwnedRuntime {
    fn stop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        self.stop();
    }
}

fn resource(config: &TelemetryConfig) -> Resource {
    Resource::builder()
        .with_service_name(config.service_name.clone())
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Starts export for `config`; `Ok(None)` when no endpoint is configured.
pub fn start(config: &TelemetryConfig) -> Result<Option<Exporting>, TelemetryError> {
    config.validate()?;
    let Some(endpoint) = config.otlp_endpoint.as_deref() else {
        return Ok(None);
    };
    let resource = resource(config);

    let processor = BoundedSpanProcessor::start(config, endpoint)?;
    let counts = processor.counts();
    let tracer_provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            config.sampling_ratio,
        ))))
        .with_resource(resource.clone())
        .build();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("toolgate-otlp-metrics")
        .enable_all()
        .build()
        .map_err(|source| TelemetryError::Start {
            what: "metric export runtime",
            source,
        })?;
    let metric_exporter = metric_exporter(config, endpoint, &runtime);
    // Owned from here on, so that an early return cannot drop it inside a caller's runtime.
    let metrics_runtime = OwnedRuntime(Some(runtime));
    let metric_exporter = metric_exporter?;
    let meter_provider = SdkMeterProvider::builder()
        .with_reader(
            PeriodicReader::builder(metric_exporter)
                .with_interval(config.metrics_interval())
                .build(),
        )
        .with_resource(resource)
        .build();
    let meter = meter_provider.meter(SCOPE);
    let dropped_counter = meter
        .u64_observable_counter(METRIC_SPANS_DROPPED)
        .with_unit("{span}")
        .with_description("Spans not exported: no room in the queue, a failed or late export")
        .with_callback({
            let counts = Arc::clone(&counts);
            move |observer| observer.observe(counts.dropped(), &[])
        })
        .build();

    let tracer = BoxedTracer::new(Box::new(tracer_provider.tracer(SCOPE)));
    let telemetry = Telemetry::new(
        tracer,
        &meter,
        TelemetryOptions {
            record_arguments: config.record_arguments,
        },
    );
    Ok(Some(Exporting {
        tracer_provider,
        meter_provider,
        counts,
        telemetry,
        meter,
        _dropped_counter: dropped_counter,
        ticket_gauges: Mutex::new(Vec::new()),
        metrics_runtime: Mutex::new(metrics_runtime),
        shutdown_bound: 2 * config.export_timeout() + GRACE,
        shut_down: AtomicBool::new(false),
    }))
}

/// Export in progress: the SDK's providers and the handle to record through.
pub struct Exporting {
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    counts: Arc<SpanCounts>,
    telemetry: Telemetry,
    meter: Meter,
    _dropped_counter: ObservableCounter<u64>,
    /// The gauges of [`Exporting::observe_open_tickets`], kept as long as the export.
    ticket_gauges: Mutex<Vec<ObservableGauge<u64>>>,
    metrics_runtime: Mutex<OwnedRuntime>,
    shutdown_bound: Duration,
    shut_down: AtomicBool,
}

impl fmt::Debug for Exporting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exporting")
            .field("spans_exported", &self.spans_exported())
            .field("spans_dropped", &self.spans_dropped())
            .field("shut_down", &self.shut_down.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

impl Exporting {
    /// The handle the dispatcher and the front ends record through.
    pub fn telemetry(&self) -> Telemetry {
        self.telemetry.clone()
    }

    /// Sampled spans that ended and were not exported (no room in the queue, a failed or late
    /// export, left at shutdown).
    pub fn spans_dropped(&self) -> u64 {
        self.counts.dropped()
    }

    /// Spans the collector accepted.
    pub fn spans_exported(&self) -> u64 {
        self.counts.exported()
    }

    /// Whether the collector is being left alone after a failed export (spans that end
    /// meanwhile are dropped where they end).
    pub fn backing_off(&self) -> bool {
        self.counts.backing_off()
    }

    /// Reports `ledger`'s open tickets at each metric export, counted on `runtime` (the one
    /// its store was opened on), as `toolgate.approval.tickets.open` ([`crate::tickets`]).
    pub fn observe_open_tickets(
        &self,
        ledger: Arc<toolgate_core::ApprovalLedger>,
        runtime: tokio::runtime::Handle,
    ) {
        let gauge = crate::tickets::open_tickets_gauge(&self.meter, ledger, runtime);
        match self.ticket_gauges.lock() {
            Ok(mut gauges) => gauges.push(gauge),
            Err(poisoned) => poisoned.into_inner().push(gauge),
        }
    }

    /// Exports every span held and the metrics now, waiting a bounded time.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        let traces = self.tracer_provider.force_flush();
        let metrics = self.meter_provider.force_flush();
        match (traces, metrics) {
            (Ok(()), Ok(())) => Ok(()),
            (traces, metrics) => Err(TelemetryError::Flush(describe(traces, metrics))),
        }
    }

    /// Exports what is held (within the bound), stops the export threads and the runtime.
    /// Later calls do nothing. Spans recorded afterwards are not recorded at all.
    pub fn shutdown(&self) -> Result<(), TelemetryError> {
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        // Traces first, so the last metric export carries the final dropped count.
        let traces = self
            .tracer_provider
            .shutdown_with_timeout(self.shutdown_bound);
        let metrics = self
            .meter_provider
            .shutdown_with_timeout(self.shutdown_bound);
        match self.metrics_runtime.lock() {
            Ok(mut runtime) => runtime.stop(),
            Err(poisoned) => poisoned.into_inner().stop(),
        }
        match (traces, metrics) {
            (Ok(()), Ok(())) => Ok(()),
            (traces, metrics) => Err(TelemetryError::Shutdown(describe(traces, metrics))),
        }
    }
}

impl Drop for Exporting {
    fn drop(&mut self) {
        // Bounded like `shutdown`; nobody is left to read the error.
        let _ = self.shutdown();
    }
}

fn describe(traces: OTelSdkResult, metrics: OTelSdkResult) -> String {
    let part = |signal: &str, result: OTelSdkResult| match result {
        Ok(()) => None,
        Err(error) => Some(format!("{signal}: {error}")),
    };
    [part("traces", traces), part("metrics", metrics)]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
#[path = "export_tests.rs"]
mod tests;
