//! The audit pages' pure parts: a search form's query string read into a filter (and echoed
//! back into the form), and the rows of the decision records made into what the templates
//! show (a line of the search, a call's facts, its nested calls as a tree).
//!
//! Contract: every filter value is taken as typed and bound by the store (never spliced); an
//! outcome, approval state, time or page cursor outside its closed form is refused with what
//! was wrong, never ignored (a search that silently dropped a filter would show too much);
//! every value here is plain text, escaped by the templates.

use serde::Serialize;
use serde_json::Value;
use toolgate_core::ErrorCode;
use toolgate_store::audit::{
    AuditEntry, AuditFilter, CallTree, Cursor, EgressEntry, UpstreamEntry, WriteRecord,
};

use crate::PREFIX;
use crate::pages::who_of;

/// How many rows one page of the search shows.
pub const PAGE_ROWS: u32 = 50;

/// The search form's fields as typed (empty: not set), shown back in the form and carried by
/// the next page's and the exports' links.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SearchForm {
    pub principal: String,
    pub tool: String,
    pub outcome: String,
    pub approval: String,
    pub decided_by: String,
    pub since: String,
    pub until: String,
}

/// A search read from the page's query string.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    pub form: SearchForm,
    pub filter: AuditFilter,
    /// Where this page starts (after the last row of the page before).
    pub after: Option<Cursor>,
}

/// Why a search's query string is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchRefusal {
    #[error("{0}")]
    Outcome(String),
    #[error("{0}")]
    Approval(String),
    #[error("{field} {value:?} is not a time: give YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)")]
    Time { field: &'static str, value: String },
    #[error("{0}")]
    Cursor(String),
}

/// The search `query` (a form's GET query string) asks for; on a refusal, the form as typed
/// with why.
pub fn parse_search(query: &str) -> Result<Search, (SearchForm, SearchRefusal)> {
    let mut form = SearchForm::default();
    let mut after = String::new();
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let value = value.trim().to_string();
        match name.as_ref() {
            "principal" => form.principal = value,
            "tool" => form.tool = value,
            "outcome" => form.outcome = value,
            "approval" => form.approval = value,
            "decided_by" => form.decided_by = value,
            "since" => form.since = value,
            "until" => form.until = value,
            "after" => after = value,
            // Other names (a format, a stray field) are not filters.
            _ => {}
        }
    }
    let set = |s: &String| (!s.is_empty()).then(|| s.clone());
    let parsed = (|| {
        let outcome = set(&form.outcome)
            .map(|o| o.parse().map_err(SearchRefusal::Outcome))
            .transpose()?;
        let approval = set(&form.approval)
            .map(|a| a.parse().map_err(SearchRefusal::Approval))
            .transpose()?;
        let since_ms = time_field("since", &form.since)?;
        let until_ms = time_field("until", &form.until)?;
        let after = set(&after)
            .map(|a| a.parse().map_err(SearchRefusal::Cursor))
            .transpose()?;
        let filter = AuditFilter {
            principal: set(&form.principal),
            tool: set(&form.tool),
            outcome,
            approval,
            decided_by: set(&form.decided_by),
            since_ms,
            until_ms,
            ..AuditFilter::default()
        };
        Ok((filter, after))
    })();
    match parsed {
        Ok((filter, after)) => Ok(Search {
            form,
            filter,
            after,
        }),
        Err(refusal) => Err((form, refusal)),
    }
}

impl SearchForm {
    /// The form's fields as a query string (set fields only), for links that repeat the search.
    pub fn query(&self) -> String {
        let mut out = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("principal", &self.principal),
            ("tool", &self.tool),
            ("outcome", &self.outcome),
            ("approval", &self.approval),
            ("decided_by", &self.decided_by),
            ("since", &self.since),
            ("until", &self.until),
        ] {
            if !value.is_empty() {
                out.append_pair(name, value);
            }
        }
        out.finish()
    }

    /// The link to the same search with `extra` pairs added.
    pub fn link(&self, path: &str, extra: &[(&str, &str)]) -> String {
        let mut query = self.query();
        let mut tail = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in extra {
            tail.append_pair(name, value);
        }
        let tail = tail.finish();
        if !tail.is_empty() {
            if !query.is_empty() {
                query.push('&');
            }
            query.push_str(&tail);
        }
        if query.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{query}")
        }
    }
}

