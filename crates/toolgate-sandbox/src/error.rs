//! Why a sandboxed run did not happen, or could not be read. Every variant means nothing of the
//! program ran past the point named (fail closed); none is a verdict on the program itself
//! (a script that crashes or hits a limit is a [`crate::RunReport`], not an error).

use std::path::PathBuf;

/// One isolation layer, named in errors so an operator knows what to fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// bubblewrap: user, PID, mount, IPC, UTS and network namespaces, the mounts, no capabilities.
    Namespaces,
    Seccomp,
    Landlock,
    Rlimits,
    /// The run's cgroup (memory and processes of the whole run).
    Cgroup,
    /// The bound on the conversation's work folder.
    WorkFolder,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Namespaces => "namespaces (bubblewrap)",
            Layer::Seccomp => "seccomp",
            Layer::Landlock => "landlock",
            Layer::Rlimits => "rlimits",
            Layer::Cgroup => "cgroup (memory and processes of the run)",
            Layer::WorkFolder => "work folder bound",
        }
    }

    /// What an operator can do when this layer cannot be set up.
    pub fn fix(self) -> &'static str {
        match self {
            Layer::Namespaces => {
                "install bubblewrap (scripts/setup.sh does: apt-get install bubblewrap) and allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0)"
            }
            Layer::Seccomp => "run on a kernel with seccomp filters (CONFIG_SECCOMP_FILTER)",
            Layer::Landlock => {
                "run on a kernel with Landlock enabled (CONFIG_SECURITY_LANDLOCK and \"landlock\" in the lsm= boot list), or set landlock to \"if_available\""
            }
            Layer::Rlimits => "check the hard limits of the user running toolgate (ulimit -H -a)",
            Layer::Cgroup => {
                "run toolgate where it may create a child cgroup with the memory and pids controllers (as root, or in a delegated cgroup v2 subtree such as a systemd user service with Delegate=yes), or set [sandbox] cgroup to \"if_available\" (rlimits are then split so that processes x address space stays within memory_mb)"
            }
            Layer::WorkFolder => "empty the conversation's work folder or raise [sandbox] work_mb",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "the sandbox cannot start: the {} layer is not available: {reason}. Nothing ran. To fix: {}",
        .layer.as_str(),
        .layer.fix()
    )]
    LayerUnavailable { layer: Layer, reason: String },
    #[error("the sandbox configuration is wrong: {0}")]
    Config(String),
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the sandbox could not be started: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("the sandboxed process could not be read: {0}")]
    Wait(#[source] std::io::Error),
}

impl SandboxError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SandboxError::Io {
            path: path.into(),
            source,
        }
    }
}
