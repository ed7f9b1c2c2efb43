//! The audit's searches as statements: pure functions from a filter to SQL text and its values,
//! written once with SQLite's placeholders (PostgreSQL's are derived by
//! [`toolgate_core::sql::postgres_placeholders`]), so both stores run the same statement.
//!
//! Guarantees: every value a person typed is bound as a parameter, never spliced into the text;
//! results are newest first (`time_unix_ms`, then `id`, descending); a page after a [`Cursor`]
//! is bounded by the cursor in the `WHERE` clause, which the indexes of migration V11 (and the
//! SQLite schema) turn into a range read: no `OFFSET`, so page 1,000 costs what page 1 does.
//! Refuses (at parse time): an outcome, approval state or cursor outside its closed form.

use std::str::FromStr;

use toolgate_core::ErrorCode;
use toolgate_core::sql::SqlValue;

use super::row::ENTRY_COLUMNS;

/// The most rows one page may hold.
pub const MAX_PAGE: u32 = 1000;

/// The most calls a tree holds (a loop gone wrong must not make one page unbounded).
pub const MAX_TREE: usize = 10_000;

/// How the call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutcomeFilter {
    Ok,
    /// Any error.
    AnyError,
    /// One error code.
    Error(ErrorCode),
    ApprovalRequired,
}

impl FromStr for OutcomeFilter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ok" => Ok(OutcomeFilter::Ok),
            "error" => Ok(OutcomeFilter::AnyError),
            "approval_required" => Ok(OutcomeFilter::ApprovalRequired),
            code => ErrorCode::ALL
                .into_iter()
                .find(|c| c.as_str() == code)
                .map(OutcomeFilter::Error)
                .ok_or_else(|| {
                    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
                    format!(
                        "{s:?} is not an outcome: ok, error, approval_required or an error code ({})",
                        codes.join(", ")
                    )
                }),
        }
    }
}

/// How approval went, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalFilter {
    NotNeeded,
    Replayed,
    Approved,
    Pending,
    /// Denied for any reason (declined, no channel, expired, ...).
    Denied,
    /// Denied because a person said no.
    Declined,
}

impl FromStr for ApprovalFilter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "not_needed" => ApprovalFilter::NotNeeded,
            "replayed" => ApprovalFilter::Replayed,
            "approved" => ApprovalFilter::Approved,
            "pending" => ApprovalFilter::Pending,
            "denied" => ApprovalFilter::Denied,
            "declined" => ApprovalFilter::Declined,
            other => {
                return Err(format!(
                    "{other:?} is not an approval state: not_needed, replayed, approved, \
                     pending, denied or declined"
                ));
            }
        })
    }
}

/// What to search for; every field set narrows the search (all must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub principal: Option<String>,
    pub tenant: Option<String>,
    pub tool: Option<String>,
    pub run_id: Option<String>,
    pub outcome: Option<OutcomeFilter>,
    pub approval: Option<ApprovalFilter>,
    /// Who answered the approval, as recorded.
    pub decided_by: Option<String>,
    /// Recorded at or after this time (Unix milliseconds).
    pub since_ms: Option<i64>,
    /// Recorded before this time (Unix milliseconds).
    pub until_ms: Option<i64>,
}

/// Where the next page starts: the last row of the page before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub time_unix_ms: i64,
    pub id: i64,
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.time_unix_ms, self.id)
    }
}

impl FromStr for Cursor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?} is not a page cursor (TIME.ID, as a search prints it)");
        let (time, id) = s.split_once('.').ok_or_else(bad)?;
        Ok(Cursor {
            time_unix_ms: time.parse().map_err(|_| bad())?,
            id: id.parse().map_err(|_| bad())?,
        })
    }
}

/// A statement and the values bound to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub sql: String,
    pub params: Vec<SqlValue>,
}

/// Adds `AND <clause>` with its values, numbering the placeholders `?N` as it goes.
struct Builder {
    sql: String,
    params: Vec<SqlValue>,
}

