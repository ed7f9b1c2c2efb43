//! One decision record as a row of `decisions`: the columns the searches filter on, taken from
//! the record's JSON by one rule ([`AuditRow::from_record`]) that both writers use, and the
//! record kept whole beside them; and a row as read back ([`AuditEntry`]). [`audit_row`] is the
//! one rule, for both writers, of which trace events the audit keeps: decision records, the
//! egress exit's decisions ([`super::egress`]) and gateway calls' upstream legs
//! ([`super::upstream`]).
//!
//! Guarantees: a record missing a field gets an empty column (or NULL where the column allows
//! it), never a refusal: the audit keeps every call, even a malformed record. A row read back
//! whose stored record is not JSON is an error, never a panic.
//!
//! A [`DecisionRecord`] (every call's) is made into its row straight from its fields and
//! serialized once into the JSON text the `record` column keeps ([`AuditRow::from_decision`]):
//! no JSON tree is built on the call path and none is serialized again by the writer. A test
//! holds it to the rule [`AuditRow::from_record`] applies to the record's JSON.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use toolgate_core::call::{ApprovalRecord, DecisionRecord};
use toolgate_core::sql::{SqlError, SqlRow, SqlValue};
use toolgate_core::trace::TraceEvent;

use super::egress::{self, EgressRow};
use super::upstream::{self, UpstreamRow};

/// The columns of one row to write.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    pub time_unix_ms: i64,
    pub call_id: String,
    pub parent_call_id: Option<String>,
    pub run_id: String,
    pub tenant: String,
    pub principal: String,
    pub tool: String,
    pub tool_version: Option<i64>,
    pub origin: String,
    pub risk: Option<String>,
    pub stage: String,
    /// `ok`, an error code, or `approval_required`.
    pub outcome: String,
    /// The approval's status (`not_needed`, `replayed`, `approved`, `pending`, `denied`).
    pub approval: String,
    /// Why a denied call was denied (`declined`, `timed_out`, ...).
    pub denial: Option<String>,
    /// Who answered the approval, when the record names them.
    pub decided_by: Option<String>,
    pub idempotency_key: Option<String>,
    pub duplicate: bool,
    pub catalogue_digest: Option<String>,
    /// The record whole, as JSON text.
    pub record: RecordJson,
}

/// A record's JSON text, as written to the `record` column; equal when the texts are.
#[derive(Debug, Clone)]
pub struct RecordJson(Box<RawValue>);

impl RecordJson {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The JSON as a value to bind (PostgreSQL's `jsonb` takes it as it stands).
    pub fn raw(&self) -> &RawValue {
        &self.0
    }
}

impl PartialEq for RecordJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// A decision record's JSON for the `record` column, serialized straight from the record: its
/// fields and `error.type` (what [`TraceEvent::attributes`](toolgate_core::trace::TraceEvent)
/// gives as a tree).
#[derive(Serialize)]
struct RecordColumn<'a> {
    #[serde(flatten)]
    record: &'a DecisionRecord,
    #[serde(rename = "error.type", skip_serializing_if = "Option::is_none")]
    error_type: Option<&'static str>,
}

/// A unit enum variant's serialized name (`loop`, `low`, `execute`).
fn variant_name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// JSON text as a column value; `null` for the one value that cannot be serialized (a map with
/// a key that is not a string), so a record is still kept.
fn raw_json<T: Serialize + ?Sized>(value: &T) -> RecordJson {
    RecordJson(serde_json::value::to_raw_value(value).unwrap_or_default())
}

