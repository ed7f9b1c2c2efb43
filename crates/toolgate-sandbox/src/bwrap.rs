//! The bubblewrap command line for one run, as a pure function of what is mounted, so the
//! isolation it asks for is table-tested rather than read off a shell script.
//!
//! Guarantees: every namespace is unshared and required (`--unshare-user`, not `-try`), so a
//! kernel that cannot make one makes bubblewrap fail and nothing runs; the network namespace
//! has only its own loopback; no capabilities; a non-root user; a new session (no terminal
//! injection); the sandbox dies with its parent; the only host paths inside are `/usr`
//! (read-only), the loader cache, the init, and the run's own folders; the root is read-only.
//! The environment is built here from nothing (the host's is never passed in).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where things are inside the sandbox.
pub const CODE_DIR: &str = "/sandbox/code";
pub const DATA_DIR: &str = "/sandbox/data";
pub const WORK_DIR: &str = "/sandbox/work";
pub const INIT_PATH: &str = "/sandbox/.init";
/// The bridge's descriptor number inside.
pub const BRIDGE_FD: i32 = 3;
/// Descriptors bubblewrap binds from (opened by the runner, so bubblewrap, which may run as
/// an unprivileged user, needs no access to the host paths themselves).
pub const CODE_FD: i32 = 4;
pub const DATA_FD: i32 = 5;
pub const WORK_FD: i32 = 6;
pub const INIT_FD: i32 = 7;
/// The unprivileged user the program runs as (`nobody`).
pub const SANDBOX_UID: u32 = 65534;

/// The host folders of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Mounts {
    /// The script and the generated tools module (read-only inside).
    pub code: PathBuf,
    /// The task's data (a notes export), read-only; none when the task needs none.
    pub data: Option<PathBuf>,
    /// The conversation's working folder: the only writable host folder.
    pub work: PathBuf,
    /// The init program on the host.
    pub init: PathBuf,
    /// Size of the run's `/tmp` (a tmpfs: memory).
    pub tmp_bytes: u64,
}

/// Paths inside the sandbox the init lets the program read (Landlock).
pub fn readable(mounts: &Mounts) -> Vec<PathBuf> {
    let mut paths = vec![
        PathBuf::from("/usr"),
        PathBuf::from(CODE_DIR),
        PathBuf::from("/proc"),
        PathBuf::from("/dev"),
    ];
    if Path::new("/etc/ld.so.cache").exists() {
        paths.push(PathBuf::from("/etc/ld.so.cache"));
    }
    if mounts.data.is_some() {
        paths.push(PathBuf::from(DATA_DIR));
    }
    paths
}

/// Paths inside the sandbox the program may write (Landlock).
pub fn writable() -> Vec<PathBuf> {
    vec![PathBuf::from(WORK_DIR), PathBuf::from("/tmp")]
}

fn push(args: &mut Vec<OsString>, items: &[&str]) {
    args.extend(items.iter().map(OsString::from));
}

fn bind_fd(args: &mut Vec<OsString>, flag: &str, fd: i32, inside: &str) {
    args.push(flag.into());
    args.push(fd.to_string().into());
    args.push(inside.into());
}

/// bubblewrap's arguments, up to and including `--` (the init and its arguments follow). The
/// run's folders are bound from descriptors [`CODE_FD`], [`DATA_FD`] (when there is data),
/// [`WORK_FD`] and [`INIT_FD`].
pub fn arguments(mounts: &Mounts) -> Vec<OsString> {
    let mut args = Vec::new();
    push(
        &mut args,
        &[
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--disable-userns",
            "--uid",
            "65534",
            "--gid",
            "65534",
            "--hostname",
            "sandbox",
            "--cap-drop",
            "ALL",
            "--new-session",
            "--die-with-parent",
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--symlink",
            "usr/sbin",
            "/sbin",
            "--ro-bind-try",
            "/etc/ld.so.cache",
            "/etc/ld.so.cache",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
        ],
    );
    args.push(mounts.tmp_bytes.to_string().into());
    push(&mut args, &["--tmpfs", "/tmp", "--dir", "/sandbox"]);
    bind_fd(&mut args, "--ro-bind-fd", CODE_FD, CODE_DIR);
    if mounts.data.is_some() {
        bind_fd(&mut args, "--ro-bind-fd", DATA_FD, DATA_DIR);
    }
    bind_fd(&mut args, "--bind-fd", WORK_FD, WORK_DIR);
    bind_fd(&mut args, "--ro-bind-fd", INIT_FD, INIT_PATH);
    push(
        &mut args,
        &[
            "--remount-ro",
            "/",
            "--chdir",
            WORK_DIR,
            "--setenv",
            "HOME",
            WORK_DIR,
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--setenv",
            "PYTHONDONTWRITEBYTECODE",
            "1",
            "--setenv",
            "PYTHONUNBUFFERED",
            "1",
            "--setenv",
            "TOOLGATE_BRIDGE_FD",
            "3",
            "--",
        ],
    );
    args
}

#[cfg(test)]
#[path = "bwrap_tests.rs"]
mod tests;
