//! `toolgate replay TRACE.jsonl --toolset X`: shadow replay of recorded calls against a toolset,
//! on a copy of a store, with every exit a recorder (`toolgate_eval::replay_run`); prints one
//! line per call that differs and a summary, or the whole report as JSON.
//!
//! Exit status: 0 when every call is the same or its difference is accepted (`--accept`), 1
//! when some difference is not accepted, 2 for input replay cannot use (a trace line that is
//! not a decision record, an unreadable accept file, a store that cannot be copied), after
//! saying what and where on stderr.

use std::io::Write;

use toolgate_eval::replay::{
    AcceptFile, CatalogueGate, Compared, Difference, GateTool, Recording, parse_recording,
};
use toolgate_eval::replay_run::{ReplayReport, ReplayTarget, StoreSource, replay};

use super::CommandError;
use crate::cli::ReplayArgs;
use crate::config::Config;

/// The exit status for input replay cannot use.
const BAD_INPUT: i32 = 2;

pub fn run(config: &Config, args: &ReplayArgs) -> Result<(), CommandError> {
    let (recording, accept) = match read_input(args) {
        Ok(input) => input,
        Err(message) => bad_input(&message),
    };
    let against = match &args.against {
        Some(path) => match read_catalogue(path) {
            Ok(gate) => Some(gate),
            Err(message) => bad_input(&message),
        },
        None => None,
    };
    let work = tempfile::tempdir()?;
    let target = ReplayTarget {
        toolset: args.toolset,
        store: match &args.store {
            Some(path) => StoreSource::Copy(path.clone()),
            None => StoreSource::Seeded,
        },
        exits: config.exits(),
        work_dir: work.path(),
        accept: accept.as_ref(),
        against: against.as_ref(),
    };
    let total = recording.call_count();
    let show_progress = total >= 20 && !args.json;
    let progress = |done: usize, total: usize| {
        if show_progress && (done.is_multiple_of(20) || done == total) {
            eprintln!("toolgate: replayed {done}/{total} calls");
        }
    };
    let report = match super::runtime()?.block_on(replay(&recording, &target, &progress)) {
        Ok(report) => report,
        Err(toolgate_eval::replay_run::ReplayError::Copy { path, detail }) => {
            bad_input(&format!("--store {path}: {detail}"))
        }
        Err(toolgate_eval::replay_run::ReplayError::Wiring(e)) => {
            return Err(CommandError::Wiring(e));
        }
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report).map_err(|e| CommandError::Io(e.into()))?;
        writeln!(out)?;
    } else {
        print_report(&mut out, &report, args)?;
    }
    out.flush()?;
    let unaccepted = report.unaccepted().count();
    if unaccepted > 0 {
        std::process::exit(1);
    }
    Ok(())
}

fn bad_input(message: &str) -> ! {
    eprintln!("toolgate: {message}");
    std::process::exit(BAD_INPUT)
}

/// The recording, narrowed to the recorded toolset, and the accept file; or what is wrong.
fn read_input(args: &ReplayArgs) -> Result<(Recording, Option<AcceptFile>), String> {
    let shown = args.trace.display();
    let text = std::fs::read_to_string(&args.trace).map_err(|e| format!("{shown}: {e}"))?;
    let recording = parse_recording(&text).map_err(|e| format!("{shown}: {e}"))?;
    let recorded = recording.toolsets();
    let recording = match (&args.recorded, recorded.len()) {
        (Some(name), _) if !recorded.iter().any(|t| t == name.as_str()) => {
            return Err(format!(
                "{shown}: no run was recorded with {name} (runs here: {})",
                if recorded.is_empty() {
                    "none: a trace, which names no toolset".to_string()
                } else {
                    recorded.join(", ")
                }
            ));
        }
        (Some(name), _) => recording.recorded_with(name.as_str()),
        (None, 0 | 1) => recording,
        (None, _) if recorded.iter().any(|t| t == args.toolset.as_str()) => {
            recording.recorded_with(args.toolset.as_str())
        }
        (None, _) => {
            return Err(format!(
                "{shown}: runs of several toolsets ({}): say which to replay with --recorded",
                recorded.join(", ")
            ));
        }
    };
    let accept = match &args.accept {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Some(AcceptFile::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?)
        }
        None => None,
    };
    Ok((recording, accept))
}

/// A catalogue snapshot (`toolgate catalogue snapshot`) as the views replay checks.
fn read_catalogue(path: &std::path::Path) -> Result<CatalogueGate, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("--against {shown}: {e}"))?;
    let snapshot = toolgate_catalogue::Snapshot::from_json(&text)
        .map_err(|e| format!("--against {shown}: {e}"))?;
    Ok(CatalogueGate {
        source: snapshot.source,
        tools: snapshot
            .tools
            .into_iter()
            .map(|tool| {
                let view = GateTool {
                    input_schema: tool.input_schema,
                    approval_in: tool.approval_in,
                };
                (tool.name, view)
            })
            .collect(),
    })
}

fn print_report(
    out: &mut impl Write,
    report: &ReplayReport,
    args: &ReplayArgs,
) -> Result<(), CommandError> {
    let recorded = match &args.recorded {
        Some(name) => format!(" (runs recorded with {name})"),
        None => String::new(),
    };
    let against = match &args.against {
        Some(path) => format!(" with the catalogue of {}", path.display()),
        None => String::new(),
    };
    writeln!(
        out,
        "replayed {} calls of {}{recorded} against {}{against}",
        report.calls.len(),
        args.trace.display(),
        report.toolset
    )?;
    for call in &report.calls {
        if call.difference == Difference::Same && call.would_send.is_empty() {
            continue;
        }
        let accepted = match &call.accepted {
            Some(reason) => format!(" [accepted: {reason}]"),
            None => String::new(),
        };
        writeln!(
            out,
            "  line {} {} {}: {}{accepted}",
            call.line, call.call_id, call.tool, call.difference
        )?;
        if call.difference != Difference::Same {
            writeln!(
                out,
                "      recorded: {}; replayed: {}",
                call.recorded, call.replayed
            )?;
        }
        for sent in &call.would_send {
            writeln!(out, "      would have sent: {sent}")?;
        }
    }
    let counts = report.counts();
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    writeln!(
        out,
        "same {}, now refused {}, now asks approval {}, different result {} ({} accepted)",
        count("same"),
        count("now_refused"),
        count("now_asks_approval"),
        count("different_result"),
        count("accepted"),
    )?;
    let decision_only = report
        .calls
        .iter()
        .filter(|c| c.compared != Compared::DecisionAndShape)
        .count();
    if decision_only > 0 {
        writeln!(
            out,
            "{decision_only} calls compared on their decision only: the record holds no whole result (a trace's decision records never do; an eval keeps 1,500 characters)"
        )?;
    }
    if !report.skipped.is_empty() {
        let skipped: Vec<String> = report
            .skipped
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        writeln!(out, "left out: {}", skipped.join(", "))?;
    }
    if !report.names_not_reached.is_empty() {
        writeln!(
            out,
            "names the exits asked for (none reached): {}",
            report.names_not_reached.join(", ")
        )?;
    }
    for index in &report.unused_accepts {
        writeln!(out, "accept entry {index} accepted nothing")?;
    }
    let unaccepted = report.unaccepted().count();
    if unaccepted > 0 {
        writeln!(
            out,
            "{unaccepted} differences not accepted (list known ones in --accept FILE)"
        )?;
    }
    Ok(())
}
