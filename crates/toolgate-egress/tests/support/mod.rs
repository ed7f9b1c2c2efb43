//! Tiny loopback servers for the egress tests: HTTP (plain or TLS) with canned routes, and an
//! SMTP sink. Each listens on 127.0.0.1:0, serves connections one at a time on its own thread,
//! and stops itself when dropped (or after 60 s at the latest); every loop is bounded.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const LIFETIME: Duration = Duration::from_secs(60);
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A canned answer.
#[derive(Debug, Clone)]
pub struct Route {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Send no `Content-Length` (the body ends when the connection closes).
    pub omit_length: bool,
    /// Wait this long before answering.
    pub delay: Duration,
}

impl Route {
    pub fn ok(content_type: &str, body: &str) -> Route {
        Route {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.as_bytes().to_vec(),
            omit_length: false,
            delay: Duration::ZERO,
        }
    }

    pub fn html(body: &str) -> Route {
        Route::ok("text/html; charset=utf-8", body)
    }

    pub fn redirect(location: &str) -> Route {
        Route {
            status: 302,
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
            omit_length: false,
            delay: Duration::ZERO,
        }
    }

    pub fn status(status: u16) -> Route {
        Route {
            status,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: b"status".to_vec(),
            omit_length: false,
            delay: Duration::ZERO,
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub host: String,
    pub target: String,
    pub headers: Vec<String>,
}

pub struct HttpServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Seen>>>,
    handle: Option<JoinHandle<()>>,
}

pub struct TlsIdentity {
    pub cert_der: Vec<u8>,
    pub key_pkcs8_der: Vec<u8>,
}

impl HttpServer {
    pub fn start(routes: Vec<(&str, Route)>) -> HttpServer {
        HttpServer::spawn(routes, None)
    }

    pub fn start_tls(routes: Vec<(&str, Route)>, identity: TlsIdentity) -> HttpServer {
        HttpServer::spawn(routes, Some(identity))
    }

