use super::*;

fn mounts(data: bool) -> Mounts {
    Mounts {
        code: PathBuf::from("/host/code"),
        data: data.then(|| PathBuf::from("/host/notes")),
        work: PathBuf::from("/host/work"),
        init: PathBuf::from("/host/init"),
        tmp_bytes: 64 << 20,
    }
}

fn strings(data: bool) -> Vec<String> {
    arguments(&mounts(data))
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

fn has_pair(args: &[String], flag: &str, value: &str) -> bool {
    args.windows(2).any(|w| w[0] == flag && w[1] == value)
}

#[test]
fn every_namespace_is_required_so_a_missing_one_runs_nothing() {
    let args = strings(false);
    for flag in [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} missing");
    }
    assert!(
        !args
            .iter()
            .any(|a| a == "--unshare-user-try" || a == "--share-net")
    );
}

#[test]
fn no_capabilities_and_not_root_prevent_privileged_escapes() {
    let args = strings(false);
    assert!(has_pair(&args, "--cap-drop", "ALL"));
    assert!(has_pair(&args, "--uid", "65534"));
    assert!(args.iter().any(|a| a == "--new-session"));
    assert!(args.iter().any(|a| a == "--die-with-parent"));
    assert!(args.iter().any(|a| a == "--disable-userns"));
}

#[test]
fn only_the_work_folder_is_a_writable_host_mount() {
    let args = strings(true);
    let writable: Vec<_> = args
        .windows(3)
        .filter(|w| w[0] == "--bind" || w[0] == "--bind-fd" || w[0] == "--dev-bind")
        .map(|w| w[2].clone())
        .collect();
    assert_eq!(writable, vec![WORK_DIR.to_owned()]);
    assert!(has_pair(&args, "--remount-ro", "/"));
}

#[test]
fn home_and_the_rest_of_the_host_are_not_mounted() {
    let args = strings(true);
    let sources: Vec<_> = args
        .windows(3)
        .filter(|w| w[0].contains("bind"))
        .map(|w| w[1].clone())
        .collect();
    let fds = [CODE_FD, DATA_FD, WORK_FD, INIT_FD].map(|fd| fd.to_string());
    assert_eq!(
        sources,
        vec![
            "/usr",
            "/etc/ld.so.cache",
            &fds[0],
            &fds[1],
            &fds[2],
            &fds[3]
        ]
    );
}

#[test]
fn data_is_mounted_only_when_the_task_has_some() {
    assert!(!strings(false).iter().any(|a| a == DATA_DIR));
    assert!(strings(true).iter().any(|a| a == DATA_DIR));
    assert!(!readable(&mounts(false)).contains(&PathBuf::from(DATA_DIR)));
}

#[test]
fn tmp_is_a_tmpfs_of_the_configured_size_so_it_cannot_take_the_hosts_memory() {
    let args = strings(false);
    let at = args.iter().position(|a| a == "--tmpfs").unwrap();
    assert_eq!(args[at + 1], "/tmp");
    assert_eq!(&args[at - 2..at], ["--size", &(64u64 << 20).to_string()]);
}

#[test]
fn arguments_end_with_the_separator() {
    assert_eq!(strings(false).last().map(String::as_str), Some("--"));
}
