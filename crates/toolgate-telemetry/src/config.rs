//! `[telemetry]`: where toolgate sends its OpenTelemetry spans and metrics, and how much.
//!
//! Guarantees:
//! - No `otlp_endpoint`, no export: [`TelemetryConfig::is_on`] is false and the front end uses
//!   `Telemetry::off()`, which costs one branch per call.
//! - Unknown keys are refused when the TOML is read (`deny_unknown_fields`), and
//!   [`TelemetryConfig::validate`] refuses, before anything is started, every value the
//!   exporter would otherwise drop silently or fail on later: an endpoint that is not an
//!   `http://` or `https://` base URL, a sampling ratio outside 0..=1, a header name or value
//!   that is not a valid HTTP header (or one the exporter sets itself), a queue of no spans, a
//!   zero timeout or interval. Each [`ConfigError`] says what to write instead.
//! - A header value (an API key for a hosted collector) is never printed: not by `Debug`, not
//!   in an error.
//!
//! The endpoint is the collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` is: for
//! `http/protobuf` the exporters post to `{otlp_endpoint}/v1/traces` and
//! `{otlp_endpoint}/v1/metrics` ([`signal_endpoint`]), for `grpc` they call the endpoint as
//! given. So `http://127.0.0.1:4318` (http/protobuf) and `http://127.0.0.1:4317` (grpc) both
//! work as written.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// The OTLP transport, spelled as `OTEL_EXPORTER_OTLP_PROTOCOL` spells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum Protocol {
    /// Protobuf bodies over HTTP (`POST /v1/traces`, `/v1/metrics`), port 4318 by convention.
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// OTLP over gRPC, port 4317 by convention.
    #[serde(rename = "grpc")]
    Grpc,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::Grpc => "grpc",
        }
    }
}

/// Which signal an endpoint is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Traces,
    Metrics,
}

impl Signal {
    /// The path OTLP/HTTP posts the signal to, under the base endpoint.
    pub fn http_path(self) -> &'static str {
        match self {
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
        }
    }
}

pub const DEFAULT_SAMPLING_RATIO: f64 = 1.0;
pub const DEFAULT_SERVICE_NAME: &str = "toolgate";
pub const DEFAULT_QUEUE_CAPACITY: usize = 2048;
pub const MAX_QUEUE_CAPACITY: usize = 1_000_000;
pub const DEFAULT_EXPORT_TIMEOUT_MS: u64 = 5_000;
/// An export may take at most a minute: shutdown waits for one, and must stay bounded.
pub const MAX_EXPORT_TIMEOUT_MS: u64 = 60_000;
pub const DEFAULT_METRICS_INTERVAL_MS: u64 = 10_000;
/// Below this the metric reader would spend its time exporting.
pub const MIN_METRICS_INTERVAL_MS: u64 = 100;

/// Headers the exporters set themselves; one set here would break the request.
const RESERVED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "host",
    "connection",
    "te",
];

/// The `[telemetry]` section.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The collector's base URL; absent, nothing is exported.
    pub otlp_endpoint: Option<String>,
    pub protocol: Protocol,
    /// Sent with every export (HTTP headers, or gRPC metadata), e.g. a hosted collector's key.
    pub headers: BTreeMap<String, String>,
    /// The share of new traces sampled, 0.0..=1.0; a call under a sampled remote parent
    /// follows its parent's decision.
    pub sampling_ratio: f64,
    /// The resource's `service.name`.
    pub service_name: String,
    /// Put a call's redacted arguments on its span.
    pub record_arguments: bool,
    /// Ended spans held while waiting for export; one more is dropped and counted.
    pub queue_capacity: usize,
    /// The longest one export (and the flush at shutdown) may take.
    pub export_timeout_ms: u64,
    /// How often metrics are exported.
    pub metrics_interval_ms: u64,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: None,
            protocol: Protocol::default(),
            headers: BTreeMap::new(),
            sampling_ratio: DEFAULT_SAMPLING_RATIO,
            service_name: DEFAULT_SERVICE_NAME.to_string(),
            record_arguments: false,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            export_timeout_ms: DEFAULT_EXPORT_TIMEOUT_MS,
            metrics_interval_ms: DEFAULT_METRICS_INTERVAL_MS,
        }
    }
}

