use super::*;

#[test]
fn a_queue_holds_no_more_than_its_capacity() {
    let counts = SpanCounts::default();
    assert!(counts.reserve(2));
    assert!(counts.reserve(2));
    assert!(!counts.reserve(2), "a third span has no place");
    counts.release_exported(1);
    assert!(counts.reserve(2), "an exported span frees its place");
    assert_eq!(counts.held(), 2);
}

#[test]
fn a_queued_span_that_is_lost_is_counted_as_dropped() {
    let counts = Arc::new(SpanCounts::default());
    assert!(counts.reserve(4));
    let queued = Queued {
        span: Some(Box::new(opentelemetry_sdk::trace::SpanData {
            span_context: opentelemetry::trace::SpanContext::empty_context(),
            parent_span_id: opentelemetry::trace::SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: opentelemetry::trace::SpanKind::Internal,
            name: "lost".into(),
            start_time: std::time::SystemTime::UNIX_EPOCH,
            end_time: std::time::SystemTime::UNIX_EPOCH,
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: opentelemetry::trace::Status::Unset,
            instrumentation_scope: Default::default(),
        })),
        counts: Arc::clone(&counts),
    };
    drop(queued);
    assert_eq!(counts.dropped(), 1);
    assert_eq!(counts.held(), 0);
}

#[test]
fn no_endpoint_starts_nothing() {
    assert!(start(&TelemetryConfig::default()).unwrap().is_none());
}

#[test]
fn an_invalid_config_is_refused_before_anything_starts() {
    let config = TelemetryConfig {
        otlp_endpoint: Some("http://127.0.0.1:4318".into()),
        queue_capacity: 0,
        ..TelemetryConfig::default()
    };
    assert!(matches!(
        start(&config),
        Err(TelemetryError::Config(ConfigError::QueueCapacity {
            capacity: 0
        }))
    ));
}

#[test]
fn exporting_can_be_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Exporting>();
    shared::<BoundedSpanProcessor>();
}

#[test]
fn an_https_collector_can_be_configured_over_either_protocol() {
    // Nothing listens there: this shows only that TLS is built in for both transports (the
    // exporters connect lazily), and that shutting down with nobody to talk to stays bounded.
    for protocol in [Protocol::HttpProtobuf, Protocol::Grpc] {
        let config = TelemetryConfig {
            otlp_endpoint: Some("https://127.0.0.1:9".into()),
            protocol,
            export_timeout_ms: 200,
            ..TelemetryConfig::default()
        };
        let exporting = start(&config)
            .unwrap_or_else(|error| panic!("{protocol:?}: {error}"))
            .unwrap();
        assert!(exporting.telemetry().is_on());
        // The final metric export has nowhere to go: shutdown says so, and returns.
        let shut = exporting.shutdown();
        assert!(
            matches!(shut, Err(TelemetryError::Shutdown(_))),
            "{protocol:?}: {shut:?}"
        );
        assert_eq!(exporting.spans_dropped(), 0, "no span was recorded");
    }
}

#[test]
fn a_collector_that_keeps_failing_is_left_alone_longer_each_time_but_never_forever() {
    let cases = [
        (0, Duration::ZERO),
        (1, FIRST_BACKOFF),
        (2, 2 * FIRST_BACKOFF),
        (3, 4 * FIRST_BACKOFF),
        (5, 16 * FIRST_BACKOFF),
        (6, MAX_BACKOFF),
        (40, MAX_BACKOFF),
        (u32::MAX, MAX_BACKOFF),
    ];
    for (failures, wanted) in cases {
        assert_eq!(backoff_delay(failures), wanted, "{failures} failures");
    }
}
