//! Reading and writing note rows: the SQL every tool, the importer and undo share, free of any
//! tool concern.
//!
//! Guarantees: tags are stored normalized (trimmed, lower-case, unique, sorted, joined by
//! commas); a to-do always has `done` set (0 or 1) and any other kind never does; a clip is
//! always untrusted. The last two are also enforced by CHECK constraints in the schema.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_core::sql::{Dialect, Sql, SqlError, SqlRow};
use toolgate_core::{ToolError, sql_params};

/// What a note is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// an ordinary note
    Note,
    /// something to do, with an optional due date and a done flag
    Todo,
    /// minutes of a meeting, which may list action items
    Meeting,
    /// a page clipped from the web, always untrusted
    Clip,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Note, Kind::Todo, Kind::Meeting, Kind::Clip];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Note => "note",
            Kind::Todo => "todo",
            Kind::Meeting => "meeting",
            Kind::Clip => "clip",
        }
    }

    pub fn parse(text: &str) -> Option<Kind> {
        let text = text.trim().to_ascii_lowercase();
        Kind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// A note to insert (from a tool, the importer, the bundled notebook or the generator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNote {
    pub title: String,
    pub body: String,
    pub notebook: String,
    /// Normalized comma list (see [`join_tags`]).
    pub tags: String,
    /// `YYYY-MM-DD`.
    pub due: Option<String>,
    /// `YYYY-MM-DD`.
    pub created: String,
    pub kind: Kind,
    pub source_url: Option<String>,
    pub untrusted: bool,
    /// `Some` exactly for to-dos.
    pub done: Option<bool>,
    /// The meeting note a to-do was made from.
    pub meeting_id: Option<i64>,
}

impl NewNote {
    /// A plain trusted note with no tags, due date or source.
    pub fn note(title: &str, body: &str, notebook: &str, created: &str) -> Self {
        NewNote {
            title: title.into(),
            body: body.into(),
            notebook: notebook.into(),
            tags: String::new(),
            due: None,
            created: created.into(),
            kind: Kind::Note,
            source_url: None,
            untrusted: false,
            done: None,
            meeting_id: None,
        }
    }
}

/// A note as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NoteRow {
    pub id: i64,
    pub title: String,
    pub body: String,
    pub notebook: String,
    pub tags: String,
    pub due: Option<String>,
    pub created: String,
    pub kind: Kind,
    pub source_url: Option<String>,
    pub untrusted: bool,
    pub done: Option<bool>,
    pub meeting_id: Option<i64>,
}

pub const COLUMNS: &str =
    "id, title, body, notebook, tags, due, created, kind, source_url, untrusted, done, meeting_id";

pub fn from_row(row: &SqlRow) -> Result<NoteRow, SqlError> {
    let kind_text = row.text(7)?;
    let kind = Kind::parse(&kind_text).ok_or_else(|| SqlError::Type {
        detail: format!("unknown note kind `{kind_text}`"),
    })?;
    Ok(NoteRow {
        id: row.i64(0)?,
        title: row.text(1)?,
        body: row.text(2)?,
        notebook: row.text(3)?,
        tags: row.text(4)?,
        due: row.opt_text(5)?,
        created: row.text(6)?,
        kind,
        source_url: row.opt_text(8)?,
        untrusted: row.i64(9)? != 0,
        done: row.opt_i64(10)?.map(|d| d != 0),
        meeting_id: row.opt_i64(11)?,
    })
}

/// Every row `sql` returns, read as notes (its columns must be [`COLUMNS`]).
pub fn query(
    conn: &dyn Sql,
    sql: &str,
    params: &[toolgate_core::sql::SqlValue],
) -> Result<Vec<NoteRow>, SqlError> {
    conn.query(sql, params)?.iter().map(from_row).collect()
}

impl NoteRow {
    pub fn tags(&self) -> Vec<&str> {
        split_tags(&self.tags)
    }

    /// Where an untrusted note's text came from, as the model is told.
    pub fn untrusted_source(&self) -> String {
        match &self.source_url {
            Some(url) => format!("note {} (clipped from {url})", self.id),
            None => format!("note {} (flagged untrusted)", self.id),
        }
    }

    /// The note's fields other than its text, for a model to read beside the title.
    pub fn metadata(&self) -> Value {
        let mut v = json!({
            "id": self.id,
            "notebook": self.notebook,
            "kind": self.kind.as_str(),
            "created": self.created,
            "tags": self.tags(),
        });
        if let Some(due) = &self.due {
            v["due"] = json!(due);
        }
        if let Some(done) = self.done {
            v["done"] = json!(done);
        }
        if let Some(meeting) = self.meeting_id {
            v["meeting_id"] = json!(meeting);
        }
        if let Some(url) = &self.source_url {
            v["source_url"] = json!(url);
        }
        if self.untrusted {
            v["untrusted"] = json!(true);
        }
        v
    }
}

