//! `toolgate serve`: one toolset to MCP hosts, through the wiring's dispatcher.

use std::sync::Arc;

use toolgate_core::Principal;
use toolgate_core::trace::{JsonlTrace, NoTrace, TraceSink};
use toolgate_mcp::{HttpLimits, McpServer, ServeError, serve_http, serve_stdio};
use toolgate_wiring::Seat;

use super::{CommandError, open_store, server_runtime};
use crate::cli::ServeArgs;
use crate::config::Config;

pub fn run(config: &Config, args: &ServeArgs) -> Result<(), CommandError> {
    if args.http.is_none()
        && (args.max_body_bytes.is_some()
            || args.max_concurrent.is_some()
            || args.request_timeout.is_some())
    {
        return Err(CommandError::Usage(
            "--max-body-bytes, --max-concurrent and --request-timeout apply to --http only".into(),
        ));
    }
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
    let transport = if args.http.is_some() { "http" } else { "stdio" };
    let run_id = format!("mcp-{transport}-{}-{}", std::process::id(), unix_now());
    let server = McpServer::for_toolset(ready, &store, &run_id);
    let runtime = server_runtime()?;
    match args.http {
        None => {
            eprintln!(
                "toolgate: serving {} ({}) over stdio",
                args.toolset,
                path.display()
            );
            runtime.block_on(serve_stdio(server))?;
        }
        Some(address) => runtime.block_on(async {
            // Checked before binding, so a public address is never listened on at all.
            toolgate_mcp::http::refuse_non_loopback(address)?;
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(|e| ServeError::Start(format!("cannot listen on {address}: {e}")))?;
            let defaults = HttpLimits::default();
            let limits = HttpLimits {
                max_body_bytes: args.max_body_bytes.unwrap_or(defaults.max_body_bytes),
                max_concurrent: args
                    .max_concurrent
                    .map_or(defaults.max_concurrent, usize::from),
                request_time: args
                    .request_timeout
                    .map_or(defaults.request_time, std::time::Duration::from_secs),
                ..defaults
            };
            let bound = listener.local_addr()?;
            eprintln!(
                "toolgate: serving {} ({}) at http://{bound}/mcp, loopback only: no \
                 authorization is configured, so other machines cannot reach it",
                args.toolset,
                path.display()
            );
            serve_http(
                server,
                listener,
                limits,
                toolgate_mcp::http::sigterm_or_ctrl_c(),
            )
            .await?;
            eprintln!("toolgate: stopped after draining in-flight requests");
            Ok::<_, CommandError>(())
        })?,
    }
    Ok(())
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
