#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Escape and abuse attempts against the real sandbox (bubblewrap, the init's rlimits, Landlock
//! and seccomp, the system's Python). Each asserts that the attempt failed inside and that the
//! host is unchanged.

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use common::{config, run, run_in, sandbox};
use toolgate_sandbox::{Layer, Sandbox, SandboxError, Stopped};

const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-material-7f3a9\n";

/// A planted key outside every mount, and a script that tries `paths` and prints what it read.
fn try_read(paths: &[&str]) -> String {
    let list = paths
        .iter()
        .map(|p| format!("{p:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "for p in [{list}]:\n    try:\n        print('READ', p, open(p).read())\n    except Exception as e:\n        print('BLOCKED', p, type(e).__name__)\n"
    )
}

fn plant_key() -> (tempfile::TempDir, String) {
    let home = tempfile::tempdir().unwrap();
    let ssh = home.path().join(".ssh");
    std::fs::create_dir(&ssh).unwrap();
    let key = ssh.join("id_rsa");
    std::fs::write(&key, SECRET).unwrap();
    let path = key.to_string_lossy().into_owned();
    (home, path)
}

fn assert_key_untouched(path: &str) {
    assert_eq!(std::fs::read_to_string(path).unwrap(), SECRET);
}

#[tokio::test]
async fn a_trivial_script_runs_with_every_layer_in_place() {
    let (report, _work) = run("import os\nprint('hello', os.getuid())\n").await;
    assert_eq!(report.exit_code, Some(0), "{report:?}");
    assert_eq!(report.stdout.text, "hello 65534\n");
    assert!(report.landlock && report.seccomp);
}

#[tokio::test]
async fn a_planted_ssh_key_outside_the_mounts_cannot_be_read() {
    let (_home, key) = plant_key();
    let (report, _work) = run(&try_read(&[&key, "/root/.ssh/id_rsa", "~/.ssh/id_rsa"])).await;
    assert_eq!(report.exit_code, Some(0), "{report:?}");
    assert_eq!(
        report.stdout.text.matches("BLOCKED").count(),
        3,
        "{}",
        report.stdout.text
    );
    assert!(!report.stdout.text.contains("secret-key-material"));
    assert_key_untouched(&key);
}

#[tokio::test]
async fn etc_shadow_and_the_hosts_files_are_not_there() {
    let (report, _work) = run(&try_read(&[
        "/etc/shadow",
        "/etc/passwd",
        "/proc/1/root/etc/shadow",
    ]))
    .await;
    assert_eq!(
        report.stdout.text.matches("BLOCKED").count(),
        3,
        "{}",
        report.stdout.text
    );
}

#[tokio::test]
async fn another_processs_environment_cannot_be_read() {
    let mut host = std::process::Command::new("/usr/bin/sleep")
        .arg("30")
        .env("HOST_SECRET", "token-4d2c1b")
        .spawn()
        .unwrap();
    let pid = host.id();
    let script = format!(
        "{}import os\nprint('PIDS', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n",
        try_read(&[&format!("/proc/{pid}/environ"), "/proc/1/environ"])
    );
    let (report, _work) = run(&script).await;
    host.kill().unwrap();
    host.wait().unwrap();
    let out = &report.stdout.text;
    assert!(!out.contains("token-4d2c1b"), "{out}");
    assert!(
        out.contains(&format!("BLOCKED /proc/{pid}/environ")),
        "{out}"
    );
    // The PID namespace shows only the sandbox's own processes.
    let pids = out.lines().find(|l| l.starts_with("PIDS")).unwrap();
    assert!(!pids.contains(&pid.to_string()), "{pids}");
}

#[tokio::test]
async fn no_connection_reaches_a_host_listener_or_an_outside_address() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "import socket\nfor addr in [('127.0.0.1', {port}), ('203.0.113.7', 80), ('1.1.1.1', 443)]:\n    try:\n        s = socket.create_connection(addr, timeout=2)\n        print('CONNECTED', addr)\n    except Exception as e:\n        print('BLOCKED', addr, type(e).__name__)\n"
    );
    let (report, _work) = run(&script).await;
    assert_eq!(
        report.stdout.text.matches("BLOCKED").count(),
        3,
        "{report:?}"
    );
    assert!(!report.stdout.text.contains("CONNECTED"));
    assert_eq!(
        listener.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "the host listener was reached"
    );
}

