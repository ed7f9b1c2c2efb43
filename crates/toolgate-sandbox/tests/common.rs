#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! Shared by the sandbox's test files: a real sandbox (bubblewrap, the real init, the
//! system's Python) with short limits.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toolgate_core::CancelToken;
use toolgate_sandbox::{InitProgram, Job, NoTools, RunReport, Sandbox, SandboxConfig, ToolBridge};

pub fn config() -> SandboxConfig {
    let mut config = SandboxConfig::new(InitProgram {
        path: PathBuf::from(env!("CARGO_BIN_EXE_toolgate-sandbox-init")),
        args: Vec::new(),
    });
    config.limits.wall = Duration::from_secs(10);
    config.limits.cpu_seconds = 8;
    config
}

pub fn sandbox() -> Sandbox {
    Sandbox::new(config())
        .expect("bubblewrap and /usr/bin/python3 are installed (scripts/setup.sh)")
}

pub fn job(script: &str, work: &Path, data: Option<&Path>) -> Job {
    Job {
        script: script.to_owned(),
        tools_module: toolgate_sandbox::python::tools_module(
            &[],
            toolgate_sandbox::python::Paging::ByPage,
        ),
        data: data.map(Path::to_owned),
        work: work.to_owned(),
        cancel: CancelToken::new(),
    }
}

pub async fn run_in(
    sandbox: &Sandbox,
    script: &str,
    work: &Path,
    data: Option<&Path>,
) -> RunReport {
    run_with(sandbox, script, work, data, &NoTools).await
}

pub async fn run_with(
    sandbox: &Sandbox,
    script: &str,
    work: &Path,
    data: Option<&Path>,
    bridge: &dyn ToolBridge,
) -> RunReport {
    sandbox.run(&job(script, work, data), bridge).await.unwrap()
}

/// Runs `script` in a fresh work folder; returns the report and the folder.
pub async fn run(script: &str) -> (RunReport, tempfile::TempDir) {
    let work = tempfile::tempdir().unwrap();
    let report = run_in(&sandbox(), script, work.path(), None).await;
    (report, work)
}

/// A data folder the sandbox may read (readable by everyone, as an export is).
pub fn data_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `code_execution` on the real sandbox, behind a real dispatcher with `extra` tools beside it
/// (callable from scripts), `data` exported into each run.
pub struct CodeHarness {
    pub dispatcher: toolgate_core::Dispatcher,
    pub workspaces: std::sync::Arc<toolgate_sandbox::Workspaces>,
}

pub const RUN_ID: &str = "run-1";

impl CodeHarness {
    pub fn new(
        data: Option<std::sync::Arc<dyn toolgate_sandbox::DataExport>>,
        extra: Vec<toolgate_core::Tool>,
    ) -> Self {
        Self::with_failed_scripts(data, extra, toolgate_sandbox::FailedScripts::Reported)
    }

    pub fn with_failed_scripts(
        data: Option<std::sync::Arc<dyn toolgate_sandbox::DataExport>>,
        extra: Vec<toolgate_core::Tool>,
        failed_scripts: toolgate_sandbox::FailedScripts,
    ) -> Self {
        let workspaces = std::sync::Arc::new(toolgate_sandbox::Workspaces::new().unwrap());
        let code = toolgate_sandbox::code_execution(toolgate_sandbox::CodeTool {
            sandbox: sandbox(),
            workspaces: std::sync::Arc::clone(&workspaces),
            tools: extra.iter().map(|t| t.spec.model_view()).collect(),
            data,
            paging: toolgate_sandbox::Paging::ByPage,
            failed_scripts,
        })
        .unwrap();
        let mut tools = extra;
        tools.push(code);
        let registry = std::sync::Arc::new(toolgate_core::Registry::new(tools).unwrap());
        CodeHarness {
            dispatcher: toolgate_core::Dispatcher::new(registry).unwrap(),
            workspaces,
        }
    }

    /// The conversation's work folder on the host.
    pub fn work(&self) -> PathBuf {
        self.workspaces.for_run(RUN_ID).unwrap()
    }

    /// One `code_execution` call; the observation (the call must succeed).
    pub async fn run(&self, arguments: serde_json::Value) -> toolgate_core::Observation {
        let outcome = self
            .dispatcher
            .call(toolgate_core::CallRequest::new(
                toolgate_core::Principal::local("alice", &[]),
                RUN_ID,
                toolgate_sandbox::tool::TOOL_NAME,
                arguments,
            ))
            .await;
        outcome
            .observation()
            .unwrap_or_else(|| panic!("code_execution failed: {}", outcome.model_text()))
            .clone()
    }
}

/// The texts of the returned files (the untrusted entries a returned file adds).
pub fn returned_texts(observation: &toolgate_core::Observation) -> Vec<(String, String)> {
    observation
        .untrusted
        .iter()
        .filter(|u| u.source.starts_with("code_execution file "))
        .map(|u| (u.source.clone(), u.text.clone()))
        .collect()
}

/// The script's stdout.
pub fn stdout(observation: &toolgate_core::Observation) -> String {
    observation
        .untrusted
        .iter()
        .find(|u| u.source == "code_execution stdout")
        .map(|u| u.text.clone())
        .unwrap_or_default()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no failure mode.
    unsafe { libc::geteuid() == 0 }
}
