//! The flattening, case by case: each case named after the misreading it prevents.

use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValueList};
use opentelemetry_proto::tonic::metrics::v1::{
    ExponentialHistogram, ExponentialHistogramDataPoint, Gauge, Histogram, HistogramDataPoint,
    Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, Summary, SummaryDataPoint,
};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};

use super::*;

fn any(value: any_value::Value) -> AnyValue {
    AnyValue { value: Some(value) }
}

fn pair(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(any(value)),
        ..Default::default()
    }
}

#[test]
fn ids_are_lowercase_hex_of_every_byte_sent() {
    let cases: &[(&str, &[u8], &str)] = &[
        ("empty", &[], ""),
        ("leading zero kept", &[0x00, 0x0f], "000f"),
        ("upper nibble", &[0xab, 0xcd], "abcd"),
        (
            "a full trace id",
            &[
                0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e,
                0x47, 0x36,
            ],
            "4bf92f3577b34da6a3ce929d0e0e4736",
        ),
    ];
    for (name, bytes, expected) in cases {
        assert_eq!(hex(bytes), *expected, "{name}");
    }
}

#[test]
fn every_attribute_type_keeps_its_type() {
    use any_value::Value as V;
    let cases: Vec<(&str, Option<AnyValue>, AttributeValue)> = vec![
        (
            "string",
            Some(any(V::StringValue("x".into()))),
            AttributeValue::from("x"),
        ),
        (
            "bool",
            Some(any(V::BoolValue(true))),
            AttributeValue::Bool(true),
        ),
        ("int", Some(any(V::IntValue(-3))), AttributeValue::Int(-3)),
        (
            "double",
            Some(any(V::DoubleValue(0.5))),
            AttributeValue::Double(0.5),
        ),
        (
            "array of mixed",
            Some(any(V::ArrayValue(ArrayValue {
                values: vec![any(V::IntValue(1)), any(V::StringValue("two".into()))],
            }))),
            AttributeValue::Array(vec![AttributeValue::Int(1), "two".into()]),
        ),
        (
            "map",
            Some(any(V::KvlistValue(KeyValueList {
                values: vec![pair("k", V::BoolValue(false))],
            }))),
            AttributeValue::Map(BTreeMap::from([(
                "k".to_string(),
                AttributeValue::Bool(false),
            )])),
        ),
        (
            "bytes",
            Some(any(V::BytesValue(vec![1, 2]))),
            AttributeValue::Bytes(vec![1, 2]),
        ),
        (
            "string-table reference",
            Some(any(V::StringValueStrindex(4))),
            AttributeValue::Empty,
        ),
        (
            "no value inside",
            Some(AnyValue { value: None }),
            AttributeValue::Empty,
        ),
        ("no value at all", None, AttributeValue::Empty),
    ];
    for (name, value, expected) in cases {
        assert_eq!(attribute_value(value.as_ref()), expected, "{name}");
    }
}

#[test]
fn a_repeated_attribute_key_keeps_its_last_value() {
    let pairs = vec![
        pair("k", any_value::Value::IntValue(1)),
        pair("k", any_value::Value::IntValue(2)),
    ];
    assert_eq!(attributes(&pairs).get("k"), Some(&AttributeValue::Int(2)));
}

#[test]
fn unnamed_enum_numbers_are_kept_not_guessed() {
    let kinds: &[(i32, SpanKind)] = &[
        (0, SpanKind::Unspecified),
        (1, SpanKind::Internal),
        (2, SpanKind::Server),
        (3, SpanKind::Client),
        (4, SpanKind::Producer),
        (5, SpanKind::Consumer),
        (9, SpanKind::Unknown(9)),
        (-1, SpanKind::Unknown(-1)),
    ];
    for (number, expected) in kinds {
        assert_eq!(span_kind(*number), *expected, "kind {number}");
    }
    let codes: &[(i32, StatusCode)] = &[
        (0, StatusCode::Unset),
        (1, StatusCode::Ok),
        (2, StatusCode::Error),
        (3, StatusCode::Unknown(3)),
    ];
    for (number, expected) in codes {
        assert_eq!(status_code(*number), *expected, "code {number}");
    }
    let temporalities: &[(i32, Temporality)] = &[
        (0, Temporality::Unspecified),
        (1, Temporality::Delta),
        (2, Temporality::Cumulative),
        (7, Temporality::Unknown(7)),
    ];
    for (number, expected) in temporalities {
        assert_eq!(temporality(*number), *expected, "temporality {number}");
    }
}

