//! The MCP server proper: `tools/list` and `tools/call` over one toolset's dispatcher.
//!
//! Guarantees: the tool list is the principal's catalogue in name order (the registry's
//! order), so it is byte-identical across calls; a call reaches a handler only through
//! [`Caller::call`](toolgate_core::Caller::call), under the server's principal and run, with
//! origin `mcp` and the request's cancellation; a tool error is an `isError` result carrying the
//! model-facing message and, in structured content, our stable code and `retryable`; an unknown
//! tool is a JSON-RPC invalid-params error, as the MCP spec asks. The run id of every call is
//! the server instance's, never the JSON-RPC id, so a re-issued write replays its receipt.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use toolgate_core::{
    CallOutcome, CallRequest, CallResult, Caller, CancelToken, ErrorCode, Origin, Principal, Stage,
};
use toolgate_wiring::Ready;

use crate::catalogue::mcp_tool;

/// One toolset served to MCP hosts.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
}

struct Inner {
    caller: Caller,
    principal: Principal,
    run_id: String,
    tools: Vec<Tool>,
}

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the MCP session could not start: {0}")]
    Start(String),
    #[error("the MCP session ended with an error: {0}")]
    Session(String),
}

impl McpServer {
    /// Serves `ready` (a toolset's dispatcher for a principal, from the wiring) as the run
    /// `run_id`: every write's effect identity includes it.
    pub fn new(ready: Ready, run_id: &str) -> Self {
        let tools = ready
            .registry
            .visible_to(&ready.principal)
            .map(mcp_tool)
            .collect();
        McpServer {
            inner: Arc::new(Inner {
                caller: ready.dispatcher,
                principal: ready.principal,
                run_id: run_id.into(),
                tools,
            }),
        }
    }

    /// The tools a host is offered, in order.
    pub fn tools(&self) -> &[Tool] {
        &self.inner.tools
    }

    async fn dispatch(&self, params: CallToolRequestParams, ct: CancelToken) -> CallOutcome {
        let arguments = params
            .arguments
            .map_or(Value::Object(Default::default()), Value::Object);
        let request = CallRequest::new(
            self.inner.principal.clone(),
            &self.inner.run_id,
            &params.name,
            arguments,
        )
        .with_origin(Origin::Mcp)
        .with_cancel(ct);
        self.inner.caller.call(request).await
    }
}

/// The MCP result of a dispatcher outcome; `Err` for what the spec makes a protocol error.
fn to_result(outcome: &CallOutcome) -> Result<CallToolResult, ErrorData> {
    let text = outcome.model_text();
    match &outcome.result {
        CallResult::Done(_) => Ok(CallToolResult::success(vec![ContentBlock::text(text)])),
        CallResult::Failed(error)
            if error.code == ErrorCode::NotFound && outcome.record.stage == Stage::Resolve =>
        {
            Err(ErrorData::invalid_params(error.to_string(), None))
        }
        CallResult::Failed(error) => {
            let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
            result.structured_content = Some(json!({
                "code": error.code.as_str(),
                "retryable": error.retryable(),
                "message": error.message,
            }));
            Ok(result)
        }
        // Not reached while the server offers no approval channel (every call that needs a
        // human is denied); kept exhaustive so the protocol mapping is decided here.
        CallResult::ApprovalRequired(_) => {
            let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
            result.structured_content =
                Some(json!({"code": "approval_denied", "retryable": false}));
            Ok(result)
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28])
    }

    async fn list_tools(
        &self,
        _params: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.inner.tools.clone()))
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // A canceled request (notifications/cancelled, a closed stream) cancels the call.
        let cancel = CancelToken::new();
        let watcher = {
            let (cancel, ct) = (cancel.clone(), ctx.ct.clone());
            tokio::spawn(async move {
                ct.cancelled().await;
                cancel.cancel();
            })
        };
        let outcome = self.dispatch(params, cancel).await;
        watcher.abort();
        to_result(&outcome).map(Into::into)
    }
}
