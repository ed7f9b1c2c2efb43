//! Shadow replay, the runner: the recorded calls of a [`Recording`] run again, in order,
//! against a toolset built through the wiring, on a copy of a store, with every exit a
//! recorder; each call compared with its record ([`crate::replay::compare`]).
//!
//! Guarantees:
//! - The user's store is never written: [`StoreSource::Copy`] copies the file (`VACUUM INTO`,
//!   so a store in WAL mode copies whole) into the work folder, afresh for every eval run;
//!   [`StoreSource::Seeded`] is a new store with the toolset's initial contents, restored
//!   before every eval run as the eval restores it.
//! - Nothing leaves the process: the exits are built with a
//!   [`RecordingResolver`](toolgate_wiring::RecordingResolver), so a request the allowlist
//!   admits fails at name resolution; each call's report lists what its exits would have sent.
//! - No call is ever approved: the seat has no approval channel, so a call that needs a human
//!   is denied and reported as asking for approval.
//! - Against a catalogue ([`ReplayTarget::against`]), the catalogue's views decide the steps
//!   before a handler (the tool exists, the arguments fit, the mode asks a human); what they
//!   let through runs the toolset's handler through the dispatcher as usual.
//! - Each call runs as the principal (and tenant) its record names, with the record's mode,
//!   origin and run; a trace does not record scopes, so none are held.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use toolgate_core::trace::MemoryTrace;
use toolgate_core::{ApprovalRecord, CallRequest, Mode, Origin, Principal};
use toolgate_wiring::{ExitsConfig, Seat, Store, ToolsetName, WiringError};

use crate::replay::{
    AcceptFile, CatalogueGate, Compared, Decision, Difference, Proposal, Recording, Replayed,
    Shape, compare,
};

/// Where the replay's store comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSource {
    /// A new store with the toolset's initial contents, as the eval seeds it.
    Seeded,
    /// A copy of this store file (never written itself).
    Copy(PathBuf),
}

/// What a replay could not do.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Wiring(#[from] WiringError),
    #[error("could not copy the store {path}: {detail}")]
    Copy { path: String, detail: String },
}

/// One replayed call and how it compares with its record.
#[derive(Debug, Clone, Serialize)]
pub struct CallReport {
    pub line: usize,
    pub call_id: String,
    pub run_id: String,
    pub principal: String,
    pub tool: String,
    pub recorded: Decision,
    pub replayed: Decision,
    pub difference: Difference,
    pub compared: Compared,
    /// The reason of the accept entry that accepted this difference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted: Option<String>,
    /// What the call's exits would have sent (none of it left).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub would_send: Vec<String>,
}

/// The whole replay.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    pub toolset: String,
    pub calls: Vec<CallReport>,
    /// Input lines read and left out, by kind.
    pub skipped: BTreeMap<String, usize>,
    /// The names the exits asked for (none was resolved).
    pub names_not_reached: Vec<String>,
    /// Accept entries (1-based) that accepted nothing.
    pub unused_accepts: Vec<usize>,
}

impl ReplayReport {
    /// Calls whose difference no accept entry accepted.
    pub fn unaccepted(&self) -> impl Iterator<Item = &CallReport> {
        self.calls
            .iter()
            .filter(|c| c.difference != Difference::Same && c.accepted.is_none())
    }

    /// How many calls of each kind (`same`, `now_refused`, ...), and `accepted`.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for call in &self.calls {
            let kind = match call.difference {
                Difference::Same => "same",
                Difference::NowRefused { .. } => "now_refused",
                Difference::NowAsksApproval => "now_asks_approval",
                Difference::DifferentResult { .. } => "different_result",
            };
            *counts.entry(kind).or_default() += 1;
            if call.accepted.is_some() {
                *counts.entry("accepted").or_default() += 1;
            }
        }
        counts
    }
}

