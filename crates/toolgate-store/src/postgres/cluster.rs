//! A PostgreSQL cluster of its own in a temporary folder, for tests and benchmarks: `initdb`
//! and `pg_ctl` from the machine's PostgreSQL (Debian's `postgresql` package, which
//! `scripts/setup.sh` installs), on a free port of 127.0.0.1, with a password, stopped and
//! removed when dropped.
//!
//! Guarantees: nothing depends on a server already running or on the machine's own cluster;
//! the server listens on 127.0.0.1 only (no Unix socket), requires a password
//! (`scram-sha-256`) and is stopped (`pg_ctl stop -m immediate`) when the [`TempCluster`] is
//! dropped, even by a failing test; the one [`shared`] cluster of a test process is stopped by a
//! watchdog once the process has exited. PostgreSQL refuses to run as root, so under root the server
//! runs as the unprivileged `postgres` user the package creates, in a folder given to it.
//! Refuses: a machine without PostgreSQL's binaries ([`ClusterError::NoPostgres`], naming the
//! setup script), and says which step failed with the tool's own output otherwise.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One cluster for every test of this process, started on first use with [`TempCluster::start`].
/// Statics are never dropped, so a watchdog process stops the server and removes its folder
/// once this process has exited, however it exits. Each test takes a database of its own
/// ([`TempCluster::fresh_database`]).
pub fn shared() -> Result<&'static TempCluster, ClusterError> {
    static SHARED: OnceLock<Result<TempCluster, String>> = OnceLock::new();
    let started = SHARED.get_or_init(|| {
        let cluster = TempCluster::start().map_err(|e| e.to_string())?;
        cluster.watch_this_process().map_err(|e| e.to_string())?;
        Ok(cluster)
    });
    started.as_ref().map_err(|detail| ClusterError::Step {
        step: "starting the shared cluster",
        status: "earlier".into(),
        output: detail.clone(),
    })
}

/// The role the cluster is created with, and its password.
pub const USER: &str = "toolgate";
const PASSWORD: &str = "toolgate-test-password";

/// Why a cluster could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "PostgreSQL's server programs (initdb, pg_ctl) were not found under /usr/lib/postgresql/*/bin, in $TOOLGATE_PG_BINDIR or on PATH: run scripts/setup.sh (it installs Debian's postgresql package)"
    )]
    NoPostgres,
    #[error("could not prepare the cluster's folder {path}: {source}")]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not run {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{step} failed ({status}): {output}")]
    Step {
        step: &'static str,
        status: String,
        output: String,
    },
}

/// A running PostgreSQL server owned by this value.
#[derive(Debug)]
pub struct TempCluster {
    bindir: PathBuf,
    data: PathBuf,
    port: u16,
    run_as: Option<&'static str>,
    // Removed after the server stops (declared last: dropped after `Drop::drop` ran).
    _folder: tempfile::TempDir,
}

