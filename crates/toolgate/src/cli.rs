//! The command-line surface.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "toolgate",
    version,
    about = "Safe, measurable tool use for language-model assistants",
    long_about = "toolgate gives language-model assistants tools that are capability contracts: \
every call goes through one dispatcher that validates, authorizes, asks a human where the risk \
says so, and returns bounded, untrusted-marked results.\n\n\
Start with `toolgate tools` to see every tool, its risk and what its definitions cost in tokens."
)]
pub struct Cli {
    /// Configuration file (TOML). Default: ./toolgate.toml when it exists.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the risk table of a toolset and what its definitions and results cost in tokens.
    Tools(ToolsArgs),
    /// Create or restore the book catalogue database.
    #[command(subcommand)]
    Books(BooksCommand),
}

#[derive(Debug, clap::Args)]
pub struct ToolsArgs {
    /// Which toolset to show; all of them when omitted.
    #[arg(long, value_enum)]
    pub toolset: Option<ToolsetName>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutputFormat,
    /// Also print each tool's exact model view (name, description, input schema).
    #[arg(long)]
    pub schema: bool,
    /// Books database to measure result sizes on. Default: a fresh catalogue in a temporary
    /// folder, so the figures describe the initial state.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolsetName {
    #[value(name = "books-v1")]
    BooksV1,
    #[value(name = "books-v2")]
    BooksV2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum BooksCommand {
    /// Create a new catalogue database (300 goodbooks-10k rows); refuses to overwrite a file.
    Init {
        /// Database file. Default: [books] db in the config, else the user data folder.
        #[arg(long, value_name = "FILE")]
        db: Option<PathBuf>,
    },
    /// Restore a catalogue database to its initial state (no statuses, tags or receipts).
    Reset {
        /// Database file. Default: [books] db in the config, else the user data folder.
        #[arg(long, value_name = "FILE")]
        db: Option<PathBuf>,
    },
}
