//! `toolgate check`: runs the security suites of `toolgate-check`, prints each table, writes
//! each report, and fails when any suite does.

use std::sync::Arc;

use toolgate_check::injection::{InjectionOptions, RunConfig};
use toolgate_check::{Suite, SuiteOptions, SuiteReport, report::report_path};

use super::ask::{choose_model, load_model};
use super::{CommandError, runtime};
use crate::cli::CheckArgs;
use crate::config::Config;
use toolgate_wiring::ToolsetName;

pub fn run(config: &Config, args: &CheckArgs) -> Result<(), CommandError> {
    let suites: Vec<Suite> = match args.suite.as_str() {
        "all" => Suite::ALL.to_vec(),
        "egress" => vec![Suite::Egress],
        "auth" => vec![Suite::Auth],
        "robustness" => vec![Suite::Robustness],
        "injection" => vec![Suite::Injection],
        other => return Err(CommandError::Usage(format!("unknown suite `{other}`"))),
    };
    if suites.len() > 1 && !args.cases.is_empty() {
        return Err(CommandError::Usage(
            "--cases belongs to one suite: name it (toolgate check egress --cases FILE)".into(),
        ));
    }
    let mut options = SuiteOptions::new(&args.out);
    options.extra_cases = args.cases.clone();
    if !args.quiet {
        options.progress = Some(Arc::new(|line: &str| eprintln!("{line}")));
    }
    let configs = chosen_configs(&args.configs, &args.toolset)?;
    if args.store.is_some() && !suites.contains(&Suite::Injection) {
        return Err(CommandError::Usage(
            "--store applies to the injection suite only (the others need no store of a team)"
                .into(),
        ));
    }
    // The model is loaded only when the injection suite runs.
    let injection = if suites.contains(&Suite::Injection) {
        toolgate_check::injection::load(&options.extra_cases)?;
        let spec = choose_model(args.model.as_deref().or(config.model.name.as_deref()))?;
        let mut injection = InjectionOptions::new(load_model(&spec, args.ctx, !args.quiet)?);
        injection.configs = configs;
        injection.only = args.only.clone();
        injection.resume = args.resume;
        injection.report_only = args.report_only;
        injection.store_url = args.store.clone();
        injection.limit = args.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        injection.clean_limit = args
            .clean_limit
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        Some(injection)
    } else {
        None
    };
    let rt = runtime()?;
    let mut failed = Vec::new();
    for suite in suites {
        options.say(&format!("== {} suite", suite.as_str()));
        let report = rt.block_on(run_suite(suite, &options, injection.as_ref()))?;
        let path = report_path(&args.out, suite.as_str());
        report.write_json(&path)?;
        println!("{}", report.table());
        println!("report: {}\n", path.display());
        if !report.passed {
            failed.push(suite.as_str());
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CommandError::ChecksFailed(format!(
            "the {} suite(s) failed: see the table(s) above and the report(s) in {}",
            failed.join(", "),
            args.out.display()
        )))
    }
}

async fn run_suite(
    suite: Suite,
    options: &SuiteOptions,
    injection: Option<&InjectionOptions>,
) -> Result<SuiteReport, CommandError> {
    Ok(match (suite, injection) {
        (Suite::Egress, _) => toolgate_check::egress::run(options).await?,
        (Suite::Auth, _) => toolgate_check::auth::run(options).await?,
        (Suite::Robustness, _) => toolgate_check::robustness::run(options).await?,
        (Suite::Injection, Some(injection)) => {
            toolgate_check::injection::run(options, injection).await?
        }
        (Suite::Injection, None) => {
            return Err(CommandError::Usage(
                "the injection suite needs a model".into(),
            ));
        }
    })
}

/// The configurations `--configs` names (all three when it names none), on each of
/// `toolsets` in turn.
fn chosen_configs(
    names: &[String],
    toolsets: &[ToolsetName],
) -> Result<Vec<RunConfig>, CommandError> {
    let configs = named_configs(names)?;
    let mut chosen = Vec::new();
    for toolset in toolsets {
        for config in &configs {
            chosen.push(
                config
                    .clone()
                    .on_toolset(*toolset)
                    .map_err(CommandError::Usage)?,
            );
        }
    }
    Ok(chosen)
}

fn named_configs(names: &[String]) -> Result<Vec<RunConfig>, CommandError> {
    let all = RunConfig::standard();
    if names.is_empty() {
        return Ok(all);
    }
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|c| &c.name == name)
                .cloned()
                .ok_or_else(|| {
                    CommandError::Usage(format!(
                        "unknown configuration `{name}`: choose from {}",
                        all.iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
        })
        .collect()
}
