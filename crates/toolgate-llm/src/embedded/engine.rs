//! The llama.cpp engine: one model and one context, owned by one worker thread.
//!
//! Guarantees: the KV cache is kept between calls and only the tokens after the longest common
//! prefix with the previous prompt are processed (unless reuse is turned off, for measuring);
//! a prompt that cannot fit the context is refused before any work; tool calls are sampled
//! under the tool grammar, prose without it (the first sampled token decides, from the same
//! logits, so no work is repeated; a turn opening with a fence is read ahead and is a call only
//! if it is a fenced call object naming an offered tool, or a ```` ```python ```` fence with
//! code tools in the fenced form (`code_form`), then sampled again under the grammar from the
//! prompt's end; any other code block is prose); the prompt is tokenized so that only the
//! chat template's own text makes special tokens (see `prompt`), whatever the messages, tool
//! results and tool definitions hold; the grammar sampler is never `accept`ed by hand, since
//! `sample` already accepts and a second accept aborts the process.
//!
//! The fixed prefix (system prompt and tool definitions, see `prompt::PromptTokens`) is always
//! prefilled as its own segment from position 0 whenever it is not already in the KV cache
//! (a new process, or another toolset than the previous call's), and the rest after it; with
//! the disk prefix cache on (`prefix_cache`), that segment is loaded from disk instead when a
//! verified entry exists, and saved after it is computed. Either way the KV cache holds the
//! same bytes afterwards, so a cached and an uncached run compute exactly the same thing. A
//! cache that cannot be opened, read or written only costs time: it never fails a request.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use super::code_form::{self, CodeCalls};
use super::grammar;
use super::parse::{FenceVerdict, FirstPiece, fenced_call_verdict, first_piece, parse_output};
use super::prefix_cache::{PrefixCache, Rejection};
use super::prompt;
use crate::{LlmError, ModelRequest, ModelResponse, StopReason, ToolCall, Usage};

/// How to run the local model.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    pub model_path: PathBuf,
    /// Context window in tokens.
    pub n_ctx: u32,
    pub n_threads: i32,
    /// Tokens per decode call during prefill.
    pub n_batch: u32,
    pub seed: u32,
    /// Keep the KV cache between calls and process only what changed.
    pub reuse_kv: bool,
    /// Constrain a tool call, once the model starts one, to the offered tools' schemas (a
    /// grammar). Off, calls are parsed as the model wrote them, as with an API whose strict
    /// mode is off; the model's name then ends in `+unconstrained`.
    pub constrain_calls: bool,
    /// The folder of the disk prefix cache (see `prefix_cache`); `None` turns it off.
    pub prefix_cache: Option<PathBuf>,
    /// How calls to code tools are written (`code_form`); with `Fenced` the model's name ends
    /// in `+fenced-code`.
    pub code_calls: CodeCalls,
}

impl EmbeddedConfig {
    pub fn new(model_path: PathBuf) -> Self {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        EmbeddedConfig {
            model_path,
            n_ctx: 32_768,
            n_threads: i32::try_from(threads).unwrap_or(2),
            n_batch: 512,
            seed: 1234,
            reuse_kv: true,
            constrain_calls: true,
            prefix_cache: None,
            code_calls: CodeCalls::Json,
        }
    }
}

/// What the engine did, cumulatively, for benchmarks and traces.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct EngineStats {
    pub calls: u64,
    /// Prompt tokens across calls.
    pub prompt_tokens: u64,
    /// Prompt tokens served from the KV cache.
    pub reused_tokens: u64,
    /// Prompt tokens actually processed.
    pub prefilled_tokens: u64,
    pub generated_tokens: u64,
    pub prefill_seconds: f64,
    pub generate_seconds: f64,
    /// Fixed prefixes loaded from the disk cache, and the tokens they held (also counted in
    /// `reused_tokens`).
    pub prefix_cache_hits: u64,
    pub restored_tokens: u64,
    /// Fixed prefixes computed and written to the disk cache.
    pub prefix_cache_saves: u64,
    /// Entries found but not trusted (other model or settings, corrupt, other tokens), and
    /// writes that failed.
    pub prefix_cache_ignored: u64,
}

/// Progress of one call, reported while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Prefill { done: usize, total: usize },
    Generate { tokens: usize },
}

pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

static BACKEND: std::sync::OnceLock<Result<LlamaBackend, String>> = std::sync::OnceLock::new();

