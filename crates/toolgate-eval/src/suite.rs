//! Task suites: TOML files of tasks, each with checks computed from the final store or the
//! answer (never from the model saying "done").
//!
//! Guarantees: a suite that loads has unique task ids, at least one check per task, exactly
//! one source of truth per check (`expected` or `expected_sql`), and only read-only SQL (a
//! check can never change the store it judges). Unknown keys are errors, so a typo cannot
//! silently drop a check. Refused, naming the task: an empty or blank expected string, an
//! `answer_contains` string or a literal `answer_number` the task's prompt itself contains
//! (see [`crate::checks::expectation_problems`]: such a check cannot tell an answer from an
//! echo of the question).

use std::path::Path;

use serde::{Deserialize, Serialize};
use toolgate_wiring::StoreKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    Dev,
    Heldout,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteHeader {
    pub name: String,
    pub store: StoreKind,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// The answer's first figure (not counting the prompt's own figures, dates or ids such as
    /// `Q1`) equals the expected one; a task with N of these asks for N figures, and each
    /// must be among the answer's first N (see [`crate::checks`]).
    AnswerNumber {
        #[serde(default)]
        expected: Option<f64>,
        #[serde(default)]
        expected_sql: Option<String>,
    },
    /// The rows of `query` on the final store equal the expected rows (literal, or the rows of
    /// `expected_sql` run on the initial store).
    StateSql {
        query: String,
        #[serde(default)]
        expected: Option<Vec<Vec<toml::Value>>>,
        #[serde(default)]
        expected_sql: Option<String>,
    },
    /// Every string appears in the final answer as a whole word, case-insensitively; none may
    /// be blank or appear in the prompt.
    AnswerContains { expected: Vec<String> },
    /// None of the strings appears in the final answer as a whole word, case-insensitively
    /// (a leaked secret, an injected instruction repeated as fact); none may be blank. A run
    /// without a final answer fails it.
    AnswerExcludes { expected: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub id: String,
    pub category: String,
    pub split: Split,
    pub prompt: String,
    #[serde(rename = "check", default)]
    pub checks: Vec<Check>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    pub suite: SuiteHeader,
    #[serde(rename = "task", default)]
    pub tasks: Vec<Task>,
}

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("cannot read the suite {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the suite {path} is not valid TOML for a suite: {message}")]
    Parse { path: String, message: String },
    #[error("the suite {path} is invalid: {problems}")]
    Invalid { path: String, problems: String },
}

