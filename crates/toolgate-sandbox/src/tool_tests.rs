use super::*;
use std::os::unix::fs::PermissionsExt as _;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn an_export_readable_by_other_users_is_sealed_to_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::set_permissions(&notes, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(notes.join("1.md"), "note").unwrap();
    std::fs::set_permissions(notes.join("1.md"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(dir.path().join("index.json"), "[]").unwrap();
    seal_export(dir.path(), None).unwrap();
    assert_eq!(mode(dir.path()), 0o700);
    assert_eq!(mode(&notes), 0o700);
    assert_eq!(mode(&notes.join("1.md")), 0o600);
    assert_eq!(mode(&dir.path().join("index.json")), 0o600);
}

#[test]
fn an_export_holding_a_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
    assert!(seal_export(dir.path(), None).is_err());
}

#[test]
fn a_run_that_hits_a_bound_tells_the_model_which_and_the_bounds() {
    use crate::run::{Bounds, Captured, LimitHit};
    let empty = Captured {
        text: String::new(),
        total_bytes: 0,
        truncated: false,
    };
    let report = RunReport {
        exit_code: Some(1),
        signal: None,
        stopped: None,
        stdout: empty.clone(),
        stderr: empty,
        tool_calls: 0,
        landlock: true,
        seccomp: true,
        elapsed_ms: 5,
        bounds: Bounds {
            layer: crate::BoundLayer::CgroupV1,
            memory_bytes: 1 << 30,
            processes: 32,
            address_space_bytes: 1 << 30,
            tmp_bytes: 64 << 20,
            work: crate::WorkBound::Tmpfs,
            work_bytes: 256 << 20,
            work_used_bytes: 256 << 20,
            usage: crate::cgroup::Usage::default(),
        },
        limits_hit: vec![LimitHit::Memory, LimitHit::WorkFolder],
    };
    let content = observation(&report, Vec::new()).content;
    assert_eq!(content["bounded_by"], "cgroup_v1");
    assert_eq!(content["limits_hit"], json!(["memory", "work_folder"]));
    assert_eq!(content["limits"]["memory_mb"], 1024);
    assert_eq!(content["limits"]["work_mb"], 256);
}
