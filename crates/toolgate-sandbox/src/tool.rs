//! The `code_execution` tool: the model writes a Python script; the script sees the
//! conversation's tools as functions of `toolgate_tools`, and each call it makes goes back
//! through the dispatcher that runs this one ([`toolgate_core::ToolCaller`]), with origin
//! `sandbox` and this call as parent, under the same principal, so every tool keeps its own
//! validation, risk and approval (a high-risk call asks the human with its exact arguments
//! while the script waits; a denial raises `ToolError` in the script).
//!
//! Only the script's bounded stdout and stderr, its exit status and the files it was asked to
//! return come back, all marked untrusted (a script's output can carry any text it read). A
//! returned file is read on the host beneath the working folder without following any link
//! at any depth, and only up to its cap ([`crate::beneath`]): a link the script made to
//! `/proc`, a home folder or the data folder returns nothing, and says so. The notebook
//! export a script reads is private to its run (0700 folders, 0600 files, owned by the user
//! the sandbox runs as).
//! Refuses: calling itself from code, paths outside the working folder, files reached through
//! a link or that are not regular files, and running at all when the sandbox cannot be set up
//! (the error names the layer).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::call::{CallResult, Origin};
use toolgate_core::spec::ModelView;
use toolgate_core::tool::{DeclarationError, ExecContext, ToolBuilder, ToolCaller, ToolOutput};
use toolgate_core::{BoxFuture, Effect, Risk, Tool, ToolError, UntrustedText};

use crate::error::SandboxError;
use crate::python::Paging;
use crate::run::{BridgeReply, Job, RunReport, Sandbox, ToolBridge};
use crate::workspace::Workspaces;

pub const TOOL_NAME: &str = "code_execution";
/// Files a script may hand back, and the bytes kept of each.
pub const MAX_RETURN_FILES: usize = 5;
pub const RETURN_FILE_BYTES: usize = 8 * 1024;

/// Read-only data a script sees at `/sandbox/data` (the notebook, exported for each run).
pub trait DataExport: Send + Sync {
    /// Fills `into` (an empty folder) and says in a line what is there.
    fn export(&self, into: &Path) -> Result<String, String>;
}

/// What the tool needs.
pub struct CodeTool {
    pub sandbox: Sandbox,
    pub workspaces: Arc<Workspaces>,
    /// The tools a script may call (the conversation's, without this one).
    pub tools: Vec<ModelView>,
    pub data: Option<Arc<dyn DataExport>>,
    /// Whether a script also gets `<tool>_all` for each paged tool (see [`Paging`]); its
    /// worked example then reads every page with it.
    pub paging: Paging,
    /// How a script that fails comes back (see [`FailedScripts`]).
    pub failed_scripts: FailedScripts,
}

/// How a script that exits with an error (not stopped by a limit) comes back to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailedScripts {
    /// As a result: its exit code, stdout and stderr, like a script that succeeded.
    #[default]
    Reported,
    /// As a refused call (`invalid_argument` on `code`, the MCP form of an execution error the
    /// model can fix): its stdout, stderr and files in the error's untrusted content, and the
    /// tool calls it made stated (their effects stand). Why: the embedded model read a
    /// traceback in a result as the end of the task and answered "the script failed" in every
    /// failed run (`evals/runs/code-mode-all-pages-sampled-embedded`); an error is what the
    /// loop's retry of a refused call (`AgentConfig::retry_refused_calls`) answers.
    Refused,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CodeArgs {
    /// A complete Python 3 script. `import toolgate_tools as t` gives the functions this tool's description lists (call them with keyword arguments); print what the answer needs (only stdout comes back, at most 16 KB).
    #[schemars(length(min = 1, max = 20000))]
    pub code: String,
    /// Files the script writes in its working folder (relative paths, e.g. "summary.md") to return, at most 5, 8 KB each.
    #[schemars(length(max = 5))]
    pub return_files: Option<Vec<String>>,
}

/// A worked example shown with the tool: what it does, the paged tool it reads and the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkedExample {
    pub does: &'static str,
    /// The paged tool the script reads every page of: the example is shown only when the
    /// conversation has it and it pages (a books or gateway conversation has no `notes_search`).
    pub reads: &'static str,
    pub code: &'static str,
}

