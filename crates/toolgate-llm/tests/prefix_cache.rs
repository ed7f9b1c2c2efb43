//! The disk prefix cache on the real embedded model: a cached run gives the same transcript,
//! token for token, as an uncached one (greedy and seeded sampling, across separate engine
//! loads sharing a cache folder), and an entry from other settings, a corrupt or truncated one,
//! or one holding other tokens is ignored and the answer is still the uncached one. Small tool
//! sets and short turns keep the CPU bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::json;
use toolgate_llm::embedded::{
    EmbeddedConfig, EmbeddedModel, EngineStats, PromptTokenizer, fetched_model_path,
};
use toolgate_llm::{Message, Model, ModelRequest, StopReason, ToolCall, ToolDefinition};

/// One engine at a time: two would share the two cores and each test already loads several.
static SERIAL: Mutex<()> = Mutex::new(());

fn model_path() -> PathBuf {
    fetched_model_path().expect("the fetched model")
}

fn load(n_ctx: u32, cache: Option<&Path>) -> EmbeddedModel {
    let mut config = EmbeddedConfig::new(model_path());
    config.n_ctx = n_ctx;
    config.prefix_cache = cache.map(Path::to_path_buf);
    EmbeddedModel::load(config, None).expect("the model loads")
}

fn tool(name: &str, description: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: description.into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20}
            },
            "required": ["query"]
        }),
    }
}

const SYSTEM: &str = "You are an assistant with tools. You cannot see the user's data: call a tool to look \
it up before you answer, and never guess.";

/// Toolset A, greedy.
fn request_a() -> ModelRequest {
    let mut r = ModelRequest::new(
        vec![Message::user_text(
            "What budget did we settle on in the last meeting with the design team?",
        )],
        vec![tool("notes_search", "Searches the user's notes by words.")],
    );
    r.system = Some(SYSTEM.into());
    r.max_tokens = 12;
    r
}

/// Toolset B (another prefix), sampled with a fixed seed.
fn request_b() -> ModelRequest {
    let mut r = ModelRequest::new(
        vec![Message::user_text(
            "Which books by Suzanne Collins do I own? Then tell me a fun fact.",
        )],
        vec![
            tool("books_search", "Finds books in the catalogue by words."),
            tool("books_count", "Counts books matching words."),
        ],
    );
    r.system = Some(SYSTEM.into());
    r.max_tokens = 12;
    r.temperature = Some(0.7);
    r.seed = Some(7);
    r
}

/// What a turn said, token for token (the usage's cached count is how, not what).
#[derive(Debug, PartialEq)]
struct Turn {
    text: String,
    calls: Vec<ToolCall>,
    stop: StopReason,
    output_tokens: u64,
}

fn turn(model: &EmbeddedModel, request: &ModelRequest) -> Turn {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let r = rt.block_on(model.complete(request)).expect("a turn");
    Turn {
        text: r.text,
        calls: r.tool_calls,
        stop: r.stop_reason,
        output_tokens: r.usage.output_tokens,
    }
}

/// A, B, then A again (a switch back: A's prefix is no longer in memory).
fn three_turns(model: &EmbeddedModel) -> [Turn; 3] {
    [
        turn(model, &request_a()),
        turn(model, &request_b()),
        turn(model, &request_a()),
    ]
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| !p.to_string_lossy().ends_with(".digest.json"))
        .collect();
    names.sort();
    names
}

#[test]
fn the_fixed_prefix_ends_where_the_first_user_turn_begins() {
    let tokenizer = PromptTokenizer::load(&model_path()).unwrap();
    let request = request_a();
    let tokens = tokenizer.tokens(&request).unwrap();
    let p = tokenizer.prefix_len(&request).unwrap();
    assert!(p > 0 && p < tokens.len(), "{p} of {}", tokens.len());
    let head = tokenizer.detokenize(&tokens[..p]);
    let rest = tokenizer.detokenize(&tokens[p..]);
    assert!(
        head.contains("notes_search") && head.contains(SYSTEM),
        "{head}"
    );
    assert!(head.ends_with("<|im_end|>\n"), "{head:?}");
    assert!(rest.starts_with("<|im_start|>user\n"), "{rest:?}");
    // The user's words change nothing before the boundary.
    let mut other = request.clone();
    other.messages = vec![Message::user_text("Something else entirely.")];
    assert_eq!(tokenizer.prefix_len(&other).unwrap(), p);
    assert_eq!(tokenizer.tokens(&other).unwrap()[..p], tokens[..p]);
}

