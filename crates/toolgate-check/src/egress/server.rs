//! The egress suite's local servers: one plain HTTP server and one HTTPS server on 127.0.0.1,
//! and a trap on 127.0.0.2 (same port as the plain server) that must never be reached.
//!
//! Contract:
//! - Every server listens on loopback only, serves each connection on its own task, answers one
//!   request per connection (`Connection: close`), and stops when its [`LocalServer`] is dropped
//!   or after [`LIFETIME`] at the latest; every connection is bounded by [`CONNECTION_CAP`] and
//!   every request head by [`MAX_HEAD`] bytes.
//! - Each request is recorded ([`Seen`]) before it is answered, so a caller that got an answer
//!   finds it recorded; the trap records every connection it accepts, even one that sends
//!   nothing.
//! - While a [`Script`] is set, the plain and HTTPS servers answer their next requests, in order,
//!   with `302 Location: <script[i]>` (verbatim); after the script, and with none, the fixed
//!   routes of [`route`] answer, among them hostile ones: `/encoded/<coding>` (a declared
//!   content coding) and `/framing/<shape>` (a response framed two ways or in an unknown way).
//! - The HTTPS server picks its certificate by the client's SNI name (the run's bad
//!   certificates for `*.badtls.test`) and presents the `secure.test` one for any other name.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::sign::CertifiedKey;

/// How long a server lives at most, whatever its owner does.
pub const LIFETIME: Duration = Duration::from_secs(180);
/// How long one connection may take in all (the trickling routes end before this).
pub const CONNECTION_CAP: Duration = Duration::from_secs(20);
/// The largest request head read.
pub const MAX_HEAD: usize = 16 * 1024;
/// The body size of the over-size routes, well past every exit's cap.
pub const BIG_BODY: usize = 200_000;
/// The body size of `/at-cap` (the main exit's `max_bytes`).
pub const AT_CAP: usize = 65_536;
/// The trap's address: loopback, but not 127.0.0.1.
pub const TRAP_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// Which server saw a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    Http,
    Https,
    Trap,
}

/// One request (or, for the trap, one connection) as a server saw it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Seen {
    pub via: Via,
    /// The `Host` header (empty when none arrived).
    pub host: String,
    /// The request target (path and query; empty when none arrived).
    pub target: String,
}

/// What all the servers share: the log of what they saw and the redirect script.
#[derive(Debug, Default)]
pub struct Shared {
    seen: Mutex<Vec<Seen>>,
    script: Mutex<Vec<String>>,
}

impl Shared {
    /// Everything seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// How many requests (and trap connections) were seen so far.
    pub fn seen_count(&self) -> usize {
        self.seen.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// Answers the next requests with redirects to `locations`, in order.
    pub fn set_script(&self, locations: Vec<String>) {
        if let Ok(mut script) = self.script.lock() {
            *script = locations;
            script.reverse();
        }
    }

    fn next_scripted(&self) -> Option<String> {
        self.script.lock().ok().and_then(|mut s| s.pop())
    }

    fn record(&self, seen: Seen) {
        if let Ok(mut all) = self.seen.lock() {
            all.push(seen);
        }
    }
}

/// A running server; dropping it stops it and every connection it is serving.
pub struct LocalServer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The three servers of the suite.
pub struct Servers {
    pub http: LocalServer,
    pub https: LocalServer,
    pub trap: LocalServer,
    pub shared: Arc<Shared>,
}

impl Servers {
    /// Starts the plain server on 127.0.0.1, the trap on 127.0.0.2 at the same port (tried on
    /// up to 20 ports), and the TLS server on 127.0.0.1: it presents the identity `by_name`
    /// gives for the client's SNI name, and `identity` for any other.
    pub async fn start(
        identity: TlsIdentity,
        by_name: Vec<(String, TlsIdentity)>,
    ) -> Result<Servers, String> {
        let tls_config = Arc::new(server_config(identity, by_name)?);
        let shared = Arc::new(Shared::default());
        let mut last_error = String::from("no port tried");
        for _ in 0..20 {
            let http = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .await
                .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
            let port = http.local_addr().map_err(|e| e.to_string())?.port();
            let trap = match TcpListener::bind((TRAP_IP, port)).await {
                Ok(trap) => trap,
                Err(e) => {
                    last_error = format!("cannot listen on {TRAP_IP}:{port}: {e}");
                    continue;
                }
            };
            let tls = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .await
                .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
            let acceptor = TlsAcceptor::from(tls_config.clone());
            return Ok(Servers {
                http: serve(http, Kind::Plain, shared.clone())?,
                https: serve(tls, Kind::Tls(acceptor), shared.clone())?,
                trap: serve(trap, Kind::Trap, shared.clone())?,
                shared,
            });
        }
        Err(last_error)
    }
}

/// The HTTPS server's certificate (DER) and PKCS#8 key (DER).
pub struct TlsIdentity {
    pub cert_der: Vec<u8>,
    pub key_pkcs8_der: Vec<u8>,
}

impl TlsIdentity {
    fn certified(self, provider: &rustls::crypto::CryptoProvider) -> Result<CertifiedKey, String> {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        CertifiedKey::from_der(
            vec![CertificateDer::from(self.cert_der)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_pkcs8_der)),
            provider,
        )
        .map_err(|e| format!("TLS certificate: {e}"))
    }
}