#[tokio::test]
async fn writes_land_only_in_the_work_folder() {
    let data = common::data_dir();
    std::fs::write(data.path().join("note.md"), "kept").unwrap();
    let work = tempfile::tempdir().unwrap();
    let script = "\
for p in ['/sandbox/code/x', '/sandbox/data/x', '/sandbox/data/note.md', '/usr/x', '/x', '/etc/x', '/proc/x']:
    try:
        open(p, 'w').write('pwned')
        print('WROTE', p)
    except Exception as e:
        print('BLOCKED', p, type(e).__name__)
open('/sandbox/work/out.txt', 'w').write('result')
open('/tmp/scratch', 'w').write('scratch')
print('DONE')
";
    let report = run_in(&sandbox(), script, work.path(), Some(data.path())).await;
    let out = &report.stdout.text;
    assert_eq!(out.matches("BLOCKED").count(), 7, "{out}");
    assert!(!out.contains("WROTE"), "{out}");
    assert!(out.contains("DONE"), "{report:?}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("out.txt")).unwrap(),
        "result"
    );
    assert_eq!(
        std::fs::read_to_string(data.path().join("note.md")).unwrap(),
        "kept"
    );
    assert_eq!(std::fs::read_dir(data.path()).unwrap().count(), 1);
    assert!(!Path::new("/x").exists() && !Path::new("/usr/x").exists());
}

/// Processes on the host whose command line contains `marker`.
fn host_processes_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .count()
}

#[tokio::test]
async fn a_fork_bomb_is_bounded_and_leaves_no_process_behind() {
    let mut config = config();
    config.limits.wall = Duration::from_secs(4);
    let sandbox = Sandbox::new(config).unwrap();
    let work = tempfile::tempdir().unwrap();
    let marker = "forkbomb-marker-91c";
    let script = format!(
        "import os, time\nmarker = '{marker}'\nn = 0\nwhile True:\n    try:\n        if os.fork() == 0:\n            time.sleep(60)\n        n += 1\n    except OSError as e:\n        print('FORK REFUSED after', n, type(e).__name__, flush=True)\n        time.sleep(60)\n"
    );
    let report = run_in(&sandbox, &script, work.path(), None).await;
    assert_eq!(report.stopped, Some(Stopped::WallClock), "{report:?}");
    assert!(report.stdout.text.contains("FORK REFUSED"), "{report:?}");
    let forked: usize = report
        .stdout
        .text
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(forked < 32, "forked {forked} processes");
    // Killing bubblewrap ended the PID namespace and every process in it.
    let mut left = host_processes_with(marker);
    for _ in 0..50 {
        if left == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        left = host_processes_with(marker);
    }
    assert_eq!(left, 0, "sandboxed processes outlived the run");
}

#[tokio::test]
async fn allocating_four_gib_fails_inside() {
    let (report, _work) = run(
        "try:\n    b = bytearray(4 << 30)\n    print('ALLOCATED', len(b))\nexcept MemoryError:\n    print('REFUSED MemoryError')\n",
    )
    .await;
    assert_eq!(report.stdout.text, "REFUSED MemoryError\n", "{report:?}");
}

#[tokio::test]
async fn an_endless_loop_is_killed_by_the_wall_clock() {
    let mut config = config();
    config.limits.wall = Duration::from_secs(2);
    let sandbox = Sandbox::new(config).unwrap();
    let work = tempfile::tempdir().unwrap();
    let report = run_in(&sandbox, "while True:\n    pass\n", work.path(), None).await;
    assert_eq!(report.stopped, Some(Stopped::WallClock), "{report:?}");
    assert_eq!(report.signal, Some(9));
    assert!(report.elapsed_ms < 6_000, "{report:?}");
}

#[tokio::test]
async fn an_endless_loop_is_killed_by_the_cpu_limit() {
    let mut config = config();
    config.limits.cpu_seconds = 1;
    config.limits.wall = Duration::from_secs(20);
    let sandbox = Sandbox::new(config).unwrap();
    let work = tempfile::tempdir().unwrap();
    let report = run_in(&sandbox, "while True:\n    pass\n", work.path(), None).await;
    assert_eq!(report.stopped, None, "{report:?}");
    // The init is PID 1's child: bubblewrap reports the program's death as an exit status.
    assert!(
        report.signal == Some(libc::SIGXCPU)
            || report.exit_code == Some(128 + libc::SIGXCPU)
            || report.signal == Some(libc::SIGKILL)
            || report.exit_code == Some(128 + libc::SIGKILL),
        "{report:?}"
    );
}

#[tokio::test]
async fn a_setuid_binary_gains_nothing() {
    let data = common::data_dir();
    let planted = data.path().join("id");
    std::fs::copy("/usr/bin/id", &planted).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let script = "\
import subprocess
print(subprocess.run(['/sandbox/data/id'], capture_output=True, text=True).stdout.strip())
r = subprocess.run(['/usr/bin/mount', '-t', 'tmpfs', 'none', '/sandbox/work'], capture_output=True, text=True)
print('MOUNT', r.returncode)
";
    let report = run_in(&sandbox(), script, work.path(), Some(data.path())).await;
    let out = &report.stdout.text;
    assert!(out.starts_with("uid=65534"), "{report:?}");
    assert!(!out.contains("euid=0") && !out.contains("uid=0("), "{out}");
    assert!(out.contains("MOUNT") && !out.contains("MOUNT 0"), "{out}");
}

