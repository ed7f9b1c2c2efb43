//! W3C trace context in and out of an MCP request's `_meta` and an HTTP request's headers.
//!
//! The MCP specification (2026-07-28, "OpenTelemetry trace context") reserves `traceparent`,
//! `tracestate` and `baggage` in `_meta`, in the W3C formats. Guarantees:
//! - [`context_from_meta`] and [`context_from_headers`] give a remote parent only for a
//!   well-formed `traceparent` (the SDK's W3C propagator parses it); anything else (a malformed
//!   or oversized value, a non-string, an all-zero id, a version it cannot read) is ignored and
//!   gives `None`: never an error, never a call refused for it.
//! - [`inject_into_meta`] writes the current span's `traceparent` (and `tracestate`, when
//!   there is one) into an outgoing request's `_meta`, replacing what was there, and writes
//!   nothing when there is no valid span (telemetry off).
//! - `baggage` is neither read nor forwarded: it is arbitrary caller data that toolgate does
//!   not use, and forwarding a host's baggage to an upstream server would carry it further
//!   than the host chose.

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::{Map, Value};

/// The `_meta` keys trace context travels under.
pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

/// Longer values are not parsed: a `traceparent` is 55 characters, and the W3C limit for
/// `tracestate` is 32 members of at most 256 characters each.
const MAX_TRACEPARENT_LEN: usize = 64;
const MAX_TRACESTATE_LEN: usize = 8_192;

struct MetaExtractor<'a>(&'a Map<String, Value>);

impl Extractor for MetaExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        bounded(key, self.0.get(key)?.as_str()?)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        bounded(key, self.0.get(key)?.to_str().ok()?)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

struct MetaInjector<'a>(&'a mut Map<String, Value>);

impl Injector for MetaInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), Value::String(value));
    }
}

fn bounded<'a>(key: &str, value: &'a str) -> Option<&'a str> {
    if key == TRACEPARENT {
        return (value.len() <= MAX_TRACEPARENT_LEN && has_traceparent_shape(value))
            .then_some(value);
    }
    (value.len() <= MAX_TRACESTATE_LEN).then_some(value)
}

/// The W3C field lengths (2-32-16-2 lower-case hex digits, and for a later version more
/// fields after a dash), checked before the SDK's parser, which reads shorter ids as valid.
fn has_traceparent_shape(value: &str) -> bool {
    let hex = |field: &str, len: usize| {
        field.len() == len
            && field
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let mut fields = value.splitn(5, '-');
    let (Some(version), Some(trace_id), Some(span_id), Some(flags)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return false;
    };
    let rest_allowed = match fields.next() {
        None => true,
        Some(_) => version != "00",
    };
    hex(version, 2) && hex(trace_id, 32) && hex(span_id, 16) && hex(flags, 2) && rest_allowed
}

fn remote_parent(cx: Context) -> Option<Context> {
    let valid = {
        let span = cx.span();
        let context = span.span_context();
        context.is_valid() && context.is_remote()
    };
    valid.then_some(cx)
}

/// The remote parent an MCP request's `_meta` names, if it names a well-formed one.
pub fn context_from_meta(meta: Option<&Map<String, Value>>) -> Option<Context> {
    let meta = meta?;
    meta.get(TRACEPARENT)?;
    remote_parent(TraceContextPropagator::new().extract(&MetaExtractor(meta)))
}

/// The remote parent an HTTP request's `traceparent` header names, if well formed.
pub fn context_from_headers(headers: &http::HeaderMap) -> Option<Context> {
    headers.get(TRACEPARENT)?;
    remote_parent(TraceContextPropagator::new().extract(&HeaderExtractor(headers)))
}

/// Writes `cx`'s span into an outgoing request's `_meta` (`traceparent`, and `tracestate`
/// when it has one); nothing when `cx` has no valid span.
pub fn inject_into_meta(cx: &Context, meta: &mut Map<String, Value>) {
    if !cx.span().span_context().is_valid() {
        return;
    }
    meta.remove(TRACESTATE);
    TraceContextPropagator::new().inject_context(cx, &mut MetaInjector(meta));
    if meta.get(TRACESTATE).and_then(Value::as_str) == Some("") {
        meta.remove(TRACESTATE);
    }
}

#[cfg(test)]
#[path = "propagation_tests.rs"]
mod tests;
