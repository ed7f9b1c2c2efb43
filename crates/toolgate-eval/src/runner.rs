//! The runner: every selected task, `runs` times, for each toolset, with the same model, loop,
//! round cap and sampling settings, restoring the store before every run.
//!
//! Guarantees: each run is appended to `runs.jsonl` and flushed as it finishes, so an
//! interrupted eval loses at most the run in progress and `resume` continues where it stopped
//! (a half-written last line is dropped); a resume with different settings is refused;
//! check SQL is resolved on the initial store before the first run, so a broken check fails
//! fast.

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use toolgate_agent::{Agent, AgentConfig, StopCause};
use toolgate_core::Principal;
use toolgate_core::canonical::sha256_hex;
use toolgate_core::trace::MemoryTrace;
use toolgate_llm::Model;
use toolgate_wiring::{ExitsConfig, Seat, Store, ToolsetName, WiringError};

use crate::checks::{self, ResolvedCheck};
use crate::pages::PageServer;
use crate::record::{CallRecord, Ending, RunRecord, classify};
use crate::suite::{Split, Suite, Task};

/// Everything that defines an eval; a resume must match it exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub suite_name: String,
    /// SHA-256 of the suite file's text.
    pub suite_digest: String,
    pub model: String,
    pub toolsets: Vec<String>,
    pub runs: usize,
    pub split: Option<Split>,
    pub tasks: Vec<String>,
    pub max_rounds: u32,
    pub temperature: Option<f32>,
    /// The base of every run's sampling seed (absent in plans made before seeds existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("{0}")]
    Usage(String),
    #[error("{dir} already holds an eval; pass --resume to continue it, or choose another --out")]
    Exists { dir: String },
    #[error("cannot resume {dir}: it was started with different settings ({differences})")]
    Mismatch { dir: String, differences: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Wiring(#[from] WiringError),
    #[error("task `{task}`: {source}")]
    Check {
        task: String,
        source: checks::CheckError,
    },
}

/// Progress as runs finish.
#[derive(Debug, Clone)]
pub struct ProgressUpdate<'a> {
    pub done: usize,
    pub total: usize,
    pub record: &'a RunRecord,
    pub elapsed_seconds: f64,
    /// Runs finished in this session (not counting resumed ones), for the ETA.
    pub finished_here: usize,
}

