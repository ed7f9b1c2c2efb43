//! What a sandbox is allowed: resource limits, which optional layers are required, and where
//! its programs are. Defaults are what a notebook script needs and no more.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Resource limits. CPU, address space, processes, file size and open files are kernel rlimits
/// set inside the sandbox before the program starts; the wall clock is enforced from outside
/// and kills the whole process tree. Time a script spends waiting for a tool call (a human
/// asked to approve one) does not count against the wall clock.
///
/// `memory_bytes` and `processes` bound the run as a whole: a cgroup holds every process of
/// the run when one can be made, otherwise the rlimits are split so that processes x address
/// space stays within `memory_bytes` (see [`crate::cgroup`]). `/tmp` is a tmpfs of
/// `tmp_bytes` and the work folder holds at most `work_bytes` (see [`crate::workspace`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub cpu_seconds: u64,
    /// One process's address space (under a cgroup; without one it is `memory_bytes` split).
    pub address_space_bytes: u64,
    /// Memory of the whole run: every process, and `/tmp` (a tmpfs is memory).
    pub memory_bytes: u64,
    pub processes: u64,
    /// Size of the run's `/tmp` (a tmpfs).
    pub tmp_bytes: u64,
    /// What the conversation's work folder may hold.
    pub work_bytes: u64,
    pub file_size_bytes: u64,
    pub open_files: u64,
    #[serde(with = "millis")]
    pub wall: Duration,
    /// Bytes of stdout kept; the rest is counted and said to be cut.
    pub stdout_bytes: usize,
    pub stderr_bytes: usize,
    /// Tool calls one run may make over the bridge.
    pub tool_calls: usize,
    /// Bytes of one bridge request (a tool call's JSON line).
    pub bridge_request_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 20,
            address_space_bytes: 1 << 30,
            memory_bytes: 1 << 30,
            processes: 32,
            tmp_bytes: 64 << 20,
            work_bytes: 256 << 20,
            file_size_bytes: 64 << 20,
            open_files: 128,
            wall: Duration::from_secs(30),
            stdout_bytes: 16 * 1024,
            stderr_bytes: 4 * 1024,
            tool_calls: 500,
            bridge_request_bytes: 1 << 20,
        }
    }
}

/// Whether a layer must be in place for anything to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// Nothing runs without it.
    #[default]
    Required,
    /// Used where the kernel has it; the run report says whether it was.
    IfAvailable,
}

/// The program that sets up the layers a process must apply to itself (rlimits, Landlock,
/// seccomp) inside the namespaces, then executes the interpreter: `toolgate-sandbox-init`, or
/// the `toolgate` binary with its hidden `sandbox-init` subcommand.
#[derive(Debug, Clone, PartialEq)]
pub struct InitProgram {
    pub path: PathBuf,
    pub args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    /// bubblewrap; found in `PATH` when `None`.
    pub bwrap: Option<PathBuf>,
    /// The interpreter, from the system (`/usr` is the only software mounted inside).
    pub python: PathBuf,
    pub init: InitProgram,
    pub limits: Limits,
    pub seccomp: Requirement,
    pub landlock: Requirement,
    /// Whether the run's cgroup must be made; `if_available` falls back to split rlimits.
    pub cgroup: Requirement,
}

impl SandboxConfig {
    pub fn new(init: InitProgram) -> Self {
        SandboxConfig {
            bwrap: None,
            python: PathBuf::from("/usr/bin/python3"),
            init,
            limits: Limits::default(),
            seccomp: Requirement::Required,
            landlock: Requirement::Required,
            cgroup: Requirement::IfAvailable,
        }
    }
}

impl InitProgram {
    /// The running executable with `subcommand` (the `toolgate` binary's `sandbox-init`).
    pub fn this_executable(subcommand: &str) -> std::io::Result<Self> {
        Ok(InitProgram {
            path: std::env::current_exe()?,
            args: vec![subcommand.to_owned()],
        })
    }
}

