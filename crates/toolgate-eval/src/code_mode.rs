//! The seeds' code-mode measurement: "find every note that mentions the budget", asked of the
//! same model over the same notebook two ways: tool by tool (the notes tools, the model pages
//! through search results itself) and as one script (`code_execution` only, the notes tools as
//! its functions and the notebook mounted read-only). Each arm reports the tokens in context
//! (the largest prompt of the run), all input tokens, the model's tool calls, the calls the
//! dispatcher ran (a script's included), model turns, wall time, and correctness against SQL
//! over the store; a larger notebook (the sample plus generated notes) shows how each grows.
//!
//! Each arm's conversation is kept as `transcript-<notes>-<arm>.json` (greedy), or
//! `transcript-<notes>-<arm>-run<i>.json` for the i-th of several sampled runs.
//!
//! Sampled runs (`runs` > 1 with a `temperature`): each model arm runs `runs` times per notebook,
//! run i with seed [`crate::runner::run_seed`]`(seed, "code-mode-<notes>", i)`, the same for
//! every arm and every call form, so two measurements with the same seed pair run by run; the
//! stand-in arms run once. Besides the answer's correctness, each run records whether a script
//! it ran printed every right id and the count with no wrong id (`script_correct`): what "the
//! model produced a correct script" means, whatever its final answer made of the output.
//!
//! Guarantees: the truth is computed from the store, never from the model; each arm starts from
//! a fresh copy of the notebook; runs are appended to `runs.jsonl` as they finish and
//! `--resume` skips the runs already there (refusing a folder made with another question,
//! model, temperature or seed).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use toolgate_agent::{Agent, AgentConfig};
use toolgate_core::Principal;
use toolgate_core::trace::MemoryTrace;
use toolgate_llm::{BoxFuture, LlmError, Model, ModelRequest, ModelResponse};
use toolgate_sandbox::{FailedScripts, Paging, SandboxConfig};
use toolgate_wiring::{CodeOptions, ExitsConfig, ExtraTools, Seat, Store, StoreKind, ToolsetName};

pub const RUNS_FILE: &str = "runs.jsonl";
pub const QUESTION: &str = "Find every note whose title or text contains the word \"budget\" (any case). Answer with how many there are and the list of their note ids.";
/// The generator seed of the extra notes (fixed: every run sees the same notebook).
const EXTRA_SEED: u64 = 20_251_202;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arm {
    /// The notes tools, called by the model one by one.
    ToolByTool,
    /// `code_execution` only; the notes tools are its script's functions.
    Script,
    /// The script arm with a stand-in model that writes a correct script and answers with
    /// what it printed: what code mode costs when the script is right (labelled as such).
    ReferenceScript,
    /// The tool-by-tool arm with a stand-in that pages through every `notes_search` result
    /// and answers with every id: what tool by tool costs when it is done completely.
    ReferenceToolByTool,
}

impl Arm {
    pub fn as_str(self) -> &'static str {
        match self {
            Arm::ToolByTool => "tool-by-tool",
            Arm::Script => "script",
            Arm::ReferenceScript => "reference-script",
            Arm::ReferenceToolByTool => "reference-tool-by-tool",
        }
    }

    /// Whether a stand-in, not the model, plays this arm.
    pub fn is_reference(self) -> bool {
        matches!(self, Arm::ReferenceScript | Arm::ReferenceToolByTool)
    }

    /// Whether the model is shown `code_execution` only.
    fn code(self) -> bool {
        match self {
            Arm::Script | Arm::ReferenceScript => true,
            Arm::ToolByTool | Arm::ReferenceToolByTool => false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CodeModeError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Wiring(#[from] toolgate_wiring::WiringError),
    #[error("the notebook could not be prepared: {0}")]
    Store(String),
    #[error(
        "{path} holds runs of another measurement ({found}); use another --out or leave out --resume"
    )]
    Mismatch { path: String, found: String },
    #[error(
        "the two folders are not paired ({0}): compare runs of the same --temperature, --seed, --runs and notebooks"
    )]
    NotPaired(String),
}

fn io(path: &Path, source: std::io::Error) -> CodeModeError {
    CodeModeError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// One arm on one notebook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmRun {
    pub arm: Arm,
    pub notes: usize,
    pub model: String,
    pub question: String,
    pub expected_count: usize,
    /// Ids the answer names that are in the truth, and those it names that are not.
    pub found: usize,
    pub wrong: usize,
    /// The answer states the right count and names exactly the right ids.
    pub correct: bool,
    pub count_right: bool,
    /// The largest request of the run (system, tool definitions and messages), counted with
    /// one tokenizer (o200k, `crate::tokens`) for every arm and model: tokens in context at the end.
    pub context_tokens: u64,
    /// The largest prompt as the model itself counted it (0 for the stand-in).
    pub model_prompt_tokens: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub model_turns: u32,
    /// Calls the model made itself.
    pub model_tool_calls: usize,
    /// Calls the dispatcher ran (a script's calls included).
    pub dispatcher_calls: usize,
    pub wall_ms: u64,
    pub stop: String,
    pub answer: Option<String>,
    /// Which run of this arm on this notebook (0 for the first, and for a greedy measurement).
    #[serde(default)]
    pub run: usize,
    /// The sampling temperature and this run's seed (`None`: greedy).
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub seed: Option<u64>,
    /// For the script arms: whether a script of the run printed every right id and the count,
    /// and no wrong id (`None` for the tool-by-tool arms and runs saved before it was kept).
    #[serde(default)]
    pub script_correct: Option<bool>,
    /// For the script arms: the exit code of the run's last script (`None` when none ran).
    #[serde(default)]
    pub script_exit: Option<i64>,
    /// Whether the run's first request asked for a tool call (`tool_choice: any`).
    #[serde(default)]
    pub first_round_must_call: bool,
    /// Whether the run's scripts had `<tool>_all` for each paged tool
    /// (`toolgate_sandbox::Paging::AlsoAllPages`).
    #[serde(default)]
    pub all_pages: bool,
    /// Whether a script that failed came back as a refused call, and the loop retried a
    /// refused call once with the call required (`toolgate_sandbox::FailedScripts::Refused`,
    /// `AgentConfig::retry_refused_calls`, `AgentConfig::retry_must_call`).
    #[serde(default)]
    pub failed_script_errors: bool,
}

