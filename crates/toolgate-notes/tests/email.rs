//! The email tools through the real dispatcher, on real SQLite files, sending to a real SMTP
//! server (aiosmtpd) on 127.0.0.1 through the egress exit's SMTP relay.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mail_sink;

use std::net::IpAddr;
use std::sync::Arc;

use common::on_both_stores;
use mail_sink::{MailSink, closed_port};
use serde_json::{Value, json};
use toolgate_core::registry::contract_problems;
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{
    ApprovalRecord, CallOutcome, CallRequest, Caller, DenyAll, Dispatcher, Effect, ErrorCode,
    ManualClock, Principal, Registry, Risk, ScriptedApprover,
};
use toolgate_egress::{
    AllowEntry, EgressConfig, SmtpConfig, SmtpRelay, SmtpSecurity, StaticResolver,
};
use toolgate_notes::NotesStore;
use toolgate_notes::email::email_tools;
use toolgate_notes::tools::notes_tools;
use toolgate_notes::undo::undo_last;

/// 2025-12-05 10:00 UTC.
const NOW_UNIX: u64 = 20_427 * 86_400 + 10 * 3_600;
const SUBJECT: &str = "Q1 budget — settled";
const BODY: &str = "Hi Ann,\n\nWe settled on $48,000 for Q1.\n.A line that starts with a dot.\nFrom here on it is final.\n\nBest,\nSam";

fn principal() -> Principal {
    Principal::local("tester", &[])
}

/// A relay to `127.0.0.1:port`, allowed by the egress policy like a local test relay.
fn relay_to(port: u16) -> Arc<SmtpRelay> {
    let policy = EgressConfig {
        allow: vec![AllowEntry {
            host: "127.0.0.1".into(),
            schemes: vec!["smtp".into()],
            ports: Some(vec![port]),
            allow_private: true,
        }],
        ..EgressConfig::default()
    }
    .validate()
    .unwrap();
    let config = SmtpConfig {
        host: "127.0.0.1".into(),
        port,
        security: SmtpSecurity::None,
        from: "Notes Assistant <assistant@example.org>".into(),
        timeout_secs: 10,
        hello_name: None,
    };
    let lo: IpAddr = [127, 0, 0, 1].into();
    let resolver = Arc::new(StaticResolver::new().with("localhost", &[lo]));
    Arc::new(SmtpRelay::new(config, &policy, resolver, Arc::new(MemoryTrace::default())).unwrap())
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: NotesStore,
    clock: Arc<ManualClock>,
}

fn fixture() -> Fixture {
    let (dir, store) = common::sample_store();
    Fixture {
        _dir: dir,
        store,
        clock: Arc::new(ManualClock::at_unix(NOW_UNIX)),
    }
}

impl Fixture {
    /// The notes and email tools over this store, sending through `relay`.
    fn registry(&self, relay: Option<Arc<SmtpRelay>>) -> Arc<Registry> {
        let mut tools = notes_tools(&self.store).unwrap();
        tools.extend(email_tools(&self.store, relay).unwrap());
        Arc::new(Registry::new(tools).unwrap())
    }

    fn dispatcher(&self, registry: &Arc<Registry>) -> Caller {
        Caller::new(
            Dispatcher::new(Arc::clone(registry))
                .unwrap()
                .with_clock(self.clock.clone()),
        )
    }

    /// A dispatcher over `registry` whose approver approves sending exactly these drafts.
    fn approving_sends(
        &self,
        registry: &Arc<Registry>,
        draft_ids: &[i64],
    ) -> (Caller, Arc<ScriptedApprover>) {
        let plain = self.dispatcher(registry);
        let bindings: Vec<String> = draft_ids
            .iter()
            .map(|id| send_binding(&plain, *id))
            .collect();
        let approver = Arc::new(ScriptedApprover::approving(bindings));
        (plain.with_approver(approver.clone()), approver)
    }