/// A time field in Unix milliseconds: `YYYY-MM-DD` (midnight) or `YYYY-MM-DDTHH:MM[:SS]`
/// (what a `datetime-local` field sends), read as UTC; empty is unset.
fn time_field(field: &'static str, text: &str) -> Result<Option<i64>, SearchRefusal> {
    if text.is_empty() {
        return Ok(None);
    }
    parse_utc(text)
        .map(Some)
        .ok_or_else(|| SearchRefusal::Time {
            field,
            value: text.to_string(),
        })
}

/// `YYYY-MM-DD[THH:MM[:SS]]` (a space may stand for the `T`) as Unix milliseconds, UTC.
pub fn parse_utc(text: &str) -> Option<i64> {
    let (date, clock) = match text.split_once(['T', ' ']) {
        Some((date, clock)) => (date, Some(clock)),
        None => (text, None),
    };
    let mut parts = date.splitn(3, '-');
    let year: i64 = number(parts.next()?, 4)?;
    let month: i64 = number(parts.next()?, 2)?;
    let day: i64 = number(parts.next()?, 2)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let (hour, minute, second) = match clock {
        None => (0, 0, 0),
        Some(clock) => {
            let mut parts = clock.split(':');
            let hour = number(parts.next()?, 2)?;
            let minute = number(parts.next()?, 2)?;
            let second = parts.next().map_or(Some(0), |s| number(s, 2))?;
            if parts.next().is_some() || hour > 23 || minute > 59 || second > 59 {
                return None;
            }
            (hour, minute, second)
        }
    };
    let days = days_from_civil(year, month, day);
    Some(((days * 86_400) + hour * 3600 + minute * 60 + second) * 1000)
}

fn number(text: &str, digits: usize) -> Option<i64> {
    (text.len() == digits && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// One choice of a `<select>`.
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    pub value: String,
    pub label: String,
}

/// The outcomes the form offers (any, ok, any error, approval required, each error code).
pub fn outcome_choices() -> Vec<Choice> {
    let mut choices = vec![
        choice("", "any"),
        choice("ok", "ok"),
        choice("error", "any error"),
        choice("approval_required", "approval required"),
    ];
    choices.extend(
        ErrorCode::ALL
            .iter()
            .map(|code| choice(code.as_str(), code.as_str())),
    );
    choices
}

/// The approval states the form offers.
pub fn approval_choices() -> Vec<Choice> {
    vec![
        choice("", "any"),
        choice("not_needed", "not needed"),
        choice("approved", "approved"),
        choice("denied", "denied (any reason)"),
        choice("declined", "declined by a person"),
        choice("pending", "pending"),
        choice("replayed", "replayed"),
    ]
}

fn choice(value: &str, label: &str) -> Choice {
    Choice {
        value: value.into(),
        label: label.into(),
    }
}

/// The page of call `call_id` in run `run_id`.
pub fn call_href(run_id: &str, call_id: &str) -> String {
    let query = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("run", run_id)
        .append_pair("call", call_id)
        .finish();
    format!("{PREFIX}/audit/call?{query}")
}

/// One line of the search.
#[derive(Debug, Clone, Serialize)]
pub struct AuditLine {
    pub href: String,
    pub time: String,
    pub principal: String,
    pub tool: String,
    pub origin: String,
    pub outcome: String,
    pub approval: String,
    pub decided_by: String,
    /// Made from inside another call.
    pub nested: bool,
}

impl AuditLine {
    pub fn of(entry: &AuditEntry) -> Self {
        AuditLine {
            href: call_href(&entry.run_id, &entry.call_id),
            time: utc_ms(entry.time_unix_ms),
            principal: principal_of(entry),
            tool: entry.tool.clone(),
            origin: entry.origin.clone(),
            outcome: entry.outcome.clone(),
            approval: approval_of(entry),
            decided_by: entry.decided_by.as_deref().map(who_of).unwrap_or_default(),
            nested: entry.parent_call_id.is_some(),
        }
    }
}

/// A gateway call's request to its MCP server, as a leaf of the tree under the call that sent
/// it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LegView {
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
    pub outcome: String,
    /// How long it took: `42 ms`.
    pub took: String,
    pub time: String,
}

