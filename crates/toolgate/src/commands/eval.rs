//! `toolgate eval`, `toolgate eval report DIR [--html FILE]`, `toolgate eval rescore DIR`,
//! `toolgate eval trace-pair DIR` (and
//! `toolgate eval tool-search`, in `tool_search.rs`).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use toolgate_eval::folder::load_suite_plan;
use toolgate_eval::output::write_report;
use toolgate_eval::report_html::ReportHtmlError;
use toolgate_eval::runner::{ProgressUpdate, RUNS_FILE, Runner, load_records};
use toolgate_eval::suite::{Split, Suite};
use toolgate_eval::trace_pair;
use toolgate_wiring::ToolsetName;

use super::ask::{choose_model, load_model_with};
use super::{CommandError, runtime};
use crate::cli::{EvalAction, EvalCommand, EvalRunArgs, SplitName};
use crate::config::Config;

pub fn run(config: &Config, command: EvalCommand) -> Result<(), CommandError> {
    match command.action {
        Some(EvalAction::Report { run_dir, html }) => {
            report(&run_dir)?;
            match html {
                Some(page) => report_page(&run_dir, &page),
                None => Ok(()),
            }
        }
        Some(EvalAction::Rescore { run_dir, suite }) => rescore(&run_dir, suite.as_deref()),
        Some(EvalAction::TracePair { run_dir }) => pair(&run_dir),
        Some(EvalAction::ToolSearch(args)) => super::tool_search::run(&args),
        Some(EvalAction::CodeMode(args)) => code_mode(config, &args),
        None => run_suite(&command.run),
    }
}

fn run_suite(args: &EvalRunArgs) -> Result<(), CommandError> {
    let suite_text = std::fs::read_to_string(&args.suite).map_err(|source| {
        toolgate_eval::suite::SuiteError::Read {
            path: args.suite.display().to_string(),
            source,
        }
    })?;
    let suite = Suite::parse(&suite_text, &args.suite.display().to_string())?;
    let toolsets: Vec<ToolsetName> = if args.toolsets.is_empty() {
        suite.suite.store.compared_by_default()
    } else {
        args.toolsets.clone()
    };
    // Clip tasks fetch pages served from the suite's `pages` folder, when it has one.
    let pages_dir = args
        .suite
        .parent()
        .map(|d| d.join("pages"))
        .filter(|d| d.is_dir());
    let out = args.out.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from(format!("evals/runs/{}-{secs}", suite.suite.name))
    });
    let runner = Runner {
        suite,
        suite_text,
        toolsets,
        runs: args.runs as usize,
        split: match args.split {
            SplitName::Dev => Some(Split::Dev),
            SplitName::Heldout => Some(Split::Heldout),
            SplitName::All => None,
        },
        task_ids: args.tasks.clone(),
        max_rounds: args.max_rounds,
        temperature: args.temperature,
        seed: args.seed,
        out_dir: out.clone(),
        pages_dir,
        resume: args.resume,
        stop: Arc::new(AtomicBool::new(false)),
        store_url: args.store.clone(),
    };
    // Bad settings are refused before the (slow) model load.
    runner.selected_tasks()?;
    let spec = choose_model(args.model.as_deref())?;
    let model = load_model_with(&spec, args.ctx, true, !args.unconstrained)?;
    eprintln!(
        "toolgate: eval of {} with {}; runs are saved in {} as they finish",
        runner.suite.suite.name,
        model.name(),
        out.display()
    );
    let rt = runtime()?;
    rt.block_on(runner.run(model, Some(Box::new(progress_bar))))?;
    eprintln!();
    report(&out)
}

/// One line per finished run; on a terminal, a bar with an ETA redrawn in place.
fn progress_bar(p: &ProgressUpdate<'_>) {
    let per_run = p.elapsed_seconds / p.finished_here.max(1) as f64;
    let eta = per_run * (p.total - p.done) as f64;
    let width = 30;
    let filled = (p.done * width) / p.total.max(1);
    let bar = format!("{}{}", "#".repeat(filled), "-".repeat(width - filled));
    let outcome = match p.record.failure {
        None => "pass".to_string(),
        Some(kind) => kind.as_str().to_string(),
    };
    let line = format!(
        "[{bar}] {}/{} runs  ETA {}  last: {} {} #{} {outcome} ({:.0} s, {} tokens)",
        p.done,
        p.total,
        duration(eta),
        p.record.toolset,
        p.record.task,
        p.record.index + 1,
        p.record.seconds,
        p.record.tokens()
    );
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K{line}");
    } else {
        eprintln!("{line}");
    }
}

fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

fn report(dir: &std::path::Path) -> Result<(), CommandError> {
    let (report, files) = write_report(dir)?;
    print!(
        "{}",
        toolgate_eval::report::markdown(&report)
            .split("\n## Runs")
            .next()
            .unwrap_or_default()
    );
    println!();
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}

/// Writes the report of `dir` as an HTML page to `page`, with the task prompts of
/// `evals/<suite>.toml` when that is the suite the eval ran.
fn report_page(dir: &std::path::Path, page: &std::path::Path) -> Result<(), CommandError> {
    let plan = load_suite_plan(dir)?;
    let suite = toolgate_eval::report_html::default_suite_path(std::path::Path::new(""), &plan);
    // Mapped here rather than as a variant of its own, so that commands/mod.rs stays as it is.
    toolgate_eval::report_html::write_html(dir, page, &suite).map_err(|e| match e {
        ReportHtmlError::Folder(e) => CommandError::Eval(e),
        e @ (ReportHtmlError::NoRuns { .. } | ReportHtmlError::Write { .. }) => {
            CommandError::Usage(e.to_string())
        }
        e @ ReportHtmlError::Template(_) => CommandError::RunFailed(e.to_string()),
    })?;
    println!("wrote {}", page.display());
    Ok(())
}

/// Re-judges the runs of `dir` with today's checks, prints what moved, re-renders the report.
fn rescore(dir: &std::path::Path, suite: Option<&std::path::Path>) -> Result<(), CommandError> {
    let suite = match suite {
        Some(path) => path.to_path_buf(),
        None => PathBuf::from(format!("evals/{}.toml", load_suite_plan(dir)?.suite_name)),
    };
    let changes = toolgate_eval::rescore::rescore_dir(dir, &suite)?;
    println!("rescored {} with {}", dir.display(), suite.display());
    let pct = |n: usize, of: usize| 100.0 * n as f64 / of.max(1) as f64;
    let flips = |way: &str, flips: &[toolgate_eval::rescore::Flip]| {
        for f in flips {
            println!("    {way}: {} #{}: {}", f.task, f.index + 1, f.why);
        }
    };
    for c in &changes {
        println!(
            "  {}: {} runs, successes {} -> {} ({:.0}% -> {:.0}%); {} passed and now fail, {} failed and now pass",
            c.toolset,
            c.runs,
            c.before,
            c.after,
            pct(c.before, c.runs),
            pct(c.after, c.runs),
            c.now_failing.len(),
            c.now_passing.len()
        );
        flips("pass -> fail", &c.now_failing);
        flips("fail -> pass", &c.now_passing);
    }
    println!();
    report(dir)
}

fn pair(dir: &std::path::Path) -> Result<(), CommandError> {
    let plan = load_suite_plan(dir)?;
    let runs = load_records(&dir.join(RUNS_FILE))?;
    let first = plan
        .toolsets
        .first()
        .map(String::as_str)
        .unwrap_or_default();
    let second = plan.toolsets.get(1).map(String::as_str).unwrap_or(first);
    match trace_pair::find(&runs, first, second) {
        Some((before, after)) => {
            match before {
                Some(b) => println!(
                    "BEFORE (the error did not teach the fix)\n{}",
                    trace_pair::render(b)
                ),
                None => println!(
                    "BEFORE: no run in this eval stayed stuck on an argument error for the same task."
                ),
            }
            println!(
                "AFTER (the model read the error and fixed its own arguments)\n{}",
                trace_pair::render(after)
            );
            Ok(())
        }
        None => Err(CommandError::NoTracePair {
            dir: dir.display().to_string(),
        }),
    }
}

