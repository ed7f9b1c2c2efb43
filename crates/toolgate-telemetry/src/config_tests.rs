use super::*;

fn parse(toml_text: &str) -> Result<TelemetryConfig, toml::de::Error> {
    toml::from_str(toml_text)
}

fn on(endpoint: &str) -> TelemetryConfig {
    TelemetryConfig {
        otlp_endpoint: Some(endpoint.to_string()),
        ..TelemetryConfig::default()
    }
}

fn with_header(name: &str, value: &str) -> TelemetryConfig {
    let mut config = on("http://127.0.0.1:4318");
    config.headers.insert(name.to_string(), value.to_string());
    config
}

#[test]
fn an_empty_section_is_off_with_the_documented_defaults() {
    let config = parse("").unwrap();
    assert_eq!(config, TelemetryConfig::default());
    assert!(!config.is_on());
    assert_eq!(config.protocol, Protocol::HttpProtobuf);
    assert_eq!(config.sampling_ratio, 1.0);
    assert_eq!(config.service_name, "toolgate");
    assert!(!config.record_arguments);
    assert_eq!(config.queue_capacity, 2048);
    assert_eq!(config.export_timeout_ms, 5000);
    assert_eq!(config.metrics_interval_ms, 10_000);
    assert_eq!(config.validate(), Ok(()));
}

#[test]
fn every_key_is_read() {
    let config = parse(
        r#"
        otlp_endpoint = "https://collector.example.com:4317"
        protocol = "grpc"
        sampling_ratio = 0.25
        service_name = "toolgate-staging"
        record_arguments = true
        queue_capacity = 16
        export_timeout_ms = 1000
        metrics_interval_ms = 500
        [headers]
        x-api-key = "k-123"
        "#,
    )
    .unwrap();
    assert!(config.is_on());
    assert_eq!(config.protocol, Protocol::Grpc);
    assert_eq!(config.sampling_ratio, 0.25);
    assert_eq!(config.service_name, "toolgate-staging");
    assert!(config.record_arguments);
    assert_eq!(config.queue_capacity, 16);
    assert_eq!(config.export_timeout(), Duration::from_secs(1));
    assert_eq!(config.metrics_interval(), Duration::from_millis(500));
    assert_eq!(config.headers["x-api-key"], "k-123");
    assert_eq!(config.validate(), Ok(()));
}

#[test]
fn unknown_keys_and_protocols_are_refused_when_read() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "a misspelt key",
            "otlp_endpiont = \"http://127.0.0.1:4318\"",
            "unknown field",
        ),
        (
            "http/json, which toolgate does not send",
            "protocol = \"http/json\"",
            "http/protobuf",
        ),
        (
            "a protocol spelt another way",
            "protocol = \"GRPC\"",
            "unknown variant",
        ),
        ("a negative queue", "queue_capacity = -1", "queue_capacity"),
    ];
    for (what, text, expected) in cases {
        let error = parse(text).expect_err(what).to_string();
        assert!(error.contains(expected), "{what}: {error}");
    }
}