fn text(record: &Value, key: &str) -> Option<String> {
    match record.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

impl AuditRow {
    /// The row of a call's decision record, recorded at `time_unix_ms`: the columns read from
    /// its fields, the record serialized once.
    pub fn from_decision(time_unix_ms: i64, decision: &DecisionRecord) -> AuditRow {
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        AuditRow {
            time_unix_ms,
            call_id: decision.call_id.clone(),
            parent_call_id: decision.parent_call_id.clone(),
            run_id: decision.run_id.clone(),
            tenant: decision.tenant.clone(),
            principal: decision.principal.clone(),
            tool: decision.tool.clone(),
            tool_version: decision.tool_version.map(i64::from),
            origin: variant_name(&decision.origin),
            risk: decision.risk.as_ref().map(variant_name),
            stage: variant_name(&decision.stage),
            outcome: decision.outcome.as_str().to_owned(),
            approval: decision.approval.status().to_owned(),
            denial: match &decision.approval {
                ApprovalRecord::Denied { denial } => serde_json::to_value(denial)
                    .ok()
                    .and_then(|d| d.get("kind").and_then(Value::as_str).map(str::to_owned)),
                ApprovalRecord::NotNeeded
                | ApprovalRecord::Replayed
                | ApprovalRecord::Approved { .. }
                | ApprovalRecord::Pending { .. } => None,
            },
            decided_by: decision.decided_by.clone(),
            idempotency_key: decision.idempotency_key.clone(),
            duplicate: decision.duplicate,
            catalogue_digest: non_empty(&decision.catalogue_digest),
            record: raw_json(&RecordColumn {
                record: decision,
                error_type: decision.error().map(|code| code.as_str()),
            }),
        }
    }

    /// The row of `record` (a decision record's attributes), recorded at `time_unix_ms`.
    pub fn from_record(time_unix_ms: i64, record: Value) -> AuditRow {
        let approval = record.get("approval");
        AuditRow {
            time_unix_ms,
            call_id: text(&record, "gen_ai.tool.call.id").unwrap_or_default(),
            parent_call_id: text(&record, "parent_call_id"),
            run_id: text(&record, "run_id").unwrap_or_default(),
            tenant: text(&record, "tenant").unwrap_or_default(),
            principal: text(&record, "principal").unwrap_or_default(),
            tool: text(&record, "gen_ai.tool.name").unwrap_or_default(),
            tool_version: record.get("tool_version").and_then(Value::as_i64),
            origin: text(&record, "origin").unwrap_or_default(),
            risk: text(&record, "risk"),
            stage: text(&record, "stage").unwrap_or_default(),
            outcome: text(&record, "outcome").unwrap_or_default(),
            approval: approval
                .and_then(|a| a.get("status"))
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned(),
            denial: approval
                .and_then(|a| a.get("denial"))
                .and_then(|d| d.get("kind"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            decided_by: text(&record, "decided_by"),
            idempotency_key: text(&record, "idempotency_key"),
            duplicate: record
                .get("duplicate")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            catalogue_digest: text(&record, "catalogue_digest"),
            record: raw_json(&record),
        }
    }
}

/// One row as a search returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// The row's id in its table (unique there; call ids are unique only within a run).
    pub id: i64,
    pub time_unix_ms: i64,
    /// The process that recorded it.
    pub instance: String,
    pub call_id: String,
    pub parent_call_id: Option<String>,
    pub run_id: String,
    pub tenant: String,
    pub principal: String,
    pub tool: String,
    pub origin: String,
    pub outcome: String,
    pub approval: String,
    pub denial: Option<String>,
    pub decided_by: Option<String>,
    /// The decision record whole.
    pub record: Value,
}

/// The columns a search reads, in [`AuditEntry::from_row`]'s order.
pub const ENTRY_COLUMNS: &str = "id, time_unix_ms, instance, call_id, parent_call_id, run_id, \
     tenant, principal, tool, origin, outcome, approval, denial, decided_by, \
     CAST(record AS TEXT)";

impl AuditEntry {
    /// The entry of a row read with [`ENTRY_COLUMNS`].
    pub fn from_row(row: &SqlRow) -> Result<AuditEntry, SqlError> {
        let record_text = row.text(14)?;
        let record = serde_json::from_str(&record_text).map_err(|e| SqlError::Type {
            detail: format!("a stored decision record is not JSON: {e}"),
        })?;
        Ok(AuditEntry {
            id: row.i64(0)?,
            time_unix_ms: row.i64(1)?,
            instance: row.text(2)?,
            call_id: row.text(3)?,
            parent_call_id: row.opt_text(4)?,
            run_id: row.text(5)?,
            tenant: row.text(6)?,
            principal: row.text(7)?,
            tool: row.text(8)?,
            origin: row.text(9)?,
            outcome: row.text(10)?,
            approval: row.text(11)?,
            denial: row.opt_text(12)?,
            decided_by: row.opt_text(13)?,
            record,
        })
    }
}

/// The statement that writes one row (SQLite's placeholders; PostgreSQL's are derived).
pub const INSERT: &str = "INSERT INTO decisions (time_unix_ms, instance, call_id, \
     parent_call_id, run_id, tenant, principal, tool, tool_version, origin, risk, stage, outcome, \
     approval, denial, decided_by, idempotency_key, duplicate, catalogue_digest, record) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
     ?19, ?20)";

impl AuditRow {
    /// The values of [`INSERT`] for SQLite (the record as JSON text, the flag as 0 or 1).
    pub fn sqlite_params(&self, instance: &str) -> Vec<SqlValue> {
        vec![
            self.time_unix_ms.into(),
            instance.into(),
            (&self.call_id).into(),
            self.parent_call_id.clone().into(),
            (&self.run_id).into(),
            (&self.tenant).into(),
            (&self.principal).into(),
            (&self.tool).into(),
            self.tool_version.into(),
            (&self.origin).into(),
            self.risk.clone().into(),
            (&self.stage).into(),
            (&self.outcome).into(),
            (&self.approval).into(),
            self.denial.clone().into(),
            self.decided_by.clone().into(),
            self.idempotency_key.clone().into(),
            self.duplicate.into(),
            self.catalogue_digest.clone().into(),
            self.record.get().into(),
        ]
    }
}

/// One row to write, into its table.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    Decision(Box<AuditRow>),
    Egress(Box<EgressRow>),
    Upstream(Box<UpstreamRow>),
}

