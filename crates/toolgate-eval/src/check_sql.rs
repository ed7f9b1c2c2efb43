//! A check's SQL on either store (SQLite, or a team's PostgreSQL): the rows of one read-only
//! statement, as JSON values that compare the same whichever database produced them.
//!
//! Guarantees:
//! - Only a statement that begins with `SELECT`, `WITH` or `VALUES` runs, and it runs under the
//!   database's own read-only guard (SQLite's `PRAGMA query_only`, PostgreSQL's `BEGIN READ
//!   ONLY`), switched off again whatever happens; a statement that tries to write anyway is
//!   [`CheckSqlError::NotReadOnly`] and changes nothing.
//! - Values: integers and whole reals are JSON integers (12 and 12.0 are equal); a truth value
//!   is 1 or 0, as SQLite writes a comparison; text is a string; NULL is null. On PostgreSQL
//!   each row is read as `to_json(ROW(...))`, so a column of any type (a `numeric` sum, a
//!   boolean) reads as the number or string it holds, in the statement's column order.
//! - The connection given must not be inside a transaction of the caller's (a session, not a
//!   write transaction): the guard opens and ends its own.
//!
//! The statements of the suites are written for SQLite; on PostgreSQL the few SQLite
//! functions they use exist only in the eval's own database ([`crate::eval_database`]), and a
//! subquery in `FROM` without a name (which SQLite allows and PostgreSQL before 16 refuses) is
//! given one ([`name_from_subqueries`]).

use serde_json::Value;
use toolgate_core::sql::{Dialect, Sql, SqlError, SqlValue};

/// Why a check's statement gave no rows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckSqlError {
    #[error("it is not read-only; checks must never change the store")]
    NotReadOnly,
    #[error("{0}")]
    Failed(String),
}

/// The rows of the read-only statement `sql` on `conn`; see the module documentation.
pub fn read_only_rows(conn: &dyn Sql, sql: &str) -> Result<Vec<Vec<Value>>, CheckSqlError> {
    if !reads_only_by_its_first_word(sql) {
        return Err(CheckSqlError::NotReadOnly);
    }
    let (guard_on, guard_off) = match conn.dialect() {
        Dialect::Sqlite => ("PRAGMA query_only = ON", "PRAGMA query_only = OFF"),
        Dialect::Postgres => ("BEGIN READ ONLY", "ROLLBACK"),
    };
    conn.execute_batch(guard_on).map_err(failed)?;
    let rows = rows_of(conn, sql);
    let off = conn.execute_batch(guard_off).map_err(failed);
    let rows = rows?;
    off?;
    Ok(rows)
}

fn rows_of(conn: &dyn Sql, sql: &str) -> Result<Vec<Vec<Value>>, CheckSqlError> {
    match conn.dialect() {
        Dialect::Sqlite => Ok(conn
            .query(sql, &[])
            .map_err(failed)?
            .into_iter()
            .map(|row| row.0.iter().map(sqlite_value).collect())
            .collect()),
        Dialect::Postgres => {
            // Every column as JSON, so PostgreSQL's own types (numeric, boolean) need no
            // reader of their own; an anonymous ROW names its fields f1, f2, ...
            let wrapped = format!(
                "SELECT to_json(ROW(check_rows.*))::text FROM ({}) AS check_rows",
                name_from_subqueries(sql.trim().trim_end_matches(';'))
            );
            conn.query(&wrapped, &[])
                .map_err(failed)?
                .iter()
                .map(|row| {
                    let text = row.text(0).map_err(failed)?;
                    let record: Value = serde_json::from_str(&text)
                        .map_err(|e| CheckSqlError::Failed(format!("a row as JSON: {e}")))?;
                    Ok(fields_in_order(&record))
                })
                .collect()
        }
    }
}

