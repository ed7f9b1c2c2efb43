//! The bound on a run as a whole: one cgroup holding every process of the run, with its memory
//! (including `/tmp`, a tmpfs charged to its writer) and its process count capped together.
//!
//! Guarantees: a cgroup v2 child (`memory.max`, `memory.swap.max = 0`, `pids.max`) where this
//! process's cgroup delegates the memory and pids controllers, else cgroup v1 children in the
//! memory and pids hierarchies (`memory.limit_in_bytes`, `memory.memsw.limit_in_bytes` where
//! swap is accounted, `pids.max`), made before the run and joined by bubblewrap between fork
//! and exec, so no process of the run ever lives outside it. Every process left in it is
//! killed and the cgroup removed when the run ends ([`RunCgroup`]'s drop).
//!
//! Refuses: nothing itself; when no cgroup can be made [`RunCgroup::create`] says why, and
//! the runner either fails closed (`cgroup = "required"`) or falls back to rlimits split by
//! [`split_rlimits`] so that processes x address space stays within the budget.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Which mechanism bounds the run's total memory and processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundLayer {
    CgroupV2,
    CgroupV1,
    /// No cgroup: `processes` x address space <= the budget (and `/tmp` beside it).
    Rlimits,
}

/// Processes a run may have when only rlimits bound it: few, so each keeps a usable share.
pub const FALLBACK_PROCESSES: u64 = 8;

/// The address space the interpreter needs to start and do a notebook's work.
pub const MIN_ADDRESS_SPACE: u64 = 64 << 20;

/// `(processes, address space per process)` so that their product stays within `memory`:
/// fewer processes rather than each too small for the interpreter to start.
pub fn split_rlimits(memory: u64, processes: u64) -> (u64, u64) {
    let processes = processes
        .min(FALLBACK_PROCESSES)
        .min(memory / MIN_ADDRESS_SPACE)
        .max(1);
    (processes, memory / processes)
}

/// The cgroup when one was made; without one, nothing runs when it is required (the layer
/// named), and a run bounded by rlimits alone otherwise.
pub fn as_required<T>(
    requirement: crate::Requirement,
    made: Result<T, String>,
) -> Result<Option<T>, crate::SandboxError> {
    match (made, requirement) {
        (Ok(cgroup), _) => Ok(Some(cgroup)),
        (Err(reason), crate::Requirement::Required) => Err(crate::SandboxError::LayerUnavailable {
            layer: crate::Layer::Cgroup,
            reason,
        }),
        (Err(_), crate::Requirement::IfAvailable) => Ok(None),
    }
}

/// What the run's cgroup saw, read just before it is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub memory_peak_bytes: Option<u64>,
    /// Processes the kernel killed for the memory bound.
    pub oom_kills: u64,
    /// Forks refused for the process bound.
    pub forks_refused: u64,
}

#[derive(Debug)]
pub struct RunCgroup {
    layer: BoundLayer,
    /// v2: the one cgroup; v1: the memory one, then the pids one.
    dirs: Vec<PathBuf>,
    procs: Vec<OwnedFd>,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// One line of `/proc/self/cgroup`: hierarchy id, controllers, path.
pub fn parse_self_cgroup(text: &str) -> Vec<(String, Vec<String>, String)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let id = parts.next()?.to_owned();
            let controllers = parts
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect();
            Some((id, controllers, parts.next()?.to_owned()))
        })
        .collect()
}

/// Cgroup mounts in `/proc/self/mountinfo`: (mount root, mount point, fs type, super options).
pub fn parse_cgroup_mounts(text: &str) -> Vec<(String, PathBuf, String, Vec<String>)> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            let mut right = right.split(' ');
            let fstype = right.next()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            let _source = right.next()?;
            let options = right.next()?.split(',').map(str::to_owned).collect();
            Some((
                (*fields.get(3)?).to_owned(),
                PathBuf::from(fields.get(4)?.replace("\\040", " ")),
                fstype.to_owned(),
                options,
            ))
        })
        .collect()
}

/// Where a run's v2 cgroup may go: under this process's own cgroup, then beside it (never
/// above the mount).
pub fn v2_candidates(own: &Path, mount: &Path) -> Vec<PathBuf> {
    let mut candidates = vec![own.to_owned()];
    if own != mount
        && let Some(parent) = own.parent()
        && parent.starts_with(mount)
    {
        candidates.push(parent.to_owned());
    }
    candidates
}