/// The levers a model run was measured with, recorded in every run; a resume refuses a folder
/// measured with others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunLevers {
    /// The first request asks for a tool call (`AgentConfig::first_round_must_call`).
    pub first_round_must_call: bool,
    /// Scripts get `<tool>_all` for each paged tool (`toolgate_sandbox::Paging::AlsoAllPages`).
    pub all_pages: bool,
    /// A failed script is a refused call, and the loop retries a refused call once, the
    /// retry's request requiring a call of the refused tool.
    pub failed_script_errors: bool,
}

impl RunLevers {
    fn paging(self) -> Paging {
        if self.all_pages {
            Paging::AlsoAllPages
        } else {
            Paging::ByPage
        }
    }

    fn failed_scripts(self) -> FailedScripts {
        if self.failed_script_errors {
            FailedScripts::Refused
        } else {
            FailedScripts::Reported
        }
    }

    fn of(run: &ArmRun) -> Self {
        RunLevers {
            first_round_must_call: run.first_round_must_call,
            all_pages: run.all_pages,
            failed_script_errors: run.failed_script_errors,
        }
    }
}

/// Wraps a model to measure every request and keep the usage of every response.
struct Metered {
    inner: Arc<dyn Model>,
    /// (tokens of the request by o200k, prompt tokens the model reported), per request.
    prompts: Mutex<Vec<(u64, u64)>>,
}

impl Model for Metered {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
        Box::pin(async move {
            let counted = serde_json::to_value(request)
                .map(|v| crate::tokens::count_json(&v) as u64)
                .unwrap_or(0);
            let response = self.inner.complete(request).await?;
            if let Ok(mut prompts) = self.prompts.lock() {
                prompts.push((counted, response.usage.input_tokens));
            }
            Ok(response)
        })
    }
}

/// The script a competent model writes for [`QUESTION`]: every note of the export, its title
/// and text (the front matter left out) searched in the script, only the ids printed.
pub const REFERENCE_SCRIPT: &str = r#"import json
index = json.load(open('/sandbox/data/index.json'))
ids = []
for entry in index:
    text = open('/sandbox/data/' + entry['file']).read()
    body = text.split('\n---\n', 1)[1] if text.startswith('---\n') else text
    if 'budget' in (entry['title'] + ' ' + body).lower():
        ids.append(entry['id'])
print(len(ids), 'notes mention the budget:', ', '.join(str(i) for i in ids))
"#;

/// Rounds a stand-in may take (a page of 20 hits per round: 4,000 matches).
const REFERENCE_MAX_ROUNDS: u32 = 200;

fn stand_in_response(
    name: &str,
    text: String,
    call: Option<toolgate_llm::ToolCall>,
) -> ModelResponse {
    ModelResponse {
        text,
        stop_reason: if call.is_some() {
            toolgate_llm::StopReason::ToolUse
        } else {
            toolgate_llm::StopReason::EndTurn
        },
        tool_calls: call.into_iter().collect(),
        usage: toolgate_llm::Usage {
            input_tokens: 0,
            output_tokens: 0,
            cached_input_tokens: 0,
        },
        model: name.to_owned(),
    }
}

/// The tool results of a conversation, parsed, oldest first.
fn tool_results(request: &ModelRequest) -> Vec<serde_json::Value> {
    request
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            toolgate_llm::ContentBlock::ToolResult(r) => serde_json::from_str(&r.content).ok(),
            toolgate_llm::ContentBlock::Text { .. } | toolgate_llm::ContentBlock::ToolCall(_) => {
                None
            }
        })
        .collect()
}

/// The stand-in of [`Arm::ReferenceToolByTool`]: `notes_search` for "budget", 20 hits a
/// page, each next page until none is left, then every id it read.
struct ReferencePaging;

impl Model for ReferencePaging {
    fn name(&self) -> String {
        "reference-tool-by-tool".to_owned()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
        let results = tool_results(request);
        let next = match results.last() {
            None => Some(0),
            Some(last) => last["result"]["next_offset"].as_u64(),
        };
        let response = match next {
            Some(offset) => stand_in_response(
                &self.name(),
                String::new(),
                Some(toolgate_llm::ToolCall {
                    id: format!("page-{offset}"),
                    name: "notes_search".to_owned(),
                    arguments: serde_json::json!({"query": "budget", "limit": 20, "offset": offset}),
                }),
            ),
            None => {
                let ids: Vec<String> = results
                    .iter()
                    .flat_map(|r| r["result"]["hits"].as_array().cloned().unwrap_or_default())
                    .filter_map(|h| h["id"].as_i64().map(|id| id.to_string()))
                    .collect();
                stand_in_response(
                    &self.name(),
                    format!("{} notes mention the budget: {}", ids.len(), ids.join(", ")),
                    None,
                )
            }
        };
        Box::pin(async move { Ok(response) })
    }
}

