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
async fn a_script_without_the_import_line_still_has_t_and_its_traceback_is_its_own() {
    let (report, _work) = run("print(t.__name__, __name__)\nraise KeyError('body')\n").await;
    assert_eq!(report.exit_code, Some(1), "{report:?}");
    assert_eq!(report.stdout.text, "toolgate_tools __main__\n");
    let traceback = &report.stderr.text;
    assert!(
        traceback.contains("File \"/sandbox/code/main.py\", line 2, in <module>"),
        "{traceback}"
    );
    assert!(traceback.ends_with("KeyError: 'body'\n"), "{traceback}");
    assert!(!traceback.contains("_toolgate_start"), "{traceback}");
}

#[tokio::test]
async fn a_script_that_does_not_parse_is_reported_at_its_own_line() {
    let (report, _work) = run("x = 1\nprint(x, ', '.join(i) for i in [])\n").await;
    assert_eq!(report.exit_code, Some(1), "{report:?}");
    let traceback = &report.stderr.text;
    assert!(
        traceback.contains("File \"/sandbox/code/main.py\", line 2"),
        "{traceback}"
    );
    assert!(traceback.contains("SyntaxError"), "{traceback}");
    assert!(!traceback.contains("_toolgate_start"), "{traceback}");
}

/// What `script` prints as its one line of JSON when the tools module is generated from `view`
/// under `paging`: one line only, so nothing the view holds ran when the module was imported.
async fn printed_by_a_module_of(
    view: toolgate_core::spec::ModelView,
    paging: toolgate_sandbox::python::Paging,
    script: &str,
) -> Vec<String> {
    let work = tempfile::tempdir().unwrap();
    let mut job = common::job(script, work.path(), None);
    job.tools_module = toolgate_sandbox::python::tools_module(&[view], paging);
    let report = sandbox()
        .run(&job, &toolgate_sandbox::NoTools)
        .await
        .unwrap();
    assert_eq!(report.exit_code, Some(0), "{report:?}");
    assert_eq!(report.stdout.text.lines().count(), 1, "{report:?}");
    serde_json::from_str(report.stdout.text.trim()).unwrap()
}

#[tokio::test]
async fn a_hostile_enum_value_in_a_tool_schema_stays_one_value_of_its_literal() {
    // A schema from elsewhere (an imported MCP server's) whose enum values try to end the
    // literal, the signature and the line, and run code when the module is imported.
    let hostile = [
        "a\"] | None = None) -> dict:\n    pass\nprint(\"INJECTED\")\ndef x(k: Literal[\"",
        "b\\\" ; print('INJECTED') #",
        "caf\u{e9}\u{2028}\r",
    ];
    let view = toolgate_core::spec::ModelView {
        name: "pick".to_owned(),
        description: "Picks.".to_owned(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {"kind": {"type": "string", "enum": hostile}},
        }),
        output_schema: None,
    };
    let values = printed_by_a_module_of(
        view,
        toolgate_sandbox::python::Paging::ByPage,
        "import json, typing\nhint = typing.get_type_hints(t.pick)['kind']\nliteral = [a for a in typing.get_args(hint) if a is not type(None)][0]\nprint(json.dumps(list(typing.get_args(literal))))\n",
    )
    .await;
    assert_eq!(values, hostile);
}

#[tokio::test]
async fn a_hostile_name_of_a_paged_tool_stays_one_name_in_the_module() {
    // A paged tool from elsewhere whose name tries to end the set of paged tool names and run
    // code at import. It is no identifier, so it gets no function; its name is still data.
    let hostile = "x\"})\nprint(\"INJECTED\")\n_PAGED = frozenset({\"";
    let view = toolgate_core::spec::ModelView {
        name: hostile.to_owned(),
        description: "Pages.".to_owned(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {"offset": {"type": "integer"}},
        }),
        output_schema: None,
    };
    let names = printed_by_a_module_of(
        view,
        toolgate_sandbox::python::Paging::AlsoAllPages,
        "import json\nprint(json.dumps(sorted(t._PAGED) + sorted(t._WITH_ALL)))\n",
    )
    .await;
    // Paged, but with no `_all` function to name: the name is no identifier.
    assert_eq!(names, [hostile]);
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

// ---- What crosses from the sandbox to the host: returned files, bridge frames, the export.

use std::sync::{Arc, Mutex};

use common::{CodeHarness, returned_texts, stdout};
use serde_json::json;
use toolgate_sandbox::beneath::{Refused, Resolver, read_beneath_with};

