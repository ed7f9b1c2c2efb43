//! The trace record of one authorization decision of the HTTP front (kind `auth`): every
//! request to `/mcp` on a resource server leaves exactly one, `refuse` when the front answers
//! it with a 400, 401, 403, 404 (a session of another principal) or 503 for a reason of
//! authorization, `allow` when it hands the
//! request to the MCP server.
//!
//! Guarantees: the record names the rule that decided (a stable snake_case name, e.g.
//! `expired`, `wrong_audience`, `insufficient_scope`, or `valid_token` for an allow), this
//! server's resource URI, the principal once the token is verified, the tool a `tools/call`
//! names, and for an allow the tools the principal's scopes withhold (what its `tools/list`
//! leaves out), and for a refusal whose cause the caller is not told (the keys could not be
//! fetched) that cause. It has no field for the token or for any claim the token carries beyond the
//! verified subject, so no part of a token can reach the trace through it.

use serde::Serialize;
use serde_json::Value;
use toolgate_core::trace::TraceEvent;

/// What the front did with the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Handed to the MCP server as the token's principal.
    Allow,
    /// Answered by the front; nothing reached the MCP server.
    Refuse,
}

/// The rule of an allow.
pub const VALID_TOKEN: &str = "valid_token";

/// One decision, as the trace records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthDecision {
    pub decision: Decision,
    /// Why: a refusal's rule ([`crate::auth::Refusal::rule`]), or [`VALID_TOKEN`].
    pub rule: &'static str,
    /// The HTTP status the front answered with (refusals only: an allowed request's status
    /// is the MCP server's).
    #[serde(
        rename = "http.response.status_code",
        skip_serializing_if = "Option::is_none"
    )]
    pub status: Option<u16>,
    /// This server's resource URI.
    pub resource: String,
    #[serde(rename = "http.request.method")]
    pub http_method: String,
    /// The JSON-RPC method, once the body was read.
    #[serde(rename = "rpc.method", skip_serializing_if = "Option::is_none")]
    pub rpc_method: Option<String>,
    /// The tool a `tools/call` names.
    #[serde(rename = "gen_ai.tool.name", skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The verified token's principal (absent while the token is not verified).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// For an allow: the served tools the principal's scopes do not grant, in name order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
    /// For a refusal the caller is told little about (the keys could not be fetched): what
    /// went wrong, for the operator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl TraceEvent for AuthDecision {
    fn kind(&self) -> &'static str {
        "auth"
    }

    fn attributes(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_refusal_line_names_its_rule_and_status_and_an_allow_what_it_withholds() {
        let refusal = AuthDecision {
            decision: Decision::Refuse,
            rule: "expired",
            status: Some(401),
            resource: "http://127.0.0.1:1/mcp".into(),
            http_method: "POST".into(),
            rpc_method: None,
            tool: None,
            principal: None,
            withheld: vec![],
            detail: None,
        };
        assert_eq!(
            refusal.attributes(),
            json!({"decision": "refuse", "rule": "expired", "http.response.status_code": 401,
                   "resource": "http://127.0.0.1:1/mcp", "http.request.method": "POST"})
        );
        let allow = AuthDecision {
            decision: Decision::Allow,
            rule: VALID_TOKEN,
            status: None,
            rpc_method: Some("tools/list".into()),
            principal: Some("alice".into()),
            withheld: vec!["notes_delete".into()],
            ..refusal
        };
        let line = toolgate_core::trace::event_line(&allow);
        assert_eq!(line["event"], "auth");
        assert_eq!(line["decision"], "allow");
        assert_eq!(line["withheld"], json!(["notes_delete"]));
        assert!(line.get("http.response.status_code").is_none(), "{line}");
    }
}
