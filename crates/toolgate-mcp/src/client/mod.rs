//! The MCP client side: other servers' tools imported under our policy. So far only pinning
//! ([`pins`]); connecting, importing and the gateway are still to come (issue 12).

pub mod pins;