const OUTSIDE_SECRET: &str = "outside-secret-e41d07";

/// A secret the host's user can read, outside every mount: a folder and the file in it.
fn plant_outside() -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret.txt");
    std::fs::write(&file, OUTSIDE_SECRET).unwrap();
    let dir_path = dir.path().to_string_lossy().into_owned();
    (dir, dir_path, file.to_string_lossy().into_owned())
}

/// A notebook export that records the host folder it filled, and writes what the notes export
/// writes (a `notes/` folder and `index.json`) with the permissions a default umask gives.
#[derive(Default)]
struct RecordingExport {
    folder: Mutex<Option<std::path::PathBuf>>,
}

impl toolgate_sandbox::DataExport for RecordingExport {
    fn export(&self, into: &Path) -> Result<String, String> {
        let notes = into.join("notes");
        std::fs::create_dir(&notes).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&notes, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        std::fs::write(notes.join("1.md"), "exported-note-body").map_err(|e| e.to_string())?;
        std::fs::write(
            into.join("index.json"),
            r#"[{"id": 1, "title": "exported"}]"#,
        )
        .map_err(|e| e.to_string())?;
        *self.folder.lock().unwrap() = Some(into.to_owned());
        Ok("1 note".to_owned())
    }
}

#[tokio::test]
async fn links_a_script_makes_never_make_the_host_return_a_file_outside_its_folder() {
    let (_outside, outside_dir, outside_file) = plant_outside();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
    let export = Arc::new(RecordingExport::default());
    let harness = CodeHarness::new(Some(export.clone()), Vec::new());
    // The attacker's script: links to /proc (the host's /proc/self is toolgate), to the home
    // folder, to a secret folder and file outside, and to the data folder's host path, which
    // the mount table inside shows.
    let script = format!(
        "\
import os
os.symlink('/proc', 'p')
os.symlink({home:?}, 'h')
os.symlink({outside_dir:?}, 's')
os.symlink({outside_file:?}, 'f')
data = [l.split()[3] for l in open('/proc/self/mountinfo') if l.split()[4] == '/sandbox/data']
os.symlink(data[0], 'd')
print('DATA', data[0])
"
    );
    let observation = harness
        .run(json!({
            "code": script,
            "return_files": ["p/self/environ", "h/.profile", "s/secret.txt", "f", "d/index.json"],
        }))
        .await;
    let data_host = export.folder.lock().unwrap().clone().unwrap();
    let out = stdout(&observation);
    assert!(
        out.contains(&format!("DATA {}", data_host.display())),
        "the script found the data folder's host path: {out}"
    );
    // Failure messages name what came back, never its text (it would be the host's).
    let came_back: Vec<String> = returned_texts(&observation)
        .into_iter()
        .map(|(source, _)| source)
        .collect();
    assert!(
        came_back.is_empty(),
        "returned through links: {came_back:?}"
    );
    let files = observation.content["files"].as_array().unwrap();
    assert_eq!(files.len(), 5, "{files:?}");
    for file in files {
        let note = file["note"].as_str().unwrap();
        assert!(
            note.starts_with("not returned") && note.contains("symbolic link"),
            "{file}"
        );
        assert_eq!(file["bytes"], 0, "{file}");
    }
    let everything = serde_json::to_string(&observation).unwrap();
    for leaked in [OUTSIDE_SECRET, "CARGO_PKG_NAME", "exported"] {
        assert!(!everything.contains(leaked), "{leaked} came back");
    }
}

/// One `code_execution` call of `code` through `harness`'s dispatcher: its outcome.
async fn call_code(harness: &CodeHarness, code: &str) -> toolgate_core::CallOutcome {
    harness
        .dispatcher
        .call(toolgate_core::CallRequest::new(
            toolgate_core::Principal::local("alice", &[]),
            common::RUN_ID,
            toolgate_sandbox::tool::TOOL_NAME,
            json!({"code": code}),
        ))
        .await
}

