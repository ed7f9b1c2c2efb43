//! The disk prefix cache, measured: time to the first generated token for the demo's first
//! question, with the demo's real request (the notes toolset's tool definitions as the demo
//! wires them, the default system prompt), in three new engines one after the other: the
//! cache off (baseline), the cache on but empty (first run: computes and saves the prefix),
//! and the cache on with that entry (second run). Ratios are against the baseline and the first
//! run of this same process.
//!
//! It lives in the `toolgate` crate because the real request needs the wiring and the agent,
//! which depend on `toolgate-llm` (a bench there could not build them without a cycle).
//!
//! `cargo bench -p toolgate --bench prefix_cache` (needs the model: scripts/fetch-model.py).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use toolgate_agent::{Agent, AgentConfig, DEFAULT_SYSTEM_PROMPT};
use toolgate_core::{Mode, Principal};
use toolgate_egress::{EgressConfig, SmtpConfig, SmtpSecurity};
use toolgate_llm::embedded::{
    EmbeddedConfig, EmbeddedModel, EngineStats, Progress, ProgressFn, fetched_model_path,
};
use toolgate_llm::scripted::ScriptedModel;
use toolgate_llm::{Model, ModelRequest};
use toolgate_wiring::{ExitsConfig, Seat, Store, StoreKind, ToolsetName};

/// The demo's first question (crates/toolgate/src/commands/demo.rs).
const QUESTION: &str = "What budget did we settle on in the last meeting with the design team?";

/// The demo's first request, as its agent sends it: captured from a scripted model.
fn demo_request(dir: &Path) -> ModelRequest {
    let store = Store::open_or_init(StoreKind::Notes, &dir.join("notes.sqlite")).unwrap();
    let seat = Seat::new(Principal::local("demo-user", &[])).with_mode(Mode::Auto);
    // The demo's exits: a relay named on 127.0.0.1 so that `email_send` is offered.
    let exits = ExitsConfig::new(EgressConfig::default(), None)
        .allow_loopback("smtp", 2525)
        .with_relay(SmtpConfig {
            host: "127.0.0.1".into(),
            port: 2525,
            security: SmtpSecurity::None,
            from: "Notes Assistant <demo@localhost.localdomain>".into(),
            timeout_secs: 10,
            hello_name: None,
        });
    let ready = toolgate_wiring::dispatcher(ToolsetName::Notes, &store, &exits, seat).unwrap();
    let scripted = Arc::new(ScriptedModel::new([ScriptedModel::answer("-")]));
    let agent =
        Agent::new(scripted.clone(), ready.caller, ready.principal).with_config(AgentConfig {
            max_rounds: 6,
            system: Some(DEFAULT_SYSTEM_PROMPT.into()),
            ..AgentConfig::default()
        });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(agent.ask("demo-budget", QUESTION));
    scripted.requests().remove(0)
}

struct Run {
    load_s: f64,
    first_token_s: f64,
    stats: EngineStats,
}

fn run(request: &ModelRequest, cache: Option<&Path>) -> Run {
    let path = fetched_model_path().expect("the fetched model");
    let mut config = EmbeddedConfig::new(path);
    config.n_ctx = 32_768; // the demo's default
    config.prefix_cache = cache.map(Path::to_path_buf);
    let first: Arc<Mutex<Option<Instant>>> = Arc::default();
    let seen = Arc::clone(&first);
    let progress: ProgressFn = Arc::new(move |p: Progress| {
        if let Progress::Generate { .. } = p {
            let mut f = seen.lock().unwrap();
            f.get_or_insert_with(Instant::now);
        }
    });
    let loading = Instant::now();
    let model = EmbeddedModel::load(config, Some(progress)).expect("model loads");
    let load_s = loading.elapsed().as_secs_f64();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut request = request.clone();
    request.max_tokens = 4; // only the first token is timed
    let started = Instant::now();
    rt.block_on(model.complete(&request)).expect("turn");
    let first_token_s = first
        .lock()
        .unwrap()
        .expect("a token was generated")
        .duration_since(started)
        .as_secs_f64();
    Run {
        load_s,
        first_token_s,
        stats: model.stats(),
    }
}

fn main() {
    let scratch = tempfile::tempdir().unwrap();
    let request = demo_request(scratch.path());
    let cache = scratch.path().join("prefix-cache");
    let baseline = run(&request, None);
    let first = run(&request, Some(&cache));
    let second = run(&request, Some(&cache));
    let entry_bytes: u64 = std::fs::read_dir(&cache)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "kv"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    println!(
        "Disk prefix cache: the demo's first question, notes toolset ({} tools), embedded Qwen2.5-Coder-1.5B Q4_K_M, {} threads",
        request.tools.len(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<30} {:>8} {:>14} {:>10} {:>10} {:>16}",
        "engine", "load s", "prompt tokens", "prefilled", "restored", "first token s"
    );
    for (name, r) in [
        ("cache off (baseline)", &baseline),
        ("first run (empty cache)", &first),
        ("second run (cache hit)", &second),
    ] {
        println!(
            "{:<30} {:>8.2} {:>14} {:>10} {:>10} {:>16.2}",
            name,
            r.load_s,
            r.stats.prompt_tokens,
            r.stats.prefilled_tokens,
            r.stats.restored_tokens,
            r.first_token_s
        );
    }
    println!(
        "entry on disk: {:.1} MB; second run: {:.1}x shorter time to first token than the first run, {:.1}x than the baseline",
        entry_bytes as f64 / 1e6,
        first.first_token_s / second.first_token_s.max(1e-9),
        baseline.first_token_s / second.first_token_s.max(1e-9)
    );
    assert_eq!(second.stats.prefix_cache_hits, 1, "{:?}", second.stats);
}
