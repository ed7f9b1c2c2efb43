//! The shipped tool-search measurement is well formed, without a model: every fixture tool
//! declares under the contract and is distinct, every task's tool is in the smallest
//! catalogue, the figures it would compute come from the real registry and loop, and bad
//! settings are refused before any model call. The search itself finds each task's tool
//! through the real dispatcher.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolgate_core::tool_search::{TOOL_SEARCH, names_in_result};
use toolgate_core::{CallRequest, Principal};
use toolgate_eval::tool_search::{FixtureFile, Mode, PRELOAD, SelectionEval, SelectionSuite};

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals/tool-search")
}

fn eval(sizes: &[usize], out: &Path) -> SelectionEval {
    let suite_text = std::fs::read_to_string(root().join("tasks.toml")).unwrap();
    let fixtures_text = std::fs::read_to_string(root().join("catalogue.json")).unwrap();
    SelectionEval {
        suite: SelectionSuite::parse(&suite_text, "tasks.toml").unwrap(),
        suite_text,
        fixtures: serde_json::from_str(&fixtures_text).unwrap(),
        fixtures_text,
        sizes: sizes.to_vec(),
        modes: Mode::ALL.to_vec(),
        runs: 1,
        out_dir: out.to_path_buf(),
        resume: false,
    }
}

#[test]
fn every_fixture_tool_declares_closed_and_distinct() {
    let text = std::fs::read_to_string(root().join("catalogue.json")).unwrap();
    let file: FixtureFile = serde_json::from_str(&text).unwrap();
    let mut names = HashSet::new();
    let mut descriptions = HashSet::new();
    for fixture in &file.tools {
        let tool = fixture.declare().unwrap();
        assert!(
            names.insert(tool.spec.name.clone()),
            "{} twice",
            tool.spec.name
        );
        assert!(
            descriptions.insert(fixture.does.clone()),
            "{}: same description as another",
            fixture.name
        );
        assert!(
            toolgate_core::schema::is_closed(&tool.spec.input_schema),
            "{}",
            fixture.name
        );
    }
    assert!(
        file.tools.len() >= 187,
        "200 tools need at least 187 fixtures beside the 13 real ones"
    );
}

#[test]
fn deferral_sends_fewer_definitions_at_every_size_and_the_same_at_each() {
    let dir = tempfile::tempdir().unwrap();
    let standing = eval(&[10, 50, 200], dir.path()).standing().unwrap();
    for size in [10, 50, 200] {
        let of = |mode| {
            standing
                .iter()
                .find(|s| s.size == size && s.mode == mode)
                .unwrap()
        };
        let (all, deferred) = (of(Mode::Standing), of(Mode::Deferred));
        assert_eq!(all.tools_sent, size);
        // tool_search and the always-loaded notes_search.
        assert_eq!(deferred.tools_sent, 2);
        assert!(
            deferred.definition_tokens < all.definition_tokens,
            "{size}: {standing:?}"
        );
    }
    let deferred: HashSet<usize> = standing
        .iter()
        .filter(|s| s.mode == Mode::Deferred)
        .map(|s| s.definition_tokens)
        .collect();
    assert_eq!(
        deferred.len(),
        1,
        "the standing set must not grow with the catalogue"
    );
}

#[test]
fn bad_sizes_are_refused_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    for (sizes, fragment) in [
        (vec![5], "not among the first 5 tools"),
        (vec![0], "out of range"),
        (vec![10, 900], "out of range"),
        (vec![], "at least one size"),
    ] {
        let e = eval(&sizes, dir.path()).standing().unwrap_err().to_string();
        assert!(e.contains(fragment), "{sizes:?}: {e}");
    }
}

#[tokio::test]
async fn the_search_finds_each_tasks_tool_among_200_through_the_dispatcher() {
    // What the model would get if it searched with the task's own words: this measures the
    // index, not the model, and shows the right tool is findable.
    let dir = tempfile::tempdir().unwrap();
    let e = eval(&[200], dir.path());
    let text = std::fs::read_to_string(root().join("catalogue.json")).unwrap();
    let file: FixtureFile = serde_json::from_str(&text).unwrap();
    let mut tools: Vec<_> = file.tools.iter().map(|f| f.declare().unwrap()).collect();
    let books = toolgate_wiring::Store::open_or_init(
        toolgate_wiring::StoreKind::Books,
        &dir.path().join("b.sqlite"),
    )
    .unwrap();
    let notes = toolgate_wiring::Store::open_or_init(
        toolgate_wiring::StoreKind::Notes,
        &dir.path().join("n.sqlite"),
    )
    .unwrap();
    let exits = toolgate_wiring::ExitsConfig::default();
    for (toolset, store) in [
        (toolgate_wiring::ToolsetName::BooksV2, &books),
        (toolgate_wiring::ToolsetName::Notes, &notes),
    ] {
        tools.extend(
            toolgate_wiring::tools(toolset, store, &exits, Arc::new(toolgate_core::NoTrace))
                .unwrap(),
        );
    }
    // The dispatcher the eval's runs get: from the wiring, with tool_search over every tool.
    let seat = toolgate_wiring::Seat::new(Principal::local("eval", &[]));
    let assembled = toolgate_wiring::assemble_with(tools, BTreeMap::new(), true, seat).unwrap();
    let (caller, principal) = (assembled.caller, assembled.principal);
    let mut found_first = 0;
    let mut ranks = Vec::new();
    for task in &e.suite.tasks {
        // The query the runtime's preload sends: the task's words, as `preload_query` cuts them.
        let query = toolgate_agent::deferral::preload_query(&task.prompt).unwrap();
        let outcome = caller
            .call(CallRequest::new(
                principal.clone(),
                "search-check",
                TOOL_SEARCH,
                json!({"query": query, "limit": 10}),
            ))
            .await;
        let names = names_in_result(&outcome.observation().unwrap().content);
        assert!(names.len() <= 10);
        let rank = names.iter().position(|n| n == &task.tool);
        assert!(rank.is_some(), "{}: {names:?}", task.id);
        ranks.push((task.id.clone(), rank.unwrap() + 1));
        if names.first() == Some(&task.tool) {
            found_first += 1;
        }
    }
    // The preloaded mode sends the first PRELOAD the index ranks: each task's tool must be
    // among them, or the mode could not pass that task whatever the model does.
    for (id, rank) in &ranks {
        assert!(
            *rank <= PRELOAD,
            "{id}: the right tool is ranked {rank}, past the preload of {PRELOAD}"
        );
    }
    eprintln!("rank of the right tool per task: {ranks:?}");
    // Reported, not asserted: how often the task's own words put its tool first.
    eprintln!(
        "task prompt as query: the right tool first in {found_first} of {}",
        e.suite.tasks.len()
    );
}