#[tokio::test]
async fn a_failing_script_is_a_refused_call_with_its_traceback_only_when_so_configured() {
    let failing = "print('before')\nhits = {'content': {}}\nprint(hits['body'])\n";
    let refusing = CodeHarness::with_failed_scripts(
        None,
        Vec::new(),
        toolgate_sandbox::FailedScripts::Refused,
    );
    let outcome = call_code(&refusing, failing).await;
    let error = outcome.error().expect("a failed script is refused");
    assert_eq!(error.code, toolgate_core::ErrorCode::InvalidArgument);
    assert_eq!(error.field.as_deref(), Some("code"));
    let texts: Vec<(&str, &str)> = error
        .untrusted
        .iter()
        .map(|u| (u.source.as_str(), u.text.as_str()))
        .collect();
    assert_eq!(texts[0], ("code_execution stdout", "before\n"));
    assert_eq!(texts[1].0, "code_execution stderr");
    assert!(
        texts[1].1.contains("main.py\", line 3") && texts[1].1.ends_with("KeyError: 'body'\n"),
        "{}",
        texts[1].1
    );
    // What the model reads: the traceback marked as data, the fix in our own words.
    let shown = outcome.model_text();
    assert!(shown.contains("untrusted_note") && shown.contains("call code_execution again"));
    // A script that succeeds is a result either way, and the default reports a failure as one.
    let ok = call_code(&refusing, "print('fine')\n").await;
    assert!(ok.observation().is_some(), "{}", ok.model_text());
    let reporting = CodeHarness::new(None, Vec::new());
    let reported = call_code(&reporting, failing).await;
    let observation = reported.observation().expect("reported as a result");
    assert_eq!(observation.content["exit_code"], 1);
}

#[tokio::test]
async fn a_script_with_json_escaped_quotes_runs_and_the_model_is_told_so() {
    let harness = CodeHarness::new(None, Vec::new());
    // As the embedded model retried a script: its quotes copied JSON-escaped, one line of it
    // outside any string, one escape inside a real string that is the script's own.
    let observation = harness
        .run(json!({"code": "hits = [{'id': 2}, {'id': 5}]\nprint(\\\", \\\".join(str(h[\\\"id\\\"]) for h in hits), \"q\\\"\")\n"}))
        .await;
    assert_eq!(stdout(&observation), "2, 5 q\"\n", "{observation:?}");
    assert_eq!(
        observation.content["note"],
        "4 quotes were written as \\\" outside any string and were read as plain quotes. Write plain quotes next time."
    );
}

#[tokio::test]
async fn a_nested_file_the_script_wrote_still_returns() {
    let harness = CodeHarness::new(None, Vec::new());
    let observation = harness
        .run(json!({
            "code": "import os\nos.makedirs('out')\nopen('out/a.txt', 'w').write('legit-output')\n",
            "return_files": ["out/a.txt", "missing.txt", "out"],
        }))
        .await;
    assert_eq!(
        returned_texts(&observation),
        vec![(
            "code_execution file out/a.txt".to_owned(),
            "legit-output".to_owned()
        )],
        "{observation:?}"
    );
    let files = observation.content["files"].as_array().unwrap();
    assert_eq!(files[0]["bytes"], 12);
    assert!(files[0]["note"].is_null(), "{files:?}");
    assert!(
        files[1]["note"]
            .as_str()
            .unwrap()
            .contains("did not write this file")
    );
    assert!(
        files[2]["note"]
            .as_str()
            .unwrap()
            .contains("not a regular file")
    );
}

/// Bytes this process has read through system calls so far (`rchar`).
fn bytes_read_by_this_process() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_huge_returned_file_is_read_only_up_to_its_cap() {
    let harness = CodeHarness::new(None, Vec::new());
    let big = harness.work().join("big.bin");
    // Sparse: a GiB on paper, nothing on disk.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let before = bytes_read_by_this_process();
    let observation = harness
        .run(json!({"code": "print('ok')\n", "return_files": ["big.bin"]}))
        .await;
    let read = bytes_read_by_this_process() - before;
    let file = &observation.content["files"][0];
    assert_eq!(file["bytes"], 1u64 << 30, "{file}");
    assert!(
        file["note"]
            .as_str()
            .unwrap()
            .starts_with("cut to the first 8192"),
        "{file}"
    );
    assert_eq!(returned_texts(&observation)[0].1.len(), 8192);
    // The whole run (sandbox start, output, the file) read far less than the file.
    assert!(read < 64 << 20, "the host read {read} bytes");
}

