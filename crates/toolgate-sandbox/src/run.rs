//! One sandboxed run: bubblewrap started with the run's mounts, the init's status read off the
//! bridge, tool calls served over the bridge while the program runs, output captured within
//! its caps, and the whole process tree killed when the wall clock runs out.
//!
//! Guarantees: nothing runs unless bubblewrap made every namespace and the init applied every
//! required layer ([`SandboxError::LayerUnavailable`] otherwise); the program's environment is
//! built from nothing; killing bubblewrap kills the PID namespace and with it every process the
//! program started; the wall clock stops while a tool call is in flight (a person may be asked
//! to approve it), and CPU time is bounded by the kernel either way.

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, BufReader,
};
use tokio::net::UnixStream;
use toolgate_core::{BoxFuture, CancelToken};

use crate::bwrap::{self, BRIDGE_FD, Mounts};
use crate::cgroup::{self, BoundLayer, RunCgroup, Usage};
use crate::config::SandboxConfig;
use crate::error::{Layer, SandboxError};
use crate::init::{INIT_FAILED, InitConfig, InitStatus, Rlimits};
use crate::workspace::{self, WorkBound};

/// What a script's tool call gets back over the bridge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BridgeReply {
    Ok {
        ok: bool,
        result: Value,
    },
    Err {
        ok: bool,
        code: String,
        message: String,
        retryable: bool,
    },
}

impl BridgeReply {
    pub fn ok(result: Value) -> Self {
        BridgeReply::Ok { ok: true, result }
    }

    pub fn error(code: &str, message: impl Into<String>, retryable: bool) -> Self {
        BridgeReply::Err {
            ok: false,
            code: code.to_owned(),
            message: message.into(),
            retryable,
        }
    }
}

/// Where a script's tool calls go (the dispatcher, for `code_execution`).
pub trait ToolBridge: Send + Sync {
    fn call(&self, tool: String, arguments: Value) -> BoxFuture<'_, BridgeReply>;
}

/// A bridge that refuses every call (a run that offers no tools).
pub struct NoTools;

impl ToolBridge for NoTools {
    fn call(&self, tool: String, _arguments: Value) -> BoxFuture<'_, BridgeReply> {
        Box::pin(async move {
            BridgeReply::error(
                "not_found",
                format!("no tools are offered here ({tool})"),
                false,
            )
        })
    }
}

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Captured {
    pub text: String,
    /// Bytes the program wrote, kept or not.
    pub total_bytes: usize,
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// The wall clock ran out and the tree was killed.
    WallClock,
    /// The caller canceled the run.
    Canceled,
    /// The work folder was over its bound: before the run (nothing ran), or, for a checked
    /// folder, during it (the tree was killed).
    WorkFolderFull,
}

/// A bound of the whole run that the program ran into (it was told inside: ENOMEM, a killed
/// process, EAGAIN on fork, ENOSPC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitHit {
    /// The run's memory: the kernel killed a process of it.
    Memory,
    /// The run's processes: a fork was refused.
    Processes,
    /// The work folder is full.
    WorkFolder,
}

/// How the run was bounded as a whole, and what it used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bounds {
    pub layer: BoundLayer,
    /// The run's memory (every process; `/tmp` too under a cgroup, beside it otherwise).
    pub memory_bytes: u64,
    pub processes: u64,
    /// One process's address space.
    pub address_space_bytes: u64,
    pub tmp_bytes: u64,
    pub work: WorkBound,
    pub work_bytes: u64,
    /// What the work folder holds after the run.
    pub work_used_bytes: u64,
    pub usage: Usage,
}

/// What happened. A script that fails, is killed by a limit or by a signal is a report, not
/// an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The program's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it (9 for a kill, 24 for the CPU limit).
    pub signal: Option<i32>,
    pub stopped: Option<Stopped>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub tool_calls: usize,
    pub landlock: bool,
    pub seccomp: bool,
    pub elapsed_ms: u64,
    pub bounds: Bounds,
    pub limits_hit: Vec<LimitHit>,
}