/// What one `code_execution` result says: the script's stdout and exit code. A failed script
/// refused as a call (`FailedScripts::Refused`) carries its stdout in the error, and its exit
/// code in the error's message (`toolgate_sandbox::tool::refused_exit_code`).
fn script_output(result: &serde_json::Value) -> (String, Option<i64>) {
    let (untrusted, exit_code) = match result.get("error") {
        Some(error) => (
            &error["untrusted_content"],
            error["message"]
                .as_str()
                .and_then(toolgate_sandbox::tool::refused_exit_code),
        ),
        None => (
            &result["untrusted_content"],
            result["result"]["exit_code"].as_i64(),
        ),
    };
    let printed = untrusted
        .as_array()
        .into_iter()
        .flatten()
        .filter(|u| u["source"] == "code_execution stdout")
        .filter_map(|u| u["text"].as_str())
        .collect::<String>();
    (printed, exit_code)
}

/// The outputs of the `code_execution` calls of a conversation, oldest first.
fn script_outputs(messages: &[toolgate_llm::Message]) -> Vec<(String, Option<i64>)> {
    let code_calls: BTreeSet<&str> = messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            toolgate_llm::ContentBlock::ToolCall(c)
                if c.name == toolgate_sandbox::tool::TOOL_NAME =>
            {
                Some(c.id.as_str())
            }
            toolgate_llm::ContentBlock::ToolCall(_)
            | toolgate_llm::ContentBlock::Text { .. }
            | toolgate_llm::ContentBlock::ToolResult(_) => None,
        })
        .collect();
    messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            toolgate_llm::ContentBlock::ToolResult(r)
                if code_calls.contains(r.call_id.as_str()) =>
            {
                serde_json::from_str::<serde_json::Value>(&r.content).ok()
            }
            toolgate_llm::ContentBlock::ToolResult(_)
            | toolgate_llm::ContentBlock::Text { .. }
            | toolgate_llm::ContentBlock::ToolCall(_) => None,
        })
        .map(|result| script_output(&result))
        .collect()
}

/// The stand-in of [`Arm::ReferenceScript`]: calls `code_execution` with
/// [`REFERENCE_SCRIPT`], then answers with what the script printed.
struct ReferenceScript;

impl Model for ReferenceScript {
    fn name(&self) -> String {
        "reference-script".to_owned()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, LlmError>> {
        let printed = tool_results(request)
            .last()
            .map(|result| script_output(result).0);
        let response = match printed {
            Some(text) => stand_in_response(&self.name(), text, None),
            None => stand_in_response(
                &self.name(),
                String::new(),
                Some(toolgate_llm::ToolCall {
                    id: "reference-1".to_owned(),
                    name: toolgate_sandbox::tool::TOOL_NAME.to_owned(),
                    arguments: serde_json::json!({ "code": REFERENCE_SCRIPT }),
                }),
            ),
        };
        Box::pin(async move { Ok(response) })
    }
}

/// Every number in `text` that could be a note id.
pub fn ids_in(text: &str) -> BTreeSet<i64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty() && w.len() <= 9)
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// How an answer compares with the truth: (found, wrong, count stated, exact).
pub fn judge(answer: &str, truth: &BTreeSet<i64>) -> (usize, usize, bool, bool) {
    let named = ids_in(answer);
    let found = named.intersection(truth).count();
    // The count itself is a number in the answer; it is not a wrong id.
    let count_right = named.contains(&i64::try_from(truth.len()).unwrap_or(-1));
    let wrong = named
        .difference(truth)
        .filter(|n| **n != i64::try_from(truth.len()).unwrap_or(-1))
        .count();
    (
        found,
        wrong,
        count_right,
        found == truth.len() && wrong == 0 && count_right,
    )
}

/// The measurement's settings.
pub struct CodeMode {
    /// Generated notes added to the sample notebook, one notebook per entry (0: the sample).
    pub extra_notes: Vec<usize>,
    pub arms: Vec<Arm>,
    pub sandbox: SandboxConfig,
    pub max_rounds: u32,
    pub out_dir: PathBuf,
    pub resume: bool,
    /// Runs of each model arm per notebook (the stand-ins run once).
    pub runs: usize,
    /// Sampling temperature; `None` (or 0) is greedy, and then one run is all there is.
    pub temperature: Option<f32>,
    /// The base of every sampled run's seed (see the module doc).
    pub seed: u64,
    /// The levers of every model run (recorded in each).
    pub levers: RunLevers,
}

pub type Progress = dyn Fn(&ArmRun) + Send + Sync;

