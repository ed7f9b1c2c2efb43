//! toolgate command line: wiring only. Each subcommand builds what it needs from the layers
//! below and prints; no tool logic lives here.

mod cli;
mod commands;
mod config;
mod model_spec;
mod table;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolgate: {error}");
            ExitCode::FAILURE
        }
    }
}
