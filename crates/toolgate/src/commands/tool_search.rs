//! `toolgate eval tool-search`: the tool-search measurement (standing definition tokens and
//! selection accuracy, with and without deferral, at each catalogue size).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use toolgate_eval::tool_search::{
    FixtureFile, PLAN_FILE, Plan, Progress, RUNS_FILE, SelectionEval, SelectionSuite,
    ToolSearchEvalError, load_records, markdown, report,
};

use super::ask::{choose_model, load_model};
use super::{CommandError, runtime};
use crate::cli::ToolSearchArgs;

fn read(path: &Path) -> Result<String, CommandError> {
    std::fs::read_to_string(path).map_err(|source| {
        ToolSearchEvalError::Io {
            path: path.display().to_string(),
            source,
        }
        .into()
    })
}

pub fn run(args: &ToolSearchArgs) -> Result<(), CommandError> {
    let suite_text = read(&args.tasks)?;
    let suite = SelectionSuite::parse(&suite_text, &args.tasks.display().to_string())?;
    let fixtures_text = read(&args.catalogue)?;
    let fixtures: FixtureFile =
        serde_json::from_str(&fixtures_text).map_err(|e| ToolSearchEvalError::Parse {
            path: args.catalogue.display().to_string(),
            message: e.to_string(),
        })?;
    let out = args.out.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from(format!("evals/runs/tool-search-{secs}"))
    });
    let eval = SelectionEval {
        suite,
        suite_text,
        fixtures,
        fixtures_text,
        sizes: args.sizes.clone(),
        modes: args.modes.clone(),
        runs: args.runs as usize,
        out_dir: out.clone(),
        resume: args.resume,
    };
    // The standing figures need no model, and check every setting before the slow load.
    let standing = eval.standing()?;
    if args.report_only {
        return write(&out, &standing);
    }
    let spec = choose_model(args.model.as_deref())?;
    let model = load_model(&spec, args.ctx, true)?;
    eprintln!(
        "toolgate: tool-search eval with {}: sizes {:?}, {} tasks, {} runs, modes {:?}; runs are saved in {} as they finish",
        model.name(),
        eval.sizes,
        eval.suite.tasks.len(),
        eval.runs,
        eval.modes,
        out.display()
    );
    let rt = runtime()?;
    rt.block_on(eval.run(model, Some(&progress_line)))?;
    eprintln!();
    write(&out, &standing)
}

fn write(
    out: &Path,
    standing: &[toolgate_eval::tool_search::Standing],
) -> Result<(), CommandError> {
    let plan_path = out.join(PLAN_FILE);
    if !plan_path.exists() {
        // Nothing measured yet: the standing figures alone.
        print!("{}", markdown(&report("(no runs yet)", &[]), standing));
        return Ok(());
    }
    let plan: Plan =
        serde_json::from_str(&read(&plan_path)?).map_err(|e| ToolSearchEvalError::Parse {
            path: plan_path.display().to_string(),
            message: e.to_string(),
        })?;
    let records = load_records(&out.join(RUNS_FILE))?;
    let report = report(&plan.model, &records);
    let text = markdown(&report, standing);
    let md = out.join("report.md");
    let json = out.join("report.json");
    std::fs::write(&md, &text)?;
    let body = serde_json::json!({"standing": standing, "report": report});
    std::fs::write(
        &json,
        serde_json::to_string_pretty(&body).unwrap_or_default(),
    )?;
    print!("{text}");
    println!("\nwrote {}\nwrote {}", md.display(), json.display());
    Ok(())
}

/// One line per finished run; on a terminal, redrawn in place.
fn progress_line(p: &Progress<'_>) {
    let per_run = p.elapsed_seconds / p.finished_here.max(1) as f64;
    let eta = (per_run * p.total.saturating_sub(p.done) as f64)
        .max(0.0)
        .round() as u64;
    let r = p.record;
    let line = format!(
        "{}/{} runs  ETA {}m{:02}s  last: {} tools {} {} #{}: {} ({}, {} searches, {:.0} s, {} input tokens)",
        p.done,
        p.total,
        eta / 60,
        eta % 60,
        r.size,
        r.mode.as_str(),
        r.task,
        r.index + 1,
        r.chosen.as_deref().unwrap_or("no tool"),
        if r.correct { "right" } else { "wrong" },
        r.searches,
        r.seconds,
        r.input_tokens
    );
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K{line}");
    } else {
        eprintln!("{line}");
    }
}