/// `[sandbox]` in `toolgate.toml`: what an operator may change; everything else is fixed.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// bubblewrap, when not the one in `PATH`.
    pub bwrap: Option<PathBuf>,
    /// The interpreter (under `/usr`); default `/usr/bin/python3`.
    pub python: Option<PathBuf>,
    pub wall_seconds: Option<u64>,
    pub cpu_seconds: Option<u64>,
    /// Memory of the whole run (every process and `/tmp`), in MiB; default 1024.
    pub memory_mb: Option<u64>,
    /// Processes of the whole run; default 32.
    pub processes: Option<u64>,
    /// Size of `/tmp` inside, in MiB; default 64.
    pub tmp_mb: Option<u64>,
    /// What a conversation's work folder may hold, in MiB; default 256.
    pub work_mb: Option<u64>,
    /// `required` (default) or `if_available`.
    pub landlock: Option<Requirement>,
    pub seccomp: Option<Requirement>,
    /// `if_available` (default: split rlimits without one) or `required`.
    pub cgroup: Option<Requirement>,
}

impl Settings {
    /// A size or count of zero is refused: nothing could run in it.
    pub fn check(&self) -> Result<(), String> {
        for (name, value) in [
            ("memory_mb", self.memory_mb),
            ("processes", self.processes),
            ("tmp_mb", self.tmp_mb),
            ("work_mb", self.work_mb),
            ("wall_seconds", self.wall_seconds),
            ("cpu_seconds", self.cpu_seconds),
        ] {
            if value == Some(0) {
                return Err(format!("[sandbox] {name} must be at least 1"));
            }
        }
        Ok(())
    }

    pub fn config(&self, init: InitProgram) -> SandboxConfig {
        let mut config = SandboxConfig::new(init);
        config.bwrap.clone_from(&self.bwrap);
        if let Some(python) = &self.python {
            config.python.clone_from(python);
        }
        if let Some(wall) = self.wall_seconds {
            config.limits.wall = Duration::from_secs(wall);
        }
        if let Some(cpu) = self.cpu_seconds {
            config.limits.cpu_seconds = cpu;
        }
        let mib = |mb: u64| mb.saturating_mul(1 << 20);
        let limits = &mut config.limits;
        if let Some(mb) = self.memory_mb {
            // The run's total; one process may use all of it, never more.
            limits.memory_bytes = mib(mb);
            limits.address_space_bytes = mib(mb);
        }
        if let Some(mb) = self.tmp_mb {
            limits.tmp_bytes = mib(mb);
        }
        if let Some(mb) = self.work_mb {
            limits.work_bytes = mib(mb);
        }
        if let Some(n) = self.processes {
            limits.processes = n;
        }
        if let Some(landlock) = self.landlock {
            config.landlock = landlock;
        }
        if let Some(seccomp) = self.seccomp {
            config.seccomp = seccomp;
        }
        if let Some(cgroup) = self.cgroup {
            config.cgroup = cgroup;
        }
        config
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(json: &str) -> Settings {
        serde_json::from_str(json).unwrap()
    }

    fn init() -> InitProgram {
        InitProgram {
            path: PathBuf::from("/x"),
            args: Vec::new(),
        }
    }

    #[test]
    fn zero_sizes_are_refused_so_a_typo_never_means_unbounded_or_unusable() {
        for field in [
            "memory_mb",
            "processes",
            "tmp_mb",
            "work_mb",
            "wall_seconds",
            "cpu_seconds",
        ] {
            let error = settings(&format!("{{\"{field}\": 0}}"))
                .check()
                .unwrap_err();
            assert!(error.contains(field), "{error}");
        }
        assert!(settings("{\"memory_mb\": 512}").check().is_ok());
        assert!(serde_json::from_str::<Settings>("{\"tmp_gb\": 1}").is_err());
    }

    #[test]
    fn memory_mb_is_the_runs_total_and_no_process_may_pass_it() {
        let config = settings(
            r#"{"memory_mb": 512, "processes": 16, "tmp_mb": 8, "work_mb": 100, "cgroup": "required"}"#,
        )
        .config(init());
        let limits = &config.limits;
        assert_eq!(limits.memory_bytes, 512 << 20);
        assert_eq!(limits.address_space_bytes, 512 << 20);
        assert_eq!((limits.processes, limits.tmp_bytes), (16, 8 << 20));
        assert_eq!(limits.work_bytes, 100 << 20);
        assert_eq!(config.cgroup, Requirement::Required);
        let defaults = Settings::default().config(init());
        assert_eq!(defaults.cgroup, Requirement::IfAvailable);
        assert!(defaults.limits.address_space_bytes <= defaults.limits.memory_bytes);
    }
}