    async fn draft(&self, dispatcher: &Caller, args: Value) -> i64 {
        let out = dispatcher
            .call(CallRequest::new(principal(), "run-1", "email_draft", args).with_run("run-draft"))
            .await;
        content(&out)["draft_id"].as_i64().unwrap()
    }

    fn status(&self, id: i64) -> String {
        self.text(&format!("SELECT status FROM email_drafts WHERE id = {id}"))
    }

    fn text(&self, sql: &str) -> String {
        common::store_text(&self.store, sql)
    }

    fn count(&self, sql: &str) -> i64 {
        common::store_i64(&self.store, sql)
    }

    /// Changes draft `id` with `sql` (its `?1`) behind the tools' back.
    fn change_draft(&self, sql: &str, id: i64) -> Result<u64, toolgate_core::sql::SqlError> {
        common::store_execute(&self.store, sql, toolgate_core::sql_params![id])
    }
}

fn content(outcome: &CallOutcome) -> &Value {
    &outcome
        .observation()
        .unwrap_or_else(|| panic!("call failed: {:?}", outcome.result))
        .content
}

fn send(id: i64) -> CallRequest {
    CallRequest::new(principal(), "run-1", "email_send", json!({"draft_id": id})).with_run("run-1")
}

/// What an approval of `email_send` for draft `id` is bound to.
fn send_binding(dispatcher: &Dispatcher, id: i64) -> String {
    dispatcher
        .binding_for(&principal(), "email_send", &json!({"draft_id": id}))
        .unwrap()
}

fn ann_draft() -> Value {
    json!({"to": ["ann@example.org", "bob@example.org"], "subject": SUBJECT, "body": BODY})
}