impl CodeMode {
    /// Prepares a notebook with `extra` generated notes; returns its store and the truth.
    fn notebook(
        &self,
        extra: usize,
        arm: Arm,
    ) -> Result<(Store, BTreeSet<i64>, usize, PathBuf), CodeModeError> {
        let dir = self.out_dir.join("notebooks");
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        let path = dir.join(format!("notes-{extra}-{}.sqlite", arm.as_str()));
        remove_db(&path)?;
        let notes = toolgate_notes::NotesStore::init_sample(&path)
            .map_err(|e| CodeModeError::Store(e.to_string()))?;
        if extra > 0 {
            notes
                .insert_notes(&toolgate_notes::generate_notes(extra, EXTRA_SEED))
                .map_err(|e| CodeModeError::Store(e.to_string()))?;
        }
        let (truth, total) = notes
            .with_conn(|conn| {
                let total: i64 = conn.query_row("SELECT count(*) FROM notes", [], |r| r.get(0))?;
                let mut stmt = conn.prepare(
                    "SELECT id FROM notes WHERE lower(title || ' ' || body) LIKE '%budget%'",
                )?;
                let ids = stmt
                    .query_map([], |r| r.get::<_, i64>(0))?
                    .collect::<Result<BTreeSet<_>, _>>()?;
                Ok::<_, rusqlite::Error>((ids, total))
            })
            .map_err(|e| CodeModeError::Store(e.message))?
            .map_err(|e| CodeModeError::Store(e.to_string()))?;
        drop(notes);
        let store = Store::open(StoreKind::Notes, &path)?;
        Ok((store, truth, usize::try_from(total).unwrap_or(0), path))
    }

    /// The sampling temperature, when it samples (above zero).
    fn sampling(&self) -> Option<f32> {
        self.temperature.filter(|t| *t > 0.0)
    }

    /// How many runs `arm` gets per notebook.
    fn runs_of(&self, arm: Arm) -> usize {
        if arm.is_reference() || self.sampling().is_none() {
            1
        } else {
            self.runs.max(1)
        }
    }

    fn saved(&self, model: &str) -> Result<Vec<ArmRun>, CodeModeError> {
        let path = self.out_dir.join(RUNS_FILE);
        let runs = load_runs(&self.out_dir)?;
        match mismatch(&runs, model, self.sampling(), self.seed, self.levers) {
            Some(found) => Err(CodeModeError::Mismatch {
                path: path.display().to_string(),
                found,
            }),
            None => Ok(runs),
        }
    }

    /// Runs every arm on every notebook (skipping saved ones with `resume`).
    pub async fn run(
        &self,
        model: Arc<dyn Model>,
        progress: Option<&Progress>,
    ) -> Result<Vec<ArmRun>, CodeModeError> {
        std::fs::create_dir_all(&self.out_dir).map_err(|e| io(&self.out_dir, e))?;
        let runs_path = self.out_dir.join(RUNS_FILE);
        let mut runs = if self.resume {
            self.saved(&model.name())?
        } else {
            if runs_path.exists() {
                std::fs::remove_file(&runs_path).map_err(|e| io(&runs_path, e))?;
            }
            Vec::new()
        };
        for &extra in &self.extra_notes {
            for &arm in &self.arms {
                for index in 0..self.runs_of(arm) {
                    let (store, truth, total, path) = self.notebook(extra, arm)?;
                    let done = runs
                        .iter()
                        .any(|r| r.arm == arm && r.notes == total && r.run == index);
                    let run = if done {
                        None
                    } else {
                        Some(
                            self.run_arm(Arc::clone(&model), arm, &store, &truth, total, index)
                                .await?,
                        )
                    };
                    // The notebook is rebuilt from the seed for every arm; it is not kept.
                    drop(store);
                    remove_db(&path)?;
                    let Some(run) = run else { continue };
                    let mut line = serde_json::to_string(&run).unwrap_or_default();
                    line.push('\n');
                    use std::io::Write as _;
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&runs_path)
                        .and_then(|mut f| f.write_all(line.as_bytes()))
                        .map_err(|e| io(&runs_path, e))?;
                    if let Some(progress) = progress {
                        progress(&run);
                    }
                    runs.push(run);
                }
            }
        }
        Ok(runs)
    }

    async fn run_arm(
        &self,
        model: Arc<dyn Model>,
        arm: Arm,
        store: &Store,
        truth: &BTreeSet<i64>,
        total: usize,
        index: usize,
    ) -> Result<ArmRun, CodeModeError> {
        let temperature = self.sampling();
        let seed = run_seed_of(temperature, self.seed, total, index);
        let trace = Arc::new(MemoryTrace::default());
        let seat = Seat::new(Principal::local("local-user", &[])).with_trace(trace.clone());
        let extra = ExtraTools {
            code: arm.code().then(|| CodeOptions {
                sandbox: self.sandbox.clone(),
                export_notes: true,
                paging: self.levers.paging(),
                failed_scripts: self.levers.failed_scripts(),
            }),
            ..ExtraTools::default()
        };
        let ready = toolgate_wiring::dispatcher_with(
            ToolsetName::Notes,
            store,
            &ExitsConfig::default(),
            seat,
            extra,
        )?;
        let model: Arc<dyn Model> = match arm {
            Arm::ReferenceScript => Arc::new(ReferenceScript),
            Arm::ReferenceToolByTool => Arc::new(ReferencePaging),
            Arm::ToolByTool | Arm::Script => model,
        };
        let metered = Arc::new(Metered {
            inner: Arc::clone(&model),
            prompts: Mutex::new(Vec::new()),
        });
        let agent =
            Agent::new(metered.clone(), ready.caller, ready.principal).with_config(AgentConfig {
                // A stand-in pages as far as the data goes (bounded all the same).
                max_rounds: if arm.is_reference() {
                    REFERENCE_MAX_ROUNDS
                } else {
                    self.max_rounds
                },
                offered: arm
                    .code()
                    .then(|| vec![toolgate_sandbox::tool::TOOL_NAME.to_owned()]),
                temperature,
                seed,
                first_round_must_call: self.levers.first_round_must_call,
                retry_refused_calls: self.levers.failed_script_errors,
                retry_must_call: self.levers.failed_script_errors,
                ..AgentConfig::default()
            });
        let started = Instant::now();
        let result = agent
            .ask(&format!("code-mode-{}-{total}", arm.as_str()), QUESTION)
            .await;
        let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        // The whole conversation (the script, what it printed, the answer), beside the figures.
        let run_suffix = if seed.is_some() {
            format!("-run{index}")
        } else {
            String::new()
        };
        let transcript = self.out_dir.join(format!(
            "transcript-{total}-{}{run_suffix}.json",
            arm.as_str()
        ));
        let text = serde_json::to_vec_pretty(&result.transcript).unwrap_or_default();
        std::fs::write(&transcript, text).map_err(|e| io(&transcript, e))?;
        let prompts = metered
            .prompts
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        let answer = result.answer.clone();
        let (found, wrong, count_right, correct) = judge(answer.as_deref().unwrap_or(""), truth);
        let scripts = script_outputs(&result.transcript);
        let (script_correct, script_exit) = if arm.code() {
            (
                Some(scripts.iter().any(|(printed, _)| judge(printed, truth).3)),
                scripts.last().and_then(|(_, exit)| *exit),
            )
        } else {
            (None, None)
        };
        Ok(ArmRun {
            arm,
            notes: total,
            model: model.name(),
            question: QUESTION.to_owned(),
            expected_count: truth.len(),
            found,
            wrong,
            correct,
            count_right,
            context_tokens: prompts.iter().map(|p| p.0).max().unwrap_or(0),
            model_prompt_tokens: prompts.iter().map(|p| p.1).max().unwrap_or(0),
            input_tokens: result.usage.input_tokens,
            output_tokens: result.usage.output_tokens,
            model_turns: result.rounds,
            model_tool_calls: result.calls.len(),
            dispatcher_calls: trace.of_kind("tool_call").len(),
            wall_ms,
            stop: serde_json::to_value(&result.stop)
                .ok()
                .and_then(|v| v.get("kind").and_then(|k| k.as_str().map(str::to_owned)))
                .unwrap_or_default(),
            answer,
            run: index,
            temperature,
            seed,
            script_correct,
            script_exit,
            first_round_must_call: self.levers.first_round_must_call,
            all_pages: self.levers.all_pages,
            failed_script_errors: self.levers.failed_script_errors,
        })
    }
}