/// Picks the certificate by the client's SNI name; the default for any other name or none.
#[derive(Debug)]
struct BySni {
    default: Arc<CertifiedKey>,
    by_name: Vec<(String, Arc<CertifiedKey>)>,
}

impl rustls::server::ResolvesServerCert for BySni {
    fn resolve(&self, hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let sni = hello.server_name().unwrap_or_default();
        Some(
            self.by_name
                .iter()
                .find(|(name, _)| name == sni)
                .map_or_else(|| self.default.clone(), |(_, key)| key.clone()),
        )
    }
}

fn server_config(
    identity: TlsIdentity,
    by_name: Vec<(String, TlsIdentity)>,
) -> Result<rustls::ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let default = Arc::new(identity.certified(&provider)?);
    let by_name = by_name
        .into_iter()
        .map(|(name, id)| Ok((name, Arc::new(id.certified(&provider)?))))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(BySni { default, by_name })))
}

#[derive(Clone)]
enum Kind {
    Plain,
    Tls(TlsAcceptor),
    Trap,
}

fn serve(listener: TcpListener, kind: Kind, shared: Arc<Shared>) -> Result<LocalServer, String> {
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        let accept_all = async {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    // A failed accept (out of descriptors, say) is retried after a pause.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let (kind, shared) = (kind.clone(), shared.clone());
                connections.spawn(async move {
                    let _ = tokio::time::timeout(CONNECTION_CAP, async move {
                        match kind {
                            Kind::Plain => answer(stream, Via::Http, &shared).await,
                            Kind::Tls(acceptor) => {
                                if let Ok(tls) = acceptor.accept(stream).await {
                                    answer(tls, Via::Https, &shared).await;
                                }
                            }
                            Kind::Trap => {
                                shared.record(Seen {
                                    via: Via::Trap,
                                    host: String::new(),
                                    target: String::new(),
                                });
                                answer(stream, Via::Trap, &shared).await;
                            }
                        }
                    })
                    .await;
                });
                // Reap finished connections so the set stays small.
                while connections.try_join_next().is_some() {}
            }
        };
        let _ = tokio::time::timeout(LIFETIME, accept_all).await;
        connections.abort_all();
    });
    Ok(LocalServer { addr, task })
}

/// Reads one request head and answers it.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, via: Via, shared: &Shared) {
    let Some(head) = read_head(&mut stream).await else {
        return;
    };
    let (target, host) = parse_head(&head);
    if via == Via::Trap {
        let _ = write_all(&mut stream, &response(200, Some("text/html"), b"trap")).await;
        return;
    }
    shared.record(Seen {
        via,
        host,
        target: target.clone(),
    });
    let path = target.split('?').next().unwrap_or_default().to_string();
    let reply = match shared.next_scripted() {
        Some(location) => Reply::Whole(redirect(&location)),
        None => route(&path),
    };
    match reply {
        Reply::Whole(bytes) => {
            let _ = write_all(&mut stream, &bytes).await;
        }
        Reply::Delayed(delay, bytes) => {
            tokio::time::sleep(delay).await;
            let _ = write_all(&mut stream, &bytes).await;
        }
        Reply::Trickle {
            head,
            pieces,
            every,
        } => {
            if write_all(&mut stream, &head).await.is_err() {
                return;
            }
            for piece in pieces {
                tokio::time::sleep(every).await;
                if write_all(&mut stream, &piece).await.is_err() {
                    return;
                }
            }
        }
        Reply::Stall(head) => {
            if write_all(&mut stream, &head).await.is_ok() {
                tokio::time::sleep(CONNECTION_CAP).await;
            }
        }
    }
}

async fn write_all<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Option<String> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0_u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return None;
        }
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// The request target and `Host` header of a request head.
pub fn parse_head(head: &str) -> (String, String) {
    let mut lines = head.split("\r\n");
    let target = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or_default()
        .to_string();
    let host = lines
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("host")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    (target, host)
}