#[tokio::test]
async fn walking_subclasses_still_cannot_read_the_planted_key() {
    let (_home, key) = plant_key();
    // The classic Python "jail escape": reach `os` through object's subclasses, then open.
    let script = format!(
        "\
found = None
for cls in ().__class__.__bases__[0].__subclasses__():
    if cls.__name__ == '_wrap_close':
        found = cls.__init__.__globals__
        break
os_module = found['sys'].modules['os'] if 'sys' in found else __import__('os')
try:
    fd = found['open']({key:?}, 0) if 'open' in found else os_module.open({key:?}, 0)
    print('READ', os_module.read(fd, 200))
except Exception as e:
    print('BLOCKED', type(e).__name__)
try:
    print('LISTED', os_module.listdir({home:?}))
except Exception as e:
    print('BLOCKED', type(e).__name__)
",
        home = Path::new(&key).parent().unwrap().to_string_lossy()
    );
    let (report, _work) = run(&script).await;
    let out = &report.stdout.text;
    assert_eq!(out.matches("BLOCKED").count(), 2, "{report:?}");
    assert!(!out.contains("secret-key-material"));
    assert_key_untouched(&key);
}

#[tokio::test]
async fn seccomp_refuses_namespace_and_debugging_calls() {
    let (report, _work) = run(
        "\
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, call in [('unshare', lambda: libc.unshare(0x10000000)), ('ptrace', lambda: libc.ptrace(16, 1, 0, 0)), ('mount', lambda: libc.mount(b'none', b'/tmp', b'tmpfs', 0, None))]:
    rc = call()
    print(name, rc, os.strerror(ctypes.get_errno()))
",
    )
    .await;
    let out = &report.stdout.text;
    for name in ["unshare", "ptrace", "mount"] {
        assert!(
            out.contains(&format!("{name} -1 Operation not permitted")),
            "{report:?}"
        );
    }
}

#[tokio::test]
async fn without_bubblewrap_nothing_runs() {
    let mut config = config();
    config.bwrap = Some("/nonexistent/bwrap".into());
    let error = Sandbox::new(config).unwrap_err();
    assert!(
        matches!(
            error,
            SandboxError::LayerUnavailable {
                layer: Layer::Namespaces,
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error.to_string().contains("apt-get install bubblewrap"),
        "{error}"
    );
    let error = Sandbox::with_search_path(common::config(), "/nonexistent:/also-not").unwrap_err();
    assert!(error.to_string().contains("not in PATH"), "{error}");
}

#[tokio::test]
async fn a_required_layer_that_cannot_be_applied_runs_nothing() {
    // The kernel refuses an open-files limit above fs.nr_open: the rlimit layer cannot be
    // set, and the script (which would write a marker) never starts.
    let mut config = config();
    config.limits.open_files = u64::MAX - 1;
    let sandbox = Sandbox::new(config).unwrap();
    let work = tempfile::tempdir().unwrap();
    let job = common::job(
        "open('/sandbox/work/ran', 'w').write('x')\n",
        work.path(),
        None,
    );
    let error = sandbox
        .run(&job, &toolgate_sandbox::NoTools)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            SandboxError::LayerUnavailable {
                layer: Layer::Rlimits,
                ..
            }
        ),
        "{error}"
    );
    assert!(!work.path().join("ran").exists());
}

#[tokio::test]
async fn a_bubblewrap_that_cannot_make_namespaces_runs_nothing() {
    // A stand-in for a kernel without user namespaces: bubblewrap itself fails.
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut config = config();
    config.bwrap = Some(fake);
    let work = tempfile::tempdir().unwrap();
    let job = common::job(
        "open('/sandbox/work/ran', 'w').write('x')\n",
        work.path(),
        None,
    );
    let error = Sandbox::new(config)
        .unwrap()
        .run(&job, &toolgate_sandbox::NoTools)
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("No permissions to creating new namespace"),
        "{error}"
    );
    assert!(!work.path().join("ran").exists());
}

#[tokio::test]
async fn output_beyond_the_cap_is_counted_and_cut() {
    let (report, _work) = run("print('x' * 100000)\n").await;
    assert!(report.stdout.truncated);
    assert_eq!(report.stdout.total_bytes, 100_001);
    assert_eq!(report.stdout.text.len(), 16 * 1024);
}

#[tokio::test]
async fn the_hosts_environment_is_not_passed_in() {
    // SAFETY of the assertion: the test process has PATH and HOME; none of it may show inside.
    let (report, _work) = run("import os\nprint(sorted(os.environ))\n").await;
    assert_eq!(
        report.stdout.text.trim(),
        "['HOME', 'LANG', 'PATH', 'PWD', 'PYTHONDONTWRITEBYTECODE', 'PYTHONUNBUFFERED', 'TOOLGATE_BRIDGE_FD']",
        "{report:?}"
    );
}
