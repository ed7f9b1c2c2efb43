//! The OTLP/HTTP listener: `POST /v1/traces` and `POST /v1/metrics` with a protobuf body.
//!
//! Answers, in this order: 404 for any other path, 405 for another method, 415 for a body that
//! is not `application/x-protobuf` or is compressed, 413 for a body over
//! [`MAX_BODY_BYTES`](crate::MAX_BODY_BYTES) (declared or actual; never read past the bound),
//! 503 when the receiver was told to fail, 400 for a body that does not decode, and otherwise
//! 200 with an empty `Export*ServiceResponse` in protobuf. Only a 200 records anything, and it
//! records at once: the configured delay is waited after that, before the answer goes out. HTTP/1.1 only: the OTLP/HTTP exporters speak
//! it over plain `http://`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use tokio::net::TcpListener;

use crate::state::{Outcome, Shared};
use crate::{MAX_BODY_BYTES, Transport};

/// Which export a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Traces,
    Metrics,
}

/// Why a request is refused before its body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    NotFound,
    MethodNotAllowed,
    UnsupportedMediaType,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Refusal::NotFound => StatusCode::NOT_FOUND,
            Refusal::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Refusal::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }
}

/// Where a request goes, from its method, path and headers alone.
pub(crate) fn route(method: &Method, path: &str, headers: &HeaderMap) -> Result<Signal, Refusal> {
    let signal = match path {
        "/v1/traces" => Signal::Traces,
        "/v1/metrics" => Signal::Metrics,
        _ => return Err(Refusal::NotFound),
    };
    if method != Method::POST {
        return Err(Refusal::MethodNotAllowed);
    }
    let media_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(str::trim);
    if !media_type.is_some_and(|t| t.eq_ignore_ascii_case("application/x-protobuf")) {
        return Err(Refusal::UnsupportedMediaType);
    }
    // A compressed body would not decode; refuse it plainly instead of answering 400.
    let encoded = headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .any(|value| !value.as_bytes().eq_ignore_ascii_case(b"identity"));
    if encoded {
        return Err(Refusal::UnsupportedMediaType);
    }
    Ok(signal)
}

/// Whether the declared length is already over the bound (an unparsable length is left to
/// the body reader, which enforces the bound on what actually arrives).
pub(crate) fn declared_too_large(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .is_some_and(|length| length > MAX_BODY_BYTES as u64)
}

/// Accepts connections until the task is dropped (the receiver's runtime shutting down).
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors and the like: wait a little rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(answer(request, &shared).await) }
            });
            // A connection that breaks mid-request has nobody left to tell.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(request: Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let behaviour = shared.behaviour();
    let response = decide(request, shared, behaviour.fail).await;
    if !behaviour.delay.is_zero() {
        tokio::time::sleep(behaviour.delay).await;
    }
    response
}

async fn decide(request: Request<Incoming>, shared: &Shared, fail: bool) -> Response<Full<Bytes>> {
    let signal = match route(request.method(), request.uri().path(), request.headers()) {
        Ok(signal) => signal,
        Err(refusal) => {
            shared.count(Transport::Http, Outcome::Refused);
            return plain(refusal.status(), "not an OTLP/HTTP protobuf export\n");
        }
    };
    if declared_too_large(request.headers()) {
        shared.count(Transport::Http, Outcome::TooLarge);
        return plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body over the receiver's bound\n",
        );
    }
    let headers: crate::state::Headers = request
        .headers()
        .iter()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_string())))
        .collect();
    let body = match read_bounded(request.into_body(), MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(BodyError::TooLarge) => {
            shared.count(Transport::Http, Outcome::TooLarge);
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body over the receiver's bound\n",
            );
        }
        Err(BodyError::Unreadable) => {
            shared.count(Transport::Http, Outcome::Malformed);
            return plain(StatusCode::BAD_REQUEST, "the body could not be read\n");
        }
    };
    if fail {
        shared.count(Transport::Http, Outcome::FailedOnPurpose);
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "the receiver was told to fail\n",
        );
    }
    let decoded = match signal {
        Signal::Traces => ExportTraceServiceRequest::decode(body).map(|request| {
            shared.record_traces(Transport::Http, headers, request);
            ExportTraceServiceResponse::default().encode_to_vec()
        }),
        Signal::Metrics => ExportMetricsServiceRequest::decode(body).map(|request| {
            shared.record_metrics(Transport::Http, request);
            ExportMetricsServiceResponse::default().encode_to_vec()
        }),
    };
    match decoded {
        Ok(encoded) => protobuf(encoded),
        Err(_) => {
            shared.count(Transport::Http, Outcome::Malformed);
            plain(
                StatusCode::BAD_REQUEST,
                "the body is not a valid export request\n",
            )
        }
    }
}

