//! The notebook as files, for scripts that read many notes at once (the sandbox mounts the
//! folder read-only): `notes/<id>.md` in the importer's front-matter format ([`crate::frontmatter`]),
//! and `index.json` listing every note's id, title, notebook, kind, tags, dates and whether it
//! is untrusted, so a script can filter before it opens a file.
//!
//! Guarantees: one consistent snapshot (one statement reads every note); untrusted notes say so in their
//! front matter and in the index; the export is private to the user running it from the
//! moment each part exists (the folder made 0700, `notes/` created 0700, every file created
//! 0600: never readable by another local user, not even briefly before the sandbox seals it;
//! the sandbox hands it to its own user when that is not this one); the folder holds nothing
//! else. Refuses a folder that is not empty, and a file that already exists (nothing is
//! written through a name planted beforehand).

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

use serde_json::json;
use toolgate_core::ToolError;
use toolgate_core::sql::Sql;

use crate::rows::{self, COLUMNS, NoteRow};

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSummary {
    pub notes: usize,
    pub untrusted: usize,
}

fn io(path: &Path, e: std::io::Error) -> ToolError {
    ToolError::internal(format!(
        "exporting the notebook to {} failed: {e}",
        path.display()
    ))
}

fn front_matter(row: &NoteRow) -> String {
    let one_line = |s: &str| s.replace(['\n', '\r'], " ");
    let mut text = format!(
        "---\ntitle: {}\nnotebook: {}\nkind: {}\ncreated: {}\n",
        one_line(&row.title),
        one_line(&row.notebook),
        row.kind.as_str(),
        row.created
    );
    if !row.tags.is_empty() {
        text.push_str(&format!("tags: [{}]\n", row.tags().join(", ")));
    }
    if let Some(due) = &row.due {
        text.push_str(&format!("due: {due}\n"));
    }
    if let Some(done) = row.done {
        text.push_str(&format!("done: {done}\n"));
    }
    if let Some(url) = &row.source_url {
        text.push_str(&format!("source_url: {url}\n"));
    }
    text.push_str(&format!("untrusted: {}\n---\n", row.untrusted));
    text
}

/// A new file only this user can read (0600 from its creation; the umask can only narrow it);
/// an existing file or link at `path` is refused, not written through.
fn private_file(path: &Path) -> Result<std::fs::File, ToolError> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io(path, e))
}

/// Writes every note of `conn` into `dir` (empty), private to this user; see the module
/// documentation.
pub fn export_notebook(conn: &dyn Sql, dir: &Path) -> Result<ExportSummary, ToolError> {
    let listed = std::fs::read_dir(dir).map_err(|e| io(dir, e))?;
    if listed.count() > 0 {
        return Err(ToolError::internal(format!(
            "{} is not empty; the export writes only into an empty folder",
            dir.display()
        )));
    }
    let rows: Vec<NoteRow> = rows::query(
        conn,
        &format!("SELECT {COLUMNS} FROM notes ORDER BY id"),
        &[],
    )
    .map_err(|e| ToolError::internal(format!("reading the notebook failed: {e}")))?;
    // The folder is the export's own (it had to be empty): closed before anything is in it.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| io(dir, e))?;
    let notes_dir = dir.join("notes");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&notes_dir)
        .map_err(|e| io(&notes_dir, e))?;
    let mut index = Vec::with_capacity(rows.len());
    for row in &rows {
        let name = format!("{}.md", row.id);
        let path = notes_dir.join(&name);
        let mut file = private_file(&path)?;
        file.write_all(front_matter(row).as_bytes())
            .and_then(|()| file.write_all(row.body.as_bytes()))
            .map_err(|e| io(&path, e))?;
        let mut entry = row.metadata();
        entry["title"] = json!(row.title);
        entry["file"] = json!(format!("notes/{name}"));
        entry["untrusted"] = json!(row.untrusted);
        index.push(entry);
    }
    let index_path = dir.join("index.json");
    let text = serde_json::to_vec_pretty(&index).map_err(|e| ToolError::internal(e.to_string()))?;
    private_file(&index_path)?
        .write_all(&text)
        .map_err(|e| io(&index_path, e))?;
    Ok(ExportSummary {
        notes: rows.len(),
        untrusted: rows.iter().filter(|r| r.untrusted).count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NotesStore;
    use crate::frontmatter;

    #[test]
    fn every_note_is_exported_in_the_importers_format_with_its_trust() {
        let dir = tempfile::tempdir().unwrap();
        let store = NotesStore::init_sample(&dir.path().join("notes.sqlite")).unwrap();
        let out = dir.path().join("export");
        std::fs::create_dir(&out).unwrap();
        let summary = store
            .with_conn(|c| export_notebook(c, &out))
            .unwrap()
            .unwrap();
        let total: i64 = store
            .with_conn(|c| c.query_row("SELECT count(*) FROM notes", [], |r| r.get(0)))
            .unwrap()
            .unwrap();
        assert_eq!(summary.notes as i64, total);
        assert!(summary.untrusted > 0);
        let index: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
        assert_eq!(index.len(), summary.notes);
        let clip = index
            .iter()
            .find(|e| e["untrusted"] == json!(true))
            .unwrap();
        let text = std::fs::read_to_string(out.join(clip["file"].as_str().unwrap())).unwrap();
        let parsed = frontmatter::note_from_markdown("x.md", &text, "Inbox", "2025-01-01").unwrap();
        assert!(parsed.untrusted);
        assert_eq!(parsed.title, clip["title"].as_str().unwrap());
    }

    /// The mode bits of `path`, not following a link.
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn the_export_is_readable_only_by_its_user_from_the_start() {
        // The old export set 0755/0644 explicitly (whatever the umask), so every local user
        // could read the notebook while a script ran; the folder handed in is the export's
        // own and is made private too.
        let dir = tempfile::tempdir().unwrap();
        let store = NotesStore::init_sample(&dir.path().join("notes.sqlite")).unwrap();
        let out = dir.path().join("export");
        std::fs::create_dir(&out).unwrap();
        let summary = store
            .with_conn(|c| export_notebook(c, &out))
            .unwrap()
            .unwrap();
        assert!(summary.notes > 0);
        let mut seen = vec![(out.clone(), mode(&out))];
        for entry in walk(&out) {
            seen.push((entry.clone(), mode(&entry)));
        }
        assert_eq!(
            seen.len(),
            summary.notes + 3,
            "folder, notes/, index.json, notes"
        );
        for (path, bits) in seen {
            let want = if path.is_dir() { 0o700 } else { 0o600 };
            assert_eq!(bits, want, "{} is {bits:o}", path.display());
        }
    }

    fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                found.extend(walk(&path));
            }
            found.push(path);
        }
        found
    }

    #[test]
    fn a_folder_with_files_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = NotesStore::init_sample(&dir.path().join("notes.sqlite")).unwrap();
        std::fs::write(dir.path().join("keep.txt"), "x").unwrap();
        let err = store
            .with_conn(|c| export_notebook(c, dir.path()))
            .unwrap()
            .unwrap_err();
        assert!(err.message.contains("not empty"), "{err:?}");
        assert!(!dir.path().join("index.json").exists());
    }
}
