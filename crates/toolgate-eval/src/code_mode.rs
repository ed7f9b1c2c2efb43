//! The seeds' code-mode measurement: "find every note that mentions the budget", asked of the
//! same model over the same notebook two ways: tool by tool (the notes tools, the model pages
//! through search results itself) and as one script (`code_execution` only, the notes tools as
//! its functions and the notebook mounted read-only). Each arm reports the tokens in context
//! (the largest prompt of the run), all input tokens, the model's tool calls, the calls the
//! dispatcher ran (a script's included), model turns, wall time, and correctness against SQL
//! over the store; a larger notebook (the sample plus generated notes) shows how each grows.
//!
//! Each arm's conversation is kept as `transcript-<notes>-<arm>.json`.
//!
//! Guarantees: the truth is computed from the store, never from the model; each arm starts from
//! a fresh copy of the notebook; runs are appended to `runs.jsonl` as they finish and
//! `--resume` skips the arms already there (refusing a folder made with another question or
//! model).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use toolgate_agent::{Agent, AgentConfig};
use toolgate_core::Principal;
use toolgate_core::trace::MemoryTrace;
use toolgate_llm::{BoxFuture, LlmError, Model, ModelRequest, ModelResponse};
use toolgate_sandbox::SandboxConfig;
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
        let printed = tool_results(request).last().map(|result| {
            result["untrusted_content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|u| u["source"] == "code_execution stdout")
                .filter_map(|u| u["text"].as_str())
                .collect::<String>()
        });
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

    fn saved(&self, model: &str) -> Result<Vec<ArmRun>, CodeModeError> {
        let path = self.out_dir.join(RUNS_FILE);
        let runs = load_runs(&self.out_dir)?;
        if let Some(other) = runs
            .iter()
            .find(|r| (r.arm != Arm::ReferenceScript && r.model != model) || r.question != QUESTION)
        {
            return Err(CodeModeError::Mismatch {
                path: path.display().to_string(),
                found: format!("model {}", other.model),
            });
        }
        Ok(runs)
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
                let (store, truth, total, path) = self.notebook(extra, arm)?;
                let done = runs.iter().any(|r| r.arm == arm && r.notes == total);
                let run = if done {
                    None
                } else {
                    Some(
                        self.run_arm(Arc::clone(&model), arm, &store, &truth, total)
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
        Ok(runs)
    }

    async fn run_arm(
        &self,
        model: Arc<dyn Model>,
        arm: Arm,
        store: &Store,
        truth: &BTreeSet<i64>,
        total: usize,
    ) -> Result<ArmRun, CodeModeError> {
        let trace = Arc::new(MemoryTrace::default());
        let seat = Seat::new(Principal::local("local-user", &[])).with_trace(trace.clone());
        let extra = ExtraTools {
            code: arm.code().then(|| CodeOptions {
                sandbox: self.sandbox.clone(),
                export_notes: true,
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
        let agent = Agent::new(metered.clone(), ready.dispatcher, ready.principal).with_config(
            AgentConfig {
                // A stand-in pages as far as the data goes (bounded all the same).
                max_rounds: if arm.is_reference() {
                    REFERENCE_MAX_ROUNDS
                } else {
                    self.max_rounds
                },
                offered: arm
                    .code()
                    .then(|| vec![toolgate_sandbox::tool::TOOL_NAME.to_owned()]),
                ..AgentConfig::default()
            },
        );
        let started = Instant::now();
        let result = agent
            .ask(&format!("code-mode-{}-{total}", arm.as_str()), QUESTION)
            .await;
        let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        // The whole conversation (the script, what it printed, the answer), beside the figures.
        let transcript = self
            .out_dir
            .join(format!("transcript-{total}-{}.json", arm.as_str()));
        let text = serde_json::to_vec_pretty(&result.transcript).unwrap_or_default();
        std::fs::write(&transcript, text).map_err(|e| io(&transcript, e))?;
        let prompts = metered
            .prompts
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        let answer = result.answer.clone();
        let (found, wrong, count_right, correct) = judge(answer.as_deref().unwrap_or(""), truth);
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
        })
    }
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

/// The report table: by notebook size, then arm.
pub fn markdown(runs: &[ArmRun]) -> String {
    let order = [
        Arm::ToolByTool,
        Arm::Script,
        Arm::ReferenceToolByTool,
        Arm::ReferenceScript,
    ];
    let mut runs: Vec<&ArmRun> = runs.iter().collect();
    runs.sort_by_key(|r| (r.notes, order.iter().position(|a| *a == r.arm)));
    let mut out = String::from(
        "| notes | arm | tokens in context (o200k) | model's own prompt count | input tokens, all turns | model tool calls | calls run | model turns | wall s | ids found | wrong ids | count right | correct |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in runs {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {}/{} | {} | {} | {} |\n",
            r.notes,
            r.arm.as_str(),
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
            if r.count_right { "yes" } else { "no" },
            if r.correct { "yes" } else { "no" },
        ));
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
}