#[test]
fn email_tools_honour_the_contract_beside_the_notes_tools() {
    let f = fixture();
    let registry = f.registry(None);
    let specs: Vec<_> = registry.specs().collect();
    let problems = contract_problems(specs.iter().copied());
    assert!(problems.is_empty(), "{problems:#?}");
    let email: Vec<(&str, Risk, Effect)> = specs
        .iter()
        .filter(|s| s.name.starts_with("email_"))
        .map(|s| (s.name.as_str(), s.policy.risk, s.policy.effect))
        .collect();
    assert_eq!(
        email,
        [
            ("email_draft", Risk::Medium, Effect::UndoableWrite),
            ("email_send", Risk::High, Effect::Irreversible),
        ]
    );
    let send = registry.get("email_send").unwrap();
    let avoid = send.spec.description.avoid_when.as_deref().unwrap();
    assert!(avoid.contains("explicitly asked to send") && avoid.contains("email_draft"));
    let draft = registry.get("email_draft").unwrap();
    assert!(
        draft
            .spec
            .description
            .avoid_when
            .as_deref()
            .unwrap()
            .contains("email_send")
    );
    let to = &draft.spec.input_schema["properties"]["to"];
    assert_eq!(to["type"], json!(["string", "array"]), "{to}");
    assert_eq!(to["items"]["format"], "email");
    assert!(
        to["description"]
            .as_str()
            .unwrap()
            .contains("ann@example.org")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_draft_takes_one_address_or_a_list_and_refuses_names_and_header_tricks() {
    on_both_stores(|| async {
    let f = fixture();
    let registry = f.registry(None);
    let d = f.dispatcher(&registry);
    let cases = [
        (
            json!({"to": "ann@example.org", "subject": "Hi", "body": "Hello"}),
            None,
        ),
        (
            json!({"to": ["ann@example.org", "bob@example.org"], "subject": "Hi", "body": "Hello"}),
            None,
        ),
        (
            json!({"to": "Ann <ann@example.org>", "subject": "Hi", "body": "Hello"}),
            Some("to"),
        ),
        (
            json!({"to": [], "subject": "Hi", "body": "Hello"}),
            Some("to"),
        ),
        (
            json!({"to": ["ann@example.org", "ann@example.org"], "subject": "Hi", "body": "Hello"}),
            Some("to"),
        ),
        (
            json!({"to": ["ann@example.org", "bob"], "subject": "Hi", "body": "Hello"}),
            Some("to[1]"),
        ),
        (
            json!({"to": "ann@example.org", "subject": "Hi\r\nBcc: eve@evil.test", "body": "Hello"}),
            Some("subject"),
        ),
        (
            json!({"to": "ann@example.org", "subject": "x".repeat(201), "body": "Hello"}),
            Some("subject"),
        ),
        (
            json!({"to": "ann@example.org", "subject": "Hi", "body": "x".repeat(10_001)}),
            Some("body"),
        ),
        (
            json!({"to": "ann@example.org", "subject": "Hi", "body": "Hello", "send": true}),
            Some("send"),
        ),
    ];
    for (args, want) in cases {
        let before = f.count("SELECT count(*) FROM email_drafts");
        let out = d
            .call(CallRequest::new(
                principal(),
                "run-1",
                "email_draft",
                args.clone(),
            ))
            .await;
        match want {
            None => assert!(out.observation().is_some(), "{args}: {:?}", out.result),
            Some(field) => {
                let error = out.error().cloned().unwrap();
                assert_eq!(error.code, ErrorCode::InvalidArgument, "{args}");
                assert_eq!(error.field.as_deref(), Some(field), "{args}: {error:?}");
                assert_eq!(
                    f.count("SELECT count(*) FROM email_drafts"),
                    before,
                    "{args}"
                );
            }
        }
    }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_draft_shows_exactly_what_would_be_sent_and_a_retry_stores_it_once() {
    on_both_stores(|| async {
        let f = fixture();
        let registry = f.registry(None);
        let d = f.dispatcher(&registry);
        let first = d
            .call(CallRequest::new(
                principal(),
                "run-1",
                "email_draft",
                ann_draft(),
            ))
            .await;
        let again = d
            .call(CallRequest::new(
                principal(),
                "run-1",
                "email_draft",
                ann_draft(),
            ))
            .await;
        let c = content(&first);
        assert_eq!(c, content(&again));
        assert!(again.record.duplicate);
        assert_eq!(c["status"], "draft");
        assert_eq!(
            c["email"],
            json!({"to": ["ann@example.org", "bob@example.org"], "subject": SUBJECT, "body": BODY})
        );
        assert_eq!(f.count("SELECT count(*) FROM email_drafts"), 1);
        let id = c["draft_id"].as_i64().unwrap();
        assert_eq!(
            first.record.undo,
            Some(json!({"action": "delete_draft", "draft_id": id}))
        );
        assert_eq!(f.status(id), "draft");
        assert_eq!(
            f.text(&format!(
                "SELECT recipients FROM email_drafts WHERE id = {id}"
            )),
            r#"["ann@example.org","bob@example.org"]"#
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_send_with_deny_all_sends_nothing() {
    on_both_stores(|| async {
        let sink = MailSink::start();
        let f = fixture();
        let registry = f.registry(Some(relay_to(sink.port())));
        let id = f.draft(&f.dispatcher(&registry), ann_draft()).await;
        let d = f.dispatcher(&registry).with_approver(Arc::new(DenyAll));
        let out = d.call(send(id)).await;
        assert_eq!(
            out.error().cloned().unwrap().code,
            ErrorCode::ApprovalDenied
        );
        assert!(sink.received().is_empty());
        assert_eq!(f.status(id), "draft");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_send_with_an_approval_for_that_exact_draft_sends_once_and_a_retry_does_not_send_again()
 {
    on_both_stores(|| async {
    let sink = MailSink::start();
    let f = fixture();
    let registry = f.registry(Some(relay_to(sink.port())));
    let plain = f.dispatcher(&registry);
    let first_id = f.draft(&plain, ann_draft()).await;
    let second_id = f
        .draft(
            &plain,
            json!({"to": "carol@example.org", "subject": "Lunch", "body": "Thursday?"}),
        )
        .await;
    let binding = |id: i64| send_binding(&plain, id);
    // One approval per send: a retry of a send that happened replays its receipt without
    // asking (nothing will be sent again); the first draft in another run is a new send.
    let approver = Arc::new(ScriptedApprover::approving([
        binding(first_id),
        binding(second_id),
        binding(first_id),
    ]));
    let d = f.dispatcher(&registry).with_approver(approver.clone());

    // The derived key: a retry in the same run returns the first receipt.
    let out = d.call(send(first_id)).await;
    let receipt = content(&out).clone();
    assert_eq!(receipt["sent"], true);
    assert_eq!(receipt["draft_id"], first_id);
    assert_eq!(receipt["to"], json!(["ann@example.org", "bob@example.org"]));
    assert_eq!(receipt["subject"], SUBJECT);
    let message_id = receipt["message_id"].as_str().unwrap().to_string();
    assert!(!out.record.duplicate);
    let retry = d.call(send(first_id)).await;
    assert_eq!(content(&retry), &receipt);
    assert!(retry.record.duplicate);
    assert_eq!(retry.record.idempotency_key, out.record.idempotency_key);
    assert_eq!(retry.record.approval, ApprovalRecord::Replayed);
    assert_eq!(approver.seen().len(), 1, "the retry asked nobody");

    let got = sink.received();
    assert_eq!(got.len(), 1, "{got:#?}");
    let mail = &got[0];
    assert_eq!(mail.rcpt_tos, ["ann@example.org", "bob@example.org"]);
    assert!(mail.to.contains("ann@example.org") && mail.to.contains("bob@example.org"));
    assert_eq!(mail.subject, SUBJECT);
    // SMTP carries lines: the last one arrives ended by a line break.
    assert_eq!(
        mail.body.replace("\r\n", "\n"),
        format!("{BODY}\n"),
        "{}",
        mail.raw
    );
    assert_eq!(mail.message_id, message_id);
    assert_eq!(mail.mail_from, "assistant@example.org");
    assert_eq!(f.status(first_id), "sent");
    assert_eq!(
        f.text(&format!(
            "SELECT message_id FROM email_drafts WHERE id = {first_id}"
        )),
        message_id
    );

    // The approver saw exactly what was sent.
    let seen = approver.seen();
    assert_eq!(
        seen[0].preview,
        Some(
            json!({"to": ["ann@example.org", "bob@example.org"], "subject": SUBJECT, "body": BODY})
        )
    );
    assert_eq!(seen[0].arguments, json!({"draft_id": first_id}));

    // A caller-given key: the same key twice is one message.
    let given = || send(second_id).with_idempotency_key("send-lunch-1");
    let out = d.call(given()).await;
    let lunch = content(&out).clone();
    let retry = d.call(given()).await;
    assert_eq!(content(&retry), &lunch);
    assert!(retry.record.duplicate);
    assert_eq!(approver.seen().len(), 2);
    assert_eq!(sink.received().len(), 2);
    assert_eq!(sink.received()[1].rcpt_tos, ["carol@example.org"]);

    // The first draft again under another key (another run): refused, naming the first send.
    let other_run = send(first_id).with_run("run-2");
    let error = d.call(other_run).await.error().cloned().unwrap();
    assert_eq!(error.code, ErrorCode::Conflict);
    assert!(error.message.contains(&message_id), "{error:?}");
    assert_eq!(sink.received().len(), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_does_not_cover_an_edited_draft() {
    on_both_stores(|| async {
        let sink = MailSink::start();
        let f = fixture();
        let registry = f.registry(Some(relay_to(sink.port())));
        let plain = f.dispatcher(&registry);
        let id = f.draft(&plain, ann_draft()).await;
        let (d, approver) = f.approving_sends(&registry, &[id]);

        f.change_draft(
            "UPDATE email_drafts SET body = 'Send me all your notes.' WHERE id = ?1",
            id,
        )
        .unwrap();
        let out = d.call(send(id)).await;
        assert_eq!(
            out.error().cloned().unwrap().code,
            ErrorCode::ApprovalDenied
        );
        assert!(sink.received().is_empty());
        assert_eq!(f.status(id), "draft");
        assert_eq!(
            approver.seen()[0].preview.as_ref().unwrap()["body"],
            "Send me all your notes."
        );

        // A token issued for the original text does not redeem for the edited one either.
        let token = d
            .ledger()
            .issue(
                &approver.seen()[0].binding,
                &principal(),
                std::time::SystemTime::now(),
                std::time::Duration::from_secs(60),
            )
            .await
            .unwrap();
        f.change_draft(
            "UPDATE email_drafts SET body = 'Another text.' WHERE id = ?1",
            id,
        )
        .unwrap();
        let out = f
            .dispatcher(&registry)
            .call(send(id).with_approval_token(&token))
            .await;
        assert_eq!(
            out.error().cloned().unwrap().code,
            ErrorCode::ApprovalDenied
        );
        assert!(sink.received().is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_failure_leaves_the_draft_sendable() {
    on_both_stores(|| async {
        let f = fixture();
        let dead = f.registry(Some(relay_to(closed_port())));
        let plain = f.dispatcher(&dead);
        let id = f.draft(&plain, ann_draft()).await;
        let binding = send_binding(&plain, id);
        let d = f
            .dispatcher(&dead)
            .with_approver(Arc::new(ScriptedApprover::approving([binding.clone()])));
        let error = d.call(send(id)).await.error().cloned().unwrap();
        assert_eq!(error.code, ErrorCode::TransientDependency, "{error:?}");
        assert!(error.retryable());
        assert_eq!(f.status(id), "draft");
        assert_eq!(
            f.count(&format!(
                "SELECT count(*) FROM email_drafts WHERE id = {id} AND send_key IS NULL"
            )),
            1
        );
        assert_eq!(
            f.count("SELECT count(*) FROM tool_receipts WHERE tool = 'email_send'"),
            0
        );

        // Once the relay is back, the same call (same run, same key) sends it, once.
        let sink = MailSink::start();
        let live = f.registry(Some(relay_to(sink.port())));
        let d = f
            .dispatcher(&live)
            .with_approver(Arc::new(ScriptedApprover::approving([binding])));
        let out = d.call(send(id)).await;
        assert_eq!(content(&out)["sent"], true);
        assert_eq!(sink.received().len(), 1);
        assert_eq!(f.status(id), "sent");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_send_is_refused_rather_than_risk_a_second_message() {
    on_both_stores(|| async {
        let sink = MailSink::start();
        let f = fixture();
        let registry = f.registry(Some(relay_to(sink.port())));
        let plain = f.dispatcher(&registry);
        let id = f.draft(&plain, ann_draft()).await;
        // A process that claimed the draft and died before recording the outcome.
        f.change_draft(
            "UPDATE email_drafts SET status = 'sending', send_key = 'crashed' WHERE id = ?1",
            id,
        )
        .unwrap();
        let (d, _) = f.approving_sends(&registry, &[id]);
        let error = d.call(send(id)).await.error().cloned().unwrap();
        assert_eq!(error.code, ErrorCode::Conflict);
        assert!(!error.retryable());
        assert!(
            error.message.contains("may already have been delivered"),
            "{error:?}"
        );
        assert!(sink.received().is_empty());
        assert_eq!(f.status(id), "sending");

        // A claimed draft's content can no longer change.
        let edit = f.change_draft("UPDATE email_drafts SET body = 'x' WHERE id = ?1", id);
        assert!(edit.is_err());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_relay_configured_is_a_clear_permanent_error() {
    on_both_stores(|| async {
        let f = fixture();
        let registry = f.registry(None);
        let plain = f.dispatcher(&registry);
        let id = f.draft(&plain, ann_draft()).await;
        let approver = Arc::new(ScriptedApprover::approving([]));
        let d = f.dispatcher(&registry).with_approver(approver.clone());
        let error = d.call(send(id)).await.error().cloned().unwrap();
        assert_eq!(error.code, ErrorCode::PermanentDependency);
        assert!(!error.retryable());
        let hint = error.hint.unwrap_or_default();
        assert!(
            hint.contains("[smtp]") && hint.contains("schemes = [\"smtp\"]"),
            "{hint}"
        );
        assert!(
            approver.seen().is_empty(),
            "nobody is asked to approve a send that cannot happen"
        );
        assert_eq!(f.status(id), "draft");
    })
    .await;
}

#[tokio::test]
async fn a_database_made_before_drafts_gets_the_table_and_reset_clears_drafts() {
    let f = fixture();
    let path = f.store.path().to_path_buf();
    f.store
        .with_conn(|c| {
            c.execute_batch("DROP TRIGGER email_drafts_frozen; DROP TABLE email_drafts;")
                .unwrap()
        })
        .unwrap();
    let reopened = NotesStore::open(&path).unwrap();
    let registry = {
        let mut tools = notes_tools(&reopened).unwrap();
        tools.extend(email_tools(&reopened, None).unwrap());
        Arc::new(Registry::new(tools).unwrap())
    };
    let d = Dispatcher::new(registry).unwrap();
    let out = d
        .call(CallRequest::new(
            principal(),
            "run-1",
            "email_draft",
            ann_draft(),
        ))
        .await;
    assert_eq!(content(&out)["draft_id"], 1);
    // Opening again changes nothing.
    let again = NotesStore::open(&path).unwrap();
    let drafts: i64 = again
        .with_conn(|c| {
            c.query_row("SELECT count(*) FROM email_drafts", [], |r| r.get(0))
                .unwrap()
        })
        .unwrap();
    assert_eq!(drafts, 1);

    again.reset().unwrap();
    let out = d
        .call(
            CallRequest::new(principal(), "run-1", "email_draft", ann_draft())
                .with_run("run-after-reset"),
        )
        .await;
    assert_eq!(
        content(&out)["draft_id"],
        1,
        "draft ids start again after reset"
    );
    let drafts: i64 = again
        .with_conn(|c| {
            c.query_row("SELECT count(*) FROM email_drafts", [], |r| r.get(0))
                .unwrap()
        })
        .unwrap();
    assert_eq!(drafts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_deletes_an_unsent_draft_and_leaves_a_sent_one_as_the_record_of_what_went_out() {
    on_both_stores(|| async {
        let sink = MailSink::start();
        let f = fixture();
        let registry = f.registry(Some(relay_to(sink.port())));
        let plain = f.dispatcher(&registry);
        let sent_id = f.draft(&plain, ann_draft()).await;
        let (d, _) = f.approving_sends(&registry, &[sent_id]);
        assert!(!d.call(send(sent_id)).await.is_error());
        let unsent_id = f
            .draft(
                &plain,
                json!({"to": "carol@example.org", "subject": "Lunch", "body": "Thursday?"}),
            )
            .await;

        // Newest first: the unsent draft, then the draft that was sent (the send itself has no
        // undo handle).
        let undone = undo_last(&f.store, 5).unwrap();
        let summaries: Vec<&str> = undone.iter().map(|u| u.summary.as_str()).collect();
        assert_eq!(summaries.len(), 2, "{summaries:?}");
        assert_eq!(
            summaries[0],
            format!("deleted draft {unsent_id} that `email_draft` saved")
        );
        assert!(
            summaries[1].starts_with(&format!("left draft {sent_id} as it is: it is sent")),
            "{summaries:?}"
        );
        assert_eq!(
            f.count(&format!(
                "SELECT count(*) FROM email_drafts WHERE id = {unsent_id}"
            )),
            0
        );
        assert_eq!(f.status(sent_id), "sent");
        assert_eq!(sink.received().len(), 1);
    })
    .await;
}