/// A row record's `f1`, `f2`, ... values in that order (a JSON object's keys are not kept in
/// order once parsed).
fn fields_in_order(record: &Value) -> Vec<Value> {
    (1..)
        .map_while(|i| record.get(format!("f{i}")))
        .map(|v| match v {
            Value::Bool(b) => Value::from(i64::from(*b)),
            Value::Number(n) => n.as_f64().map_or(v.clone(), number),
            other => other.clone(),
        })
        .collect()
}

fn sqlite_value(value: &SqlValue) -> Value {
    match value {
        SqlValue::Null => Value::Null,
        SqlValue::Integer(n) => Value::from(*n),
        SqlValue::Real(x) => number(*x),
        SqlValue::Text(t) => Value::String(t.clone()),
    }
}

/// Whole floats become integers so that 12 and 12.0 compare equal.
pub fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        Value::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// Whether the statement's first word (after blanks, comments and opening parentheses) is one
/// that begins a query. A query that still writes (a data-modifying `WITH`) is stopped by the
/// database's read-only guard.
fn reads_only_by_its_first_word(sql: &str) -> bool {
    let mut rest = sql;
    loop {
        let trimmed = rest.trim_start().trim_start_matches('(');
        if let Some(comment) = trimmed.strip_prefix("--") {
            rest = comment.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(comment) = trimmed.strip_prefix("/*") {
            rest = comment.split_once("*/").map_or("", |(_, after)| after);
        } else if trimmed.len() != rest.len() {
            rest = trimmed;
        } else {
            break;
        }
    }
    let word: String = rest
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_lowercase();
    matches!(word.as_str(), "select" | "with" | "values")
}

/// Words that may follow a subquery in `FROM` when it has no name.
const AFTER_A_NAMELESS_SUBQUERY: &[&str] = &[
    "where",
    "group",
    "order",
    "limit",
    "offset",
    "union",
    "intersect",
    "except",
    "join",
    "inner",
    "left",
    "right",
    "full",
    "cross",
    "natural",
    "on",
    "having",
    "window",
    "fetch",
    "for",
];

/// `sql` with a name (`AS from_subquery_N`) after each subquery in `FROM` that has none.
/// Quoted strings and identifiers are kept as they are.
pub fn name_from_subqueries(sql: &str) -> String {
    let chars: Vec<char> = sql.chars().collect();
    // Where each subquery that follows FROM ends (the index of its closing parenthesis).
    let mut opened: Vec<(usize, bool)> = Vec::new();
    let mut needs_name: Vec<usize> = Vec::new();
    let mut last_word = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' || c == '"' {
            let close = chars[i + 1..].iter().position(|&d| d == c);
            i = close.map_or(chars.len(), |at| i + 1 + at + 1);
            last_word.clear();
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            last_word = chars[start..i]
                .iter()
                .collect::<String>()
                .to_ascii_lowercase();
            continue;
        }
        match c {
            '(' => {
                opened.push((i, last_word == "from"));
                last_word.clear();
            }
            ')' => {
                if let Some((_, after_from)) = opened.pop()
                    && after_from
                    && !named_after(&chars[i + 1..])
                {
                    needs_name.push(i);
                }
                last_word = ")".into();
            }
            c if c.is_whitespace() => {}
            _ => last_word.clear(),
        }
        i += 1;
    }
    let mut out = String::with_capacity(sql.len() + 24 * needs_name.len());
    let mut named = 0;
    for (at, c) in chars.iter().enumerate() {
        out.push(*c);
        if needs_name.contains(&at) {
            named += 1;
            out.push_str(&format!(" AS from_subquery_{named}"));
        }
    }
    out
}

/// Whether the text after a subquery's closing parenthesis begins with its name.
fn named_after(rest: &[char]) -> bool {
    let word: String = rest
        .iter()
        .skip_while(|c| c.is_whitespace())
        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '"')
        .collect::<String>()
        .to_ascii_lowercase();
    !word.is_empty() && !AFTER_A_NAMELESS_SUBQUERY.contains(&word.as_str())
}

