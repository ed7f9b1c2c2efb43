//! The MCP client side: other servers' tools imported under our policy. So far the pure parts:
//! reading the `mcpServers` JSON ([`config`]), pinning tool definitions ([`pins`]) and the
//! lock file that keeps the pins ([`lock`]);
//! connecting, importing and the gateway are still to come (issue 12).

pub mod config;
pub mod lock;
pub mod pins;