/// How often a checked work folder is measured during a run.
const WORK_CHECK_PERIOD: Duration = Duration::from_millis(50);

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
        let code = tempfile::Builder::new()
            .prefix("toolgate-code-")
            .tempdir()
            .map_err(|e| SandboxError::io(std::env::temp_dir(), e))?;
        write_file(&code.path().join("main.py"), &job.script)?;
        write_file(&code.path().join("toolgate_tools.py"), &job.tools_module)?;
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
        let mut bounds = Bounds {
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
        if work == WorkBound::Checked
            && (work_used >= limits.work_bytes || work_entries >= entries_cap)
        {
            return Ok(RunReport {
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
                bounds,
                limits_hit: vec![LimitHit::WorkFolder],
            });
        }
        // A checked folder: no one file may grow past the room left.
        let file_size = match work {
            WorkBound::Tmpfs => limits.file_size_bytes,
            WorkBound::Checked => limits
                .file_size_bytes
                .min(limits.work_bytes.saturating_sub(work_used)),
        };
        let init = self.init_config(&mounts, processes, address_space, file_size)?;
        let as_root = is_root();
        if as_root {
            prepare_for_nobody(&mounts)?;
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
            .args(bwrap::arguments(&mounts))
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
        let join = cgroup
            .as_ref()
            .map(RunCgroup::procs_fds)
            .unwrap_or_default();
        // SAFETY: only async-signal-safe calls (fcntl, dup2, write) between fork and exec.
        unsafe {
            command.pre_exec(move || prepare_child(&join, &placed));
        }
        let mut child = command.spawn().map_err(SandboxError::Spawn)?;
        drop((child_end, code_fd, data_fd, work_fd, init_fd));
        // Kept to shut the bridge in both directions when it is closed on the script: a
        // script blocked writing an oversized frame gets EPIPE and reads the refusal, and a
        // later call reads the end of the stream instead of waiting for the wall clock.
        let control = host_end.try_clone().map_err(SandboxError::Spawn)?;
        host_end
            .set_nonblocking(true)
            .map_err(SandboxError::Spawn)?;
        let bridge_stream = UnixStream::from_std(host_end).map_err(SandboxError::Spawn)?;
        let (read_half, mut write_half) = bridge_stream.into_split();
        let mut requests = BufReader::new(read_half);
        let stdout = tokio::spawn(capture(child.stdout.take(), limits.stdout_bytes));
        let stderr = tokio::spawn(capture(child.stderr.take(), limits.stderr_bytes));

        let mut deadline = tokio::time::Instant::now() + limits.wall;
        let mut line = Vec::new();
        // The init's status comes first: nothing of the program has run before it.
        let status = tokio::select! {
            read = read_line(&mut requests, &mut line, limits.bridge_request_bytes) => read.ok().flatten(),
            () = tokio::time::sleep_until(deadline) => None,
        };
        let status: Option<InitStatus> = status.and_then(|l| serde_json::from_slice(&l).ok());
        let (landlock, seccomp) = match status {
            Some(InitStatus::Ready { landlock, seccomp }) => (landlock, seccomp),
            Some(InitStatus::Failed { layer, reason }) => {
                let _ = child.kill().await;
                return Err(SandboxError::LayerUnavailable { layer, reason });
            }
            None => {
                let _ = child.start_kill();
                let exit = child.wait().await.map_err(SandboxError::Wait)?;
                let err = stderr.await.map(|c| c.text).unwrap_or_default();
                let reason = if exit.code() == Some(INIT_FAILED) || err.trim().is_empty() {
                    format!("the sandbox did not start ({exit})")
                } else {
                    err.trim().to_owned()
                };
                return Err(SandboxError::LayerUnavailable {
                    layer: Layer::Namespaces,
                    reason,
                });
            }
        };

        let mut tool_calls = 0;
        let mut bridge_open = true;
        let mut stopped = None;
        // A checked work folder is measured while the run goes on; over its bound, the run is
        // stopped (the overshoot is what the script writes in one period).
        let (full_tx, mut full_rx) = tokio::sync::oneshot::channel::<()>();
        let watcher = (work == WorkBound::Checked).then(|| {
            let dir = mounts.work.clone();
            let bytes = limits.work_bytes;
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
        let watching = watcher.is_some();
        let exit = loop {
            tokio::select! {
                exit = child.wait() => break exit.map_err(SandboxError::Wait)?,
                _ = &mut full_rx, if watching => {
                    stopped = Some(Stopped::WorkFolderFull);
                    let _ = child.start_kill();
                    break child.wait().await.map_err(SandboxError::Wait)?;
                }
                () = tokio::time::sleep_until(deadline) => {
                    stopped = Some(Stopped::WallClock);
                    let _ = child.start_kill();
                    break child.wait().await.map_err(SandboxError::Wait)?;
                }
                () = job.cancel.canceled() => {
                    stopped = Some(Stopped::Canceled);
                    let _ = child.start_kill();
                    break child.wait().await.map_err(SandboxError::Wait)?;
                }
                read = read_line(&mut requests, &mut line, limits.bridge_request_bytes), if bridge_open => {
                    let reply = match read {
                        Ok(Some(request)) => {
                            tool_calls += 1;
                            if tool_calls > limits.tool_calls {
                                bridge_open = false;
                                BridgeReply::error("rate_limited", format!("a script may make at most {} tool calls", limits.tool_calls), false)
                            } else {
                                let waited = Instant::now();
                                let reply = serve(bridge, &request).await;
                                deadline += waited.elapsed();
                                reply
                            }
                        }
                        Ok(None) => { bridge_open = false; continue; }
                        Err(message) => { bridge_open = false; BridgeReply::error("invalid_argument", message, false) }
                    };
                    let mut out = serde_json::to_vec(&reply).unwrap_or_default();
                    out.push(b'\n');
                    if write_half.write_all(&out).await.is_err() {
                        bridge_open = false;
                    }
                    if !bridge_open {
                        // Nothing more is read: stop the script's writes here, after the reply.
                        let _ = control.shutdown(std::net::Shutdown::Both);
                    }
                }
            }
        };
        drop(write_half);
        if let Some(watcher) = watcher {
            watcher.abort();
        }
        if let Some(cgroup) = cgroup {
            bounds.usage = cgroup.usage();
            // Kills what is left of the run and removes the cgroup.
            drop(cgroup);
        }
        if let Ok((used, _)) = workspace::usage(&mounts.work, entries_cap) {
            bounds.work_used_bytes = used;
        }
        use std::os::unix::process::ExitStatusExt as _;
        // The pipes close when the namespace's last process is gone; bounded all the same.
        let grace = Duration::from_secs(5);
        let stdout = tokio::time::timeout(grace, stdout)
            .await
            .ok()
            .and_then(Result::ok);
        let stderr = tokio::time::timeout(grace, stderr)
            .await
            .ok()
            .and_then(Result::ok);
        Ok(RunReport {
            exit_code: exit.code(),
            signal: exit.signal(),
            stopped,
            stdout: stdout.unwrap_or_else(Captured::empty),
            stderr: stderr.unwrap_or_else(Captured::empty),
            tool_calls,
            landlock,
            seccomp,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            limits_hit: hits(&bounds),
            bounds,
        })
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
                format!("{}/main.py", bwrap::CODE_DIR),
            ],
        };
        serde_json::to_string(&config).map_err(|e| SandboxError::Config(e.to_string()))
    }
}

