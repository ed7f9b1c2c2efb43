//! A gateway call's upstream leg in the audit: one row of `upstream_calls` per request an
//! imported tool sent to its MCP server (which server, the server's own tool name, how it
//! ended, how long it took, the parent reference it sent), tied to the call whose handler sent
//! it; and that reference, which a toolgate server behind the gateway records as the parent of
//! the calls it dispatches for it.
//!
//! The row is taken from the `upstream_call` trace event's attributes (the JSON the imported
//! tool records, so this crate needs no type of the MCP client's) by one rule,
//! [`UpstreamRow::from_event`], that both writers use; the call comes from
//! [`toolgate_core::trace::current_call`], read when the event is recorded.
//!
//! Guarantees: an event missing a field gets an empty column, never a refusal; a parent
//! reference ([`parent_reference`]) is `RUN/CALL/NONCE`, a fresh 128-bit nonce per request
//! (hex), so no one who did not see the request (or read the audit) can name it; the leg keeps
//! the exact reference it sent ([`UpstreamEntry::reference`]), and the call tree hangs a call
//! recorded by reference only under the call whose own leg sent exactly that reference
//! (never one computed from a run and call id, which are guessable); a reference a client sent
//! is accepted only in its closed form ([`valid_parent_reference`]: bounded, a small charset)
//! and only ever names a parent in the audit, never anything that decides a call.

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

/// How many random bytes a parent reference carries (128 bits).
pub const NONCE_BYTES: usize = 16;

/// How call `call_id` of run `run_id` names itself to another process in one request:
/// `RUN/CALL/NONCE`, `nonce` (fresh from a CSPRNG for each request) in lowercase hex. `None`
/// when that would not be a reference a server accepts ([`valid_parent_reference`]: a run id
/// too long, or outside the charset): then no reference is sent.
pub fn parent_reference(run_id: &str, call_id: &str, nonce: &[u8; NONCE_BYTES]) -> Option<String> {
    let hex: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    valid_parent_reference(&Value::String(format!("{run_id}/{call_id}/{hex}")))
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
pub const ENTRY_COLUMNS: &str = "id, time_unix_ms, instance, call_id, run_id, server, tool, \
     outcome, duration_ms, CAST(record AS TEXT)";

/// The legs sent from inside any of `call_ids` of run `run_id`, oldest first, at most `limit`.
pub fn of_calls(run_id: &str, call_ids: &[String], limit: i64) -> (String, Vec<SqlValue>) {
    legs_of(run_id, None, call_ids, limit)
}

/// The legs `instance` recorded as sent from inside any of `call_ids` of run `run_id`, oldest
/// first, at most `limit`: a call's own legs, whose references the call tree follows.
pub fn of_calls_in(
    run_id: &str,
    instance: &str,
    call_ids: &[String],
    limit: i64,
) -> (String, Vec<SqlValue>) {
    legs_of(run_id, Some(instance), call_ids, limit)
}

fn legs_of(
    run_id: &str,
    instance: Option<&str>,
    call_ids: &[String],
    limit: i64,
) -> (String, Vec<SqlValue>) {
    let mut params: Vec<SqlValue> = vec![run_id.into()];
    let by_instance = match instance {
        Some(instance) => {
            params.push(instance.into());
            " AND instance = ?2"
        }
        None => "",
    };
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
            "SELECT {ENTRY_COLUMNS} FROM upstream_calls WHERE run_id = ?1{by_instance} \
             AND call_id IN ({}) ORDER BY time_unix_ms, id LIMIT ?{}",
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
    /// The parent reference this request sent (as the event recorded it, when it has the
    /// closed form), or `None`: a leg recorded before references carried a nonce, or one that
    /// sent none. The only reference the call tree hangs another process's call by.
    pub reference: Option<String>,
}

impl UpstreamEntry {
    /// The entry of a row read with [`ENTRY_COLUMNS`]; a record that is not JSON, or names no
    /// reference of the closed form, gives no reference (never an error).
    pub fn from_row(row: &SqlRow) -> Result<UpstreamEntry, SqlError> {
        let reference = row
            .opt_text(9)?
            .and_then(|record| serde_json::from_str::<Value>(&record).ok())
            .and_then(|record| record.get("reference").and_then(valid_parent_reference));
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
            reference,
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
    }

    #[test]
    fn a_reference_carries_its_nonce_and_is_never_one_a_server_would_refuse() {
        let nonce: [u8; NONCE_BYTES] = std::array::from_fn(|i| (i * 17) as u8);
        let hex = "00112233445566778899aabbccddeeff";
        let long_run = "r".repeat(MAX_PARENT_REFERENCE);
        for (run, call, expected) in [
            (
                "mcp-http-12-1796461200",
                "call-7",
                Some(format!("mcp-http-12-1796461200/call-7/{hex}")),
            ),
            ("r1", "call-2", Some(format!("r1/call-2/{hex}"))),
            // Not a reference a server accepts: none is sent.
            (long_run.as_str(), "call-1", None),
            ("run with spaces", "call-1", None),
        ] {
            let made = parent_reference(run, call, &nonce);
            assert_eq!(made, expected, "{run}/{call}");
            if let Some(made) = made {
                assert_eq!(valid_parent_reference(&json!(made)), Some(made));
            }
        }
        // Another nonce, another reference: the run and call alone do not name it.
        assert_ne!(
            parent_reference("r1", "call-2", &[0; NONCE_BYTES]),
            parent_reference("r1", "call-2", &nonce)
        );
    }

    #[test]
    fn a_leg_names_only_a_reference_of_the_closed_form_it_recorded() {
        let row = |record: SqlValue| {
            SqlRow(vec![
                1i64.into(),
                2i64.into(),
                "i".into(),
                "c1".into(),
                "r1".into(),
                "docs".into(),
                "search".into(),
                "ok".into(),
                7i64.into(),
                record,
            ])
        };
        for (record, expected) in [
            (
                json!({"reference": "r1/c1/00ff"}).to_string().into(),
                Some("r1/c1/00ff"),
            ),
            (json!({"reference": null}).to_string().into(), None),
            (json!({"server": "docs"}).to_string().into(), None),
            (json!({"reference": "r1/<b>x</b>"}).to_string().into(), None),
            (json!({"reference": 7}).to_string().into(), None),
            (SqlValue::from("not json"), None),
        ] {
            let entry = UpstreamEntry::from_row(&row(record.clone())).unwrap();
            assert_eq!(entry.reference.as_deref(), expected, "{record:?}");
            assert_eq!(entry.server, "docs");
        }
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
        let (sql, params) = of_calls_in("r1", "host/1", &["c1".into()], 10);
        assert!(
            sql.contains("run_id = ?1 AND instance = ?2 AND call_id IN (?3)")
                && sql.ends_with("LIMIT ?4"),
            "{sql}"
        );
        assert_eq!(params.len(), 4);
    }
}
