//! A static page server on 127.0.0.1 for clip tasks: serves the files of one folder, nothing
//! else, for as long as its owner holds it, and stops when dropped. It has no time limit of its
//! own: an eval or an injection suite runs for hours, and a server that had stopped after one
//! hour (as this one once did) turned every later clip task into a `transient_dependency`
//! failure that measured nothing. The thread cannot outlive the process that owns it.
//!
//! Guarantees: binds loopback only; a request path that is not a plain file name in the folder
//! (`..`, slashes, hidden files) is a 404; each connection is answered once and closed.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub struct PageServer {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl PageServer {
    pub fn start(dir: &Path) -> std::io::Result<PageServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let halt = Arc::clone(&stop);
        let dir = dir.to_path_buf();
        std::thread::Builder::new()
            .name("toolgate-eval-pages".into())
            .spawn(move || {
                while !halt.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let _ = serve(stream, &dir);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })?;
        Ok(PageServer { port, stop })
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The file a request path names, if it is a plain file name in `dir`.
pub fn file_for(dir: &Path, request_path: &str) -> Option<PathBuf> {
    let name = request_path.split(['?', '#']).next()?.strip_prefix('/')?;
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    plain.then(|| dir.join(name)).filter(|p| p.is_file())
}

fn serve(mut stream: std::net::TcpStream, dir: &Path) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Drain the headers (bounded).
    for _ in 0..100 {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let (status, body) = match file_for(dir, path).and_then(|f| std::fs::read(f).ok()) {
        Some(body) => ("200 OK", body),
        None => ("404 Not Found", b"not found".to_vec()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(port: u16, path: &str) -> std::io::Result<String> {
        use std::io::Read;
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok(response)
    }

    #[test]
    fn the_server_serves_until_its_owner_drops_it_then_stops() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("page.html"), "<p>focaccia</p>").unwrap();
        let server = PageServer::start(dir.path()).unwrap();
        let port = server.port;
        let page = get(port, "/page.html").unwrap();
        assert!(
            page.starts_with("HTTP/1.1 200") && page.ends_with("<p>focaccia</p>"),
            "{page}"
        );
        assert!(
            get(port, "/missing.html")
                .unwrap()
                .starts_with("HTTP/1.1 404")
        );
        drop(server);
        // The accept loop notices the stop within one poll; bounded wait for the listener to close.
        let mut refused = false;
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                refused = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            refused,
            "the page server still accepts connections after being dropped"
        );
    }

    #[test]
    fn only_plain_file_names_in_the_folder_are_served() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("page.html"), "<p>x</p>").unwrap();
        std::fs::write(dir.path().join(".secret"), "x").unwrap();
        let cases = [
            ("/page.html", true),
            ("/page.html?q=1", true),
            ("/../page.html", false),
            ("/sub/page.html", false),
            ("/.secret", false),
            ("/missing.html", false),
            ("page.html", false),
            ("/", false),
        ];
        for (path, served) in cases {
            assert_eq!(file_for(dir.path(), path).is_some(), served, "{path}");
        }
    }
}
