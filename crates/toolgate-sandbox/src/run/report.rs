//! What a run reports: its exit, what stopped it, its output within its caps, and how it was
//! bounded as a whole and which of those bounds it ran into.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt as _};

use crate::cgroup::{BoundLayer, Usage};
use crate::workspace::WorkBound;

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
    pub(super) fn empty() -> Self {
        Captured {
            text: String::new(),
            total_bytes: 0,
            truncated: false,
        }
    }
}

/// Keeps the first `cap` bytes and counts the rest.
pub(super) async fn capture(stream: Option<impl AsyncRead + Unpin>, cap: usize) -> Captured {
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