/// The seed of run `index` on the notebook of `total` notes: `None` when greedy (no
/// `temperature`), else the same for every arm and call form at that size and index.
pub fn run_seed_of(temperature: Option<f32>, base: u64, total: usize, index: usize) -> Option<u64> {
    temperature.map(|_| crate::runner::run_seed(base, &format!("code-mode-{total}"), index))
}

/// What makes saved `runs` another measurement than one of `model` at `temperature` (sampling,
/// or `None`) with seed base `seed` and `levers`: another question, or for a model arm another
/// model, temperature, seed or lever. `None` when they belong to it.
pub fn mismatch(
    runs: &[ArmRun],
    model: &str,
    temperature: Option<f32>,
    seed: u64,
    levers: RunLevers,
) -> Option<String> {
    runs.iter().find_map(|r| {
        if r.question != QUESTION {
            Some("another question".to_owned())
        } else if r.arm.is_reference() {
            None
        } else if r.model != model {
            Some(format!("model {}", r.model))
        } else if RunLevers::of(r) != levers {
            Some(format!("runs with other levers: {:?}", RunLevers::of(r)))
        } else if r.temperature != temperature
            || r.seed != run_seed_of(temperature, seed, r.notes, r.run)
        {
            Some(format!(
                "run {} at {} notes with temperature {:?} and seed {:?}",
                r.run, r.notes, r.temperature, r.seed
            ))
        } else {
            None
        }
    })
}

/// Removes an SQLite file and its journal files.
fn remove_db(path: &Path) -> Result<(), CodeModeError> {
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", path.display()));
        if file.exists() {
            std::fs::remove_file(&file).map_err(|e| io(&file, e))?;
        }
    }
    Ok(())
}

/// The runs saved in `out_dir` (none when it has no runs file).
pub fn load_runs(out_dir: &Path) -> Result<Vec<ArmRun>, CodeModeError> {
    let path = out_dir.join(RUNS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&path, e)),
    };
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// The report: with several runs of an arm on a notebook, first a summary (correct answers and
/// correct scripts out of the runs, per notebook size and arm); then one row per run, by
/// notebook size, arm and run.
pub fn markdown(runs: &[ArmRun]) -> String {
    let order = [
        Arm::ToolByTool,
        Arm::Script,
        Arm::ReferenceToolByTool,
        Arm::ReferenceScript,
    ];
    let mut runs: Vec<&ArmRun> = runs.iter().collect();
    runs.sort_by_key(|r| (r.notes, order.iter().position(|a| *a == r.arm), r.run));
    let mut out = String::new();
    let summary = summarize(&runs);
    if summary.iter().any(|s| s.runs > 1) {
        out.push_str(
            "| notes | arm | runs | correct answers | correct scripts | scripts that exited 0 |\n| --- | --- | --- | --- | --- | --- |\n",
        );
        for s in &summary {
            let scripts =
                |n: Option<usize>| n.map_or("-".to_owned(), |n| format!("{n}/{}", s.runs));
            out.push_str(&format!(
                "| {} | {} | {} | {}/{} | {} | {} |\n",
                s.notes,
                s.arm.as_str(),
                s.runs,
                s.correct,
                s.runs,
                scripts(s.script_correct),
                scripts(s.script_ok),
            ));
        }
        out.push('\n');
    }
    out.push_str(
        "| notes | arm | run | tokens in context (o200k) | model's own prompt count | input tokens, all turns | model tool calls | calls run | model turns | wall s | ids found | wrong ids | count right | correct | script correct |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in runs {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {}/{} | {} | {} | {} | {} |\n",
            r.notes,
            r.arm.as_str(),
            r.run,
            r.context_tokens,
            r.model_prompt_tokens,
            r.input_tokens,
            r.model_tool_calls,
            r.dispatcher_calls,
            r.model_turns,
            r.wall_ms as f64 / 1000.0,
            r.found,
            r.expected_count,
            r.wrong,
            yes_no(r.count_right),
            yes_no(r.correct),
            r.script_correct.map_or("-", yes_no),
        ));
    }
    out
}

