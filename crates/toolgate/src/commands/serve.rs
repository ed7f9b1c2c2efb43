//! `toolgate serve`: one toolset to MCP hosts, through the wiring's dispatcher.

use std::sync::Arc;

use toolgate_core::Principal;
use toolgate_core::trace::{JsonlTrace, NoTrace, TraceSink};
use toolgate_mcp::{McpServer, serve_stdio};
use toolgate_wiring::Seat;

use super::{CommandError, open_store, runtime};
use crate::cli::ServeArgs;
use crate::config::Config;

pub fn run(config: &Config, args: &ServeArgs) -> Result<(), CommandError> {
    let kind = args.toolset.store();
    let path = config.store_path(kind, args.db.as_deref())?;
    let store = open_store(kind, &path)?;
    let trace: Arc<dyn TraceSink> = match &args.trace {
        Some(path) => Arc::new(JsonlTrace::create(path)?),
        None => Arc::new(NoTrace),
    };
    // No approval channel yet: every call that needs a human is denied.
    let seat = Seat::new(Principal::local("local-user", &[]))
        .with_mode(config.mode.unwrap_or_default())
        .with_trace(trace);
    let ready = toolgate_wiring::dispatcher(args.toolset, &store, &config.exits(), seat)?;
    // One run per server process: a host's retried write (a new JSON-RPC id) replays its
    // receipt instead of running again.
    let run_id = format!("mcp-stdio-{}-{}", std::process::id(), unix_now());
    eprintln!(
        "toolgate: serving {} ({}) over stdio",
        args.toolset,
        path.display()
    );
    let server = McpServer::new(ready, &run_id);
    runtime()?.block_on(serve_stdio(server))?;
    Ok(())
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