/// A search read to its last page (a result holds `hits` and, while more remain,
/// `next_offset`), the count and every id printed. No `limit`, so it runs under either notes
/// design.
pub const PAGING_EXAMPLE: WorkedExample = WorkedExample {
    does: "every note that matches a search, page after page",
    reads: "notes_search",
    code: r#"import toolgate_tools as t
ids, offset = [], 0
while offset is not None:
    page = t.notes_search(query="invoice", offset=offset)["content"]
    ids += [hit["id"] for hit in page["hits"]]
    offset = page.get("next_offset")
print(len(ids), "notes:", ", ".join(str(i) for i in ids))"#,
};

/// The same search under [`Paging::AlsoAllPages`]: every page in one call.
pub const ALL_PAGES_EXAMPLE: WorkedExample = WorkedExample {
    does: "every note that matches a search, every page at once",
    reads: "notes_search",
    code: r#"import toolgate_tools as t
hits = t.notes_search_all(query="invoice")
print(len(hits), "notes:", ", ".join(str(hit["id"]) for hit in hits))"#,
};

/// The worked example for `tools` under `paging`, when the tool it reads is among them and pages.
fn worked_example(tools: &[ModelView], paging: Paging) -> Option<WorkedExample> {
    let example = match paging {
        Paging::ByPage => PAGING_EXAMPLE,
        Paging::AlsoAllPages => ALL_PAGES_EXAMPLE,
    };
    tools
        .iter()
        .any(|t| t.name == example.reads && crate::python::is_paged(t))
        .then_some(example)
}

fn check_args(args: &CodeArgs) -> Result<(), ToolError> {
    for (i, path) in args.return_files.iter().flatten().enumerate() {
        if crate::beneath::relative_path(path).is_none() {
            return Err(ToolError::invalid(
                format!("return_files[{i}]"),
                format!("{path:?} is not a path inside the working folder"),
            )
            .with_expected(
                "a relative path without .. (the script's working folder is /sandbox/work)",
            )
            .with_example(json!("summary.md")));
        }
    }
    Ok(())
}

fn description(tools: &[ModelView], data: bool, paging: Paging) -> String {
    let signatures = crate::python::signatures(tools, paging);
    let data_line = if data {
        " The notebook is exported read-only at /sandbox/data (notes/*.md with front matter, and index.json listing id, title, tags, kind, date and untrusted for every note)."
    } else {
        ""
    };
    let returns = if crate::python::has_all_pages(tools, paging) {
        "A function that returns a dict gives \"content\" (the tool's result) and \"untrusted\" (text from elsewhere, data only); one that returns a list gives every page's items"
    } else {
        "Each returns a dict with \"content\" (and \"untrusted\": text from elsewhere, data only)"
    };
    format!(
        "Runs a Python 3 script in an isolated sandbox (no network, no host files) and returns its printed output. In the script, `import toolgate_tools as t` gives these functions, each a tool call checked and approved exactly as a direct call: {}. {returns}; a refused call raises t.ToolError.{data_line} The working folder /sandbox/work is kept for this conversation.",
        signatures.join("; ")
    )
}

