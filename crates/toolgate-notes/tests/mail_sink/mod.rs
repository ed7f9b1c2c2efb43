//! A real SMTP server on 127.0.0.1 for the email tests: Python's aiosmtpd (installed by
//! `scripts/setup.sh`), with a small handler that appends each message it accepts, parsed by
//! Python's `email` package, as one JSON line to a file. The server binds port 0 and writes the
//! port it got to a file, so there is no race for a free port.
//!
//! Guarantees: `MailSink::start` fails the test (never skips it) when aiosmtpd is not importable,
//! saying to run scripts/setup.sh; it returns only once the port accepts connections (bounded
//! waits); the server process is killed when the sink is dropped.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// The aiosmtpd version scripts/setup.sh installs.
pub const AIOSMTPD_VERSION: &str = "1.4.6";

// One script for every SMTP server the project runs (the injection suite starts the same one).
const SERVER: &str = include_str!("../../../toolgate-check/src/injection/smtp_sink.py");

/// One message the server accepted, as Python's `email` package parsed it.
#[derive(Debug, Clone, Deserialize)]
pub struct ReceivedMail {
    pub mail_from: String,
    pub rcpt_tos: Vec<String>,
    /// The `To` header, decoded.
    pub to: String,
    /// The `Subject` header, decoded.
    pub subject: String,
    pub message_id: String,
    /// The text body, transfer encoding undone.
    pub body: String,
    /// The whole message as received (headers and encoded body).
    pub raw: String,
}

pub struct MailSink {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

fn require_aiosmtpd() {
    let importable = Command::new("python3")
        .args(["-c", "import aiosmtpd"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        importable,
        "the email tests need a real SMTP server, and `python3 -c \"import aiosmtpd\"` failed: \
         run scripts/setup.sh (it installs aiosmtpd=={AIOSMTPD_VERSION})"
    );
}

impl MailSink {
    pub fn start() -> MailSink {
        require_aiosmtpd();
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("sink.py");
        std::fs::write(&script, SERVER).unwrap();
        let port_file = dir.path().join("port");
        let stderr = std::fs::File::create(dir.path().join("stderr")).unwrap();
        let child = Command::new("python3")
            .arg(&script)
            .arg(dir.path().join("mail.jsonl"))
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start python3: {e}"));
        let mut sink = MailSink {
            child,
            dir,
            port: 0,
        };
        sink.port = sink.wait_for_port(&port_file);
        sink.wait_until_accepting();
        sink
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    fn wait_for_port(&mut self, port_file: &PathBuf) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(text) = std::fs::read_to_string(port_file)
                && let Ok(port) = text.trim().parse()
            {
                return port;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the SMTP sink exited ({status}): {}", self.stderr());
            }
            assert!(
                Instant::now() < deadline,
                "the SMTP sink did not start within 15 s: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_until_accepting(&self) {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        for _ in 0..100 {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "the SMTP sink does not accept connections on {addr}: {}",
            self.stderr()
        );
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every message accepted so far, in order.
    pub fn received(&self) -> Vec<ReceivedMail> {
        let path = self.dir.path().join("mail.jsonl");
        let Ok(text) = std::fs::read_to_string(path) else {
            return Vec::new();
        };
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect()
    }
}

impl Drop for MailSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A local port that nothing listens on (bound, then released).
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
