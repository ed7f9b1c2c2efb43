//! Shared setup for the books tests: a fresh database file and a dispatcher over a toolset,
//! the suite's write tasks (what each must change, whatever call a toolset takes for it), and
//! the checks every toolset's write tests make.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::Value;
use toolgate_books::{BooksStore, Toolset};
use toolgate_core::{
    CallOutcome, CallRequest, Caller, Dispatcher, ErrorCode, Mode, Principal, Registry,
    ScriptedApprover,
};

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub store: BooksStore,
    pub dispatcher: Dispatcher,
    /// Which database the store is on, for messages.
    pub on: &'static str,
}

#[allow(unused_imports)] // not every test binary runs on both stores
pub use toolgate_store::postgres::both::on_both_stores;

/// A fresh store with `toolset` over it: a SQLite file, or, inside [`on_both_stores`]'s second
/// run, a fresh database of a real PostgreSQL server (the test process's own cluster).
pub fn fixture(toolset: Toolset) -> Fixture {
    if toolgate_store::postgres::both::on_postgres() {
        let shared = toolgate_store::postgres::both::fresh_store(|pg| async move {
            BooksStore::on_postgres(pg).await.unwrap()
        });
        return with_store(tempfile::tempdir().unwrap(), shared, toolset, "PostgreSQL");
    }
    let dir = tempfile::tempdir().unwrap();
    let store = BooksStore::init(&dir.path().join("books.sqlite")).unwrap();
    with_store(dir, store, toolset, "SQLite")
}

fn with_store(
    dir: tempfile::TempDir,
    store: BooksStore,
    toolset: Toolset,
    on: &'static str,
) -> Fixture {
    let registry = Registry::new(toolset.tools(&store).unwrap()).unwrap();
    Fixture {
        _dir: dir,
        store,
        dispatcher: Dispatcher::new(Arc::new(registry)).unwrap(),
        on,
    }
}

impl Fixture {
    pub async fn call(&self, tool: &str, args: Value) -> CallOutcome {
        self.dispatcher.call(request(tool, args)).await
    }

    /// The preview a human is shown for the call, asked in `Mode::Ask` and denied.
    pub async fn denied_preview(&self, tool: &str, args: Value) -> Value {
        let approver = Arc::new(ScriptedApprover::approving(Vec::<String>::new()));
        let asking = Caller::new(self.dispatcher.clone())
            .with_approver(approver.clone())
            .with_mode(Mode::Ask);
        let outcome = asking.call(request(tool, args)).await;
        assert_eq!(outcome.error().unwrap().code, ErrorCode::ApprovalDenied);
        let seen = approver.seen();
        assert_eq!(seen.len(), 1, "one approval asked");
        seen[0].preview.clone().unwrap()
    }

    /// How many books have a status or a tag: 0 until a write changes one.
    pub fn books_changed(&self) -> i64 {
        self.sql_i64("SELECT count(*) FROM books WHERE my_status IS NOT NULL OR my_tags <> ''")
    }

    /// Checks the store and the result `content` after the write of `task`: exactly the books
    /// the suite's SQL selects have the task's value, the result names each of them, and no
    /// book changed in the other column. Returns how many books that is.
    pub fn assert_wrote(&self, label: &str, task: &WriteTask, content: &Value) -> usize {
        let expected = self.sql_ids(&format!(
            "SELECT book_id FROM books WHERE {} ORDER BY 1",
            task.selects
        ));
        assert!(!expected.is_empty(), "{label}: the task selects books");
        let changed = self.sql_ids(&format!(
            "SELECT book_id FROM books WHERE {} = '{}' ORDER BY 1",
            task.column, task.value
        ));
        assert_eq!(
            changed, expected,
            "{label}: the store changed exactly them: {content}"
        );
        assert_eq!(
            changed_ids(content),
            expected,
            "{label}: the result names each book"
        );
        let untouched = if task.column == "my_status" {
            "my_tags <> ''"
        } else {
            "my_status IS NOT NULL"
        };
        assert_eq!(
            self.sql_i64(&format!("SELECT count(*) FROM books WHERE {untouched}")),
            0,
            "{label}: nothing else changed"
        );
        expected.len()
    }

    /// A test's SQLite statement as PostgreSQL writes it when the store is there: LIKE that
    /// ignores case, and NOCASE's order.
    pub fn on_this_store(&self, sql: &str) -> String {
        if self.on == "SQLite" {
            return sql.to_owned();
        }
        sql.replace(" LIKE ", " ILIKE ")
            .replace("title COLLATE NOCASE", "lower(title) COLLATE \"C\"")
    }

