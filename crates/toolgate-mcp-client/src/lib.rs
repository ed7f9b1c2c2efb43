//! toolgate-mcp-client: toolgate as an MCP client, other servers' tools imported under our
//! policy. Library code below the wiring (which opens the imports for every front end) and
//! beside the toolsets: it names no toolset, no front end and not the MCP server.
//!
//! - [`config`] reads the `mcpServers` JSON desktop hosts use, and [`default_env`] decides
//!   what environment a stdio server of it gets;
//! - [`upstream`] connects to one server (stdio child or Streamable HTTP through the egress
//!   exit) and lists and calls its tools with bounds;
//! - [`plan`] decides, purely, what a remote tool becomes here (name, risk, description,
//!   schema) or why it is refused;
//! - [`forwarded`] declares it as a tool of ours whose calls are forwarded, with untrusted
//!   results and claimed writes;
//! - [`pins`] and [`lock`] pin each server's tool definitions and quarantine drift, and
//!   [`diff`] shows the drift;
//! - [`oauth`] logs in to servers that ask for OAuth and authorizes connections to them, with
//!   tokens kept in [`credentials`] (the person's own file) or, for a gateway acting for many
//!   users, in each user's sealed entries of the [`vault`];
//! - [`outage`] decides what clients see while a server is down (`fail` or `hide`);
//! - [`server_requests`] answers a server's elicitation (the call's person) and sampling
//!   (our model, where allowed) for the call of ours they belong to;
//! - [`users`] holds each user's own session with a server that asks for OAuth;
//! - [`telemetry`] traces each call sent upstream and reports each server's state;
//! - [`imports`] puts it all together for every configured server, for every front end.

pub mod breaker;
pub mod config;
pub mod credentials;
pub mod default_env;
pub mod diff;
pub mod forwarded;
pub mod imports;
pub mod live;
pub mod lock;
pub mod oauth;
pub mod outage;
pub mod pins;
pub mod plan;
pub mod server_requests;
pub mod telemetry;
pub mod upstream;
pub mod users;
pub mod vault;
pub mod vault_keys;

/// The `_meta` key under which a client may pass its own idempotency key for a `tools/call`:
/// the server reads it, and [`forwarded`] sends it with every forwarded write, so a toolgate
/// server behind us replays instead of repeating.
pub const IDEMPOTENCY_KEY_META: &str = "toolgate/idempotencyKey";
