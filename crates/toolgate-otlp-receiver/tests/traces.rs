//! The real OTLP span exporter (opentelemetry-otlp, batch processor, `force_flush`) sends a
//! parent and a child span to the receiver over each transport; the receiver's decoded spans
//! must carry the ids, the parent link, names, kinds, status, attributes, events, resource and
//! scope the SDK gave them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{WAIT, assert_parent_and_child, send_parent_and_child, tracer_provider};
use toolgate_otlp_receiver::{Receiver, ReceiverOptions, Transport, Until};

#[test]
fn a_child_span_sent_over_http_keeps_its_parent_attributes_and_event() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let runtime = common::runtime();
    let provider = tracer_provider(common::http_span_exporter(
        &runtime,
        &receiver,
        Duration::from_secs(10),
    ));

    let sent = send_parent_and_child(&provider);
    provider.force_flush().unwrap();

    let spans = receiver
        .wait_for_spans_blocking(Until::count(2), WAIT)
        .unwrap();
    assert_parent_and_child(&spans, &sent, Transport::Http);
    assert_eq!(receiver.request_counts(Transport::Http).accepted, 1);
    assert_eq!(receiver.request_counts(Transport::Grpc).total(), 0);
    assert_eq!(receiver.trace_requests().len(), 1);
    provider.shutdown().unwrap();
}

#[test]
fn a_child_span_sent_over_grpc_keeps_its_parent() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let runtime = common::runtime();
    let provider = tracer_provider(common::grpc_span_exporter(
        &runtime,
        receiver.grpc_endpoint(),
    ));

    let sent = send_parent_and_child(&provider);
    provider.force_flush().unwrap();

    let spans = receiver
        .wait_for_spans_blocking(Until::count(2), WAIT)
        .unwrap();
    assert_parent_and_child(&spans, &sent, Transport::Grpc);
    assert_eq!(receiver.request_counts(Transport::Grpc).accepted, 1);
    assert_eq!(receiver.request_counts(Transport::Http).total(), 0);
    provider.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_wait_sees_spans_exported_from_inside_a_runtime() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    // The exporter's tonic channel lives on this test's runtime; the SDK's blocking calls run
    // off its workers.
    let exporter = opentelemetry_otlp::SpanExporter::builder();
    let exporter = {
        use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
        exporter
            .with_tonic()
            .with_endpoint(receiver.grpc_endpoint())
            .with_retry_policy(opentelemetry_otlp::RetryPolicy::disabled())
            .build()
            .unwrap()
    };
    let provider = tracer_provider(exporter);
    let sent = tokio::task::spawn_blocking({
        let provider = provider.clone();
        move || {
            let sent = send_parent_and_child(&provider);
            provider.force_flush().unwrap();
            sent
        }
    })
    .await
    .unwrap();

    let spans = receiver
        .wait_for_spans(
            Until::condition("the child span", |spans: &[_]| {
                spans
                    .iter()
                    .any(|s: &toolgate_otlp_receiver::ReceivedSpan| s.name == "policy decision")
            }),
            WAIT,
        )
        .await
        .unwrap();
    assert_parent_and_child(&spans, &sent, Transport::Grpc);
    tokio::task::spawn_blocking(move || provider.shutdown().unwrap())
        .await
        .unwrap();
}
