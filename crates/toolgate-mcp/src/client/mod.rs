//! The MCP client side: other servers' tools imported under our policy. So far the pure parts:
//! reading the `mcpServers` JSON ([`config`]) and pinning tool definitions ([`pins`]);
//! connecting, importing and the gateway are still to come (issue 12).

pub mod config;
pub mod pins;
