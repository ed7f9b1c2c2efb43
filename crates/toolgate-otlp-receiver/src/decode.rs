//! Flattening of decoded OTLP export requests into plain values a test can assert on.
//!
//! Pure functions over the `opentelemetry-proto` messages: ids become lowercase hex (an empty
//! parent id becomes `None`), attributes a `BTreeMap` (a repeated key keeps its last value, as
//! the SDKs' own maps do), enums that carry a number the proto does not name keep it in an
//! `Unknown` variant instead of being guessed. What is not flattened (span links, trace state,
//! exemplars, exponential-histogram buckets, summary quantiles) stays readable in the raw
//! requests the receiver keeps beside these.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{AggregationTemporality, metric, number_data_point};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, status};

/// Which listener an export request came by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// OTLP/HTTP with a protobuf body (`POST /v1/traces`, `POST /v1/metrics`).
    Http,
    /// OTLP/gRPC (`TraceService/Export`, `MetricsService/Export`).
    Grpc,
}

/// An attribute's value. `Bytes`, `Map` and `Empty` exist because OTLP can carry them (other
/// SDKs send them); a string-table reference (used only by profiles) is not resolved and reads
/// as `Empty`.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeValue {
    String(String),
    Bool(bool),
    Int(i64),
    Double(f64),
    Array(Vec<AttributeValue>),
    Bytes(Vec<u8>),
    Map(BTreeMap<String, AttributeValue>),
    /// No value was set.
    Empty,
}

impl AttributeValue {
    /// The string inside, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttributeValue::String(value) => Some(value),
            _ => None,
        }
    }

    /// The integer inside, if this is an integer.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            AttributeValue::Int(value) => Some(*value),
            _ => None,
        }
    }
}

impl From<&str> for AttributeValue {
    fn from(value: &str) -> Self {
        AttributeValue::String(value.to_string())
    }
}

impl From<String> for AttributeValue {
    fn from(value: String) -> Self {
        AttributeValue::String(value)
    }
}

impl From<bool> for AttributeValue {
    fn from(value: bool) -> Self {
        AttributeValue::Bool(value)
    }
}

impl From<i64> for AttributeValue {
    fn from(value: i64) -> Self {
        AttributeValue::Int(value)
    }
}

impl From<f64> for AttributeValue {
    fn from(value: f64) -> Self {
        AttributeValue::Double(value)
    }
}

/// Attributes by key.
pub type Attributes = BTreeMap<String, AttributeValue>;

/// A span's kind as OTLP numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Unspecified,
    Internal,
    Server,
    Client,
    Producer,
    Consumer,
    /// A number the proto does not name.
    Unknown(i32),
}

/// A span status code as OTLP numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusCode {
    Unset,
    Ok,
    Error,
    /// A number the proto does not name.
    Unknown(i32),
}

/// A span's status; a span sent without one reads as `Unset` with an empty message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanStatus {
    pub code: StatusCode,
    pub message: String,
}

/// An event recorded on a span.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedEvent {
    pub name: String,
    pub time_unix_nanos: u64,
    pub attributes: Attributes,
}

/// One span as received, with its resource and scope.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub transport: Transport,
    /// 32 lowercase hex digits (as many as the bytes sent, whatever their number).
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    /// `None` for a root span (an empty parent id).
    pub parent_span_id: Option<String>,
    pub name: String,
    pub kind: SpanKind,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
    pub status: SpanStatus,
    pub attributes: Attributes,
    pub events: Vec<ReceivedEvent>,
    pub resource_attributes: Attributes,
    /// The instrumentation scope's name (the tracer's name); empty when none was sent.
    pub scope_name: String,
}

/// Aggregation temporality of a sum or histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Temporality {
    Unspecified,
    Delta,
    Cumulative,
    /// A number the proto does not name.
    Unknown(i32),
}

/// What kind of metric this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// A counter (monotonic) or an up-down counter.
    Sum {
        monotonic: bool,
        temporality: Temporality,
    },
    Gauge,
    Histogram {
        temporality: Temporality,
    },
    ExponentialHistogram {
        temporality: Temporality,
    },
    Summary,
    /// The metric carried no data.
    Empty,
}

/// A data point's value.
#[derive(Debug, Clone, PartialEq)]
pub enum PointValue {
    Int(i64),
    Double(f64),
    /// A histogram, exponential histogram or summary point. `bucket_counts` and
    /// `explicit_bounds` are filled for explicit-bucket histograms only.
    Distribution {
        count: u64,
        sum: Option<f64>,
        min: Option<f64>,
        max: Option<f64>,
        bucket_counts: Vec<u64>,
        explicit_bounds: Vec<f64>,
    },
    /// A number point sent without a value.
    Missing,
}

