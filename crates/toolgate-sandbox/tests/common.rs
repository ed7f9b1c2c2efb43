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
        tools_module: toolgate_sandbox::python::tools_module(&[]),
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
