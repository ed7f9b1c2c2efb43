//! JSON-RPC message handling in the MCP server: the bytes of one input are written to the real
//! stdio transport (`toolgate_mcp::serve_io_until`: the line guard, rmcp's decoding and the
//! server's dispatch, over a pipe; no network), then a `tools/list` probe must be answered on
//! the same session within 10 s. A panic, a hang or a session that stops serving is a crash.
//!
//! The first byte chooses the session: even, the long-lived one (initialized with the
//! 2025-11-25 handshake), odd, a new one not yet initialized (the probe then runs the
//! handshake first). The notes toolset serves a sample store in a temporary folder.
#![no_main]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use toolgate_check::robustness::wire::StdioSession;
use toolgate_core::Principal;
use toolgate_mcp::McpServer;
use toolgate_wiring::{ExitsConfig, Seat, Store, StoreKind, ToolsetName};

const WAIT: Duration = Duration::from_secs(10);

struct World {
    runtime: tokio::runtime::Runtime,
    server: McpServer,
    shared: Mutex<Option<StdioSession>>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let dir = std::env::temp_dir().join(format!("toolgate-fuzz-rpc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let store =
            Store::open_or_init(StoreKind::Notes, &dir.join("notes.sqlite")).expect("a store");
        let ready = toolgate_wiring::dispatcher(
            ToolsetName::Notes,
            &store,
            &ExitsConfig::default(),
            Seat::new(Principal::local("fuzz", &[])),
        )
        .expect("the notes dispatcher");
        let server = McpServer::for_toolset(ready, &store, "fuzz");
        World {
            runtime,
            server,
            shared: Mutex::new(None),
        }
    })
}

static PROBES: AtomicU64 = AtomicU64::new(0);

fn probe_id() -> String {
    format!("fuzz-probe-{}-9f3c", PROBES.fetch_add(1, Ordering::Relaxed))
}

/// Sends a request with a fresh probe id; any answer with that id (a result or an error) shows
/// the session still serving.
async fn probe(session: &mut StdioSession, method: &str) -> Result<(), String> {
    let id = probe_id();
    let message = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method});
    session
        .request(&message, WAIT)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, payload)) = data.split_first() else {
        return;
    };
    let world = world();
    world.runtime.block_on(async {
        if mode % 2 == 1 {
            let mut session = StdioSession::start(world.server.clone()).expect("a session");
            session
                .send(payload, WAIT)
                .await
                .expect("the input was taken");
            // ping is answered in every state of a session: before, during and after a handshake.
            if let Err(e) = probe(&mut session, "ping").await {
                panic!("a new session stopped serving after the input: {e}");
            }
            session.close(WAIT).await;
            return;
        }
        let mut shared = world.shared.lock().expect("the session lock");
        if shared.is_none() {
            let mut session = StdioSession::start(world.server.clone()).expect("a session");
            session.initialize(WAIT).await.expect("the handshake");
            *shared = Some(session);
        }
        let session = shared.as_mut().expect("a session");
        session
            .send(payload, WAIT)
            .await
            .expect("the input was taken");
        if let Err(e) = probe(session, "tools/list").await {
            panic!("the session stopped serving after the input: {e}");
        }
    });
});
