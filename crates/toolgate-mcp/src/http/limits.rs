//! What one HTTP server takes on ([`HttpLimits`]): body size, calls and connections at once,
//! and how long each stage of a request may take.
//!
//! Refuses: a limit of zero ([`HttpLimits::check`]), which would refuse or time out everything;
//! the server does not start on one.

use std::time::Duration;

/// What one server takes on.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// The largest POST body read, in bytes.
    pub max_body_bytes: usize,
    /// POSTs served at once.
    pub max_concurrent: usize,
    /// The longest a POST's response may take, stream included. It bounds a call waiting for
    /// a person's approval too, so it is longer than the approval timeout.
    pub request_time: Duration,
    /// How long shutdown waits for in-flight POSTs.
    pub drain_time: Duration,
    /// Connections open at once. One more is answered 503 and closed at once, so descriptors
    /// and per-connection buffers stay bounded whatever clients hold open.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, counted from when the
    /// server starts waiting for them: on a new connection and again after each response, so
    /// it is also the idle timeout of a kept-alive connection. Past it the connection is
    /// closed (a slowloris sending a header byte a second, a client that connects and says
    /// nothing, a half-open connection).
    pub header_time: Duration,
    /// How long a POST body may take to arrive in full once its headers have; past it the
    /// request is answered 408 and its connection closed, and the POST slot is freed.
    pub body_time: Duration,
    /// The longest a GET stream (a session's server-to-client events) stays open; then it
    /// ends, and the client may open it again (with `Last-Event-ID` to resume).
    pub stream_time: Duration,
    /// How long a write to a client may make no progress (a client that does not read its
    /// responses or its stream, one that vanished without closing) before its connection is
    /// closed: what waits to be sent is bounded by the socket's buffers and one response.
    pub write_stall_time: Duration,
}

impl HttpLimits {
    /// Why these limits cannot be served: a count or a time of zero would refuse or time out
    /// everything. [`serve_http`](super::serve_http) refuses to start on them.
    pub fn check(&self) -> Result<(), String> {
        let limits = self;
        let counts = [
            ("max_body_bytes", limits.max_body_bytes),
            ("max_concurrent", limits.max_concurrent),
            ("max_connections", limits.max_connections),
        ];
        if let Some((name, _)) = counts.iter().find(|(_, n)| *n == 0) {
            return Err(format!("HTTP limit `{name}` is 0: nothing could be served"));
        }
        let times = [
            ("request_time", limits.request_time),
            ("header_time", limits.header_time),
            ("body_time", limits.body_time),
            ("stream_time", limits.stream_time),
            ("write_stall_time", limits.write_stall_time),
        ];
        if let Some((name, _)) = times.iter().find(|(_, t)| t.is_zero()) {
            return Err(format!(
                "HTTP limit `{name}` is 0 s: every request would time out"
            ));
        }
        Ok(())
    }
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body_bytes: 1024 * 1024,
            max_concurrent: 64,
            request_time: Duration::from_secs(360),
            drain_time: Duration::from_secs(10),
            max_connections: 256,
            header_time: Duration::from_secs(10),
            body_time: Duration::from_secs(30),
            stream_time: Duration::from_secs(300),
            write_stall_time: Duration::from_secs(30),
        }
    }
}
