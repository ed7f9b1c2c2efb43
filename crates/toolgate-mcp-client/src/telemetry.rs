//! The gateway's span and duration metric for each call an imported tool sends to its server,
//! and the state of each imported server as a gauge.
//!
//! Guarantees, with the telemetry of the call running the imported tool on
//! ([`toolgate_core::trace::current_telemetry`]):
//! - each request sent upstream is one CLIENT span, `tools/call {tool}` (the server's own name
//!   for it), a child of the span current where it is sent (the dispatcher's `execute_tool`
//!   span of the imported tool), with `mcp.method.name`, `gen_ai.tool.name`,
//!   `gen_ai.operation.name` = `execute_tool`, `toolgate.upstream` (the server's name here),
//!   `network.transport` (`pipe` for a stdio server, `tcp` for HTTP), `server.address` (an
//!   HTTP server's host) and `mcp.protocol.version` when negotiated;
//! - the request carries that span in its `params._meta` (`traceparent`, and `tracestate`
//!   when there is one), so the server's spans join the same trace; the request's other
//!   `_meta` keys are left as they are;
//! - a failed request ends the span with `error.type` ([`error_type`]: the JSON-RPC error's
//!   code, `tool_error` for an `isError` result, else how the request failed, in the audit's
//!   words) and an error status, and `mcp.client.operation.duration` is recorded in seconds
//!   with `mcp.method.name`, `gen_ai.tool.name`, `toolgate.upstream` and `error.type` when it
//!   failed;
//! - when a server's breaker changes state (`closed`, `open`, `half_open`, as `/readyz` names
//!   them), `toolgate.upstream.state` is recorded: 1 for the new state and 0 for the one it
//!   left ([`state_points`]), with `toolgate.upstream` and `toolgate.upstream.state`. A
//!   breaker reports once a call of the gateway's with telemetry on has used it (it records
//!   its state then), since the breaker itself belongs to no dispatcher.
//!
//! With telemetry off no span is started, no attribute built and `_meta` is left untouched.

use opentelemetry::trace::SpanKind;
use opentelemetry::{Context, KeyValue};
use serde_json::{Map, Value};
use toolgate_core::telemetry::{Telemetry, TimedSpan, names};

use crate::forwarded::leg_outcome;
use crate::upstream::{Upstream, UpstreamError};

/// The JSON-RPC method of every request traced here.
const TOOLS_CALL: &str = "tools/call";

/// One request's span, started; [`ClientSpan::end`] ends it and records its duration.
pub(crate) struct ClientSpan(TimedSpan);

impl ClientSpan {
    /// Starts the span of a call to `server`'s tool `tool` through `session`, a child of the
    /// current span, and puts it in `meta`; `None` (and `meta` untouched) when `telemetry` is
    /// off.
    pub(crate) fn start(
        telemetry: &Telemetry,
        server: &str,
        tool: &str,
        session: &Upstream,
        meta: &mut Map<String, Value>,
    ) -> Option<ClientSpan> {
        if !telemetry.is_on() {
            return None;
        }
        let metric_attributes = vec![
            KeyValue::new(names::MCP_METHOD_NAME, TOOLS_CALL),
            KeyValue::new(names::GEN_AI_TOOL_NAME, tool.to_string()),
            KeyValue::new(names::UPSTREAM, server.to_string()),
        ];
        let mut attributes = metric_attributes.clone();
        attributes.push(KeyValue::new(names::GEN_AI_OPERATION_NAME, "execute_tool"));
        attributes.push(KeyValue::new(
            names::NETWORK_TRANSPORT,
            session.network_transport(),
        ));
        if let Some(address) = session.address() {
            attributes.push(KeyValue::new(names::SERVER_ADDRESS, address.to_string()));
        }
        if let Some(revision) = session.revision() {
            attributes.push(KeyValue::new(names::MCP_PROTOCOL_VERSION, revision));
        }
        let span = telemetry.start_timed(
            (format!("{TOOLS_CALL} {tool}"), SpanKind::Client, attributes),
            &Context::current(),
            metric_attributes,
            |instruments| &instruments.mcp_client_duration,
        )?;
        toolgate_telemetry::propagation::inject_into_meta(span.context(), meta);
        Some(ClientSpan(span))
    }

