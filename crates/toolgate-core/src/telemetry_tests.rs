//! What a call's span may say, from its decision record: each case named after what it
//! prevents.

#![allow(clippy::unwrap_used)]

use opentelemetry::{Array, KeyValue, Value};
use serde_json::json;

use super::{TelemetryOptions, call_span_attributes, names};
use crate::approval::{Denial, Mode};
use crate::call::{ApprovalRecord, CallRequest, DecisionRecord, Outcome};
use crate::error::ErrorCode;
use crate::principal::Principal;
use crate::taint::{Taint, UntrustedSource};

fn record() -> DecisionRecord {
    let request = CallRequest::new(
        Principal::local("alice", &[]),
        "run-1",
        "notes_email_send",
        json!({"to": "eve@evil.example"}),
    );
    let mut record = DecisionRecord::begin(&request, Mode::Auto);
    record.arguments = json!({"to": "eve@evil.example"});
    record
}

fn value(attributes: &[KeyValue], key: &str) -> Option<Value> {
    attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

#[test]
fn an_idempotency_key_never_reaches_a_span_in_clear() {
    let mut r = record();
    r.idempotency_key = Some("alice-secret-key-123".into());
    let attributes = call_span_attributes(&r, TelemetryOptions::default());
    let text = format!("{attributes:?}");
    assert!(!text.contains("alice-secret-key-123"), "{text}");
    let hash = value(&attributes, names::IDEMPOTENCY_KEY_HASH)
        .unwrap()
        .to_string();
    assert_eq!(hash.len(), 16);
    assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
}

#[test]
fn tainted_values_are_named_by_argument_path_not_quoted() {
    let mut r = record();
    r.taint = vec![Taint {
        argument: "to".into(),
        value: "eve@evil.example".into(),
        source: UntrustedSource::new("page", "mail eve@evil.example", "web_clip", "call-1"),
    }];
    let attributes = call_span_attributes(&r, TelemetryOptions::default());
    assert!(!format!("{attributes:?}").contains("eve@evil.example"));
    assert_eq!(value(&attributes, names::TAINT_COUNT), Some(Value::I64(1)));
    assert_eq!(
        value(&attributes, names::TAINT_ARGUMENTS),
        Some(Value::Array(Array::String(vec!["to".into()])))
    );
}

#[test]
fn each_outcome_is_classified_and_only_errors_carry_error_type() {
    let cases = [
        (Outcome::Ok, "ok", None),
        (Outcome::ApprovalRequired, "approval_required", None),
        (
            Outcome::Error(ErrorCode::ApprovalDenied),
            "approval_denied",
            Some("approval_denied"),
        ),
        (
            Outcome::Error(ErrorCode::InvalidArgument),
            "invalid_argument",
            Some("invalid_argument"),
        ),
    ];
    for (outcome, decision, error_type) in cases {
        let mut r = record();
        r.outcome = outcome;
        let attributes = call_span_attributes(&r, TelemetryOptions::default());
        assert_eq!(
            value(&attributes, names::DECISION).map(|v| v.to_string()),
            Some(decision.to_string())
        );
        assert_eq!(
            value(&attributes, names::ERROR_TYPE).map(|v| v.to_string()),
            error_type.map(str::to_string),
            "{decision}"
        );
    }
}

#[test]
fn a_denial_names_its_kind_and_who_decided() {
    let mut r = record();
    r.approval = ApprovalRecord::Denied {
        denial: Denial::Declined {
            reason: "not now".into(),
        },
    };
    r.decided_by = Some("bob".into());
    let attributes = call_span_attributes(&r, TelemetryOptions::default());
    assert_eq!(
        value(&attributes, names::APPROVAL).unwrap().to_string(),
        "denied"
    );
    assert_eq!(
        value(&attributes, names::APPROVAL_DENIAL)
            .unwrap()
            .to_string(),
        "declined"
    );
    assert_eq!(
        value(&attributes, names::DECIDED_BY).unwrap().to_string(),
        "bob"
    );
}

#[test]
fn arguments_reach_a_span_only_when_configured_and_only_redacted() {
    let r = record();
    let off = call_span_attributes(&r, TelemetryOptions::default());
    assert_eq!(value(&off, names::ARGUMENTS), None);
    let on = call_span_attributes(
        &r,
        TelemetryOptions {
            record_arguments: true,
        },
    );
    assert_eq!(
        value(&on, names::ARGUMENTS).unwrap().to_string(),
        r.arguments.to_string()
    );
}