    pub fn sql_i64(&self, sql: &str) -> i64 {
        self.store.with_sql(|c| Ok(c.query_i64(sql, &[])?)).unwrap()
    }

    pub fn sql_ids(&self, sql: &str) -> Vec<i64> {
        self.store
            .with_sql(|c| {
                Ok(c.query(&self.on_this_store(sql), &[])?
                    .iter()
                    .map(|r| r.i64(0).unwrap())
                    .collect())
            })
            .unwrap()
    }
}

fn request(tool: &str, args: Value) -> CallRequest {
    CallRequest::new(Principal::local("tester", &[]), "run-1", tool, args)
}

/// The result of a call that must succeed.
pub fn done(outcome: &CallOutcome, what: &str) -> Value {
    outcome
        .observation()
        .unwrap_or_else(|| panic!("{what}: {}", outcome.model_text()))
        .content
        .clone()
}

/// The ids of the books a write's result lists, sorted.
pub fn changed_ids(content: &Value) -> Vec<i64> {
    let mut ids: Vec<i64> = content["books"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    ids
}

/// A write task of the suite: the tool it takes, the column and value it must leave, and the
/// SQL that selects the books it must change (the suite's expected_sql). Each toolset's tests
/// give the call that does it in that toolset's arguments.
pub struct WriteTask {
    pub name: &'static str,
    pub tool: &'static str,
    pub column: &'static str,
    pub value: &'static str,
    pub selects: &'static str,
}

pub const WRITE_TASKS: [WriteTask; 12] = [
    WriteTask {
        name: "collins-read",
        tool: "books_set_status",
        column: "my_status",
        value: "read",
        selects: "authors LIKE '%Suzanne Collins%'",
    },
    WriteTask {
        name: "riordan-reading",
        tool: "books_set_status",
        column: "my_status",
        value: "reading",
        selects: "authors LIKE '%Rick Riordan%'",
    },
    WriteTask {
        name: "brown-want",
        tool: "books_set_status",
        column: "my_status",
        value: "want_to_read",
        selects: "authors LIKE '%Dan Brown%'",
    },
    WriteTask {
        name: "king-early-read",
        tool: "books_set_status",
        column: "my_status",
        value: "read",
        selects: "authors LIKE '%Stephen King%' AND original_publication_year < 1990",
    },
    WriteTask {
        name: "recent-good-want",
        tool: "books_set_status",
        column: "my_status",
        value: "want_to_read",
        selects: "original_publication_year > 2010 AND average_rating >= 4.2",
    },
    WriteTask {
        name: "austen-classic",
        tool: "books_tag",
        column: "my_tags",
        value: "classic",
        selects: "authors LIKE '%Jane Austen%'",
    },
    WriteTask {
        name: "green-ya",
        tool: "books_tag",
        column: "my_tags",
        value: "ya",
        selects: "authors LIKE '%John Green%'",
    },
    WriteTask {
        name: "spanish-tag",
        tool: "books_tag",
        column: "my_tags",
        value: "spanish",
        selects: "language_code = 'spa'",
    },
    WriteTask {
        name: "rowling-fav",
        tool: "books_tag",
        column: "my_tags",
        value: "fav",
        selects: "book_id IN (SELECT book_id FROM books WHERE authors LIKE '%Rowling%' ORDER BY average_rating DESC LIMIT 2)",
    },
    WriteTask {
        name: "tolkien-top-read",
        tool: "books_set_status",
        column: "my_status",
        value: "read",
        selects: "book_id = (SELECT book_id FROM books WHERE authors LIKE '%Tolkien%' ORDER BY average_rating DESC LIMIT 1)",
    },
    WriteTask {
        name: "oldest-three-ancient",
        tool: "books_tag",
        column: "my_tags",
        value: "ancient",
        selects: "book_id IN (SELECT book_id FROM books WHERE original_publication_year IS NOT NULL ORDER BY original_publication_year LIMIT 3)",
    },
    WriteTask {
        name: "best-2005-want",
        tool: "books_set_status",
        column: "my_status",
        value: "want_to_read",
        selects: "book_id = (SELECT book_id FROM books WHERE original_publication_year = 2005 ORDER BY average_rating DESC LIMIT 1)",
    },
];

/// The suite's write task `name`.
pub fn write_task(name: &str) -> &'static WriteTask {
    WRITE_TASKS
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no write task {name}"))
}