pub type ProgressFn = Box<dyn Fn(&ProgressUpdate<'_>) + Send + Sync>;

pub struct Runner {
    pub suite: Suite,
    pub suite_text: String,
    pub toolsets: Vec<ToolsetName>,
    pub runs: usize,
    pub split: Option<Split>,
    pub task_ids: Option<Vec<String>>,
    pub max_rounds: u32,
    pub temperature: Option<f32>,
    /// The base of each run's seed when `temperature` samples ([`run_seed`]); recorded in the
    /// plan and in each run, so a run can be repeated exactly.
    pub seed: u64,
    pub out_dir: PathBuf,
    /// Folder served on 127.0.0.1 for clip tasks; `{pages}` in a prompt becomes its base URL.
    pub pages_dir: Option<PathBuf>,
    pub resume: bool,
    /// Set to stop after the run in progress (Ctrl-C, or a test simulating a kill).
    pub stop: Arc<AtomicBool>,
}

pub const RUNS_FILE: &str = "runs.jsonl";
pub const PLAN_FILE: &str = "plan.json";

fn io(path: &Path) -> impl Fn(std::io::Error) -> RunnerError + '_ {
    move |source| RunnerError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl Runner {
    pub fn plan(&self, model: &str, tasks: &[&Task]) -> Plan {
        Plan {
            suite_name: self.suite.suite.name.clone(),
            suite_digest: sha256_hex(self.suite_text.as_bytes()),
            model: model.to_string(),
            toolsets: self
                .toolsets
                .iter()
                .map(|t| t.as_str().to_string())
                .collect(),
            runs: self.runs,
            split: self.split,
            tasks: tasks.iter().map(|t| t.id.clone()).collect(),
            max_rounds: self.max_rounds,
            temperature: self.temperature,
            seed: self.samples().then_some(self.seed),
        }
    }

    /// Whether runs sample (a temperature above zero); greedy runs need no seed.
    fn samples(&self) -> bool {
        self.temperature.is_some_and(|t| t > 0.0)
    }

    /// The tasks this eval runs, after checking the settings that need no model (runs,
    /// toolsets against the suite's store, split and task ids), so that a command can refuse
    /// bad input before it loads a model.
    pub fn selected_tasks(&self) -> Result<Vec<&Task>, RunnerError> {
        if self.runs == 0 {
            return Err(RunnerError::Usage("--runs must be at least 1".into()));
        }
        if self.toolsets.is_empty() {
            return Err(RunnerError::Usage("name at least one --toolset".into()));
        }
        let kind = self.suite.suite.store;
        if let Some(wrong) = self.toolsets.iter().find(|t| t.store() != kind) {
            return Err(RunnerError::Usage(format!(
                "toolset {} does not work on a {:?} suite",
                wrong.as_str(),
                kind
            )));
        }
        let tasks = self
            .suite
            .select(self.split, self.task_ids.as_deref())
            .map_err(RunnerError::Usage)?;
        if tasks.is_empty() {
            return Err(RunnerError::Usage(
                "no task matches the split and task filters".into(),
            ));
        }
        Ok(tasks)
    }

    /// Runs what is not done yet; returns every record of the eval (resumed ones included).
    pub async fn run(
        &self,
        model: Arc<dyn Model>,
        progress: Option<ProgressFn>,
    ) -> Result<Vec<RunRecord>, RunnerError> {
        let tasks = self.selected_tasks()?;
        let kind = self.suite.suite.store;
        let plan = self.plan(&model.name(), &tasks);
        let mut records = self.prepare_dir(&plan)?;
        let store = Store::open_or_init(kind, &self.out_dir.join("store.sqlite"))?;
        store.reset()?;
        let needs_pages = tasks.iter().any(|t| t.prompt.contains("{pages}"));
        let pages = match (&self.pages_dir, needs_pages) {
            (Some(dir), true) => Some(PageServer::start(dir).map_err(io(dir))?),
            (None, true) => {
                return Err(RunnerError::Usage(
                    "the suite's prompts use {pages}: give the folder of pages to serve".into(),
                ));
            }
            (_, false) => None,
        };
        let resolved = resolve_checks(&store, &tasks)?;
        // Notes tools reach the web only through an exit that allows nothing but the eval's
        // own page server (when there is one); there is no mail relay, so nothing can be sent.
        let exits = match &pages {
            Some(p) => ExitsConfig::default().allow_loopback("http", p.port),
            None => ExitsConfig::default(),
        };

        let done: HashSet<(String, String, usize)> = records.iter().map(RunRecord::key).collect();
        let total = self.toolsets.len() * tasks.len() * self.runs;
        let runs_path = self.out_dir.join(RUNS_FILE);
        let mut out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&runs_path)
            .map_err(io(&runs_path))?;
        let started = Instant::now();
        let mut finished_here = 0;
        // Task-major order, so that an interrupted eval already holds paired runs of every
        // toolset for the tasks it reached (the comparison needs pairs); a local model's
        // cache still reuses the shared prefix between runs of the same toolset.
        for (task, checks) in tasks.iter().zip(&resolved) {
            for toolset in &self.toolsets {
                for index in 0..self.runs {
                    if done.contains(&(toolset.as_str().to_string(), task.id.clone(), index)) {
                        continue;
                    }
                    if self.stop.load(Ordering::SeqCst) {
                        return Ok(records);
                    }
                    store.reset()?;
                    let target = RunTarget {
                        store: &store,
                        pages: pages.as_ref(),
                        exits: &exits,
                        model: Arc::clone(&model),
                    };
                    let record = self.run_one(&target, *toolset, task, checks, index).await?;
                    let line = serde_json::to_string(&record).unwrap_or_default();
                    writeln!(out, "{line}")
                        .and_then(|()| out.flush())
                        .map_err(io(&runs_path))?;
                    finished_here += 1;
                    records.push(record);
                    if let (Some(report), Some(last)) = (&progress, records.last()) {
                        report(&ProgressUpdate {
                            done: records.len(),
                            total,
                            record: last,
                            elapsed_seconds: started.elapsed().as_secs_f64(),
                            finished_here,
                        });
                    }
                }
            }
        }
        Ok(records)
    }

    /// Creates the run directory, or checks a resumed one; returns the records already there.
    fn prepare_dir(&self, plan: &Plan) -> Result<Vec<RunRecord>, RunnerError> {
        let plan_path = self.out_dir.join(PLAN_FILE);
        let runs_path = self.out_dir.join(RUNS_FILE);
        if plan_path.exists() {
            if !self.resume {
                return Err(RunnerError::Exists {
                    dir: self.out_dir.display().to_string(),
                });
            }
            let text = std::fs::read_to_string(&plan_path).map_err(io(&plan_path))?;
            let earlier: Plan = serde_json::from_str(&text)
                .map_err(|e| RunnerError::Usage(format!("{}: {e}", plan_path.display())))?;
            let differences = plan_differences(&earlier, plan);
            if !differences.is_empty() {
                return Err(RunnerError::Mismatch {
                    dir: self.out_dir.display().to_string(),
                    differences: differences.join(", "),
                });
            }
            return load_records(&runs_path);
        }
        std::fs::create_dir_all(&self.out_dir).map_err(io(&self.out_dir))?;
        let text = serde_json::to_string_pretty(plan).unwrap_or_default();
        std::fs::write(&plan_path, text).map_err(io(&plan_path))?;
        Ok(Vec::new())
    }

    async fn run_one(
        &self,
        target: &RunTarget<'_>,
        toolset: ToolsetName,
        task: &Task,
        checks: &[ResolvedCheck],
        index: usize,
    ) -> Result<RunRecord, RunnerError> {
        let (store, pages, model) = (target.store, target.pages, Arc::clone(&target.model));
        let seed = self.samples().then(|| run_seed(self.seed, &task.id, index));
        let trace = Arc::new(MemoryTrace::default());
        // No human takes part in an eval: no approval channel, so every call that needs one
        // is denied.
        let seat = Seat::new(Principal::local("eval", &[])).with_trace(trace.clone());
        let ready = toolgate_wiring::dispatcher(toolset, store, target.exits, seat)?;
        let agent = Agent::new(model, ready.caller, ready.principal)
            .with_config(AgentConfig {
                max_rounds: self.max_rounds,
                temperature: self.temperature,
                seed,
                // The loop as the toolset was designed with (notes-v2's levers).
                ..toolset.agent_config()
            })
            .with_trace(trace);
        let run_id = format!("{}/{}/{}", toolset.as_str(), task.id, index);
        let started = Instant::now();
        let prompt = match pages {
            Some(p) => task.prompt.replace("{pages}", &p.base_url()),
            None => task.prompt.clone(),
        };
        let result = agent.ask(&run_id, &prompt).await;
        let seconds = started.elapsed().as_secs_f64();
        let calls: Vec<CallRecord> = result
            .calls
            .iter()
            .zip(tool_results(&result.transcript))
            .map(|(c, text)| CallRecord {
                round: c.round,
                tool: c.tool.clone(),
                arguments: c.arguments.clone(),
                is_error: c.is_error,
                error: c.error.clone(),
                result: crate::record::bound_result(&text, RESULT_CHARS),
            })
            .collect();
        let outcomes = store
            .with_conn(|conn| {
                checks
                    .iter()
                    .map(|check| checks::judge(check, conn, result.answer.as_deref()))
                    .collect::<Vec<_>>()
            })
            .map_err(|e| RunnerError::Usage(e.to_string()))?;
        let (ending, ending_detail) = match &result.stop {
            StopCause::FinalAnswer => (Ending::FinalAnswer, String::new()),
            StopCause::RoundCap { .. } => (Ending::RoundCap, result.stop.describe()),
            StopCause::TokenBudget { .. } => (Ending::TokenBudget, result.stop.describe()),
            StopCause::ModelError { .. } => (Ending::ModelError, result.stop.describe()),
        };
        let failure = classify(ending, result.answer.as_deref(), &calls, &outcomes);
        Ok(RunRecord {
            toolset: toolset.as_str().into(),
            task: task.id.clone(),
            category: task.category.clone(),
            split: task.split,
            index,
            success: failure.is_none(),
            failure,
            checks: outcomes,
            answer: result.answer.clone(),
            ending,
            ending_detail,
            rounds: result.rounds,
            input_tokens: result.usage.input_tokens,
            output_tokens: result.usage.output_tokens,
            cached_input_tokens: result.usage.cached_input_tokens,
            calls,
            seconds,
            seed,
        })
    }
}