#[test]
fn values_that_cannot_work_are_refused_with_what_to_write_instead() {
    let cases: Vec<(&str, TelemetryConfig, ConfigError, &str)> = vec![
        (
            "an_empty_endpoint_is_refused",
            on(""),
            ConfigError::EmptyEndpoint,
            "remove the key",
        ),
        (
            "an_endpoint_without_a_scheme_is_refused",
            on("localhost:4318"),
            ConfigError::EndpointScheme {
                endpoint: "localhost:4318".into(),
                scheme: "localhost".into(),
            },
            "http:// or https://",
        ),
        (
            "a_bare_host_is_refused",
            on("127.0.0.1:4318"),
            ConfigError::EndpointNotUrl {
                endpoint: "127.0.0.1:4318".into(),
                reason: "relative URL without a base".into(),
            },
            "http://127.0.0.1:4318",
        ),
        (
            "a_grpc_scheme_is_refused",
            on("grpc://127.0.0.1:4317"),
            ConfigError::EndpointScheme {
                endpoint: "grpc://127.0.0.1:4317".into(),
                scheme: "grpc".into(),
            },
            "http:// or https://",
        ),
        (
            "a_file_url_is_refused",
            on("file:///tmp/spans"),
            ConfigError::EndpointScheme {
                endpoint: "file:///tmp/spans".into(),
                scheme: "file".into(),
            },
            "http:// or https://",
        ),
        (
            "credentials_in_the_url_are_refused",
            on("https://user:secret@collector.example.com"),
            ConfigError::EndpointCredentials,
            "[telemetry.headers]",
        ),
        (
            "a_query_on_the_endpoint_is_refused",
            on("http://127.0.0.1:4318?key=1"),
            ConfigError::EndpointQuery {
                endpoint: "http://127.0.0.1:4318?key=1".into(),
            },
            "base URL only",
        ),
        (
            "a_signal_path_on_the_endpoint_is_refused",
            on("http://127.0.0.1:4318/v1/traces"),
            ConfigError::EndpointSignalPath {
                endpoint: "http://127.0.0.1:4318/v1/traces".into(),
                path: "/v1/traces",
            },
            "appends /v1/traces",
        ),
        (
            "a_sampling_ratio_above_one_is_refused",
            TelemetryConfig {
                sampling_ratio: 1.5,
                ..on("http://127.0.0.1:4318")
            },
            ConfigError::SamplingRatio { ratio: 1.5 },
            "from 0.0",
        ),
        (
            "a_negative_sampling_ratio_is_refused",
            TelemetryConfig {
                sampling_ratio: -0.1,
                ..on("http://127.0.0.1:4318")
            },
            ConfigError::SamplingRatio { ratio: -0.1 },
            "to 1.0",
        ),
        (
            "a_blank_service_name_is_refused",
            TelemetryConfig {
                service_name: "  ".into(),
                ..on("http://127.0.0.1:4318")
            },
            ConfigError::BlankServiceName,
            "\"toolgate\"",
        ),
        (
            "a_header_name_with_a_space_is_refused",
            with_header("x api key", "k"),
            ConfigError::HeaderName {
                name: "x api key".into(),
                reason: "invalid HTTP header name".into(),
            },
            "x-api-key",
        ),
        (
            "a_header_name_with_a_colon_is_refused",
            with_header("x-api-key:", "k"),
            ConfigError::HeaderName {
                name: "x-api-key:".into(),
                reason: "invalid HTTP header name".into(),
            },
            "letters, digits and '-'",
        ),
        (
            "a_header_value_with_a_line_break_is_refused",
            with_header("x-api-key", "k\r\nx-injected: 1"),
            ConfigError::HeaderValue {
                name: "x-api-key".into(),
            },
            "one line",
        ),
        (
            "a_non_ascii_header_value_is_refused",
            with_header("x-api-key", "clé"),
            ConfigError::HeaderValue {
                name: "x-api-key".into(),
            },
            "visible ASCII",
        ),
        (
            "a_header_the_exporter_sets_is_refused",
            with_header("Content-Type", "application/json"),
            ConfigError::ReservedHeader {
                name: "Content-Type".into(),
            },
            "set by the exporter",
        ),
        (
            "a_zero_queue_is_refused",
            TelemetryConfig {
                queue_capacity: 0,
                ..on("http://127.0.0.1:4318")
            },
            ConfigError::QueueCapacity { capacity: 0 },
            "from 1 to 1000000",
        ),
        (
            "an_unbounded_queue_is_refused",
            TelemetryConfig {
                queue_capacity: 1_000_001,
                ..on("http://127.0.0.1:4318")
            },
            ConfigError::QueueCapacity {
                capacity: 1_000_001,
            },
            "default, 2048",
        ),
        (
            "a_zero_export_timeout_is_refused",
            TelemetryConfig {
                export_timeout_ms: 0,
                ..on("http://127.0.0.1:4318")
            },
            ConfigError::ExportTimeout { timeout_ms: 0 },
            "from 1 to 60000",
        ),
        (
            "an_export_timeout_that_would_hold_shutdown_is_refused",
            TelemetryConfig {
                export_timeout_ms: 600_000,
                ..on("http://127.0.0.1:4318")
            },
            ConfigError::ExportTimeout {
                timeout_ms: 600_000,
            },
            "from 1 to 60000",
        ),
        (
            "a_metrics_interval_that_would_spin_is_refused",
            TelemetryConfig {
                metrics_interval_ms: 0,
                ..on("http://127.0.0.1:4318")
            },
            ConfigError::MetricsInterval { interval_ms: 0 },
            "at least 100",
        ),
    ];
    for (name, config, expected, advice) in cases {
        let error = config.validate().expect_err(name);
        match (&error, &expected) {
            // The parser's and the header crate's own wording is theirs; the variant and the
            // value are ours.
            (
                ConfigError::EndpointNotUrl { endpoint, .. },
                ConfigError::EndpointNotUrl { endpoint: e, .. },
            )
            | (
                ConfigError::HeaderName { name: endpoint, .. },
                ConfigError::HeaderName { name: e, .. },
            ) => assert_eq!(endpoint, e, "{name}"),
            _ => assert_eq!(error, expected, "{name}"),
        }
        let message = error.to_string();
        assert!(message.contains(advice), "{name}: {message}");
    }
}

