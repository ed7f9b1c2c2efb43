//! One sandboxed run, in six stages, each one method of [`Sandbox`]:
//! 1. *prepare the workspace* (`prepare_workspace`): the run's private code folder, its
//!    mounts, its work folder measured, its cgroup made and its bounds worked out; a checked
//!    work folder already at its bound is refused here (`refuse_full_work_folder`: nothing
//!    runs);
//! 2. *build the bubblewrap command* (`bubblewrap_command`): the init's configuration, the
//!    folders' descriptors and the bridge's child end placed for bubblewrap (`setup.rs`), an
//!    environment built from nothing;
//! 3. *start* (`start`): bubblewrap spawned into the run's cgroup, the host's end of the
//!    bridge opened, the program's output captured within its caps (`report.rs`);
//! 4. *wait for the init* (`await_init`): the init's status read off the bridge, before
//!    anything of the program runs;
//! 5. *serve the bridge and enforce the limits* (`serve_until_exit`): tool calls served over
//!    the bridge (`bridge.rs`) while the program runs; the whole process tree killed when the
//!    wall clock runs out, the caller cancels, or a checked work folder fills;
//! 6. *collect the report* (`collect_report`): what the cgroup counted, what the work folder
//!    holds, the captured output.
//!
//! Guarantees: nothing runs unless bubblewrap made every namespace and the init applied every
//! required layer ([`SandboxError::LayerUnavailable`] otherwise); the program's environment is
//! built from nothing; killing bubblewrap kills the PID namespace and with it every process the
//! program started; the wall clock stops while a tool call is in flight (a person may be asked
//! to approve it), and CPU time is bounded by the kernel either way.

mod bridge;
mod report;
pub(crate) mod setup;

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::BufReader;
use tokio::net::UnixStream;
use tokio::process::Child;
use tokio::task::JoinHandle;
use toolgate_core::CancelToken;

pub use bridge::{BridgeReply, NoTools, ToolBridge};
pub use report::{Bounds, Captured, LimitHit, RunReport, Stopped, hits};
use setup::is_root;

use crate::bwrap::{self, BRIDGE_FD, Mounts};
use crate::cgroup::{self, BoundLayer, RunCgroup, Usage};
use crate::config::SandboxConfig;
use crate::error::{Layer, SandboxError};
use crate::init::{INIT_FAILED, InitConfig, InitStatus, Rlimits};
use crate::workspace::{self, WorkBound};
use bridge::BridgeEnd;
use report::capture;
use setup::{open_path, prepare_child, prepare_for_nobody, write_file};

/// One program to run.
#[derive(Debug, Clone)]
pub struct Job {
    pub script: String,
    /// The `toolgate_tools` module (see [`crate::python::tools_module`]).
    pub tools_module: String,
    /// Host folder mounted read-only at `/sandbox/data`.
    pub data: Option<PathBuf>,
    /// Host folder mounted writable at `/sandbox/work` (the working directory).
    pub work: PathBuf,
    pub cancel: CancelToken,
}

/// How often a checked work folder is measured during a run.
const WORK_CHECK_PERIOD: Duration = Duration::from_millis(50);

/// Stage 1's work: the run's folders and bounds, before anything starts.
struct Prepared {
    /// The run's private code folder (at `mounts.code`), held only to be removed when the run
    /// is over.
    _code: tempfile::TempDir,
    mounts: Mounts,
    cgroup: Option<RunCgroup>,
    bounds: Bounds,
    /// Where a measurement of the work folder stops counting entries: one past its budget.
    entries_cap: u64,
    /// The entries the work folder held before the run.
    work_entries: u64,
}

/// Stage 2's work: the command, and the descriptors it hands bubblewrap (open until it is
/// spawned).
struct BwrapCommand {
    command: tokio::process::Command,
    /// The host's end of the bridge.
    host_end: StdUnixStream,
    child_fds: Vec<OwnedFd>,
}

/// A started run: bubblewrap's process and its output being captured.
struct Running {
    child: Child,
    stdout: JoinHandle<Captured>,
    stderr: JoinHandle<Captured>,
}

/// How the program's run ended, as stage 5 saw it.
struct Ended {
    exit: ExitStatus,
    stopped: Option<Stopped>,
    tool_calls: usize,
    /// The work folder's watcher, still to be stopped.
    watcher: Option<JoinHandle<()>>,
}

/// A configured sandbox; cheap to share, one process tree per [`Sandbox::run`].
#[derive(Debug, Clone)]
pub struct Sandbox {
    config: SandboxConfig,
    bwrap: PathBuf,
}