/// The bounds a finished run ran into, from what its cgroup counted and its work folder holds.
pub fn hits(bounds: &Bounds) -> Vec<LimitHit> {
    let mut hits = Vec::new();
    if bounds.usage.oom_kills > 0 {
        hits.push(LimitHit::Memory);
    }
    if bounds.usage.forks_refused > 0 {
        hits.push(LimitHit::Processes);
    }
    // Within a page of the bound is full: the next write of any size fails.
    if bounds.work_used_bytes.saturating_add(64 << 10) >= bounds.work_bytes {
        hits.push(LimitHit::WorkFolder);
    }
    hits
}

impl Captured {
    fn empty() -> Self {
        Captured {
            text: String::new(),
            total_bytes: 0,
            truncated: false,
        }
    }
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no failure mode and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// The host user a run's private folders must belong to, when not the one running toolgate:
/// nobody, when toolgate runs as root (bubblewrap is started as nobody then).
pub(crate) fn sandbox_owner() -> Option<u32> {
    is_root().then_some(bwrap::SANDBOX_UID)
}

/// A descriptor for bubblewrap to bind from (`O_PATH`: no access to the contents is needed).
fn open_path(path: &Path) -> Result<OwnedFd, SandboxError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| SandboxError::io(path, e))
}

/// Run as root: the sandbox's user is nobody on the host too, so its code and work folder are
/// handed to nobody (still private: 0700 and 0600, no other local user reads them), and its
/// data must be readable by nobody.
fn prepare_for_nobody(mounts: &Mounts) -> Result<(), SandboxError> {
    use std::os::unix::fs::MetadataExt as _;
    let give = |path: &Path| {
        std::os::unix::fs::lchown(path, Some(bwrap::SANDBOX_UID), Some(bwrap::SANDBOX_UID))
            .map_err(|e| SandboxError::io(path, e))
    };
    give(&mounts.code)?;
    for entry in std::fs::read_dir(&mounts.code).map_err(|e| SandboxError::io(&mounts.code, e))? {
        let entry = entry.map_err(|e| SandboxError::io(&mounts.code, e))?;
        give(&entry.path())?;
    }
    give(&mounts.work)?;
    if let Some(data) = &mounts.data {
        let meta = std::fs::metadata(data).map_err(|e| SandboxError::io(data, e))?;
        let by_owner = meta.uid() == bwrap::SANDBOX_UID && meta.mode() & 0o500 == 0o500;
        if !by_owner && meta.mode() & 0o005 != 0o005 {
            return Err(SandboxError::Config(format!(
                "the data folder {} must be readable by the sandbox's user: toolgate runs as root, and the sandbox as nobody (owned by nobody with u+rx, or o+rx)",
                data.display()
            )));
        }
    }
    Ok(())
}

