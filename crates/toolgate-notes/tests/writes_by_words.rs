//! The `notes-v4` writes against the sample notebook, through the real dispatcher: each test is
//! named after the write failure of the embedded model it prevents
//! (evals/runs/notes-v2-dev-sampled-embedded: tagged note 3 or notes 1-7, made to-dos from
//! "meeting 100", sent "draft 123", each an id guessed without a search).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{Fixture, content, fixture_in, on_both_stores};
use serde_json::{Value, json};
use toolgate_core::{
    CallRequest, Caller, Dispatcher, ErrorCode, ManualClock, Principal, Registry, ToolError,
};
use toolgate_notes::Design;
use toolgate_notes::email::{EmailDesign, designed_email_tools};
use toolgate_notes::tools::designed_notes_tools;

fn refusal(out: &toolgate_core::CallOutcome) -> ToolError {
    out.error()
        .cloned()
        .unwrap_or_else(|| panic!("expected a refusal, got {:?}", out.result))
}

/// Every note's tags, by id: what a refused write must leave as it was.
fn all_tags(f: &Fixture) -> BTreeMap<i64, String> {
    f.store
        .with_sql(|c| {
            Ok(c.query("SELECT id, tags FROM notes ORDER BY id", &[])?
                .iter()
                .map(|r| (r.i64(0).unwrap(), r.text(1).unwrap()))
                .collect())
        })
        .unwrap()
}

fn tags_of(f: &Fixture, id: i64) -> String {
    f.sql_text(&format!("SELECT tags FROM notes WHERE id = {id}"))
}