/// What to replay against.
pub struct ReplayTarget<'a> {
    pub toolset: ToolsetName,
    pub store: StoreSource,
    /// The exits' configuration; they are built as recorders whatever it allows.
    pub exits: ExitsConfig,
    /// Where the store copies go (a temporary folder the caller removes).
    pub work_dir: &'a Path,
    pub accept: Option<&'a AcceptFile>,
    /// Replay against this catalogue's views (the toolset's handlers run what it lets through).
    pub against: Option<&'a CatalogueGate>,
}

/// Replays every call of `recording` against `target`, calling `progress(done, total)` after
/// each call.
pub async fn replay(
    recording: &Recording,
    target: &ReplayTarget<'_>,
    progress: &dyn Fn(usize, usize),
) -> Result<ReplayReport, ReplayError> {
    let total = recording.call_count();
    let kind = target.toolset.store();
    let mut calls = Vec::with_capacity(total);
    let mut names = Vec::new();
    let mut seeded: Option<Store> = None;
    let mut used = vec![false; target.accept.map_or(0, |a| a.accept.len())];
    for (n, run) in recording.runs.iter().enumerate() {
        let copy;
        let store = match &target.store {
            StoreSource::Seeded => {
                let store = match seeded.take() {
                    Some(store) => store,
                    None => Store::open_or_init(kind, &target.work_dir.join("seeded.sqlite"))?,
                };
                if run.fresh_store {
                    store.reset()?;
                }
                &*seeded.insert(store)
            }
            StoreSource::Copy(path) => {
                let dest = target.work_dir.join(format!("copy-{}.sqlite", n + 1));
                copy_store(path, &dest)?;
                copy = Store::open(kind, &dest)?;
                &copy
            }
        };
        let trace = Arc::new(MemoryTrace::default());
        let seat = Seat::new(Principal::local("replay", &[])).with_trace(trace.clone());
        let (ready, recorder) =
            toolgate_wiring::dispatcher_recording(target.toolset, store, &target.exits, seat)?;
        for proposal in &run.calls {
            let sent_before = trace.of_kind("egress").len();
            let principal = Principal {
                id: proposal.principal.clone(),
                tenant: proposal.tenant.clone(),
                ..ready.principal.clone()
            };
            let mut request = CallRequest::new(
                principal,
                &proposal.run_id,
                &proposal.tool,
                proposal.arguments.clone(),
            )
            .with_call_id(&proposal.call_id)
            .with_origin(origin(proposal.origin.as_deref()));
            if let Some(mode) = mode(proposal.mode.as_deref()) {
                request = request.with_mode(mode);
            }
            let gated = target.against.and_then(|gate| {
                let mode = request.mode.unwrap_or(ready.caller.mode());
                gate.decide(&proposal.tool, &proposal.arguments, mode)
            });
            let replayed = match gated {
                // The catalogue stops the call before any handler: nothing runs.
                Some(decision) => Replayed {
                    decision,
                    shape: Shape::Null,
                },
                None => {
                    let outcome = ready.caller.call(request).await;
                    Replayed {
                        decision: decision_of(&outcome.record),
                        shape: Shape::of_text(&outcome.model_text()),
                    }
                }
            };
            let would_send = trace.of_kind("egress")[sent_before..]
                .iter()
                .map(describe_egress)
                .collect();
            calls.push(report_call(
                proposal,
                replayed,
                would_send,
                target.accept,
                &mut used,
            ));
            progress(calls.len(), total);
        }
        names.extend(recorder.asked());
    }
    Ok(ReplayReport {
        toolset: target.toolset.to_string(),
        calls,
        skipped: recording.skipped.clone(),
        names_not_reached: names,
        unused_accepts: used
            .iter()
            .enumerate()
            .filter(|(_, u)| !**u)
            .map(|(i, _)| i + 1)
            .collect(),
    })
}

