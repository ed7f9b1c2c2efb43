//! The egress exit's decisions in the audit: one row of `egress_decisions` per request that left
//! (or tried to leave) the machine, allowed or blocked, tied to the call whose handler made it.
//!
//! The row is taken from the `egress` trace event's attributes (the JSON the exit writes to the
//! trace, so this crate needs no type of the exit's) by one rule, [`EgressRow::from_event`],
//! that both writers use; the call comes from [`toolgate_core::trace::current_call`], read when
//! the event is recorded: the exit records synchronously inside the handler's task.
//!
//! Guarantees: an event missing a field gets an empty column (or NULL), never a refusal: the
//! audit keeps every decision, even a malformed one; a request made outside any call (a
//! notification, an import's session check at start) is kept with no call; the event is kept
//! whole beside the columns. A row read back whose stored event is not JSON is an error, never
//! a panic.

use serde::Serialize;
use serde_json::Value;
use toolgate_core::sql::{SqlError, SqlRow, SqlValue};
use toolgate_core::trace::CallScope;

/// The trace event kind the exit records.
pub const EVENT_KIND: &str = "egress";

/// One decision to write.
#[derive(Debug, Clone, PartialEq)]
pub struct EgressRow {
    pub time_unix_ms: i64,
    /// The call whose handler made the request, when one did.
    pub call_id: Option<String>,
    pub run_id: Option<String>,
    /// `allowed` or `blocked`.
    pub decision: String,
    /// `GET`, `SMTP`, or none (a session's check, whose requests are the session's own).
    pub method: Option<String>,
    pub scheme: Option<String>,
    pub host: Option<String>,
    pub port: Option<i64>,
    pub url: Option<String>,
    /// The HTTP status of the last hop, when one answered.
    pub status: Option<i64>,
    /// The allowlist rule that let it out, or the check that blocked it.
    pub rule: Option<String>,
    /// Why it was blocked.
    pub reason: Option<String>,
    /// How an allowed request then failed (`timeout: ...`).
    pub error: Option<String>,
    /// The event whole.
    pub record: Value,
}

fn text(event: &Value, key: &str) -> Option<String> {
    match event.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

impl EgressRow {
    /// The row of an `egress` event's attributes recorded at `time_unix_ms` inside `call`.
    pub fn from_event(time_unix_ms: i64, call: Option<CallScope>, event: Value) -> EgressRow {
        let scheme = text(&event, "scheme");
        let method = text(&event, "method").or_else(|| {
            // A mail handed to the relay: the exit's SMTP event names recipients, never a method.
            event.get("recipients").map(|_| "SMTP".to_owned())
        });
        let error = event.get("error").filter(|e| !e.is_null()).map(|e| {
            match (text(e, "kind"), text(e, "detail")) {
                (Some(kind), Some(detail)) => format!("{kind}: {detail}"),
                (kind, detail) => kind.or(detail).unwrap_or_else(|| e.to_string()),
            }
        });
        let (call_id, run_id) = match call {
            Some(call) => (Some(call.call_id), Some(call.run_id)),
            None => (None, None),
        };
        EgressRow {
            time_unix_ms,
            call_id,
            run_id,
            decision: text(&event, "decision").unwrap_or_default(),
            method,
            scheme,
            host: text(&event, "host"),
            port: event.get("port").and_then(Value::as_i64),
            url: text(&event, "url"),
            status: event.get("status").and_then(Value::as_i64),
            rule: text(&event, "rule"),
            reason: text(&event, "reason"),
            error,
            record: event,
        }
    }

    /// The statement's values, SQLite's order ([`INSERT`]).
    pub fn params(&self, instance: &str) -> Vec<SqlValue> {
        vec![
            self.time_unix_ms.into(),
            instance.into(),
            self.call_id.clone().into(),
            self.run_id.clone().into(),
            self.decision.clone().into(),
            self.method.clone().into(),
            self.scheme.clone().into(),
            self.host.clone().into(),
            self.port.into(),
            self.url.clone().into(),
            self.status.into(),
            self.rule.clone().into(),
            self.reason.clone().into(),
            self.error.clone().into(),
            self.record.to_string().into(),
        ]
    }
}

/// Writes one row.
pub const INSERT: &str = "INSERT INTO egress_decisions (time_unix_ms, instance, call_id, run_id, \
     decision, method, scheme, host, port, url, status, rule, reason, error, record) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

/// The columns [`EgressEntry::from_row`] reads, in order.
pub const ENTRY_COLUMNS: &str = "id, time_unix_ms, instance, call_id, run_id, decision, method, \
     scheme, host, port, url, status, rule, reason, error";

/// The decisions made inside call `call_id` of run `run_id`, oldest first, at most `limit`.
pub fn of_call(call_id: &str, run_id: &str, limit: i64) -> (String, Vec<SqlValue>) {
    (
        format!(
            "SELECT {ENTRY_COLUMNS} FROM egress_decisions WHERE call_id = ?1 AND run_id = ?2 \
             ORDER BY time_unix_ms, id LIMIT ?3"
        ),
        vec![call_id.into(), run_id.into(), limit.into()],
    )
}

/// One decision as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EgressEntry {
    pub id: i64,
    pub time_unix_ms: i64,
    pub instance: String,
    pub call_id: Option<String>,
    pub run_id: Option<String>,
    pub decision: String,
    pub method: Option<String>,
    pub scheme: Option<String>,
    pub host: Option<String>,
    pub port: Option<i64>,
    pub url: Option<String>,
    pub status: Option<i64>,
    pub rule: Option<String>,
    pub reason: Option<String>,
    pub error: Option<String>,
}

