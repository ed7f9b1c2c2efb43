//! Shared by the provider tests: the one fixed conversation, golden-file access, and a small
//! HTTP/1.1 server on 127.0.0.1 that answers a fixed script and then stops by itself.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_llm::{
    ContentBlock, HttpConfig, Message, ModelRequest, Role, ToolCall, ToolChoice, ToolDefinition,
    ToolResult,
};

/// The fixed conversation every golden request is built from: a system prompt, a question, an
/// assistant call that fails (`is_error`), then two parallel calls and their results, with two
/// tools (one strict-compatible, one not) and `tool_choice` auto.
pub fn conversation() -> ModelRequest {
    let call = |id: &str, arguments: Value| {
        ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: "notes_search".into(),
            arguments,
        })
    };
    let result = |id: &str, content: &str, is_error: bool| ToolResult {
        call_id: id.into(),
        content: content.into(),
        is_error,
    };
    ModelRequest {
        system: Some("You are a notes assistant. Answer from the user's notes, using the tools.".into()),
        messages: vec![
            Message::user_text("Who wrote the Q3 budget notes?"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Text {
                        text: "Let me search your notes.".into(),
                    },
                    call("call_1", json!({"query": "Q3 budget", "limit": 100})),
                ],
            },
            Message::tool_results(vec![result(
                "call_1",
                r#"{"code":"invalid_argument","field":"limit","expected":"an integer from 1 to 50","received":100}"#,
                true,
            )]),
            Message {
                role: Role::Assistant,
                content: vec![
                    call("call_2", json!({"query": "Q3 budget", "limit": 10})),
                    call("call_3", json!({"query": "third quarter budget", "limit": 10})),
                ],
            },
            Message::tool_results(vec![
                result("call_2", r#"{"matches":[{"id":"n_7","title":"Q3 budget draft"}]}"#, false),
                result("call_3", r#"{"matches":[]}"#, false),
            ]),
        ],
        tools: vec![
            ToolDefinition {
                name: "notes_search".into(),
                description: "Search the user's notes by words. Returns up to `limit` matches with id and title. To read one note in full, call notes_get instead.".into(),
                input_schema: json!({
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "query": {"type": "string", "description": "Words to look for."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "At most this many matches (default 10)."}
                    },
                    "required": ["query"]
                }),
            },
            ToolDefinition {
                name: "notes_get".into(),
                description: "Read one note in full by its id, as returned by notes_search.".into(),
                input_schema: json!({
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {"id": {"type": "string", "description": "The note's id, e.g. \"n_7\"."}},
                    "required": ["id"]
                }),
            },
        ],
        tool_choice: ToolChoice::Auto,
        max_tokens: 1024,
        temperature: Some(0.2),
        parallel_tool_calls: true,
        stable_tools: None,
        seed: None,
    }
}

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// The text of a golden file.
pub fn golden_text(name: &str) -> String {
    let path = golden_path(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A golden file as JSON.
pub fn golden_json(name: &str) -> Value {
    serde_json::from_str(&golden_text(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Compares `actual` (pretty-printed) with the golden file byte for byte; with
/// `UPDATE_GOLDEN=1` rewrites the file instead (review the diff before checking it in).
pub fn assert_golden(name: &str, actual: &Value) {
    let text = serde_json::to_string_pretty(actual).unwrap_or_else(|e| panic!("{e}")) + "\n";
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(golden_path(name), &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        return;
    }
    let expected = golden_text(name);
    if text != expected {
        let first_diff = text
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(text.lines().count().min(expected.lines().count()));
        panic!(
            "{name} differs from the request we build, first at line {}:\n  built:  {}\n  golden: {}\n\
             (run with UPDATE_GOLDEN=1 to rewrite, then review the diff against the provider's docs)",
            first_diff + 1,
            text.lines().nth(first_diff).unwrap_or("<end>"),
            expected.lines().nth(first_diff).unwrap_or("<end>"),
        );
    }
}

/// Retry timings short enough for tests.
pub fn fast_http() -> HttpConfig {
    HttpConfig {
        connect_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(10),
        max_attempts: 3,
        initial_backoff: Duration::from_millis(10),
        max_delay: Duration::from_millis(200),
    }
}

/// One scripted answer.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// One request as the server read it.
#[derive(Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A server on 127.0.0.1:<free port> answering one connection per scripted reply, in order.
/// It stops after the last reply, or when no connection comes (10 s for the first, 3 s for each
/// later one: a retry comes within the test backoff), whichever is first.
pub struct TestServer {
    pub base_url: String,
    handle: JoinHandle<Vec<Received>>,
}

const FIRST_WAIT: Duration = Duration::from_secs(10);
const LATER_WAIT: Duration = Duration::from_secs(3);

impl TestServer {
    /// `prefix` is the base URL path (e.g. `/v1`).
    pub fn start(prefix: &str, replies: Vec<Reply>) -> TestServer {
        Self::start_waiting(prefix, replies, FIRST_WAIT)
    }

    /// As [`TestServer::start`], waiting at most `first_wait` for the first connection (a
    /// server that must receive nothing need not hold a test up for long).
    pub fn start_waiting(prefix: &str, replies: Vec<Reply>, first_wait: Duration) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{e}"))
            .port();
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("{e}"));
        let handle = std::thread::spawn(move || serve(listener, replies, first_wait));
        TestServer {
            base_url: format!("http://127.0.0.1:{port}{prefix}"),
            handle,
        }
    }

    /// Waits for the server to stop and returns what it received.
    pub fn finish(self) -> Vec<Received> {
        self.handle
            .join()
            .unwrap_or_else(|_| panic!("the test server panicked"))
    }
}

fn serve(listener: TcpListener, replies: Vec<Reply>, first_wait: Duration) -> Vec<Received> {
    let mut received = Vec::new();
    for (i, reply) in replies.into_iter().enumerate() {
        let deadline = Instant::now() + if i == 0 { first_wait } else { LATER_WAIT };
        let stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break Some(stream),
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => break None,
            }
        };
        let Some(stream) = stream else {
            break;
        };
        match answer(stream, &reply) {
            Ok(request) => received.push(request),
            Err(e) => panic!("test server: {e}"),
        }
    }
    received
}

fn answer(stream: TcpStream, reply: &Reply) -> std::io::Result<Received> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);

    let mut out = stream;
    let mut head = format!(
        "HTTP/1.1 {} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(reply.body.as_bytes())?;
    out.flush()?;
    Ok(Received {
        method,
        path,
        headers,
        body,
    })
}
