//! Trace context in and out of `_meta` and headers; each case named after what it prevents.

#![allow(clippy::unwrap_used)]

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use serde_json::{Map, Value, json};

use super::*;

const WELL_FORMED: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

fn meta(value: Value) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(TRACEPARENT.into(), value);
    map
}

fn trace_id(cx: &Context) -> String {
    cx.span().span_context().trace_id().to_string()
}

#[test]
fn a_well_formed_traceparent_in_meta_becomes_the_remote_parent() {
    let mut m = meta(json!(WELL_FORMED));
    m.insert(TRACESTATE.into(), json!("vendor=abc"));
    let cx = context_from_meta(Some(&m)).unwrap();
    let span = cx.span();
    let sc = span.span_context();
    assert_eq!(
        sc.trace_id().to_string(),
        "0af7651916cd43dd8448eb211c80319c"
    );
    assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
    assert!(sc.is_sampled());
    assert!(sc.is_remote());
    assert_eq!(sc.trace_state().header(), "vendor=abc");
}

#[test]
fn a_malformed_traceparent_is_ignored_not_an_error() {
    let cases: Vec<(&str, Value)> = vec![
        ("empty", json!("")),
        (
            "not hex",
            json!("00-zzf7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"),
        ),
        (
            "all-zero trace id",
            json!("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
        ),
        (
            "all-zero span id",
            json!("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"),
        ),
        (
            "version ff",
            json!("ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"),
        ),
        (
            "upper-case hex",
            json!("00-0AF7651916CD43DD8448EB211C80319C-00F067AA0BA902B7-01"),
        ),
        (
            "short trace id",
            json!("00-0af7651916cd43dd-00f067aa0ba902b7-01"),
        ),
        ("too many parts", json!(format!("{WELL_FORMED}-00-00"))),
        (
            "oversized",
            json!(format!("{WELL_FORMED}{}", " ".repeat(10_000))),
        ),
        ("a number", json!(42)),
        ("an object", json!({"traceparent": WELL_FORMED})),
        ("null", Value::Null),
        (
            "control characters",
            json!("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01\n\u{1b}[31m"),
        ),
    ];
    for (what, value) in cases {
        assert!(context_from_meta(Some(&meta(value))).is_none(), "{what}");
    }
    assert!(context_from_meta(None).is_none());
    assert!(context_from_meta(Some(&Map::new())).is_none());
}

#[test]
fn a_traceparent_header_becomes_the_remote_parent_and_a_bad_one_is_ignored() {
    let mut headers = http::HeaderMap::new();
    headers.insert(TRACEPARENT, http::HeaderValue::from_static(WELL_FORMED));
    let cx = context_from_headers(&headers).unwrap();
    assert_eq!(trace_id(&cx), "0af7651916cd43dd8448eb211c80319c");

    let mut bad = http::HeaderMap::new();
    bad.insert(
        TRACEPARENT,
        http::HeaderValue::from_static("00-nothing-here-01"),
    );
    assert!(context_from_headers(&bad).is_none());
    assert!(context_from_headers(&http::HeaderMap::new()).is_none());
}

#[test]
fn injecting_replaces_a_callers_traceparent_with_ours() {
    let ours = SpanContext::new(
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    );
    let cx = Context::new().with_remote_span_context(ours);
    let mut m = meta(json!(
        "00-11111111111111111111111111111111-2222222222222222-01"
    ));
    m.insert(TRACESTATE.into(), json!("stale=1"));
    m.insert("io.example/other".into(), json!("kept"));
    inject_into_meta(&cx, &mut m);
    assert_eq!(
        m[TRACEPARENT],
        json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    );
    assert!(
        !m.contains_key(TRACESTATE),
        "a stale tracestate is not forwarded"
    );
    assert_eq!(m["io.example/other"], json!("kept"));
}

#[test]
fn with_no_span_nothing_is_injected() {
    let mut m = Map::new();
    inject_into_meta(&Context::new(), &mut m);
    assert!(m.is_empty());
}
