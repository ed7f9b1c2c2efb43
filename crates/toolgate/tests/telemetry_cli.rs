//! `[telemetry]` from the command line: a value that cannot work is refused with what to write
//! instead, before anything is opened or created; a file found in the current folder that
//! names a collector is refused until trusted (a stranger's collector would receive every
//! call's span). A served call waiting on its host's person is counted as an open ticket at
//! the next metric export, to a real OTLP receiver, until the host answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{team, text, toolgate};
use serde_json::json;
use toolgate_core::telemetry::names;
use toolgate_otlp_receiver::{
    AttributeValue, PointValue, ReceivedMetric, Receiver, ReceiverOptions, Until,
};
use toolgate_telemetry::config::MIN_METRICS_INTERVAL_MS;

#[test]
fn a_bad_telemetry_section_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    const COLLECTOR: &str = "otlp_endpoint = \"http://127.0.0.1:4318\"\n";
    let cases = [
        (format!("{COLLECTOR}sampling_ratio = 1.5"), "sampling_ratio"),
        (
            format!("{COLLECTOR}protocol = \"carrier-pigeon\""),
            "protocol",
        ),
        (format!("{COLLECTOR}queue_capacity = 0"), "queue_capacity"),
        (
            "otlp_endpoint = \"ftp://collector.example\"".into(),
            "otlp_endpoint",
        ),
        (format!("{COLLECTOR}color = \"blue\""), "color"),
    ];
    for (line, named) in cases {
        let config = dir.path().join("toolgate.toml");
        std::fs::write(&config, format!("[telemetry]\n{line}\n")).unwrap();
        let db = dir.path().join("notes.sqlite");
        let out = toolgate(
            &[
                "--config",
                config.to_str().unwrap(),
                "serve",
                "--http",
                "127.0.0.1:0",
                "--toolset",
                "notes",
                "--db",
                db.to_str().unwrap(),
            ],
            dir.path(),
        );
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{line}: {stderr}");
        assert!(
            stderr.contains(named),
            "{line}: the error names {named}: {stderr}"
        );
        assert!(!db.exists(), "{line}: nothing was created");
    }
}

#[test]
fn a_found_file_naming_a_collector_needs_trust() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("toolgate.toml"),
        "[telemetry]\notlp_endpoint = \"http://collector.evil.example:4318\"\n",
    )
    .unwrap();
    let out = toolgate(&["serve", "--stdio", "--toolset", "notes"], dir.path());
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("[telemetry] otlp_endpoint"), "{stderr}");
    assert!(stderr.contains("toolgate config trust"), "{stderr}");
}

/// Whether the newest `toolgate.approval.tickets.open` export says `host` host tickets and no
/// inbox ticket.
fn tickets_open(host: i64) -> Until<ReceivedMetric> {
    Until::condition(
        format!("{host} host tickets open"),
        move |metrics: &[ReceivedMetric]| {
            let Some(newest) = metrics
                .iter()
                .rev()
                .find(|m| m.name == names::METRIC_APPROVAL_TICKETS_OPEN)
            else {
                return false;
            };
            let point = |kind: &str| {
                newest
                    .data_points
                    .iter()
                    .find(|p| {
                        p.attributes.get(names::APPROVAL_TICKET_KIND)
                            == Some(&AttributeValue::from(kind))
                    })
                    .map(|p| p.value.clone())
            };
            point("host") == Some(PointValue::Int(host))
                && point("inbox") == Some(PointValue::Int(0))
        },
    )
}

/// `toolgate serve` reports the approval tickets waiting for a person: a 2026-07-28 call that
/// needs an approval leaves a ticket for its host to answer, counted at the next metric export;
/// the host's answer (here, its person declines) takes it out of the count.
#[test]
fn a_ticket_waiting_for_the_hosts_person_is_counted_until_answered() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let config = dir.path().join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[telemetry]\notlp_endpoint = \"{}\"\nmetrics_interval_ms = {MIN_METRICS_INTERVAL_MS}\n",
            receiver.http_endpoint()
        ),
    )
    .unwrap();
    let db = dir.path().join("notes.sqlite");
    let server = team::serve_with(
        dir.path(),
        Some(&config),
        &["--toolset", "notes", "--db", db.to_str().unwrap()],
    );
    let wait = Duration::from_secs(30);
    receiver
        .wait_for_metrics_blocking(tickets_open(0), wait)
        .unwrap();

    let delete = json!({"note_id": 1});
    let asked = team::modern_call(
        &server.address,
        "notes_delete",
        &delete,
        json!({}),
        json!({}),
    )
    .unwrap()
    .message()
    .unwrap();
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    receiver
        .wait_for_metrics_blocking(tickets_open(1), wait)
        .unwrap();

    let declined = json!({
        "requestState": asked["result"]["requestState"],
        "inputResponses": {"approval": {"action": "decline"}},
    });
    let answered = team::modern_call(
        &server.address,
        "notes_delete",
        &delete,
        declined,
        json!({}),
    )
    .unwrap()
    .message()
    .unwrap();
    assert_eq!(answered["result"]["isError"], json!(true), "{answered}");
    receiver
        .wait_for_metrics_blocking(tickets_open(0), wait)
        .unwrap();
}

/// A gateway reports each imported server's state from the start: `toolgate.upstream.state`
/// says `closed` (reachable) for the upstream before any call has gone to it.
#[test]
fn a_gateway_reports_its_upstreams_state_before_any_call() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(ReceiverOptions::default()).unwrap();
    let (up_dir, gw_dir) = (dir.path().join("up"), dir.path().join("gw"));
    std::fs::create_dir_all(&up_dir).unwrap();
    std::fs::create_dir_all(&gw_dir).unwrap();
    let db = up_dir.join("notes.sqlite");
    let up = team::serve_with(
        &up_dir,
        None,
        &["--toolset", "notes", "--db", db.to_str().unwrap()],
    );
    let port = up.address.rsplit(':').next().unwrap();
    let config = gw_dir.join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[telemetry]\notlp_endpoint = \"{}\"\nmetrics_interval_ms = {MIN_METRICS_INTERVAL_MS}\n\n\
             [[egress.allow]]\nhost = \"127.0.0.1\"\nschemes = [\"http\"]\nports = [{port}]\n\
             allow_private = true\n\n[mcp.servers.up]\nrisk = \"low\"\n",
            receiver.http_endpoint()
        ),
    )
    .unwrap();
    let servers = team::servers_json(&gw_dir, &up.address);
    let _gateway = team::serve_with(
        &gw_dir,
        Some(&config),
        &["--no-toolset", "--mcp-config", servers.to_str().unwrap()],
    );
    let closed = Until::condition(
        "the upstream reported closed",
        |metrics: &[ReceivedMetric]| {
            metrics
                .iter()
                .filter(|m| m.name == names::METRIC_UPSTREAM_STATE)
                .flat_map(|m| &m.data_points)
                .any(|p| {
                    p.attributes.get(names::UPSTREAM) == Some(&AttributeValue::from("up"))
                        && p.attributes.get(names::UPSTREAM_STATE)
                            == Some(&AttributeValue::from("closed"))
                        && p.value == PointValue::Int(1)
                })
        },
    );
    receiver
        .wait_for_metrics_blocking(closed, Duration::from_secs(30))
        .unwrap();
    // No call was made: the gateway served nothing.
    assert!(
        receiver
            .spans()
            .iter()
            .all(|s| !s.name.contains("tools/call"))
    );
}