pub use toolgate_store::taglist::{join_tags, split_tags};

/// Whether a tag (as given, before lower-casing) is acceptable: a letter or digit first, then
/// letters, digits, spaces, `-` or `_`, at most 32 characters. The same rule as the tools' schema.
pub fn valid_tag(tag: &str) -> bool {
    let tag = tag.trim().trim_start_matches('#');
    let mut chars = tag.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && tag.chars().count() <= 32
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '-'))
}

/// Inserts `note` and returns its id (`RETURNING id`, which both databases support).
pub fn insert(conn: &dyn Sql, note: &NewNote) -> Result<i64, SqlError> {
    conn.query_i64(
        "INSERT INTO notes (title, body, notebook, tags, due, created, kind, source_url,
                            untrusted, done, meeting_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         RETURNING id",
        sql_params![
            &note.title,
            &note.body,
            &note.notebook,
            &note.tags,
            note.due.as_deref(),
            &note.created,
            note.kind.as_str(),
            note.source_url.as_deref(),
            i64::from(note.untrusted),
            note.done.map(i64::from),
            note.meeting_id,
        ],
    )
}

pub fn by_id(conn: &dyn Sql, id: i64) -> Result<Option<NoteRow>, ToolError> {
    Ok(query(
        conn,
        &format!("SELECT {COLUMNS} FROM notes WHERE id = ?1"),
        sql_params![id],
    )?
    .into_iter()
    .next())
}

/// Rows for `ids`, in the order given; ids with no row are returned separately.
pub fn by_ids(conn: &dyn Sql, ids: &[i64]) -> Result<(Vec<NoteRow>, Vec<i64>), ToolError> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for id in ids {
        match by_id(conn, *id)? {
            Some(row) => found.push(row),
            None => missing.push(*id),
        }
    }
    Ok((found, missing))
}

/// The to-dos made from meeting `meeting_id`, oldest first.
pub fn todos_of_meeting(conn: &dyn Sql, meeting_id: i64) -> Result<Vec<NoteRow>, ToolError> {
    Ok(query(
        conn,
        &format!("SELECT {COLUMNS} FROM notes WHERE meeting_id = ?1 AND kind = 'todo' ORDER BY id"),
        sql_params![meeting_id],
    )?)
}

pub fn set_tags(conn: &dyn Sql, id: i64, tags: &str) -> Result<bool, ToolError> {
    let changed = conn.execute(
        "UPDATE notes SET tags = ?1 WHERE id = ?2",
        sql_params![tags, id],
    )?;
    Ok(changed > 0)
}

/// Deletes note `id`; false when there was no such note.
pub fn delete(conn: &dyn Sql, id: i64) -> Result<bool, ToolError> {
    let changed = conn.execute("DELETE FROM notes WHERE id = ?1", sql_params![id])?;
    Ok(changed > 0)
}

/// The distinct notebook names, sorted ignoring ASCII case (SQLite's NOCASE; on PostgreSQL
/// the same order as `lower()` under the C collation).
pub fn notebooks(conn: &dyn Sql) -> Result<Vec<String>, ToolError> {
    let sql = match conn.dialect() {
        Dialect::Sqlite => "SELECT DISTINCT notebook FROM notes ORDER BY notebook COLLATE NOCASE",
        Dialect::Postgres => {
            "SELECT notebook FROM (SELECT DISTINCT notebook FROM notes) n
             ORDER BY lower(notebook) COLLATE \"C\""
        }
    };
    let names = conn
        .query(sql, &[])?
        .iter()
        .map(|r| r.text(0))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_normalized_on_join() {
        for (given, stored) in [
            (vec!["Fav", " classic ", "fav", ""], "classic,fav"),
            (vec!["#work", "Work"], "work"),
            (vec![], ""),
        ] {
            assert_eq!(join_tags(given.iter().copied()), stored, "{given:?}");
        }
        assert_eq!(split_tags("classic,fav"), ["classic", "fav"]);
        assert!(split_tags("").is_empty());
    }

    #[test]
    fn tag_rule_table_prevents_commas_and_markup_in_tags() {
        for (tag, ok) in [
            ("budget", true),
            ("Q1 planning", true),
            ("#work", true),
            ("follow-up_2", true),
            ("a,b", false),
            ("", false),
            ("-lead", false),
            ("c++", false),
            ("x".repeat(33).as_str(), false),
        ] {
            assert_eq!(valid_tag(tag), ok, "{tag}");
        }
    }

    #[test]
    fn kind_names_round_trip() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(Kind::parse(" Meeting "), Some(Kind::Meeting));
        assert_eq!(Kind::parse("memo"), None);
    }
}
