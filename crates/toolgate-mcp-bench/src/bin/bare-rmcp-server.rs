//! The floors of the MCP-over-HTTP benchmark: rmcp's Streamable HTTP service with one read
//! tool, `books_get` (`{"ids": [int]}` in, a JSON text out), served with hyper on 127.0.0.1
//! and nothing else in the way (no dispatcher, no schema check).
//!
//! Two floors, one binary:
//! - the constant floor (default): `books_get` answers a fixed book, no store;
//! - the same-work floor (`--books-db PATH`): `books_get` does what toolgate's books-v2
//!   `books_get` does, with the same code: the same SQLite read (`rows::by_ids` through the
//!   books store's pool) and the same row JSON (`BookRow::detailed`), called directly. What
//!   toolgate costs beyond it is its own stack (dispatcher, validation, observation, trace),
//!   not the work.
//!
//! Usage: `bare-rmcp-server (--port PORT | --stdio) [--books-db PATH] [--max-seconds S]
//! [--json-response true|false] [--nodelay true|false]`. `--stdio` serves one session over
//! stdin/stdout with rmcp's own stdio transport instead (the floor of
//! `scripts/bench-mcp-stdio.sh`; it ends when stdin closes). `--books-db` opens (or creates, with
//! the sample catalogue) the books store there. `--nodelay false` leaves Nagle's algorithm on for accepted
//! connections (to show what that costs: a response written in pieces waits for the client's
//! delayed ACK); the default sets `TCP_NODELAY`.
//! It binds 127.0.0.1 only and stops itself after `--max-seconds` (default 900).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use toolgate_books::BooksStore;
use toolgate_books::rows::{self, BookRow};

/// The same allocator as `toolgate`, so the floor differs from it only by our stack.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The one tool, stateless, so every session gets a cheap clone.
#[derive(Clone)]
struct Bare {
    tools: Arc<Vec<Tool>>,
    /// The same-work floor's store; `None`: the constant floor.
    store: Option<BooksStore>,
}

impl Bare {
    fn new(store: Option<BooksStore>) -> Self {
        let schema = json!({
            "type": "object",
            "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
            "required": ["ids"],
            "additionalProperties": false
        });
        let schema = match schema {
            Value::Object(map) => map,
            _ => Default::default(),
        };
        let tool = Tool::new("books_get", "Get books by id.", schema);
        Bare {
            tools: Arc::new(vec![tool]),
            store,
        }
    }
}

impl ServerHandler for Bare {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bare-rmcp", env!("CARGO_PKG_VERSION")))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28])
    }

    async fn list_tools(
        &self,
        _params: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if params.name != "books_get" {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {}", params.name),
                None,
            ));
        }
        let ids = params
            .arguments
            .as_ref()
            .and_then(|args| args.get("ids"))
            .and_then(Value::as_array)
            .ok_or_else(|| ErrorData::invalid_params("ids: expected an array of integers", None))?;
        let ids: Vec<i64> = ids.iter().filter_map(Value::as_i64).collect();
        let text = match &self.store {
            None => {
                let books: Vec<Value> = ids
                    .iter()
                    .map(|id| json!({"id": id, "title": "The Left Hand of Darkness", "author": "Ursula K. Le Guin", "year": 1969, "status": "read"}))
                    .collect();
                json!({"books": books, "missing": []}).to_string()
            }
            // What books-v2's books_get does, without the dispatcher around it.
            Some(store) => {
                let (found, missing) =
                    store
                        .read_sql(move |conn| rows::by_ids(conn, &ids))
                        .await
                        .map_err(|e| ErrorData::internal_error(e.message.clone(), None))?;
                let books: Vec<Value> = found.iter().map(BookRow::detailed).collect();
                json!({"books": books, "not_found": missing}).to_string()
            }
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// The floor of scripts/bench-mcp.sh: a bare rmcp Streamable HTTP server on 127.0.0.1 with one
/// `books_get`-shaped tool answering a fixed book; it stops by itself after --max-seconds.
#[derive(clap::Parser)]
#[command(version)]
struct Args {
    /// The loopback port to listen on.
    #[arg(long, required_unless_present = "stdio", conflicts_with = "stdio")]
    port: Option<u16>,
    /// Serve one session over stdin/stdout (rmcp's stdio transport) instead of HTTP.
    #[arg(long)]
    stdio: bool,
    /// Serve the same-work floor: books_get reads this books store (created with the sample
    /// catalogue when missing) with toolgate's own store code.
    #[arg(long, value_name = "PATH")]
    books_db: Option<std::path::PathBuf>,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 900)]
    max_seconds: u64,
    /// Answer stateless requests with application/json instead of an event stream.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    json_response: bool,
    /// Seconds between SSE keep-alive comments on open event streams; 0 turns them off. The
    /// default is rmcp's own (15), which `toolgate serve` keeps too.
    #[arg(long, default_value_t = 15)]
    sse_keep_alive_secs: u64,
    /// TCP_NODELAY on accepted connections (`--nodelay false` shows what Nagle costs).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    nodelay: bool,
}

