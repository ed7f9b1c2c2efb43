//! The notes toolset on the bundled sample notebook, through the real dispatcher, on real
//! SQLite files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{TODAY, content, empty_store, fixture, on_both_stores};
use serde_json::{Value, json};
use toolgate_core::registry::contract_problems;
use toolgate_core::{CallRequest, Effect};
use toolgate_core::{ErrorCode, Principal, Risk, ScriptedApprover};
use toolgate_notes::sample::SAMPLE_FILES;
use toolgate_notes::store::SAMPLE_GENERATED;
use toolgate_notes::{NotesStore, StoreError, import_dir, undo_last};

/// o200k_base token counts, as the eval and `toolgate tools` report them.
mod tokens {
    pub fn count(text: &str) -> usize {
        tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(text)
            .len()
    }
}

const SETTLED: &str = "Design team sync — Q1 budget settled";
const RISOTTO: &str = "Lemon and pea risotto";
const INJECTED: &str = "attacker@evil.example";

fn hit_ids(value: &Value) -> Vec<i64> {
    value["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_i64().unwrap())
        .collect()
}

#[test]
fn every_tool_honours_the_contract_with_the_documented_risks() {
    let f = fixture();
    let specs: Vec<_> = f.registry.specs().collect();
    let problems = contract_problems(specs.iter().copied());
    assert!(problems.is_empty(), "{problems:#?}");
    let table: Vec<(&str, Risk, Effect)> = specs
        .iter()
        .map(|s| (s.name.as_str(), s.policy.risk, s.policy.effect))
        .collect();
    assert_eq!(
        table,
        [
            (
                "create_todos_from_meeting",
                Risk::Medium,
                Effect::UndoableWrite
            ),
            ("notes_create", Risk::Medium, Effect::UndoableWrite),
            ("notes_delete", Risk::High, Effect::Irreversible),
            ("notes_get", Risk::Low, Effect::Read),
            ("notes_search", Risk::Low, Effect::Read),
            ("notes_tag", Risk::Medium, Effect::UndoableWrite),
        ]
    );
    let delete = f.registry.get("notes_delete").unwrap();
    assert!(delete.spec.policy.reason.contains("cannot get back"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_file_is_embedded_and_the_last_design_meeting_is_unambiguous() {
    on_both_stores(|| async {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sample");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let embedded: Vec<&str> = SAMPLE_FILES.iter().map(|(name, _)| *name).collect();
    assert_eq!(on_disk, embedded, "list every sample file in SAMPLE_FILES");

    let f = fixture();
    assert_eq!(
        f.count_notes(),
        (SAMPLE_FILES.len() + SAMPLE_GENERATED) as i64
    );
    let last = f.sql_text(
        "SELECT title FROM notes WHERE kind = 'meeting' AND lower(title) LIKE '%design team%'
         ORDER BY created DESC, id DESC LIMIT 1",
    );
    assert_eq!(last, SETTLED);
    let body = f.sql_text(&format!(
        "SELECT body FROM notes WHERE id = {}",
        f.id_of(SETTLED)
    ));
    assert!(body.contains("settled on $48,000 for Q1"));
    assert_eq!(
        f.sql_i64(
            "SELECT count(*) FROM notes WHERE kind = 'meeting' AND lower(title) LIKE '%design team%'"
        ),
        3
    );
    assert!(
        f.sql_i64("SELECT count(*) FROM notes WHERE kind = 'clip' AND untrusted = 1") >= 3,
        "clips are untrusted"
    );
    assert!(f.fts_in_sync());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_search_ranks_the_settled_meeting_first_with_bounded_hits() {
    on_both_stores(|| async {
    let f = fixture();
    let settled = f.id_of(SETTLED);
    for query in ["design team budget", "design budget settled"] {
        let out = f
            .call("notes_search", json!({"query": query, "limit": 5}))
            .await;
        let c = content(&out);
        assert_eq!(c["match"], "all_words", "{query}");
        assert_eq!(hit_ids(c)[0], settled, "{query}: {c}");
        assert_eq!(c["hits"][0]["date"], "2025-12-02");
        // The snippet reaches the figure the question is about (it follows a weaker second
        // mention of the words), not only the first place the words occur.
        let top = c["hits"][0]["snippet"].as_str().unwrap();
        assert!(top.contains("$48,000"), "{query}: {top}");
        for hit in c["hits"].as_array().unwrap() {
            let hit_tokens = tokens::count(&hit.to_string());
            assert!(hit_tokens <= 110, "{hit_tokens} tokens: {hit}");
            if let Some(snippet) = hit["snippet"].as_str() {
                assert!(tokens::count(snippet) <= 60, "{snippet}");
            }
            assert!(hit.get("body").is_none(), "hits never carry whole notes");
        }
    }
    // The user's whole question works as a query too: the settled meeting is among the first.
    let out = f
        .call(
            "notes_search",
            json!({"query": "What budget did we settle on in the last meeting with the design team?"}),
        )
        .await;
    let ids = hit_ids(content(&out));
    assert!(ids.iter().take(3).any(|id| *id == settled), "{ids:?}");
    let total_tokens = tokens::count(&out.model_text());
    assert!(total_tokens < 600, "five hits cost {total_tokens} tokens");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_truncation_is_loud_and_pages_are_disjoint() {
    on_both_stores(|| async {
    let f = fixture();
    let first = f
        .call("notes_search", json!({"query": "budget", "limit": 2}))
        .await;
    let c = content(&first);
    let total = c["total_matches"].as_i64().unwrap();
    assert!(total > 2, "{c}");
    assert_eq!(c["next_offset"], 2);
    assert!(c["note"].as_str().unwrap().contains("offset 2"), "{c}");
    let second = f
        .call(
            "notes_search",
            json!({"query": "budget", "limit": 2, "offset": 2}),
        )
        .await;
    let (a, b) = (hit_ids(c), hit_ids(content(&second)));
    assert!(a.iter().all(|id| !b.contains(id)), "{a:?} {b:?}");
    let meetings = f
        .call(
            "notes_search",
            json!({"query": "budget", "kind": "meeting", "limit": 20, "response_format": "detailed"}),
        )
        .await;
    let hits = content(&meetings)["hits"].as_array().unwrap().clone();
    assert!(hits.iter().all(|h| h["kind"] == "meeting"));
    assert!(hits.iter().all(|h| h["tags"].is_array()));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fts_special_characters_in_queries_never_error() {
    on_both_stores(|| async {
        let f = fixture();
        for query in [
            "\"",
            "\"budget",
            "budget\"\"",
            "budg*",
            "*",
            "NEAR(design budget, 3)",
            "design NEAR budget",
            "-budget",
            "design -team",
            "title:budget",
            "body : budget",
            "budget AND OR NOT",
            "^design",
            "(budget",
            "budget)",
            "{title body}: budget",
            "'; DROP TABLE notes; --",
            "\\",
            "budget + design",
            "💸 budget",
            "NOT",
        ] {
            let out = f.call("notes_search", json!({"query": query})).await;
            assert!(!out.is_error(), "{query}: {}", out.model_text());
        }
        assert!(f.count_notes() > 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_result_says_how_to_broaden() {
    on_both_stores(|| async {
        let f = fixture();
        let out = f
            .call("notes_search", json!({"query": "zanzibar xylophone"}))
            .await;
        let c = content(&out);
        assert_eq!(c["total_matches"], 0);
        assert!(
            c["note"]
                .as_str()
                .unwrap()
                .contains("try fewer or different words"),
            "{c}"
        );
        let only_marks = f.call("notes_search", json!({"query": "*:-"})).await;
        assert!(
            content(&only_marks)["note"]
                .as_str()
                .unwrap()
                .contains("no words")
        );
        let fallback = f
            .call("notes_search", json!({"query": "risotto xylophone"}))
            .await;
        let c = content(&fallback);
        assert_eq!(c["match"], "any_word");
        assert!(c["note"].as_str().unwrap().contains("every word"), "{c}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_note_text_reaches_the_model_only_in_the_untrusted_field() {
    on_both_stores(|| async {
        let f = fixture();
        let risotto = f.id_of(RISOTTO);
        let out = f.call("notes_get", json!({"note_id": risotto})).await;
        let obs = out.observation().cloned().unwrap();
        assert!(
            obs.untrusted
                .iter()
                .any(|u| u.text.contains(INJECTED)
                    && u.source.contains("https://recipes.example.com/")),
            "{:?}",
            obs.untrusted
        );
        assert!(!obs.content.to_string().contains(INJECTED));
        assert!(!obs.content.to_string().contains("Ignore previous"));
        assert_eq!(obs.content["untrusted"], true);
        assert!(
            obs.provenance
                .sources
                .iter()
                .any(|s| s.contains("recipes.example.com"))
        );
        let model = out.model_value();
        assert!(model["untrusted_content"].is_array());
        assert!(!model["result"].to_string().contains(INJECTED));

        // A note flagged untrusted without a URL (forwarded mail) is treated the same.
        let email = f.id_of("Fwd: Invoice question");
        let out = f.call("notes_get", json!({"note_id": email})).await;
        let obs = out.observation().cloned().unwrap();
        assert!(
            !obs.content
                .to_string()
                .contains("billing-review@evil.example")
        );
        assert!(
            obs.untrusted[0]
                .text
                .contains("billing-review@evil.example")
        );

        // Search snippets of untrusted notes are untrusted too.
        for query in ["risotto", "previous instructions email notes"] {
            let out = f.call("notes_search", json!({"query": query})).await;
            let obs = out.observation().cloned().unwrap();
            assert!(hit_ids(&obs.content).contains(&risotto), "{query}");
            assert!(!obs.content.to_string().contains(INJECTED), "{query}");
            assert!(
                !obs.content.to_string().contains("Ignore previous"),
                "{query}"
            );
            assert!(
                obs.untrusted
                    .iter()
                    .any(|u| u.source.contains(&format!("note {risotto}"))),
                "{query}"
            );
        }

        // And a trusted note's text is ordinary content.
        let dal = f.id_of("Weeknight red lentil dal");
        let out = f.call("notes_get", json!({"note_id": dal})).await;
        let obs = out.observation().cloned().unwrap();
        assert!(obs.untrusted.is_empty());
        assert!(
            obs.content["body"]
                .as_str()
                .unwrap()
                .contains("red lentils")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_due_date_is_refused_with_todays_date() {
    on_both_stores(|| async {
    let f = fixture();
    let before = f.count_notes();
    for due in ["Friday", "tomorrow", "12/12/2025", "2025-12-32"] {
        let out = f
            .call(
                "notes_create",
                json!({"title": "Call the caterer", "body": "", "due": due}),
            )
            .await;
        let err = out.error().expect("refused");
        assert_eq!(err.code, ErrorCode::InvalidArgument, "{due}");
        assert_eq!(err.field.as_deref(), Some("due"));
        let hint = err.hint.as_deref().unwrap_or_default();
        assert!(hint.contains(&format!("today is {TODAY}")), "{due}: {hint}");
        assert!(out.model_text().contains("YYYY-MM-DD"));
    }
    assert_eq!(f.count_notes(), before);
    let ok = f
        .call(
            "notes_create",
            json!({"title": "Call the caterer", "body": "", "due": "2025-12-12", "notebook": "personal"}),
        )
        .await;
    let created = &content(&ok)["created"];
    assert_eq!(created["kind"], "todo");
    assert_eq!(created["due"], "2025-12-12");
    assert_eq!(created["created"], TODAY);
    assert_eq!(
        created["notebook"], "Personal",
        "existing notebook, any case"
    );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_near_miss_notebook_is_refused_with_the_real_name() {
    on_both_stores(|| async {
        let f = fixture();
        let out = f
            .call(
                "notes_create",
                json!({"title": "x", "body": "", "notebook": "Wrok"}),
            )
            .await;
        let err = out.error().cloned().unwrap();
        assert_eq!(err.code, ErrorCode::InvalidArgument);
        assert_eq!(err.field.as_deref(), Some("notebook"));
        assert!(err.hint.unwrap().contains("\"Work\""));
        assert_eq!(f.sql_i64("SELECT count(*) FROM tool_receipts"), 0);
        let new = f
            .call(
                "notes_create",
                json!({"title": "x", "body": "", "notebook": "Gardening"}),
            )
            .await;
        assert_eq!(content(&new)["created"]["notebook"], "Gardening");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notes_delete_without_an_approver_is_denied_and_the_note_survives() {
    on_both_stores(|| async {
        let f = fixture();
        let id = f.id_of(SETTLED);
        let out = f.call("notes_delete", json!({"note_id": id})).await;
        let err = out.error().cloned().unwrap();
        assert_eq!(err.code, ErrorCode::ApprovalDenied);
        assert_eq!(
            f.sql_i64(&format!("SELECT count(*) FROM notes WHERE id = {id}")),
            1
        );
        assert_eq!(f.sql_i64("SELECT count(*) FROM tool_receipts"), 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_delete_removes_the_note_everywhere_and_offers_no_undo() {
    on_both_stores(|| async {
        let f = fixture();
        let id = f.id_of("Apartment ideas");
        let args = json!({"note_id": id});
        let principal = Principal::local("tester", &[]);
        let binding = f
            .caller
            .binding_for(&principal, "notes_delete", &args)
            .unwrap();
        let approver = Arc::new(ScriptedApprover::approving([binding]));
        let d = f.dispatcher_with(approver.clone());
        let out = d
            .call(CallRequest::new(principal, "run-1", "notes_delete", args))
            .await;
        assert_eq!(content(&out)["deleted"]["title"], "Apartment ideas");
        assert_eq!(out.record.undo, None);
        assert_eq!(approver.seen()[0].arguments, json!({"note_id": id}));
        assert_eq!(
            f.sql_i64(&format!("SELECT count(*) FROM notes WHERE id = {id}")),
            0
        );
        let found = f
            .call("notes_search", json!({"query": "blackout blinds hallway"}))
            .await;
        assert!(!hit_ids(content(&found)).contains(&id));
        assert!(f.fts_in_sync());
        assert_eq!(undo_last(&f.store, 5).unwrap(), vec![]);
        let again = f.call("notes_get", json!({"note_id": id})).await;
        assert_eq!(again.error().cloned().unwrap().code, ErrorCode::NotFound);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_todos_from_meeting_twice_creates_once() {
    on_both_stores(|| async {
    let f = fixture();
    let meeting = f.id_of(SETTLED);
    let args = json!({"meeting_note_id": meeting});
    let first = f
        .call_in_run("run-1", "create_todos_from_meeting", args.clone())
        .await;
    let c = content(&first).clone();
    let created = c["created"].as_array().unwrap();
    let dues: Vec<Value> = created.iter().map(|t| t["due"].clone()).collect();
    assert_eq!(
        dues,
        [
            json!("2025-12-09"),
            json!("2026-01-14"),
            Value::Null,
            json!("2025-12-12")
        ]
    );
    assert!(c["already_existed"].as_array().unwrap().is_empty());
    assert_eq!(
        f.sql_i64(&format!(
            "SELECT count(*) FROM notes WHERE kind = 'todo' AND meeting_id = {meeting} AND done = 0 AND notebook = 'Work'"
        )),
        4
    );

    // The same call in the same run is a replay of the receipt.
    let replay = f
        .call_in_run("run-1", "create_todos_from_meeting", args.clone())
        .await;
    assert!(replay.record.duplicate);

    // In another run (another day, another conversation) nothing new is created either.
    let second = f
        .call_in_run("run-2", "create_todos_from_meeting", args)
        .await;
    assert!(!second.record.duplicate);
    let c2 = content(&second);
    assert!(c2["created"].as_array().unwrap().is_empty());
    assert_eq!(c2["already_existed"].as_array().unwrap().len(), 4);
    assert!(c2["note"].as_str().unwrap().contains("nothing was created"));
    assert_eq!(second.record.undo, None, "nothing to undo");
    assert_eq!(
        f.sql_i64(&format!(
            "SELECT count(*) FROM notes WHERE meeting_id = {meeting}"
        )),
        4
    );

    // Undo deletes exactly the four to-dos.
    let undone = undo_last(&f.store, 1).unwrap();
    assert_eq!(undone.len(), 1);
    assert_eq!(undone[0].tool, "create_todos_from_meeting");
    assert_eq!(undone[0].note_ids.len(), 4);
    assert_eq!(
        f.sql_i64(&format!(
            "SELECT count(*) FROM notes WHERE meeting_id = {meeting}"
        )),
        0
    );
    assert!(f.fts_in_sync());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todos_are_made_only_from_trusted_meeting_notes() {
    on_both_stores(|| async {
        let f = fixture();
        let cases = [
            (f.id_of(RISOTTO), ErrorCode::InvalidArgument, "untrusted"),
            (
                f.id_of("Weeknight red lentil dal"),
                ErrorCode::InvalidArgument,
                "not a meeting",
            ),
            (99_999, ErrorCode::NotFound, "no note has id 99999"),
        ];
        for (id, code, says) in cases {
            let out = f
                .call("create_todos_from_meeting", json!({"meeting_note_id": id}))
                .await;
            let err = out.error().cloned().unwrap();
            assert_eq!(err.code, code, "{id}");
            assert!(err.message.contains(says), "{id}: {}", err.message);
        }
        assert_eq!(f.sql_i64("SELECT count(*) FROM tool_receipts"), 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notes_tag_is_all_or_nothing_on_unknown_ids() {
    on_both_stores(|| async {
        let f = fixture();
        let id = f.id_of(SETTLED);
        let out = f
            .call(
                "notes_tag",
                json!({"note_ids": [id, 99_999], "tags": ["q1"]}),
            )
            .await;
        let err = out.error().cloned().unwrap();
        assert_eq!(err.code, ErrorCode::NotFound);
        assert!(err.message.contains("99999"));
        assert_eq!(
            f.sql_text(&format!("SELECT tags FROM notes WHERE id = {id}")),
            "budget,design"
        );
        assert_eq!(f.sql_i64("SELECT count(*) FROM tool_receipts"), 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_reverts_the_newest_writes_in_reverse_order_once() {
    on_both_stores(|| async {
    let f = fixture();
    let kickoff = f.id_of("Design team kickoff");
    let created = f
        .call(
            "notes_create",
            json!({"title": "Budget recap for Tomás", "body": "Q1 is $48,000.", "notebook": "Work"}),
        )
        .await;
    let new_id = content(&created)["created"]["id"].as_i64().unwrap();
    assert_eq!(
        created.record.undo,
        Some(json!({"action": "delete_notes", "note_ids": [new_id]}))
    );
    let tagged = f
        .call(
            "notes_tag",
            json!({"note_ids": [new_id, kickoff], "tags": ["Finance"], "remove": ["checkout"]}),
        )
        .await;
    assert_eq!(
        content(&tagged)["notes"][1]["tags"],
        json!(["design", "finance"])
    );
    assert_eq!(
        f.sql_text(&format!("SELECT tags FROM notes WHERE id = {kickoff}")),
        "design,finance"
    );

    let first = undo_last(&f.store, 1).unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].tool, "notes_tag");
    assert_eq!(
        f.sql_text(&format!("SELECT tags FROM notes WHERE id = {kickoff}")),
        "checkout,design"
    );
    assert_eq!(
        f.sql_text(&format!("SELECT tags FROM notes WHERE id = {new_id}")),
        ""
    );

    let rest = undo_last(&f.store, 10).unwrap();
    assert_eq!(rest.len(), 1, "only the create is left");
    assert_eq!(rest[0].tool, "notes_create");
    assert_eq!(rest[0].note_ids, vec![new_id]);
    assert_eq!(
        f.sql_i64(&format!("SELECT count(*) FROM notes WHERE id = {new_id}")),
        0
    );
    assert_eq!(undo_last(&f.store, 10).unwrap(), vec![], "never twice");
    assert_eq!(f.sql_i64("SELECT count(*) FROM notes_undone"), 2);
    let search = f
        .call("notes_search", json!({"query": "recap Tomás"}))
        .await;
    assert!(!hit_ids(content(&search)).contains(&new_id));
    assert!(f.fts_in_sync());
    // Ids are never reused, so an old undo handle can never hit a newer note.
    let next = f
        .call_in_run(
            "run-9",
            "notes_create",
            json!({"title": "After", "body": ""}),
        )
        .await;
    assert!(content(&next)["created"]["id"].as_i64().unwrap() > new_id);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_restores_the_sample_and_clears_receipts() {
    on_both_stores(|| async {
        let f = fixture();
        let before = f.count_notes();
        let max_id = f.sql_i64("SELECT max(id) FROM notes");
        f.call("notes_create", json!({"title": "temp", "body": "x"}))
            .await
            .observation()
            .cloned()
            .unwrap();
        f.call(
            "create_todos_from_meeting",
            json!({"meeting_note_id": f.id_of(SETTLED)}),
        )
        .await
        .observation()
        .cloned()
        .unwrap();
        undo_last(&f.store, 1).unwrap();
        assert!(f.count_notes() > before);
        f.store.reset().unwrap();
        assert_eq!(f.count_notes(), before);
        assert_eq!(f.sql_i64("SELECT max(id) FROM notes"), max_id);
        assert_eq!(f.sql_i64("SELECT count(*) FROM tool_receipts"), 0);
        assert_eq!(f.sql_i64("SELECT count(*) FROM notes_undone"), 0);
        assert!(f.fts_in_sync());
        let again = f
            .call("notes_create", json!({"title": "temp", "body": "x"}))
            .await;
        assert!(!again.record.duplicate, "after a reset a write is fresh");
        assert_eq!(
            content(&again)["created"]["id"].as_i64().unwrap(),
            max_id + 1
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_reports_bad_files_by_name_and_imports_the_rest() {
    on_both_stores(|| async {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("export");
        std::fs::create_dir_all(notes.join("Work")).unwrap();
        std::fs::create_dir_all(notes.join(".obsidian")).unwrap();
        let write = |name: &str, text: &[u8]| std::fs::write(notes.join(name), text).unwrap();
        write(
            "groceries.md",
            b"---\ntitle: Groceries\ntags: [home, #food]\ncreated: 2025-03-01\n---\nmilk, eggs\n",
        );
        write("Work/standup.md", b"# Standup notes\nShip the fix today.\n");
        write(
            "Work/retro.markdown",
            b"---\nkind: meeting\ncreated: 2025-03-02\n---\n- [ ] Fix flaky test by 2025-03-09\n",
        );
        write("bad-date.md", b"---\ntitle: x\ndue: Friday\n---\n");
        write("unclosed.md", b"---\ntitle: x\nbody\n");
        write("binary.md", &[0xff, 0xfe, 0x00, 0x41]);
        write("typo.md", b"---\ntitel: x\n---\n");
        write("readme.txt", b"not a note");
        write(".obsidian/config.md", b"hidden");

        let (_store_dir, store) = empty_store();
        let report = import_dir(&store, &notes).unwrap();
        let imported: Vec<&str> = report.imported.iter().map(|i| i.file.as_str()).collect();
        assert_eq!(
            imported,
            ["Work/retro.markdown", "Work/standup.md", "groceries.md"]
        );
        let rejected: Vec<(&str, &str)> = report
            .rejected
            .iter()
            .map(|r| (r.file.as_str(), r.reason.as_str()))
            .collect();
        let expect = [
            (
                "bad-date.md",
                "line 3: `due` must be a date written YYYY-MM-DD",
            ),
            ("binary.md", "not UTF-8"),
            ("typo.md", "did you mean `title`"),
            ("unclosed.md", "never closed"),
        ];
        assert_eq!(rejected.len(), expect.len(), "{rejected:?}");
        for ((file, reason), (want_file, want_reason)) in rejected.iter().zip(expect) {
            assert_eq!(*file, want_file);
            assert!(reason.contains(want_reason), "{file}: {reason}");
        }
        assert_eq!(report.ignored, ["readme.txt"]);

        let row = |title: &str| -> (String, String, String) {
            store
                .with_sql(|c| {
                    let row = c
                        .query_opt(
                            "SELECT notebook, tags, kind FROM notes WHERE title = ?1",
                            toolgate_core::sql_params![title],
                        )?
                        .unwrap();
                    Ok((row.text(0)?, row.text(1)?, row.text(2)?))
                })
                .unwrap()
        };
        assert_eq!(
            row("Groceries"),
            ("Inbox".into(), "food,home".into(), "note".into())
        );
        assert_eq!(
            row("Standup notes"),
            ("Work".into(), "".into(), "note".into())
        );
        assert_eq!(row("retro"), ("Work".into(), "".into(), "meeting".into()));

        let again = import_dir(&store, &notes).unwrap();
        assert!(again.imported.is_empty());
        assert_eq!(again.duplicates.len(), 3);
        assert!(import_dir(&store, &notes.join("groceries.md")).is_err());
    })
    .await;
}

#[test]
fn init_refuses_to_overwrite_and_open_refuses_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.sqlite");
    NotesStore::init(&path).unwrap();
    assert!(matches!(
        NotesStore::init_sample(&path),
        Err(StoreError::AlreadyExists { .. })
    ));
    let books_like = dir.path().join("books.sqlite");
    rusqlite::Connection::open(&books_like)
        .unwrap()
        .execute_batch(
            "CREATE TABLE toolgate_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO toolgate_meta VALUES ('schema_version', '1');",
        )
        .unwrap();
    assert!(matches!(
        NotesStore::open(&books_like),
        Err(StoreError::NotANotesDatabase { .. })
    ));
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello").unwrap();
    assert!(matches!(
        NotesStore::open(&text),
        Err(StoreError::NotANotesDatabase { .. })
    ));
    let missing = NotesStore::open(&dir.path().join("none.sqlite")).unwrap_err();
    assert!(missing.to_string().contains("toolgate notes init"));
    assert!(!dir.path().join("n.partial").exists());
}