#[test]
fn the_opener_reads_at_most_the_cap_plus_one_byte() {
    let work = tempfile::tempdir().unwrap();
    std::fs::File::create(work.path().join("big.bin"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let thread_read = || -> u64 {
        std::fs::read_to_string("/proc/thread-self/io")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("rchar: "))
            .unwrap()
            .parse()
            .unwrap()
    };
    for resolver in [Resolver::Openat2, Resolver::PerComponent] {
        let before = thread_read();
        let read = read_beneath_with(work.path(), "big.bin", 8192, resolver).unwrap();
        let after = thread_read();
        // The /proc read itself counts a little; the file adds exactly cap + 1.
        assert!(after - before < 8192 + 1 + 4096, "{}", after - before);
        assert!(read.cut && read.bytes.len() == 8192 && read.size == 1 << 30);
    }
}

#[tokio::test]
async fn a_folder_swapped_for_a_link_while_the_host_reads_never_yields_the_secret() {
    let (_outside, outside_dir, _) = plant_outside();
    std::fs::write(Path::new(&outside_dir).join("f.txt"), OUTSIDE_SECRET).unwrap();
    let work = tempfile::tempdir().unwrap();
    // Inside: `d` is swapped atomically between a real folder and a link to the secret folder.
    let script = format!(
        "\
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.mkdir('d')
open('d/f.txt', 'w').write('legit')
os.symlink({outside_dir:?}, 'l')
open('started', 'w').close()
swaps = 0
end = time.time() + 3
while time.time() < end:
    if libc.renameat2(-100, b'd', -100, b'l', 2) != 0:
        print('RENAME FAILED', ctypes.get_errno())
        break
    swaps += 1
print('SWAPS', swaps)
"
    );
    let sandbox = common::sandbox();
    let work_path = work.path().to_owned();
    let run = tokio::spawn({
        let work_path = work_path.clone();
        async move { common::run_in(&sandbox, &script, &work_path, None).await }
    });
    let reads = tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        while !work_path.join("started").exists() {
            assert!(started.elapsed() < Duration::from_secs(10), "never started");
            std::thread::sleep(Duration::from_millis(5));
        }
        let (mut legit, mut refused, mut leaked) = (0, 0, 0);
        let reading = std::time::Instant::now();
        while reading.elapsed() < Duration::from_millis(2500) {
            for resolver in [Resolver::Openat2, Resolver::PerComponent] {
                match read_beneath_with(&work_path, "d/f.txt", 64, resolver) {
                    Ok(r) if r.bytes == b"legit" => legit += 1,
                    Ok(_) => leaked += 1,
                    Err(Refused::Link | Refused::Missing | Refused::NotAFolder) => refused += 1,
                    Err(other) => panic!("{other}"),
                }
            }
        }
        (legit, refused, leaked)
    })
    .await
    .unwrap();
    let report = run.await.unwrap();
    assert!(report.stdout.text.contains("SWAPS"), "{report:?}");
    let (legit, refused, leaked) = reads;
    assert_eq!(leaked, 0, "the secret came back {leaked} times");
    // Both states were seen, so the reads did race the swaps.
    assert!(legit > 0 && refused > 0, "legit {legit}, refused {refused}");
}

fn bridge_sandbox() -> Sandbox {
    let mut config = config();
    config.limits.wall = Duration::from_secs(15);
    Sandbox::new(config).unwrap()
}

