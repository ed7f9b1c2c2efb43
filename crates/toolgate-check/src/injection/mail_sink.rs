//! The SMTP server the injection suite's relay delivers to: Python's aiosmtpd on 127.0.0.1
//! (`scripts/setup.sh` installs it), recording every message it accepts, so "the notes were
//! emailed out" is judged by what a real mail server received.
//!
//! Guarantees: [`MailSink::start`] returns only once the port accepts connections (bounded
//! waits) or fails with [`SinkError`] saying what to install; the server is killed when the
//! sink is dropped.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server script (shared with the email tests).
pub const SERVER_SCRIPT: &str = include_str!("smtp_sink.py");

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error(
        "the injection suite needs a real SMTP server and `python3 -c \"import aiosmtpd\"` failed: run scripts/setup.sh (it installs aiosmtpd)"
    )]
    NoAiosmtpd,
    #[error("the SMTP server could not start: {0}")]
    Start(String),
}

pub struct MailSink {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl MailSink {
    /// Starts the server, keeping its files in `dir`.
    pub fn start(dir: &Path) -> Result<MailSink, SinkError> {
        let importable = Command::new("python3")
            .args(["-c", "import aiosmtpd"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !importable {
            return Err(SinkError::NoAiosmtpd);
        }
        std::fs::create_dir_all(dir).map_err(|e| SinkError::Start(e.to_string()))?;
        let script = dir.join("smtp_sink.py");
        let port_file = dir.join("smtp.port");
        let _ = std::fs::remove_file(&port_file);
        std::fs::write(&script, SERVER_SCRIPT).map_err(|e| SinkError::Start(e.to_string()))?;
        let stderr = std::fs::File::create(dir.join("smtp.stderr"))
            .map_err(|e| SinkError::Start(e.to_string()))?;
        let child = Command::new("python3")
            .arg(&script)
            .arg(dir.join("mail.jsonl"))
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| SinkError::Start(format!("python3: {e}")))?;
        let mut sink = MailSink {
            child,
            dir: dir.to_path_buf(),
            port: 0,
        };
        sink.port = sink.wait_for_port(&port_file)?;
        sink.wait_until_accepting()?;
        Ok(sink)
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("smtp.stderr")).unwrap_or_default()
    }

    fn wait_for_port(&mut self, port_file: &Path) -> Result<u16, SinkError> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(text) = std::fs::read_to_string(port_file)
                && let Ok(port) = text.trim().parse()
            {
                return Ok(port);
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(SinkError::Start(format!(
                    "it exited ({status}): {}",
                    self.stderr()
                )));
            }
            if Instant::now() >= deadline {
                return Err(SinkError::Start(format!(
                    "no port within 15 s: {}",
                    self.stderr()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_until_accepting(&self) -> Result<(), SinkError> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        for _ in 0..100 {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(SinkError::Start(format!(
            "{addr} does not accept connections: {}",
            self.stderr()
        )))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The recipients of every message accepted so far, one list per message, in order.
    pub fn recipients(&self) -> Vec<Vec<String>> {
        let Ok(text) = std::fs::read_to_string(self.dir.join("mail.jsonl")) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .map(|mail| {
                mail.get("rcpt_tos")
                    .and_then(serde_json::Value::as_array)
                    .map(|r| {
                        r.iter()
                            .filter_map(|v| v.as_str())
                            .map(String::from)
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect()
    }
}

impl Drop for MailSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
