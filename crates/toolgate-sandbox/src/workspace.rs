//! Working folders, one per conversation (run id): a later script in the same conversation
//! reads what an earlier one wrote; another conversation never sees it. All of them live under
//! one private root that is removed when the [`Workspaces`] is dropped (the end of the
//! conversation for `toolgate ask`), and [`Workspaces::finish`] removes one conversation's.
//!
//! Bounded: run as root, each conversation's folder is its own tmpfs of `work_bytes` (and one
//! inode per 16 KiB of it), mounted here and unmounted when the conversation ends, so a
//! script that fills it gets "No space left on device" and the host's disk is never touched.
//! Where nothing can be mounted the folder is a plain one and the runner checks its size
//! before and after every run instead ([`usage`], [`WorkBound::Checked`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::SandboxError;

/// How the work folder of a run is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkBound {
    /// Its own tmpfs no larger than the bound: writes past it fail with ENOSPC.
    Tmpfs,
    /// A host folder: refused before a run when over the bound, checked after it, and no file
    /// may grow past the room left (RLIMIT_FSIZE).
    Checked,
}

/// Inodes a bounded folder of `bytes` may hold (one per 16 KiB, at least 1024).
pub fn inodes_for(bytes: u64) -> u64 {
    (bytes / (16 << 10)).max(1024)
}

/// Bytes (allocated blocks) and entries under `dir`, links not followed; stops counting at
/// `cap_entries`.
pub fn usage(dir: &Path, cap_entries: u64) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let (mut bytes, mut entries) = (0u64, 0u64);
    let mut stack = vec![dir.to_owned()];
    // What vanishes while it is counted (a running script renames and deletes) is not there:
    // skipped, not an error; any other error is one.
    let gone = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        )
    };
    while let Some(folder) = stack.pop() {
        let listing = match std::fs::read_dir(&folder) {
            Ok(listing) => listing,
            Err(e) if gone(&e) && folder != dir => continue,
            Err(e) => return Err(e),
        };
        for entry in listing {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(e),
            };
            let meta = match entry.path().symlink_metadata() {
                Ok(meta) => meta,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(e),
            };
            bytes = bytes.saturating_add(meta.blocks().saturating_mul(512));
            entries += 1;
            if entries >= cap_entries {
                return Ok((bytes, entries));
            }
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    Ok((bytes, entries))
}

const TMPFS_MAGIC: i64 = 0x0102_1994;

/// [`WorkBound::Tmpfs`] when `dir` is a tmpfs no larger than `bytes` with bounded inodes.
pub fn bound_of(dir: &Path, bytes: u64) -> WorkBound {
    match rustix::fs::statfs(dir) {
        Ok(fs) => {
            let size = fs
                .f_blocks
                .saturating_mul(u64::try_from(fs.f_bsize).unwrap_or(u64::MAX));
            if fs.f_type == TMPFS_MAGIC && size <= bytes && fs.f_files <= inodes_for(bytes) {
                WorkBound::Tmpfs
            } else {
                WorkBound::Checked
            }
        }
        Err(_) => WorkBound::Checked,
    }
}

/// Mounts a tmpfs of `bytes` at `dir` for the sandbox's user; false where this process may not.
fn mount_bounded(dir: &Path, bytes: u64) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    if !crate::run::setup::is_root() {
        return false;
    }
    let options = format!(
        "size={bytes},nr_inodes={},mode=0700,uid={uid},gid={uid}",
        inodes_for(bytes),
        uid = crate::bwrap::SANDBOX_UID
    );
    let (Ok(target), Ok(options)) = (
        std::ffi::CString::new(dir.as_os_str().as_bytes()),
        std::ffi::CString::new(options),
    ) else {
        return false;
    };
    // SAFETY: mount reads the NUL-terminated strings passed and nothing else.
    let done = unsafe {
        libc::mount(
            c"toolgate-work".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        )
    };
    done == 0
}