/// Correct scripts of the script arm before and after a change, on one notebook size or on
/// all of them (`notes: None`), over runs paired by seed.
#[derive(Debug, Clone, PartialEq)]
pub struct PairedScripts {
    pub notes: Option<usize>,
    pub pairs: usize,
    pub before: usize,
    pub after: usize,
    /// After minus before, as a share of the pairs, with its paired bootstrap 95% CI.
    pub difference: crate::stats::Estimate,
}

/// The script arm's correct scripts in `after` against `before`, paired run by run: the same
/// notebook size, run number and seed (a sampled run's seed is derived from the base, the size
/// and the run, so the same `--seed` gives both sides the same draws until their prompts
/// differ). One row per size, then one over every pair. Why paired: five runs a size cannot
/// show a change by their counts alone; the pairing removes what the seed decides.
///
/// Refused when a run of `after` has no run of `before` with the same seed (another
/// `--seed`, `--temperature` or notebook), or when the two share no sampled script run.
pub fn paired_scripts(
    before: &[ArmRun],
    after: &[ArmRun],
) -> Result<Vec<PairedScripts>, CodeModeError> {
    let scripts = |runs: &[ArmRun]| -> Vec<(usize, usize, Option<u64>, bool)> {
        runs.iter()
            .filter(|r| r.arm == Arm::Script)
            .filter_map(|r| r.script_correct.map(|ok| (r.notes, r.run, r.seed, ok)))
            .collect()
    };
    let earlier = scripts(before);
    let mut pairs: Vec<(usize, bool, bool)> = Vec::new();
    for (notes, run, seed, ok) in scripts(after) {
        let Some(seed) = seed else {
            return Err(CodeModeError::NotPaired(format!(
                "run {run} at {notes} notes is greedy"
            )));
        };
        let paired = earlier
            .iter()
            .find(|(n, r, _, _)| *n == notes && *r == run)
            .ok_or_else(|| {
                CodeModeError::NotPaired(format!("run {run} at {notes} notes has no run before"))
            })?;
        if paired.2 != Some(seed) {
            return Err(CodeModeError::NotPaired(format!(
                "run {run} at {notes} notes has seed {seed} after and {} before",
                paired
                    .2
                    .map_or("none (greedy)".to_owned(), |s| format!("seed {s}"))
            )));
        }
        pairs.push((notes, paired.3, ok));
    }
    if pairs.is_empty() {
        return Err(CodeModeError::NotPaired(
            "no script run with a correct-script verdict".to_owned(),
        ));
    }
    let mut sizes: Vec<Option<usize>> = pairs.iter().map(|(n, _, _)| Some(*n)).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes.push(None);
    let score = |ok: bool| vec![if ok { 1.0 } else { 0.0 }];
    sizes
        .into_iter()
        .map(|notes| {
            let of: Vec<&(usize, bool, bool)> = pairs
                .iter()
                .filter(|(n, _, _)| notes.is_none_or(|size| *n == size))
                .collect();
            let a: Vec<Vec<f64>> = of.iter().map(|(_, b, _)| score(*b)).collect();
            let b: Vec<Vec<f64>> = of.iter().map(|(_, _, a)| score(*a)).collect();
            let difference = crate::stats::paired_bootstrap_difference(
                &a,
                &b,
                crate::stats::DEFAULT_RESAMPLES,
                crate::stats::DEFAULT_SEED,
            )
            .ok_or_else(|| CodeModeError::NotPaired("no pair to compare".to_owned()))?;
            Ok(PairedScripts {
                notes,
                pairs: of.len(),
                before: of.iter().filter(|(_, b, _)| *b).count(),
                after: of.iter().filter(|(_, _, a)| *a).count(),
                difference,
            })
        })
        .collect()
}

/// The paired comparison as a report section, against the folder named `before`.
pub fn paired_markdown(before: &str, rows: &[PairedScripts]) -> String {
    let mut out = format!(
        "\nCorrect scripts against `{before}`, paired by run seed (paired bootstrap, 95% CI):\n\n| notes | pairs | before | after | difference, points |\n| --- | --- | --- | --- | --- |\n"
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:+.1} [{:+.1}, {:+.1}] |\n",
            r.notes.map_or("all".to_owned(), |n| n.to_string()),
            r.pairs,
            r.before,
            r.after,
            100.0 * r.difference.mean,
            100.0 * r.difference.low,
            100.0 * r.difference.high,
        ));
    }
    out
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// One notebook size and arm over its runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub notes: usize,
    pub arm: Arm,
    pub runs: usize,
    pub correct: usize,
    /// Runs with a correct script (`None` when no run of the group recorded it).
    pub script_correct: Option<usize>,
    /// Runs whose last script exited 0.
    pub script_ok: Option<usize>,
}

