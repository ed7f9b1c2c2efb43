//! The GET streams each 2025-11-25 session has open, so that a DELETE ends them before it is
//! answered, as the official SDKs' servers do (the TypeScript SDK's `handleDeleteRequest`
//! closes the session's streams, then answers 200). rmcp ends them too when it closes the
//! session, but a moment after its answer: an SDK client that closes right after its DELETE
//! then aborts a stream still open, and reports "SSE stream disconnected".
//!
//! Guarantees: a stream registered for a session ends (its body ends cleanly) once
//! [`SessionStreams::end`] is called for that session, and `end` returns once every such
//! stream's body is gone or `wait` has passed, whichever comes first; streams of other
//! sessions are untouched. Entries of streams that ended on their own are pruned at each
//! registration, so the map holds only live streams (and, until the next registration, ones
//! that just ended).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::oneshot;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::ResponseBody;

/// One open stream: how to end it, and how to learn its body is gone.
struct Open {
    end: CancellationToken,
    gone: oneshot::Receiver<()>,
}

/// The open GET streams, by session id.
#[derive(Default)]
pub(super) struct SessionStreams {
    open: Mutex<HashMap<String, Vec<Open>>>,
}

impl SessionStreams {
    /// `body`, a stream of `session`, ending when the session is ended here.
    pub(super) fn register(&self, session: &str, body: ResponseBody) -> ResponseBody {
        let end = CancellationToken::new();
        let (alive, gone) = oneshot::channel();
        if let Ok(mut open) = self.open.lock() {
            open.retain(|_, streams| {
                streams.retain_mut(|s| {
                    matches!(s.gone.try_recv(), Err(oneshot::error::TryRecvError::Empty))
                });
                !streams.is_empty()
            });
            open.entry(session.to_string()).or_default().push(Open {
                end: end.clone(),
                gone,
            });
        }
        ResponseBody::new(UntilEnded {
            inner: body,
            end: Box::pin(end.cancelled_owned()),
            _alive: alive,
        })
    }

    /// Ends `session`'s streams, and waits (at most `wait`) for their bodies to be gone.
    pub(super) async fn end(&self, session: &str, wait: Duration) {
        let streams = self
            .open
            .lock()
            .ok()
            .and_then(|mut open| open.remove(session))
            .unwrap_or_default();
        for stream in &streams {
            stream.end.cancel();
        }
        let all_gone = all_gone(streams.into_iter().map(|s| s.gone));
        let _ = tokio::time::timeout(wait, all_gone).await;
    }
}

/// Waits for every receiver to resolve (sent or dropped).
async fn all_gone(receivers: impl Iterator<Item = oneshot::Receiver<()>>) {
    for receiver in receivers {
        let _ = receiver.await;
    }
}

/// A stream's body that ends when its session is ended here.
struct UntilEnded {
    inner: ResponseBody,
    end: Pin<Box<WaitForCancellationFutureOwned>>,
    /// Dropped with the body: tells [`SessionStreams::end`] the stream is gone.
    _alive: oneshot::Sender<()>,
}

impl Body for UntilEnded {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.end.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A body that never ends on its own (an idle event stream).
    struct Idle;

    impl Body for Idle {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    fn idle() -> ResponseBody {
        ResponseBody::new(Idle)
    }

    #[tokio::test]
    async fn a_deleted_sessions_streams_end_and_no_other_sessions_do() {
        let streams = SessionStreams::default();
        let mut a = streams.register("a", idle());
        let mut b = streams.register("b", idle());
        let ended = tokio::spawn(async move {
            let frame = a.frame().await;
            drop(a);
            frame.is_none()
        });
        streams.end("a", Duration::from_secs(30)).await;
        assert!(ended.await.unwrap(), "a's stream ended without a frame");
        // b's stream is still open: nothing to read yet.
        let polled = poll_once(&mut b).await;
        assert!(polled.is_none(), "b's stream was ended too");
        assert_eq!(streams.open.lock().unwrap().len(), 1);
    }

    /// One poll of `body`'s next frame: `Some` when it was ready.
    async fn poll_once(
        body: &mut ResponseBody,
    ) -> Option<Option<Result<Frame<Bytes>, std::convert::Infallible>>> {
        std::future::poll_fn(|cx| match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(Some(frame)),
            Poll::Pending => Poll::Ready(None),
        })
        .await
    }
}