/// How a route answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// All at once.
    Whole(Vec<u8>),
    /// All at once, after a wait.
    Delayed(Duration, Vec<u8>),
    /// The head, then each piece after `every`.
    Trickle {
        head: Vec<u8>,
        pieces: Vec<Vec<u8>>,
        every: Duration,
    },
    /// The head, then nothing until the connection cap.
    Stall(Vec<u8>),
}

/// The fixed routes, by path (see the suite's README for the table).
pub fn route(path: &str) -> Reply {
    let html = Some("text/html; charset=utf-8");
    match path {
        "/loop" => Reply::Whole(redirect("/loop")),
        "/json" => Reply::Whole(response(200, Some("application/json"), b"{\"ok\":true}")),
        "/text" => Reply::Whole(response(200, Some("text/plain"), b"plain text")),
        "/xhtml" => Reply::Whole(response(
            200,
            Some("application/xhtml+xml"),
            b"<html xmlns=\"http://www.w3.org/1999/xhtml\"/>",
        )),
        "/at-cap" => Reply::Whole(response(200, html, &vec![b'a'; AT_CAP])),
        "/big-declared" => Reply::Whole(response(200, html, &vec![b'b'; BIG_BODY])),
        "/big-streamed" => {
            // No Content-Length: the body ends when the connection closes.
            let mut bytes = head(200, html, None, &[]);
            bytes.extend(std::iter::repeat_n(b'b', BIG_BODY));
            Reply::Whole(bytes)
        }
        "/big-chunked" => {
            let mut bytes = head(200, html, None, &[("Transfer-Encoding", "chunked")]);
            for _ in 0..BIG_BODY / 4096 {
                bytes.extend_from_slice(b"1000\r\n");
                bytes.extend(std::iter::repeat_n(b'c', 4096));
                bytes.extend_from_slice(b"\r\n");
            }
            bytes.extend_from_slice(b"0\r\n\r\n");
            Reply::Whole(bytes)
        }
        "/big-gzip-claimed" => {
            // A body declared as compressed: the exit asks for no encoding and must still cap
            // what arrives.
            let body = vec![b'z'; BIG_BODY];
            let mut bytes = head(
                200,
                html,
                Some(body.len()),
                &[("Content-Encoding", "identity")],
            );
            bytes.extend_from_slice(&body);
            Reply::Whole(bytes)
        }
        "/trickle" => Reply::Trickle {
            head: head(200, html, Some(200), &[]),
            pieces: vec![b"t".to_vec(); 200],
            every: Duration::from_millis(50),
        },
        "/trickle-chunked" => Reply::Trickle {
            head: head(200, html, None, &[("Transfer-Encoding", "chunked")]),
            pieces: vec![b"1\r\nt\r\n".to_vec(); 200],
            every: Duration::from_millis(50),
        },
        "/slow-headers" => Reply::Delayed(Duration::from_secs(3), response(200, html, b"too late")),
        "/stall" => Reply::Stall(head(200, html, Some(100), &[])),
        _ if path.starts_with("/encoded/") => Reply::Whole(encoded(&path["/encoded/".len()..])),
        _ if path.starts_with("/framing/") => match framing(&path["/framing/".len()..]) {
            Some(bytes) => Reply::Whole(bytes),
            None => Reply::Whole(response(404, Some("text/plain"), b"no such shape")),
        },
        _ => match path.strip_prefix("/type/") {
            // `/type/<media type>`: that Content-Type (none when empty).
            Some(media) => Reply::Whole(response(
                200,
                (!media.is_empty()).then_some(media),
                b"typed body",
            )),
            None => Reply::Whole(response(
                200,
                html,
                format!("<p>page {path}</p>").as_bytes(),
            )),
        },
    }
}

/// `/encoded/<coding>`: a small body declared in that content coding (`stacked` is
/// `identity, gzip`; `two-headers` is `identity` then `br` on two lines). The body starts like
/// a gzip member; the exit must refuse on the header, so its bytes are never decoded.
fn encoded(coding: &str) -> Vec<u8> {
    let body: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff compressed-looking bytes";
    let codings: Vec<(&str, &str)> = match coding {
        "stacked" => vec![("Content-Encoding", "identity, gzip")],
        "two-headers" => vec![("Content-Encoding", "identity"), ("Content-Encoding", "br")],
        other => vec![("Content-Encoding", other)],
    };
    let mut bytes = head(
        200,
        Some("text/html; charset=utf-8"),
        Some(body.len()),
        &codings,
    );
    bytes.extend_from_slice(body);
    bytes
}

