//! The first program inside the namespaces: it applies the layers a process can only put on
//! itself (rlimits, Landlock, seccomp), reports which are in place on the bridge, and executes
//! the interpreter, which inherits all of them. It runs after bubblewrap has built the mounts
//! (Landlock forbids mounting, so it cannot come earlier) and before any model-written code.
//!
//! Fails closed: a layer that is required and cannot be applied ends it with [`INIT_FAILED`]
//! and a report naming the layer, before the interpreter starts.

use std::ffi::OsString;
use std::io::Write as _;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd as _;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, path_beneath_rules,
};
use serde::{Deserialize, Serialize};

use crate::config::Requirement;
use crate::error::Layer;

/// The init's exit status when a layer could not be set up (the interpreter never started).
pub const INIT_FAILED: i32 = 125;

/// What the init is told, as one JSON argument.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitConfig {
    pub rlimits: Rlimits,
    pub seccomp: Requirement,
    pub landlock: Requirement,
    /// Paths (inside the sandbox) the program may read and execute.
    pub read_only: Vec<PathBuf>,
    /// Paths it may also write.
    pub read_write: Vec<PathBuf>,
    /// Where the status line goes (the bridge).
    pub status_fd: i32,
    pub program: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rlimits {
    pub cpu_seconds: u64,
    pub address_space_bytes: u64,
    pub processes: u64,
    pub file_size_bytes: u64,
    pub open_files: u64,
}

/// The first line the init writes on the bridge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitStatus {
    Ready { landlock: bool, seccomp: bool },
    Failed { layer: Layer, reason: String },
}

/// Runs the init with its command-line arguments (`--config JSON`); returns only on failure,
/// with the process's exit status.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let mut args = args.into_iter();
    let config = match (args.next(), args.next()) {
        (Some(flag), Some(json)) if flag == "--config" => {
            match serde_json::from_str::<InitConfig>(&json.to_string_lossy()) {
                Ok(config) => config,
                Err(e) => {
                    eprintln!("toolgate-sandbox-init: bad --config: {e}");
                    return 2;
                }
            }
        }
        _ => {
            eprintln!(
                "toolgate-sandbox-init: runs only inside the sandbox, started by toolgate (usage: --config JSON)"
            );
            return 2;
        }
    };
    let status = match apply(&config) {
        Ok(status) => status,
        Err((layer, reason)) => InitStatus::Failed { layer, reason },
    };
    let failed = matches!(status, InitStatus::Failed { .. });
    if report(config.status_fd, &status).is_err() || failed {
        return INIT_FAILED;
    }
    let Some((program, rest)) = config.program.split_first() else {
        return INIT_FAILED;
    };
    let error = std::process::Command::new(program).args(rest).exec();
    eprintln!("toolgate-sandbox-init: could not start {program}: {error}");
    INIT_FAILED
}

fn report(fd: i32, status: &InitStatus) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(status).map_err(std::io::Error::other)?;
    line.push(b'\n');
    // SAFETY: the runner hands this descriptor to the init; ManuallyDrop keeps it open for the
    // interpreter, which uses it as the bridge.
    let mut out = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    out.write_all(&line)
}

fn apply(config: &InitConfig) -> Result<InitStatus, (Layer, String)> {
    set_rlimits(&config.rlimits).map_err(|e| (Layer::Rlimits, e))?;
    let landlock = match apply_landlock(config) {
        Ok(()) => true,
        Err(e) if config.landlock == Requirement::Required => return Err((Layer::Landlock, e)),
        Err(_) => false,
    };
    let seccomp = match crate::seccomp::apply() {
        Ok(()) => true,
        Err(e) if config.seccomp == Requirement::Required => return Err((Layer::Seccomp, e)),
        Err(_) => false,
    };
    Ok(InitStatus::Ready { landlock, seccomp })
}

fn set_rlimits(limits: &Rlimits) -> Result<(), String> {
    let table = [
        (libc::RLIMIT_CPU, limits.cpu_seconds, "CPU time"),
        (libc::RLIMIT_AS, limits.address_space_bytes, "address space"),
        (libc::RLIMIT_NPROC, limits.processes, "processes"),
        (libc::RLIMIT_FSIZE, limits.file_size_bytes, "file size"),
        (libc::RLIMIT_NOFILE, limits.open_files, "open files"),
        (libc::RLIMIT_CORE, 0, "core dumps"),
    ];
    for (resource, value, name) in table {
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct we pass and nothing else.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(format!(
                "setrlimit({name}, {value}): {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

fn apply_landlock(config: &InitConfig) -> Result<(), String> {
    let abi = ABI::V5;
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.create())
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                &config.read_only,
                AccessFs::from_read(abi),
            ))
        })
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                &config.read_write,
                AccessFs::from_all(abi),
            ))
        })
        .and_then(|r| r.restrict_self())
        .map_err(|e| e.to_string())?;
    match status.ruleset {
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(()),
        RulesetStatus::NotEnforced => Err("the kernel does not enforce Landlock".to_owned()),
    }
}