/// What every run of an eval shares: the store, the page server, the exits and the model.
struct RunTarget<'a> {
    store: &'a Store,
    pages: Option<&'a PageServer>,
    exits: &'a ExitsConfig,
    model: Arc<dyn Model>,
}

/// The tool results of a transcript, in call order.
fn tool_results(transcript: &[toolgate_llm::Message]) -> Vec<String> {
    transcript
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            toolgate_llm::ContentBlock::ToolResult(r) => Some(r.content.clone()),
            _ => None,
        })
        .collect()
}

/// How much of each tool result a record keeps.
const RESULT_CHARS: usize = 1500;

pub fn resolve_checks(
    store: &Store,
    tasks: &[&Task],
) -> Result<Vec<Vec<ResolvedCheck>>, RunnerError> {
    tasks
        .iter()
        .map(|task| {
            store
                // The prompt as the suite writes it ({pages} unfilled), so a rescore resolves
                // the same checks without the page server's port.
                .with_conn(|conn| checks::resolve_all(&task.checks, &task.prompt, conn))
                .map_err(|e| RunnerError::Usage(e.to_string()))?
                .map_err(|source| RunnerError::Check {
                    task: task.id.clone(),
                    source,
                })
        })
        .collect()
}

fn plan_differences(a: &Plan, b: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |name: &str, same: bool| {
        if !same {
            out.push(name.to_string());
        }
    };
    differ("suite file", a.suite_digest == b.suite_digest);
    differ("model", a.model == b.model);
    differ("toolsets", a.toolsets == b.toolsets);
    differ("runs", a.runs == b.runs);
    differ("split", a.split == b.split);
    differ("tasks", a.tasks == b.tasks);
    differ("max rounds", a.max_rounds == b.max_rounds);
    differ("temperature", a.temperature == b.temperature);
    differ("seed", a.seed == b.seed);
    out
}