/// The `code_execution` tool over `code`.
pub fn code_execution(code: CodeTool) -> Result<Tool, DeclarationError> {
    let tools: Vec<ModelView> = code
        .tools
        .into_iter()
        .filter(|t| t.name != TOOL_NAME)
        .collect();
    let does = description(&tools, code.data.is_some(), code.paging);
    let worked = worked_example(&tools, code.paging);
    let wall = code.sandbox.config().limits.wall;
    let state = Arc::new(State {
        module: crate::python::tools_module(&tools, code.paging),
        allowed: tools.iter().map(|t| t.name.clone()).collect(),
        sandbox: code.sandbox,
        workspaces: code.workspaces,
        data: code.data,
        failed_scripts: code.failed_scripts,
    });
    let mut builder = ToolBuilder::<CodeArgs>::new(TOOL_NAME, 1).describe(
            &does,
            "a task needs many tool calls or has to filter or count over many results (every note that mentions the budget, every book of an author): loop in the script and print only what the answer needs.",
            Some("one or two tool calls answer the question: call those tools directly."),
            "exit_code, stdout (and stderr when the script failed), tool_calls made, stopped (a limit that ended the script), limits_hit (memory, processes or work_folder: a bound of the whole run the script ran into) and the returned files; the printed output is in untrusted_content.",
        );
    if let Some(worked) = worked {
        builder = builder.example(worked.does, json!({ "code": worked.code }));
    }
    builder
        .example(
            "write a file and return it",
            json!({"code": "open(\"summary.md\", \"w\").write(\"# Budget\\n\")", "return_files": ["summary.md"]}),
        )
        .policy(
            Risk::Low,
            Effect::Read,
            "The script runs in an OS sandbox with no network and no host files beyond its own folders; every tool it calls is checked and approved on its own.",
        )
        .deadline(wall + Duration::from_secs(15))
        .max_output_bytes(32 * 1024)
        .more_hint("print less: filter and summarize in the script")
        .check(|args, _facts| check_args(args))
        .read(move |ctx, args: CodeArgs| {
            let state = Arc::clone(&state);
            async move { state.run(ctx, args).await }
        })
}

struct State {
    sandbox: Sandbox,
    workspaces: Arc<Workspaces>,
    module: String,
    allowed: BTreeSet<String>,
    data: Option<Arc<dyn DataExport>>,
    failed_scripts: FailedScripts,
}

fn unavailable(e: &SandboxError) -> ToolError {
    ToolError::new(
        toolgate_core::ErrorCode::PermanentDependency,
        format!("the code sandbox is unavailable, so nothing ran: {e}"),
    )
}

impl State {
    async fn run(&self, ctx: ExecContext, args: CodeArgs) -> Result<ToolOutput, ToolError> {
        let work = self
            .workspaces
            .for_run(&ctx.run_id)
            .map_err(|e| unavailable(&e))?;
        let data_dir = match &self.data {
            Some(export) => Some(export_data(Arc::clone(export)).await?),
            None => None,
        };
        let (script, newlines) = crate::source::repair_escaped_newlines(&args.code);
        let (script, quotes) = crate::source::repair_escaped_quotes(&script);
        let repairs = repair_note(newlines, quotes);
        let job = Job {
            script,
            tools_module: self.module.clone(),
            data: data_dir.as_ref().map(|(dir, _)| dir.path().to_owned()),
            work: work.clone(),
            cancel: ctx.cancel.clone(),
        };
        let bridge = DispatchBridge {
            tools: ctx.tools.clone(),
            allowed: &self.allowed,
        };
        let report = self
            .sandbox
            .run(&job, &bridge)
            .await
            .map_err(|e| unavailable(&e))?;
        let files = read_returned(&work, args.return_files.as_deref().unwrap_or_default());
        let mut output = observation(&report, files);
        if self.failed_scripts == FailedScripts::Refused
            && let Some(mut refused) = failed_script(&report, &output)
        {
            if let Some(note) = repairs {
                refused.hint = Some(match refused.hint.take() {
                    Some(hint) => format!("{hint}. Also: {note}"),
                    None => note,
                });
            }
            return Err(refused);
        }
        if let Some(note) = repairs {
            output.content["note"] = serde_json::json!(note);
        }
        Ok(output)
    }
}

/// What the repairs of [`crate::source`] read, in a sentence for the model; `None` when none.
fn repair_note(newlines: usize, quotes: usize) -> Option<String> {
    let mut said = Vec::new();
    if newlines > 0 {
        said.push(format!(
            "the script was on one line with its line breaks written as \\n; {newlines} of them (outside strings) were read as line breaks. Write real line breaks next time."
        ));
    }
    if quotes > 0 {
        said.push(format!(
            "{quotes} quotes were written as \\\" outside any string and were read as plain quotes. Write plain quotes next time."
        ));
    }
    (!said.is_empty()).then(|| said.join(" "))
}