/// Runs grouped by notebook size and arm, in the order given.
pub fn summarize(runs: &[&ArmRun]) -> Vec<Summary> {
    let mut out: Vec<Summary> = Vec::new();
    for r in runs {
        let index = match out
            .iter()
            .position(|s| s.notes == r.notes && s.arm == r.arm)
        {
            Some(i) => i,
            None => {
                out.push(Summary {
                    notes: r.notes,
                    arm: r.arm,
                    runs: 0,
                    correct: 0,
                    script_correct: None,
                    script_ok: None,
                });
                out.len() - 1
            }
        };
        let s = &mut out[index];
        s.runs += 1;
        s.correct += usize::from(r.correct);
        if let Some(ok) = r.script_correct {
            s.script_correct = Some(s.script_correct.unwrap_or(0) + usize::from(ok));
            s.script_ok = Some(s.script_ok.unwrap_or(0) + usize::from(r.script_exit == Some(0)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn truth(ids: &[i64]) -> BTreeSet<i64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn an_answer_with_every_id_and_the_count_is_correct() {
        assert_eq!(
            judge("3 notes: 2, 5 and 15.", &truth(&[2, 5, 15])),
            (3, 0, true, true)
        );
    }

    #[test]
    fn a_missing_id_or_an_extra_one_is_not_correct() {
        assert_eq!(
            judge("3 notes: 2, 5.", &truth(&[2, 5, 15])),
            (2, 0, true, false)
        );
        assert_eq!(
            judge("3 notes: 2, 5, 15, 99.", &truth(&[2, 5, 15])),
            (3, 1, true, false)
        );
    }

    #[test]
    fn a_description_of_the_search_without_ids_finds_nothing() {
        assert_eq!(
            judge("I searched your notes for budget.", &truth(&[2, 5])),
            (0, 0, false, false)
        );
    }

    fn saved_run(
        arm: Arm,
        notes: usize,
        run: usize,
        correct: bool,
        script: Option<bool>,
    ) -> ArmRun {
        ArmRun {
            arm,
            notes,
            model: "m".into(),
            question: QUESTION.into(),
            expected_count: 2,
            found: 0,
            wrong: 0,
            correct,
            count_right: false,
            context_tokens: 0,
            model_prompt_tokens: 0,
            input_tokens: 0,
            output_tokens: 0,
            model_turns: 1,
            model_tool_calls: 0,
            dispatcher_calls: 0,
            wall_ms: 0,
            stop: "final_answer".into(),
            answer: None,
            run,
            temperature: Some(0.7),
            seed: run_seed_of(Some(0.7), 7, notes, run),
            script_correct: script,
            script_exit: script.map(|_| 0),
            first_round_must_call: false,
            all_pages: false,
            failed_script_errors: false,
        }
    }

    #[test]
    fn a_run_saved_before_sampled_runs_existed_still_loads_as_run_zero() {
        let line = r#"{"arm":"script","notes":325,"model":"m","question":"q","expected_count":101,"found":1,"wrong":0,"correct":false,"count_right":false,"context_tokens":1,"model_prompt_tokens":1,"input_tokens":1,"output_tokens":1,"model_turns":2,"model_tool_calls":1,"dispatcher_calls":1,"wall_ms":1,"stop":"final_answer","answer":"10"}"#;
        let run: ArmRun = serde_json::from_str(line).unwrap();
        assert_eq!(
            (run.run, run.temperature, run.seed, run.script_correct),
            (0, None, None, None)
        );
        assert!(!run.first_round_must_call);
    }

    #[test]
    fn sampled_runs_differ_by_index_and_size_but_pair_across_measurements() {
        let seed = |total, index| run_seed_of(Some(0.7), 7, total, index);
        assert_ne!(seed(325, 0), seed(325, 1));
        assert_ne!(seed(325, 0), seed(1325, 0));
        // Another measurement (another call form) with the same base samples run i alike.
        assert_eq!(seed(325, 3), run_seed_of(Some(0.7), 7, 325, 3));
        assert_eq!(run_seed_of(None, 7, 325, 0), None, "greedy has no seed");
    }

    #[test]
    fn a_resume_with_another_temperature_seed_or_model_is_refused() {
        let runs = vec![saved_run(Arm::Script, 325, 1, false, Some(false))];
        let none = RunLevers::default();
        assert_eq!(mismatch(&runs, "m", Some(0.7), 7, none), None);
        assert!(mismatch(&runs, "m", Some(0.7), 8, none).is_some(), "seed");
        assert!(mismatch(&runs, "m", None, 7, none).is_some(), "temperature");
        assert!(
            mismatch(&runs, "other", Some(0.7), 7, none).is_some(),
            "model"
        );
        for (lever, levers) in [
            (
                "first round",
                RunLevers {
                    first_round_must_call: true,
                    ..none
                },
            ),
            (
                "script module",
                RunLevers {
                    all_pages: true,
                    ..none
                },
            ),
            (
                "failed scripts",
                RunLevers {
                    failed_script_errors: true,
                    ..none
                },
            ),
        ] {
            assert!(
                mismatch(&runs, "m", Some(0.7), 7, levers).is_some(),
                "{lever}"
            );
        }
    }

    #[test]
    fn correct_scripts_are_counted_per_size_and_arm_not_pooled() {
        let runs = [
            saved_run(Arm::Script, 325, 0, false, Some(true)),
            saved_run(Arm::Script, 325, 1, true, Some(true)),
            saved_run(Arm::Script, 325, 2, false, Some(false)),
            saved_run(Arm::Script, 1325, 0, false, Some(false)),
            saved_run(Arm::ToolByTool, 325, 0, true, None),
        ];
        let refs: Vec<&ArmRun> = runs.iter().collect();
        let summary = summarize(&refs);
        let got: Vec<(usize, Arm, usize, usize, Option<usize>)> = summary
            .iter()
            .map(|s| (s.notes, s.arm, s.runs, s.correct, s.script_correct))
            .collect();
        assert_eq!(
            got,
            vec![
                (325, Arm::Script, 3, 1, Some(2)),
                (1325, Arm::Script, 1, 0, Some(0)),
                (325, Arm::ToolByTool, 1, 1, None),
            ]
        );
        let report = markdown(&runs);
        assert!(
            report.contains("| 325 | script | 3 | 1/3 | 2/3 | 3/3 |"),
            "{report}"
        );
        assert!(
            report.contains("| 1325 | script | 1 | 0/1 | 0/1 | 1/1 |"),
            "{report}"
        );
    }

    #[test]
    fn only_code_execution_results_count_as_scripts() {
        use toolgate_llm::{ContentBlock, Message, Role, ToolCall, ToolResult};
        let printed = |text: &str| {
            serde_json::json!({
                "result": {"exit_code": 0},
                "untrusted_content": [{"source": "code_execution stdout", "text": text}],
            })
            .to_string()
        };
        let transcript = vec![
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::ToolCall(ToolCall {
                        id: "a".into(),
                        name: "notes_search".into(),
                        arguments: serde_json::json!({}),
                    }),
                    ContentBlock::ToolCall(ToolCall {
                        id: "b".into(),
                        name: toolgate_sandbox::tool::TOOL_NAME.into(),
                        arguments: serde_json::json!({"code": "print(1)"}),
                    }),
                ],
            },
            Message::tool_results(vec![
                // A note's text that looks like a script's output is not one.
                ToolResult {
                    call_id: "a".into(),
                    content: printed("2 notes: 2, 5"),
                    is_error: false,
                },
                ToolResult {
                    call_id: "b".into(),
                    content: printed("1 note: 2"),
                    is_error: false,
                },
            ]),
        ];
        assert_eq!(
            script_outputs(&transcript),
            vec![("1 note: 2".to_owned(), Some(0))]
        );
    }

    #[test]
    fn a_failed_script_refused_as_a_call_still_shows_what_it_printed_and_its_exit_code() {
        // The sandbox's refusal, as the model reads it (the message's form is asserted on the
        // sandbox's side, in `only_a_script_that_failed_by_itself_is_refused...`).
        let refused = serde_json::json!({"error": {
            "code": "invalid_argument",
            "field": "code",
            "message": "the script failed with exit code 2 after 1 tool call (its effect stands); its error (the traceback) is in untrusted_content",
            "untrusted_content": [
                {"source": "code_execution stdout", "text": "3 notes: 1, 2"},
                {"source": "code_execution stderr", "text": "KeyError: 'body'"}
            ]
        }});
        assert_eq!(
            script_output(&refused),
            ("3 notes: 1, 2".to_owned(), Some(2))
        );
    }

    #[test]
    fn a_comparison_pairs_runs_by_seed_and_refuses_runs_that_are_not_the_same_draws() {
        let runs = |oks: [bool; 4]| -> Vec<ArmRun> {
            [(325, 0), (325, 1), (1325, 0), (1325, 1)]
                .into_iter()
                .zip(oks)
                .map(|((notes, run), ok)| saved_run(Arm::Script, notes, run, ok, Some(ok)))
                .collect()
        };
        let before = runs([false, true, false, false]);
        let after = runs([true, true, true, false]);
        let rows = paired_scripts(&before, &after).unwrap();
        let counts: Vec<(Option<usize>, usize, usize, usize)> = rows
            .iter()
            .map(|r| (r.notes, r.pairs, r.before, r.after))
            .collect();
        assert_eq!(
            counts,
            [(Some(325), 2, 1, 2), (Some(1325), 2, 0, 1), (None, 4, 1, 3)]
        );
        let all = &rows[2].difference;
        assert!((all.mean - 0.5).abs() < 1e-9, "{all:?}");
        assert!(all.low <= all.mean && all.mean <= all.high, "{all:?}");
        assert!(paired_markdown("before", &rows).contains("| all | 4 | 1 | 3 | +50.0 ["));

        // (what differs in the run before, what the refusal names)
        let reseeded = |r: &mut ArmRun| r.seed = run_seed_of(Some(0.7), 8, r.notes, r.run);
        let greedy = |r: &mut ArmRun| r.seed = None;
        let renumbered = |r: &mut ArmRun| r.run += 10;
        let cases: [(&dyn Fn(&mut ArmRun), &str, bool); 3] = [
            (&reseeded, "has seed", false),
            (&renumbered, "has no run before", false),
            (&greedy, "is greedy", true),
        ];
        for (change, names, on_after) in cases {
            let (mut before, mut after) = (before.clone(), after.clone());
            let side = if on_after { &mut after } else { &mut before };
            side.iter_mut().for_each(change);
            let refused = paired_scripts(&before, &after).unwrap_err().to_string();
            assert!(refused.contains(names), "{refused}");
        }
        // Tool-by-tool runs have no script verdict: nothing to pair.
        let tools = vec![saved_run(Arm::ToolByTool, 325, 0, true, None)];
        assert!(paired_scripts(&tools, &tools).is_err());
    }
}