#[tokio::test]
async fn a_hundred_mb_bridge_frame_is_refused_at_the_cap_and_the_script_told_why() {
    let work = tempfile::tempdir().unwrap();
    let script = "\
import os, socket
s = socket.socket(fileno=int(os.environ['TOOLGATE_BRIDGE_FD']))
chunk = b'a' * (1 << 20)
sent = 0
try:
    s.sendall(b'{\"tool\": \"x\", \"arguments\": {\"blob\": \"')
    while sent < (100 << 20):
        s.sendall(chunk)
        sent += len(chunk)
except OSError as e:
    print('WRITE', type(e).__name__)
print('SENT_MB', sent >> 20)
print('REPLY', s.makefile('rb').readline().decode().strip())
";
    let report = run_in(&bridge_sandbox(), script, work.path(), None).await;
    let out = &report.stdout.text;
    assert_eq!(report.stopped, None, "{report:?}");
    assert!(out.contains("WRITE BrokenPipeError"), "{report:?}");
    assert!(
        out.contains("longer than 1048576 bytes") && out.contains("\"ok\":false"),
        "{report:?}"
    );
    let sent: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("SENT_MB "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(sent < 100, "{sent} MB went through");
}

#[tokio::test]
async fn a_tool_call_over_the_frame_cap_raises_tool_error_and_the_bridge_stays_closed() {
    let work = tempfile::tempdir().unwrap();
    let script = "\
import toolgate_tools as t
for args in [{'blob': 'a' * (3 << 20)}, {}]:
    try:
        t.call('anything', **args)
    except t.ToolError as e:
        print('REFUSED', e.code, e.message)
";
    let report = run_in(&bridge_sandbox(), script, work.path(), None).await;
    assert_eq!(report.stopped, None, "{report:?}");
    let lines: Vec<&str> = report.stdout.text.lines().collect();
    assert_eq!(lines.len(), 2, "{report:?}");
    assert!(
        lines[0].starts_with("REFUSED invalid_argument") && lines[0].contains("longer than"),
        "{report:?}"
    );
    assert_eq!(
        lines[1], "REFUSED internal the tool bridge is closed",
        "{report:?}"
    );
}

/// A tool a script calls while it runs: it records the export folder's modes and owner.
fn probe_tool(
    export: Arc<RecordingExport>,
    seen: Arc<Mutex<Vec<(String, u32, u32)>>>,
) -> toolgate_core::Tool {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct NoArgs {}
    toolgate_core::ToolBuilder::<NoArgs>::new("probe", 1)
        .describe("Looks at the host.", "a test asks.", None, "nothing.")
        .example("probe", json!({}))
        .policy(
            toolgate_core::Risk::Low,
            toolgate_core::Effect::Read,
            "A test's look.",
        )
        .read(move |_ctx, _args: NoArgs| {
            let export = Arc::clone(&export);
            let seen = Arc::clone(&seen);
            async move {
                use std::os::unix::fs::MetadataExt as _;
                let root = export.folder.lock().unwrap().clone().unwrap();
                for rel in ["", "notes", "notes/1.md", "index.json"] {
                    let meta = std::fs::symlink_metadata(root.join(rel)).unwrap();
                    seen.lock()
                        .unwrap()
                        .push((rel.to_owned(), meta.mode() & 0o7777, meta.uid()));
                }
                Ok(toolgate_core::ToolOutput::new(json!({"looked": true})))
            }
        })
        .unwrap()
}

#[tokio::test]
async fn the_notebook_export_is_private_to_the_run_while_the_script_reads_it() {
    let export = Arc::new(RecordingExport::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let harness = CodeHarness::new(
        Some(export.clone()),
        vec![probe_tool(Arc::clone(&export), Arc::clone(&seen))],
    );
    let observation = harness
        .run(json!({"code": "import toolgate_tools as t\nprint(open('/sandbox/data/notes/1.md').read())\nprint(open('/sandbox/data/index.json').read())\nprint(t.probe()['content'])\n"}))
        .await;
    let out = stdout(&observation);
    assert!(
        out.contains("exported-note-body") && out.contains("\"title\": \"exported\""),
        "the script still reads its data: {observation:?}"
    );
    // SAFETY: geteuid has no failure mode.
    let owner = if unsafe { libc::geteuid() } == 0 {
        65534
    } else {
        unsafe { libc::geteuid() }
    };
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            (String::new(), 0o700, owner),
            ("notes".to_owned(), 0o700, owner),
            ("notes/1.md".to_owned(), 0o600, owner),
            ("index.json".to_owned(), 0o600, owner),
        ]
    );
}

