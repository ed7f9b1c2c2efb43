//! Telemetry read back in tests (feature `testing`): the OpenTelemetry SDK's own in-memory
//! exporters behind a [`Telemetry`], so a layer's tests see exactly the spans and metrics its
//! code made. Not a stand-in for export: the OTLP wire is tested against a real receiver.

use opentelemetry::Value;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};

use super::{Telemetry, TelemetryOptions};

/// A [`Telemetry`] whose spans and metrics stay in memory.
pub struct InMemoryTelemetry {
    pub telemetry: Telemetry,
    spans: InMemorySpanExporter,
    provider: SdkTracerProvider,
    metrics: InMemoryMetricExporter,
    meters: SdkMeterProvider,
}

impl InMemoryTelemetry {
    pub fn new(options: TelemetryOptions) -> Self {
        let spans = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let metrics = InMemoryMetricExporter::default();
        let meters = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(metrics.clone()).build())
            .build();
        let tracer = opentelemetry::global::BoxedTracer::new(Box::new(provider.tracer("toolgate")));
        let telemetry = Telemetry::new(tracer, &meters.meter("toolgate"), options);
        InMemoryTelemetry {
            telemetry,
            spans,
            provider,
            metrics,
            meters,
        }
    }

    /// Every span ended so far (empty if the SDK could not flush).
    pub fn finished_spans(&self) -> Vec<SpanData> {
        let _ = self.provider.force_flush();
        self.spans.get_finished_spans().unwrap_or_default()
    }

    /// Every metrics export so far, the latest last (empty if the SDK could not flush).
    pub fn metrics(&self) -> Vec<ResourceMetrics> {
        let _ = self.meters.force_flush();
        self.metrics.get_finished_metrics().unwrap_or_default()
    }
}

/// `key`'s value on `span`.
pub fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

/// `key`'s value on `span` as text; empty when it has none.
pub fn text(span: &SpanData, key: &str) -> String {
    attribute(span, key)
        .map(|v| v.to_string())
        .unwrap_or_default()
}
