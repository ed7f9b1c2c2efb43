//! What the HTTP listener refuses, sent byte for byte on 127.0.0.1: malformed protobuf (400),
//! bodies declared over 16 MiB (413, unread), other paths, methods and content types (404, 405,
//! 415). Each is counted, nothing is recorded, and the receiver keeps serving afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::raw_http;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message;
use toolgate_otlp_receiver::{MAX_BODY_BYTES, Receiver, ReceiverOptions, Transport};

const PROTOBUF: (&str, &str) = ("Content-Type", "application/x-protobuf");

#[test]
fn a_malformed_body_is_answered_400_and_nothing_is_recorded() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let cases: &[(&str, &str, &[u8])] = &[
        ("truncated varint tag", "/v1/traces", &[0xff, 0xff, 0xff]),
        ("length past the end", "/v1/traces", &[0x0a, 0x10, 0x01]),
        (
            "wrong wire type for resource_spans",
            "/v1/traces",
            &[0x08, 0x01],
        ),
        (
            "text instead of protobuf",
            "/v1/metrics",
            b"{\"resourceMetrics\": []}",
        ),
        (
            "truncated nested span",
            "/v1/traces",
            &[0x0a, 0x04, 0x12, 0x05, 0x12, 0x03],
        ),
    ];
    for (name, path, body) in cases {
        let answer = raw_http(receiver.http_addr(), "POST", path, &[PROTOBUF], body);
        assert_eq!(answer.status, 400, "{name}: {answer:?}");
    }
    let counts = receiver.request_counts(Transport::Http);
    assert_eq!(counts.malformed, cases.len() as u64, "{counts:?}");
    assert_eq!(counts.accepted, 0);
    assert!(receiver.spans().is_empty());
    assert!(receiver.metrics().is_empty());
    assert!(receiver.trace_requests().is_empty());
    assert!(receiver.metrics_requests().is_empty());

    // Still serving: an empty body is a valid (empty) export.
    let answer = raw_http(receiver.http_addr(), "POST", "/v1/traces", &[PROTOBUF], b"");
    assert_eq!(answer.status, 200, "{answer:?}");
}

#[test]
fn an_accepted_export_is_answered_with_an_empty_protobuf_response() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let answer = raw_http(receiver.http_addr(), "POST", "/v1/traces", &[PROTOBUF], b"");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(
        answer
            .head
            .to_ascii_lowercase()
            .contains("content-type: application/x-protobuf"),
        "{answer:?}"
    );
    assert_eq!(
        ExportTraceServiceResponse::decode(answer.body.as_slice()).unwrap(),
        ExportTraceServiceResponse::default()
    );
    assert_eq!(receiver.request_counts(Transport::Http).accepted, 1);
    assert!(receiver.spans().is_empty());
}

#[test]
fn a_body_declared_over_16_mib_is_answered_413_without_being_read() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let over = (MAX_BODY_BYTES + 1).to_string();
    // The length is declared and no body follows: the answer must come without waiting for it.
    let answer = raw_http(
        receiver.http_addr(),
        "POST",
        "/v1/traces",
        &[PROTOBUF, ("Content-Length", over.as_str())],
        b"",
    );
    assert_eq!(answer.status, 413, "{answer:?}");
    assert_eq!(receiver.request_counts(Transport::Http).too_large, 1);
    assert!(receiver.trace_requests().is_empty());
}

#[test]
fn other_paths_methods_and_content_types_are_refused_and_counted() {
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let cases: &[(&str, &str, &str, &[(&str, &str)], u16)] = &[
        ("logs are not served", "POST", "/v1/logs", &[PROTOBUF], 404),
        ("root", "GET", "/", &[], 404),
        ("get on traces", "GET", "/v1/traces", &[PROTOBUF], 405),
        (
            "json body",
            "POST",
            "/v1/traces",
            &[("Content-Type", "application/json")],
            415,
        ),
        ("no content type", "POST", "/v1/metrics", &[], 415),
        (
            "gzip",
            "POST",
            "/v1/traces",
            &[PROTOBUF, ("Content-Encoding", "gzip")],
            415,
        ),
    ];
    for (name, method, path, headers, status) in cases {
        let answer = raw_http(receiver.http_addr(), method, path, headers, b"\x0a\x00");
        assert_eq!(answer.status, *status, "{name}: {answer:?}");
    }
    let counts = receiver.request_counts(Transport::Http);
    assert_eq!(counts.refused, cases.len() as u64, "{counts:?}");
    assert_eq!(counts.total(), counts.refused);
    assert!(receiver.trace_requests().is_empty() && receiver.metrics_requests().is_empty());
}