fn unmount(dir: &Path) {
    use std::os::unix::ffi::OsStrExt as _;
    if let Ok(target) = std::ffi::CString::new(dir.as_os_str().as_bytes()) {
        // SAFETY: umount2 reads the NUL-terminated path and nothing else.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

#[derive(Debug)]
pub struct Workspaces {
    root: tempfile::TempDir,
    runs: Mutex<HashMap<String, PathBuf>>,
    work_bytes: u64,
    mounted: Mutex<Vec<PathBuf>>,
}

impl Workspaces {
    /// Folders bounded by the default `work_bytes` ([`crate::Limits`]).
    pub fn new() -> Result<Self, SandboxError> {
        Workspaces::with_limit(crate::Limits::default().work_bytes)
    }

    /// Folders of at most `work_bytes` each.
    pub fn with_limit(work_bytes: u64) -> Result<Self, SandboxError> {
        let root = tempfile::Builder::new()
            .prefix("toolgate-work-")
            .tempdir()
            .map_err(|e| SandboxError::io(std::env::temp_dir(), e))?;
        // Traversable (not listable) by the sandbox's user when toolgate runs as root.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o711))
            .map_err(|e| SandboxError::io(root.path(), e))?;
        Ok(Workspaces {
            root,
            runs: Mutex::new(HashMap::new()),
            work_bytes,
            mounted: Mutex::new(Vec::new()),
        })
    }

    /// The conversation's folder, made on first use.
    pub fn for_run(&self, run_id: &str) -> Result<PathBuf, SandboxError> {
        let mut runs = self
            .runs
            .lock()
            .map_err(|_| SandboxError::Config("the workspace table is poisoned".to_owned()))?;
        if let Some(dir) = runs.get(run_id) {
            return Ok(dir.clone());
        }
        // Numbered, not named after the run id: a run id is caller text.
        let dir = self.root.path().join(format!("run-{}", runs.len() + 1));
        std::fs::create_dir(&dir).map_err(|e| SandboxError::io(&dir, e))?;
        if mount_bounded(&dir, self.work_bytes)
            && let Ok(mut mounted) = self.mounted.lock()
        {
            mounted.push(dir.clone());
        }
        // The root lets anyone traverse it: the folder itself is private to the run.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| SandboxError::io(&dir, e))?;
        runs.insert(run_id.to_owned(), dir.clone());
        Ok(dir)
    }

    /// Removes the conversation's folder (a later script in the same run starts empty).
    pub fn finish(&self, run_id: &str) -> Result<(), SandboxError> {
        let removed = match self.runs.lock() {
            Ok(mut runs) => runs.remove(run_id),
            Err(_) => None,
        };
        match removed {
            Some(dir) => {
                self.release(&dir);
                std::fs::remove_dir_all(&dir).map_err(|e| SandboxError::io(&dir, e))
            }
            None => Ok(()),
        }
    }

    fn release(&self, dir: &Path) {
        if let Ok(mut mounted) = self.mounted.lock()
            && let Some(i) = mounted.iter().position(|m| m == dir)
        {
            unmount(&mounted.swap_remove(i));
        }
    }

    /// The bound each conversation's folder holds to.
    pub fn work_bytes(&self) -> u64 {
        self.work_bytes
    }

    pub fn root(&self) -> &std::path::Path {
        self.root.path()
    }
}

impl Drop for Workspaces {
    fn drop(&mut self) {
        if let Ok(mounted) = self.mounted.get_mut() {
            for dir in mounted.drain(..) {
                unmount(&dir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_keeps_its_folder_and_another_gets_its_own() {
        let spaces = Workspaces::new().unwrap();
        let a = spaces.for_run("run-a").unwrap();
        std::fs::write(a.join("state.txt"), "kept").unwrap();
        assert_eq!(spaces.for_run("run-a").unwrap(), a);
        let b = spaces.for_run("run-b").unwrap();
        assert_ne!(a, b);
        assert_eq!(std::fs::read_dir(&b).unwrap().count(), 0);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "a conversation's folder is private to it");
        if crate::run::setup::is_root() {
            assert_eq!(bound_of(&a, spaces.work_bytes()), WorkBound::Tmpfs);
        }
    }

    #[test]
    fn finishing_a_conversation_removes_its_folder_and_dropping_removes_them_all() {
        let spaces = Workspaces::new().unwrap();
        let a = spaces.for_run("run-a").unwrap();
        let b = spaces.for_run("run-b").unwrap();
        spaces.finish("run-a").unwrap();
        assert!(!a.exists() && b.exists());
        let root = spaces.root().to_owned();
        drop(spaces);
        assert!(!root.exists() && !b.exists());
    }

    #[test]
    fn a_run_id_never_names_a_path() {
        let spaces = Workspaces::new().unwrap();
        let dir = spaces.for_run("../../etc").unwrap();
        assert_eq!(dir.parent(), Some(spaces.root()));
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    #[test]
    fn a_plain_folder_is_checked_not_trusted_as_bounded() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(bound_of(dir.path(), 256 << 20), WorkBound::Checked);
    }

    #[test]
    fn a_folder_that_vanishes_or_becomes_a_link_mid_count_is_skipped_not_an_error() {
        use std::io::ErrorKind;
        let dir = tempfile::tempdir().unwrap();
        // read_dir on a folder swapped for a link (not followed: O_DIRECTORY on a file) or gone.
        std::fs::write(dir.path().join("was-a-folder"), b"x").unwrap();
        for kind in [ErrorKind::NotFound, ErrorKind::NotADirectory] {
            let e = match kind {
                ErrorKind::NotFound => std::fs::read_dir(dir.path().join("gone")).unwrap_err(),
                _ => std::fs::read_dir(dir.path().join("was-a-folder")).unwrap_err(),
            };
            assert_eq!(e.kind(), kind);
        }
        assert!(usage(dir.path(), 10).is_ok());
        assert!(
            usage(&dir.path().join("gone"), 10).is_err(),
            "the folder itself must exist"
        );
    }

    #[test]
    fn usage_counts_nested_files_and_does_not_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a/f"), vec![1u8; 100_000]).unwrap();
        std::os::unix::fs::symlink("/usr", dir.path().join("link")).unwrap();
        let (bytes, entries) = usage(dir.path(), 1000).unwrap();
        assert_eq!(entries, 3);
        assert!((100_000..1_000_000).contains(&bytes), "{bytes}");
    }
}