/// `toolgate eval code-mode`: both arms on each notebook, saved as they finish.
fn code_mode(config: &Config, args: &crate::cli::CodeModeArgs) -> Result<(), CommandError> {
    use toolgate_eval::code_mode::{
        Arm, CodeMode, load_runs, markdown, paired_markdown, paired_scripts,
    };
    let out = args.out.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from(format!("evals/runs/code-mode-{secs}"))
    });
    let paired_with = |runs: &[toolgate_eval::code_mode::ArmRun]| -> Result<String, CommandError> {
        let Some(dir) = &args.paired_with else {
            return Ok(String::new());
        };
        let before = load_runs(dir).map_err(|e| CommandError::RunFailed(e.to_string()))?;
        if before.is_empty() {
            return Err(CommandError::Usage(format!(
                "--paired-with {} holds no code-mode runs",
                dir.display()
            )));
        }
        let rows = paired_scripts(&before, runs).map_err(|e| CommandError::Usage(e.to_string()))?;
        Ok(paired_markdown(&dir.display().to_string(), &rows))
    };
    let write_report = |runs: &[toolgate_eval::code_mode::ArmRun]| -> Result<(), CommandError> {
        let table = markdown(runs) + &paired_with(runs)?;
        let report = out.join("report.md");
        std::fs::write(&report, &table)?;
        print!("{table}");
        eprintln!("toolgate: report in {}", report.display());
        Ok(())
    };
    if args.report_only {
        let runs = load_runs(&out).map_err(|e| CommandError::RunFailed(e.to_string()))?;
        if runs.is_empty() {
            return Err(CommandError::Usage(format!(
                "{} holds no code-mode runs",
                out.display()
            )));
        }
        return write_report(&runs);
    }
    if let Some(dir) = &args.paired_with
        && !dir.join(toolgate_eval::code_mode::RUNS_FILE).is_file()
    {
        // Checked before hours of runs, not after them.
        return Err(CommandError::Usage(format!(
            "--paired-with {} holds no code-mode runs ({} is missing)",
            dir.display(),
            toolgate_eval::code_mode::RUNS_FILE
        )));
    }
    let init = toolgate_sandbox::InitProgram::this_executable(crate::SANDBOX_INIT)?;
    let sandbox = config.sandbox.config(init);
    // Checked before the model loads: a machine without the sandbox fails in a second.
    toolgate_sandbox::Sandbox::new(sandbox.clone()).map_err(toolgate_wiring::WiringError::from)?;
    let eval = CodeMode {
        extra_notes: args.extra_notes.clone(),
        arms: args
            .arms
            .iter()
            .map(|a| match a {
                crate::cli::CodeModeArm::ToolByTool => Arm::ToolByTool,
                crate::cli::CodeModeArm::Script => Arm::Script,
                crate::cli::CodeModeArm::ReferenceScript => Arm::ReferenceScript,
                crate::cli::CodeModeArm::ReferenceToolByTool => Arm::ReferenceToolByTool,
            })
            .collect(),
        sandbox,
        max_rounds: args.max_rounds,
        out_dir: out.clone(),
        resume: args.resume,
        runs: args.runs as usize,
        temperature: args.temperature,
        seed: args.seed,
        levers: toolgate_eval::code_mode::RunLevers {
            first_round_must_call: args.first_round_must_call,
            all_pages: args.all_pages,
            failed_script_errors: args.failed_script_errors,
        },
    };
    if args.runs > 1 && !args.temperature.is_some_and(|t| t > 0.0) {
        return Err(CommandError::Usage(
            "--runs above 1 needs a sampling --temperature (greedy runs repeat each other)".into(),
        ));
    }
    let spec = super::ask::choose_model(args.model.as_deref())?;
    let code_calls = match args.code_calls {
        crate::cli::CodeCallsForm::Json => toolgate_llm::embedded::CodeCalls::Json,
        crate::cli::CodeCallsForm::Fenced => toolgate_llm::embedded::CodeCalls::Fenced,
    };
    let model = super::ask::load_model_configured(&spec, args.ctx, true, true, code_calls)?;
    eprintln!(
        "toolgate: code-mode measurement with {}: notebooks +{:?} notes, arms {:?}; saved in {} as they finish",
        model.name(),
        eval.extra_notes,
        args.arms,
        out.display()
    );
    let rt = runtime()?;
    let progress = |r: &toolgate_eval::code_mode::ArmRun| {
        eprintln!(
            "  {} notes, {} run {}: {} tokens in context, {} model calls, {} run, {} turns, {:.0} s, {}/{} ids, {}{}",
            r.notes,
            r.arm.as_str(),
            r.run,
            r.context_tokens,
            r.model_tool_calls,
            r.dispatcher_calls,
            r.model_turns,
            r.wall_ms as f64 / 1000.0,
            r.found,
            r.expected_count,
            if r.correct { "correct" } else { "not correct" },
            match r.script_correct {
                Some(true) => ", script correct",
                Some(false) => ", script not correct",
                None => "",
            }
        );
    };
    let runs = rt
        .block_on(eval.run(model, Some(&progress)))
        .map_err(|e| CommandError::RunFailed(e.to_string()))?;
    write_report(&runs)
}
