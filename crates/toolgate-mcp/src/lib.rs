//! toolgate over MCP: a server that offers one toolset's tools to an MCP host. Every
//! `tools/call` goes through the dispatcher under the server's principal with origin `mcp`, so
//! validation, policy, approvals, idempotency, bounds, redaction and traces are exactly those of
//! our own loop; no handler is reachable any other way.
//!
//! This first slice serves stdio and fails closed on approvals: a call that needs a human is
//! denied (`approval_denied`), because asking through the protocol (elicitation on 2025-11-25,
//! `input_required` on 2026-07-28) is not built yet.

mod catalogue;
pub mod http;
mod server;
mod stdio;

pub use catalogue::{annotations_for, mcp_tool};
pub use http::{HttpLimits, serve_http};
pub use server::{McpServer, ServeError};
pub use stdio::{DRAIN_DEADLINE, MAX_LINE_BYTES, serve_stdio, serve_stdio_until};