/// The row an event becomes in the audit, or `None` for kinds that are not the audit's. An
/// egress decision is tied to the call running on this task, so this must be called where the
/// event is recorded, not later.
pub fn audit_row(event: Arc<dyn TraceEvent>) -> Option<Row> {
    let time_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    match event.kind() {
        "tool_call" => {
            let any: Arc<dyn std::any::Any + Send + Sync> = event;
            let decision = any.downcast_ref::<DecisionRecord>()?;
            Some(Row::Decision(Box::new(AuditRow::from_decision(
                time_unix_ms,
                decision,
            ))))
        }
        egress::EVENT_KIND => Some(Row::Egress(Box::new(EgressRow::from_event(
            time_unix_ms,
            toolgate_core::trace::current_call(),
            event.attributes(),
        )))),
        upstream::EVENT_KIND => Some(Row::Upstream(Box::new(UpstreamRow::from_event(
            time_unix_ms,
            toolgate_core::trace::current_call(),
            event.attributes(),
        )))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgate_core::approval::Denial;
    use toolgate_core::call::{ApprovedVia, Origin, Outcome, Stage};
    use toolgate_core::shape::Shape;
    use toolgate_core::{ErrorCode, Risk};

    /// Records of every kind the columns read differently: each row made from the record's
    /// fields must be the row the JSON rule makes of its attributes, record text included.
    #[test]
    fn a_row_from_the_records_fields_is_the_row_of_its_json() {
        let plain = DecisionRecord::lost("c1", "notes_search");
        let mut ran = plain.clone();
        ran.outcome = Outcome::Ok;
        ran.stage = Stage::Done;
        ran.origin = Origin::Mcp;
        ran.risk = Some(Risk::Low);
        ran.tool_version = Some(2);
        ran.catalogue_digest = "sha256:ab".into();
        ran.run_id = "run-7".into();
        ran.arguments = json!({"query": "budget \"q1\"", "limit": 3});
        ran.result_shape = Some(Shape::of(&json!({"result": {"hits": [{"id": 1}]}})));
        let mut denied = ran.clone();
        denied.outcome = Outcome::Error(ErrorCode::ApprovalDenied);
        denied.approval = ApprovalRecord::Denied {
            denial: Denial::Declined {
                reason: "not now".into(),
            },
        };
        denied.decided_by = Some("bob".into());
        denied.parent_call_id = Some("c0".into());
        let mut approved = ran.clone();
        approved.approval = ApprovalRecord::Approved {
            via: ApprovedVia::Ticket,
        };
        approved.idempotency_key = Some("k-1".into());
        approved.duplicate = true;
        approved.risk = None;
        for record in [plain, ran, denied, approved] {
            let from_fields = AuditRow::from_decision(9, &record);
            let from_json = AuditRow::from_record(9, record.attributes());
            assert_eq!(from_fields, from_json, "{record:?}");
        }
    }

    #[test]
    fn columns_come_from_the_record_and_missing_fields_stay_empty() {
        let cases = [
            (
                json!({"gen_ai.tool.call.id": "c1", "gen_ai.tool.name": "email_send",
                       "principal": "alice", "outcome": "approval_denied",
                       "approval": {"status": "denied", "denial": {"kind": "declined", "reason": "no"}},
                       "decided_by": "bob", "parent_call_id": "c0", "tool_version": 3}),
                (
                    "c1",
                    Some("c0"),
                    "email_send",
                    "approval_denied",
                    "denied",
                    Some("declined"),
                    Some("bob"),
                    Some(3),
                ),
            ),
            (
                json!({"gen_ai.tool.call.id": "c2", "approval": {"status": "approved", "via": "ticket"}}),
                ("c2", None, "", "", "approved", None, None, None),
            ),
            (json!({}), ("", None, "", "", "unknown", None, None, None)),
        ];
        for (record, (call, parent, tool, outcome, approval, denial, by, version)) in cases {
            let row = AuditRow::from_record(7, record.clone());
            assert_eq!(row.call_id, call, "{record}");
            assert_eq!(row.parent_call_id.as_deref(), parent, "{record}");
            assert_eq!(row.tool, tool, "{record}");
            assert_eq!(row.outcome, outcome, "{record}");
            assert_eq!(row.approval, approval, "{record}");
            assert_eq!(row.denial.as_deref(), denial, "{record}");
            assert_eq!(row.decided_by.as_deref(), by, "{record}");
            assert_eq!(row.tool_version, version, "{record}");
            assert_eq!(
                serde_json::from_str::<Value>(row.record.get()).unwrap(),
                record
            );
        }
    }
}