fn request_with(
    spans: Vec<Span>,
    resource: Option<Resource>,
    scope: Option<InstrumentationScope>,
) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource,
            scope_spans: vec![ScopeSpans {
                scope,
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[test]
fn a_root_span_has_no_parent_and_a_child_names_its_own() {
    let root = Span {
        trace_id: vec![1; 16],
        span_id: vec![2; 8],
        name: "root".into(),
        ..Default::default()
    };
    let child = Span {
        trace_id: vec![1; 16],
        span_id: vec![3; 8],
        parent_span_id: vec![2; 8],
        name: "child".into(),
        ..Default::default()
    };
    let spans = spans_of(
        Transport::Http,
        &request_with(vec![root, child], None, None),
    );
    assert_eq!(spans[0].parent_span_id, None);
    assert_eq!(spans[1].parent_span_id.as_deref(), Some("0202020202020202"));
    assert_eq!(spans[1].trace_id, "01".repeat(16));
}

#[test]
fn a_span_without_status_resource_or_scope_reads_as_unset_and_empty() {
    let spans = spans_of(
        Transport::Grpc,
        &request_with(vec![Span::default()], None, None),
    );
    assert_eq!(
        spans[0].status,
        SpanStatus {
            code: StatusCode::Unset,
            message: String::new()
        }
    );
    assert!(spans[0].resource_attributes.is_empty());
    assert_eq!(spans[0].scope_name, "");
    assert_eq!(spans[0].transport, Transport::Grpc);
}

#[test]
fn every_span_of_every_scope_and_resource_is_kept_with_its_own_resource() {
    let resource = |service: &str| Resource {
        attributes: vec![pair(
            "service.name",
            any_value::Value::StringValue(service.into()),
        )],
        ..Default::default()
    };
    let scope = |name: &str| InstrumentationScope {
        name: name.into(),
        ..Default::default()
    };
    let named = |name: &str| Span {
        name: name.into(),
        status: Some(Status {
            code: 2,
            message: "boom".into(),
        }),
        ..Default::default()
    };
    let mut request = request_with(
        vec![named("a"), named("b")],
        Some(resource("one")),
        Some(scope("s1")),
    );
    request.resource_spans.extend(
        request_with(vec![named("c")], Some(resource("two")), Some(scope("s2"))).resource_spans,
    );
    let spans = spans_of(Transport::Http, &request);
    let seen: Vec<(&str, Option<&str>, &str)> = spans
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.resource_attributes
                    .get("service.name")
                    .and_then(AttributeValue::as_str),
                s.scope_name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("a", Some("one"), "s1"),
            ("b", Some("one"), "s1"),
            ("c", Some("two"), "s2")
        ]
    );
    assert_eq!(spans[2].status.code, StatusCode::Error);
    assert_eq!(spans[2].status.message, "boom");
}

fn metric_request(data: Option<metric::Data>) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "m".into(),
                    unit: "s".into(),
                    data,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[test]
fn each_metric_kind_reads_as_itself_with_its_points() {
    let number = |value| NumberDataPoint {
        value,
        attributes: vec![pair("tool", any_value::Value::StringValue("t".into()))],
        time_unix_nano: 7,
        ..Default::default()
    };
    let distribution = |count, sum, bounds: Vec<f64>, buckets: Vec<u64>| PointValue::Distribution {
        count,
        sum,
        min: None,
        max: None,
        bucket_counts: buckets,
        explicit_bounds: bounds,
    };
    let cases: Vec<(&str, Option<metric::Data>, MetricKind, Vec<PointValue>)> = vec![
        ("no data", None, MetricKind::Empty, vec![]),
        (
            "monotonic delta sum of ints",
            Some(metric::Data::Sum(Sum {
                data_points: vec![number(Some(number_data_point::Value::AsInt(5)))],
                aggregation_temporality: 1,
                is_monotonic: true,
            })),
            MetricKind::Sum {
                monotonic: true,
                temporality: Temporality::Delta,
            },
            vec![PointValue::Int(5)],
        ),
        (
            "up-down sum",
            Some(metric::Data::Sum(Sum {
                data_points: vec![number(Some(number_data_point::Value::AsInt(-1)))],
                aggregation_temporality: 2,
                is_monotonic: false,
            })),
            MetricKind::Sum {
                monotonic: false,
                temporality: Temporality::Cumulative,
            },
            vec![PointValue::Int(-1)],
        ),
        (
            "gauge of doubles, one without value",
            Some(metric::Data::Gauge(Gauge {
                data_points: vec![
                    number(Some(number_data_point::Value::AsDouble(1.5))),
                    number(None),
                ],
            })),
            MetricKind::Gauge,
            vec![PointValue::Double(1.5), PointValue::Missing],
        ),
        (
            "histogram",
            Some(metric::Data::Histogram(Histogram {
                data_points: vec![HistogramDataPoint {
                    count: 3,
                    sum: Some(6.0),
                    bucket_counts: vec![1, 2, 0],
                    explicit_bounds: vec![1.0, 5.0],
                    ..Default::default()
                }],
                aggregation_temporality: 2,
            })),
            MetricKind::Histogram {
                temporality: Temporality::Cumulative,
            },
            vec![distribution(3, Some(6.0), vec![1.0, 5.0], vec![1, 2, 0])],
        ),
        (
            "exponential histogram without its buckets",
            Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
                data_points: vec![ExponentialHistogramDataPoint {
                    count: 4,
                    sum: None,
                    ..Default::default()
                }],
                aggregation_temporality: 1,
            })),
            MetricKind::ExponentialHistogram {
                temporality: Temporality::Delta,
            },
            vec![distribution(4, None, vec![], vec![])],
        ),
        (
            "summary",
            Some(metric::Data::Summary(Summary {
                data_points: vec![SummaryDataPoint {
                    count: 2,
                    sum: 3.0,
                    ..Default::default()
                }],
            })),
            MetricKind::Summary,
            vec![distribution(2, Some(3.0), vec![], vec![])],
        ),
    ];
    for (name, data, kind, values) in cases {
        let metrics = metrics_of(Transport::Http, &metric_request(data));
        assert_eq!(metrics.len(), 1, "{name}");
        assert_eq!(metrics[0].kind, kind, "{name}");
        assert_eq!(metrics[0].unit, "s", "{name}");
        let got: Vec<PointValue> = metrics[0]
            .data_points
            .iter()
            .map(|p| p.value.clone())
            .collect();
        assert_eq!(got, values, "{name}");
    }
    let gauge = metrics_of(
        Transport::Grpc,
        &metric_request(Some(metric::Data::Gauge(Gauge {
            data_points: vec![number(Some(number_data_point::Value::AsInt(1)))],
        }))),
    );
    assert_eq!(
        gauge[0].data_points[0].attributes.get("tool"),
        Some(&AttributeValue::from("t"))
    );
    assert_eq!(gauge[0].data_points[0].time_unix_nanos, 7);
    assert_eq!(gauge[0].transport, Transport::Grpc);
}