impl std::fmt::Debug for TelemetryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are credentials: only their names are shown.
        let header_names: Vec<&str> = self.headers.keys().map(String::as_str).collect();
        f.debug_struct("TelemetryConfig")
            .field("otlp_endpoint", &self.otlp_endpoint)
            .field("protocol", &self.protocol)
            .field("headers", &header_names)
            .field("sampling_ratio", &self.sampling_ratio)
            .field("service_name", &self.service_name)
            .field("record_arguments", &self.record_arguments)
            .field("queue_capacity", &self.queue_capacity)
            .field("export_timeout_ms", &self.export_timeout_ms)
            .field("metrics_interval_ms", &self.metrics_interval_ms)
            .finish()
    }
}

/// A `[telemetry]` value that cannot work, and what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "[telemetry] otlp_endpoint is empty; remove the key to turn export off, or write the \
         collector's base URL, e.g. \"http://127.0.0.1:4318\""
    )]
    EmptyEndpoint,
    #[error(
        "[telemetry] otlp_endpoint {endpoint:?} is not a URL ({reason}); write the collector's \
         base URL, e.g. \"http://127.0.0.1:4318\" for http/protobuf or \"http://127.0.0.1:4317\" \
         for grpc"
    )]
    EndpointNotUrl { endpoint: String, reason: String },
    #[error(
        "[telemetry] otlp_endpoint {endpoint:?} does not start with http:// or https:// (it \
         reads as the scheme {scheme:?}); OTLP goes over HTTP, e.g. \"http://127.0.0.1:4318\" \
         or \"https://collector.example.com:4318\""
    )]
    EndpointScheme { endpoint: String, scheme: String },
    #[error(
        "[telemetry] otlp_endpoint {endpoint:?} names no host; write one, e.g. \
         \"http://127.0.0.1:4318\""
    )]
    EndpointNoHost { endpoint: String },
    #[error(
        "[telemetry] otlp_endpoint carries a user name or password; remove it from the URL and \
         put the credential in [telemetry.headers] (e.g. authorization = \"Bearer ...\"), which \
         is never logged"
    )]
    EndpointCredentials,
    #[error(
        "[telemetry] otlp_endpoint {endpoint:?} has a query or fragment; write the collector's \
         base URL only, e.g. \"http://127.0.0.1:4318\""
    )]
    EndpointQuery { endpoint: String },
    #[error(
        "[telemetry] otlp_endpoint {endpoint:?} ends in a signal path; write the base URL \
         without {path:?}: toolgate appends /v1/traces and /v1/metrics itself"
    )]
    EndpointSignalPath {
        endpoint: String,
        path: &'static str,
    },
    #[error(
        "[telemetry] sampling_ratio is {ratio}; write a number from 0.0 (sample no new trace) \
         to 1.0 (sample every trace)"
    )]
    SamplingRatio { ratio: f64 },
    #[error("[telemetry] service_name is blank; write a name, or remove the key for \"toolgate\"")]
    BlankServiceName,
    #[error(
        "[telemetry.headers] {name:?} is not a valid HTTP header name ({reason}); use letters, \
         digits and '-' only, e.g. \"x-api-key\""
    )]
    HeaderName { name: String, reason: String },
    #[error(
        "[telemetry.headers] the value of {name:?} is not a valid HTTP header value (it has a \
         line break, a control character or a non-ASCII character); write it on one line of \
         visible ASCII characters"
    )]
    HeaderValue { name: String },
    #[error(
        "[telemetry.headers] {name:?} is set by the exporter itself; remove it from \
         [telemetry.headers]"
    )]
    ReservedHeader { name: String },
    #[error(
        "[telemetry] queue_capacity is {capacity}; write a number of spans from 1 to \
         {MAX_QUEUE_CAPACITY} (the default, {DEFAULT_QUEUE_CAPACITY}, suits most)"
    )]
    QueueCapacity { capacity: usize },
    #[error(
        "[telemetry] export_timeout_ms is {timeout_ms}; write a number of milliseconds from 1 to \
         {MAX_EXPORT_TIMEOUT_MS} (the default is {DEFAULT_EXPORT_TIMEOUT_MS})"
    )]
    ExportTimeout { timeout_ms: u64 },
    #[error(
        "[telemetry] metrics_interval_ms is {interval_ms}; write at least \
         {MIN_METRICS_INTERVAL_MS} (the default is {DEFAULT_METRICS_INTERVAL_MS})"
    )]
    MetricsInterval { interval_ms: u64 },
}