fn failed(e: SqlError) -> CheckSqlError {
    let detail = match &e {
        SqlError::Busy { detail }
        | SqlError::Unavailable { detail }
        | SqlError::Constraint { detail }
        | SqlError::Type { detail }
        | SqlError::Failed { detail } => detail.clone(),
    };
    // SQLite under query_only: "attempt to write a readonly database"; PostgreSQL: "cannot
    // execute INSERT in a read-only transaction".
    if detail.contains("readonly database") || detail.contains("read-only transaction") {
        CheckSqlError::NotReadOnly
    } else {
        CheckSqlError::Failed(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;
    use serde_json::json;

    fn table() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t (id INTEGER, s TEXT, x REAL); INSERT INTO t VALUES (1, 'a', 2.0), (2, NULL, 2.5);",
        )
        .unwrap();
        conn
    }

    #[test]
    fn rows_read_by_value_in_column_order() {
        let conn = table();
        assert_eq!(
            read_only_rows(&conn, "SELECT id, s, x, x > 2.1 FROM t ORDER BY id").unwrap(),
            vec![
                vec![json!(1), json!("a"), json!(2), json!(0)],
                vec![json!(2), Value::Null, json!(2.5), json!(1)],
            ]
        );
    }

    #[test]
    fn a_write_is_refused_before_or_while_it_runs_and_changes_nothing() {
        let conn = table();
        for sql in [
            "DELETE FROM t",
            "  -- a comment\n UPDATE t SET s = 'b'",
            "PRAGMA query_only = OFF",
            "WITH gone AS (SELECT 1) DELETE FROM t",
        ] {
            assert_eq!(
                read_only_rows(&conn, sql),
                Err(CheckSqlError::NotReadOnly),
                "{sql}"
            );
        }
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2, "the refused statements did not run");
        // The guard is off again: the connection still writes.
        conn.execute("INSERT INTO t VALUES (3, 'c', 1.0)", [])
            .unwrap();
    }

    #[test]
    fn a_failing_query_leaves_the_guard_off() {
        let conn = table();
        assert!(matches!(
            read_only_rows(&conn, "SELECT nope FROM t"),
            Err(CheckSqlError::Failed(_))
        ));
        conn.execute("DELETE FROM t", []).unwrap();
    }

    #[test]
    fn nameless_subqueries_in_from_get_a_name_and_named_ones_keep_theirs() {
        assert_eq!(
            name_from_subqueries(
                "SELECT (SELECT group_concat(a, ',') FROM (SELECT lower(value) AS a FROM json_each(d.x) ORDER BY 1)), instr(d.b, ')') FROM t d"
            ),
            "SELECT (SELECT group_concat(a, ',') FROM (SELECT lower(value) AS a FROM json_each(d.x) ORDER BY 1) AS from_subquery_1), instr(d.b, ')') FROM t d"
        );
        for kept in [
            "SELECT * FROM (SELECT 1) AS s",
            "SELECT * FROM (SELECT 1) s WHERE true",
            "SELECT count(*) FROM t WHERE id IN (SELECT 1)",
        ] {
            assert_eq!(name_from_subqueries(kept), kept);
        }
        assert_eq!(
            name_from_subqueries("SELECT * FROM (SELECT 1) WHERE true"),
            "SELECT * FROM (SELECT 1) AS from_subquery_1 WHERE true"
        );
    }

    #[test]
    fn record_fields_keep_their_order_past_nine() {
        let record: Value = serde_json::from_str(
            r#"{"f1":1,"f2":true,"f3":"x","f4":null,"f5":2.0,"f6":6,"f7":7,"f8":8,"f9":9,"f10":10}"#,
        )
        .unwrap();
        assert_eq!(
            fields_in_order(&record),
            vec![
                json!(1),
                json!(1),
                json!("x"),
                Value::Null,
                json!(2),
                json!(6),
                json!(7),
                json!(8),
                json!(9),
                json!(10)
            ]
        );
    }
}