impl EgressEntry {
    pub fn from_row(row: &SqlRow) -> Result<EgressEntry, SqlError> {
        Ok(EgressEntry {
            id: row.i64(0)?,
            time_unix_ms: row.i64(1)?,
            instance: row.text(2)?,
            call_id: row.opt_text(3)?,
            run_id: row.opt_text(4)?,
            decision: row.text(5)?,
            method: row.opt_text(6)?,
            scheme: row.opt_text(7)?,
            host: row.opt_text(8)?,
            port: row.opt_i64(9)?,
            url: row.opt_text(10)?,
            status: row.opt_i64(11)?,
            rule: row.opt_text(12)?,
            reason: row.opt_text(13)?,
            error: row.opt_text(14)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call() -> Option<CallScope> {
        Some(CallScope {
            call_id: "c1".into(),
            run_id: "r1".into(),
        })
    }

    #[test]
    fn each_kind_of_egress_event_keeps_its_host_method_status_and_why() {
        struct Case {
            name: &'static str,
            event: Value,
            call: Option<CallScope>,
            expect: (
                &'static str,
                Option<&'static str>,
                Option<&'static str>,
                Option<i64>,
                Option<&'static str>,
                Option<&'static str>,
            ),
        }
        let cases = [
            Case {
                name: "a fetch that got its page",
                event: json!({"method": "GET", "url": "https://a.example/x", "scheme": "https",
                    "host": "a.example", "port": 443, "status": 200, "decision": "allowed",
                    "rule": "allow[0]:a.example", "reason": null, "error": null}),
                call: call(),
                expect: (
                    "allowed",
                    Some("GET"),
                    Some("a.example"),
                    Some(200),
                    None,
                    None,
                ),
            },
            Case {
                name: "a fetch of an unlisted host is blocked with its reason",
                event: json!({"method": "GET", "url": "https://evil.example/", "host": "evil.example",
                    "decision": "blocked", "rule": "not_allowlisted",
                    "reason": "evil.example is not on the allowlist", "error": null}),
                call: call(),
                expect: (
                    "blocked",
                    Some("GET"),
                    Some("evil.example"),
                    None,
                    Some("evil.example is not on the allowlist"),
                    None,
                ),
            },
            Case {
                name: "a mail handed to the relay is SMTP",
                event: json!({"scheme": "smtp", "host": "127.0.0.1", "port": 25,
                    "recipients": ["ann@example.org"], "decision": "allowed", "rule": "allow[0]"}),
                call: call(),
                expect: ("allowed", Some("SMTP"), Some("127.0.0.1"), None, None, None),
            },
            Case {
                name: "an allowed request that timed out says how it failed",
                event: json!({"method": "GET", "host": "slow.example", "decision": "allowed",
                    "error": {"kind": "timeout", "detail": "after 10 s"}}),
                call: call(),
                expect: (
                    "allowed",
                    Some("GET"),
                    Some("slow.example"),
                    None,
                    None,
                    Some("timeout: after 10 s"),
                ),
            },
            Case {
                name: "a session's check names no method and no call",
                event: json!({"url": "https://mcp.example/mcp", "host": "mcp.example",
                    "decision": "allowed"}),
                call: None,
                expect: ("allowed", None, Some("mcp.example"), None, None, None),
            },
            Case {
                name: "a malformed event is kept, not refused",
                event: json!("not an object"),
                call: None,
                expect: ("", None, None, None, None, None),
            },
        ];
        for case in cases {
            let had_call = case.call.is_some();
            let row = EgressRow::from_event(5, case.call, case.event.clone());
            let got = (
                row.decision.as_str(),
                row.method.as_deref(),
                row.host.as_deref(),
                row.status,
                row.reason.as_deref(),
                row.error.as_deref(),
            );
            assert_eq!(got, case.expect, "{}", case.name);
            assert_eq!(row.call_id.is_some(), had_call, "{}", case.name);
            assert_eq!(row.record, case.event, "{}: kept whole", case.name);
            assert_eq!(row.params("i").len(), 15, "{}", case.name);
        }
    }
}