#[test]
fn a_nan_sampling_ratio_is_refused() {
    let config = TelemetryConfig {
        sampling_ratio: f64::NAN,
        ..on("http://127.0.0.1:4318")
    };
    assert!(matches!(
        config.validate(),
        Err(ConfigError::SamplingRatio { .. })
    ));
}

#[test]
fn endpoints_a_collector_serves_are_accepted() {
    for endpoint in [
        "http://127.0.0.1:4318",
        "http://127.0.0.1:4318/",
        "http://[::1]:4317",
        "https://otlp.example.com",
        "https://otlp.example.com/otlp",
        "http://localhost:4317",
    ] {
        assert_eq!(on(endpoint).validate(), Ok(()), "{endpoint}");
    }
    assert_eq!(
        TelemetryConfig {
            sampling_ratio: 0.0,
            ..on("http://127.0.0.1:4318")
        }
        .validate(),
        Ok(())
    );
    assert_eq!(
        with_header("authorization", "Bearer abc.def-ghi").validate(),
        Ok(())
    );
}

#[test]
fn a_header_value_never_reaches_debug_output_or_an_error() {
    let config = with_header("x-api-key", "s3cr3t-value");
    let text = format!("{config:?}");
    assert!(text.contains("x-api-key"), "{text}");
    assert!(!text.contains("s3cr3t-value"), "{text}");
    let broken = with_header("x-api-key", "s3cr3t\nvalue");
    let message = broken.validate().unwrap_err().to_string();
    assert!(!message.contains("s3cr3t"), "{message}");
}

#[test]
fn the_base_endpoint_gets_each_signals_path_over_http_only() {
    let cases: &[(&str, Protocol, Signal, &str)] = &[
        (
            "http://127.0.0.1:4318",
            Protocol::HttpProtobuf,
            Signal::Traces,
            "http://127.0.0.1:4318/v1/traces",
        ),
        (
            "http://127.0.0.1:4318/",
            Protocol::HttpProtobuf,
            Signal::Metrics,
            "http://127.0.0.1:4318/v1/metrics",
        ),
        (
            "https://otlp.example.com/otlp/",
            Protocol::HttpProtobuf,
            Signal::Traces,
            "https://otlp.example.com/otlp/v1/traces",
        ),
        (
            "http://127.0.0.1:4317",
            Protocol::Grpc,
            Signal::Traces,
            "http://127.0.0.1:4317",
        ),
        (
            "http://127.0.0.1:4317",
            Protocol::Grpc,
            Signal::Metrics,
            "http://127.0.0.1:4317",
        ),
    ];
    for (base, protocol, signal, expected) in cases {
        assert_eq!(
            signal_endpoint(base, *protocol, *signal),
            *expected,
            "{base} {protocol:?} {signal:?}"
        );
    }
}