impl LegView {
    pub fn of(leg: &UpstreamEntry) -> LegView {
        LegView {
            server: leg.server.clone(),
            tool: leg.tool.clone(),
            outcome: leg.outcome.clone(),
            took: format!("{} ms", leg.duration_ms),
            time: utc_ms(leg.time_unix_ms),
        }
    }
}

/// A call in the tree.
#[derive(Debug, Clone, Serialize)]
pub struct TreeNode {
    pub href: String,
    /// Its run and call id, which its upstream legs name.
    pub run_id: String,
    pub call_id: String,
    /// Its requests to an imported tool's server, once read ([`TreeNode::hang_legs`]).
    pub legs: Vec<LegView>,
    pub tool: String,
    pub origin: String,
    pub outcome: String,
    pub approval: String,
    pub time: String,
    pub children: Vec<TreeNode>,
}

impl TreeNode {
    pub fn of(tree: &CallTree) -> Self {
        let entry = &tree.entry;
        TreeNode {
            href: call_href(&entry.run_id, &entry.call_id),
            run_id: entry.run_id.clone(),
            call_id: entry.call_id.clone(),
            legs: Vec::new(),
            tool: entry.tool.clone(),
            origin: entry.origin.clone(),
            outcome: entry.outcome.clone(),
            approval: approval_of(entry),
            time: utc_ms(entry.time_unix_ms),
            children: tree.children.iter().map(TreeNode::of).collect(),
        }
    }

    /// Hangs each leg under the node of the call that sent it (a leg of no node is left out).
    pub fn hang_legs(&mut self, legs: &[UpstreamEntry]) {
        self.legs = legs
            .iter()
            .filter(|l| {
                l.run_id.as_deref() == Some(self.run_id.as_str())
                    && l.call_id.as_deref() == Some(self.call_id.as_str())
            })
            .map(LegView::of)
            .collect();
        for child in &mut self.children {
            child.hang_legs(legs);
        }
    }
}

/// A call's page.
#[derive(Debug, Clone, Serialize)]
pub struct CallView {
    pub tool: String,
    pub version: String,
    pub call_id: String,
    pub run_id: String,
    pub instance: String,
    pub time: String,
    pub principal: String,
    pub origin: String,
    pub risk: String,
    pub stage: String,
    pub outcome: String,
    pub approval: String,
    pub decided_by: String,
    /// The receipt's key (a write's idempotency key), when the call wrote.
    pub receipt: String,
    pub duplicate: bool,
    pub taint: Vec<String>,
    pub taint_rule: String,
    pub arguments: String,
    pub record: String,
    pub parent_href: Option<String>,
    pub tree: TreeNode,
    pub calls: usize,
    /// What the store holds under the receipt's key, once read ([`ReceiptView::of`]).
    pub written: Option<ReceiptView>,
    /// The egress exit's decisions on the requests this call's handler made, once read.
    pub egress: Vec<EgressView>,
    /// Why they could not be read, when they could not.
    pub egress_error: String,
    /// Why the upstream legs could not be read, when they could not.
    pub legs_error: String,
}

/// One decision of the egress exit as the call's page shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EgressView {
    pub time: String,
    /// `allowed` or `blocked`.
    pub decision: String,
    /// `GET`, `SMTP`, or `session` (an MCP session's check).
    pub method: String,
    /// Host and port as the exit saw them.
    pub host: String,
    pub url: String,
    pub status: String,
    /// The rule that let it out, or the check that blocked it.
    pub rule: String,
    /// Why it was blocked, or how an allowed request failed.
    pub why: String,
}