/// Where this process's cgroup is on disk, for a hierarchy mounted at `point` with `root`.
fn on_disk(point: &Path, root: &str, path: &str) -> PathBuf {
    let relative = path.strip_prefix(root).unwrap_or(path);
    point.join(relative.trim_start_matches('/'))
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("{}: {e}", path.display()))
}

fn open_procs(dir: &Path) -> Result<OwnedFd, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = dir.join("cgroup.procs");
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&path)
        .map(OwnedFd::from)
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn make_child(parent: &Path) -> Result<PathBuf, String> {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = parent.join(format!("toolgate-run-{}-{n}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    Ok(dir)
}

fn has(controllers_file: &Path, wanted: &[&str]) -> bool {
    std::fs::read_to_string(controllers_file)
        .map(|text| {
            let present: Vec<&str> = text.split_whitespace().collect();
            wanted.iter().all(|w| present.contains(w))
        })
        .unwrap_or(false)
}

fn counter(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok()).flatten()
    })
}

fn read_counter(path: &Path, key: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| counter(&text, key))
        .unwrap_or(0)
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl RunCgroup {
    /// A cgroup for one run bounded to `memory` bytes (no swap) and `processes` processes.
    pub fn create(memory: u64, processes: u64) -> Result<RunCgroup, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        let own = parse_self_cgroup(&own);
        let mounts = parse_cgroup_mounts(&mounts);
        let v2 = match Self::create_v2(&own, &mounts, memory, processes) {
            Ok(cgroup) => return Ok(cgroup),
            Err(e) => e,
        };
        let v1 = match Self::create_v1(&own, &mounts, memory, processes) {
            Ok(cgroup) => return Ok(cgroup),
            Err(e) => e,
        };
        Err(format!("cgroup v2: {v2}; cgroup v1: {v1}"))
    }

    fn create_v2(
        own: &[(String, Vec<String>, String)],
        mounts: &[(String, PathBuf, String, Vec<String>)],
        memory: u64,
        processes: u64,
    ) -> Result<RunCgroup, String> {
        let (_, _, path) = own
            .iter()
            .find(|(id, controllers, _)| id == "0" && controllers.is_empty())
            .ok_or("this process is in no cgroup v2")?;
        let (root, point, _, _) = mounts
            .iter()
            .find(|(_, _, fstype, _)| fstype == "cgroup2")
            .ok_or("no cgroup2 file system is mounted")?;
        let own_dir = on_disk(point, root, path);
        // v2 lets no cgroup with processes of its own enable controllers for children, so the
        // run's cgroup is a child of this one only where that works (the root, or a cgroup
        // already set up so), else a sibling in the parent (a delegated subtree whose leaf
        // this process is in).
        let mut reasons = Vec::new();
        for parent in v2_candidates(&own_dir, point) {
            match Self::create_v2_under(&parent, memory, processes) {
                Ok(cgroup) => return Ok(cgroup),
                Err(e) => reasons.push(e),
            }
        }
        Err(reasons.join("; "))
    }

    fn create_v2_under(parent: &Path, memory: u64, processes: u64) -> Result<RunCgroup, String> {
        if !has(&parent.join("cgroup.controllers"), &["memory", "pids"]) {
            return Err(format!(
                "{} is not delegated the memory and pids controllers",
                parent.display()
            ));
        }
        let dir = make_child(parent)?;
        let mut cgroup = RunCgroup {
            layer: BoundLayer::CgroupV2,
            dirs: vec![dir.clone()],
            procs: Vec::new(),
        };
        if !has(&dir.join("cgroup.controllers"), &["memory", "pids"]) {
            // Fails (EBUSY) where the parent holds processes itself.
            write(&parent.join("cgroup.subtree_control"), "+memory +pids")?;
        }
        write(&dir.join("memory.max"), &memory.to_string())?;
        write(&dir.join("memory.swap.max"), "0").or_else(|e| {
            // No swap accounting means no swap to escape into only when there is no swap.
            if no_swap() { Ok(()) } else { Err(e) }
        })?;
        write(&dir.join("pids.max"), &processes.to_string())?;
        cgroup.procs.push(open_procs(&dir)?);
        Ok(cgroup)
    }

    fn create_v1(
        own: &[(String, Vec<String>, String)],
        mounts: &[(String, PathBuf, String, Vec<String>)],
        memory: u64,
        processes: u64,
    ) -> Result<RunCgroup, String> {
        let locate = |controller: &str| -> Result<PathBuf, String> {
            let (_, _, path) = own
                .iter()
                .find(|(_, controllers, _)| controllers.iter().any(|c| c == controller))
                .ok_or_else(|| format!("no v1 {controller} hierarchy"))?;
            let (root, point, _, _) = mounts
                .iter()
                .find(|(_, _, fstype, options)| {
                    fstype == "cgroup" && options.iter().any(|o| o == controller)
                })
                .ok_or_else(|| format!("the v1 {controller} hierarchy is not mounted"))?;
            Ok(on_disk(point, root, path))
        };
        let memory_parent = locate("memory")?;
        let pids_parent = locate("pids")?;
        let mut cgroup = RunCgroup {
            layer: BoundLayer::CgroupV1,
            dirs: Vec::new(),
            procs: Vec::new(),
        };
        let memory_dir = make_child(&memory_parent)?;
        cgroup.dirs.push(memory_dir.clone());
        let pids_dir = make_child(&pids_parent)?;
        cgroup.dirs.push(pids_dir.clone());
        write(
            &memory_dir.join("memory.limit_in_bytes"),
            &memory.to_string(),
        )?;
        let memsw = memory_dir.join("memory.memsw.limit_in_bytes");
        if memsw.exists() {
            write(&memsw, &memory.to_string())?;
        } else if !no_swap() {
            return Err("swap is on and not accounted (memory.memsw is missing)".to_owned());
        }
        write(&pids_dir.join("pids.max"), &processes.to_string())?;
        cgroup.procs.push(open_procs(&memory_dir)?);
        cgroup.procs.push(open_procs(&pids_dir)?);
        Ok(cgroup)
    }

    pub fn layer(&self) -> BoundLayer {
        self.layer
    }

    /// The `cgroup.procs` descriptors the child writes itself into before exec.
    pub fn procs_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    pub fn usage(&self) -> Usage {
        match self.layer {
            BoundLayer::CgroupV2 => {
                let dir = &self.dirs[0];
                Usage {
                    memory_peak_bytes: read_number(&dir.join("memory.peak")),
                    oom_kills: read_counter(&dir.join("memory.events"), "oom_kill"),
                    forks_refused: read_counter(&dir.join("pids.events"), "max"),
                }
            }
            BoundLayer::CgroupV1 => {
                let (memory, pids) = (&self.dirs[0], &self.dirs[1]);
                Usage {
                    memory_peak_bytes: read_number(&memory.join("memory.max_usage_in_bytes")),
                    oom_kills: read_counter(&memory.join("memory.oom_control"), "oom_kill"),
                    forks_refused: read_counter(&pids.join("pids.events"), "max"),
                }
            }
            BoundLayer::Rlimits => Usage::default(),
        }
    }
}

