//! The run's trace: typed events, one JSON object per line on disk, one line per decision.
//!
//! Guarantees: a line is written whole and flushed before `record` returns, so a crash loses at
//! most the event in progress. Attribute names follow OpenTelemetry's GenAI conventions where
//! one exists (`gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.operation.name`).

use std::any::Any;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

/// One typed trace event. Each layer defines its own (the dispatcher's [`DecisionRecord`](crate::call::DecisionRecord),
/// the egress exit's decisions, the loop's model turns); a sink keeps the value typed in memory
/// and writes its attributes, under OpenTelemetry GenAI names where one exists, to disk.
pub trait TraceEvent: Any + Send + Sync + std::fmt::Debug {
    /// The event's kind, written as `event` on its JSON line (`tool_call`, `egress`, ...).
    fn kind(&self) -> &'static str;
    /// The event's attributes, as written to disk.
    fn attributes(&self) -> Value;

    /// Writes the event's JSON line (no newline) to `out`: its kind, `time_unix_ms`, then its
    /// attributes. Events on a hot path override this to serialize without building a
    /// [`Value`] first; the text must equal the default's.
    fn write_line(
        &self,
        time_unix_ms: u64,
        out: &mut dyn std::io::Write,
    ) -> serde_json::Result<()> {
        serde_json::to_writer(out, &line_at(self.kind(), time_unix_ms, self.attributes()))
    }
}

/// Where trace events go.
pub trait TraceSink: Send + Sync {
    fn record(&self, event: Arc<dyn TraceEvent>);
}

/// Drops every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTrace;

impl TraceSink for NoTrace {
    fn record(&self, _event: Arc<dyn TraceEvent>) {}
}

/// Keeps events in memory, typed (tests, reports, the demo's narration).
#[derive(Debug, Default)]
pub struct MemoryTrace {
    events: Mutex<Vec<Arc<dyn TraceEvent>>>,
}

impl MemoryTrace {
    /// Every event of type `T`, in order.
    pub fn records<T: TraceEvent + Clone>(&self) -> Vec<T> {
        self.all()
            .into_iter()
            .filter_map(|e| {
                let any: Arc<dyn Any + Send + Sync> = e;
                any.downcast_ref::<T>().cloned()
            })
            .collect()
    }

    /// Every event as its JSON line would read.
    pub fn events(&self) -> Vec<Value> {
        self.all().iter().map(|e| event_line(e.as_ref())).collect()
    }

    /// The JSON lines of one kind.
    pub fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.all()
            .iter()
            .filter(|e| e.kind() == kind)
            .map(|e| event_line(e.as_ref()))
            .collect()
    }

    fn all(&self) -> Vec<Arc<dyn TraceEvent>> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl TraceSink for MemoryTrace {
    fn record(&self, event: Arc<dyn TraceEvent>) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event);
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
    fn record(&self, event: Arc<dyn TraceEvent>) {
        let mut line = Vec::with_capacity(1024);
        let written = event.write_line(now_unix_ms(), &mut line);
        line.push(b'\n');
        if let Ok(mut out) = self.out.lock() {
            // A trace write failure must not fail the call it describes; it is reported on
            // stderr so it is not silent either.
            let stored = written
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(&line))
                .and_then(|()| out.flush());
            if stored.is_err() {
                eprintln!("toolgate: could not write the trace file");
            }
        }
    }
}

/// Sends every event to each of several sinks (a file and a narrator, say).
pub struct Tee(pub Vec<Arc<dyn TraceSink>>);

impl TraceSink for Tee {
    fn record(&self, event: Arc<dyn TraceEvent>) {
        for sink in &self.0 {
            sink.record(Arc::clone(&event));
        }
    }
}

/// The call whose handler is running, as the dispatcher names it: set around every handler's
/// future ([`in_call`]), so an event recorded from inside the handler (an egress decision, an
/// imported tool's call to its server) can be tied to the call that caused it
/// ([`current_call`]) and recorded where the dispatcher records ([`record_in_call`]) without
/// every layer passing the id and the sink down. A nested call's handler sets its own.
///
/// Why a task-local: the egress exit and an imported tool's client are shared by every call,
/// and sinks are called synchronously from inside the handler's task; work a handler hands to
/// a task of its own (`tokio::spawn`) is not inside the call, and reads `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallScope {
    pub call_id: String,
    pub run_id: String,
}

#[derive(Clone)]
struct Current {
    scope: CallScope,
    trace: Arc<dyn TraceSink>,
    telemetry: crate::telemetry::Telemetry,
}

tokio::task_local! {
    static CURRENT_CALL: Current;
}

/// The call whose handler is running on this task, if any.
pub fn current_call() -> Option<CallScope> {
    CURRENT_CALL.try_with(|c| c.scope.clone()).ok()
}

/// Records `event` into the trace of the dispatcher running the current call; whether there
/// was one (outside any call, nothing is recorded).
pub fn record_in_call(event: Arc<dyn TraceEvent>) -> bool {
    match CURRENT_CALL.try_with(|c| Arc::clone(&c.trace)) {
        Ok(trace) => {
            trace.record(event);
            true
        }
        Err(_) => false,
    }
}

