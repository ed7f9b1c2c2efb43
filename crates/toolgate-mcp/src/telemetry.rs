//! The server's span and duration metric for each MCP request it serves, as the OpenTelemetry
//! semantic conventions for MCP name them.
//!
//! Guarantees, with the dispatcher's telemetry on:
//! - every request for tools, resources and prompts (`tools/call`, `tools/list`,
//!   `resources/list`, `resources/templates/list`, `resources/read`, `prompts/list`,
//!   `prompts/get`) is one SERVER span, `{mcp.method.name} {target}` where the target is the
//!   tool's or the prompt's name (`tools/call notes_search`, `prompts/get weekly_review`) and
//!   `{mcp.method.name}` alone otherwise, with `mcp.method.name`, `jsonrpc.request.id` (as a
//!   string), `mcp.session.id` (a 2025-11-25 HTTP session's), `mcp.protocol.version`,
//!   `network.transport` (`pipe` over stdio, `tcp` over HTTP); for a call, `gen_ai.tool.name`
//!   and `gen_ai.operation.name` = `execute_tool`; for a prompt, `gen_ai.prompt.name`; for a
//!   read, `mcp.resource.uri` on the span only (never in its name or the metric: a URI is
//!   high-cardinality, as the conventions warn);
//! - its parent is the remote span the request's `_meta.traceparent` names when that is well
//!   formed, else the one the HTTP `traceparent` header names when well formed, else none (a
//!   new trace) ([`remote_parent`]); a malformed value is ignored, never refused;
//! - the request's work runs with the span current, so the dispatcher's `execute_tool` span is
//!   its child;
//! - a failed request ends its span with `error.type` (a tool error's code, `tool_error` for
//!   an `isError` result without one, the JSON-RPC error's code) and an error status
//!   ([`error_type_of`]), and `mcp.server.operation.duration` is recorded in seconds with
//!   `mcp.method.name`, `gen_ai.tool.name`, `network.transport`, `mcp.protocol.version` and
//!   `error.type` when it failed.
//!
//! With telemetry off, nothing here runs: the handler checks `is_on()` and serves the request
//! as it would without this module.

use opentelemetry::trace::SpanKind;
use opentelemetry::{Context, KeyValue};
use rmcp::model::CallToolResponse;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Map, Value};
use toolgate_core::telemetry::{Telemetry, TimedSpan, names};

/// The session header of a 2025-11-25 Streamable HTTP session.
const SESSION_HEADER: &str = "mcp-session-id";

/// The `network.transport` of a request: HTTP requests carry their parts, stdio ones none.
pub(crate) fn network_transport(ctx: &RequestContext<RoleServer>) -> &'static str {
    if ctx.extensions.get::<http::request::Parts>().is_some() {
        "tcp"
    } else {
        "pipe"
    }
}

/// The parent of a request's span: `_meta`'s `traceparent` (the params' own, as a call built
/// in-process carries it, else the one rmcp moved into the request context) when well formed,
/// else the HTTP header's when well formed, else none.
pub fn remote_parent(
    params_meta: Option<&Map<String, Value>>,
    request_meta: Option<&Map<String, Value>>,
    headers: Option<&http::HeaderMap>,
) -> Option<Context> {
    toolgate_telemetry::propagation::context_from_meta(params_meta)
        .or_else(|| toolgate_telemetry::propagation::context_from_meta(request_meta))
        .or_else(|| headers.and_then(toolgate_telemetry::propagation::context_from_headers))
}