impl Builder {
    fn new(head: String) -> Self {
        Builder {
            sql: head,
            params: Vec::new(),
        }
    }

    /// A placeholder for `value`.
    fn bind(&mut self, value: impl Into<SqlValue>) -> String {
        self.params.push(value.into());
        format!("?{}", self.params.len())
    }

    fn and(&mut self, clause: &str) {
        self.sql.push_str(" AND ");
        self.sql.push_str(clause);
    }

    fn equal(&mut self, column: &str, value: Option<&String>) {
        if let Some(value) = value {
            let p = self.bind(value);
            self.and(&format!("{column} = {p}"));
        }
    }

    fn finish(self) -> Statement {
        Statement {
            sql: self.sql,
            params: self.params,
        }
    }
}

/// The rows of one page of the search: at most `fetch` rows (clamped to 1 to [`MAX_PAGE`] + 1:
/// a page and the one row more that says whether another page follows) matching `filter`,
/// newest first, after `after` when given.
pub fn search(filter: &AuditFilter, after: Option<Cursor>, fetch: u32) -> Statement {
    let mut b = Builder::new(format!("SELECT {ENTRY_COLUMNS} FROM decisions WHERE 1 = 1"));
    b.equal("principal", filter.principal.as_ref());
    b.equal("tenant", filter.tenant.as_ref());
    b.equal("tool", filter.tool.as_ref());
    b.equal("run_id", filter.run_id.as_ref());
    match &filter.outcome {
        None => {}
        Some(OutcomeFilter::Ok) => b.and("outcome = 'ok'"),
        Some(OutcomeFilter::ApprovalRequired) => b.and("outcome = 'approval_required'"),
        Some(OutcomeFilter::AnyError) => b.and("outcome NOT IN ('ok', 'approval_required')"),
        Some(OutcomeFilter::Error(code)) => {
            let p = b.bind(code.as_str());
            b.and(&format!("outcome = {p}"));
        }
    }
    match filter.approval {
        None => {}
        Some(ApprovalFilter::NotNeeded) => b.and("approval = 'not_needed'"),
        Some(ApprovalFilter::Replayed) => b.and("approval = 'replayed'"),
        Some(ApprovalFilter::Approved) => b.and("approval = 'approved'"),
        Some(ApprovalFilter::Pending) => b.and("approval = 'pending'"),
        Some(ApprovalFilter::Denied) => b.and("approval = 'denied'"),
        Some(ApprovalFilter::Declined) => b.and("approval = 'denied' AND denial = 'declined'"),
    }
    b.equal("decided_by", filter.decided_by.as_ref());
    if let Some(since) = filter.since_ms {
        let p = b.bind(since);
        b.and(&format!("time_unix_ms >= {p}"));
    }
    if let Some(until) = filter.until_ms {
        let p = b.bind(until);
        b.and(&format!("time_unix_ms < {p}"));
    }
    if let Some(cursor) = after {
        // The first bound is a plain range on the index's time column; the second only
        // separates rows of the same millisecond.
        let t = b.bind(cursor.time_unix_ms);
        let id = b.bind(cursor.id);
        b.and(&format!(
            "time_unix_ms <= {t} AND (time_unix_ms < {t} OR id < {id})"
        ));
    }
    let limit = b.bind(i64::from(fetch.clamp(1, MAX_PAGE + 1)));
    b.sql.push_str(&format!(
        " ORDER BY time_unix_ms DESC, id DESC LIMIT {limit}"
    ));
    b.finish()
}

/// The row with id `id` (a search's or an export's `id`).
pub fn by_id(id: i64) -> Statement {
    Statement {
        sql: format!("SELECT {ENTRY_COLUMNS} FROM decisions WHERE id = ?1"),
        params: vec![id.into()],
    }
}