impl EgressView {
    pub fn of(entry: &EgressEntry) -> EgressView {
        let host = match (&entry.host, entry.port) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.clone(),
            (None, _) => String::new(),
        };
        EgressView {
            time: utc_ms(entry.time_unix_ms),
            decision: entry.decision.clone(),
            method: entry.method.clone().unwrap_or_else(|| "session".into()),
            host,
            url: entry.url.clone().unwrap_or_default(),
            status: entry.status.map(|s| s.to_string()).unwrap_or_default(),
            rule: entry.rule.clone().unwrap_or_default(),
            why: entry
                .reason
                .clone()
                .or_else(|| entry.error.clone())
                .unwrap_or_default(),
        }
    }
}

/// A write's receipt as the call's page shows it: what was written, under which key, when; or
/// the claim an outside effect left, or why there is nothing to show.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReceiptView {
    /// `receipt`, `claimed`, `missing`, `not_read` or `unreadable`.
    pub state: String,
    pub key: String,
    pub tool: String,
    /// The write's result as recorded (JSON, pretty).
    pub written: String,
    /// How to revert it (JSON, pretty), where it can be.
    pub undo: String,
    /// When the receipt was recorded (or the key claimed), UTC.
    pub when: String,
    /// For a claim: what a person must check before retrying.
    pub what_to_check: String,
    /// For `unreadable`: why.
    pub error: String,
}

impl ReceiptView {
    /// The page's view of a lookup: `Ok(None)` is a store that reads no receipts, `Err` its
    /// message (the rest of the call's page still shows).
    pub fn of<E: std::fmt::Display>(found: Result<Option<WriteRecord>, E>) -> ReceiptView {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
        match found {
            Ok(Some(WriteRecord::Receipt(r))) => ReceiptView {
                state: "receipt".into(),
                key: r.key,
                tool: r.tool,
                written: pretty(&r.result),
                undo: r.undo.as_ref().map(pretty).unwrap_or_default(),
                when: crate::pages::utc(r.created_at_unix),
                ..ReceiptView::default()
            },
            Ok(Some(WriteRecord::Claimed(c))) => ReceiptView {
                state: "claimed".into(),
                key: c.key,
                tool: c.tool,
                when: crate::pages::utc(c.claimed_at_unix),
                what_to_check: c.what_to_check,
                ..ReceiptView::default()
            },
            Ok(Some(WriteRecord::Missing)) => ReceiptView {
                state: "missing".into(),
                ..ReceiptView::default()
            },
            Ok(None) => ReceiptView {
                state: "not_read".into(),
                ..ReceiptView::default()
            },
            Err(e) => ReceiptView {
                state: "unreadable".into(),
                error: e.to_string(),
                ..ReceiptView::default()
            },
        }
    }
}

impl CallView {
    pub fn of(tree: &CallTree) -> Self {
        let entry = &tree.entry;
        let record = &entry.record;
        let text = |key: &str| match record.get(key) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let taint = match record.get("taint") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    serde_json::from_value::<toolgate_core::taint::Taint>(item.clone())
                        .map_or_else(|_| item.to_string(), |t| t.sentence())
                })
                .collect(),
            _ => Vec::new(),
        };
        let effect = text("effect");
        let risk = match (text("risk"), effect) {
            (risk, effect) if effect.is_empty() => risk,
            (risk, effect) => format!("{risk} ({effect})"),
        };
        CallView {
            tool: entry.tool.clone(),
            version: text("tool_version"),
            call_id: entry.call_id.clone(),
            run_id: entry.run_id.clone(),
            instance: entry.instance.clone(),
            time: utc_ms(entry.time_unix_ms),
            principal: principal_of(entry),
            origin: entry.origin.clone(),
            risk,
            stage: text("stage"),
            outcome: entry.outcome.clone(),
            approval: approval_of(entry),
            decided_by: entry.decided_by.as_deref().map(who_of).unwrap_or_default(),
            receipt: text("idempotency_key"),
            duplicate: record.get("duplicate") == Some(&Value::Bool(true)),
            taint,
            taint_rule: text("taint_rule"),
            arguments: record
                .get("arguments")
                .map(|a| serde_json::to_string_pretty(a).unwrap_or_default())
                .unwrap_or_default(),
            record: serde_json::to_string_pretty(record).unwrap_or_default(),
            parent_href: entry
                .parent_call_id
                .as_deref()
                .map(|parent| call_href(&entry.run_id, parent)),
            tree: TreeNode::of(tree),
            calls: tree.len(),
            written: None,
            egress: Vec::new(),
            egress_error: String::new(),
            legs_error: String::new(),
        }
    }
}