/// In the child between fork and exec: joins every cgroup (writing "0" moves the writer).
/// Only `write`, which is async-signal-safe.
pub fn join(fds: &[RawFd]) -> std::io::Result<()> {
    for &fd in fds {
        // SAFETY: a write of two bytes from a static buffer to a descriptor this process owns.
        if unsafe { libc::write(fd, b"0\n".as_ptr().cast(), 2) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn no_swap() -> bool {
    std::fs::read_to_string("/proc/swaps")
        .map(|text| text.lines().count() <= 1)
        .unwrap_or(false)
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        self.procs.clear();
        for dir in self.dirs.iter().rev() {
            let kill = dir.join("cgroup.kill");
            if kill.exists() {
                let _ = std::fs::write(&kill, "1");
            }
            // Whatever is left (v1 has no cgroup.kill) is killed, then the cgroup removed.
            let deadline = Instant::now() + Duration::from_secs(2);
            loop {
                let pids: Vec<i32> = std::fs::read_to_string(dir.join("cgroup.procs"))
                    .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
                    .unwrap_or_default();
                for pid in &pids {
                    // SAFETY: kill with a pid read from the run's own cgroup.
                    unsafe { libc::kill(*pid, libc::SIGKILL) };
                }
                if std::fs::remove_dir(dir).is_ok() || Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