#[tokio::test]
async fn an_x32_system_call_is_refused_by_the_filter_itself() {
    // Seccomp runs before the kernel's dispatch: EPERM is the filter's answer. A kernel
    // without x32 alone would answer ENOSYS; one with x32 would run getpid.
    let (report, _work) = run("\
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.syscall(0x40000000 | 39)
print('x32_getpid', rc, ctypes.get_errno())
print('native_getpid', libc.syscall(39) > 0)
")
    .await;
    assert_eq!(
        report.stdout.text,
        format!("x32_getpid -1 {}\nnative_getpid True\n", libc::EPERM),
        "{report:?}"
    );
}

// The run as a whole: memory and processes together, /tmp, the work folder. Every probe is
// itself bounded (at most ~2.8 GB of memory and 400 MB of disk even when the bound fails).

fn mem_available() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

fn disk_free(path: &Path) -> u64 {
    let fs = rustix::fs::statvfs(path).unwrap();
    fs.f_bavail * fs.f_frsize
}

fn bounded_sandbox(edit: impl FnOnce(&mut toolgate_sandbox::Limits)) -> Sandbox {
    let mut config = config();
    edit(&mut config.limits);
    Sandbox::new(config).unwrap()
}

/// Held by every test that reads the host's MemAvailable, so that two such probes never overlap
/// and one's memory is never counted against the other's bound.
static HOST_MEMORY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Samples the host's MemAvailable every 20 ms until dropped; the lowest value seen.
struct MemWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl MemWatch {
    fn start() -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut low = mem_available();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                low = low.min(mem_available());
                std::thread::sleep(Duration::from_millis(20));
            }
            low
        });
        MemWatch {
            stop,
            thread: Some(thread),
        }
    }

    fn lowest(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

#[tokio::test]
async fn forked_children_together_cannot_pass_the_runs_memory() {
    const GIB: u64 = 1 << 30;
    let sandbox = bounded_sandbox(|limits| {
        limits.memory_bytes = GIB;
        limits.address_space_bytes = GIB;
    });
    let work = tempfile::tempdir().unwrap();
    // Four children each fill 700 MB (bytes written, so every page is touched), hold it for a
    // second so that they overlap, and say whether they got it.
    let script = "import os, sys, time\nkids = []\nfor i in range(4):\n    pid = os.fork()\n    if pid == 0:\n        try:\n            b = b'\\x01' * (700 << 20)\n            print('CHILD', i, 'GOT', len(b), flush=True)\n            time.sleep(1.5)\n            os._exit(0)\n        except MemoryError:\n            print('CHILD', i, 'MemoryError', flush=True)\n            os._exit(1)\n    kids.append(pid)\nfor pid in kids:\n    _, status = os.waitpid(pid, 0)\n    print('STATUS', status, flush=True)\n";
    let _alone = HOST_MEMORY.lock().await;
    let before = mem_available();
    let watch = MemWatch::start();
    let report = run_in(&sandbox, script, work.path(), None).await;
    let lowest = watch.lowest();
    let got = report.stdout.text.matches(" GOT ").count();
    assert!(
        got < 4,
        "all four children got 700 MB under a 1 GiB run: {report:?}"
    );
    let bounds = &report.bounds;
    eprintln!(
        "bounded by {:?}: {got} of 4 children got 700 MB; peak {:?}; MemAvailable {} MB before, lowest {} MB during",
        bounds.layer,
        bounds.usage.memory_peak_bytes,
        before >> 20,
        lowest >> 20
    );
    match bounds.layer {
        toolgate_sandbox::BoundLayer::Rlimits => {
            assert!(
                bounds.processes * bounds.address_space_bytes <= GIB,
                "{bounds:?}"
            );
        }
        toolgate_sandbox::BoundLayer::CgroupV1 | toolgate_sandbox::BoundLayer::CgroupV2 => {
            assert!(bounds.usage.memory_peak_bytes.unwrap() <= GIB, "{bounds:?}");
            assert!(
                report
                    .limits_hit
                    .contains(&toolgate_sandbox::LimitHit::Memory),
                "{report:?}"
            );
        }
    }
    // The host lost at most the run's budget, with 1 GiB of slack for whatever else runs here
    // (page cache, other test binaries' leftovers: CI once saw 1.6 GB go with a 1 GiB peak).
    // Unbounded, the four children take 2.8 GB, which this still catches.
    assert!(
        lowest + 2 * GIB >= before,
        "the host's MemAvailable fell from {before} to {lowest}"
    );
}

#[tokio::test]
async fn filling_tmp_stops_at_its_size_with_no_space_left() {
    let sandbox = bounded_sandbox(|limits| limits.tmp_bytes = 32 << 20);
    let work = tempfile::tempdir().unwrap();
    // 16 MB files (under the per-file limit) until a write fails or 400 MB are written.
    let script = "import errno\nchunk = b'x' * (1 << 20)\nwritten = 0\ntry:\n    for n in range(25):\n        with open(f'/tmp/f{n}', 'wb') as f:\n            for _ in range(16):\n                f.write(chunk)\n                f.flush()\n                written += len(chunk)\n    print('WROTE ALL', written)\nexcept OSError as e:\n    print('FAILED', errno.errorcode[e.errno], written)\n";
    let _alone = HOST_MEMORY.lock().await;
    let before = mem_available();
    let watch = MemWatch::start();
    let report = run_in(&sandbox, script, work.path(), None).await;
    let lowest = watch.lowest();
    let words: Vec<&str> = report.stdout.text.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"FAILED"), "{report:?}");
    assert_eq!(words.get(1), Some(&"ENOSPC"), "{report:?}");
    let written: u64 = words[2].parse().unwrap();
    assert!(written <= 32 << 20, "{written} bytes in a 32 MB /tmp");
    assert!(
        lowest + (512 << 20) >= before,
        "the host's MemAvailable fell from {before} to {lowest}"
    );
}