/// One data point of a metric.
#[derive(Debug, Clone, PartialEq)]
pub struct DataPoint {
    pub attributes: Attributes,
    pub start_unix_nanos: u64,
    pub time_unix_nanos: u64,
    pub value: PointValue,
}

/// One metric as received in one export, with its resource and scope.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedMetric {
    pub transport: Transport,
    pub name: String,
    pub description: String,
    pub unit: String,
    pub kind: MetricKind,
    pub data_points: Vec<DataPoint>,
    pub resource_attributes: Attributes,
    /// The instrumentation scope's name (the meter's name); empty when none was sent.
    pub scope_name: String,
}

/// Lowercase hex of an id's bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

pub(crate) fn attribute_value(value: Option<&AnyValue>) -> AttributeValue {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => AttributeValue::String(s.clone()),
        Some(any_value::Value::BoolValue(b)) => AttributeValue::Bool(*b),
        Some(any_value::Value::IntValue(i)) => AttributeValue::Int(*i),
        Some(any_value::Value::DoubleValue(d)) => AttributeValue::Double(*d),
        Some(any_value::Value::ArrayValue(array)) => AttributeValue::Array(
            array
                .values
                .iter()
                .map(|v| attribute_value(Some(v)))
                .collect(),
        ),
        Some(any_value::Value::KvlistValue(list)) => AttributeValue::Map(attributes(&list.values)),
        Some(any_value::Value::BytesValue(bytes)) => AttributeValue::Bytes(bytes.clone()),
        Some(any_value::Value::StringValueStrindex(_)) | None => AttributeValue::Empty,
    }
}

pub(crate) fn attributes(pairs: &[KeyValue]) -> Attributes {
    pairs
        .iter()
        .map(|pair| (pair.key.clone(), attribute_value(pair.value.as_ref())))
        .collect()
}

fn resource_attributes(resource: Option<&Resource>) -> Attributes {
    resource
        .map(|r| attributes(&r.attributes))
        .unwrap_or_default()
}

fn scope_name(scope: Option<&InstrumentationScope>) -> String {
    scope.map(|s| s.name.clone()).unwrap_or_default()
}

pub(crate) fn span_kind(number: i32) -> SpanKind {
    match span::SpanKind::try_from(number) {
        Ok(span::SpanKind::Unspecified) => SpanKind::Unspecified,
        Ok(span::SpanKind::Internal) => SpanKind::Internal,
        Ok(span::SpanKind::Server) => SpanKind::Server,
        Ok(span::SpanKind::Client) => SpanKind::Client,
        Ok(span::SpanKind::Producer) => SpanKind::Producer,
        Ok(span::SpanKind::Consumer) => SpanKind::Consumer,
        Err(_) => SpanKind::Unknown(number),
    }
}

pub(crate) fn status_code(number: i32) -> StatusCode {
    match status::StatusCode::try_from(number) {
        Ok(status::StatusCode::Unset) => StatusCode::Unset,
        Ok(status::StatusCode::Ok) => StatusCode::Ok,
        Ok(status::StatusCode::Error) => StatusCode::Error,
        Err(_) => StatusCode::Unknown(number),
    }
}

pub(crate) fn temporality(number: i32) -> Temporality {
    match AggregationTemporality::try_from(number) {
        Ok(AggregationTemporality::Unspecified) => Temporality::Unspecified,
        Ok(AggregationTemporality::Delta) => Temporality::Delta,
        Ok(AggregationTemporality::Cumulative) => Temporality::Cumulative,
        Err(_) => Temporality::Unknown(number),
    }
}

/// Every span of one export request, in the order sent.
pub(crate) fn spans_of(
    transport: Transport,
    request: &ExportTraceServiceRequest,
) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for resource_spans in &request.resource_spans {
        let resource = resource_attributes(resource_spans.resource.as_ref());
        for scope_spans in &resource_spans.scope_spans {
            let scope = scope_name(scope_spans.scope.as_ref());
            for span in &scope_spans.spans {
                let status = span.status.as_ref();
                out.push(ReceivedSpan {
                    transport,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty())
                        .then(|| hex(&span.parent_span_id)),
                    name: span.name.clone(),
                    kind: span_kind(span.kind),
                    start_unix_nanos: span.start_time_unix_nano,
                    end_unix_nanos: span.end_time_unix_nano,
                    status: SpanStatus {
                        code: status_code(status.map_or(0, |s| s.code)),
                        message: status.map(|s| s.message.clone()).unwrap_or_default(),
                    },
                    attributes: attributes(&span.attributes),
                    events: span
                        .events
                        .iter()
                        .map(|event| ReceivedEvent {
                            name: event.name.clone(),
                            time_unix_nanos: event.time_unix_nano,
                            attributes: attributes(&event.attributes),
                        })
                        .collect(),
                    resource_attributes: resource.clone(),
                    scope_name: scope.clone(),
                });
            }
        }
    }
    out
}