/// In the child between fork and exec: into the run's cgroup before bubblewrap exists (no
/// process of it is outside), and before the placing, since a cgroup descriptor may have a
/// number the placing overwrites (3 to 7). Async-signal-safe calls only.
fn prepare_child(join: &[i32], placed: &[(i32, i32)]) -> std::io::Result<()> {
    cgroup::join(join)?;
    place_fds(placed)
}

/// In the child between fork and exec: each `(from, to)` descriptor ends up at `to`, without
/// close-on-exec. Copies go high first so that one placement cannot clobber another's source.
fn place_fds(placed: &[(i32, i32)]) -> std::io::Result<()> {
    let mut high = [0i32; 8];
    for (slot, &(from, _)) in high.iter_mut().zip(placed) {
        // SAFETY: fcntl on a descriptor this process owns.
        let copy = unsafe { libc::fcntl(from, libc::F_DUPFD_CLOEXEC, 64) };
        if copy < 0 {
            return Err(std::io::Error::last_os_error());
        }
        *slot = copy;
    }
    for (&copy, &(_, to)) in high.iter().zip(placed) {
        // SAFETY: dup2 between descriptors this process owns; the new one is not close-on-exec.
        if unsafe { libc::dup2(copy, to) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A file of the run's code, private to the run (0600, in a 0700 folder).
fn write_file(path: &Path, text: &str) -> Result<(), SandboxError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|e| SandboxError::io(path, e))
}

/// Keeps the first `cap` bytes and counts the rest.
async fn capture(stream: Option<impl AsyncRead + Unpin>, cap: usize) -> Captured {
    let mut kept = Vec::new();
    let mut total = 0;
    if let Some(mut stream) = stream {
        let mut buf = [0u8; 8192];
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            total += n;
            let room = cap.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
        }
    }
    Captured {
        text: String::from_utf8_lossy(&kept).into_owned(),
        total_bytes: total,
        truncated: total > kept.len(),
    }
}

/// One line of at most `cap` bytes, bounded before it is read: the host never holds more than
/// `cap + 1` bytes of a frame (an over-long one is refused, not read on); `Ok(None)` at end of
/// stream.
async fn read_line(
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    line: &mut Vec<u8>,
    cap: usize,
) -> Result<Option<Vec<u8>>, String> {
    line.clear();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    let n = (&mut *reader)
        .take(limit)
        .read_until(b'\n', line)
        .await
        .map_err(|e| e.to_string())?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(format!(
            "a tool call over the bridge is longer than {cap} bytes; the bridge is closed"
        ));
    }
    Ok(Some(std::mem::take(line)))
}

#[derive(Deserialize)]
struct BridgeRequest {
    tool: String,
    #[serde(default)]
    arguments: Value,
}

async fn serve(bridge: &dyn ToolBridge, line: &[u8]) -> BridgeReply {
    match serde_json::from_slice::<BridgeRequest>(line) {
        Ok(request) => {
            let arguments = match request.arguments {
                Value::Null => Value::Object(serde_json::Map::new()),
                other => other,
            };
            bridge.call(request.tool, arguments).await
        }
        Err(e) => BridgeReply::error(
            "invalid_argument",
            format!("a bridge request is a JSON object with \"tool\" and \"arguments\": {e}"),
            false,
        ),
    }
}

#[cfg(test)]
mod child_tests {
    use super::*;

    /// In a forked child (its descriptors are its own to clobber): a "cgroup.procs" pipe at
    /// number 6, the work folder's descriptor placed at 6 too.
    #[test]
    fn joining_the_cgroup_never_writes_into_a_descriptor_the_placing_replaced() {
        let mut pipe = [0i32; 2];
        // SAFETY: pipe writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        let folder = open_path(Path::new("/")).unwrap();
        // SAFETY: the child makes only raw system calls and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                libc::dup2(pipe[1], 6);
                let joined = prepare_child(&[6], &[(folder.as_raw_fd(), 6)]).is_ok();
                let mut buf = [0u8; 2];
                libc::fcntl(pipe[0], libc::F_SETFL, libc::O_NONBLOCK);
                let got = libc::read(pipe[0], buf.as_mut_ptr().cast(), 2) == 2 && buf == *b"0\n";
                libc::_exit(if joined && got { 0 } else { 1 });
            }
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        // SAFETY: the descriptors of the pipe made above.
        unsafe {
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
}