/// Writes 8 MB files into the work folder until a write fails or 400 MB are written.
const FILL_WORK: &str = "import errno\nchunk = b'x' * (1 << 20)\nwritten = 0\ntry:\n    for n in range(50):\n        with open(f'fill{n}', 'wb') as f:\n            for _ in range(8):\n                f.write(chunk)\n                f.flush()\n                written += len(chunk)\n    print('WROTE ALL', written)\nexcept OSError as e:\n    print('FAILED', errno.errorcode[e.errno], written)\n";

#[tokio::test]
async fn filling_the_work_folder_gets_no_space_left_and_the_host_disk_is_untouched() {
    if !common::is_root() {
        eprintln!(
            "skipped: only root mounts a bounded folder per conversation (see the checked test)"
        );
        return;
    }
    let sandbox = bounded_sandbox(|limits| limits.work_bytes = 32 << 20);
    let spaces = toolgate_sandbox::Workspaces::with_limit(32 << 20).unwrap();
    let work = spaces.for_run("conversation").unwrap();
    let disk_before = disk_free(spaces.root());
    let report = run_in(&sandbox, FILL_WORK, &work, None).await;
    let disk_after = disk_free(spaces.root());
    let words: Vec<&str> = report.stdout.text.split_whitespace().collect();
    assert_eq!(
        words.get(..2),
        Some(&["FAILED", "ENOSPC"][..]),
        "{report:?}"
    );
    assert!(words[2].parse::<u64>().unwrap() <= 32 << 20, "{report:?}");
    assert_eq!(report.bounds.work, toolgate_sandbox::WorkBound::Tmpfs);
    assert!(
        report
            .limits_hit
            .contains(&toolgate_sandbox::LimitHit::WorkFolder),
        "{report:?}"
    );
    // The probe writes 400 MB when unbounded; the host's disk lost none of it.
    assert!(
        disk_after + (200 << 20) >= disk_before,
        "the host disk fell from {disk_before} to {disk_after}"
    );
    // What was written stays for the conversation's next script, within the bound.
    let fs = rustix::fs::statvfs(&work).unwrap();
    assert!((fs.f_blocks - fs.f_bfree) * fs.f_frsize <= 32 << 20);
    drop(spaces);
    assert!(!work.exists());
}

#[tokio::test]
async fn many_small_files_run_out_of_inodes_inside_not_on_the_host() {
    if !common::is_root() {
        eprintln!("skipped: only root mounts a bounded folder per conversation");
        return;
    }
    let sandbox = bounded_sandbox(|limits| limits.work_bytes = 32 << 20);
    let spaces = toolgate_sandbox::Workspaces::with_limit(32 << 20).unwrap();
    let work = spaces.for_run("conversation").unwrap();
    let inodes_before = rustix::fs::statvfs(spaces.root()).unwrap().f_ffree;
    let script = "import errno\nn = 0\ntry:\n    while n < 50000:\n        open(f'e{n}', 'w').close()\n        n += 1\n    print('MADE ALL', n)\nexcept OSError as e:\n    print('FAILED', errno.errorcode[e.errno], n)\n";
    let report = run_in(&sandbox, script, &work, None).await;
    let inodes_after = rustix::fs::statvfs(spaces.root()).unwrap().f_ffree;
    let words: Vec<&str> = report.stdout.text.split_whitespace().collect();
    assert_eq!(
        words.get(..2),
        Some(&["FAILED", "ENOSPC"][..]),
        "{report:?}"
    );
    let made: u64 = words[2].parse().unwrap();
    assert!(
        made <= toolgate_sandbox::workspace::inodes_for(32 << 20),
        "{made}"
    );
    assert!(
        inodes_after + 10_000 >= inodes_before,
        "the host's free inodes fell from {inodes_before} to {inodes_after}"
    );
}

#[tokio::test]
async fn a_checked_work_folder_over_its_bound_runs_nothing_and_no_file_outgrows_the_room_left() {
    let sandbox = bounded_sandbox(|limits| limits.work_bytes = 4 << 20);
    let work = tempfile::tempdir().unwrap();
    // A plain host folder (no mount): the runner checks it instead.
    let report = run_in(&sandbox, FILL_WORK, work.path(), None).await;
    assert_eq!(report.bounds.work, toolgate_sandbox::WorkBound::Checked);
    let words: Vec<&str> = report.stdout.text.split_whitespace().collect();
    assert_eq!(words.get(..2), Some(&["FAILED", "EFBIG"][..]), "{report:?}");
    let (used, _) = toolgate_sandbox::workspace::usage(work.path(), 1000).unwrap();
    assert!(
        used <= (4 << 20) + (64 << 10),
        "{used} bytes in a 4 MB folder"
    );
    // Over the bound now (the owner could have put it there): the next run does not start.
    std::fs::write(work.path().join("big"), vec![0u8; 5 << 20]).unwrap();
    let report = run_in(&sandbox, "print('RAN')", work.path(), None).await;
    assert_eq!(report.stopped, Some(Stopped::WorkFolderFull), "{report:?}");
    assert_eq!(report.exit_code, None);
    assert!(!report.stdout.text.contains("RAN"));
    assert!(report.stderr.text.contains("delete files"), "{report:?}");
}