/// The newest row of call `call_id` (in run `run_id`, when given): the root of a tree.
pub fn call(call_id: &str, run_id: Option<&str>) -> Statement {
    let mut b = Builder::new(format!("SELECT {ENTRY_COLUMNS} FROM decisions WHERE 1 = 1"));
    b.equal("call_id", Some(&call_id.to_owned()));
    b.equal("run_id", run_id.map(str::to_owned).as_ref());
    b.sql
        .push_str(" ORDER BY time_unix_ms DESC, id DESC LIMIT 1");
    b.finish()
}

/// The calls made from inside any of `parents` (call ids of run `run_id`, recorded by
/// `instance`), oldest first, at most `limit`.
pub fn children(run_id: &str, instance: &str, parents: &[String], limit: usize) -> Statement {
    let mut b = Builder::new(format!("SELECT {ENTRY_COLUMNS} FROM decisions WHERE 1 = 1"));
    b.equal("run_id", Some(&run_id.to_owned()));
    b.equal("instance", Some(&instance.to_owned()));
    let marks: Vec<String> = parents.iter().map(|p| b.bind(p)).collect();
    b.and(&format!("parent_call_id IN ({})", marks.join(", ")));
    let limit = b.bind(i64::try_from(limit).unwrap_or(i64::MAX));
    b.sql
        .push_str(&format!(" ORDER BY time_unix_ms, id LIMIT {limit}"));
    b.finish()
}

