//! toolgate over MCP: a server that offers one toolset's tools to an MCP host. Every
//! `tools/call` goes through the dispatcher under the server's principal with origin `mcp`, so
//! validation, policy, approvals, idempotency, bounds, redaction and traces are exactly those of
//! our own loop; no handler is reachable any other way.
//!
//! Transports: stdio ([`serve_stdio`]) and Streamable HTTP at `/mcp` ([`serve_http`]), both
//! protocol revisions (2025-11-25 with `initialize` and sessions, stateless 2026-07-28). A call
//! that needs a human is asked through the protocol ([`approval`]); a client that cannot ask
//! gets `approval_denied` and nothing runs, unless the console's approval inbox is configured:
//! then the call waits there, and a host that opens URLs is sent to the ticket's page
//! ([`inbox`]). Over HTTP the server can be an OAuth 2.1 resource
//! server ([`auth`]): then each request's principal comes from its access token.
//!
//! With the dispatcher's telemetry on, each `tools/call` (and `tools/list`) served is a SERVER
//! span, the child of the caller's `traceparent` when it sends a well-formed one, and the
//! parent of the dispatcher's span for the call ([`telemetry`]).

pub mod approval;
pub mod auth;
mod catalogue;
pub mod http;
pub mod inbox;
pub mod prompts;
pub mod resources;
mod server;
pub mod shared_memory;
mod stdio;
pub mod telemetry;

pub use catalogue::{annotations_for, mcp_tool};
pub use http::{HttpLimits, serve_http};
pub use server::{IDEMPOTENCY_KEY_META, McpServer, ServeError, UNTRUSTED_META, VERSION_META};
pub use stdio::{
    DRAIN_DEADLINE, MAX_LINE_BYTES, MAX_NESTING, serve_io_until, serve_stdio, serve_stdio_until,
};