/// The principal and, when recorded, its tenant: `alice (https://as.example)`.
fn principal_of(entry: &AuditEntry) -> String {
    if entry.tenant.is_empty() {
        entry.principal.clone()
    } else {
        format!("{} ({})", entry.principal, entry.tenant)
    }
}

/// The approval in words: the status, how it was approved or why it was denied.
fn approval_of(entry: &AuditEntry) -> String {
    let approval = entry.record.get("approval");
    let via = approval
        .and_then(|a| a.get("via"))
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned));
    let status = entry.approval.replace('_', " ");
    match (via, &entry.denial) {
        (Some(via), _) => format!("{status} via {via}"),
        (None, Some(denial)) => format!("{status}: {}", denial.replace('_', " ")),
        (None, None) => status,
    }
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS.mmm UTC`.
pub fn utc_ms(time_unix_ms: i64) -> String {
    let seconds = crate::pages::utc(time_unix_ms.div_euclid(1000));
    let ms = time_unix_ms.rem_euclid(1000);
    match seconds.strip_suffix(" UTC") {
        Some(head) => format!("{head}.{ms:03} UTC"),
        None => seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_store::audit::{ApprovalFilter, OutcomeFilter};

    #[test]
    fn a_query_string_becomes_the_filter_it_names() {
        let search = parse_search(
            "principal=alice&tool=email_send&outcome=error&approval=declined&decided_by=bob\
             &since=2026-12-01&until=2026-12-05T09%3A30&after=1700.9&format=csv",
        )
        .unwrap();
        assert_eq!(
            search.filter,
            AuditFilter {
                principal: Some("alice".into()),
                tool: Some("email_send".into()),
                outcome: Some(OutcomeFilter::AnyError),
                approval: Some(ApprovalFilter::Declined),
                decided_by: Some("bob".into()),
                since_ms: Some(1_796_083_200_000),
                until_ms: Some(1_796_463_000_000),
                ..AuditFilter::default()
            }
        );
        assert_eq!(
            search.after,
            Some(Cursor {
                time_unix_ms: 1700,
                id: 9
            })
        );
        // Empty fields are no filter at all.
        let empty = parse_search("principal=&tool=+&outcome=").unwrap();
        assert_eq!(empty.filter, AuditFilter::default());
        assert_eq!(empty.form.query(), "");
    }

    #[test]
    fn values_outside_their_closed_forms_are_refused_with_the_form_as_typed() {
        for (query, field) in [
            ("outcome=fine", "outcome"),
            ("approval=maybe", "approval"),
            ("since=yesterday", "since"),
            ("until=2026-02-30", "until"),
            ("since=2026-12-01T25:00", "since"),
            ("after=5", "after"),
        ] {
            let (form, refusal) = parse_search(query).unwrap_err();
            assert!(
                form.query().contains(field) || field == "after",
                "{query}: {form:?}"
            );
            assert!(!refusal.to_string().is_empty(), "{query}");
        }
    }

    #[test]
    fn links_repeat_the_search_with_hostile_values_encoded() {
        let form = SearchForm {
            principal: "a&b=<x>".into(),
            tool: "t".into(),
            ..SearchForm::default()
        };
        assert_eq!(
            form.link("/console/audit", &[("after", "5.7")]),
            "/console/audit?principal=a%26b%3D%3Cx%3E&tool=t&after=5.7"
        );
        let back = parse_search(form.query().as_str()).unwrap();
        assert_eq!(back.filter.principal.as_deref(), Some("a&b=<x>"));
        assert_eq!(
            call_href("run 1", "c&1"),
            "/console/audit/call?run=run+1&call=c%261"
        );
    }

    const HOSTILE: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>";

    fn hostile_entry(id: i64, call: &str, parent: Option<&str>) -> AuditEntry {
        AuditEntry {
            id,
            time_unix_ms: 1_796_461_200_000 + id,
            instance: format!("host{HOSTILE}"),
            call_id: call.into(),
            parent_call_id: parent.map(str::to_owned),
            run_id: format!("run{HOSTILE}"),
            tenant: HOSTILE.into(),
            principal: HOSTILE.into(),
            tool: format!("tool{HOSTILE}"),
            origin: "sandbox".into(),
            outcome: "ok".into(),
            approval: "approved".into(),
            denial: None,
            decided_by: Some(format!("[\"iss\",\"{HOSTILE}\"]")),
            record: serde_json::json!({
                "arguments": {"query": HOSTILE},
                "approval": {"status": "approved", "via": HOSTILE},
                "idempotency_key": HOSTILE,
                "taint": [{"argument": "query", "value": HOSTILE, "source": {"kind": HOSTILE}}],
            }),
        }
    }

    fn render(name: &str, context: minijinja::Value) -> String {
        use http_body_util::BodyExt;
        let templates = crate::pages::Templates::load().unwrap();
        let response = templates.page(http::StatusCode::OK, name, context);
        assert_eq!(response.status(), http::StatusCode::OK, "{name} rendered");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = runtime
            .block_on(response.into_body().collect())
            .unwrap()
            .to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn no_value_of_a_record_becomes_markup_in_the_search_or_a_calls_page() {
        let root = hostile_entry(1, "c1", None);
        let tree = CallTree {
            entry: root.clone(),
            children: vec![CallTree {
                entry: hostile_entry(2, "c1.1", Some("c1")),
                children: vec![CallTree {
                    entry: hostile_entry(3, "c1.1.1", Some("c1.1")),
                    children: Vec::new(),
                }],
            }],
        };
        let form = SearchForm {
            principal: HOSTILE.into(),
            tool: HOSTILE.into(),
            ..SearchForm::default()
        };
        let search = render(
            "audit.html",
            minijinja::context! {
                form => &form, lines => vec![AuditLine::of(&root)],
                next => Some(form.link("/console/audit", &[("after", "1.2")])),
                outcomes => outcome_choices(), approvals => approval_choices(),
                jsonl => form.link("/console/audit/export", &[("format", "jsonl")]),
                csv => "x", who => HOSTILE, csrf => "\"><script>",
            },
        );
        let call = render(
            "call.html",
            minijinja::context! { c => CallView::of(&tree), who => "w", csrf => "c" },
        );
        // What the call's page reads beside the record: a receipt, a claim, egress decisions
        // (hosts, URLs, rules and reasons as the exit recorded them) and read errors.
        let hostile_egress = EgressEntry {
            id: 1,
            time_unix_ms: 0,
            instance: HOSTILE.into(),
            call_id: Some(HOSTILE.into()),
            run_id: Some(HOSTILE.into()),
            decision: HOSTILE.into(),
            method: Some(HOSTILE.into()),
            scheme: Some(HOSTILE.into()),
            host: Some(HOSTILE.into()),
            port: Some(443),
            url: Some(format!("https://x.example/{HOSTILE}")),
            status: Some(200),
            rule: Some(HOSTILE.into()),
            reason: Some(HOSTILE.into()),
            error: Some(HOSTILE.into()),
        };
        let mut beside = Vec::new();
        for (written, egress_error) in [
            (
                ReceiptView::of::<String>(Ok(Some(WriteRecord::Receipt(
                    toolgate_store::audit::StoredReceipt {
                        key: HOSTILE.into(),
                        tool: HOSTILE.into(),
                        result: serde_json::json!({"title": HOSTILE}),
                        undo: Some(serde_json::json!({"note": HOSTILE})),
                        created_at_unix: 1,
                    },
                )))),
                String::new(),
            ),
            (
                ReceiptView::of::<String>(Ok(Some(WriteRecord::Claimed(
                    toolgate_store::audit::StoredClaim {
                        key: HOSTILE.into(),
                        tool: HOSTILE.into(),
                        what_to_check: HOSTILE.into(),
                        claimed_at_unix: 1,
                    },
                )))),
                HOSTILE.to_string(),
            ),
            (ReceiptView::of(Err(HOSTILE)), String::new()),
        ] {
            let mut view = CallView::of(&tree);
            view.tree.hang_legs(&[UpstreamEntry {
                id: 9,
                time_unix_ms: 0,
                instance: HOSTILE.into(),
                call_id: Some("c1".into()),
                run_id: Some(format!("run{HOSTILE}")),
                server: HOSTILE.into(),
                tool: HOSTILE.into(),
                outcome: HOSTILE.into(),
                duration_ms: 3,
                reference: None,
            }]);
            view.receipt = HOSTILE.into();
            view.written = Some(written);
            if egress_error.is_empty() {
                view.egress = vec![EgressView::of(&hostile_egress)];
            }
            view.egress_error = egress_error;
            beside.push(render(
                "call.html",
                minijinja::context! { c => view, who => "w", csrf => "c" },
            ));
        }
        assert!(
            beside[0].contains("id=\"receipt-written\""),
            "{}",
            beside[0]
        );
        assert!(beside[0].contains("class=\"host\""), "{}", beside[0]);
        assert!(
            beside[1].contains("id=\"receipt-claimed\""),
            "{}",
            beside[1]
        );
        assert!(
            beside[1].contains("id=\"egress-unreadable\""),
            "{}",
            beside[1]
        );
        assert!(
            beside[2].contains("id=\"receipt-unreadable\""),
            "{}",
            beside[2]
        );
        assert_eq!(
            beside[0].matches("class=\"upstream\"").count(),
            1,
            "{}",
            beside[0]
        );
        for body in [&search, &call].into_iter().chain(&beside) {
            assert!(!body.contains("<script"), "{body}");
            assert!(!body.contains("<img"), "{body}");
            assert!(body.contains("&lt;script&gt;alert(1)"), "{body}");
        }
        // The tree nests each child under its parent, once, and is not escaped twice.
        assert_eq!(call.matches("class=\"node\"").count(), 3, "{call}");
        assert_eq!(call.matches("<ul>").count(), 2, "{call}");
        assert!(!call.contains("&amp;lt;"), "escaped twice: {call}");
        assert!(call.contains("approved via &lt;script&gt;"), "{call}");
        assert!(!call.contains("id=\"parent\""), "the root has no parent");
    }

    #[test]
    fn a_receipt_lookup_says_what_it_found_or_why_nothing_shows() {
        use toolgate_store::audit::{StoredClaim, StoredReceipt};
        let receipt = StoredReceipt {
            key: "k".into(),
            tool: "email_send".into(),
            result: serde_json::json!({"sent": true}),
            undo: None,
            created_at_unix: 86_400,
        };
        let claim = StoredClaim {
            key: "k".into(),
            tool: "email_send".into(),
            what_to_check: "the relay's log".into(),
            claimed_at_unix: 0,
        };
        let cases: Vec<(Result<Option<WriteRecord>, &str>, &str, &str, &str)> = vec![
            (
                Ok(Some(WriteRecord::Receipt(receipt))),
                "receipt",
                "1970-01-02 00:00:00 UTC",
                "\"sent\": true",
            ),
            (
                Ok(Some(WriteRecord::Claimed(claim))),
                "claimed",
                "1970-01-01 00:00:00 UTC",
                "",
            ),
            (Ok(Some(WriteRecord::Missing)), "missing", "", ""),
            (Ok(None), "not_read", "", ""),
            (Err("disk gone"), "unreadable", "", ""),
        ];
        for (found, state, when, written) in cases {
            let view = ReceiptView::of(found);
            assert_eq!(view.state, state);
            assert_eq!(view.when, when, "{state}");
            assert!(view.written.contains(written), "{state}: {view:?}");
        }
        assert_eq!(
            ReceiptView::of(Err("disk gone")).error,
            "disk gone",
            "a read error is said, not hidden"
        );
    }

    #[test]
    fn an_egress_decision_shows_its_host_and_why_and_a_session_check_says_so() {
        let entry = |method: Option<&str>,
                     host: Option<&str>,
                     port,
                     reason: Option<&str>,
                     error: Option<&str>| EgressEntry {
            id: 1,
            time_unix_ms: 0,
            instance: "i".into(),
            call_id: None,
            run_id: None,
            decision: "blocked".into(),
            method: method.map(str::to_owned),
            scheme: None,
            host: host.map(str::to_owned),
            port,
            url: None,
            status: None,
            rule: None,
            reason: reason.map(str::to_owned),
            error: error.map(str::to_owned),
        };
        for (e, method, host, why) in [
            (
                entry(
                    Some("GET"),
                    Some("a.example"),
                    Some(443),
                    Some("unlisted"),
                    None,
                ),
                "GET",
                "a.example:443",
                "unlisted",
            ),
            (
                entry(
                    Some("SMTP"),
                    Some("relay"),
                    None,
                    None,
                    Some("timeout: 5 s"),
                ),
                "SMTP",
                "relay",
                "timeout: 5 s",
            ),
            (entry(None, None, None, None, None), "session", "", ""),
        ] {
            let view = EgressView::of(&e);
            assert_eq!(
                (view.method.as_str(), view.host.as_str(), view.why.as_str()),
                (method, host, why)
            );
        }
    }

    #[test]
    fn an_upstream_leg_hangs_under_the_call_that_sent_it_and_nowhere_else() {
        let tree = CallTree {
            entry: hostile_entry(1, "c1", None),
            children: vec![CallTree {
                entry: hostile_entry(2, "c1.1", Some("c1")),
                children: Vec::new(),
            }],
        };
        let run = tree.entry.run_id.clone();
        let leg = |id, call: &str, run: &str| UpstreamEntry {
            id,
            time_unix_ms: id,
            instance: "i".into(),
            call_id: Some(call.into()),
            run_id: Some(run.into()),
            server: "docs".into(),
            tool: format!("search{id}"),
            outcome: "ok".into(),
            duration_ms: 12,
            reference: None,
        };
        let mut node = TreeNode::of(&tree);
        node.hang_legs(&[
            leg(1, "c1.1", &run),
            leg(2, "c1", &run),
            leg(3, "c1", "another run"),
            leg(4, "c9", &run),
        ]);
        let tools = |n: &TreeNode| n.legs.iter().map(|l| l.tool.clone()).collect::<Vec<_>>();
        assert_eq!(tools(&node), ["search2"]);
        assert_eq!(tools(&node.children[0]), ["search1"]);
        assert_eq!(node.children[0].legs[0].took, "12 ms");
    }

    #[test]
    fn times_are_read_as_utc() {
        assert_eq!(parse_utc("1970-01-01"), Some(0));
        assert_eq!(parse_utc("1970-01-02T00:00"), Some(86_400_000));
        assert_eq!(parse_utc("2000-02-29 12:00:01"), Some(951_825_601_000));
        for bad in [
            "",
            "2026",
            "2026-1-01",
            "2026-13-01",
            "2025-02-29",
            "2026-12-01T9:00",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
        assert_eq!(utc_ms(1_500), "1970-01-01 00:00:01.500 UTC");
    }
}
