//! Two versions of a tool served side by side during the earlier one's deprecation window: the
//! listing and a model see only the current one; a caller that pins the earlier version reaches
//! it until its window closes, then is told which version to call; a registry refuses an
//! earlier version that is not deprecated. Each test is named after what it prevents.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::registry::{RegistryError, still_served};
use toolgate_core::spec::{Deprecation, Milestone};
use toolgate_core::{
    CallOutcome, CallRequest, CallResult, Dispatcher, Effect, ErrorCode, ManualClock, Principal,
    Registry, Risk, Tool, ToolBuilder, ToolOutput,
};

/// 2026-11-29 09:00 UTC.
const NOW_UNIX: u64 = 20_786 * 86_400 + 9 * 3_600;

/// `books_search` at `version`: v2 takes `author`, v3 takes `query`; each says which answered.
fn search(version: u32, deprecated: Option<(Milestone, Milestone)>) -> Tool {
    let field = if version == 2 { "author" } else { "query" };
    let builder = ToolBuilder::<Value>::from_schema(
        "books_search",
        version,
        json!({"type": "object", "additionalProperties": false, "required": [field],
               "properties": {field: {"type": "string", "maxLength": 100}}}),
    )
    .describe("Searches books.", "you need books.", None, "the books.")
    .example("search", json!({field: "Collins"}))
    .policy(Risk::Low, Effect::Read, "It only reads.");
    let builder = match deprecated {
        Some((since, remove_after)) => builder.deprecated(since, remove_after),
        None => builder,
    };
    builder
        .read(move |_ctx, _args: Value| async move {
            Ok(ToolOutput::new(json!({"answered_by_version": version})))
        })
        .unwrap()
}

fn window_until(day: &str) -> Option<(Milestone, Milestone)> {
    Some((Milestone::Version(3), Milestone::Date(day.into())))
}

fn dispatcher(clock: Arc<ManualClock>) -> Dispatcher {
    let registry = Registry::new([search(3, None), search(2, window_until("2026-12-31"))]).unwrap();
    Dispatcher::new(Arc::new(registry))
        .unwrap()
        .with_clock(clock)
}

async fn call(d: &Dispatcher, version: Option<u32>, args: Value) -> CallOutcome {
    let mut request = CallRequest::new(Principal::local("alice", &[]), "run", "books_search", args);
    request.version = version;
    d.call(request).await
}

fn answered_by(out: &CallOutcome) -> Option<u64> {
    out.observation()?.content["answered_by_version"].as_u64()
}

fn error(out: &CallOutcome) -> (ErrorCode, String) {
    match &out.result {
        CallResult::Failed(e) => (e.code, out.result.model_text(out.error_style)),
        other => panic!("expected an error: {other:?}"),
    }
}

#[tokio::test]
async fn a_host_written_against_the_earlier_version_keeps_working_inside_its_window() {
    let clock = Arc::new(ManualClock::at_unix(NOW_UNIX));
    let d = dispatcher(clock.clone());
    let specs: Vec<(String, u32)> = d
        .registry()
        .specs()
        .map(|s| (s.name.clone(), s.version))
        .collect();
    assert_eq!(
        specs,
        [("books_search".to_string(), 3)],
        "only the current one is listed"
    );
    assert_eq!(d.registry().versions("books_search"), [3, 2]);

    let current = call(&d, None, json!({"query": "Collins"})).await;
    assert_eq!(answered_by(&current), Some(3));
    let pinned = call(&d, Some(2), json!({"author": "Collins"})).await;
    assert_eq!(answered_by(&pinned), Some(2));
    assert_eq!(
        pinned.record.tool_version,
        Some(2),
        "the record names the version that ran"
    );
    // The earlier version validates with its own schema.
    let (code, _) = error(&call(&d, Some(2), json!({"query": "Collins"})).await);
    assert_eq!(code, ErrorCode::InvalidArgument);
}

#[tokio::test]
async fn an_earlier_version_past_its_window_is_refused_naming_the_current_one() {
    let clock = Arc::new(ManualClock::at_unix(NOW_UNIX));
    let d = dispatcher(clock.clone());
    // 2026-11-29 + 33 days = 2027-01-01, the day after the window's last.
    clock.advance(Duration::from_secs(33 * 86_400));
    let (code, text) = error(&call(&d, Some(2), json!({"author": "Collins"})).await);
    assert_eq!(code, ErrorCode::NotFound);
    assert!(
        text.contains("no longer served") && text.contains("version 3"),
        "{text}"
    );
    assert_eq!(
        answered_by(&call(&d, None, json!({"query": "Collins"})).await),
        Some(3)
    );
}

#[tokio::test]
async fn a_version_never_served_is_refused_naming_those_that_are() {
    let d = dispatcher(Arc::new(ManualClock::at_unix(NOW_UNIX)));
    let (code, text) = error(&call(&d, Some(1), json!({"author": "Collins"})).await);
    assert_eq!(code, ErrorCode::NotFound);
    assert!(text.contains("served: 3, 2"), "{text}");
}

#[test]
fn two_versions_without_a_deprecation_or_one_version_twice_are_refused() {
    let err = Registry::new([search(3, None), search(2, None)]).unwrap_err();
    assert_eq!(
        err,
        RegistryError::EarlierNotDeprecated {
            name: "books_search".into(),
            current: 3,
            earlier: 2
        }
    );
    let err = Registry::new([search(3, None), search(3, None)]).unwrap_err();
    assert_eq!(err, RegistryError::Duplicate("books_search".into()));
    let err = Registry::new([
        search(3, None),
        search(2, window_until("2026-12-31")),
        search(2, window_until("2026-12-31")),
    ])
    .unwrap_err();
    assert_eq!(err, RegistryError::Duplicate("books_search".into()));
}

#[test]
fn a_window_closes_after_its_last_day_or_once_a_later_version_than_its_last_ships() {
    let until = |m: Milestone| Deprecation {
        deprecated_since: Milestone::Version(3),
        remove_after: m,
    };
    let cases = [
        (
            "the last day is inside",
            until(Milestone::Date("2026-12-31".into())),
            3,
            "2026-12-31",
            true,
        ),
        (
            "the day after is outside",
            until(Milestone::Date("2026-12-31".into())),
            3,
            "2027-01-01",
            false,
        ),
        (
            "served while the current version is its last",
            until(Milestone::Version(4)),
            4,
            "2030-01-01",
            true,
        ),
        (
            "refused once a later version ships",
            until(Milestone::Version(4)),
            5,
            "2026-01-01",
            false,
        ),
    ];
    for (what, deprecation, current, today, served) in cases {
        assert_eq!(still_served(&deprecation, current, today), served, "{what}");
    }
}
