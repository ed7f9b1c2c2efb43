//! The front's own answers: JSON-RPC error bodies with their HTTP status, a refusal with its
//! `WWW-Authenticate` challenge, and the response body that ends by its request's deadline
//! ([`Bounded`]).
//!
//! Guarantees: every answer the front writes itself is JSON (`application/json`), a JSON-RPC
//! error body a client can show but for the resource metadata; a response that outlives its
//! deadline ends, a stream with a last event carrying the timeout error for its request; a
//! POST's concurrency permit is held until its body ends.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tokio::sync::OwnedSemaphorePermit;

use super::ResponseBody;
use super::message::RequestId;
use crate::auth::{Refusal, ResourceServer};

/// The answer to a body that is not JSON.
pub(super) fn not_json(error: &serde_json::Error) -> Response<ResponseBody> {
    error_response(
        StatusCode::BAD_REQUEST,
        Value::Null,
        -32700,
        &format!("Parse error: the body is not JSON ({error})"),
    )
}

/// The answer to a refused request: its status, the `WWW-Authenticate` challenge and a
/// JSON-RPC error body saying why.
pub(super) fn refused(
    auth: &ResourceServer,
    refusal: &Refusal,
    id: Value,
) -> Response<ResponseBody> {
    let status = refusal.status();
    let mut response = error_response(status, id, -32001, &refusal.message());
    // A session refusal is a 404 like an unknown session's: no challenge, the token was good.
    if !matches!(refusal, Refusal::ForeignSession)
        && let Ok(challenge) = HeaderValue::from_str(&auth.challenge(refusal))
    {
        response
            .headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, challenge);
    }
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("5"));
    }
    response
}

pub(super) fn json_response(status: StatusCode, body: &Value) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A response body that holds its request's concurrency permit until it ends, and ends by the
/// request's deadline: a stream gets a last event with the timeout error for its request.
pub(super) struct Bounded {
    pub(super) inner: ResponseBody,
    pub(super) deadline: Pin<Box<tokio::time::Sleep>>,
    /// For a stream: the request's id and the time limit, for the last event's error.
    pub(super) on_timeout: Option<(RequestId, Duration)>,
    pub(super) ended: bool,
    /// A POST's concurrency permit (a GET stream holds none).
    pub(super) _permit: Option<OwnedSemaphorePermit>,
}

impl Body for Bounded {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            // Dropping the inner body closes rmcp's stream, which cancels the call.
            self.ended = true;
            self.inner = BoxBody::new(http_body_util::Empty::new());
            return Poll::Ready(
                self.on_timeout
                    .take()
                    .map(|(id, limit)| Ok(Frame::data(timeout_event(id.value(), limit)))),
            );
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }
}

fn timeout_message(limit: Duration) -> String {
    format!(
        "request took longer than the server's limit of {} s and was cancelled",
        limit.as_secs()
    )
}

pub(super) fn timed_out(id: Value, limit: Duration) -> Response<ResponseBody> {
    error_response(
        StatusCode::GATEWAY_TIMEOUT,
        id,
        -32603,
        &timeout_message(limit),
    )
}

fn timeout_event(id: Value, limit: Duration) -> Bytes {
    let error = error_body(id, -32603, &timeout_message(limit));
    Bytes::from(format!("event: message\ndata: {error}\n\n"))
}

pub(super) fn error_body(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// `response` marked as the connection's last (`Connection: close`).
pub(super) fn closing<B>(mut response: Response<B>) -> Response<B> {
    response
        .headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

pub(super) fn error_response(
    status: StatusCode,
    id: Value,
    code: i64,
    message: &str,
) -> Response<ResponseBody> {
    json_response(status, &error_body(id, code, message))
}
