//! Building a `tools/call` and reading its result as an rmcp host does.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::Value;

/// The params of a call to `tool` with `args` (a JSON object).
pub fn params(tool: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().cloned().unwrap())
}

/// Every text block of a result, one per line.
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The error code a tool error carries in its structured content.
pub fn error_code(result: &CallToolResult) -> Option<String> {
    result
        .structured_content
        .as_ref()
        .and_then(|s| s["code"].as_str())
        .map(str::to_string)
}