fn report_call(
    proposal: &Proposal,
    replayed: Replayed,
    would_send: Vec<String>,
    accept: Option<&AcceptFile>,
    used: &mut [bool],
) -> CallReport {
    let (difference, compared) = compare(proposal, &replayed);
    let accepted = accept.and_then(|file| {
        let index = file.accepting(&proposal.call_id, &proposal.tool, &difference)?;
        if let Some(flag) = used.get_mut(index) {
            *flag = true;
        }
        file.accept.get(index).map(|entry| entry.reason.clone())
    });
    CallReport {
        line: proposal.line,
        call_id: proposal.call_id.clone(),
        run_id: proposal.run_id.clone(),
        principal: proposal.principal.clone(),
        tool: proposal.tool.clone(),
        recorded: proposal.decision.clone(),
        replayed: replayed.decision,
        difference,
        compared,
        accepted,
        would_send,
    }
}

/// How the replayed call was decided: a call that met the approval step asks for approval
/// (the replay has no channel, so it is always denied there).
fn decision_of(record: &toolgate_core::DecisionRecord) -> Decision {
    match (&record.approval, record.outcome) {
        (ApprovalRecord::Pending { .. } | ApprovalRecord::Denied { .. }, _)
        | (_, toolgate_core::call::Outcome::ApprovalRequired) => Decision::AsksApproval,
        (_, toolgate_core::call::Outcome::Ok) => Decision::Ran,
        (_, toolgate_core::call::Outcome::Error(code)) => Decision::Refused {
            stage: Some(stage_name(record.stage)),
            code: code.as_str().to_string(),
        },
    }
}

fn stage_name(stage: toolgate_core::call::Stage) -> String {
    match serde_json::to_value(stage) {
        Ok(Value::String(name)) => name,
        _ => format!("{stage:?}").to_lowercase(),
    }
}

fn origin(recorded: Option<&str>) -> Origin {
    match recorded {
        Some("mcp") => Origin::Mcp,
        Some("sandbox") => Origin::Sandbox,
        Some("tool") => Origin::Tool,
        Some("direct") => Origin::Direct,
        Some(_) | None => Origin::Loop,
    }
}

fn mode(recorded: Option<&str>) -> Option<Mode> {
    match recorded {
        Some("ask") => Some(Mode::Ask),
        Some("auto") => Some(Mode::Auto),
        Some(_) | None => None,
    }
}

/// One egress decision as a report line: `GET https://… (blocked: rule)`, `mail to a@b via
/// relay:587 (not sent: …)`.
fn describe_egress(event: &Value) -> String {
    let text = |key: &str| event.get(key).and_then(Value::as_str).unwrap_or("");
    let why = match (text("decision"), event.get("rule").and_then(Value::as_str)) {
        ("blocked", Some(rule)) => format!("blocked by the allowlist: {rule}"),
        ("blocked", None) => "blocked by the allowlist".to_string(),
        _ => "not sent: the replay's exits reach nothing".to_string(),
    };
    match event.get("recipients").and_then(Value::as_array) {
        Some(recipients) => {
            let to: Vec<&str> = recipients.iter().filter_map(Value::as_str).collect();
            format!(
                "mail to {} via {}:{} ({why})",
                to.join(", "),
                text("host"),
                event.get("port").and_then(Value::as_u64).unwrap_or(0)
            )
        }
        None => {
            let method = match text("method") {
                "" => "GET",
                m => m,
            };
            format!("{method} {} ({why})", text("url"))
        }
    }
}

/// Copies the SQLite store at `from` to `to` (`VACUUM INTO`: consistent, WAL included),
/// opening `from` read-only.
fn copy_store(from: &Path, to: &Path) -> Result<(), ReplayError> {
    let fail = |detail: String| ReplayError::Copy {
        path: from.display().to_string(),
        detail,
    };
    if !from.is_file() {
        return Err(fail("no such file".into()));
    }
    let source =
        rusqlite::Connection::open_with_flags(from, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| fail(e.to_string()))?;
    let dest = to
        .to_str()
        .ok_or_else(|| fail("the copy's path is not UTF-8".into()))?;
    source
        .execute("VACUUM INTO ?1", [dest])
        .map_err(|e| fail(e.to_string()))?;
    Ok(())
}
