//! A collector that refuses, answers late or is down, played by the receiver, seen through the
//! real OTLP exporters: each export must report an error, and the receiver must record exactly
//! what it says it does (nothing when refusing; everything it was sent when merely slow).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{WAIT, send_parent_and_child, tracer_provider};
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use toolgate_otlp_receiver::{Receiver, ReceiverOptions, Transport, Until};

#[test]
fn a_failing_receiver_makes_the_http_span_exporter_report_an_error_until_it_recovers() {
    let receiver = Receiver::start(ReceiverOptions::default().failing()).unwrap();
    let runtime = common::runtime();
    let provider = tracer_provider(common::http_span_exporter(
        &runtime,
        &receiver,
        Duration::from_secs(10),
    ));

    send_parent_and_child(&provider);
    let refused = provider.force_flush();
    assert!(refused.is_err(), "the export succeeded: {refused:?}");
    let counts = receiver.request_counts(Transport::Http);
    assert_eq!(
        (counts.failed_on_purpose, counts.accepted),
        (1, 0),
        "{counts:?}"
    );
    assert!(receiver.spans().is_empty());

    receiver.set_failing(false);
    let sent = send_parent_and_child(&provider);
    provider.force_flush().unwrap();
    let spans = receiver
        .wait_for_spans_blocking(Until::count(2), WAIT)
        .unwrap();
    common::assert_parent_and_child(&spans, &sent, Transport::Http);
    provider.shutdown().unwrap();
}

#[test]
fn a_failing_receiver_makes_the_grpc_span_exporter_report_an_error() {
    let receiver = Receiver::start(ReceiverOptions::default().failing()).unwrap();
    let runtime = common::runtime();
    let provider = tracer_provider(common::grpc_span_exporter(
        &runtime,
        receiver.grpc_endpoint(),
    ));

    send_parent_and_child(&provider);
    let refused = provider.force_flush();
    assert!(refused.is_err(), "the export succeeded: {refused:?}");
    let counts = receiver.request_counts(Transport::Grpc);
    assert_eq!(
        (counts.failed_on_purpose, counts.accepted),
        (1, 0),
        "{counts:?}"
    );
    assert!(receiver.spans().is_empty());
    let _ = provider.shutdown();
}

#[test]
fn a_failing_receiver_makes_the_http_metric_exporter_report_an_error() {
    let receiver = Receiver::start(ReceiverOptions::default().failing()).unwrap();
    let runtime = common::runtime();
    let provider = SdkMeterProvider::builder()
        .with_reader(
            PeriodicReader::builder(common::http_metric_exporter(&runtime, &receiver)).build(),
        )
        .build();
    provider
        .meter(common::SCOPE)
        .u64_counter("toolgate.tool.calls")
        .build()
        .add(1, &[KeyValue::new("gen_ai.tool.name", "notes_search")]);

    let refused = provider.force_flush();
    assert!(refused.is_err(), "the export succeeded: {refused:?}");
    assert_eq!(
        receiver.request_counts(Transport::Http).failed_on_purpose,
        1
    );
    assert!(receiver.metrics().is_empty());
    // Shutting down exports once more, and is refused once more.
    let _ = provider.shutdown();
}

#[test]
fn a_stopped_receiver_leaves_closed_ports_and_keeps_what_it_received() {
    let mut receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let runtime = common::runtime();
    let before = tracer_provider(common::grpc_span_exporter(
        &runtime,
        receiver.grpc_endpoint(),
    ));
    send_parent_and_child(&before);
    before.force_flush().unwrap();
    receiver
        .wait_for_spans_blocking(Until::count(2), WAIT)
        .unwrap();

    receiver.stop();
    receiver.stop(); // a second stop does nothing

    for addr in [receiver.http_addr(), receiver.grpc_addr()] {
        let refused = std::net::TcpStream::connect(addr);
        assert!(refused.is_err(), "{addr} still accepts: {refused:?}");
    }
    // The exporter's open connection was closed too: its next export fails.
    send_parent_and_child(&before);
    let down = before.force_flush();
    assert!(
        down.is_err(),
        "an export to a stopped receiver succeeded: {down:?}"
    );
    // A new exporter meets a closed port.
    let after = tracer_provider(common::grpc_span_exporter(
        &runtime,
        receiver.grpc_endpoint(),
    ));
    send_parent_and_child(&after);
    let down = after.force_flush();
    assert!(
        down.is_err(),
        "an export to a stopped receiver succeeded: {down:?}"
    );

    assert_eq!(receiver.spans().len(), 2);
    let _ = before.shutdown();
    let _ = after.shutdown();
}

#[test]
fn a_slow_receiver_records_at_once_but_outlasts_an_impatient_exporter() {
    let receiver =
        Receiver::start(ReceiverOptions::default().with_delay(Duration::from_secs(30))).unwrap();
    let runtime = common::runtime();
    let provider = tracer_provider(common::http_span_exporter(
        &runtime,
        &receiver,
        Duration::from_millis(200),
    ));

    send_parent_and_child(&provider);
    let late = provider.force_flush();
    assert!(late.is_err(), "the export did not time out: {late:?}");
    // What arrived was recorded before the (late) answer.
    let spans = receiver
        .wait_for_spans_blocking(Until::count(2), WAIT)
        .unwrap();
    assert_eq!(spans.len(), 2);
    let _ = provider.shutdown();
}