impl TelemetryConfig {
    /// Whether anything is exported.
    pub fn is_on(&self) -> bool {
        self.otlp_endpoint.is_some()
    }

    pub fn export_timeout(&self) -> Duration {
        Duration::from_millis(self.export_timeout_ms)
    }

    pub fn metrics_interval(&self) -> Duration {
        Duration::from_millis(self.metrics_interval_ms)
    }

    /// The first value that cannot work, checked in the order the keys are documented.
    /// Pure: it reads nothing and starts nothing.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(endpoint) = &self.otlp_endpoint {
            validate_endpoint(endpoint)?;
        }
        for (name, value) in &self.headers {
            validate_header(name, value)?;
        }
        // `contains` is false for NaN, so NaN is refused too.
        if !(0.0..=1.0).contains(&self.sampling_ratio) {
            return Err(ConfigError::SamplingRatio {
                ratio: self.sampling_ratio,
            });
        }
        if self.service_name.trim().is_empty() {
            return Err(ConfigError::BlankServiceName);
        }
        if !(1..=MAX_QUEUE_CAPACITY).contains(&self.queue_capacity) {
            return Err(ConfigError::QueueCapacity {
                capacity: self.queue_capacity,
            });
        }
        if !(1..=MAX_EXPORT_TIMEOUT_MS).contains(&self.export_timeout_ms) {
            return Err(ConfigError::ExportTimeout {
                timeout_ms: self.export_timeout_ms,
            });
        }
        if self.metrics_interval_ms < MIN_METRICS_INTERVAL_MS {
            return Err(ConfigError::MetricsInterval {
                interval_ms: self.metrics_interval_ms,
            });
        }
        Ok(())
    }
}

fn validate_endpoint(endpoint: &str) -> Result<(), ConfigError> {
    if endpoint.trim().is_empty() {
        return Err(ConfigError::EmptyEndpoint);
    }
    let url = url::Url::parse(endpoint).map_err(|error| ConfigError::EndpointNotUrl {
        endpoint: endpoint.to_string(),
        reason: error.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::EndpointScheme {
            endpoint: endpoint.to_string(),
            scheme: url.scheme().to_string(),
        });
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ConfigError::EndpointNoHost {
            endpoint: endpoint.to_string(),
        });
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError::EndpointCredentials);
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError::EndpointQuery {
            endpoint: endpoint.to_string(),
        });
    }
    let path = url.path().trim_end_matches('/');
    for signal in [Signal::Traces, Signal::Metrics] {
        if path.ends_with(signal.http_path()) {
            return Err(ConfigError::EndpointSignalPath {
                endpoint: endpoint.to_string(),
                path: signal.http_path(),
            });
        }
    }
    Ok(())
}

fn validate_header(name: &str, value: &str) -> Result<(), ConfigError> {
    let parsed =
        http::HeaderName::from_bytes(name.as_bytes()).map_err(|error| ConfigError::HeaderName {
            name: name.to_string(),
            reason: error.to_string(),
        })?;
    if RESERVED_HEADERS.contains(&parsed.as_str()) {
        return Err(ConfigError::ReservedHeader {
            name: name.to_string(),
        });
    }
    // gRPC metadata is ASCII: a visible-ASCII value is valid over both transports.
    let visible = value
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic());
    if !visible || http::HeaderValue::from_str(value).is_err() {
        return Err(ConfigError::HeaderValue {
            name: name.to_string(),
        });
    }
    Ok(())
}

/// Where a signal is sent: for http/protobuf the base endpoint with the signal's path appended
/// (a trailing `/` on the base is not doubled), for grpc the endpoint as written.
pub fn signal_endpoint(endpoint: &str, protocol: Protocol, signal: Signal) -> String {
    match protocol {
        Protocol::HttpProtobuf => {
            format!("{}{}", endpoint.trim_end_matches('/'), signal.http_path())
        }
        Protocol::Grpc => endpoint.to_string(),
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