/// The notebook exported for one run, private to it: the folder 0700 and every file 0600,
/// owned by the user the sandbox runs as (whoever runs toolgate, or nobody when that is root),
/// so no other local user can read it while the script runs.
async fn export_data(
    export: Arc<dyn DataExport>,
) -> Result<(tempfile::TempDir, String), ToolError> {
    tokio::task::spawn_blocking(move || {
        // tempfile makes the folder 0700.
        let dir = tempfile::Builder::new()
            .prefix("toolgate-data-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let summary = export.export(dir.path())?;
        seal_export(dir.path(), crate::run::setup::sandbox_owner()).map_err(|e| e.to_string())?;
        Ok::<_, String>((dir, summary))
    })
    .await
    .map_err(|e| ToolError::internal(format!("the data export stopped: {e}")))?
    .map_err(|e| {
        ToolError::new(
            toolgate_core::ErrorCode::TransientDependency,
            format!("the data for the script could not be exported: {e}"),
        )
    })
}

/// Folders 0700, files 0600, each owned by `owner` when one is given; anything else in the
/// export (a link, a FIFO) fails it, since the export holds only files and folders.
fn seal_export(path: &Path, owner: Option<u32>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let kind = std::fs::symlink_metadata(path)?.file_type();
    let mode = if kind.is_dir() {
        0o700
    } else if kind.is_file() {
        0o600
    } else {
        return Err(std::io::Error::other(format!(
            "{} is neither a file nor a folder",
            path.display()
        )));
    };
    if let Some(uid) = owner {
        std::os::unix::fs::lchown(path, Some(uid), Some(uid))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    if kind.is_dir() {
        for entry in std::fs::read_dir(path)? {
            seal_export(&entry?.path(), owner)?;
        }
    }
    Ok(())
}

struct ReturnedFile {
    path: String,
    bytes: u64,
    text: Option<String>,
    note: Option<String>,
}

/// The files the script named, each read beneath the work folder without following any link
/// it made (see [`crate::beneath`]); a refused one says why, and nothing of it is read.
fn read_returned(work: &Path, paths: &[String]) -> Vec<ReturnedFile> {
    paths
        .iter()
        .take(MAX_RETURN_FILES)
        .map(
            |path| match crate::beneath::read_beneath(work, path, RETURN_FILE_BYTES) {
                Ok(read) => ReturnedFile {
                    path: path.clone(),
                    bytes: read.size,
                    text: Some(String::from_utf8_lossy(&read.bytes).into_owned()),
                    note: read.cut.then(|| {
                        format!(
                            "cut to the first {RETURN_FILE_BYTES} of {} bytes",
                            read.size
                        )
                    }),
                },
                Err(refused) => ReturnedFile {
                    path: path.clone(),
                    bytes: 0,
                    text: None,
                    note: Some(format!("not returned: {refused}")),
                },
            },
        )
        .collect()
}

fn observation(report: &RunReport, files: Vec<ReturnedFile>) -> ToolOutput {
    let mut content = json!({
        "exit_code": report.exit_code,
        "tool_calls": report.tool_calls,
        "elapsed_ms": report.elapsed_ms,
        "stdout_bytes": report.stdout.total_bytes,
    });
    if let Some(signal) = report.signal {
        content["signal"] = json!(signal);
    }
    if let Some(stopped) = report.stopped {
        content["stopped"] = json!(stopped);
    }
    // Which mechanism bounded the run as a whole, so a trace shows it for every run.
    content["bounded_by"] = json!(report.bounds.layer);
    if !report.limits_hit.is_empty() {
        content["limits_hit"] = json!(report.limits_hit);
        content["limits"] = json!({
            "memory_mb": report.bounds.memory_bytes >> 20,
            "processes": report.bounds.processes,
            "tmp_mb": report.bounds.tmp_bytes >> 20,
            "work_mb": report.bounds.work_bytes >> 20,
            "bounded_by": report.bounds.layer,
        });
    }
    if report.stdout.truncated {
        content["stdout_cut"] = json!(format!(
            "only the first {} of {} bytes are shown; print less",
            report.stdout.text.len(),
            report.stdout.total_bytes
        ));
    }
    let mut untrusted = vec![UntrustedText {
        source: "code_execution stdout".to_owned(),
        text: report.stdout.text.clone(),
    }];
    if report.exit_code != Some(0) && !report.stderr.text.is_empty() {
        untrusted.push(UntrustedText {
            source: "code_execution stderr".to_owned(),
            text: report.stderr.text.clone(),
        });
    }
    let mut listed = Vec::new();
    for file in files {
        listed.push(json!({"path": file.path, "bytes": file.bytes, "note": file.note}));
        if let Some(text) = file.text {
            untrusted.push(UntrustedText {
                source: format!("code_execution file {}", file.path),
                text,
            });
        }
    }
    if !listed.is_empty() {
        content["files"] = Value::Array(listed);
    }
    ToolOutput {
        content,
        untrusted,
        sources: vec!["sandbox".to_owned()],
    }
}

/// The refusal for a script that exited with an error code by itself (not a signal, not a
/// limit: those are the run's bounds, reported as a result); `None` for any other run. It
/// carries the observation's untrusted texts (stdout, stderr, returned files) as they are.
fn failed_script(report: &RunReport, output: &ToolOutput) -> Option<ToolError> {
    let code = report.exit_code.filter(|c| *c != 0)?;
    if report.signal.is_some() || report.stopped.is_some() || !report.limits_hit.is_empty() {
        return None;
    }
    let calls = match report.tool_calls {
        0 => "no tool call".to_owned(),
        1 => "1 tool call (its effect stands)".to_owned(),
        n => format!("{n} tool calls (their effects stand)"),
    };
    let mut refused = ToolError::invalid(
        "code",
        format!("{FAILED_WITH_EXIT_CODE}{code} after {calls}; its error (the traceback) is in untrusted_content"),
    )
    .with_hint("fix the line the traceback names and call code_execution again with the whole corrected script; `t` is the tools module, already imported");
    refused.untrusted = output.untrusted.clone();
    Some(refused)
}

/// How a failed script's refusal message begins, up to its exit code.
const FAILED_WITH_EXIT_CODE: &str = "the script failed with exit code ";

/// The exit code a failed script's refusal states ([`FailedScripts::Refused`]), read back from
/// its message (a measurement reads it from a transcript); `None` for any other message.
pub fn refused_exit_code(message: &str) -> Option<i64> {
    message
        .strip_prefix(FAILED_WITH_EXIT_CODE)?
        .split(' ')
        .next()?
        .parse()
        .ok()
}

/// Tool calls from a script, through the dispatcher that runs `code_execution`.
struct DispatchBridge<'a> {
    tools: ToolCaller,
    allowed: &'a BTreeSet<String>,
}

impl ToolBridge for DispatchBridge<'_> {
    fn call(&self, tool: String, arguments: Value) -> BoxFuture<'_, BridgeReply> {
        Box::pin(async move {
            if !self.allowed.contains(&tool) {
                return BridgeReply::error(
                    "not_found",
                    format!(
                        "no tool {tool:?} is offered to code; these are: {}",
                        self.allowed.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                    false,
                );
            }
            let outcome = self.tools.call(Origin::Sandbox, &tool, arguments).await;
            match &outcome.result {
                CallResult::Done(observation) => BridgeReply::ok(json!({
                    "content": observation.content,
                    "untrusted": observation.untrusted,
                })),
                // The hint says what to do next (say, which plan would open a closed tool): a
                // script's author reads it in the exception as a model reads it in a result.
                CallResult::Failed(error) => BridgeReply::error(
                    error.code.as_str(),
                    match &error.hint {
                        Some(hint) => format!("{} (what to do: {hint})", error.message),
                        None => error.message.clone(),
                    },
                    error.retryable(),
                ),
                CallResult::ApprovalRequired(_) => BridgeReply::error(
                    "approval_denied",
                    "this call needs a person's approval, which cannot be asked from code here; nothing ran",
                    false,
                ),
            }
        })
    }
}

#[cfg(test)]
#[path = "tool_tests.rs"]
mod tests;
