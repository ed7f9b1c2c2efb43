//! `toolgate chat` asks for approval on the terminal itself, never on the conversation's input:
//! a `y` pasted or typed ahead with the conversation answers no question, and without a
//! terminal every call that needs approval is refused, whatever is piped in. The real binary,
//! a real pseudo-terminal as its controlling terminal, and a scripted OpenAI-compatible model
//! on 127.0.0.1 that asks to delete a note (high risk: a human approves every call).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The note the model asks to delete (the sample notebook has it).
const NOTE: i64 = 1;

/// A scripted chat-completions server: asks for `notes_delete` until it reads that call's
/// result, then answers. Keeps every request body it was sent.
struct ScriptedServer {
    url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl ScriptedServer {
    fn start() -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://127.0.0.1:{}/v1",
            listener.local_addr().unwrap().port()
        );
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        // Ends with the test process; each connection serves one request.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let mut reader = BufReader::new(stream);
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(n) = lower.strip_prefix("content-length:") {
                        length = n.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0u8; length];
                if reader.read_exact(&mut body).is_err() {
                    continue;
                }
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let answered = request["messages"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
                seen.lock().unwrap().push(request);
                let message = if answered {
                    json!({"role": "assistant", "content": "I did not delete it."})
                } else {
                    json!({"role": "assistant", "content": null, "tool_calls": [{
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "notes_delete",
                            "arguments": json!({"note_id": NOTE}).to_string(),
                        },
                    }]})
                };
                let finish = if answered { "stop" } else { "tool_calls" };
                let response = json!({
                    "id": "c", "object": "chat.completion", "model": "scripted",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                })
                .to_string();
                let mut stream = reader.into_inner();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{response}",
                    response.len()
                );
            }
        });
        ScriptedServer { url, requests }
    }

    /// What the model was told about its `notes_delete` call.
    fn delete_result(&self) -> String {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].to_string())
            .unwrap_or_default()
    }
}

fn note_exists(db: &Path) -> bool {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("SELECT count(*) FROM notes WHERE id = ?1", [NOTE], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap()
        == 1
}

/// `toolgate chat` on the notes toolset with the scripted model, in its own session (so it has
/// no controlling terminal unless `terminal` is given, which becomes it and its stdin).
fn chat(dir: &Path, server: &ScriptedServer, terminal: Option<File>) -> Child {
    let db = dir.join("notes.sqlite");
    let model = format!("openai-compat:{}#scripted", server.url);
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command
        .args(["chat", "--toolset", "notes", "--db"])
        .arg(&db)
        .args(["--model", &model])
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_DATA_HOME")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let controlling = terminal.is_some();
    command.stdin(match terminal {
        Some(tty) => Stdio::from(tty),
        None => Stdio::piped(),
    });
    // SAFETY: only async-signal-safe system calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            rustix::process::setsid()?;
            if controlling {
                rustix::process::ioctl_tiocsctty(std::io::stdin())?;
            }
            Ok(())
        });
    }
    command.spawn().unwrap()
}

/// Everything read from `source`, as it comes.
fn collect(mut source: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&seen);
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = source.read(&mut chunk) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    seen
}

fn text_of(seen: &Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&seen.lock().unwrap()).into_owned()
}

/// Waits (bounded) until one of `sources` shows `text`; which one did, if any.
fn first_showing(sources: &[&Mutex<Vec<u8>>], text: &str, limit: Duration) -> Option<usize> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(i) = sources.iter().position(|s| text_of(s).contains(text)) {
            return Some(i);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn wait_bounded(child: &mut Child, limit: Duration) {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("chat did not end within {limit:?}");
}

/// A pseudo-terminal: (the program's side, the person's side).
fn pty() -> (File, File) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    use std::os::unix::fs::OpenOptionsExt;
    let person = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
    grantpt(&person).unwrap();
    unlockpt(&person).unwrap();
    let name = ptsname(&person, Vec::new()).unwrap();
    let terminal = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
        .open(std::ffi::OsStr::from_bytes(name.as_bytes()))
        .unwrap();
    (terminal, File::from(person))
}

#[test]
fn a_y_pasted_with_the_conversation_does_not_approve_the_delete_it_leads_to() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start();
    let (terminal, person) = pty();
    let mut child = chat(dir.path(), &server, Some(terminal));
    let stdout = collect(child.stdout.take().unwrap());
    let _stderr = collect(child.stderr.take().unwrap());
    let screen = collect(person.try_clone().unwrap());
    let mut keyboard = person;

    // Pasted at once: the request, and a `y` for a question nobody has seen yet.
    keyboard.write_all(b"delete note 1\ny\n").unwrap();
    // The question must appear on the terminal; the model's answer must not come first.
    let shown = first_showing(
        &[&screen, &stdout],
        "Approve this exact call? [y/N] ",
        Duration::from_secs(60),
    );
    let answered_first = first_showing(&[&stdout], "answer:", Duration::ZERO).is_some();
    if shown == Some(0) {
        keyboard.write_all(b"n\n").unwrap();
    }
    first_showing(&[&stdout], "answer:", Duration::from_secs(60));
    keyboard.write_all(b"\n").unwrap();
    wait_bounded(&mut child, Duration::from_secs(60));

    assert!(
        note_exists(&dir.path().join("notes.sqlite")),
        "the pasted y deleted the note; the model was told: {}",
        server.delete_result()
    );
    assert_eq!(
        shown,
        Some(0),
        "the question was asked on the terminal (answered first: {answered_first}): {}",
        text_of(&screen)
    );
    let result = server.delete_result();
    assert!(result.contains("approval_denied"), "{result}");
    let screen = text_of(&screen);
    assert!(screen.contains("`notes_delete` (risk: high"), "{screen}");
    assert!(!screen.contains('\u{1b}'), "{screen:?}");
}

#[test]
fn without_a_terminal_a_piped_y_answers_nothing_and_the_call_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start();
    let mut child = chat(dir.path(), &server, None);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"delete note 1\ny\n")
        .unwrap();
    let stderr = collect(child.stderr.take().unwrap());
    let stdout = collect(child.stdout.take().unwrap());
    wait_bounded(&mut child, Duration::from_secs(60));

    assert!(note_exists(&dir.path().join("notes.sqlite")));
    let result = server.delete_result();
    assert!(result.contains("approval_denied"), "{result}");
    let stderr = text_of(&stderr);
    assert!(
        stderr.contains("no terminal to ask on"),
        "chat says why nothing will be approved: {stderr} / {}",
        text_of(&stdout)
    );
}