/// `/framing/<shape>`: a response whose length is framed ambiguously, as response smuggling
/// needs; `None` for an unknown shape.
fn framing(shape: &str) -> Option<Vec<u8>> {
    let html = Some("text/html; charset=utf-8");
    let chunked = "5\r\nhello\r\n0\r\n\r\n";
    let (status, extra, body): (u16, Vec<(&str, &str)>, &str) = match shape {
        "cl-te" => (
            200,
            vec![("Content-Length", "5"), ("Transfer-Encoding", "chunked")],
            chunked,
        ),
        "te-cl" => (
            200,
            vec![("Transfer-Encoding", "chunked"), ("Content-Length", "30")],
            chunked,
        ),
        "two-lengths" => (
            200,
            vec![("Content-Length", "5"), ("Content-Length", "6")],
            "hello!",
        ),
        "lengths-one-line" => (200, vec![("Content-Length", "5, 6")], "hello!"),
        "te-identity" => (200, vec![("Transfer-Encoding", "identity")], "hello"),
        "te-gzip-chunked" => (200, vec![("Transfer-Encoding", "gzip, chunked")], chunked),
        "te-twice" => (
            200,
            vec![
                ("Transfer-Encoding", "chunked"),
                ("Transfer-Encoding", "chunked"),
            ],
            chunked,
        ),
        "redirect-cl-te" => (
            302,
            vec![
                ("Location", "/page"),
                ("Content-Length", "0"),
                ("Transfer-Encoding", "chunked"),
            ],
            "0\r\n\r\n",
        ),
        _ => return None,
    };
    let mut bytes = head(status, html, None, &extra);
    bytes.extend_from_slice(body.as_bytes());
    Some(bytes)
}

fn head(
    status: u16,
    content_type: Option<&str>,
    length: Option<usize>,
    extra: &[(&str, &str)],
) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n");
    if let Some(content_type) = content_type {
        out.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    if let Some(length) = length {
        out.push_str(&format!("Content-Length: {length}\r\n"));
    }
    for (name, value) in extra {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out.into_bytes()
}

fn response(status: u16, content_type: Option<&str>, body: &[u8]) -> Vec<u8> {
    let mut bytes = head(status, content_type, Some(body.len()), &[]);
    bytes.extend_from_slice(body);
    bytes
}

fn redirect(location: &str) -> Vec<u8> {
    head(302, None, Some(0), &[("Location", location)])
}

/// Whether `ip` is the trap's address.
pub fn is_trap(ip: IpAddr) -> bool {
    ip == IpAddr::V4(TRAP_IP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_yield_target_and_host() {
        let cases = [
            (
                "GET /a?b HTTP/1.1\r\nHost: allowed.test:81\r\n\r\n",
                ("/a?b", "allowed.test:81"),
            ),
            ("GET / HTTP/1.1\r\nhOsT:x\r\n\r\n", ("/", "x")),
            ("garbage\r\n\r\n", ("", "")),
        ];
        for (raw, (target, host)) in cases {
            assert_eq!(parse_head(raw), (target.to_string(), host.to_string()));
        }
    }

    #[test]
    fn typed_route_sends_the_type_named_in_the_path_or_none() {
        let text = |reply: Reply| match reply {
            Reply::Whole(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            other => panic!("{other:?}"),
        };
        assert!(text(route("/type/image/svg+xml")).contains("Content-Type: image/svg+xml\r\n"));
        assert!(!text(route("/type/")).contains("Content-Type"));
        assert!(text(route("/anything")).contains("Content-Type: text/html"));
        assert!(text(route("/loop")).contains("Location: /loop\r\n"));
    }

    #[test]
    fn hostile_routes_send_the_framing_and_codings_their_cases_name() {
        let text = |reply: Reply| match reply {
            Reply::Whole(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            other => panic!("{other:?}"),
        };
        let cl_te = text(route("/framing/cl-te"));
        assert!(
            cl_te.contains("Content-Length: 5\r\n")
                && cl_te.contains("Transfer-Encoding: chunked\r\n")
        );
        let two = text(route("/framing/two-lengths"));
        assert_eq!(two.matches("Content-Length:").count(), 2, "{two}");
        assert!(text(route("/framing/nope")).starts_with("HTTP/1.1 404"));
        assert!(text(route("/encoded/gzip")).contains("Content-Encoding: gzip\r\n"));
        assert!(text(route("/encoded/stacked")).contains("Content-Encoding: identity, gzip\r\n"));
        assert_eq!(
            text(route("/encoded/two-headers"))
                .matches("Content-Encoding:")
                .count(),
            2
        );
    }

    #[test]
    fn oversize_routes_exceed_the_cap_and_at_cap_does_not() {
        let body_len = |path: &str| match route(path) {
            Reply::Whole(bytes) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                text.split_once("\r\n\r\n")
                    .map(|(_, b)| b.len())
                    .unwrap_or(0)
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(body_len("/at-cap"), AT_CAP);
        assert!(body_len("/big-declared") > AT_CAP);
        assert!(body_len("/big-streamed") > AT_CAP);
    }
}
