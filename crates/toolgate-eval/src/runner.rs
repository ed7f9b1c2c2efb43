//! The runner: every selected task, `runs` times, for each toolset, with the same model, loop,
//! round cap and sampling settings, restoring the store before every run.
//!
//! Guarantees: each run is appended to `runs.jsonl` and flushed as it finishes, so an
//! interrupted eval loses at most the run in progress and `resume` continues where it stopped
//! (a half-written last line is dropped); a resume with different settings is refused (the
//! folder's contract is [`crate::run_folder`]'s); check SQL is resolved on the initial store
//! before the first run, so a broken check fails fast. The store is a SQLite file in the output
//! folder, or with [`Runner::store_url`] a PostgreSQL database of the eval's own
//! ([`crate::eval_database`]: created for the eval, restored before every run as the file is,
//! dropped at the end); the checks read either through the same `Sql` calls.

use std::collections::HashSet;
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
use crate::eval_database::{EvalDatabase, EvalDatabaseError, store_connection};
use crate::pages::PageServer;
use crate::record::{CallRecord, Ending, RunRecord, classify};
use crate::run_folder::{ResumablePlan, RunFolder, RunFolderError};
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
    #[error(transparent)]
    Database(#[from] EvalDatabaseError),
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
    /// `None`: the store is a SQLite file in `out_dir`. `Some(url)`: a PostgreSQL database
    /// of the eval's own on the server `url` names ([`crate::eval_database`]).
    pub store_url: Option<String>,
}

pub use crate::run_folder::{PLAN_FILE, RUNS_FILE};
// Kept at their old path: the injection suite reads its runs with them.
pub use crate::run_folder::{RecordsError, load_jsonl};

impl From<RunFolderError> for RunnerError {
    fn from(e: RunFolderError) -> Self {
        match e {
            RunFolderError::Exists { dir } => RunnerError::Exists { dir },
            RunFolderError::Mismatch { dir, differences } => RunnerError::Mismatch {
                dir,
                differences: differences.join(", "),
            },
            RunFolderError::Unreadable { path, message } => {
                RunnerError::Usage(format!("{path}: {message}"))
            }
            RunFolderError::Io { path, source } => RunnerError::Io { path, source },
        }
    }
}

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
        let folder = RunFolder::new(&self.out_dir);
        let records: Vec<RunRecord> = folder.open(&plan, self.resume)?;
        let Some(url) = &self.store_url else {
            let store = Store::open_or_init(kind, &self.out_dir.join("store.sqlite"))?;
            return self
                .run_on(&store, &folder, &tasks, records, model, progress)
                .await;
        };
        let database = EvalDatabase::create(url).await?;
        let finished = match database.open_store(kind).await {
            Ok(store) => {
                self.run_on(&store, &folder, &tasks, records, model, progress)
                    .await
            }
            Err(e) => Err(e.into()),
        };
        // Dropped whatever happened; a failure to drop is reported after the run's own.
        let removed = database.remove().await;
        let records = finished?;
        removed?;
        Ok(records)
    }

    /// Runs what is not done yet on `store`, appending to `folder` after `records`.
    async fn run_on(
        &self,
        store: &Store,
        folder: &RunFolder,
        tasks: &[&Task],
        mut records: Vec<RunRecord>,
        model: Arc<dyn Model>,
        progress: Option<ProgressFn>,
    ) -> Result<Vec<RunRecord>, RunnerError> {
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
        let resolved = resolve_checks(store, tasks)?;
        // Notes tools reach the web only through an exit that allows nothing but the eval's
        // own page server (when there is one); there is no mail relay, so nothing can be sent.
        let exits = match &pages {
            Some(p) => ExitsConfig::default().allow_loopback("http", p.port),
            None => ExitsConfig::default(),
        };

        let done: HashSet<(String, String, usize)> = records.iter().map(RunRecord::key).collect();
        let total = self.toolsets.len() * tasks.len() * self.runs;
        let mut out = folder.appender()?;
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
                        store,
                        pages: pages.as_ref(),
                        exits: &exits,
                        model: Arc::clone(&model),
                    };
                    let record = self.run_one(&target, *toolset, task, checks, index).await?;
                    out.append(&record)?;
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
        let outcomes = store_connection(store)
            .with_sql(|session| {
                Ok(checks
                    .iter()
                    .map(|check| checks::judge(check, &*session, result.answer.as_deref()))
                    .collect::<Vec<_>>())
            })
            .map_err(|e| RunnerError::Usage(e.to_string()))?;
        let (ending, ending_detail) = match &result.stop {
            StopCause::FinalAnswer => (Ending::FinalAnswer, String::new()),
            StopCause::RoundCap { .. } => (Ending::RoundCap, result.stop.describe()),
            // A policy budget ends a run as the loop's own token budget does.
            StopCause::TokenBudget { .. } | StopCause::BudgetExhausted { .. } => {
                (Ending::TokenBudget, result.stop.describe())
            }
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
            store_connection(store)
                // The prompt as the suite writes it ({pages} unfilled), so a rescore resolves
                // the same checks without the page server's port.
                .with_sql(|session| Ok(checks::resolve_all(&task.checks, &task.prompt, &*session)))
                .map_err(|e| RunnerError::Usage(e.to_string()))?
                .map_err(|source| RunnerError::Check {
                    task: task.id.clone(),
                    source,
                })
        })
        .collect()
}

impl ResumablePlan for Plan {
    fn differences(&self, resumed: &Self) -> Vec<String> {
        plan_differences(self, resumed)
    }
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

/// Reads the records of a run directory (see [`load_jsonl`]).
pub fn load_records(runs_path: &Path) -> Result<Vec<RunRecord>, RunnerError> {
    Ok(crate::run_folder::read_records(runs_path)?)
}
