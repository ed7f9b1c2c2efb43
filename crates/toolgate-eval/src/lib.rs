//! toolgate-eval: proves (or refutes) that one tool design beats another. Suites are TOML
//! files of tasks whose checks read the final store or the answer; the runner restores the
//! store before every run and persists each run as it finishes (the run folder, shared with
//! the tool-search eval, is [`run_folder`]); statistics are bootstrap CIs
//! over tasks and runs; reports render the acceptance table, a verdict, JSON and an SVG chart.

pub mod check_sql;
pub mod checks;
pub mod code_mode;
pub mod echo;
pub mod eval_database;
pub mod folder;
pub mod metrics;
pub mod output;
pub mod pages;
pub mod record;
pub mod replay;
pub mod replay_run;
pub mod report;
pub mod report_html;
pub mod rescore;
pub mod run_folder;
pub mod runner;
pub mod stats;
pub mod suite;
pub mod tokens;
pub mod tool_search;
pub mod trace_pair;