fn main() -> anyhow::Result<()> {
    let args = <Args as clap::Parser>::parse();
    let (port, max_seconds, json_response, nodelay) = (
        args.port,
        args.max_seconds,
        args.json_response,
        args.nodelay,
    );
    let keep_alive =
        (args.sse_keep_alive_secs > 0).then(|| Duration::from_secs(args.sse_keep_alive_secs));

    let store = match &args.books_db {
        Some(path) => Some(
            BooksStore::open_or_init(path)
                .with_context(|| format!("the books store at {}", path.display()))?,
        ),
        None => None,
    };
    // One worker per core we may run on (the bench pins us to one with taskset).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let Some(port) = port else {
        return runtime.block_on(serve_stdio(
            Bare::new(store),
            Duration::from_secs(max_seconds),
        ));
    };
    runtime.block_on(serve(
        Bare::new(store),
        port,
        Duration::from_secs(max_seconds),
        json_response,
        nodelay,
        keep_alive,
    ))
}

/// One session over stdin/stdout, until the client closes stdin or `max` has passed.
async fn serve_stdio(bare: Bare, max: Duration) -> anyhow::Result<()> {
    let running = bare
        .serve(rmcp::transport::stdio())
        .await
        .context("the stdio session did not start")?;
    tokio::select! {
        ended = running.waiting() => {
            ended.context("the stdio session")?;
        }
        () = tokio::time::sleep(max) => {
            eprintln!("bare-rmcp-server: {}s limit reached, stopping", max.as_secs());
        }
    }
    Ok(())
}

async fn serve(
    bare: Bare,
    port: u16,
    max: Duration,
    json_response: bool,
    nodelay: bool,
    keep_alive: Option<Duration>,
) -> anyhow::Result<()> {
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(keep_alive)
        .with_json_response(json_response);
    let cancel = config.cancellation_token.clone();
    let service: StreamableHttpService<Bare, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(bare.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("bind 127.0.0.1:{port}"))?;
    eprintln!("bare-rmcp-server listening on http://127.0.0.1:{port}/mcp");
    let deadline = tokio::time::sleep(max);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            () = &mut deadline => break,
            accepted = listener.accept() => {
                let (stream, _) = accepted.context("accept")?;
                stream.set_nodelay(nodelay)?;
                let service = TowerToHyperService::new(service.clone());
                let cancel = cancel.clone();
                tokio::spawn(async move {
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service);
                    tokio::select! {
                        _ = conn => {}
                        () = cancel.cancelled() => {}
                    }
                });
            }
        }
    }
    cancel.cancel();
    eprintln!(
        "bare-rmcp-server: {}s limit reached, stopping",
        max.as_secs()
    );
    Ok(())
}
