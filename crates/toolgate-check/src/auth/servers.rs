//! The resource servers under test: the real MCP server over Streamable HTTP (the notes
//! toolset through the wiring's dispatcher, as `toolgate serve notes --http` builds it), in
//! this process on a fresh 127.0.0.1 port, as an OAuth resource server of the suite's
//! authorization server with every `[serve.auth]` setting at its default but the scope table.
//!
//! Guarantees: each instance has its own store and resource URI; both write one JSON Lines
//! trace (the dispatcher's decision records, the egress exit's key fetches and the front's
//! `auth` decisions, each naming its resource); [`Instance::stop`] shuts the server down and
//! waits for it, bounded.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use toolgate_core::Principal;
use toolgate_core::trace::TraceSink;
use toolgate_egress::EgressConfig;
use toolgate_mcp::auth::{AUTH_CONTENT_TYPES, AuthConfig, ResourceServer};
use toolgate_mcp::http::{Access, serve_http_with};
use toolgate_mcp::{HttpLimits, McpServer, ServeError};
use toolgate_wiring::{ExitsConfig, Seat, Store, StoreKind, ToolsetName};

use super::case::ServerName;
use crate::CheckError;

const SUITE: &str = "auth";

/// The scope table both servers use: `notes:read` grants searching and reading, `notes:write`
/// the whole toolset.
pub fn scopes() -> BTreeMap<String, Vec<String>> {
    let mut scopes = BTreeMap::new();
    scopes.insert(
        "notes:read".to_string(),
        vec!["notes_search".to_string(), "notes_get".to_string()],
    );
    scopes.insert("notes:write".to_string(), vec!["notes".to_string()]);
    scopes
}

/// The `[serve.auth]` of a server at `resource` trusting `issuer`: defaults but the scopes.
pub fn config(issuer: &str, resource: &str) -> AuthConfig {
    AuthConfig::new(issuer, resource, scopes())
}

/// One running server.
pub struct Instance {
    pub name: ServerName,
    pub resource: String,
    pub address: std::net::SocketAddr,
    pub store: Store,
    pub tools: Vec<String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
}

impl Instance {
    /// Starts `name` with its store in `dir`, trusting `issuer` (on 127.0.0.1:`issuer_port`),
    /// tracing to `trace`.
    pub async fn start(
        name: ServerName,
        dir: &Path,
        issuer: &str,
        issuer_port: u16,
        trace: Arc<dyn TraceSink>,
    ) -> Result<Instance, CheckError> {
        let setup = |what: &str, e: &dyn std::fmt::Display| {
            CheckError::setup(SUITE, format!("the {} server: {what}: {e}", name.as_str()))
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| setup("cannot listen on 127.0.0.1", &e))?;
        let address = listener.local_addr().map_err(|e| setup("no address", &e))?;
        let resource = format!("http://{address}/mcp");
        let store_path = dir.join(format!("auth-notes-{}.sqlite", name.as_str()));
        let store = Store::open_or_init(StoreKind::Notes, &store_path)
            .map_err(|e| setup("cannot open its store", &e))?;
        let seat = Seat::new(Principal::local("local-user", &[])).with_trace(Arc::clone(&trace));
        let exits = ExitsConfig::new(EgressConfig::default(), None);
        let ready = toolgate_wiring::dispatcher(ToolsetName::Notes, &store, &exits, seat)
            .map_err(|e| setup("cannot build the notes dispatcher", &e))?;
        let run_id = format!("check-auth-{}", name.as_str());
        let server = McpServer::new(ready, &run_id);
        let tools: Vec<String> = server.tools().iter().map(|t| t.name.to_string()).collect();
        // The authorization server runs on this machine: allowed explicitly, as in a test.
        let egress = ExitsConfig::new(EgressConfig::default(), None)
            .allow_loopback("http", issuer_port)
            .egress_answering(&AUTH_CONTENT_TYPES, Arc::clone(&trace))
            .map_err(|e| setup("the key fetches' egress is refused", &e))?;
        let auth = ResourceServer::start(&config(issuer, &resource), "notes", &tools, egress)
            .await
            .map_err(|e| setup("cannot start as a resource server", &e))?
            .with_trace(trace);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let limits = HttpLimits {
            drain_time: Duration::from_secs(2),
            request_time: Duration::from_secs(20),
            ..HttpLimits::default()
        };
        let served = tokio::spawn(serve_http_with(
            server,
            listener,
            limits,
            Access::OAuth(Arc::new(auth)),
            async {
                let _ = stopped.await;
            },
        ));
        Ok(Instance {
            name,
            resource,
            address,
            store,
            tools,
            stop: Some(stop),
            served: Some(served),
        })
    }

    /// How many notes titled `title` the store holds.
    pub fn notes_titled(&self, title: &str) -> Result<u64, String> {
        self.store
            .with_conn(|conn| {
                conn.query_row(
                    "SELECT COUNT(*) FROM notes WHERE title = ?1",
                    [title],
                    |row| row.get::<_, i64>(0),
                )
            })
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
            .map(|n| u64::try_from(n).unwrap_or(0))
    }

    /// Shuts the server down and waits for it (at most a few seconds).
    pub async fn stop(&mut self) -> Result<(), String> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(served) = self.served.take() else {
            return Ok(());
        };
        match tokio::time::timeout(Duration::from_secs(8), served).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(format!("the {} server failed: {e}", self.name.as_str())),
            Ok(Err(e)) => Err(format!(
                "the {} server task failed: {e}",
                self.name.as_str()
            )),
            Err(_) => Err(format!(
                "the {} server did not stop within 8 s",
                self.name.as_str()
            )),
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