    fn spawn(routes: Vec<(&str, Route)>, identity: Option<TlsIdentity>) -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("local_addr: {e}"));
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("nonblocking: {e}"));
        // `{port}` in a header value (a redirect's Location) becomes this server's port.
        let port = addr.port().to_string();
        let routes: HashMap<String, Route> = routes
            .into_iter()
            .map(|(p, mut r)| {
                for (_, value) in &mut r.headers {
                    *value = value.replace("{port}", &port);
                }
                (p.to_string(), r)
            })
            .collect();
        let tls = identity.map(|id| Arc::new(server_config(id)));
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop2, seen2) = (stop.clone(), seen.clone());
        let handle = std::thread::spawn(move || {
            let started = Instant::now();
            while !stop2.load(Ordering::SeqCst) && started.elapsed() < LIFETIME {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = stream.set_nonblocking(false);
                        let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
                        let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
                        match &tls {
                            Some(config) => {
                                let Ok(conn) = rustls::ServerConnection::new(config.clone()) else {
                                    continue;
                                };
                                let mut tls_stream = rustls::StreamOwned::new(conn, stream);
                                serve(&mut tls_stream, &routes, &seen2);
                                tls_stream.conn.send_close_notify();
                                let _ = tls_stream.flush();
                            }
                            None => {
                                let mut stream = stream;
                                serve(&mut stream, &routes, &seen2);
                            }
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        HttpServer {
            addr,
            stop,
            seen,
            handle: Some(handle),
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request served so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The request targets (path and query) served so far.
    pub fn targets(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.target).collect()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

fn server_config(identity: TlsIdentity) -> rustls::ServerConfig {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|e| panic!("tls versions: {e}"))
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(identity.cert_der)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_pkcs8_der)),
        )
        .unwrap_or_else(|e| panic!("tls cert: {e}"))
}

fn serve<S: Read + Write>(
    stream: &mut S,
    routes: &HashMap<String, Route>,
    seen: &Mutex<Vec<Seen>>,
) {
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let target = request_line
        .split(' ')
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let headers: Vec<String> = lines.filter(|l| !l.is_empty()).map(String::from).collect();
    let host = headers
        .iter()
        .find_map(|h| {
            let (name, value) = h.split_once(':')?;
            name.eq_ignore_ascii_case("host")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    if let Ok(mut seen) = seen.lock() {
        seen.push(Seen {
            host,
            target: target.clone(),
            headers,
        });
    }
    let path = target.split('?').next().unwrap_or_default();
    let route = routes
        .get(path)
        .cloned()
        .unwrap_or_else(|| Route::status(404));
    if !route.delay.is_zero() {
        std::thread::sleep(route.delay);
    }
    let mut out = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", route.status);
    for (name, value) in &route.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if !route.omit_length {
        out.push_str(&format!("Content-Length: {}\r\n", route.body.len()));
    }
    out.push_str("\r\n");
    let _ = stream.write_all(out.as_bytes());
    let _ = stream.write_all(&route.body);
    let _ = stream.flush();
}

/// What the SMTP sink received in one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Received {
    pub helo: String,
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    pub data: String,
}

/// Speaks just enough SMTP to accept messages, and records them.
pub struct SmtpSink {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    received: Arc<Mutex<Vec<Received>>>,
    handle: Option<JoinHandle<()>>,
}

impl SmtpSink {
    pub fn start() -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("local_addr: {e}"));
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("nonblocking: {e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (stop2, received2) = (stop.clone(), received.clone());
        let handle = std::thread::spawn(move || {
            let started = Instant::now();
            while !stop2.load(Ordering::SeqCst) && started.elapsed() < LIFETIME {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = stream.set_nonblocking(false);
                        let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
                        smtp_session(stream, &received2);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        SmtpSink {
            addr,
            stop,
            received,
            handle: Some(handle),
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// One SMTP session. A message is recorded before its `250` is sent, so a client that got
/// the `250` finds it recorded.
fn smtp_session(stream: TcpStream, sink: &Mutex<Vec<Received>>) -> Option<()> {
    let mut writer = stream.try_clone().ok()?;
    let mut reader = BufReader::new(stream);
    let mut say = |text: &str| writer.write_all(format!("{text}\r\n").as_bytes()).is_ok();
    if !say("220 sink.test ESMTP toolgate test sink") {
        return None;
    }
    let mut received = Received::default();
    for _ in 0..100 {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        let verb = line
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let verb = verb.split(':').next().unwrap_or_default().to_string();
        match verb.as_str() {
            "EHLO" | "HELO" => {
                received.helo = line[4..].trim().to_string();
                say("250 sink.test");
            }
            "MAIL" => {
                received.mail_from = line.to_string();
                say("250 2.1.0 OK");
            }
            "RCPT" => {
                received.rcpt_to.push(line.to_string());
                say("250 2.1.5 OK");
            }
            "DATA" => {
                say("354 end with <CRLF>.<CRLF>");
                let mut data = String::new();
                for _ in 0..100_000 {
                    let mut l = String::new();
                    match reader.read_line(&mut l) {
                        Ok(0) | Err(_) => return None,
                        Ok(_) => {}
                    }
                    if l == ".\r\n" {
                        break;
                    }
                    data.push_str(l.strip_prefix('.').unwrap_or(&l));
                }
                received.data = data;
                if let Ok(mut all) = sink.lock() {
                    all.push(received.clone());
                }
                say("250 2.0.0 queued");
            }
            "RSET" | "NOOP" => {
                say("250 OK");
            }
            "QUIT" => {
                say("221 bye");
                break;
            }
            _ => {
                say("502 not implemented");
            }
        }
    }
    Some(())
}

/// A hostile SMTP "relay": accepts connections and sends `greeting` one byte every `every`,
/// reading nothing. Records when each connection came; stops when dropped (or at `LIFETIME`).
pub struct SlowTalker {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    connections: Arc<Mutex<usize>>,
    handle: Option<JoinHandle<()>>,
}

impl SlowTalker {
    pub fn start(greeting: &'static [u8], every: Duration) -> SlowTalker {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("local_addr: {e}"));
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("nonblocking: {e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Mutex::new(0_usize));
        let (stop2, connections2) = (stop.clone(), connections.clone());
        let handle = std::thread::spawn(move || {
            let started = Instant::now();
            let mut open: Vec<(TcpStream, usize)> = Vec::new();
            let mut last = Instant::now();
            while !stop2.load(Ordering::SeqCst) && started.elapsed() < LIFETIME {
                if let Ok((stream, _)) = listener.accept() {
                    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
                    if let Ok(mut n) = connections2.lock() {
                        *n += 1;
                    }
                    open.push((stream, 0));
                }
                if last.elapsed() >= every {
                    last = Instant::now();
                    // One more byte to each connection; a closed one is dropped.
                    open.retain_mut(|(stream, sent)| {
                        if *sent >= greeting.len() {
                            return true;
                        }
                        let ok = stream.write_all(&greeting[*sent..*sent + 1]).is_ok();
                        *sent += 1;
                        ok
                    });
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        SlowTalker {
            addr,
            stop,
            connections,
            handle: Some(handle),
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn connections(&self) -> usize {
        self.connections.lock().map(|n| *n).unwrap_or_default()
    }
}

impl Drop for SlowTalker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}
