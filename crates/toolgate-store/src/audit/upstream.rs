//! A gateway call's upstream leg in the audit: one row of `upstream_calls` per request an
//! imported tool sent to its MCP server (which server, the server's own tool name, how it
//! ended, how long it took), tied to the call whose handler sent it; and the reference a
//! toolgate server behind the gateway records as the parent of the calls it dispatches for it.
//!
//! The row is taken from the `upstream_call` trace event's attributes (the JSON the imported
//! tool records, so this crate needs no type of the MCP client's) by one rule,
//! [`UpstreamRow::from_event`], that both writers use; the call comes from
//! [`toolgate_core::trace::current_call`], read when the event is recorded.
//!
//! Guarantees: an event missing a field gets an empty column, never a refusal; a parent
//! reference ([`parent_reference`]) names a call by its run and call id, so call ids numbered
//! per process never collide across processes; a reference a client sent is accepted only in
//! its closed form ([`valid_parent_reference`]: bounded, a small charset) and only ever names a
//! parent in the audit, never anything that decides a call.

use serde::Serialize;
use serde_json::Value;
use toolgate_core::sql::{SqlError, SqlRow, SqlValue};
use toolgate_core::trace::CallScope;

/// The trace event kind an imported tool records for each request to its server.
pub const EVENT_KIND: &str = "upstream_call";

/// The `_meta` key under which a toolgate gateway names, to a toolgate server behind it, the
/// call it is forwarding ([`parent_reference`]).
pub const PARENT_CALL_META: &str = "dev.toolgate/parent_call_id";

/// The longest parent reference accepted.
pub const MAX_PARENT_REFERENCE: usize = 200;

/// How call `call_id` of run `run_id` is named to another process: `RUN/CALL`.
pub fn parent_reference(run_id: &str, call_id: &str) -> String {
    format!("{run_id}/{call_id}")
}

/// A parent reference from a client, if it has the closed form: 1 to
/// [`MAX_PARENT_REFERENCE`] bytes of ASCII letters, digits and `-_.:/@+`, with one `/` at
/// least (run and call). Anything else is not a reference and names no parent.
pub fn valid_parent_reference(given: &Value) -> Option<String> {
    let text = given.as_str()?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.:/@+".contains(c);
    let shaped =
        matches!(text.split_once('/'), Some((run, call)) if !run.is_empty() && !call.is_empty());
    (text.len() <= MAX_PARENT_REFERENCE && shaped && text.chars().all(allowed))
        .then(|| text.to_owned())
}

/// One upstream leg to write.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamRow {
    pub time_unix_ms: i64,
    pub call_id: Option<String>,
    pub run_id: Option<String>,
    /// The imported server's name here (its tools' namespace).
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
    /// `ok`, `error` (the server answered `isError`), or how the request failed.
    pub outcome: String,
    pub duration_ms: i64,
    /// The event whole.
    pub record: Value,
}

fn text(event: &Value, key: &str) -> String {
    match event.get(key) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

impl UpstreamRow {
    /// The row of an `upstream_call` event's attributes recorded at `time_unix_ms` in `call`.
    pub fn from_event(time_unix_ms: i64, call: Option<CallScope>, event: Value) -> UpstreamRow {
        let (call_id, run_id) = match call {
            Some(call) => (Some(call.call_id), Some(call.run_id)),
            None => (None, None),
        };
        UpstreamRow {
            time_unix_ms,
            call_id,
            run_id,
            server: text(&event, "server"),
            tool: text(&event, "tool"),
            outcome: text(&event, "outcome"),
            duration_ms: event
                .get("duration_ms")
                .and_then(Value::as_i64)
                .unwrap_or_default(),
            record: event,
        }
    }

    /// The statement's values, in [`INSERT`]'s order.
    pub fn params(&self, instance: &str) -> Vec<SqlValue> {
        vec![
            self.time_unix_ms.into(),
            instance.into(),
            self.call_id.clone().into(),
            self.run_id.clone().into(),
            self.server.clone().into(),
            self.tool.clone().into(),
            self.outcome.clone().into(),
            self.duration_ms.into(),
            self.record.to_string().into(),
        ]
    }
}

/// Writes one row.
pub const INSERT: &str = "INSERT INTO upstream_calls (time_unix_ms, instance, call_id, run_id, \
     server, tool, outcome, duration_ms, record) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

/// The columns [`UpstreamEntry::from_row`] reads, in order.
pub const ENTRY_COLUMNS: &str =
    "id, time_unix_ms, instance, call_id, run_id, server, tool, outcome, duration_ms";

/// The legs sent from inside any of `call_ids` of run `run_id`, oldest first, at most `limit`.
pub fn of_calls(run_id: &str, call_ids: &[String], limit: i64) -> (String, Vec<SqlValue>) {
    let mut params: Vec<SqlValue> = vec![run_id.into()];
    let marks: Vec<String> = call_ids
        .iter()
        .map(|c| {
            params.push(c.into());
            format!("?{}", params.len())
        })
        .collect();
    params.push(limit.into());
    (
        format!(
            "SELECT {ENTRY_COLUMNS} FROM upstream_calls WHERE run_id = ?1 AND call_id IN ({}) \
             ORDER BY time_unix_ms, id LIMIT ?{}",
            marks.join(", "),
            params.len()
        ),
        params,
    )
}

/// One leg as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpstreamEntry {
    pub id: i64,
    pub time_unix_ms: i64,
    pub instance: String,
    pub call_id: Option<String>,
    pub run_id: Option<String>,
    pub server: String,
    pub tool: String,
    pub outcome: String,
    pub duration_ms: i64,
}

