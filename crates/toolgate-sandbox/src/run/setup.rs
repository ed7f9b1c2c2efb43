//! What the run's process tree is given before it starts: its code's files private to it,
//! its folders as descriptors placed for bubblewrap between fork and exec (after joining the
//! run's cgroup), and, when toolgate runs as root, its folders handed to nobody.

use std::os::fd::OwnedFd;
use std::path::Path;

use crate::bwrap::{self, Mounts};
use crate::cgroup;
use crate::error::SandboxError;

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
pub(super) fn open_path(path: &Path) -> Result<OwnedFd, SandboxError> {
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
pub(super) fn prepare_for_nobody(mounts: &Mounts) -> Result<(), SandboxError> {
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
pub(super) fn prepare_child(join: &[i32], placed: &[(i32, i32)]) -> std::io::Result<()> {
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
pub(super) fn write_file(path: &Path, text: &str) -> Result<(), SandboxError> {
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

#[cfg(test)]
mod child_tests {
    use std::os::fd::AsRawFd as _;

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
