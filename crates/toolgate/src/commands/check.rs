//! `toolgate check`: runs the security suites of `toolgate-check`, prints each table, writes
//! each report, and fails when any suite does.

use std::sync::Arc;

use toolgate_check::{Suite, SuiteOptions, SuiteReport, report::report_path};

use super::{CommandError, runtime};
use crate::cli::CheckArgs;
use crate::config::Config;

pub fn run(_config: &Config, args: &CheckArgs) -> Result<(), CommandError> {
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
    let rt = runtime()?;
    let mut failed = Vec::new();
    for suite in suites {
        options.say(&format!("== {} suite", suite.as_str()));
        let report = rt.block_on(run_suite(suite, &options))?;
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

async fn run_suite(suite: Suite, options: &SuiteOptions) -> Result<SuiteReport, CommandError> {
    Ok(match suite {
        Suite::Egress => toolgate_check::egress::run(options).await?,
        Suite::Auth => toolgate_check::auth::run(options).await?,
        Suite::Robustness => toolgate_check::robustness::run(options).await?,
        Suite::Injection => toolgate_check::injection::run(options).await?,
    })
}
