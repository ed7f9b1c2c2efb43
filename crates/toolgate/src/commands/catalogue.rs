//! `toolgate catalogue`: snapshot a toolset's (or the imported MCP servers') catalogue, and
//! check a new snapshot against a release's. The snapshot format and the classification live
//! in `toolgate-catalogue`; this file only builds the registry (through the same wiring as
//! `toolgate tools`), reads and writes files, prints, and chooses the exit code.
//!
//! Exit codes of `check`: 0 when nothing breaks and every policy change is reviewed, 1 when
//! something breaks or a policy change is unreviewed, 2 when an input cannot be read (a missing
//! file, a snapshot of a newer format, a malformed review file).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Subcommand};
use toolgate_catalogue::{Review, Snapshot};
use toolgate_core::clock::{Clock, SystemClock};
use toolgate_core::trace::NoTrace;
use toolgate_core::{Principal, Registry};
use toolgate_wiring::{Seat, ToolsetName};

use super::mcp::open_imports;
use super::{CommandError, open_store, runtime};
use crate::config::Config;

/// `toolgate catalogue ...`.
#[derive(Debug, Subcommand)]
pub enum CatalogueCommand {
    /// Write the catalogue snapshot of one toolset (--toolset) or of the tools imported from
    /// the MCP servers of an mcpServers file (--mcp-config): every tool's name, version, model
    /// view, input and output schemas, risk, effect, scopes, approval, error codes, deadline
    /// and bounds, deprecation window and digest. Release snapshots are committed under
    /// catalogue/releases/<toolset>.json.
    Snapshot(SnapshotArgs),
    /// Compare a new snapshot with an old one (the last release's) and classify each
    /// difference: breaking for callers, a policy change to review, or compatible. Exits 0 when
    /// the new catalogue may ship, 1 on a breaking or unreviewed policy change, 2 on unreadable
    /// input.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// The toolset to snapshot (see `toolgate tools --help` for the list).
    #[arg(long, value_parser = crate::cli::toolset_parser())]
    pub toolset: Option<ToolsetName>,
    /// Write the snapshot to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The day the snapshot is taken (YYYY-MM-DD), against which date-based deprecation
    /// windows are judged. Default: today (UTC).
    #[arg(long, value_name = "DAY")]
    pub taken_on: Option<String>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The old snapshot: the last release's (catalogue/releases/<toolset>.json).
    #[arg(value_name = "OLD")]
    pub old: PathBuf,
    /// The new snapshot (from `toolgate catalogue snapshot`).
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// Print the report as JSON (with an acceptance entry for each unreviewed policy change).
    #[arg(long)]
    pub json: bool,
    /// A review file accepting policy changes: {"format": 1, "accepted": [{"tool": ...,
    /// "rule": "risk_lowered", "digest": "<the new tool's digest>", "note": "..."}]}. Breaking
    /// changes cannot be accepted.
    #[arg(long, value_name = "FILE")]
    pub accept: Option<PathBuf>,
}

/// The exit code for input `check` cannot read.
const BAD_INPUT: i32 = 2;
/// The exit code when the new catalogue may not ship.
const GATE_FAILS: i32 = 1;

pub fn run(
    config: &Config,
    mcp_config: Option<&Path>,
    command: CatalogueCommand,
) -> Result<(), CommandError> {
    match command {
        CatalogueCommand::Snapshot(args) => snapshot(config, mcp_config, &args),
        CatalogueCommand::Check(args) => check(&args),
    }
}

/// `catalogue check`: prints the report, and exits 1 or 2 itself (the command line's error
/// path knows only one failure code).
pub fn check(args: &CheckArgs) -> Result<(), CommandError> {
    let code = check_files(args);
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}

fn snapshot(
    config: &Config,
    mcp_config: Option<&Path>,
    args: &SnapshotArgs,
) -> Result<(), CommandError> {
    let taken_on = match &args.taken_on {
        Some(day) if valid_day(day) => day.clone(),
        Some(day) => {
            return Err(CommandError::Usage(format!(
                "--taken-on {day}: expected a day written YYYY-MM-DD"
            )));
        }
        None => SystemClock.today(),
    };
    let snapshot = match (args.toolset, mcp_config) {
        (Some(_), Some(_)) => {
            return Err(CommandError::Usage(
                "give either --toolset or --mcp-config, not both: a snapshot is of one catalogue"
                    .into(),
            ));
        }
        (Some(toolset), None) => toolset_snapshot(config, toolset, &taken_on)?,
        (None, flag) => {
            let rt = runtime()?;
            let Some(imports) = rt.block_on(open_imports(config, flag, Arc::new(NoTrace)))? else {
                return Err(CommandError::Usage(
                    "nothing to snapshot: give --toolset NAME, or --mcp-config FILE (or [mcp] config)"
                        .into(),
                ));
            };
            let registry = Registry::new(imports.tools.iter().cloned()).map_err(|e| {
                CommandError::Usage(format!("the imported tools do not form a catalogue: {e}"))
            });
            rt.block_on(imports.close());
            let source = match flag {
                Some(file) => format!("mcp:{}", file.display()),
                None => "mcp".to_string(),
            };
            Snapshot::of_registry(&registry?, &source, &taken_on)
        }
    };
    let text = snapshot.to_json();
    match &args.out {
        Some(path) => {
            std::fs::write(path, text)?;
            eprintln!(
                "toolgate: wrote the snapshot of {} ({} tools) to {}",
                snapshot.source,
                snapshot.tools.len(),
                path.display()
            );
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// The snapshot of `toolset`'s registry exactly as a front end serves it (built on a scratch
/// store), taken on `taken_on`. `toolgate release manifest` records the same snapshots.
pub(crate) fn toolset_snapshot(
    config: &Config,
    toolset: ToolsetName,
    taken_on: &str,
) -> Result<Snapshot, CommandError> {
    let scratch = tempfile::tempdir()?;
    let store = open_store(
        toolset.store(),
        &scratch.path().join(format!("{toolset}.sqlite")),
    )?;
    let seat = Seat::new(Principal::local("toolgate-cli", &[]));
    let ready = toolgate_wiring::dispatcher(toolset, &store, &config.exits(), seat)?;
    Ok(Snapshot::of_registry(
        &ready.registry,
        toolset.as_str(),
        taken_on,
    ))
}

/// Runs the gate and prints; returns the exit code.
fn check_files(args: &CheckArgs) -> i32 {
    let read = |path: &Path| {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot be read: {e}", path.display()))?;
        Snapshot::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    };
    let review = match &args.accept {
        None => Ok(Review::none()),
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot be read: {e}", path.display()))
            .and_then(|text| {
                Review::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
            }),
    };
    let (old, new, review) = match (read(&args.old), read(&args.new), review) {
        (Ok(old), Ok(new), Ok(review)) => (old, new, review),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            eprintln!("toolgate: {e}");
            return BAD_INPUT;
        }
    };
    let report = toolgate_catalogue::check(&old, &new);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.to_json(&review)).unwrap_or_default()
        );
    } else {
        print!("{}", report.to_table(&review));
    }
    if report.verdict(&review).passes() {
        0
    } else {
        GATE_FAILS
    }
}

fn valid_day(day: &str) -> bool {
    toolgate_core::spec::Milestone::Date(day.to_string()).is_well_formed()
}