#[test]
fn cached_and_uncached_runs_give_the_same_transcript_token_for_token() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uncached = load(4096, None);
    let reference = three_turns(&uncached);
    let u = uncached.stats();
    drop(uncached);
    assert_eq!((u.prefix_cache_hits, u.prefix_cache_saves), (0, 0));

    // First process with the cache: nothing on disk, both prefixes computed and saved; the
    // switch back to A reads A's entry.
    let first = load(4096, Some(dir.path()));
    assert_eq!(three_turns(&first), reference);
    let s1 = first.stats();
    drop(first);
    assert_eq!(
        (
            s1.prefix_cache_hits,
            s1.prefix_cache_saves,
            s1.prefix_cache_ignored
        ),
        (1, 2, 0),
        "{s1:?}"
    );
    assert_eq!(entries(dir.path()).len(), 2);

    // A new process: every prefix comes from disk, the switch back to A included.
    let second = load(4096, Some(dir.path()));
    assert_eq!(three_turns(&second), reference);
    let s2 = second.stats();
    assert_eq!(
        (
            s2.prefix_cache_hits,
            s2.prefix_cache_saves,
            s2.prefix_cache_ignored
        ),
        (3, 0, 0),
        "{s2:?}"
    );
    assert!(s2.restored_tokens > 0);
    assert_eq!(
        s2.prefilled_tokens + s2.restored_tokens,
        u.prefilled_tokens,
        "the cache replaces prefill, token for token: {s2:?} vs {u:?}"
    );
}

fn ignored(stats: &EngineStats, before: &EngineStats) -> u64 {
    stats.prefix_cache_ignored - before.prefix_cache_ignored
}

#[test]
fn an_entry_from_other_settings_corrupt_truncated_or_with_other_tokens_is_ignored() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let reference = {
        let uncached = load(4096, None);
        (turn(&uncached, &request_a()), turn(&uncached, &request_b()))
    };

    // An entry made with another context size, for the same prefix.
    let other_dir = tempfile::tempdir().unwrap();
    {
        let other = load(2048, Some(other_dir.path()));
        turn(&other, &request_a());
        assert_eq!(other.stats().prefix_cache_saves, 1);
    }
    let other_entry = entries(other_dir.path()).remove(0);

    let dir = tempfile::tempdir().unwrap();
    let model = load(4096, Some(dir.path()));
    assert_eq!(turn(&model, &request_a()), reference.0);
    assert_eq!(turn(&model, &request_b()), reference.1);
    let [a_meta, b_meta] = {
        // Which entry is A's: the one whose prefix is shorter (one tool, not two).
        let mut e = entries(dir.path());
        assert_eq!(e.len(), 2);
        let len = |p: &Path| -> u64 {
            let meta: serde_json::Value =
                serde_json::from_str(&fs::read_to_string(p).unwrap()).unwrap();
            meta["prefix_len"].as_u64().unwrap()
        };
        e.sort_by_key(|p| len(p));
        [e[0].clone(), e[1].clone()]
    };
    let a_kv = a_meta.with_extension("kv");
    let good_meta = fs::read(&a_meta).unwrap();
    let good_kv = fs::read(&a_kv).unwrap();

    let tamperings: [(&str, Box<dyn Fn()>); 4] = [
        (
            "other settings",
            Box::new(|| {
                fs::copy(&other_entry, &a_meta).unwrap();
                fs::copy(other_entry.with_extension("kv"), &a_kv).unwrap();
            }),
        ),
        (
            "corrupt",
            Box::new(|| {
                let mut bytes = good_kv.clone();
                let mid = bytes.len() / 2;
                bytes[mid] ^= 0x55;
                fs::write(&a_kv, bytes).unwrap();
            }),
        ),
        (
            "truncated",
            Box::new(|| fs::write(&a_kv, &good_kv[..good_kv.len() - 4096]).unwrap()),
        ),
        (
            // B's state file under A's name, with metadata that vouches for it: only the
            // tokens the file holds tell it apart.
            "other tokens",
            Box::new(|| {
                let b: serde_json::Value =
                    serde_json::from_str(&fs::read_to_string(&b_meta).unwrap()).unwrap();
                let mut a: serde_json::Value = serde_json::from_slice(&good_meta).unwrap();
                a["kv_sha256"] = b["kv_sha256"].clone();
                a["kv_bytes"] = b["kv_bytes"].clone();
                fs::write(&a_meta, serde_json::to_vec(&a).unwrap()).unwrap();
                fs::copy(b_meta.with_extension("kv"), &a_kv).unwrap();
            }),
        ),
    ];
    for (what, tamper) in tamperings {
        tamper();
        let before = model.stats();
        // A is not in memory (B was last), so its entry is read, found wanting, and rebuilt.
        assert_eq!(turn(&model, &request_a()), reference.0, "{what}");
        let after = model.stats();
        assert_eq!(ignored(&after, &before), 1, "{what}: {after:?}");
        assert_eq!(after.prefix_cache_hits, before.prefix_cache_hits, "{what}");
        assert_eq!(
            after.prefix_cache_saves,
            before.prefix_cache_saves + 1,
            "{what}"
        );
        // The rebuilt entry is whole again.
        assert_eq!(fs::read(&a_kv).unwrap(), good_kv, "{what}");
        // Back to B, from its intact entry.
        assert_eq!(turn(&model, &request_b()), reference.1, "{what}");
        assert_eq!(model.stats().prefix_cache_hits, after.prefix_cache_hits + 1);
    }
}
