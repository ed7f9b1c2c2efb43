//! OS-level isolation for model-written code, and the bridge that sends its tool calls back
//! through the dispatcher.
//!
//! A run is a fresh process tree made by bubblewrap (user, PID, mount, IPC, UTS and network
//! namespaces; `/usr` and the run's own folders mounted, nothing else of the host; no
//! capabilities; a non-root user), inside which [`init`] sets rlimits, Landlock and a seccomp
//! filter before executing the system's Python. The run as a whole is bounded by [`cgroup`]
//! (memory and processes together, or rlimits split to the same budget), `/tmp` is a
//! tmpfs of `tmp_bytes`, and the work folder is bounded by [`workspace`]. Each layer comes from a well-kept mechanism
//! (bubblewrap, the `landlock` crate, `seccompiler`); this crate only decides what they allow.
//!
//! Refuses: running anything when bubblewrap is missing, a namespace cannot be made, or a
//! required layer cannot be applied ([`SandboxError::LayerUnavailable`] names the layer and the
//! fix). Tool calls from code reach only what [`ToolBridge`] offers; [`tool`] makes the
//! `code_execution` tool whose bridge is the dispatcher itself.

pub mod beneath;
pub mod bwrap;
pub mod cgroup;
pub mod config;
pub mod error;
pub mod init;
pub mod python;
pub mod run;
pub mod seccomp;
pub mod source;
pub mod tool;
pub mod workspace;

pub use cgroup::BoundLayer;
pub use config::{InitProgram, Limits, Requirement, SandboxConfig, Settings};
pub use error::{Layer, SandboxError};
pub use python::Paging;
pub use run::{
    Bounds, BridgeReply, Captured, Job, LimitHit, NoTools, RunReport, Sandbox, Stopped, ToolBridge,
};
pub use tool::{CodeTool, DataExport, FailedScripts, code_execution};
pub use workspace::{WorkBound, Workspaces};