/// Why a body was not read whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// More than the bound arrived; reading stopped there.
    TooLarge,
    /// The connection broke or the framing was invalid.
    Unreadable,
}

/// The whole body, or an error as soon as more than `bound` bytes have arrived.
pub(crate) async fn read_bounded<B>(body: B, bound: usize) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match Limited::new(body, bound).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
            Err(BodyError::TooLarge)
        }
        Err(_) => Err(BodyError::Unreadable),
    }
}

fn protobuf(body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/x-protobuf"),
    );
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, http::HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn only_protobuf_posts_to_the_two_export_paths_are_routed() {
        const PROTOBUF: &[(&str, &str)] = &[("content-type", "application/x-protobuf")];
        let post = Method::POST;
        let cases = [
            ("traces", &post, "/v1/traces", PROTOBUF, Ok(Signal::Traces)),
            (
                "metrics",
                &post,
                "/v1/metrics",
                PROTOBUF,
                Ok(Signal::Metrics),
            ),
            (
                "logs are not served",
                &post,
                "/v1/logs",
                PROTOBUF,
                Err(Refusal::NotFound),
            ),
            ("root", &post, "/", PROTOBUF, Err(Refusal::NotFound)),
            (
                "trailing slash",
                &post,
                "/v1/traces/",
                PROTOBUF,
                Err(Refusal::NotFound),
            ),
            (
                "get",
                &Method::GET,
                "/v1/traces",
                PROTOBUF,
                Err(Refusal::MethodNotAllowed),
            ),
            (
                "json",
                &post,
                "/v1/traces",
                &[("content-type", "application/json")],
                Err(Refusal::UnsupportedMediaType),
            ),
            (
                "no content type",
                &post,
                "/v1/traces",
                &[],
                Err(Refusal::UnsupportedMediaType),
            ),
            (
                "parameters and case",
                &post,
                "/v1/traces",
                &[("content-type", "Application/X-Protobuf; charset=binary")],
                Ok(Signal::Traces),
            ),
            (
                "gzip",
                &post,
                "/v1/traces",
                &[
                    ("content-type", "application/x-protobuf"),
                    ("content-encoding", "gzip"),
                ],
                Err(Refusal::UnsupportedMediaType),
            ),
            (
                "identity encoding",
                &post,
                "/v1/metrics",
                &[
                    ("content-type", "application/x-protobuf"),
                    ("content-encoding", "identity"),
                ],
                Ok(Signal::Metrics),
            ),
        ];
        for (name, method, path, pairs, expected) in cases {
            assert_eq!(route(method, path, &headers(pairs)), expected, "{name}");
        }
    }

    #[tokio::test]
    async fn a_body_over_the_bound_is_refused_and_one_at_it_is_read() {
        let bound = 1024;
        let cases: &[(&str, usize, Result<usize, BodyError>)] = &[
            ("empty", 0, Ok(0)),
            ("at the bound", bound, Ok(bound)),
            ("one over", bound + 1, Err(BodyError::TooLarge)),
            ("far over", bound * 64, Err(BodyError::TooLarge)),
        ];
        for (name, size, expected) in cases {
            let body = Full::new(Bytes::from(vec![0_u8; *size]));
            let read = read_bounded(body, bound).await.map(|bytes| bytes.len());
            assert_eq!(read, *expected, "{name}");
        }
    }

    #[test]
    fn a_declared_length_over_the_bound_is_refused_before_reading() {
        let over = (MAX_BODY_BYTES + 1).to_string();
        let at = MAX_BODY_BYTES.to_string();
        let cases: &[(&str, Option<&str>, bool)] = &[
            ("no length", None, false),
            ("small", Some("10"), false),
            ("at the bound", Some(&at), false),
            ("one over", Some(&over), true),
            ("garbage is left to the reader", Some("lots"), false),
        ];
        for (name, length, expected) in cases {
            let mut map = HeaderMap::new();
            if let Some(length) = length {
                map.insert(header::CONTENT_LENGTH, length.parse().unwrap());
            }
            assert_eq!(declared_too_large(&map), *expected, "{name}");
        }
    }
}
