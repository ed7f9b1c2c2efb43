//! toolgate command line: wiring only. Each subcommand builds what it needs from the layers
//! below and prints; no tool logic lives here.

mod cli;
mod commands;
mod config;
mod model_spec;
mod table;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc instead of the system allocator: under load, malloc and free were about a fifth of
/// the MCP server's CPU (README, "MCP over Streamable HTTP"); the benchmark's bare rmcp floor
/// uses it too, so the ratio compares the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The hidden subcommand the sandbox starts this binary with.
pub const SANDBOX_INIT: &str = "sandbox-init";

fn main() -> ExitCode {
    // The sandbox's first process (see toolgate_sandbox::init): before anything else, since it
    // runs inside the namespaces with nothing but its own arguments.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == SANDBOX_INIT)
    {
        std::process::exit(toolgate_sandbox::init::main(std::env::args_os().skip(2)));
    }
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolgate: {error}");
            ExitCode::FAILURE
        }
    }
}