#[tokio::test]
async fn the_run_says_which_layer_bounds_it_and_never_more_than_the_budget() {
    let (report, _work) = run("print('ok')").await;
    let bounds = &report.bounds;
    eprintln!("this machine bounds a run with {:?}", bounds.layer);
    assert_eq!(report.stdout.text, "ok\n");
    assert!(report.limits_hit.is_empty(), "{report:?}");
    match bounds.layer {
        toolgate_sandbox::BoundLayer::Rlimits => {
            assert!(bounds.processes * bounds.address_space_bytes <= bounds.memory_bytes);
        }
        toolgate_sandbox::BoundLayer::CgroupV1 | toolgate_sandbox::BoundLayer::CgroupV2 => {
            assert!(bounds.usage.memory_peak_bytes.unwrap() > 0);
            assert!(bounds.address_space_bytes <= bounds.memory_bytes);
        }
    }
}

#[tokio::test]
async fn a_checked_work_folder_is_measured_during_the_run_and_the_run_stopped_when_full() {
    let sandbox = bounded_sandbox(|limits| limits.work_bytes = 8 << 20);
    let work = tempfile::tempdir().unwrap();
    // 1 MB files, each within the room left, up to 1 GB: only the total passes the bound.
    let script = "chunk = b'x' * (1 << 20)\nfor n in range(1000):\n    with open(f'small{n}', 'wb') as f:\n        f.write(chunk)\nprint('WROTE ALL')\n";
    let disk_before = disk_free(work.path());
    let report = run_in(&sandbox, script, work.path(), None).await;
    let disk_after = disk_free(work.path());
    assert_eq!(report.bounds.work, toolgate_sandbox::WorkBound::Checked);
    assert_eq!(report.stopped, Some(Stopped::WorkFolderFull), "{report:?}");
    assert!(!report.stdout.text.contains("WROTE ALL"));
    let (used, _) = toolgate_sandbox::workspace::usage(work.path(), 100_000).unwrap();
    eprintln!(
        "checked folder of 8 MB held {} MB when the run was stopped",
        used >> 20
    );
    assert!(used <= 256 << 20, "{used} bytes written past an 8 MB bound");
    assert!(
        disk_after + (512 << 20) >= disk_before,
        "the host disk fell from {disk_before} to {disk_after}"
    );
}

#[tokio::test]
async fn many_small_files_in_tmp_are_charged_to_the_runs_memory() {
    let sandbox = bounded_sandbox(|limits| {
        limits.memory_bytes = 96 << 20;
        limits.address_space_bytes = 96 << 20;
    });
    let work = tempfile::tempdir().unwrap();
    // Empty files take no tmpfs blocks, only inodes and dentries (kernel memory).
    let script = "import errno, sys\nn = 0\ntry:\n    while n < 400000:\n        open(f'/tmp/e{n}', 'w').close()\n        n += 1\n        if n % 20000 == 0:\n            print('MADE', n, flush=True)\n    print('MADE ALL', n)\nexcept OSError as e:\n    print('FAILED', errno.errorcode[e.errno], n)\n";
    let report = run_in(&sandbox, script, work.path(), None).await;
    if report.bounds.layer == toolgate_sandbox::BoundLayer::Rlimits {
        // bubblewrap sizes /tmp but cannot cap its inodes: without a cgroup, nothing charges
        // them to the run (the wall clock and CPU time are what bound them then).
        eprintln!("not bounded on the rlimits layer: {}", report.stdout.text);
        return;
    }
    assert!(!report.stdout.text.contains("MADE ALL"), "{report:?}");
    assert!(
        report
            .limits_hit
            .contains(&toolgate_sandbox::LimitHit::Memory),
        "{report:?}"
    );
    assert!(report.bounds.usage.memory_peak_bytes.unwrap() <= 96 << 20);
}
