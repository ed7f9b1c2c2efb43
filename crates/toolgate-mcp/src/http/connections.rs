//! Accepting connections, bounded in count and time whatever a client holds open.
//!
//! Guarantees: at most [`HttpLimits::max_connections`] connections are served at once; one
//! more is answered 503 and closed within [`REFUSAL_TIME`], by at most [`REFUSALS_AT_ONCE`]
//! such answers at a time (past those it is closed unanswered); a failed accept pauses the loop
//! [`ACCEPT_RETRY`] instead of spinning; a request's headers must arrive within
//! [`HttpLimits::header_time`]; a write the client does not take for
//! [`HttpLimits::write_stall_time`] resets the connection ([`StallGuard`]); HTTP/1.1 only.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::HttpLimits;
use super::answers::error_body;
use super::front::Front;

/// Serves connections from `listener` through `front` until `shutdown` completes; each is
/// watched by `graceful`, so the caller can drain them.
pub(super) async fn accept_until(
    listener: &TcpListener,
    front: &Front,
    limits: HttpLimits,
    graceful: &GracefulShutdown,
    shutdown: impl Future<Output = ()>,
) {
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(REFUSALS_AT_ONCE));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // A failed accept (out of descriptors, a reset) ends that connection only; a
                // short pause keeps a lasting failure (EMFILE) from spinning the loop.
                Err(_) => {
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
        };
        let Ok(slot) = Arc::clone(&connections).try_acquire_owned() else {
            // Over the cap: told so at once, by a bounded number of short-lived tasks; past
            // those the connection is just closed.
            if let Ok(refusing) = Arc::clone(&refusals).try_acquire_owned() {
                tokio::spawn(refuse_connection(stream, limits.max_connections, refusing));
            }
            continue;
        };
        serve_connection(stream, front.clone(), limits, graceful, slot);
    }
}

/// Serves one connection's requests through `front` on a task of its own, holding its `slot`
/// until it closes.
fn serve_connection(
    stream: TcpStream,
    front: Front,
    limits: HttpLimits,
    graceful: &GracefulShutdown,
    slot: OwnedSemaphorePermit,
) {
    // Responses are small and a client waits for each: without this, Nagle's algorithm
    // and delayed ACKs hold a reply back for tens of milliseconds.
    let _ = stream.set_nodelay(true);
    let service = hyper::service::service_fn(move |request| {
        let front = front.clone();
        async move { Ok::<_, Infallible>(front.handle(request).await) }
    });
    let io = StallGuard::new(stream, limits.write_stall_time);
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_time)
        .serve_connection(TokioIo::new(io), service);
    let connection = graceful.watch(connection);
    tokio::spawn(async move {
        // A connection that breaks mid-request has already cancelled its calls.
        let _ = connection.await;
        drop(slot);
    });
}

/// Connections over the cap being told so at once; past these they are closed unanswered.
const REFUSALS_AT_ONCE: usize = 64;
/// How long a refused connection is given to take its 503.
const REFUSAL_TIME: Duration = Duration::from_secs(1);
/// The pause after a failed accept.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Answers a connection over the cap with a 503 (JSON-RPC error body, `Retry-After`) and
/// closes it, all within [`REFUSAL_TIME`]. What the client sent is read (up to 64 KiB) before
/// the close, so the kernel does not reset the connection over the answer.
async fn refuse_connection(
    mut stream: TcpStream,
    max_connections: usize,
    _refusing: OwnedSemaphorePermit,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = error_body(
        Value::Null,
        -32000,
        &format!(
            "server busy: it holds at most {max_connections} connections at once; retry shortly"
        ),
    )
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut read = 0;
        while read < 64 * 1024 {
            match stream.read(&mut sink).await? {
                0 => break,
                n => read += n,
            }
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
}

/// A connection's socket whose writes fail once they have made no progress for the stall
/// time, and which is then reset: a client that stops reading (or vanished without closing)
/// cannot hold a response, the kernel's send queue and its connection slot for ever.
struct StallGuard {
    inner: TcpStream,
    stall: Duration,
    /// Running while a write, flush or shutdown is pending.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl StallGuard {
    fn new(inner: TcpStream, stall: Duration) -> Self {
        StallGuard {
            inner,
            stall,
            stalled: None,
        }
    }

    /// `poll` as a write of `asked` bytes. Only a write the kernel takes whole (the client is
    /// keeping up) stops the stall timer; a partial or pending one starts it, and once it has
    /// run out the write fails: a client that reads a trickle is cut as one that reads nothing.
    fn guard(
        &mut self,
        cx: &mut Context<'_>,
        asked: usize,
        poll: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<std::io::Result<usize>>,
    ) -> Poll<std::io::Result<usize>> {
        let polled = poll(Pin::new(&mut self.inner), cx);
        match polled {
            Poll::Ready(Ok(n)) if n >= asked => {
                self.stalled = None;
                return polled;
            }
            Poll::Ready(Err(_)) => return polled,
            Poll::Ready(Ok(_)) | Poll::Pending => {}
        }
        let stall = self.stall;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        if timer.as_mut().poll(cx).is_pending() {
            return polled;
        }
        // Closed with a reset, so the kernel drops what it still queues for this client
        // instead of keeping it (and the connection) until it is read.
        let _ = self.inner.set_zero_linger();
        Poll::Ready(Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the client did not keep up with its answer for {} s: connection closed",
                stall.as_secs()
            ),
        )))
    }
}

impl tokio::io::AsyncRead for StallGuard {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for StallGuard {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.guard(cx, buf.len(), |inner, cx| inner.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let asked = bufs.iter().map(|b| b.len()).sum();
        self.guard(cx, asked, |inner, cx| inner.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    // A TCP flush or shutdown does not wait for the client: nothing to guard.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
