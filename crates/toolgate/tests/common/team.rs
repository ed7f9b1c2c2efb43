//! A team deployment in a test: `toolgate serve --http` instances on one shared PostgreSQL
//! store, nginx in front of them, and plain HTTP/1.1 exchanges with either, as a host sends
//! them. Every process is the test's own, on 127.0.0.1, and ends when its value is dropped.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A `toolgate serve --http` process, killed when dropped.
pub struct Instance {
    child: Child,
    pub address: String,
}

impl Instance {
    /// Ends the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `toolgate [--config CONFIG] serve --http 127.0.0.1:0 --toolset books-v4 --store URL`, once
/// it says where it serves.
pub fn serve(dir: &Path, url: &str, config: Option<&Path>) -> Instance {
    serve_toolset(dir, url, "books-v4", config)
}

/// As [`serve`], with another toolset.
pub fn serve_toolset(dir: &Path, url: &str, toolset: &str, config: Option<&Path>) -> Instance {
    serve_with(dir, config, &["--toolset", toolset, "--store", url])
}

/// `toolgate [--config CONFIG] serve --http 127.0.0.1:0 ARGS...` run in `dir` (its home), once
/// it says where it serves.
pub fn serve_with(dir: &Path, config: Option<&Path>, args: &[&str]) -> Instance {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    let mut child = command
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(args)
        .current_dir(dir)
        .env_remove("XDG_DATA_HOME")
        .env("HOME", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let started = Instant::now();
    let address = loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the server did not start"
        );
        let line = lines
            .next()
            .expect("the server said where it serves")
            .unwrap();
        if let Some(rest) = line.split(" at http://").nth(1) {
            break rest.split("/mcp").next().unwrap().to_string();
        }
    };
    // Keep reading stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Instance { child, address }
}

/// `dir/servers.json`, an `mcpServers` file naming one server, `up`, at `address`'s `/mcp`
/// (Streamable HTTP), as a gateway in a test imports it.
pub fn servers_json(dir: &Path, address: &str) -> std::path::PathBuf {
    let servers = dir.join("servers.json");
    std::fs::write(
        &servers,
        json!({"mcpServers": {"up": {"url": format!("http://{address}/mcp")}}}).to_string(),
    )
    .unwrap();
    servers
}

/// nginx on 127.0.0.1 in front of `backends`, round robin, no affinity (Debian's nginx with a
/// configuration of the test's own in a folder of its own), stopped when dropped.
pub struct Nginx {
    child: Child,
    pub address: String,
    _prefix: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM to the master, which stops its workers (SIGKILL would orphan them).
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let _ = self.child.wait();
    }
}

/// The configuration the deployment documentation shows, with the test's ports and folder.
pub fn nginx_config(listen: &str, backends: &[&str], prefix: &Path) -> String {
    let servers: String = backends
        .iter()
        .map(|b| format!("        server {b} max_fails=1 fail_timeout=2s;\n"))
        .collect();
    let p = prefix.display();
    format!(
        "worker_processes 1;
pid {p}/nginx.pid;
error_log {p}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {p}/body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    upstream toolgate {{
{servers}        keepalive 32;
    }}
    server {{
        listen {listen};
        location / {{
            proxy_pass http://toolgate;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $http_host;
            # Server-sent events go out as they are written.
            proxy_buffering off;
            proxy_read_timeout 120s;
        }}
    }}
}}
"
    )
}

/// nginx on a free loopback port in front of `backends`.
pub fn nginx(backends: &[&str]) -> Nginx {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    nginx_at(&format!("127.0.0.1:{port}"), backends)
}

/// nginx on `address` in front of `backends` (an address chosen first, when the instances
/// must be configured with the origin people reach them at).
pub fn nginx_at(address: &str, backends: &[&str]) -> Nginx {
    let prefix = tempfile::Builder::new()
        .prefix("toolgate-nginx-")
        .tempdir()
        .unwrap();
    // Its workers (nobody, under root) reach their temporary folders through it.
    std::fs::set_permissions(
        prefix.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let config = prefix.path().join("nginx.conf");
    std::fs::write(&config, nginx_config(address, backends, prefix.path())).unwrap();
    let child = Command::new("/usr/sbin/nginx")
        .arg("-p")
        .arg(prefix.path())
        .arg("-c")
        .arg(&config)
        .args(["-g", "daemon off;"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx (Debian's package; scripts/setup.sh installs it)");
    let started = Instant::now();
    while TcpStream::connect(address).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nginx did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Nginx {
        child,
        address: address.to_string(),
        _prefix: prefix,
    }
}

/// An HTTP response as read off the wire.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message in the body, plain or as server-sent events.
    pub fn message(&self) -> Option<Value> {
        self.body
            .lines()
            .map(|l| l.strip_prefix("data:").map_or(l.trim(), str::trim))
            .find_map(|l| {
                serde_json::from_str::<Value>(l)
                    .ok()
                    .filter(|v| v.get("jsonrpc").is_some())
            })
    }
}

/// One request on a fresh connection (`connection: close`); an error when nothing answered.
pub fn exchange(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in {text:?}")))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(Reply {
        status,
        headers,
        body: dechunk(body),
    })
}

/// A chunked body's text (nginx chunks what it streams), or the body as it is.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            return body.to_string();
        };
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_string();
        };
        if size == 0 || after.len() < size {
            return if size == 0 { out } else { body.to_string() };
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
}

/// The `_meta` of a 2026-07-28 request from a host that can ask its user.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"}
    })
}

/// A 2026-07-28 `tools/call` of `tool`, with `extra` merged into the params and `meta` into
/// their `_meta`.
pub fn modern_call(
    address: &str,
    tool: &str,
    args: &Value,
    extra: Value,
    meta: Value,
) -> std::io::Result<Reply> {
    modern_call_as(address, tool, args, extra, meta, None)
}

/// As [`modern_call`], with `token` as the bearer token when given.
pub fn modern_call_as(
    address: &str,
    tool: &str,
    args: &Value,
    extra: Value,
    meta: Value,
    token: Option<&str>,
) -> std::io::Result<Reply> {
    let mut all_meta = modern_meta();
    all_meta
        .as_object_mut()
        .unwrap()
        .extend(meta.as_object().unwrap().clone());
    let mut params = json!({"name": tool, "arguments": args, "_meta": all_meta});
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).to_string();
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ];
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    exchange(address, "POST", "/mcp", &headers, &body)
}

/// The first column of the first row of `sql` on the database at `url`, as an integer.
pub fn count(url: &str, sql: &str) -> i64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = toolgate_store::postgres::PgStore::connect(url, Default::default())
            .await
            .unwrap();
        let client = store.client().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0)
    })
}