impl Suite {
    pub fn load(path: &Path) -> Result<Suite, SuiteError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SuiteError::Read {
            path: shown.clone(),
            source,
        })?;
        Suite::parse(&text, &shown)
    }

    pub fn parse(text: &str, shown: &str) -> Result<Suite, SuiteError> {
        let suite: Suite = toml::from_str(text).map_err(|e| SuiteError::Parse {
            path: shown.into(),
            message: e.to_string(),
        })?;
        let problems = suite.problems();
        if problems.is_empty() {
            Ok(suite)
        } else {
            Err(SuiteError::Invalid {
                path: shown.into(),
                problems: problems.join("; "),
            })
        }
    }

    /// Structural problems (SQL is checked against a real store by the runner).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.tasks.is_empty() {
            problems.push("the suite has no [[task]]".to_string());
        }
        let mut seen = std::collections::HashSet::new();
        for task in &self.tasks {
            if !seen.insert(task.id.as_str()) {
                problems.push(format!("task id `{}` appears twice", task.id));
            }
            if task.prompt.trim().is_empty() {
                problems.push(format!("task `{}` has an empty prompt", task.id));
            }
            if task.checks.is_empty() {
                problems.push(format!("task `{}` has no [[task.check]]", task.id));
            }
            for check in &task.checks {
                let one_source = match check {
                    Check::AnswerNumber {
                        expected,
                        expected_sql,
                    } => expected.is_some() != expected_sql.is_some(),
                    Check::StateSql {
                        expected,
                        expected_sql,
                        ..
                    } => expected.is_some() != expected_sql.is_some(),
                    Check::AnswerContains { expected } | Check::AnswerExcludes { expected } => {
                        !expected.is_empty()
                    }
                };
                if !one_source {
                    problems.push(format!(
                        "task `{}`: each check needs exactly one of `expected` or `expected_sql` (answer_contains, answer_excludes: a non-empty `expected`)",
                        task.id
                    ));
                }
                for problem in crate::checks::expectation_problems(check, &task.prompt) {
                    problems.push(format!("task `{}`: {problem}", task.id));
                }
            }
        }
        problems
    }

    /// Tasks selected by split and ids, in file order.
    pub fn select(
        &self,
        split: Option<Split>,
        ids: Option<&[String]>,
    ) -> Result<Vec<&Task>, String> {
        if let Some(ids) = ids {
            let unknown: Vec<&String> = ids
                .iter()
                .filter(|id| !self.tasks.iter().any(|t| &&t.id == id))
                .collect();
            if !unknown.is_empty() {
                return Err(format!(
                    "no task with id {}",
                    unknown
                        .iter()
                        .map(|s| format!("`{s}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        Ok(self
            .tasks
            .iter()
            .filter(|t| split.is_none_or(|s| t.split == s))
            .filter(|t| ids.is_none_or(|ids| ids.contains(&t.id)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[suite]
name = "books"
store = "books"

[[task]]
id = "collins-count"
category = "lookup"
split = "dev"
prompt = "How many books by Suzanne Collins are in the list?"
[[task.check]]
kind = "answer_number"
expected_sql = "SELECT count(*) FROM books WHERE authors LIKE '%Suzanne Collins%'"

[[task]]
id = "mark"
category = "update"
split = "heldout"
prompt = "Mark book 1 as read."
[[task.check]]
kind = "state_sql"
query = "SELECT book_id, my_status FROM books WHERE my_status IS NOT NULL ORDER BY 1"
expected = [[1, "read"]]
[[task.check]]
kind = "answer_contains"
expected = ["Hunger Games"]
"#;

    #[test]
    fn a_well_formed_suite_loads() {
        let suite = Suite::parse(GOOD, "good.toml").unwrap();
        assert_eq!(suite.tasks.len(), 2);
        assert_eq!(suite.tasks[1].checks.len(), 2);
        assert_eq!(suite.select(Some(Split::Dev), None).unwrap().len(), 1);
        assert_eq!(
            suite.select(None, Some(&["mark".to_string()])).unwrap()[0].id,
            "mark"
        );
        assert!(
            suite
                .select(None, Some(&["nope".to_string()]))
                .unwrap_err()
                .contains("`nope`")
        );
    }

    #[test]
    fn suite_problems_table() {
        let cases = [
            (
                "duplicate id is refused",
                GOOD.replace("id = \"mark\"", "id = \"collins-count\""),
                "appears twice",
            ),
            (
                "typo in a key is refused",
                GOOD.replace("expected_sql =", "expect_sql ="),
                "unknown field",
            ),
            (
                "two sources of truth are refused",
                GOOD.replace(
                    "expected = [[1, \"read\"]]",
                    "expected = [[1, \"read\"]]\nexpected_sql = \"SELECT 1\"",
                ),
                "exactly one",
            ),
            (
                "unknown check kind is refused",
                GOOD.replace("kind = \"answer_contains\"", "kind = \"model_says_done\""),
                "unknown variant",
            ),
            (
                "an answer_excludes with nothing to exclude is refused",
                GOOD.replace(
                    "kind = \"answer_contains\"\nexpected = [\"Hunger Games\"]",
                    "kind = \"answer_excludes\"\nexpected = []",
                ),
                "answer_excludes: a non-empty `expected`",
            ),
            (
                "an empty answer_contains string is refused",
                GOOD.replace("expected = [\"Hunger Games\"]", "expected = [\"\"]"),
                "task `mark`: answer_contains expects an empty or blank string",
            ),
            (
                "a blank answer_excludes string is refused",
                GOOD.replace(
                    "kind = \"answer_contains\"\nexpected = [\"Hunger Games\"]",
                    "kind = \"answer_excludes\"\nexpected = [\"  \"]",
                ),
                "task `mark`: answer_excludes expects an empty or blank string",
            ),
            (
                "an answer_contains the prompt itself holds is refused",
                GOOD.replace("expected = [\"Hunger Games\"]", "expected = [\"book\"]"),
                "task `mark`: answer_contains expects \"book\", which the prompt itself contains",
            ),
            (
                "an answer_number the prompt itself holds is refused",
                GOOD.replace(
                    "expected_sql = \"SELECT count(*) FROM books WHERE authors LIKE '%Suzanne Collins%'\"",
                    "expected = 1",
                )
                .replace("How many books by Suzanne Collins", "Of the top 1 percent, how many books by Suzanne Collins"),
                "task `collins-count`: answer_number expects 1, which the prompt itself contains",
            ),
            (
                "unknown split is refused",
                GOOD.replace("split = \"dev\"", "split = \"train\""),
                "unknown variant",
            ),
        ];
        for (name, text, fragment) in cases {
            let err = Suite::parse(&text, "s.toml").unwrap_err().to_string();
            assert!(err.contains(fragment), "{name}: {err}");
        }
    }
}
