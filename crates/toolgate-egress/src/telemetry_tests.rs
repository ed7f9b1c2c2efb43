use super::*;
use crate::error::{BlockReason, EgressError};

fn http(hops: &[&str], host: Option<&str>) -> Request {
    Request::Http {
        method: Some("GET"),
        url: hops.first().map(|h| h.to_string()).unwrap_or_default(),
        scheme: Some("http".into()),
        host: host.map(String::from),
        port: Some(80),
        addresses: vec!["127.0.0.1".into()],
        hops: hops.iter().map(|h| h.to_string()).collect(),
        hop_rules: vec!["allow[0]:a.test".into()],
        status: None,
        bytes: 0,
        content_type: None,
    }
}

fn value(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

#[test]
fn a_path_query_address_or_failure_text_never_reaches_a_span() {
    let secret = "note=the-secret-diagnosis";
    let cases: Vec<(Request, Result<(), EgressError>)> = vec![
        (
            http(&[&format!("http://a.test/p?{secret}")], Some("a.test")),
            Ok(()),
        ),
        (
            http(
                &[
                    &format!("http://a.test/r?{secret}"),
                    &format!("http://evil.test/x/{secret}#{secret}"),
                ],
                Some("evil.test"),
            ),
            Err(BlockReason::UnlistedHost {
                host: "evil.test".into(),
            }
            .into()),
        ),
        (
            http(&[&format!("http://a.test/{secret}")], Some("a.test")),
            Err(EgressError::Transport {
                host: "a.test".into(),
                detail: format!("reset while reading /{secret}"),
            }),
        ),
        (
            Request::Smtp {
                scheme: "smtp",
                host: "relay.test".into(),
                port: 587,
                addresses: vec!["10.0.0.5".into()],
                recipients: vec![format!("{secret}@example.org")],
                message_id: Some(format!("<{secret}@example.org>")),
            },
            Ok(()),
        ),
    ];
    for (request, result) in cases {
        let decision = EgressDecision::of(request, &result, Some("allow[0]:a.test".into()), |d| d);
        let shown = format!("{} {:?}", span_name(&decision), span_attributes(&decision));
        assert!(!shown.contains("secret"), "{shown}");
        assert!(!shown.contains("127.0.0.1"), "{shown}");
        assert!(!shown.contains("10.0.0.5"), "{shown}");
    }
}

#[test]
fn a_refusal_is_never_shown_as_a_request_that_went_out() {
    let refused = EgressDecision::of(
        http(
            &["http://a.test/start", "http://evil.test/x"],
            Some("evil.test"),
        ),
        &Err::<(), _>(
            BlockReason::UnlistedHost {
                host: "evil.test".into(),
            }
            .into(),
        ),
        None,
        |d| d,
    );
    assert_eq!(span_name(&refused), "egress evil.test");
    assert_eq!(span_kind(&refused), SpanKind::Internal);
    let attributes = span_attributes(&refused);
    assert_eq!(
        value(&attributes, names::EGRESS_ALLOWED).as_deref(),
        Some("false")
    );
    assert_eq!(
        value(&attributes, names::EGRESS_BLOCK).as_deref(),
        Some("unlisted_host")
    );
    assert_eq!(
        value(&attributes, names::EGRESS_RULE).as_deref(),
        Some("unlisted_host")
    );
    assert_eq!(
        value(&attributes, names::ERROR_TYPE).as_deref(),
        Some("unlisted_host")
    );
    assert_eq!(
        value(&attributes, names::EGRESS_HOPS).as_deref(),
        Some("[\"a.test\",\"evil.test\"]")
    );
}

#[test]
fn a_failure_after_the_request_went_out_is_a_client_error_without_a_block() {
    let cases = [
        (
            EgressError::Status {
                host: "a.test".into(),
                status: 503,
            },
            "http_status",
        ),
        (
            EgressError::Transport {
                host: "a.test".into(),
                detail: "reset".into(),
            },
            "transport_failed",
        ),
    ];
    for (error, kind) in cases {
        let decision = EgressDecision::of(
            http(&["http://a.test/"], Some("a.test")),
            &Err::<(), _>(error),
            Some("allow[0]:a.test".into()),
            |d| d,
        );
        assert_eq!(span_kind(&decision), SpanKind::Client, "{kind}");
        let attributes = span_attributes(&decision);
        assert_eq!(value(&attributes, names::EGRESS_BLOCK), None, "{kind}");
        assert_eq!(
            value(&attributes, names::EGRESS_RULE).as_deref(),
            Some("allow[0]:a.test")
        );
        assert_eq!(value(&attributes, names::ERROR_TYPE).as_deref(), Some(kind));
        assert_eq!(error_type(&decision), Some(kind));
    }
}

#[test]
fn a_url_without_a_host_still_names_its_span() {
    let decision = EgressDecision::of(
        http(&["no scheme"], None),
        &Err::<(), _>(
            BlockReason::InvalidUrl {
                why: "no scheme".into(),
            }
            .into(),
        ),
        None,
        |d| d,
    );
    assert_eq!(span_name(&decision), "egress");
    assert_eq!(
        value(&span_attributes(&decision), names::EGRESS_HOPS).as_deref(),
        Some("[]")
    );
}