fn find_in_path(path: &std::ffi::OsStr, program: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

impl Sandbox {
    /// Checks that bubblewrap, the interpreter and the init exist; nothing is started.
    pub fn new(config: SandboxConfig) -> Result<Self, SandboxError> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        Sandbox::with_search_path(config, path)
    }

    /// As [`Sandbox::new`], looking for bubblewrap in `path` (a `PATH`-style list) when the
    /// configuration names none.
    pub fn with_search_path(
        config: SandboxConfig,
        path: impl AsRef<std::ffi::OsStr>,
    ) -> Result<Self, SandboxError> {
        let bwrap = match &config.bwrap {
            Some(path) => path.clone(),
            None => find_in_path(path.as_ref(), "bwrap").ok_or_else(|| {
                SandboxError::LayerUnavailable {
                    layer: Layer::Namespaces,
                    reason: "bubblewrap (bwrap) is not in PATH".to_owned(),
                }
            })?,
        };
        if !bwrap.is_file() {
            return Err(SandboxError::LayerUnavailable {
                layer: Layer::Namespaces,
                reason: format!("{} does not exist", bwrap.display()),
            });
        }
        if !config.python.starts_with("/usr") || !config.python.is_file() {
            return Err(SandboxError::Config(format!(
                "the interpreter {} must be a file under /usr (the only software mounted inside); install python3 from the system",
                config.python.display()
            )));
        }
        if !config.init.path.is_file() {
            return Err(SandboxError::Config(format!(
                "the sandbox init {} does not exist",
                config.init.path.display()
            )));
        }
        Ok(Sandbox { config, bwrap })
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// Runs `job`, serving its tool calls with `bridge`.
    pub async fn run(&self, job: &Job, bridge: &dyn ToolBridge) -> Result<RunReport, SandboxError> {
        let started = Instant::now();
        let prepared = self.prepare_workspace(job)?;
        if let Some(refused) = self.refuse_full_work_folder(&prepared, started) {
            return Ok(refused);
        }
        let command = self.bubblewrap_command(&prepared)?;
        let (mut running, mut bridge_end) = self.start(command)?;
        let deadline = tokio::time::Instant::now() + self.config.limits.wall;
        let (landlock, seccomp) = self
            .await_init(&mut running, &mut bridge_end, deadline)
            .await?;
        let ended = self
            .serve_until_exit(
                job,
                bridge,
                &prepared,
                &mut running,
                &mut bridge_end,
                deadline,
            )
            .await?;
        // No more replies: the host's side of the bridge is shut for writing (the rest of it
        // lives to the end of the run).
        drop(bridge_end.replies);
        if let Some(watcher) = &ended.watcher {
            watcher.abort();
        }
        Ok(self
            .collect_report(prepared, running, ended, started, landlock, seccomp)
            .await)
    }

    /// Stage 1: the run's private code folder with the script and its tools module, its
    /// mounts (each a folder), its work folder measured, its cgroup made (or the rlimits that
    /// split the same budget), and the bounds that follow.
    fn prepare_workspace(&self, job: &Job) -> Result<Prepared, SandboxError> {
        let code = tempfile::Builder::new()
            .prefix("toolgate-code-")
            .tempdir()
            .map_err(|e| SandboxError::io(std::env::temp_dir(), e))?;
        write_file(&code.path().join("main.py"), &job.script)?;
        write_file(&code.path().join("toolgate_tools.py"), &job.tools_module)?;
        write_file(
            &code.path().join(crate::python::LAUNCHER_FILE),
            crate::python::LAUNCHER,
        )?;
        let mounts = Mounts {
            code: code.path().to_owned(),
            data: job.data.clone(),
            work: job.work.clone(),
            init: self.config.init.path.clone(),
            tmp_bytes: self.config.limits.tmp_bytes,
        };
        for dir in [Some(&mounts.work), mounts.data.as_ref()]
            .into_iter()
            .flatten()
        {
            if !dir.is_dir() {
                return Err(SandboxError::Config(format!(
                    "{} is not a folder",
                    dir.display()
                )));
            }
        }
        let limits = &self.config.limits;
        let work = workspace::bound_of(&mounts.work, limits.work_bytes);
        let entries_cap = workspace::inodes_for(limits.work_bytes) + 1;
        let (work_used, work_entries) = workspace::usage(&mounts.work, entries_cap)
            .map_err(|e| SandboxError::io(&mounts.work, e))?;
        let cgroup = cgroup::as_required(
            self.config.cgroup,
            RunCgroup::create(limits.memory_bytes, limits.processes),
        )?;
        let (processes, address_space) = match &cgroup {
            Some(_) => (
                limits.processes,
                limits.address_space_bytes.min(limits.memory_bytes),
            ),
            None => cgroup::split_rlimits(limits.memory_bytes, limits.processes),
        };
        let bounds = Bounds {
            layer: cgroup
                .as_ref()
                .map_or(BoundLayer::Rlimits, RunCgroup::layer),
            memory_bytes: limits.memory_bytes,
            processes,
            address_space_bytes: address_space,
            tmp_bytes: limits.tmp_bytes,
            work,
            work_bytes: limits.work_bytes,
            work_used_bytes: work_used,
            usage: Usage::default(),
        };
        Ok(Prepared {
            _code: code,
            mounts,
            cgroup,
            bounds,
            entries_cap,
            work_entries,
        })
    }

    /// Stage 1's refusal: the report of a run that did not start because its checked work
    /// folder is already at or over its bound.
    fn refuse_full_work_folder(&self, prepared: &Prepared, started: Instant) -> Option<RunReport> {
        let limits = &self.config.limits;
        let work_used = prepared.bounds.work_used_bytes;
        let work_entries = prepared.work_entries;
        let full = work_used >= limits.work_bytes || work_entries >= prepared.entries_cap;
        if prepared.bounds.work != WorkBound::Checked || !full {
            return None;
        }
        Some(RunReport {
            exit_code: None,
            signal: None,
            stopped: Some(Stopped::WorkFolderFull),
            stdout: Captured::empty(),
            stderr: Captured {
                text: format!(
                    "nothing ran: the work folder holds {work_used} bytes in {work_entries} entries, at or over its bound of {} bytes; delete files from it",
                    limits.work_bytes
                ),
                total_bytes: 0,
                truncated: false,
            },
            tool_calls: 0,
            landlock: false,
            seccomp: false,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            bounds: prepared.bounds.clone(),
            limits_hit: vec![LimitHit::WorkFolder],
        })
    }

    /// Stage 2: the bubblewrap command that starts the init with the run's configuration, its
    /// folders' descriptors and the bridge's child end placed where bubblewrap expects them,
    /// in an empty environment, as nobody when toolgate runs as root.
    fn bubblewrap_command(&self, prepared: &Prepared) -> Result<BwrapCommand, SandboxError> {
        let limits = &self.config.limits;
        let Prepared { mounts, bounds, .. } = prepared;
        // A checked folder: no one file may grow past the room left.
        let file_size = match bounds.work {
            WorkBound::Tmpfs => limits.file_size_bytes,
            WorkBound::Checked => limits
                .file_size_bytes
                .min(limits.work_bytes.saturating_sub(bounds.work_used_bytes)),
        };
        let init = self.init_config(
            mounts,
            bounds.processes,
            bounds.address_space_bytes,
            file_size,
        )?;
        let as_root = is_root();
        if as_root {
            prepare_for_nobody(mounts)?;
        }
        let (host_end, child_end) = StdUnixStream::pair().map_err(SandboxError::Spawn)?;
        let child_end = OwnedFd::from(child_end);
        let code_fd = open_path(&mounts.code)?;
        let data_fd = mounts.data.as_deref().map(open_path).transpose()?;
        let work_fd = open_path(&mounts.work)?;
        let init_fd = open_path(&mounts.init)?;
        let mut placed = vec![
            (child_end.as_raw_fd(), BRIDGE_FD),
            (code_fd.as_raw_fd(), bwrap::CODE_FD),
            (work_fd.as_raw_fd(), bwrap::WORK_FD),
            (init_fd.as_raw_fd(), bwrap::INIT_FD),
        ];
        if let Some(fd) = &data_fd {
            placed.push((fd.as_raw_fd(), bwrap::DATA_FD));
        }
        let mut command = tokio::process::Command::new(&self.bwrap);
        command
            .args(bwrap::arguments(mounts))
            .arg(bwrap::INIT_PATH)
            .args(&self.config.init.args)
            .arg("--config")
            .arg(init)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if as_root {
            // The kernel exempts root from the process limit, and the sandbox's user maps to
            // whoever starts bubblewrap: so root starts it as nobody.
            command.uid(bwrap::SANDBOX_UID).gid(bwrap::SANDBOX_UID);
        }
        let join = prepared
            .cgroup
            .as_ref()
            .map(RunCgroup::procs_fds)
            .unwrap_or_default();
        // SAFETY: only async-signal-safe calls (fcntl, dup2, write) between fork and exec.
        unsafe {
            command.pre_exec(move || prepare_child(&join, &placed));
        }
        let mut child_fds = vec![child_end, code_fd, work_fd, init_fd];
        child_fds.extend(data_fd);
        Ok(BwrapCommand {
            command,
            host_end,
            child_fds,
        })
    }

    /// Stage 3: bubblewrap started (the descriptors it was given closed on this side), the
    /// host's end of the bridge opened, the program's output captured within its caps.
    fn start(&self, command: BwrapCommand) -> Result<(Running, BridgeEnd), SandboxError> {
        let BwrapCommand {
            mut command,
            host_end,
            child_fds,
        } = command;
        let limits = &self.config.limits;
        let mut child = command.spawn().map_err(SandboxError::Spawn)?;
        drop(child_fds);
        let control = host_end.try_clone().map_err(SandboxError::Spawn)?;
        host_end
            .set_nonblocking(true)
            .map_err(SandboxError::Spawn)?;
        let bridge_stream = UnixStream::from_std(host_end).map_err(SandboxError::Spawn)?;
        let (read_half, write_half) = bridge_stream.into_split();
        let stdout = tokio::spawn(capture(child.stdout.take(), limits.stdout_bytes));
        let stderr = tokio::spawn(capture(child.stderr.take(), limits.stderr_bytes));
        let running = Running {
            child,
            stdout,
            stderr,
        };
        let bridge_end = BridgeEnd {
            requests: BufReader::new(read_half),
            replies: write_half,
            control,
            frame: Vec::new(),
        };
        Ok((running, bridge_end))
    }

    /// Stage 4: the init's status, the first frame on the bridge (nothing of the program has
    /// run before it): which of Landlock and seccomp it applied, or the layer it could not
    /// (the tree is killed and nothing runs).
    async fn await_init(
        &self,
        running: &mut Running,
        bridge_end: &mut BridgeEnd,
        deadline: tokio::time::Instant,
    ) -> Result<(bool, bool), SandboxError> {
        let status = tokio::select! {
            read = bridge_end.next_frame(self.config.limits.bridge_request_bytes) => read.ok().flatten(),
            () = tokio::time::sleep_until(deadline) => None,
        };
        let status: Option<InitStatus> = status.and_then(|l| serde_json::from_slice(&l).ok());
        match status {
            Some(InitStatus::Ready { landlock, seccomp }) => Ok((landlock, seccomp)),
            Some(InitStatus::Failed { layer, reason }) => {
                let _ = running.child.kill().await;
                Err(SandboxError::LayerUnavailable { layer, reason })
            }
            None => {
                let _ = running.child.start_kill();
                let exit = running.child.wait().await.map_err(SandboxError::Wait)?;
                let err = (&mut running.stderr)
                    .await
                    .map(|c| c.text)
                    .unwrap_or_default();
                let reason = if exit.code() == Some(INIT_FAILED) || err.trim().is_empty() {
                    format!("the sandbox did not start ({exit})")
                } else {
                    err.trim().to_owned()
                };
                Err(SandboxError::LayerUnavailable {
                    layer: Layer::Namespaces,
                    reason,
                })
            }
        }
    }

    /// Stage 5: the script's tool calls served over the bridge while the program runs, and the
    /// run's limits enforced: the whole tree is killed when the wall clock runs out (it stops
    /// while a call is in flight), the caller cancels, or a checked work folder fills.
    async fn serve_until_exit(
        &self,
        job: &Job,
        tools: &dyn ToolBridge,
        prepared: &Prepared,
        running: &mut Running,
        bridge_end: &mut BridgeEnd,
        mut deadline: tokio::time::Instant,
    ) -> Result<Ended, SandboxError> {
        let limits = &self.config.limits;
        let mut tool_calls = 0;
        let mut bridge_open = true;
        let (watcher, mut full_rx) = watch_work_folder(prepared);
        let watching = watcher.is_some();
        let child = &mut running.child;
        let (exit, stopped) = loop {
            tokio::select! {
                exit = child.wait() => break (exit.map_err(SandboxError::Wait)?, None),
                _ = &mut full_rx, if watching => {
                    break stop_tree(child, Stopped::WorkFolderFull).await?;
                }
                () = tokio::time::sleep_until(deadline) => {
                    break stop_tree(child, Stopped::WallClock).await?;
                }
                () = job.cancel.canceled() => {
                    break stop_tree(child, Stopped::Canceled).await?;
                }
                read = bridge_end.next_frame(limits.bridge_request_bytes), if bridge_open => {
                    bridge_open = bridge_end
                        .answer(read, tools, limits.tool_calls, &mut tool_calls, &mut deadline)
                        .await;
                }
            }
        };
        Ok(Ended {
            exit,
            stopped,
            tool_calls,
            watcher,
        })
    }

    /// Stage 6: the report: what the cgroup counted (dropping it kills what is left of the
    /// run), what the work folder holds, and the captured output.
    async fn collect_report(
        &self,
        prepared: Prepared,
        running: Running,
        ended: Ended,
        started: Instant,
        landlock: bool,
        seccomp: bool,
    ) -> RunReport {
        let Prepared {
            mounts,
            cgroup,
            mut bounds,
            entries_cap,
            ..
        } = prepared;
        if let Some(cgroup) = cgroup {
            bounds.usage = cgroup.usage();
            // Kills what is left of the run and removes the cgroup.
            drop(cgroup);
        }
        if let Ok((used, _)) = workspace::usage(&mounts.work, entries_cap) {
            bounds.work_used_bytes = used;
        }
        // The pipes close when the namespace's last process is gone; bounded all the same.
        let grace = Duration::from_secs(5);
        let stdout = tokio::time::timeout(grace, running.stdout)
            .await
            .ok()
            .and_then(Result::ok);
        let stderr = tokio::time::timeout(grace, running.stderr)
            .await
            .ok()
            .and_then(Result::ok);
        RunReport {
            exit_code: ended.exit.code(),
            signal: ended.exit.signal(),
            stopped: ended.stopped,
            stdout: stdout.unwrap_or_else(Captured::empty),
            stderr: stderr.unwrap_or_else(Captured::empty),
            tool_calls: ended.tool_calls,
            landlock,
            seccomp,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            limits_hit: hits(&bounds),
            bounds,
        }
    }

    fn init_config(
        &self,
        mounts: &Mounts,
        processes: u64,
        address_space: u64,
        file_size: u64,
    ) -> Result<String, SandboxError> {
        let limits = &self.config.limits;
        let config = InitConfig {
            rlimits: Rlimits {
                cpu_seconds: limits.cpu_seconds,
                address_space_bytes: address_space,
                processes,
                file_size_bytes: file_size,
                open_files: limits.open_files,
            },
            seccomp: self.config.seccomp,
            landlock: self.config.landlock,
            read_only: bwrap::readable(mounts),
            read_write: bwrap::writable(),
            status_fd: BRIDGE_FD,
            program: vec![
                self.config.python.to_string_lossy().into_owned(),
                "-E".to_owned(),
                "-s".to_owned(),
                "-B".to_owned(),
                format!("{}/{}", bwrap::CODE_DIR, crate::python::LAUNCHER_FILE),
            ],
        };
        serde_json::to_string(&config).map_err(|e| SandboxError::Config(e.to_string()))
    }
}

/// For a checked work folder: a task that measures it every [`WORK_CHECK_PERIOD`] while the
/// run goes on and sends once on the channel when it is over its bound (the overshoot is what
/// the script writes in one period). None for a tmpfs.
fn watch_work_folder(
    prepared: &Prepared,
) -> (Option<JoinHandle<()>>, tokio::sync::oneshot::Receiver<()>) {
    let (full_tx, full_rx) = tokio::sync::oneshot::channel::<()>();
    let watcher = (prepared.bounds.work == WorkBound::Checked).then(|| {
        let dir = prepared.mounts.work.clone();
        let bytes = prepared.bounds.work_bytes;
        let entries_cap = prepared.entries_cap;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(WORK_CHECK_PERIOD).await;
                let dir = dir.clone();
                let over = tokio::task::spawn_blocking(move || {
                    // A folder that cannot be measured is taken as full (fail closed).
                    workspace::usage(&dir, entries_cap).map_or(true, |(used, entries)| {
                        used > bytes || entries >= entries_cap
                    })
                })
                .await
                .unwrap_or(true);
                if over {
                    let _ = full_tx.send(());
                    return;
                }
            }
        })
    });
    (watcher, full_rx)
}

/// Kills the whole tree (bubblewrap's end ends the PID namespace) and waits for it: the run
/// stopped for `cause`.
async fn stop_tree(
    child: &mut Child,
    cause: Stopped,
) -> Result<(ExitStatus, Option<Stopped>), SandboxError> {
    let _ = child.start_kill();
    let exit = child.wait().await.map_err(SandboxError::Wait)?;
    Ok((exit, Some(cause)))
}