fn todos_made(f: &Fixture) -> Vec<(i64, i64)> {
    f.store
        .with_sql(|c| {
            Ok(c.query(
                "SELECT meeting_id, count(*) FROM notes WHERE meeting_id IS NOT NULL GROUP BY meeting_id ORDER BY meeting_id",
                &[],
            )?
            .iter()
            .map(|r| (r.i64(0).unwrap(), r.i64(1).unwrap()))
            .collect())
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notes_named_by_their_titles_are_tagged_instead_of_guessed_ids() {
    on_both_stores(|| async {
    let f = fixture_in(Design::V4);
    let plan = f.id_of("Q1 hiring plan");
    let priya = f.id_of("1:1 with Priya");
    let before = all_tags(&f);
    let out = f
        .call(
            "notes_tag",
            json!({"notes": ["my Q1 hiring plan note", "the notes of my 1:1 with Priya"], "tags": ["headcount"]}),
        )
        .await;
    let c = content(&out);
    assert_eq!(c["updated"], 2, "{c}");
    assert!(tags_of(&f, plan).split(',').any(|t| t == "headcount"));
    assert!(tags_of(&f, priya).split(',').any(|t| t == "headcount"));
    let after = all_tags(&f);
    let changed: Vec<i64> = before
        .keys()
        .filter(|id| before[id] != after[id])
        .copied()
        .collect();
    assert_eq!(changed, [priya, plan]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_names_all_the_design_team_meetings_and_no_other_note() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V4);
        let before = all_tags(&f);
        let out = f
            .call(
                "notes_tag",
                json!({"notes": ["every design team meeting note"], "tags": ["q1-design"]}),
            )
            .await;
        assert_eq!(content(&out)["updated"], 3, "{:?}", out.result);
        let after = all_tags(&f);
        let changed: Vec<i64> = before
            .keys()
            .filter(|id| before[id] != after[id])
            .copied()
            .collect();
        let expected: Vec<i64> = [
            "Design team kickoff",
            "Design team review",
            "Design team sync",
        ]
        .iter()
        .map(|t| f.id_of(t))
        .collect();
        assert_eq!(changed, expected);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_title_matching_two_notes_is_refused_with_both_listed_and_the_call_for_all() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V4);
        let before = all_tags(&f);
        let out = f
            .call(
                "notes_tag",
                json!({"notes": ["design team budget meeting"], "tags": ["q1-design"]}),
            )
            .await;
        let err = refusal(&out);
        assert_eq!(err.code, ErrorCode::InvalidArgument);
        let review = f.id_of("Design team review");
        let settled = f.id_of("Design team sync");
        let listed = err.expected.clone().unwrap();
        assert!(
            listed.contains("Design team review — two budget proposals"),
            "{listed}"
        );
        assert!(
            listed.contains("Design team sync — Q1 budget settled"),
            "{listed}"
        );
        // The whole corrected call, newest first, keeping the tags.
        assert_eq!(
            err.example,
            Some(
                json!({"notes": [settled.to_string(), review.to_string()], "tags": ["q1-design"]})
            )
        );
        assert_eq!(all_tags(&f), before, "a refused call changes nothing");
        // Making the example call tags exactly those two.
        let again = f.call("notes_tag", err.example.unwrap()).await;
        assert_eq!(content(&again)["updated"], 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guessed_id_is_refused_with_the_notes_the_calls_other_words_fit_and_the_call_to_make() {
    on_both_stores(|| async {
    let f = fixture_in(Design::V4);
    let plan = f.id_of("Q1 hiring plan");
    let before = all_tags(&f);
    let out = f
        .call(
            "notes_tag",
            json!({"notes": ["456"], "tags": ["headcount"], "remove": ["q1 hiring plan"]}),
        )
        .await;
    let err = refusal(&out);
    assert_eq!(err.code, ErrorCode::NotFound);
    assert!(
        err.message.contains("no note has id 456"),
        "{}",
        err.message
    );
    assert_eq!(
        err.example,
        Some(
            json!({"notes": [plan.to_string()], "tags": ["headcount"], "remove": ["q1 hiring plan"]})
        )
    );
    assert!(
        err.expected
            .unwrap()
            .starts_with(&format!("one of: {plan} \"Q1 hiring plan\""))
    );
    assert_eq!(all_tags(&f), before);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_still_names_its_note() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V4);
        let out = f
            .call(
                "notes_tag",
                json!({"notes": ["note 12", "14"], "tags": ["travel"]}),
            )
            .await;
        let ids: Vec<i64> = content(&out)["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_i64().unwrap())
            .collect();
        assert_eq!(ids, [12, 14]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_notes_title_never_decides_which_note_a_write_changes() {
    on_both_stores(|| async {
    let f = fixture_in(Design::V4);
    let before = all_tags(&f);
    let out = f
        .call(
            "notes_tag",
            json!({"notes": ["Fwd: Invoice question from Brightline Supplies"], "tags": ["vendor"]}),
        )
        .await;
    let err = refusal(&out);
    assert_eq!(err.code, ErrorCode::NotFound, "{err:?}");
    let shown = serde_json::to_string(&err).unwrap();
    assert!(!shown.contains("Brightline Supplies\\\" ("), "{shown}");
    assert!(
        err.example.is_none(),
        "no untrusted candidate is offered: {shown}"
    );
    assert_eq!(all_tags(&f), before);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todos_come_from_the_meeting_the_user_names_not_a_guessed_one() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V4);
        let migration = f.id_of("Platform team sync — database migration");
        let out = f
            .call(
                "create_todos_from_meeting",
                json!({"meeting": "the platform team sync about the database migration"}),
            )
            .await;
        assert_eq!(content(&out)["meeting"]["id"], migration);
        assert_eq!(todos_made(&f), [(migration, 3)]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_most_recent_picks_the_newest_of_the_meetings_the_words_fit() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V4);
        let settled = f.id_of("Design team sync");
        let out = f
            .call(
                "create_todos_from_meeting",
                json!({"meeting": "action items from the most recent design team meeting"}),
            )
            .await;
        assert_eq!(content(&out)["meeting"]["id"], settled, "{:?}", out.result);
        assert_eq!(todos_made(&f), [(settled, 4)]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meeting_name_that_fits_several_is_refused_with_them_newest_first_and_nothing_made() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V4);
        let out = f
            .call(
                "create_todos_from_meeting",
                json!({"meeting": "design team meeting"}),
            )
            .await;
        let err = refusal(&out);
        assert_eq!(err.code, ErrorCode::InvalidArgument);
        let listed = err.expected.clone().unwrap();
        let settled = listed.find("Design team sync").unwrap();
        let kickoff = listed.find("Design team kickoff").unwrap();
        assert!(settled < kickoff, "newest first: {listed}");
        assert_eq!(
            err.example,
            Some(json!({"meeting": "Design team sync — Q1 budget settled"}))
        );
        assert!(todos_made(&f).is_empty());
        // The whole title the refusal lists names one meeting.
        let kickoff_title = json!({"meeting": "Design team kickoff — checkout redesign"});
        let again = f.call("create_todos_from_meeting", kickoff_title).await;
        assert_eq!(
            content(&again)["meeting"]["id"],
            f.id_of("Design team kickoff")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guessed_meeting_id_is_refused_with_the_users_meetings_by_title() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V4);
        // No such note: the newest meetings by title; nothing in the call says which one was
        // meant, so no call is offered.
        let out = f
            .call("create_todos_from_meeting", json!({"meeting": "9999"}))
            .await;
        let err = refusal(&out);
        assert_eq!(err.code, ErrorCode::NotFound);
        assert!(
            err.expected
                .unwrap()
                .contains("Marketing weekly — spring launch")
        );
        assert!(err.hint.unwrap().contains("name the meeting by its title"));
        assert_eq!(err.example, None);
        // A note that is not a meeting, and an untrusted one: refused, the meetings listed.
        for (id, says) in [
            (12, "is a note, not a meeting"),
            (7, "is untrusted content"),
        ] {
            let out = f
                .call(
                    "create_todos_from_meeting",
                    json!({"meeting": id.to_string()}),
                )
                .await;
            let err = refusal(&out);
            assert!(err.message.contains(says), "{}", err.message);
            assert!(err.expected.unwrap().contains("Design team sync"));
        }
        assert!(todos_made(&f).is_empty());
    })
    .await;
}

/// The notes and email tools of `design`, without a relay.
fn assistant_registry(f: &Fixture, notes: Design, email: EmailDesign) -> Arc<Registry> {
    let mut tools = designed_notes_tools(&f.store, notes).unwrap();
    tools.extend(designed_email_tools(&f.store, None, email).unwrap());
    Arc::new(Registry::new(tools).unwrap())
}

async fn call_on(f: &Fixture, registry: &Arc<Registry>, tool: &str, args: Value) -> ToolError {
    let clock = Arc::new(ManualClock::at_unix(common::NOW_UNIX));
    let caller = Caller::new(
        Dispatcher::new(Arc::clone(registry))
            .unwrap()
            .with_clock(clock),
    );
    let _ = f;
    let out = caller
        .call(
            CallRequest::new(Principal::local("tester", &[]), "run-1", tool, args)
                .with_run("run-1"),
        )
        .await;
    refusal(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_of_a_draft_never_written_says_to_draft_it_first_instead_of_naming_the_relay() {
    on_both_stores(|| async {
    let f = fixture_in(Design::V4);
    let v4 = assistant_registry(&f, Design::V4, EmailDesign::DraftFirst);
    let err = call_on(&f, &v4, "email_send", json!({"draft_id": 123})).await;
    assert_eq!(err.code, ErrorCode::NotFound);
    assert!(
        err.message.contains("no email draft has id 123"),
        "{}",
        err.message
    );
    assert!(err.hint.unwrap().contains("call email_draft"));
    // The earlier design answered the same call with the missing relay.
    let v2 = assistant_registry(&f, Design::V2, EmailDesign::Saved);
    let err = call_on(&f, &v2, "email_send", json!({"draft_id": 123})).await;
    assert_eq!(err.code, ErrorCode::PermanentDependency);
    // With a draft saved, the refusal lists it and the call that sends it.
    common::store_execute(
        &f.store,
        "INSERT INTO email_drafts (recipients, subject, body, created, status) VALUES ('[\"tomas@example.org\"]', 'Budget', 'Hi', 0, 'draft')",
        &[],
    )
    .unwrap();
    let err = call_on(&f, &v4, "email_send", json!({"draft_id": 123})).await;
    assert_eq!(err.example, Some(json!({"draft_id": 1})));
    assert!(err.expected.unwrap().contains("1 \"Budget\" to"));
    // A draft that exists goes on to the relay check, as before.
    let err = call_on(&f, &v4, "email_send", json!({"draft_id": 1})).await;
    assert_eq!(err.code, ErrorCode::PermanentDependency);
    })
    .await;
}

#[test]
fn notes_v4_declares_the_same_policies_as_notes_v2_for_the_same_tools() {
    let f = fixture_in(Design::V4);
    let v2 = assistant_registry(&f, Design::V2, EmailDesign::Saved);
    let v4 = assistant_registry(&f, Design::V4, EmailDesign::DraftFirst);
    let views = |r: &Arc<Registry>| -> Vec<String> {
        let mut v: Vec<String> = r
            .specs()
            .map(|s| format!("{} {:?} {:?}", s.name, s.policy, s.executor))
            .collect();
        v.sort();
        v
    };
    assert_eq!(views(&v2), views(&v4));
}