/// What a request is about, as its span names it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// A list, or anything without one subject.
    None,
    /// A tool call's tool.
    Tool(&'a str),
    /// A prompt's name.
    Prompt(&'a str),
    /// A resource read's URI (an attribute of the span, not its name).
    Resource(&'a str),
}

/// One request's span, started; [`ServerSpan::end`] ends it and records its duration.
pub(crate) struct ServerSpan(TimedSpan);

impl ServerSpan {
    /// Starts the span of the `method` request `ctx` about `target`; `None` when `telemetry`
    /// is off.
    pub(crate) fn start(
        telemetry: &Telemetry,
        method: &'static str,
        target: Target<'_>,
        ctx: &RequestContext<RoleServer>,
        params_meta: Option<&Map<String, Value>>,
    ) -> Option<ServerSpan> {
        if !telemetry.is_on() {
            return None;
        }
        let parts = ctx.extensions.get::<http::request::Parts>();
        let parent = remote_parent(params_meta, Some(&ctx.meta), parts.map(|p| &p.headers))
            .unwrap_or_default();
        let transport = network_transport(ctx);
        let version = ctx.protocol_version().map(|v| v.to_string());
        let mut metric_attributes = vec![
            KeyValue::new(names::MCP_METHOD_NAME, method),
            KeyValue::new(names::NETWORK_TRANSPORT, transport),
        ];
        if let Some(version) = &version {
            metric_attributes.push(KeyValue::new(names::MCP_PROTOCOL_VERSION, version.clone()));
        }
        let mut attributes = metric_attributes.clone();
        attributes.push(KeyValue::new(names::JSONRPC_REQUEST_ID, ctx.id.to_string()));
        let session = parts
            .and_then(|p| p.headers.get(SESSION_HEADER))
            .and_then(|v| v.to_str().ok());
        if let Some(session) = session {
            attributes.push(KeyValue::new(names::MCP_SESSION_ID, session.to_string()));
        }
        let name = match target {
            Target::Tool(tool) => {
                let tool_name = KeyValue::new(names::GEN_AI_TOOL_NAME, tool.to_string());
                attributes.push(tool_name.clone());
                attributes.push(KeyValue::new(names::GEN_AI_OPERATION_NAME, "execute_tool"));
                metric_attributes.push(tool_name);
                format!("{method} {tool}")
            }
            Target::Prompt(prompt) => {
                let prompt_name = KeyValue::new(names::GEN_AI_PROMPT_NAME, prompt.to_string());
                attributes.push(prompt_name.clone());
                metric_attributes.push(prompt_name);
                format!("{method} {prompt}")
            }
            Target::Resource(uri) => {
                attributes.push(KeyValue::new(names::MCP_RESOURCE_URI, uri.to_string()));
                method.to_string()
            }
            Target::None => method.to_string(),
        };
        telemetry
            .start_timed(
                (name, SpanKind::Server, attributes),
                &parent,
                metric_attributes,
                |instruments| &instruments.mcp_server_duration,
            )
            .map(ServerSpan)
    }

    /// The context that makes the span current, for the request's work.
    pub(crate) fn context(&self) -> Context {
        self.0.context().clone()
    }

    /// Ends the span, failed with `error_type` when there is one, and records the duration.
    pub(crate) fn end(self, error_type: Option<String>) {
        self.0.end(error_type);
    }
}

/// What failed in a request's answer, as `error.type`: a JSON-RPC error's code; for a tool
/// result marked `isError`, the tool error's code toolgate puts in its structured content,
/// else `tool_error`; `None` for an answer that is not a failure (a result, a question).
pub fn error_type_of(answer: &Result<CallToolResponse, ErrorData>) -> Option<String> {
    match answer {
        Err(error) => Some(error.code.0.to_string()),
        Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => Some(
            result
                .structured_content
                .as_ref()
                .and_then(|s| s.get("code"))
                .and_then(Value::as_str)
                .unwrap_or("tool_error")
                .to_string(),
        ),
        Ok(_) => None,
    }
}

/// What failed in an answer that is a result or a JSON-RPC error (every request but a tool
/// call): the error's code.
pub(crate) fn rpc_error_type<T>(answer: &Result<T, ErrorData>) -> Option<String> {
    answer.as_ref().err().map(|error| error.code.0.to_string())
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TraceContextExt;
    use rmcp::model::{CallToolResult, ContentBlock, InputRequiredResult};
    use serde_json::json;

    use super::*;

    const GOOD: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const OTHER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// What a case is, its params' `_meta`, the context's `_meta`, the headers, and the trace
    /// id of the parent it should find.
    type Case<'a> = (
        &'a str,
        Option<&'a Map<String, Value>>,
        Option<&'a Map<String, Value>>,
        Option<&'a http::HeaderMap>,
        Option<&'a str>,
    );

    fn meta(traceparent: Value) -> Map<String, Value> {
        let mut meta = Map::new();
        meta.insert("traceparent".into(), traceparent);
        meta
    }

    fn headers(traceparent: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert("traceparent", traceparent.parse().unwrap());
        headers
    }

    fn trace_id(cx: &Context) -> String {
        cx.span().span_context().trace_id().to_string()
    }

    #[test]
    fn the_parent_is_meta_then_header_and_a_malformed_one_never_wins() {
        let good = meta(json!(GOOD));
        let malformed = meta(json!(
            "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01"
        ));
        let number = meta(json!(42));
        let header = headers(OTHER);
        let bad_header = headers("00-zz-b7ad6b7169203331-01");
        let good_id = "0af7651916cd43dd8448eb211c80319c";
        let other_id = "4bf92f3577b34da6a3ce929d0e0e4736";
        let cases: Vec<Case> = vec![
            ("nothing", None, None, None, None),
            (
                "params meta",
                Some(&good),
                None,
                Some(&header),
                Some(good_id),
            ),
            (
                "request meta",
                None,
                Some(&good),
                Some(&header),
                Some(good_id),
            ),
            ("header alone", None, None, Some(&header), Some(other_id)),
            (
                "malformed meta, good header",
                None,
                Some(&malformed),
                Some(&header),
                Some(other_id),
            ),
            (
                "non-string meta, good header",
                Some(&number),
                None,
                Some(&header),
                Some(other_id),
            ),
            (
                "malformed both",
                None,
                Some(&malformed),
                Some(&bad_header),
                None,
            ),
        ];
        for (what, params, request, headers, want) in cases {
            let got = remote_parent(params, request, headers);
            assert_eq!(got.as_ref().map(trace_id).as_deref(), want, "{what}");
        }
    }

    #[test]
    fn a_failed_answer_names_the_tool_errors_code_or_the_json_rpc_code() {
        let mut coded = CallToolResult::error(vec![ContentBlock::text("no")]);
        coded.structured_content = Some(json!({"code": "forbidden"}));
        let plain = CallToolResult::error(vec![ContentBlock::text("no")]);
        let fine = CallToolResult::success(vec![ContentBlock::text("yes")]);
        let cases: Vec<(&str, Result<CallToolResponse, ErrorData>, Option<&str>)> = vec![
            ("a result", Ok(fine.into()), None),
            ("a toolgate tool error", Ok(coded.into()), Some("forbidden")),
            (
                "another server's tool error",
                Ok(plain.into()),
                Some("tool_error"),
            ),
            (
                "a question",
                Ok(InputRequiredResult::new(None, Some("t".into())).into()),
                None,
            ),
            (
                "an unknown tool",
                Err(ErrorData::invalid_params("no such tool", None)),
                Some("-32602"),
            ),
        ];
        for (what, answer, want) in cases {
            assert_eq!(error_type_of(&answer).as_deref(), want, "{what}");
        }
    }
}