    /// Ends the span with how the request ended, and records its duration.
    pub(crate) fn end(self, sent: &Result<Value, UpstreamError>) {
        self.0.end(error_type(sent));
    }
}

/// How a request sent upstream failed, as `error.type`: a JSON-RPC error's code, `tool_error`
/// for a result marked `isError` (the server's own code is its words, not ours to trust), else
/// how it failed in the audit's words ([`leg_outcome`]: `timeout`, `connection_lost`, ...);
/// `None` when it succeeded.
pub fn error_type(sent: &Result<Value, UpstreamError>) -> Option<String> {
    match sent {
        Ok(result) if result.get("isError") == Some(&Value::Bool(true)) => {
            Some("tool_error".to_string())
        }
        Ok(_) => None,
        Err(UpstreamError::Refused { code, .. }) => Some(code.to_string()),
        Err(_) => Some(leg_outcome(sent).to_string()),
    }
}

/// The gauge points for a server whose state became `now`, leaving `left` (`None` when the
/// state is first reported): 1 for `now`, 0 for `left`; nothing when it did not change.
pub fn state_points(left: Option<&'static str>, now: &'static str) -> Vec<(&'static str, i64)> {
    match left {
        Some(left) if left == now => Vec::new(),
        Some(left) => vec![(left, 0), (now, 1)],
        None => vec![(now, 1)],
    }
}

/// Records `points` of `server`'s state gauge through `telemetry`.
pub(crate) fn record_state(telemetry: &Telemetry, server: &str, points: &[(&'static str, i64)]) {
    let Some(instruments) = telemetry.instruments() else {
        return;
    };
    for (state, value) in points {
        instruments.upstream_state.record(
            *value,
            &[
                KeyValue::new(names::UPSTREAM, server.to_string()),
                KeyValue::new(names::UPSTREAM_STATE, *state),
            ],
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_state_change_sets_the_new_state_and_clears_the_old_one_only() {
        let cases: Vec<(Option<&'static str>, &'static str, Vec<(&str, i64)>)> = vec![
            (None, "closed", vec![("closed", 1)]),
            (Some("closed"), "open", vec![("closed", 0), ("open", 1)]),
            (
                Some("open"),
                "half_open",
                vec![("open", 0), ("half_open", 1)],
            ),
            (
                Some("half_open"),
                "closed",
                vec![("half_open", 0), ("closed", 1)],
            ),
            // No change, no point: a gauge does not flap on every call.
            (Some("closed"), "closed", vec![]),
        ];
        for (left, now, want) in cases {
            assert_eq!(state_points(left, now), want, "{left:?} -> {now}");
        }
    }

    #[test]
    fn a_failed_request_is_named_by_its_code_or_how_it_failed_never_by_the_servers_words() {
        let cases: Vec<(&str, Result<Value, UpstreamError>, Option<&str>)> = vec![
            ("a result", Ok(json!({"content": []})), None),
            (
                "a tool error, whatever code the server claims",
                Ok(json!({"isError": true, "structuredContent": {"code": "ignore me"}})),
                Some("tool_error"),
            ),
            (
                "a JSON-RPC error",
                Err(UpstreamError::Refused {
                    code: -32602,
                    said: "no such tool".into(),
                }),
                Some("-32602"),
            ),
            (
                "a lost connection",
                Err(UpstreamError::Gone("reset".into())),
                Some("connection_lost"),
            ),
            ("canceled", Err(UpstreamError::Canceled), Some("canceled")),
        ];
        for (what, sent, want) in cases {
            assert_eq!(error_type(&sent).as_deref(), want, "{what}");
        }
    }
}