impl UpstreamEntry {
    pub fn from_row(row: &SqlRow) -> Result<UpstreamEntry, SqlError> {
        Ok(UpstreamEntry {
            id: row.i64(0)?,
            time_unix_ms: row.i64(1)?,
            instance: row.text(2)?,
            call_id: row.opt_text(3)?,
            run_id: row.opt_text(4)?,
            server: row.text(5)?,
            tool: row.text(6)?,
            outcome: row.text(7)?,
            duration_ms: row.i64(8)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_parent_reference_outside_its_closed_form_names_no_parent() {
        let long = format!("run/{}", "c".repeat(MAX_PARENT_REFERENCE));
        for (given, accepted) in [
            (json!("mcp-http-12-1796461200/call-7"), true),
            (json!("run-1/call-1"), true),
            (json!("a/b"), true),
            (json!("call-7"), false),
            (json!("/call-7"), false),
            (json!("run/"), false),
            (json!(""), false),
            (json!("run/<script>alert(1)</script>"), false),
            (json!("run/call 7"), false),
            (json!("run/call\n7"), false),
            (json!("run/caLL-é"), false),
            (json!(long), false),
            (json!(7), false),
            (json!({"run": "r", "call": "c"}), false),
            (json!(null), false),
        ] {
            assert_eq!(
                valid_parent_reference(&given).is_some(),
                accepted,
                "{given}"
            );
        }
        assert_eq!(
            valid_parent_reference(&json!(parent_reference("r1", "call-2"))).as_deref(),
            Some("r1/call-2")
        );
    }

    #[test]
    fn an_upstream_event_keeps_its_server_tool_outcome_and_time() {
        let call = CallScope {
            call_id: "c1".into(),
            run_id: "r1".into(),
        };
        for (event, call, expect) in [
            (
                json!({"server": "docs", "tool": "search", "outcome": "ok", "duration_ms": 42}),
                Some(call.clone()),
                ("docs", "search", "ok", 42, true),
            ),
            (
                json!({"server": "docs", "tool": "search", "outcome": "timeout"}),
                Some(call),
                ("docs", "search", "timeout", 0, true),
            ),
            (json!("malformed"), None, ("", "", "", 0, false)),
        ] {
            let row = UpstreamRow::from_event(1, call, event.clone());
            assert_eq!(
                (
                    row.server.as_str(),
                    row.tool.as_str(),
                    row.outcome.as_str(),
                    row.duration_ms,
                    row.call_id.is_some()
                ),
                expect,
                "{event}"
            );
            assert_eq!(row.record, event);
            assert_eq!(row.params("i").len(), 9);
        }
        let (sql, params) = of_calls("r1", &["c1".into(), "c2".into()], 10);
        assert!(
            sql.contains("call_id IN (?2, ?3)") && sql.ends_with("LIMIT ?4"),
            "{sql}"
        );
        assert_eq!(params.len(), 4);
    }
}
