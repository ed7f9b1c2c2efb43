//! `toolgate release`: write the release manifest of the tree (the configuration, every
//! toolset's catalogue, the eval suites and the last eval results, by version and digest), and
//! verify a committed manifest against the tree. The format and the comparison live in
//! `toolgate_catalogue::manifest`; the catalogues are the snapshots `toolgate catalogue
//! snapshot` takes; this file only reads the files, prints, and chooses the exit code.
//!
//! Paths are recorded as given (relative to the directory the command runs in), so a manifest
//! is verified from the same directory it was written in. Only finished run folders are
//! recorded (`manifest::run_finished`); both commands print one line to stderr per folder they
//! leave out, saying why, so an eval running under a committed manifest never makes `verify`
//! fail. Exit codes of `verify`: 0 when the tree is what the manifest records, 1 when an entry
//! changed (each one is named), 2 when the manifest cannot be used (a missing file, not a
//! manifest, a newer format, edited by hand, a toolset this build does not know).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use toolgate_catalogue::manifest::{
    self, ConfigInput, DiffKind, Inputs, Manifest, RunInput, Skipped, SuiteInput,
};
use toolgate_core::clock::{Clock, SystemClock};
use toolgate_wiring::ToolsetName;

use super::CommandError;
use super::catalogue::toolset_snapshot;
use crate::config::{Config, DEFAULT_CONFIG_FILE};

