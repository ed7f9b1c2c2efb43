//! The audit table against a real PostgreSQL server of the test's own: every decision the
//! dispatcher records reaches `decisions` once, in order, including the ones made while the
//! database was down (they wait, and are written when it returns).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolgate_core::trace::TraceSink;
use toolgate_core::{
    CallRequest, Dispatcher, Effect, Principal, Registry, Risk, ToolBuilder, ToolOutput,
};
use toolgate_store::postgres::audit::PgAudit;
use toolgate_store::postgres::cluster::TempCluster;
use toolgate_store::postgres::{PgSettings, PgStore};

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// The text to echo.
    text: String,
}

fn echo() -> toolgate_core::Tool {
    ToolBuilder::<EchoArgs>::new("demo_echo", 2)
        .describe(
            "Echoes a text.",
            "you want a text back.",
            Some("you want nothing back; call nothing"),
            "the text.",
        )
        .example("echo", json!({"text": "hi"}))
        .policy(Risk::Low, Effect::Read, "It only echoes.")
        .read(|_ctx, args: EchoArgs| async move { Ok(ToolOutput::new(json!({"text": args.text}))) })
        .unwrap()
}

async fn audited(store: &PgStore) -> Vec<(String, String, String)> {
    let client = store.client().await.unwrap();
    client
        .query(
            "SELECT coalesce(record->'arguments'->>'text', ''), outcome, approval FROM decisions ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_made_while_the_database_is_down_are_written_once_it_returns() {
    let cluster = TempCluster::start().unwrap();
    let settings = PgSettings {
        connect_timeout: Duration::from_secs(1),
        wait_timeout: Duration::from_secs(1),
        ..PgSettings::default()
    };
    let store = PgStore::connect(&cluster.url(), settings).await.unwrap();
    let audit = PgAudit::start(store.clone(), "test/1".into());
    let sink: Arc<dyn TraceSink> = Arc::new(audit.clone());
    let dispatcher = Dispatcher::new(Arc::new(Registry::new([echo()]).unwrap()))
        .unwrap()
        .with_trace(sink);
    let principal = Principal::local("alice", &[]);
    let call = |text: &str| {
        CallRequest::new(
            principal.clone(),
            "run-1",
            "demo_echo",
            json!({"text": text}),
        )
    };

    assert!(!dispatcher.call(call("before")).await.is_error());
    audit.flush().await;
    assert_eq!(audited(&store).await.len(), 1);
    // Which catalogue decided: the dispatcher's, in its own column.
    let digest: Option<String> = store
        .client()
        .await
        .unwrap()
        .query_one("SELECT catalogue_digest FROM decisions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(digest.as_deref(), Some(dispatcher.registry().digest()));

    cluster.stop().unwrap();
    // Calls go on while the database is down: the audit waits, the calls do not.
    assert!(!dispatcher.call(call("during 1")).await.is_error());
    assert!(!dispatcher.call(call("during 2")).await.is_error());
    let refused = dispatcher
        .call(CallRequest::new(
            principal.clone(),
            "run-1",
            "demo_echo",
            json!({}),
        ))
        .await;
    assert!(refused.is_error());
    cluster.restart().unwrap();
    tokio::time::timeout(Duration::from_secs(60), audit.flush())
        .await
        .expect("the queue is written once the database is back");

    let rows = audited(&store).await;
    let texts: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        texts,
        ["before", "during 1", "during 2", ""],
        "in order, once each"
    );
    assert_eq!(
        rows[3].1, "invalid_argument",
        "the refused call is audited too"
    );
    assert!(rows.iter().all(|r| r.2 == "not_needed"), "{rows:?}");
}
