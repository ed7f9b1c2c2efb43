use super::*;

#[test]
fn rlimits_alone_never_let_processes_times_address_space_pass_the_budget() {
    for (memory, processes) in [
        (1 << 30, 32),
        (1 << 30, 4),
        (512 << 20, 1),
        (1 << 30, 0),
        (96 << 20, 32),
        (256 << 20, 32),
    ] {
        let (n, each) = split_rlimits(memory, processes);
        assert!((1..=FALLBACK_PROCESSES).contains(&n));
        assert!(n * each <= memory, "{n} x {each} > {memory}");
        assert!(
            each >= MIN_ADDRESS_SPACE,
            "{each} is too small to start Python"
        );
    }
}

#[test]
fn a_v1_hierarchy_is_found_under_its_mount_and_the_process_path() {
    let own = parse_self_cgroup("4:memory:/process_api/abc\n8:pids:/\n0::/\n");
    assert_eq!(own[0].1, vec!["memory"]);
    let mounts = parse_cgroup_mounts(
        "35 25 0:31 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n\
         40 25 0:36 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
         22 1 0:20 / /proc rw - proc proc rw\n",
    );
    assert_eq!(mounts.len(), 2);
    let (root, point, fstype, options) = &mounts[0];
    assert_eq!(
        (fstype.as_str(), options.contains(&"memory".to_owned())),
        ("cgroup", true)
    );
    assert_eq!(
        on_disk(point, root, &own[0].2),
        PathBuf::from("/sys/fs/cgroup/memory/process_api/abc")
    );
}

#[test]
fn a_required_cgroup_that_cannot_be_made_runs_nothing_and_names_the_layer() {
    use crate::{Layer, Requirement, SandboxError};
    let refused = as_required::<()>(Requirement::Required, Err("no delegation".into()));
    match refused {
        Err(
            e @ SandboxError::LayerUnavailable {
                layer: Layer::Cgroup,
                ..
            },
        ) => {
            let text = e.to_string();
            assert!(
                text.contains("cgroup") && text.contains("no delegation"),
                "{text}"
            );
            assert!(text.contains("Nothing ran"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        as_required::<()>(Requirement::IfAvailable, Err("no delegation".into())),
        Ok(None)
    ));
    assert!(matches!(
        as_required(Requirement::Required, Ok(7)),
        Ok(Some(7))
    ));
}

#[test]
fn a_v2_run_cgroup_goes_under_this_one_or_beside_it_never_above_the_mount() {
    let mount = Path::new("/sys/fs/cgroup");
    assert_eq!(
        v2_candidates(
            Path::new("/sys/fs/cgroup/user.slice/toolgate.service/main"),
            mount
        ),
        vec![
            PathBuf::from("/sys/fs/cgroup/user.slice/toolgate.service/main"),
            PathBuf::from("/sys/fs/cgroup/user.slice/toolgate.service"),
        ]
    );
    assert_eq!(v2_candidates(mount, mount), vec![mount.to_owned()]);
}

#[test]
fn counters_are_read_by_name_not_position() {
    let text = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
    assert_eq!(counter(text, "oom_kill"), Some(3));
    assert_eq!(counter("max 0\n", "oom_kill"), None);
}