/// `toolgate release ...`.
#[derive(Debug, Subcommand)]
pub enum ReleaseCommand {
    /// Write the release manifest: toolgate's version; the configuration file (the global
    /// --config, else ./toolgate.toml when it exists) with the SHA-256 of its bytes and of its
    /// parsed content; per toolset the catalogue digest and every tool's name, version, digest
    /// and schemas' digest; every eval suite (<evals>/*.toml) with its SHA-256 and task count;
    /// and per finished run folder (<evals>/runs/<name>/ with its report and every run its
    /// plan asks for) the SHA-256 of runs.jsonl, the number of runs and the success rate per
    /// toolset from report.json; an unfinished folder is skipped with a line on stderr saying
    /// why. Keys and lists are sorted, so the same tree gives a byte-identical file; a digest
    /// seals the whole.
    Manifest(ManifestArgs),
    /// Recompute the manifest from the tree (the configuration, evals folder and toolsets the
    /// manifest names) and report every entry added, removed or changed; unfinished run
    /// folders are skipped as `manifest` skips them. Exits 0 when nothing changed, 1 when
    /// something did, 2 when the manifest cannot be used (missing, not a manifest, a newer
    /// format, edited by hand).
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
pub struct ManifestArgs {
    /// Write the manifest to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The folder holding the eval suites (*.toml) and the run folders (runs/<name>/).
    #[arg(long, value_name = "DIR", default_value = "evals")]
    pub evals: PathBuf,
    /// A toolset whose catalogue to record (repeat for several). Default: every toolset.
    #[arg(long, value_name = "NAME", value_parser = crate::cli::toolset_parser())]
    pub toolset: Vec<ToolsetName>,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The manifest to verify (from `toolgate release manifest`).
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// Print the differences as JSON instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// The exit code when the tree differs from the manifest.
const CHANGED: i32 = 1;
/// The exit code for a manifest that cannot be used.
const BAD_INPUT: i32 = 2;

/// `release manifest`, with the configuration already loaded from `config_flag` (or found).
pub fn manifest(
    config: &Config,
    config_flag: Option<&Path>,
    args: &ManifestArgs,
) -> Result<(), CommandError> {
    let config_path = match config_flag {
        Some(path) => Some(path.to_path_buf()),
        None => Some(PathBuf::from(DEFAULT_CONFIG_FILE)).filter(|p| p.exists()),
    };
    let toolsets = if args.toolset.is_empty() {
        ToolsetName::ALL.to_vec()
    } else {
        args.toolset.clone()
    };
    let (manifest, skipped) = of_tree(config, config_path.as_deref(), &args.evals, &toolsets)?;
    print_skipped(&skipped);
    let text = manifest.to_json();
    match &args.out {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| {
                CommandError::Usage(format!("{}: cannot be written: {e}", path.display()))
            })?;
            eprintln!(
                "toolgate: wrote the release manifest ({} toolsets, {} suites, {} run folders) to {}",
                manifest.toolsets.len(),
                manifest.suites.len(),
                manifest.runs.len(),
                path.display()
            );
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// `release verify`: prints the differences and exits 1 or 2 itself (the command line's error
/// path knows only one failure code).
pub fn verify(args: &VerifyArgs) -> Result<(), CommandError> {
    let code = match verify_code(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("toolgate: {message}");
            BAD_INPUT
        }
    };
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}

fn verify_code(args: &VerifyArgs) -> Result<i32, String> {
    let shown = args.manifest.display();
    let text = std::fs::read_to_string(&args.manifest)
        .map_err(|e| format!("{shown}: cannot be read: {e}"))?;
    let recorded = Manifest::from_json(&text).map_err(|e| format!("{shown}: {e}"))?;
    let toolsets = recorded
        .toolsets
        .iter()
        .map(|t| {
            t.name
                .parse::<ToolsetName>()
                .map_err(|e| format!("{shown}: toolset `{}`: {e}", t.name))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // The configuration the manifest names, when it is still there (gone, it is reported as
    // removed); read directly, as --config would be.
    let config_path = recorded
        .config
        .as_ref()
        .map(|c| PathBuf::from(&c.path))
        .filter(|p| p.exists());
    let config = match &config_path {
        Some(path) => Config::load(Some(path)).map_err(|e| format!("{}: {e}", path.display()))?,
        None => Config::default(),
    };
    let (now, skipped) = of_tree(
        &config,
        config_path.as_deref(),
        Path::new(&recorded.evals_dir),
        &toolsets,
    )
    .map_err(|e| format!("the tree cannot be read: {e}"))?;
    print_skipped(&skipped);
    let differences = manifest::diff(&recorded, &now);
    if args.json {
        let value = serde_json::json!({
            "manifest": shown.to_string(),
            "differences": differences,
            "skipped": skipped,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
    } else if differences.is_empty() {
        println!("{shown}: the tree is the release the manifest records");
    } else {
        for difference in &differences {
            let kind = match difference.kind {
                DiffKind::Added => "added",
                DiffKind::Removed => "removed",
                DiffKind::Changed => "changed",
            };
            if difference.fields.is_empty() {
                println!("{kind:<8} {}", difference.entry);
            } else {
                println!(
                    "{kind:<8} {} ({})",
                    difference.entry,
                    difference.fields.join(", ")
                );
            }
        }
        println!(
            "{shown}: {} entries differ from the tree",
            differences.len()
        );
    }
    Ok(if differences.is_empty() { 0 } else { CHANGED })
}

/// One line per run folder left out of the manifest (not recorded, so not compared).
fn print_skipped(skipped: &[Skipped]) {
    for folder in skipped {
        eprintln!("toolgate: skipped {}: {}", folder.path, folder.reason);
    }
}

/// The manifest of the tree as it is now, and the run folders it leaves out.
fn of_tree(
    config: &Config,
    config_path: Option<&Path>,
    evals: &Path,
    toolsets: &[ToolsetName],
) -> Result<(Manifest, Vec<Skipped>), CommandError> {
    let config_input = match config_path {
        None => None,
        Some(path) => {
            let bytes = read(path)?;
            let parsed = std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| toml::from_str::<toml::Value>(text).ok())
                .and_then(|value| serde_json::to_value(value).ok());
            Some(ConfigInput {
                path: path.display().to_string(),
                bytes,
                parsed,
            })
        }
    };
    let today = SystemClock.today();
    let snapshots = toolsets
        .iter()
        .map(|toolset| toolset_snapshot(config, *toolset, &today))
        .collect::<Result<Vec<_>, _>>()?;
    let mut suites = Vec::new();
    for path in sorted_entries(evals)? {
        if path.is_file() && path.extension().is_some_and(|e| e == "toml") {
            let bytes = read(&path)?;
            let shown = path.display().to_string();
            let tasks = std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| toolgate_eval::suite::Suite::parse(text, &shown).ok())
                .map(|suite| suite.tasks.len());
            suites.push(SuiteInput {
                path: shown,
                bytes,
                tasks,
            });
        }
    }
    let mut runs = Vec::new();
    let runs_dir = evals.join("runs");
    if runs_dir.is_dir() {
        for folder in sorted_entries(&runs_dir)? {
            let jsonl = read_if_file(&folder.join("runs.jsonl"))?;
            let plan = read_if_file(&folder.join("plan.json"))?;
            // Neither: not the folder of an eval that records runs (the injection suite's,
            // a sandbox attack's transcripts).
            if jsonl.is_none() && plan.is_none() {
                continue;
            }
            runs.push(RunInput {
                path: folder.display().to_string(),
                runs_jsonl: jsonl,
                plan_json: plan,
                report_json: read_if_file(&folder.join("report.json"))?,
                report_md: folder.join("report.md").is_file(),
            });
        }
    }
    let inputs = Inputs {
        toolgate_version: env!("CARGO_PKG_VERSION").to_string(),
        config: config_input,
        evals_dir: evals.display().to_string(),
        snapshots,
        suites,
        runs,
    };
    Ok((manifest::build(&inputs), manifest::skipped(&inputs)))
}

fn read_if_file(path: &Path) -> Result<Option<Vec<u8>>, CommandError> {
    if path.is_file() {
        read(path).map(Some)
    } else {
        Ok(None)
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CommandError> {
    std::fs::read(path)
        .map_err(|e| CommandError::Usage(format!("{}: cannot be read: {e}", path.display())))
}

/// The entries of `dir`, sorted by name.
fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, CommandError> {
    let listing = std::fs::read_dir(dir)
        .map_err(|e| CommandError::Usage(format!("{}: cannot be listed: {e}", dir.display())))?;
    let mut paths = listing
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?;
    paths.sort();
    Ok(paths)
}