/// Every metric of one export request, in the order sent.
pub(crate) fn metrics_of(
    transport: Transport,
    request: &ExportMetricsServiceRequest,
) -> Vec<ReceivedMetric> {
    let mut out = Vec::new();
    for resource_metrics in &request.resource_metrics {
        let resource = resource_attributes(resource_metrics.resource.as_ref());
        for scope_metrics in &resource_metrics.scope_metrics {
            let scope = scope_name(scope_metrics.scope.as_ref());
            for metric in &scope_metrics.metrics {
                let (kind, data_points) = kind_and_points(metric.data.as_ref());
                out.push(ReceivedMetric {
                    transport,
                    name: metric.name.clone(),
                    description: metric.description.clone(),
                    unit: metric.unit.clone(),
                    kind,
                    data_points,
                    resource_attributes: resource.clone(),
                    scope_name: scope.clone(),
                });
            }
        }
    }
    out
}

fn kind_and_points(data: Option<&metric::Data>) -> (MetricKind, Vec<DataPoint>) {
    let number_points = |points: &[opentelemetry_proto::tonic::metrics::v1::NumberDataPoint]| {
        points
            .iter()
            .map(|point| DataPoint {
                attributes: attributes(&point.attributes),
                start_unix_nanos: point.start_time_unix_nano,
                time_unix_nanos: point.time_unix_nano,
                value: match point.value {
                    Some(number_data_point::Value::AsInt(i)) => PointValue::Int(i),
                    Some(number_data_point::Value::AsDouble(d)) => PointValue::Double(d),
                    None => PointValue::Missing,
                },
            })
            .collect::<Vec<_>>()
    };
    match data {
        None => (MetricKind::Empty, Vec::new()),
        Some(metric::Data::Gauge(gauge)) => (MetricKind::Gauge, number_points(&gauge.data_points)),
        Some(metric::Data::Sum(sum)) => (
            MetricKind::Sum {
                monotonic: sum.is_monotonic,
                temporality: temporality(sum.aggregation_temporality),
            },
            number_points(&sum.data_points),
        ),
        Some(metric::Data::Histogram(histogram)) => (
            MetricKind::Histogram {
                temporality: temporality(histogram.aggregation_temporality),
            },
            histogram
                .data_points
                .iter()
                .map(|point| DataPoint {
                    attributes: attributes(&point.attributes),
                    start_unix_nanos: point.start_time_unix_nano,
                    time_unix_nanos: point.time_unix_nano,
                    value: PointValue::Distribution {
                        count: point.count,
                        sum: point.sum,
                        min: point.min,
                        max: point.max,
                        bucket_counts: point.bucket_counts.clone(),
                        explicit_bounds: point.explicit_bounds.clone(),
                    },
                })
                .collect(),
        ),
        Some(metric::Data::ExponentialHistogram(histogram)) => (
            MetricKind::ExponentialHistogram {
                temporality: temporality(histogram.aggregation_temporality),
            },
            histogram
                .data_points
                .iter()
                .map(|point| DataPoint {
                    attributes: attributes(&point.attributes),
                    start_unix_nanos: point.start_time_unix_nano,
                    time_unix_nanos: point.time_unix_nano,
                    value: PointValue::Distribution {
                        count: point.count,
                        sum: point.sum,
                        min: point.min,
                        max: point.max,
                        bucket_counts: Vec::new(),
                        explicit_bounds: Vec::new(),
                    },
                })
                .collect(),
        ),
        Some(metric::Data::Summary(summary)) => (
            MetricKind::Summary,
            summary
                .data_points
                .iter()
                .map(|point| DataPoint {
                    attributes: attributes(&point.attributes),
                    start_unix_nanos: point.start_time_unix_nano,
                    time_unix_nanos: point.time_unix_nano,
                    value: PointValue::Distribution {
                        count: point.count,
                        sum: Some(point.sum),
                        min: None,
                        max: None,
                        bucket_counts: Vec::new(),
                        explicit_bounds: Vec::new(),
                    },
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
