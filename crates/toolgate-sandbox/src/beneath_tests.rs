use super::*;
use std::os::unix::fs::symlink;

const BOTH: [Resolver; 2] = [Resolver::Openat2, Resolver::PerComponent];

#[test]
fn return_paths_outside_the_working_folder_are_refused() {
    for (path, ok) in [
        ("summary.md", true),
        ("out/a.txt", true),
        ("out//a.txt", true),
        ("../etc/passwd", false),
        ("/etc/passwd", false),
        ("a/../../b", false),
        ("", false),
        ("./a", false),
    ] {
        assert_eq!(relative_path(path).is_some(), ok, "{path}");
    }
}

/// A work folder as a script could leave it, and a secret outside it.
fn planted() -> (tempfile::TempDir, tempfile::TempDir) {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside-secret-51e").unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    std::fs::create_dir(w.join("out")).unwrap();
    std::fs::write(w.join("out/a.txt"), "legit").unwrap();
    std::fs::write(w.join("plain.txt"), "x".repeat(10)).unwrap();
    symlink(outside.path(), w.join("dirlink")).unwrap();
    symlink(outside.path().join("secret.txt"), w.join("filelink")).unwrap();
    symlink("/proc", w.join("p")).unwrap();
    symlink("out", w.join("inside_link")).unwrap();
    std::fs::create_dir(w.join("deep")).unwrap();
    symlink(outside.path(), w.join("deep/link")).unwrap();
    rustix::fs::mkfifoat(rustix::fs::CWD, w.join("fifo"), Mode::RUSR | Mode::WUSR).unwrap();
    (work, outside)
}

#[test]
fn links_at_any_depth_and_non_files_are_refused_by_both_resolvers() {
    let (work, _outside) = planted();
    for resolver in BOTH {
        let read = |p: &str| read_beneath_with(work.path(), p, 8, resolver);
        for (path, expected) in [
            ("dirlink/secret.txt", Err(Refused::Link)),
            ("filelink", Err(Refused::Link)),
            ("p/self/environ", Err(Refused::Link)),
            ("deep/link/secret.txt", Err(Refused::Link)),
            // Even a link that stays inside: the host follows none.
            ("inside_link/a.txt", Err(Refused::Link)),
            ("fifo", Err(Refused::NotRegular)),
            ("out", Err(Refused::NotRegular)),
            ("missing.txt", Err(Refused::Missing)),
            ("plain.txt/x", Err(Refused::NotAFolder)),
            ("../x", Err(Refused::NotInside)),
        ] {
            assert_eq!(read(path).map(|r| r.bytes), expected, "{resolver:?} {path}");
        }
        let legit = read("out/a.txt").unwrap();
        assert_eq!((legit.bytes.as_slice(), legit.cut), (&b"legit"[..], false));
        let cut = read("plain.txt").unwrap();
        assert_eq!((cut.bytes.len(), cut.size, cut.cut), (8, 10, true));
    }
}

#[test]
fn a_folder_swapped_for_a_link_between_two_reads_is_refused() {
    let (work, outside) = planted();
    let w = work.path();
    std::fs::create_dir(w.join("d")).unwrap();
    std::fs::write(w.join("d/secret.txt"), "mine").unwrap();
    for resolver in BOTH {
        std::fs::remove_file(w.join("d")).ok();
        std::fs::create_dir_all(w.join("d")).unwrap();
        std::fs::write(w.join("d/secret.txt"), "mine").unwrap();
        let first = read_beneath_with(w, "d/secret.txt", 64, resolver).unwrap();
        assert_eq!(first.bytes, b"mine");
        std::fs::remove_dir_all(w.join("d")).unwrap();
        symlink(outside.path(), w.join("d")).unwrap();
        assert_eq!(
            read_beneath_with(w, "d/secret.txt", 64, resolver),
            Err(Refused::Link),
            "{resolver:?}"
        );
    }
}

#[test]
fn refusals_name_no_host_path() {
    for refused in [
        Refused::NotInside,
        Refused::Link,
        Refused::NotRegular,
        Refused::NotAFolder,
        Refused::Missing,
        Refused::Unreadable(std::io::ErrorKind::PermissionDenied),
    ] {
        let text = refused.to_string();
        assert!(!text.contains('/'), "{text}");
    }
}