/// The calls other processes recorded as dispatched for any of `references` (the references a
/// toolgate gateway's upstream legs recorded as sent, [`super::upstream::UpstreamEntry::reference`],
/// never ones computed from a run and call id), in any run, oldest first, at most `limit`.
pub fn served_for(references: &[String], limit: usize) -> Statement {
    let mut b = Builder::new(format!("SELECT {ENTRY_COLUMNS} FROM decisions WHERE 1 = 1"));
    let marks: Vec<String> = references.iter().map(|p| b.bind(p)).collect();
    b.and(&format!("parent_call_id IN ({})", marks.join(", ")));
    let limit = b.bind(i64::try_from(limit).unwrap_or(i64::MAX));
    b.sql
        .push_str(&format!(" ORDER BY time_unix_ms, id LIMIT {limit}"));
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(statement: &Statement) -> &str {
        statement
            .sql
            .split_once("FROM decisions ")
            .map(|(_, t)| t)
            .unwrap_or(&statement.sql)
    }

    #[test]
    fn each_filter_becomes_its_clause_with_its_values_bound() {
        let text = |s: &str| SqlValue::Text(s.into());
        let cases: Vec<(AuditFilter, Option<Cursor>, &str, Vec<SqlValue>)> = vec![
            (
                AuditFilter::default(),
                None,
                "WHERE 1 = 1 ORDER BY time_unix_ms DESC, id DESC LIMIT ?1",
                vec![50i64.into()],
            ),
            (
                AuditFilter {
                    principal: Some("alice".into()),
                    ..Default::default()
                },
                None,
                "WHERE 1 = 1 AND principal = ?1 ORDER BY time_unix_ms DESC, id DESC LIMIT ?2",
                vec![text("alice"), 50i64.into()],
            ),
            (
                AuditFilter {
                    tool: Some("email_send".into()),
                    outcome: Some(OutcomeFilter::Error(ErrorCode::ApprovalDenied)),
                    ..Default::default()
                },
                None,
                "WHERE 1 = 1 AND tool = ?1 AND outcome = ?2 ORDER BY time_unix_ms DESC, id DESC LIMIT ?3",
                vec![text("email_send"), text("approval_denied"), 50i64.into()],
            ),
            (
                AuditFilter {
                    outcome: Some(OutcomeFilter::AnyError),
                    since_ms: Some(100),
                    until_ms: Some(200),
                    ..Default::default()
                },
                None,
                "WHERE 1 = 1 AND outcome NOT IN ('ok', 'approval_required') AND time_unix_ms >= ?1 AND time_unix_ms < ?2 ORDER BY time_unix_ms DESC, id DESC LIMIT ?3",
                vec![100i64.into(), 200i64.into(), 50i64.into()],
            ),
            (
                AuditFilter {
                    approval: Some(ApprovalFilter::Declined),
                    decided_by: Some("bob".into()),
                    ..Default::default()
                },
                None,
                "WHERE 1 = 1 AND approval = 'denied' AND denial = 'declined' AND decided_by = ?1 ORDER BY time_unix_ms DESC, id DESC LIMIT ?2",
                vec![text("bob"), 50i64.into()],
            ),
            (
                AuditFilter {
                    principal: Some("alice".into()),
                    ..Default::default()
                },
                Some(Cursor {
                    time_unix_ms: 1_700,
                    id: 9,
                }),
                "WHERE 1 = 1 AND principal = ?1 AND time_unix_ms <= ?2 AND (time_unix_ms < ?2 OR id < ?3) ORDER BY time_unix_ms DESC, id DESC LIMIT ?4",
                vec![text("alice"), 1_700i64.into(), 9i64.into(), 50i64.into()],
            ),
        ];
        for (filter, after, expected, params) in cases {
            let statement = search(&filter, after, 50);
            assert_eq!(tail(&statement), expected, "{filter:?}");
            assert_eq!(statement.params, params, "{filter:?}");
            assert!(!statement.sql.contains("OFFSET"), "{}", statement.sql);
        }
    }

    #[test]
    fn hostile_values_are_bound_never_spliced() {
        let hostile = "x' OR '1'='1";
        let statement = search(
            &AuditFilter {
                principal: Some(hostile.into()),
                tool: Some(hostile.into()),
                decided_by: Some(hostile.into()),
                ..Default::default()
            },
            None,
            10,
        );
        assert!(!statement.sql.contains(hostile), "{}", statement.sql);
        assert_eq!(
            statement
                .params
                .iter()
                .filter(|p| **p == SqlValue::Text(hostile.into()))
                .count(),
            3
        );
    }

    #[test]
    fn a_page_size_out_of_bounds_is_clamped() {
        for (asked, bound) in [
            (0, 1),
            (1, 1),
            (50, 50),
            (MAX_PAGE + 1, MAX_PAGE + 1),
            (u32::MAX, MAX_PAGE + 1),
        ] {
            let statement = search(&AuditFilter::default(), None, asked);
            assert_eq!(statement.params, vec![SqlValue::from(i64::from(bound))]);
        }
    }

    #[test]
    fn unknown_outcomes_approvals_and_cursors_are_refused() {
        assert_eq!("ok".parse(), Ok(OutcomeFilter::Ok));
        assert_eq!("error".parse(), Ok(OutcomeFilter::AnyError));
        assert_eq!(
            "forbidden".parse(),
            Ok(OutcomeFilter::Error(ErrorCode::Forbidden))
        );
        assert!("fine".parse::<OutcomeFilter>().is_err());
        assert_eq!("declined".parse(), Ok(ApprovalFilter::Declined));
        assert!("maybe".parse::<ApprovalFilter>().is_err());
        let cursor = Cursor {
            time_unix_ms: 5,
            id: 7,
        };
        assert_eq!(cursor.to_string().parse(), Ok(cursor));
        for bad in ["", "5", "5.x", "a.7", "5.7.1"] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_tree_reads_one_run_of_one_instance() {
        let root = call("call-7", Some("run-1"));
        assert_eq!(
            tail(&root),
            "WHERE 1 = 1 AND call_id = ?1 AND run_id = ?2 ORDER BY time_unix_ms DESC, id DESC LIMIT 1"
        );
        let kids = children("run-1", "host/1", &["a".into(), "b".into()], 10);
        assert_eq!(
            tail(&kids),
            "WHERE 1 = 1 AND run_id = ?1 AND instance = ?2 AND parent_call_id IN (?3, ?4) ORDER BY time_unix_ms, id LIMIT ?5"
        );
        assert_eq!(kids.params.len(), 5);
    }
}