/// The telemetry of the dispatcher running the current call (off outside any call): what an
/// egress decision or an upstream call inside a handler records its span through. The span
/// current there is the call's, so such spans are its children.
pub fn current_telemetry() -> crate::telemetry::Telemetry {
    CURRENT_CALL
        .try_with(|c| c.telemetry.clone())
        .unwrap_or_default()
}

/// `future`, run as the handler of the call `scope` names, whose dispatcher records to `trace`.
pub fn in_call<F>(
    scope: CallScope,
    trace: Arc<dyn TraceSink>,
    future: F,
) -> crate::future::BoxFuture<'static, F::Output>
where
    F: std::future::Future + Send + 'static,
{
    in_call_with(scope, trace, crate::telemetry::Telemetry::off(), future)
}

/// [`in_call`], for a dispatcher that also records spans through `telemetry`.
pub fn in_call_with<F>(
    scope: CallScope,
    trace: Arc<dyn TraceSink>,
    telemetry: crate::telemetry::Telemetry,
    future: F,
) -> crate::future::BoxFuture<'static, F::Output>
where
    F: std::future::Future + Send + 'static,
{
    Box::pin(CURRENT_CALL.scope(
        Current {
            scope,
            trace,
            telemetry,
        },
        future,
    ))
}

/// `future` as part of the call whose handler is running, for a handler that moves work to a
/// task of its own (`tokio::spawn(in_current_call(work))`): what the work records stays tied
/// to the call, and its spans stay children of the call's span. Outside any call, `future` as
/// it is.
pub fn in_current_call<F>(future: F) -> crate::future::BoxFuture<'static, F::Output>
where
    F: std::future::Future + Send + 'static,
{
    use opentelemetry::context::FutureExt as _;
    match CURRENT_CALL.try_with(Clone::clone) {
        Ok(current) if current.telemetry.is_on() => Box::pin(CURRENT_CALL.scope(
            current,
            future.with_context(opentelemetry::Context::current()),
        )),
        Ok(current) => Box::pin(CURRENT_CALL.scope(current, future)),
        Err(_) => Box::pin(future),
    }
}

/// The JSON line of `event`: its kind, the time, then its attributes.
pub fn event_line(event: &dyn TraceEvent) -> Value {
    line_at(event.kind(), now_unix_ms(), event.attributes())
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn line_at(kind: &str, time_unix_ms: u64, attributes: Value) -> Value {
    let mut line = Map::new();
    line.insert("event".into(), Value::String(kind.into()));
    line.insert("time_unix_ms".into(), Value::from(time_unix_ms));
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
    fn an_event_recorded_inside_a_call_names_it_and_one_outside_names_none() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let scope = |id: &str| CallScope {
            call_id: id.into(),
            run_id: "run-1".into(),
        };
        let trace = Arc::new(MemoryTrace::default());
        let sink: Arc<dyn TraceSink> = trace.clone();
        let seen = runtime.block_on(async {
            let outside = current_call();
            let outside_recorded = record_in_call(Arc::new(Sample("outside", json!({}))));
            let inner_sink = Arc::clone(&sink);
            let (outer, inner, after) = in_call(scope("c1"), Arc::clone(&sink), async move {
                let outer = current_call();
                let inner = in_call(scope("c1.1"), inner_sink, async {
                    record_in_call(Arc::new(Sample("inside", json!({}))));
                    current_call()
                })
                .await;
                (outer, inner, current_call())
            })
            .await;
            assert!(!outside_recorded, "nothing is recorded outside a call");
            (outside, outer, inner, after, current_call())
        });
        // Work a handler spawns on a task of its own stays in the call when it is carried.
        let carried = runtime.block_on(in_call(scope("c2"), Arc::clone(&sink), async {
            let carried = tokio::spawn(in_current_call(async { current_call() }));
            let bare = tokio::spawn(async { current_call() });
            (carried.await.ok().flatten(), bare.await.ok().flatten())
        }));
        assert_eq!(carried, (Some(scope("c2")), None));
        let kinds: Vec<Value> = trace.events().iter().map(|e| e["event"].clone()).collect();
        assert_eq!(kinds, vec![json!("inside")]);
        assert_eq!(
            seen,
            (
                None,
                Some(scope("c1")),
                Some(scope("c1.1")),
                Some(scope("c1")),
                None
            )
        );
    }

    #[derive(Debug, Clone, PartialEq)]
    struct Sample(&'static str, Value);

    impl TraceEvent for Sample {
        fn kind(&self) -> &'static str {
            self.0
        }
        fn attributes(&self) -> Value {
            self.1.clone()
        }
    }

    #[test]
    fn memory_trace_gives_events_back_typed() {
        let trace = MemoryTrace::default();
        trace.record(Arc::new(Sample("egress", json!({"host": "example.org"}))));
        assert_eq!(
            trace.records::<Sample>(),
            vec![Sample("egress", json!({"host": "example.org"}))]
        );
        assert_eq!(trace.of_kind("egress")[0]["host"], "example.org");
    }

    #[test]
    fn jsonl_lines_are_whole_and_parseable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let trace = JsonlTrace::create(&path).unwrap();
        trace.record(Arc::new(Sample(
            "tool_call",
            json!({"gen_ai.tool.name": "books_get"}),
        )));
        trace.record(Arc::new(Sample("egress", json!({"host": "example.org"}))));
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