/// A run's seed: the same for a task's `index`-th run under every toolset (so a paired
/// comparison samples alike), different across tasks and runs.
pub fn run_seed(base: u64, task: &str, index: usize) -> u64 {
    // FNV-1a over the task id: stable across platforms and releases.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in task.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    base.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ hash.wrapping_add(index as u64)
}

/// Why a JSON Lines record file could not be read.
#[derive(Debug)]
pub enum RecordsError {
    Io(std::io::Error),
    /// A complete line that is not a record: the parser's message.
    Parse(String),
}

/// Reads the JSON Lines records at `path` (none when it is missing); a last line cut off by a
/// kill is dropped, and removed from the file so appends start on a fresh line. Shared by every
/// eval that saves its runs as they finish.
pub fn load_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>, RecordsError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(path).map_err(RecordsError::Io)?;
    let complete_len = if text.ends_with('\n') || text.is_empty() {
        text.len()
    } else {
        text.rfind('\n').map_or(0, |i| i + 1)
    };
    if complete_len < text.len() {
        std::fs::write(path, &text[..complete_len]).map_err(RecordsError::Io)?;
    }
    text[..complete_len]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| RecordsError::Parse(e.to_string())))
        .collect()
}

/// Reads the records of a run directory (see [`load_jsonl`]).
pub fn load_records(runs_path: &Path) -> Result<Vec<RunRecord>, RunnerError> {
    load_jsonl(runs_path).map_err(|e| match e {
        RecordsError::Io(e) => io(runs_path)(e),
        RecordsError::Parse(message) => RunnerError::Usage(format!(
            "{}: unreadable record: {message}",
            runs_path.display()
        )),
    })
}
