//! Reading, on the host, a file a script wrote in its working folder.
//!
//! The script controls every name beneath that folder, links included, and another script of
//! the same conversation may still be renaming them while the host reads. So the path is
//! resolved by the kernel beneath an open descriptor of the folder, following no symbolic link
//! at any depth and crossing no magic link (`openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`; where the kernel has no `openat2`, one
//! `O_NOFOLLOW | O_DIRECTORY` open per folder), in one pass with no check-then-use gap. The
//! file is opened `O_NOFOLLOW | O_NONBLOCK` (a FIFO cannot stall the host), must be a regular
//! file by `fstat` of that same descriptor, and at most `cap + 1` bytes of it are read (the
//! extra byte only says it was cut).
//!
//! Refuses, failing closed, with a reason that names no host path and no host content: a path
//! that is not relative or holds `..`, a link anywhere on the way, anything but a regular
//! file, and every error it cannot classify (including `openat2` failing for any reason but
//! `ENOSYS`).

use std::io::Read as _;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// A file read within its cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Returned {
    /// The file's size as `fstat` saw it.
    pub size: u64,
    /// At most the cap's bytes.
    pub bytes: Vec<u8>,
    /// The file held more than the cap.
    pub cut: bool,
}

/// Why a file was not returned. None of these carries host data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("it is not a relative path inside the working folder")]
    NotInside,
    #[error(
        "it is, or is reached through, a symbolic link; only files written inside the working folder are returned"
    )]
    Link,
    #[error("it is not a regular file")]
    NotRegular,
    #[error("a part of its path is not a folder")]
    NotAFolder,
    #[error("the script did not write this file")]
    Missing,
    #[error("it could not be read ({0})")]
    Unreadable(std::io::ErrorKind),
}

/// How the path is resolved (the kernel's `openat2`, or one open per component where the
/// kernel lacks it); both refuse the same things.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    Openat2,
    PerComponent,
}

/// `relative`'s components when it names something beneath a folder: only normal names (no
/// root, no `..`; a leading `.` is refused too, so the path reads as written).
pub fn relative_path(relative: &str) -> Option<PathBuf> {
    let path = Path::new(relative);
    (!relative.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_))))
        .then(|| path.components().collect())
}

/// Reads `relative` beneath `root`, at most `cap` bytes; see the module documentation.
pub fn read_beneath(root: &Path, relative: &str, cap: usize) -> Result<Returned, Refused> {
    read_beneath_with(root, relative, cap, Resolver::Openat2)
}

/// [`read_beneath`] with a chosen resolver (`Openat2` still falls back on `ENOSYS` only).
pub fn read_beneath_with(
    root: &Path,
    relative: &str,
    cap: usize,
    resolver: Resolver,
) -> Result<Returned, Refused> {
    let path = relative_path(relative).ok_or(Refused::NotInside)?;
    let dir = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Refused::Unreadable(std::io::Error::from(e).kind()))?;
    let file = match resolver {
        Resolver::Openat2 => match open_with_openat2(dir.as_fd(), &path) {
            Err(Errno::NOSYS) => open_per_component(dir.as_fd(), &path)?,
            other => other.map_err(refusal)?,
        },
        Resolver::PerComponent => open_per_component(dir.as_fd(), &path)?,
    };
    read_capped(file, cap)
}

/// The flags of the final open: never a link, never blocking on a FIFO, never a terminal.
fn file_flags() -> OFlags {
    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY
}

fn open_with_openat2(dir: BorrowedFd<'_>, path: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::openat2(
        dir,
        path,
        file_flags(),
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
}

/// One `openat` per component, each refusing a link (the names hold no `/` and no `..`).
fn open_per_component(dir: BorrowedFd<'_>, path: &Path) -> Result<OwnedFd, Refused> {
    let names: Vec<&std::ffi::OsStr> = path.iter().collect();
    let Some((last, folders)) = names.split_last() else {
        return Err(Refused::NotInside);
    };
    let mut current: Option<OwnedFd> = None;
    for name in folders {
        let at = current.as_ref().map_or(dir, AsFd::as_fd);
        let next = rustix::fs::openat(
            at,
            *name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            // O_DIRECTORY is checked before O_NOFOLLOW: a link to a folder says ENOTDIR.
            Errno::NOTDIR if is_link(at, name) => Refused::Link,
            other => refusal(other),
        })?;
        current = Some(next);
    }
    let at = current.as_ref().map_or(dir, AsFd::as_fd);
    rustix::fs::openat(at, *last, file_flags(), Mode::empty()).map_err(refusal)
}

fn is_link(at: BorrowedFd<'_>, name: &std::ffi::OsStr) -> bool {
    rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink)
}

/// What an open's error means for the script's request.
fn refusal(errno: Errno) -> Refused {
    match errno {
        // ELOOP: a link met with NO_SYMLINKS or O_NOFOLLOW; EXDEV: resolution left the folder.
        Errno::LOOP | Errno::XDEV => Refused::Link,
        Errno::NOENT => Refused::Missing,
        Errno::NOTDIR => Refused::NotAFolder,
        // A socket or a device node.
        Errno::NXIO | Errno::NODEV => Refused::NotRegular,
        other => Refused::Unreadable(std::io::Error::from(other).kind()),
    }
}

fn read_capped(file: OwnedFd, cap: usize) -> Result<Returned, Refused> {
    let stat = rustix::fs::fstat(&file).map_err(refusal)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(Refused::NotRegular);
    }
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    let mut bytes = Vec::with_capacity(cap.min(64 * 1024).saturating_add(1));
    std::fs::File::from(file)
        .take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| Refused::Unreadable(e.kind()))?;
    let cut = bytes.len() > cap;
    bytes.truncate(cap);
    Ok(Returned {
        size: u64::try_from(stat.st_size).unwrap_or(0),
        bytes,
        cut,
    })
}

#[cfg(test)]
#[path = "beneath_tests.rs"]
mod tests;