impl TempCluster {
    /// Creates and starts a cluster with one database, `toolgate`, owned by [`USER`].
    pub fn start() -> Result<TempCluster, ClusterError> {
        let bindir = find_bindir().ok_or(ClusterError::NoPostgres)?;
        let folder = tempfile::Builder::new()
            .prefix("toolgate-pg-")
            .tempdir()
            .map_err(|source| ClusterError::Folder {
                path: std::env::temp_dir(),
                source,
            })?;
        let run_as = running_as_root().then_some("postgres");
        if run_as.is_some() {
            give_to_postgres(folder.path())?;
        }
        let data = folder.path().join("data");
        let pwfile = folder.path().join("password");
        fs::write(&pwfile, PASSWORD).map_err(|source| ClusterError::Folder {
            path: pwfile.clone(),
            source,
        })?;
        if run_as.is_some() {
            give_to_postgres(&pwfile)?;
        }
        let mut cluster = TempCluster {
            bindir,
            data,
            port: 0,
            run_as,
            _folder: folder,
        };
        cluster.run(
            "initdb",
            "initdb",
            &[
                "-D".as_ref(),
                cluster.data.as_os_str(),
                "-U".as_ref(),
                USER.as_ref(),
                "--pwfile".as_ref(),
                pwfile.as_os_str(),
                "--auth=scram-sha-256".as_ref(),
                "--encoding=UTF8".as_ref(),
                "--locale=C".as_ref(),
                "--no-sync".as_ref(),
            ],
        )?;
        // A free port now; another process could take it before the server binds, in which
        // case pg_ctl fails and says so.
        cluster.port = free_port().map_err(|source| ClusterError::Folder {
            path: cluster.data.clone(),
            source,
        })?;
        cluster.start_server()?;
        cluster.create_database("toolgate")?;
        Ok(cluster)
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `toolgate` with the right password.
    pub fn url(&self) -> String {
        self.url_of("toolgate")
    }

    /// The URL of database `name` with the right password.
    pub fn url_of(&self, name: &str) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{name}",
            self.port
        )
    }

    /// The URL of database `toolgate` with a wrong password (for tests of refusals).
    pub fn url_with_wrong_password(&self) -> String {
        format!(
            "postgres://{USER}:not-the-password@127.0.0.1:{}/toolgate",
            self.port
        )
    }

    /// Creates another empty database, so tests can share one server without sharing data.
    pub fn create_database(&self, name: &str) -> Result<(), ClusterError> {
        let port = self.port.to_string();
        let createdb = self.bindir.join("createdb");
        let mut command = self.command(&createdb);
        command
            .args(["-h", "127.0.0.1", "-p", &port, "-U", USER, name])
            .env("PGPASSWORD", PASSWORD);
        checked("createdb", command)
    }

    /// A new empty database with a name of its own, and its URL.
    pub fn fresh_database(&self) -> Result<String, ClusterError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "t{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.create_database(&name)?;
        Ok(self.url_of(&name))
    }

    /// Starts a detached watchdog that stops the server and removes its folder once this
    /// process is gone.
    fn watch_this_process(&self) -> Result<(), ClusterError> {
        let pg_ctl = self.bindir.join("pg_ctl");
        let stop = match self.run_as {
            Some(user) => format!("runuser -u {user} -- '{}'", pg_ctl.display()),
            None => format!("'{}'", pg_ctl.display()),
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} stop -m immediate -D '{data}' >/dev/null 2>&1; rm -rf '{folder}'",
            pid = std::process::id(),
            data = self.data.display(),
            folder = self._folder.path().display(),
        );
        Command::new("setsid")
            .args(["sh", "-c", &script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map(|_| ())
            .map_err(|source| ClusterError::Spawn {
                program: "setsid sh (the cluster's watchdog)".into(),
                source,
            })
    }

    /// Stops the server at once, as a crash would (for tests of a database that goes away);
    /// [`TempCluster::restart`] brings it back on the same port with the same data.
    pub fn stop(&self) -> Result<(), ClusterError> {
        self.pg_ctl_stop()
    }

    /// Starts a stopped server again on the same port.
    pub fn restart(&self) -> Result<(), ClusterError> {
        self.start_server()
    }

    fn start_server(&self) -> Result<(), ClusterError> {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories='' -c fsync=off -c max_connections=200",
            self.port
        );
        let log = self.data.join("server.log");
        self.run(
            "pg_ctl start",
            "pg_ctl",
            &[
                "start".as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "-D".as_ref(),
                self.data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
            ],
        )
    }

    fn pg_ctl_stop(&self) -> Result<(), ClusterError> {
        self.run(
            "pg_ctl stop",
            "pg_ctl",
            &[
                "stop".as_ref(),
                "-w".as_ref(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-D".as_ref(),
                self.data.as_os_str(),
            ],
        )
    }

    fn command(&self, program: &Path) -> Command {
        match self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    fn run(
        &self,
        step: &'static str,
        program: &str,
        args: &[&std::ffi::OsStr],
    ) -> Result<(), ClusterError> {
        let mut command = self.command(&self.bindir.join(program));
        command.args(args);
        checked(step, command)
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        if self.port != 0 {
            // Nothing to report to from a drop; the folder goes either way.
            let _ = self.pg_ctl_stop();
        }
    }
}

fn checked(step: &'static str, mut command: Command) -> Result<(), ClusterError> {
    let program = format!("{:?}", command.get_program());
    let output: Output = command
        .output()
        .map_err(|source| ClusterError::Spawn { program, source })?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stdout));
    Err(ClusterError::Step {
        step,
        status: output.status.to_string(),
        output: text.trim().to_owned(),
    })
}

/// PostgreSQL's server programs: `$TOOLGATE_PG_BINDIR`, else the newest
/// `/usr/lib/postgresql/N/bin` (Debian keeps them off PATH), else PATH.
fn find_bindir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TOOLGATE_PG_BINDIR") {
        let dir = PathBuf::from(dir);
        return dir.join("initdb").exists().then_some(dir);
    }
    let debian = fs::read_dir("/usr/lib/postgresql")
        .ok()
        .and_then(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let version: u32 = e.file_name().to_str()?.parse().ok()?;
                    let bin = e.path().join("bin");
                    bin.join("initdb").exists().then_some((version, bin))
                })
                .max_by_key(|(version, _)| *version)
                .map(|(_, bin)| bin)
        });
    debian.or_else(|| {
        std::env::var_os("PATH")
            .and_then(|path| std::env::split_paths(&path).find(|dir| dir.join("initdb").exists()))
    })
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Hands `path` to the `postgres` user (the server must own its data and read its password).
fn give_to_postgres(path: &Path) -> Result<(), ClusterError> {
    let mut command = Command::new("chown");
    command.arg("postgres:").arg(path);
    checked("chown to the postgres user", command)
}

fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    listener.local_addr().map(|a| a.port())
}
