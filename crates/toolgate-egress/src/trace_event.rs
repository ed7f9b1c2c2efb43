//! The egress exit's trace event: one per request, allowed or blocked, typed, with the rule that
//! decided and, for web requests, every hop. Its JSON line keeps the attribute names the exit
//! has always written (`decision`, `rule`, `reason`, `error`, `host`, `hops`, ...).

use serde::Serialize;
use serde_json::Value;
use toolgate_core::TraceEvent;

use crate::error::EgressError;

/// Whether the exit let the request out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allowed,
    Blocked,
}

/// A request the exit allowed that then failed (a timeout, a bad status, a cap).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub kind: String,
    pub detail: String,
}

/// What left (or tried to), by protocol.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Request {
    Http {
        /// The request's method (`GET` for [`crate::Egress::get`]); absent for a session's
        /// check ([`crate::Egress::session_client`]), whose requests are the session's own.
        #[serde(skip_serializing_if = "Option::is_none")]
        method: Option<&'static str>,
        url: String,
        scheme: Option<String>,
        host: Option<String>,
        port: Option<u16>,
        addresses: Vec<String>,
        hops: Vec<String>,
        hop_rules: Vec<String>,
        status: Option<u16>,
        bytes: u64,
        content_type: Option<String>,
    },
    Smtp {
        scheme: &'static str,
        host: String,
        port: u16,
        addresses: Vec<String>,
        recipients: Vec<String>,
        message_id: Option<String>,
    },
}

/// One decision of the egress exit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EgressDecision {
    #[serde(flatten)]
    pub request: Request,
    pub decision: Decision,
    pub rule: Option<String>,
    pub reason: Option<String>,
    pub error: Option<Failure>,
}

impl EgressDecision {
    /// The decision for a request that ended with `result`; `allowed_by` is the rule that let
    /// its last hop out, and `detail` bounds the failure text.
    pub fn of<T>(
        request: Request,
        result: &Result<T, EgressError>,
        allowed_by: Option<String>,
        detail: impl Fn(String) -> String,
    ) -> Self {
        let (decision, rule, reason, error) = match result {
            Ok(_) => (Decision::Allowed, allowed_by, None, None),
            Err(e) if e.is_block() => (
                Decision::Blocked,
                Some(e.rule().to_string()),
                Some(e.to_string()),
                None,
            ),
            Err(e) => (
                Decision::Allowed,
                allowed_by,
                None,
                Some(Failure {
                    kind: e.rule().to_string(),
                    detail: detail(e.to_string()),
                }),
            ),
        };
        EgressDecision {
            request,
            decision,
            rule,
            reason,
            error,
        }
    }
}

impl TraceEvent for EgressDecision {
    fn kind(&self) -> &'static str {
        "egress"
    }

    fn attributes(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
