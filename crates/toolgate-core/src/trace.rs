//! The run's trace: one JSON object per line, one line per decision.
//!
//! Guarantees: a line is written whole and flushed before `emit` returns, so a crash loses at
//! most the event in progress. Attribute names follow OpenTelemetry's GenAI conventions where
//! one exists (`gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.operation.name`).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use serde_json::{Map, Value};

/// Where trace events go. Layers above core (egress, agent, eval) emit their own kinds.
pub trait TraceSink: Send + Sync {
    fn emit(&self, kind: &str, attributes: Value);
}

/// Drops every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTrace;

impl TraceSink for NoTrace {
    fn emit(&self, _kind: &str, _attributes: Value) {}
}

/// Keeps events in memory (tests, reports).
#[derive(Debug, Default)]
pub struct MemoryTrace {
    events: Mutex<Vec<Value>>,
}

impl MemoryTrace {
    pub fn events(&self) -> Vec<Value> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    pub fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e.get("event").and_then(Value::as_str) == Some(kind))
            .collect()
    }
}

impl TraceSink for MemoryTrace {
    fn emit(&self, kind: &str, attributes: Value) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event_line(kind, attributes));
        }
    }
}

/// Appends events to a JSON Lines file.
#[derive(Debug)]
pub struct JsonlTrace {
    out: Mutex<BufWriter<File>>,
}

impl JsonlTrace {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(JsonlTrace {
            out: Mutex::new(BufWriter::new(file)),
        })
    }
}

impl TraceSink for JsonlTrace {
    fn emit(&self, kind: &str, attributes: Value) {
        if let Ok(mut out) = self.out.lock() {
            let line = event_line(kind, attributes).to_string();
            // A trace write failure must not fail the call it describes; it is reported once
            // on stderr so it is not silent either.
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                eprintln!("toolgate: could not write the trace file");
            }
        }
    }
}

fn event_line(kind: &str, attributes: Value) -> Value {
    let mut line = Map::new();
    line.insert("event".into(), Value::String(kind.into()));
    line.insert(
        "time_unix_ms".into(),
        Value::from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        ),
    );
    match attributes {
        Value::Object(map) => line.extend(map),
        other => {
            line.insert("data".into(), other);
        }
    }
    Value::Object(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jsonl_lines_are_whole_and_parseable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let trace = JsonlTrace::create(&path).unwrap();
        trace.emit("tool_call", json!({"gen_ai.tool.name": "books_get"}));
        trace.emit("egress", json!({"host": "example.org"}));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "tool_call");
        assert_eq!(lines[0]["gen_ai.tool.name"], "books_get");
        assert_eq!(lines[1]["host"], "example.org");
    }
}
