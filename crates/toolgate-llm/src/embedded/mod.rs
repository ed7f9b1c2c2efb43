//! `embedded`: a model run in-process with llama.cpp, the default when no API key is set. It
//! needs no network: the GGUF file is fetched and verified beforehand by
//! `scripts/fetch-model.py`, and this module only loads a file that exists.

pub mod code_form;
mod engine;
pub mod grammar;
pub mod parse;
pub mod prefix_cache;
mod prompt;
pub mod pyjson;
pub mod template;

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

pub use code_form::CodeCalls;
pub use engine::{EmbeddedConfig, EngineStats, Progress, ProgressFn};
pub use prompt::PromptTokenizer;

use crate::{BoxFuture, LlmError, Model, ModelRequest, ModelResponse};

/// The file name `scripts/fetch-model.py` writes for each model it knows.
pub const DEFAULT_MODEL_FILE: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
pub const SMALL_MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/// The disk prefix cache's folder from the environment: `$TOOLGATE_PREFIX_CACHE` names a folder,
/// or turns the cache off when `off` or `0` (for measuring); unset, it is
/// `$XDG_CACHE_HOME/toolgate/prefix-cache`, else `~/.cache/toolgate/prefix-cache`.
pub fn prefix_cache_dir_from_env() -> Option<PathBuf> {
    match std::env::var_os("TOOLGATE_PREFIX_CACHE").filter(|v| !v.is_empty()) {
        Some(v) if v == "off" || v == "0" => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => cache_home().map(|c| c.join("toolgate").join("prefix-cache")),
    }
}

/// `$XDG_CACHE_HOME`, else `~/.cache`.
fn cache_home() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
}

/// Where the fetched model lives: `$TOOLGATE_MODEL` (a file), else `$TOOLGATE_MODEL_DIR`, else
/// `$XDG_CACHE_HOME/toolgate/models`, else `~/.cache/toolgate/models`.
pub fn default_model_path() -> Option<PathBuf> {
    if let Some(file) = std::env::var_os("TOOLGATE_MODEL").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(file));
    }
    let dir = match std::env::var_os("TOOLGATE_MODEL_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => cache_home()?.join("toolgate").join("models"),
    };
    Some(dir.join(DEFAULT_MODEL_FILE))
}

/// The fetched model file at [`default_model_path`], or an error that says how to get it.
pub fn fetched_model_path() -> Result<PathBuf, LlmError> {
    let path = default_model_path().ok_or_else(|| {
        LlmError::Config("cannot tell where the model cache is: set TOOLGATE_MODEL".into())
    })?;
    if path.is_file() {
        Ok(path)
    } else {
        Err(LlmError::Config(format!(
            "no model at {}: run scripts/fetch-model.py first (or set TOOLGATE_MODEL to a GGUF file)",
            path.display()
        )))
    }
}

struct Job {
    request: ModelRequest,
    reply: tokio::sync::oneshot::Sender<Result<ModelResponse, LlmError>>,
}

/// A handle on the worker thread that owns the engine. Calls are served one at a time.
pub struct EmbeddedModel {
    name: String,
    jobs: Mutex<mpsc::Sender<Job>>,
    stats: Arc<Mutex<EngineStats>>,
}

impl EmbeddedModel {
    /// Loads the model (seconds) on a new worker thread; `progress` hears about long work.
    pub fn load(config: EmbeddedConfig, progress: Option<ProgressFn>) -> Result<Self, LlmError> {
        let mut suffix = String::new();
        if !config.constrain_calls {
            suffix.push_str("+unconstrained");
        }
        if config.code_calls == CodeCalls::Fenced {
            suffix.push_str("+fenced-code");
        }
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<String, LlmError>>();
        let stats = Arc::new(Mutex::new(EngineStats::default()));
        let worker_stats = Arc::clone(&stats);
        std::thread::Builder::new()
            .name("toolgate-embedded-model".into())
            .spawn(move || {
                let mut engine = match engine::Engine::load(config) {
                    Ok(engine) => {
                        let _ = ready_tx.send(Ok(engine.model_name()));
                        engine
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                // Ends when every handle is dropped and the channel closes.
                for job in jobs_rx {
                    let result = engine.complete(&job.request, progress.as_ref());
                    if let Ok(mut s) = worker_stats.lock() {
                        *s = engine.stats;
                    }
                    let _ = job.reply.send(result);
                }
            })
            .map_err(|e| LlmError::Engine(format!("cannot start the model thread: {e}")))?;
        let model = ready_rx
            .recv()
            .map_err(|_| LlmError::Engine("the model thread stopped while loading".into()))??;
        Ok(EmbeddedModel {
            name: format!("embedded:{model}{suffix}"),
            jobs: Mutex::new(jobs_tx),
            stats,
        })
    }

    /// What the engine has done so far.
    pub fn stats(&self) -> EngineStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }
}

impl Model for EmbeddedModel {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
        Box::pin(async move {
            let (reply, answer) = tokio::sync::oneshot::channel();
            let job = Job {
                request: request.clone(),
                reply,
            };
            self.jobs
                .lock()
                .map_err(|_| LlmError::Engine("the model handle is poisoned".into()))?
                .send(job)
                .map_err(|_| LlmError::Engine("the model thread has stopped".into()))?;
            answer
                .await
                .map_err(|_| LlmError::Engine("the model thread stopped during the call".into()))?
        })
    }
}
