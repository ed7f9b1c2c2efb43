//! Finding the trace line that shows a decision. Suites write their trace as JSON Lines (one
//! event per line, `toolgate_core::trace::JsonlTrace`) and cite a block by file and line
//! number, so a reviewer can open the exact record.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::CheckError;

/// One parsed line of a trace file, numbered from 1.
#[derive(Debug, Clone)]
pub struct TraceLine {
    pub line: usize,
    pub event: Value,
}

/// A trace file read whole.
#[derive(Debug, Clone)]
pub struct TraceIndex {
    pub path: PathBuf,
    pub lines: Vec<TraceLine>,
}

impl TraceIndex {
    /// Reads `path`; a line that is not JSON is an error (a trace the suite cannot read is a
    /// check it cannot make).
    pub fn read(path: &Path) -> Result<Self, CheckError> {
        let text = std::fs::read_to_string(path).map_err(|e| CheckError::io(path, e))?;
        let mut lines = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let event = serde_json::from_str(raw).map_err(|e| {
                CheckError::io(
                    path,
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("line {} is not JSON: {e}", i + 1),
                    ),
                )
            })?;
            lines.push(TraceLine { line: i + 1, event });
        }
        Ok(TraceIndex {
            path: path.to_path_buf(),
            lines,
        })
    }

    /// The events of one kind (`"event"` field), in file order.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a TraceLine> + 'a {
        self.lines
            .iter()
            .filter(move |l| l.event.get("event").and_then(Value::as_str) == Some(kind))
    }

    /// The first line that matches.
    pub fn find(&self, matches: impl Fn(&Value) -> bool) -> Option<&TraceLine> {
        self.lines.iter().find(|l| matches(&l.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_as_an_editor_numbers_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{\"event\":\"a\"}\n\n{\"event\":\"b\",\"n\":2}\n").unwrap();
        let index = TraceIndex::read(&path).unwrap();
        let b = index.find(|e| e["n"] == 2).unwrap();
        assert_eq!(b.line, 3);
        assert_eq!(index.of_kind("a").count(), 1);
    }

    #[test]
    fn an_unreadable_trace_is_an_error_not_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{\"event\":\"a\"}\nnot json\n").unwrap();
        let err = TraceIndex::read(&path).unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
