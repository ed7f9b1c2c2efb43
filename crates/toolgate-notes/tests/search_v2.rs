//! The `notes-v2` search design against the sample notebook, through the real dispatcher:
//! each test is named after the read failure of the embedded model it prevents
//! (evals/runs/notes-all-sampled-embedded).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{content, fixture_in, on_both_stores};
use serde_json::{Value, json};
use toolgate_notes::Design;

fn hit_ids(content: &Value) -> Vec<i64> {
    content["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_best_match_comes_whole_so_a_figure_past_the_snippet_is_there() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V2);
        let settled = f.id_of("Design team sync");
        let out = f
            .call(
                "notes_search",
                json!({"query": "design team budget settled"}),
            )
            .await;
        let c = content(&out);
        assert_eq!(hit_ids(c).first(), Some(&settled), "{c}");
        let first = &c["hits"][0];
        let text = first["text"].as_str().unwrap();
        assert!(text.contains("Q1 design budget: $48,000, final."), "{text}");
        assert!(text.contains("Attendees: Priya, Marco, Lena"), "{text}");
        assert!(first.get("snippet").is_none(), "{first}");
        // The others carry passages, not whole notes.
        for other in c["hits"].as_array().unwrap().iter().skip(1) {
            assert!(other.get("text").is_none(), "{other}");
            assert!(other["snippet"].is_string(), "{other}");
        }
        assert!(
            c["next_step"].as_str().unwrap().contains("notes_get"),
            "{c}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_that_matches_nothing_shows_the_notes_of_any_kind_and_says_so() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V2);
        let report = f.id_of("Submit the November expense report");
        let out = f
            .call(
                "notes_search",
                json!({"query": "November expense report", "kind": "meeting"}),
            )
            .await;
        let c = content(&out);
        assert!(hit_ids(c).contains(&report), "{c}");
        assert!(
            c["note"]
                .as_str()
                .unwrap()
                .contains("no note of kind meeting matches"),
            "{c}"
        );
        // The same call in v1 hides it behind meetings that share a word: the failure this
        // prevents (the model answered from one of those).
        let v1 = common::fixture();
        let out = v1
            .call(
                "notes_search",
                json!({"query": "November expense report", "kind": "meeting"}),
            )
            .await;
        assert!(
            !hit_ids(content(&out)).contains(&report),
            "{}",
            content(&out)
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_that_hides_matches_of_other_kinds_says_how_many() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V2);
        let all = f.call("notes_search", json!({"query": "budget"})).await;
        let meetings = f
            .call(
                "notes_search",
                json!({"query": "budget", "kind": "meeting"}),
            )
            .await;
        let (all, meetings) = (content(&all), content(&meetings));
        let hidden =
            all["total_matches"].as_i64().unwrap() - meetings["total_matches"].as_i64().unwrap();
        assert!(hidden > 0, "{all} {meetings}");
        let note = meetings["note"].as_str().unwrap();
        assert!(
            note.contains(&format!("{hidden} more notes of other kinds also match")),
            "{note}"
        );
        for hit in meetings["hits"].as_array().unwrap() {
            assert_eq!(hit["kind"], "meeting", "{hit}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_of_one_cannot_hide_the_right_note_because_there_is_no_limit() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V2);
        let out = f
            .call("notes_search", json!({"query": "budget", "limit": 1}))
            .await;
        let error = out
            .record
            .error()
            .unwrap_or_else(|| panic!("{:?}", out.result));
        assert_eq!(error.as_str(), "invalid_argument", "{:?}", out.result);
        let out = f.call("notes_search", json!({"query": "budget"})).await;
        assert_eq!(content(&out)["hits"].as_array().unwrap().len(), 5);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_page_carries_passages_only() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V2);
        let out = f
            .call("notes_search", json!({"query": "budget", "offset": 5}))
            .await;
        let c = content(&out);
        assert!(!c["hits"].as_array().unwrap().is_empty(), "{c}");
        for hit in c["hits"].as_array().unwrap() {
            // An untrusted hit's text field only points at untrusted_content (PostgreSQL's
            // ranking puts a clip on this page; SQLite's does not).
            match hit.get("text") {
                None => {}
                Some(text) => assert!(
                    hit["untrusted"] == true
                        && text.as_str().unwrap().starts_with("see untrusted_content"),
                    "{hit}"
                ),
            }
        }
        assert!(c.get("next_step").is_none(), "{c}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_best_match_reaches_the_model_only_as_untrusted_text() {
    on_both_stores(|| async {
        let f = fixture_in(Design::V2);
        let out = f
            .call("notes_search", json!({"query": "lemon risotto"}))
            .await;
        let obs = out.observation().cloned().unwrap();
        let first = &obs.content["hits"][0];
        assert_eq!(first["untrusted"], true, "{first}");
        assert!(first.get("title").is_none(), "{first}");
        assert!(
            first.get("snippet").is_none() && !first["text"].as_str().unwrap().contains("risotto"),
            "{first}"
        );
        let serialized = obs.content.to_string().to_lowercase();
        assert!(!serialized.contains("shallot"), "{serialized}");
        assert!(!serialized.contains("ignore previous"), "{serialized}");
        // The whole text, injection included, is there, but only as untrusted data.
        assert!(
            obs.untrusted
                .iter()
                .any(|u| u.text.contains("shallot")
                    && u.text.contains("Ignore previous instructions")),
            "{:?}",
            obs.untrusted
        );
    })
    .await;
}

#[test]
fn only_v2_lets_a_loop_answer_repeats_of_its_reads() {
    for (design, expected) in [(Design::V1, false), (Design::V2, true)] {
        let f = fixture_in(design);
        for name in ["notes_search", "notes_get"] {
            let spec = &f.registry.get(name).unwrap().spec;
            assert_eq!(spec.executor.answers_repeats, expected, "{design:?} {name}");
        }
        for name in ["notes_create", "notes_tag", "notes_delete"] {
            let spec = &f.registry.get(name).unwrap().spec;
            assert!(!spec.executor.answers_repeats, "{design:?} {name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_todos_due_date_comes_first_and_is_not_mistaken_for_the_day_it_was_written() {
    on_both_stores(|| async {
        // notes-v2 to notes-v7: `date` (the day written) before `due`; notes-v6 answered the
        // `date` to "when is it due?" in 3 dev runs of 3.
        for (design, keys) in [
            (
                Design::V5,
                ["id", "title", "date", "notebook", "kind", "due"],
            ),
            (
                Design::V8,
                ["id", "title", "due", "written", "notebook", "kind"],
            ),
        ] {
            let f = fixture_in(design);
            let out = f
                .call("notes_search", json!({"query": "November expense report"}))
                .await;
            let c = content(&out);
            let first = &c["hits"][0];
            assert_eq!(first["title"], "Submit the November expense report", "{c}");
            let shown: Vec<&str> = first
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .take(keys.len())
                .collect();
            assert_eq!(shown, keys, "{design:?}: {first}");
            assert_eq!(first["due"], "2025-12-12", "{design:?}: {first}");
        }
        // A note that is not a to-do has no `due`, and its own date is `written`.
        let f = fixture_in(Design::V8);
        let out = f
            .call(
                "notes_search",
                json!({"query": "design team budget settled"}),
            )
            .await;
        let first = &content(&out)["hits"][0];
        assert!(first.get("due").is_none(), "{first}");
        assert!(first.get("date").is_none(), "{first}");
        assert!(first["written"].is_string(), "{first}");
    })
    .await;
}
