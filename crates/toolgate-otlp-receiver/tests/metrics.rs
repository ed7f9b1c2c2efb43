//! The real OTLP metric exporter (opentelemetry-otlp, periodic reader, `force_flush`) sends a
//! counter and a histogram to the receiver over each transport; the receiver's decoded metrics
//! must carry the names, units, kinds, attributes and values the SDK aggregated.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use toolgate_otlp_receiver::{
    AttributeValue, MetricKind, PointValue, ReceivedMetric, Receiver, ReceiverOptions, Temporality,
    Transport, Until,
};

const CALLS: &str = "toolgate.tool.calls";
const DURATION: &str = "toolgate.tool.duration";

fn record_and_flush(exporter: opentelemetry_otlp::MetricExporter) -> SdkMeterProvider {
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter).build())
        .with_resource(common::resource())
        .build();
    let meter = provider.meter(common::SCOPE);
    let calls = meter
        .u64_counter(CALLS)
        .with_unit("{call}")
        .with_description("tool calls through the dispatcher")
        .build();
    let duration = meter.f64_histogram(DURATION).with_unit("s").build();
    let tool = [KeyValue::new("gen_ai.tool.name", "notes_search")];
    calls.add(3, &tool);
    calls.add(2, &tool);
    duration.record(0.25, &tool);
    duration.record(0.75, &tool);
    provider.force_flush().unwrap();
    provider
}

fn both_instruments() -> Until<ReceivedMetric> {
    Until::condition(
        "the counter and the histogram",
        |metrics: &[ReceivedMetric]| {
            [CALLS, DURATION]
                .iter()
                .all(|name| metrics.iter().any(|m| m.name == *name))
        },
    )
}

fn assert_counter_and_histogram(metrics: &[ReceivedMetric], transport: Transport) {
    let calls = metrics.iter().find(|m| m.name == CALLS).unwrap();
    assert_eq!(calls.transport, transport);
    assert_eq!(calls.unit, "{call}");
    assert_eq!(calls.description, "tool calls through the dispatcher");
    assert_eq!(
        calls.kind,
        MetricKind::Sum {
            monotonic: true,
            temporality: Temporality::Cumulative
        }
    );
    assert_eq!(calls.data_points.len(), 1, "{calls:#?}");
    let point = &calls.data_points[0];
    assert_eq!(point.value, PointValue::Int(5));
    assert_eq!(
        point.attributes.get("gen_ai.tool.name"),
        Some(&AttributeValue::from("notes_search"))
    );
    assert_eq!(calls.scope_name, common::SCOPE);
    assert_eq!(
        calls.resource_attributes.get("service.name"),
        Some(&AttributeValue::from("toolgate-under-test"))
    );

    let duration = metrics.iter().find(|m| m.name == DURATION).unwrap();
    assert_eq!(duration.unit, "s");
    assert_eq!(
        duration.kind,
        MetricKind::Histogram {
            temporality: Temporality::Cumulative
        }
    );
    assert_eq!(duration.data_points.len(), 1, "{duration:#?}");
    let PointValue::Distribution {
        count,
        sum,
        min,
        max,
        bucket_counts,
        explicit_bounds,
    } = &duration.data_points[0].value
    else {
        panic!("not a distribution: {duration:#?}");
    };
    assert_eq!(*count, 2);
    assert_eq!(*sum, Some(1.0));
    assert_eq!((*min, *max), (Some(0.25), Some(0.75)));
    assert_eq!(bucket_counts.len(), explicit_bounds.len() + 1);
    assert_eq!(bucket_counts.iter().sum::<u64>(), 2);
    assert_eq!(
        duration.data_points[0].attributes.get("gen_ai.tool.name"),
        Some(&AttributeValue::from("notes_search"))
    );
}

#[test]
fn a_counter_and_a_histogram_sent_over_http_keep_their_values() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let runtime = common::runtime();
    let provider = record_and_flush(common::http_metric_exporter(&runtime, &receiver));

    let metrics = receiver
        .wait_for_metrics_blocking(both_instruments(), common::WAIT)
        .unwrap();
    assert_counter_and_histogram(&metrics, Transport::Http);
    assert!(receiver.request_counts(Transport::Http).accepted >= 1);
    provider.shutdown().unwrap();
}

#[test]
fn a_counter_and_a_histogram_sent_over_grpc_keep_their_values() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let runtime = common::runtime();
    let provider = record_and_flush(common::grpc_metric_exporter(&runtime, &receiver));

    let metrics = receiver
        .wait_for_metrics_blocking(both_instruments(), common::WAIT)
        .unwrap();
    assert_counter_and_histogram(&metrics, Transport::Grpc);
    assert!(receiver.request_counts(Transport::Grpc).accepted >= 1);
    assert_eq!(receiver.metrics_requests().len(), 1);
    provider.shutdown().unwrap();
}