pub(super) fn backend() -> Result<&'static LlamaBackend, LlmError> {
    let init = BACKEND.get_or_init(|| {
        LlamaBackend::init()
            .map(|mut b| {
                b.void_logs();
                b
            })
            .map_err(|e| e.to_string())
    });
    init.as_ref()
        .map_err(|e| LlmError::Engine(format!("llama.cpp did not start: {e}")))
}

pub(super) struct Engine {
    model: &'static LlamaModel,
    ctx: LlamaContext<'static>,
    template: String,
    specials: prompt::SpecialTexts,
    cached: Vec<LlamaToken>,
    config: EmbeddedConfig,
    prefix_cache: Option<PrefixCache>,
    pub stats: EngineStats,
}

impl Engine {
    pub fn load(config: EmbeddedConfig) -> Result<Engine, LlmError> {
        if !config.model_path.is_file() {
            return Err(LlmError::Config(format!(
                "no model file at {}; run scripts/fetch-model.py to fetch and verify it",
                config.model_path.display()
            )));
        }
        let backend = backend()?;
        let model =
            LlamaModel::load_from_file(backend, &config.model_path, &LlamaModelParams::default())
                .map_err(|e| {
                LlmError::Engine(format!("cannot load {}: {e}", config.model_path.display()))
            })?;
        // The model lives as long as the process: the context borrows it, and the worker
        // thread that owns both never ends before the process does.
        let model: &'static LlamaModel = Box::leak(Box::new(model));
        let template = chat_template(model)?;
        let specials = prompt::special_texts(model);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(config.n_ctx))
            .with_n_batch(config.n_batch)
            .with_n_threads(config.n_threads)
            .with_n_threads_batch(config.n_threads);
        let prefix_cache = config.prefix_cache.as_deref().and_then(|dir| {
            let settings = super::prefix_cache::settings_text(
                config.n_ctx,
                params.n_batch(),
                params.n_ubatch(),
                config.n_threads,
                &format!("{:?}", params.type_k()),
                &format!("{:?}", params.type_v()),
                i64::from(params.flash_attention_policy()),
                params.swa_full(),
            );
            PrefixCache::open(dir, &config.model_path, settings)
                .inspect_err(|e| note(&format!("off for this process: {e}")))
                .ok()
        });
        let ctx = model.new_context(backend, params).map_err(|e| {
            LlmError::Engine(format!(
                "cannot create a context of {} tokens: {e}",
                config.n_ctx
            ))
        })?;
        Ok(Engine {
            model,
            ctx,
            template,
            specials,
            cached: Vec::new(),
            config,
            prefix_cache,
            stats: EngineStats::default(),
        })
    }

    pub fn complete(
        &mut self,
        request: &ModelRequest,
        progress: Option<&ProgressFn>,
    ) -> Result<ModelResponse, LlmError> {
        // The code tools whose calls are written in the fenced form: shown so, sampled under
        // their grammar, parsed back into the `code` argument.
        let code_tools = code_form::offered_code_tools(request, self.config.code_calls);
        let shown = code_form::prompt_request(request, &code_tools);
        let prompt::PromptTokens { tokens, prefix_len } =
            prompt::prompt_tokens(self.model, &self.template, &self.specials, &shown)?;
        if tokens.is_empty() {
            return Err(LlmError::Engine("the prompt rendered to no tokens".into()));
        }
        let needed = tokens.len() + request.max_tokens as usize;
        if needed > self.config.n_ctx as usize {
            return Err(LlmError::Engine(format!(
                "the conversation needs {} tokens ({} prompt + {} to generate) but the context holds {}; \
                 use a larger context or fewer tool results",
                needed,
                tokens.len(),
                request.max_tokens,
                self.config.n_ctx
            )));
        }
        let started = Instant::now();
        let (start, prefix_prefilled) = self.prepare_cache(&tokens, prefix_len, progress)?;
        let logits_index = self.prefill(&tokens[start..], start, progress)?;
        // Tokens this call did not compute: kept in memory or restored from disk.
        let reused = start - prefix_prefilled;
        let prefill_seconds = started.elapsed().as_secs_f64();
        let generate_start = Instant::now();
        let (output, generated, hit_limit) =
            self.generate(request, &code_tools, tokens.len(), logits_index, progress)?;
        let generate_seconds = generate_start.elapsed().as_secs_f64();

        self.stats.calls += 1;
        self.stats.prompt_tokens += tokens.len() as u64;
        self.stats.reused_tokens += reused as u64;
        self.stats.prefilled_tokens += (tokens.len() - reused) as u64;
        self.stats.generated_tokens += generated as u64;
        self.stats.prefill_seconds += prefill_seconds;
        self.stats.generate_seconds += generate_seconds;

        let (text, parsed) = parse_output(&output, &code_tools);
        let tool_calls: Vec<ToolCall> = parsed
            .into_iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: format!("call_{}_{}", self.stats.calls, i + 1),
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        let stop_reason = if !tool_calls.is_empty() {
            StopReason::ToolUse
        } else if hit_limit {
            StopReason::MaxTokens
        } else {
            StopReason::EndTurn
        };
        Ok(ModelResponse {
            text,
            tool_calls,
            stop_reason,
            usage: Usage {
                input_tokens: tokens.len() as u64,
                output_tokens: generated as u64,
                cached_input_tokens: reused as u64,
            },
            model: self.model_name(),
        })
    }

    pub fn model_name(&self) -> String {
        self.config
            .model_path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".into())
    }

    /// Keeps the longest common prefix of the cache and `tokens` (at least one token is always
    /// reprocessed, to get fresh logits); when that does not cover the fixed prefix (its first
    /// `prefix_len` tokens), the cache is cleared and the prefix is loaded from disk or
    /// prefilled alone. Returns how many tokens are in the cache now (where prefill resumes)
    /// and how many of them were prefilled here.
    fn prepare_cache(
        &mut self,
        tokens: &[LlamaToken],
        prefix_len: usize,
        progress: Option<&ProgressFn>,
    ) -> Result<(usize, usize), LlmError> {
        let mut keep = if self.config.reuse_kv {
            self.cached
                .iter()
                .zip(tokens)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            0
        };
        if keep >= tokens.len() {
            keep = tokens.len() - 1;
        }
        if prefix_len > 0 && prefix_len < tokens.len() && keep < prefix_len {
            return self.restore_prefix(&tokens[..prefix_len], progress);
        }
        let from = u32::try_from(keep).map_err(|_| LlmError::Engine("prompt too long".into()))?;
        if keep == 0 {
            self.ctx.clear_kv_cache();
        } else {
            self.ctx
                .clear_kv_cache_seq(Some(0), Some(from), None)
                .map_err(|e| LlmError::Engine(format!("cannot trim the KV cache: {e}")))?;
        }
        self.cached.truncate(keep);
        Ok((keep, 0))
    }

    /// An empty KV cache, then `prefix` in it: from the disk cache when a verified entry
    /// exists, else prefilled from position 0 (and saved). Returns `prefix.len()` and how many
    /// tokens were prefilled (0 or `prefix.len()`).
    fn restore_prefix(
        &mut self,
        prefix: &[LlamaToken],
        progress: Option<&ProgressFn>,
    ) -> Result<(usize, usize), LlmError> {
        self.ctx.clear_kv_cache();
        self.cached.clear();
        let ids: Vec<i32> = prefix.iter().map(|t| t.0).collect();
        let key = self.prefix_cache.as_ref().map(|c| c.key(&ids));
        if let (Some(cache), Some(key)) = (&self.prefix_cache, &key) {
            let loaded = cache.verified_state(key).and_then(|path| {
                // Room for any saved length the context could hold, so a file with other
                // tokens is read and told apart by its tokens, not refused for its length.
                let room = (self.config.n_ctx as usize).max(prefix.len());
                match self.ctx.state_seq_load_file(&path, 0, room) {
                    Ok((saved, _)) if saved == prefix => Ok(()),
                    Ok(_) => Err(Rejection::TokensDiffer),
                    Err(_) => Err(Rejection::Refused),
                }
            });
            match loaded {
                Ok(()) => {
                    self.cached.extend_from_slice(prefix);
                    self.stats.prefix_cache_hits += 1;
                    self.stats.restored_tokens += prefix.len() as u64;
                    return Ok((prefix.len(), 0));
                }
                Err(why) => {
                    // Whatever a refused file left in the cache goes.
                    self.ctx.clear_kv_cache();
                    if why.is_notable() {
                        self.stats.prefix_cache_ignored += 1;
                        note(&format!(
                            "ignored the entry for this prompt's {} prefix tokens: {why}",
                            prefix.len()
                        ));
                    }
                }
            }
        }
        self.prefill(prefix, 0, progress)?;
        if let (Some(cache), Some(key)) = (&self.prefix_cache, &key) {
            let ctx = &self.ctx;
            match cache.store(key, |path| {
                ctx.state_seq_save_file(path, 0, prefix)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }) {
                Ok(()) => self.stats.prefix_cache_saves += 1,
                Err(e) => {
                    self.stats.prefix_cache_ignored += 1;
                    note(&format!("not saved: {e}"));
                }
            }
        }
        Ok((prefix.len(), prefix.len()))
    }

    /// Decodes `tokens` at positions from `start`; returns the batch index holding the last
    /// token's logits.
    fn prefill(
        &mut self,
        tokens: &[LlamaToken],
        start: usize,
        progress: Option<&ProgressFn>,
    ) -> Result<i32, LlmError> {
        let n_batch = self.config.n_batch as usize;
        let total = tokens.len();
        let mut batch = LlamaBatch::new(n_batch, 1);
        let mut last_index = 0;
        for (chunk_index, chunk) in tokens.chunks(n_batch).enumerate() {
            batch.clear();
            let last_chunk = (chunk_index + 1) * n_batch >= total;
            for (i, token) in chunk.iter().enumerate() {
                let pos = start + chunk_index * n_batch + i;
                let logits = last_chunk && i + 1 == chunk.len();
                batch
                    .add(*token, pos_i32(pos)?, &[0], logits)
                    .map_err(|e| LlmError::Engine(format!("batch: {e}")))?;
            }
            self.ctx
                .decode(&mut batch)
                .map_err(|e| LlmError::Engine(format!("prefill failed: {e}")))?;
            self.cached.extend_from_slice(chunk);
            last_index = chunk.len().saturating_sub(1);
            if let Some(report) = progress {
                report(Progress::Prefill {
                    done: (chunk_index * n_batch + chunk.len()).min(total),
                    total,
                });
            }
        }
        i32::try_from(last_index).map_err(|_| LlmError::Engine("batch index out of range".into()))
    }

    fn sampler_chain(
        &self,
        constrained: Option<&str>,
        (temperature, seed): (Option<f32>, Option<u64>),
    ) -> Result<LlamaSampler, LlmError> {
        let mut chain = Vec::new();
        if let Some(grammar_text) = constrained {
            chain.push(
                LlamaSampler::grammar(self.model, grammar_text, "root")
                    .map_err(|e| LlmError::Engine(format!("the tool grammar was refused: {e}")))?,
            );
        }
        match temperature {
            Some(t) if t > 0.0 => {
                chain.push(LlamaSampler::temp(t));
                // The request's seed when it names one (an eval run's), folded to 32 bits.
                let seed = seed.map_or(self.config.seed, |s| (s ^ (s >> 32)) as u32);
                chain.push(LlamaSampler::dist(seed));
            }
            _ => chain.push(LlamaSampler::greedy()),
        }
        Ok(LlamaSampler::chain_simple(chain))
    }

    fn tool_grammar(
        &self,
        request: &ModelRequest,
        code_tools: &[String],
    ) -> Result<Option<String>, LlmError> {
        if !self.config.constrain_calls {
            return Ok(None);
        }
        grammar::request_grammar(request, code_tools)
    }

    /// Generates until end of turn or `max_tokens`; returns the text, the token count and
    /// whether the limit was hit.
    fn generate(
        &mut self,
        request: &ModelRequest,
        code_tools: &[String],
        prompt_len: usize,
        first_logits_index: i32,
        progress: Option<&ProgressFn>,
    ) -> Result<(String, usize, bool), LlmError> {
        let grammar_text = self.tool_grammar(request, code_tools)?;
        let must_call = request.tool_choice.must_call();
        let offered: Vec<&str> = request
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .filter(|name| request.tool_choice.allows(name))
            .collect();
        let mut free = self.sampler_chain(None, (request.temperature, request.seed))?;
        let mut sampler = match (&grammar_text, must_call) {
            (Some(g), true) => self.sampler_chain(Some(g), (request.temperature, request.seed))?,
            _ => self.sampler_chain(None, (request.temperature, request.seed))?,
        };
        let mut logits_index = first_logits_index;
        let vocab = self.model.vocab();
        let mut pieces: Vec<u8> = Vec::new();
        // Tokens generated and kept; `spent` also counts those read ahead and dropped.
        let mut generated = 0usize;
        let mut spent = 0usize;
        let mut pos = prompt_len;
        let mut batch = LlamaBatch::new(1, 1);
        let max = request.max_tokens as usize;
        // The first token decides between prose and calls, from the same logits (see
        // `parse::first_piece`); after a fence, the turn is read ahead (`reading_fence`) until
        // it is a fenced call to an offered tool or plainly a code block.
        let mut first_decided = must_call;
        let mut reading_fence = false;
        while generated < max {
            let token = if !first_decided {
                first_decided = true;
                let first = free.sample(&self.ctx, logits_index);
                let piece = vocab.token_to_piece(first, true, None);
                match (&grammar_text, first_piece(&piece)) {
                    (Some(g), FirstPiece::Call) => {
                        sampler =
                            self.sampler_chain(Some(g), (request.temperature, request.seed))?;
                        sampler.sample(&self.ctx, logits_index)
                    }
                    (Some(_), FirstPiece::Fence) => {
                        reading_fence = true;
                        first
                    }
                    _ => first,
                }
            } else {
                sampler.sample(&self.ctx, logits_index)
            };
            if vocab.is_eog(token) {
                return Ok((String::from_utf8_lossy(&pieces).into_owned(), spent, false));
            }
            pieces.extend(vocab.token_to_piece(token, true, None));
            generated += 1;
            spent += 1;
            if let Some(report) = progress {
                report(Progress::Generate { tokens: spent });
            }
            batch.clear();
            batch
                .add(token, pos_i32(pos)?, &[0], true)
                .map_err(|e| LlmError::Engine(format!("batch: {e}")))?;
            self.ctx
                .decode(&mut batch)
                .map_err(|e| LlmError::Engine(format!("generation failed: {e}")))?;
            self.cached.push(token);
            pos += 1;
            logits_index = 0;
            if reading_fence {
                let verdict = fenced_call_verdict(
                    &String::from_utf8_lossy(&pieces),
                    &offered,
                    !code_tools.is_empty(),
                );
                match (verdict, &grammar_text) {
                    (FenceVerdict::Undecided, _) if generated < FENCE_LOOKAHEAD => {}
                    (FenceVerdict::Call, Some(g)) => {
                        // Back to the end of the prompt: drop what was read ahead, decode the
                        // prompt's last token again for its logits, sample under the grammar.
                        self.rewind_to_prompt_end(prompt_len, &mut batch)?;
                        pieces.clear();
                        generated = 0;
                        pos = prompt_len;
                        reading_fence = false;
                        sampler =
                            self.sampler_chain(Some(g), (request.temperature, request.seed))?;
                    }
                    _ => reading_fence = false,
                }
            }
        }
        Ok((String::from_utf8_lossy(&pieces).into_owned(), spent, true))
    }

    /// Drops every token after the prompt from the KV cache and decodes the prompt's last
    /// token again, so its logits are at batch index 0.
    fn rewind_to_prompt_end(
        &mut self,
        prompt_len: usize,
        batch: &mut LlamaBatch,
    ) -> Result<(), LlmError> {
        let last_index = prompt_len
            .checked_sub(1)
            .ok_or_else(|| LlmError::Engine("an empty prompt cannot be rewound".into()))?;
        let last = *self
            .cached
            .get(last_index)
            .ok_or_else(|| LlmError::Engine("the cache lost the prompt".into()))?;
        let from =
            u32::try_from(last_index).map_err(|_| LlmError::Engine("prompt too long".into()))?;
        self.ctx
            .clear_kv_cache_seq(Some(0), Some(from), None)
            .map_err(|e| LlmError::Engine(format!("cannot trim the KV cache: {e}")))?;
        self.cached.truncate(last_index);
        batch.clear();
        batch
            .add(last, pos_i32(last_index)?, &[0], true)
            .map_err(|e| LlmError::Engine(format!("batch: {e}")))?;
        self.ctx
            .decode(batch)
            .map_err(|e| LlmError::Engine(format!("generation failed: {e}")))?;
        self.cached.push(last);
        Ok(())
    }
}

/// Most tokens read after a turn's opening fence before it counts as a code block.
const FENCE_LOOKAHEAD: usize = 32;

/// The chat template the model file carries.
pub(super) fn chat_template(model: &LlamaModel) -> Result<String, LlmError> {
    model
        .chat_template(None)
        .map_err(|e| LlmError::Engine(format!("the model file has no chat template: {e}")))?
        .to_string()
        .map_err(|e| LlmError::Engine(format!("the chat template is not UTF-8: {e}")))
}

/// One line on stderr about the disk prefix cache: it only ever costs time, so it warns and
/// goes on.
fn note(text: &str) {
    eprintln!("toolgate: prefix cache: {text}");
}

fn pos_i32(pos: usize) -> Result<i32, LlmError> {
    i32::try_from(pos).map_err(|_| LlmError::Engine("position out of range".into()))
}
