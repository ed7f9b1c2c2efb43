//! `toolgate ask` with an OpenAI-compatible server: which key goes where (issue 30). The
//! server is a real one on 127.0.0.1 that records the headers it receives.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::text;

const ANSWER: &str = include_str!("../../toolgate-llm/tests/golden/openai_chat/response_text.json");

/// Answers one chat completion with a text answer; returns the request's headers (lower-case
/// names), or nothing when no request came within 60 s.
fn one_answer_server() -> (String, JoinHandle<Vec<(String, String)>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let handle = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(_) => return Vec::new(),
            }
        };
        stream.set_nonblocking(false).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map_or(0, |(_, v)| v.parse().unwrap());
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let mut out = stream;
        write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{ANSWER}",
            ANSWER.len()
        )
        .unwrap();
        out.flush().unwrap();
        headers
    });
    (format!("http://127.0.0.1:{port}/v1"), handle)
}

fn ask(dir: &std::path::Path, model: &str, env: &[(&str, &str)]) -> std::process::Output {
    let db = dir.join("b.sqlite");
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command
        .args([
            "ask",
            "--quiet",
            "--db",
            db.to_str().unwrap(),
            "--model",
            model,
            "hi",
        ])
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("XDG_DATA_HOME")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_COMPAT_API_KEY");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

#[test]
fn openai_key_is_not_sent_to_a_compatible_server() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[(&str, &str)], Option<&str>); 2] = [
        (&[("OPENAI_API_KEY", "sk-openai-secret")], None),
        (
            &[
                ("OPENAI_API_KEY", "sk-openai-secret"),
                ("OPENAI_COMPAT_API_KEY", "compat-key"),
            ],
            Some("Bearer compat-key"),
        ),
    ];
    for (env, want) in cases {
        let (base, server) = one_answer_server();
        let out = ask(dir.path(), &format!("openai-compat:{base}#local"), env);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let headers = server.join().unwrap();
        assert!(!headers.is_empty(), "the server got no request");
        let auth = headers
            .iter()
            .find(|(n, _)| n == "authorization")
            .map(|(_, v)| v.as_str());
        assert_eq!(auth, want, "{env:?}");
    }
}

#[test]
fn a_key_for_a_plain_http_remote_server_is_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let out = ask(
        dir.path(),
        // TEST-NET-1: nothing answers there, and nothing may be tried.
        "openai-compat:http://192.0.2.1:8000/v1#m",
        &[("OPENAI_COMPAT_API_KEY", "compat-key")],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("plain http") && err.contains("192.0.2.1"),
        "{err}"
    );
    assert!(!err.contains("compat-key"), "{err}");
}
