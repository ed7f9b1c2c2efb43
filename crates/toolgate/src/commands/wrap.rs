//! `toolgate wrap`: one MCP server (a command after `--`, or `--url`) served over stdio through
//! the gateway. The wiring makes it a one-server import ([`toolgate_wiring::wrap`]); from there
//! it is `serve --stdio --no-toolset` (or, with `--list`, `mcp list`) unchanged: the same
//! pins, ratings, approvals asked through the host, trace and audit.

use std::collections::BTreeMap;
use std::path::Path;

use toolgate_mcp_client::imports::default_lock_path;
use toolgate_wiring::wrap::{Upstream, WRAP_FOLDER, WrapRequest, prepare};
use toolgate_wiring::{ToolsetName, data_folder};

use super::CommandError;
use crate::cli::{McpCommand, ServeArgs, WrapArgs};
use crate::config::Config;

pub fn run(
    mut config: Config,
    mcp_config: Option<&Path>,
    args: &WrapArgs,
) -> Result<(), CommandError> {
    if mcp_config.is_some() {
        return Err(CommandError::Usage(
            "wrap serves the one server it is given: --mcp-config does not apply (use `serve \
             --stdio --no-toolset --mcp-config FILE` for a file of servers)"
                .into(),
        ));
    }
    let upstream = match &args.url {
        Some(url) => Upstream::Url {
            url: url.clone(),
            headers: args.header.clone(),
            header_env: args.header_env.clone(),
        },
        None => Upstream::Command(args.command.clone()),
    };
    let request = WrapRequest {
        upstream,
        name: args.name.clone(),
        env: args.env.clone(),
        risks: args.risk.clone(),
        lock: args.lock.clone(),
    };
    let environment: BTreeMap<String, String> = std::env::vars().collect();
    let folder = data_folder()?.join(WRAP_FOLDER);
    let prepared = prepare(&config.mcp, &request, &folder, &environment)?;
    for variable in &prepared.unset_env {
        eprintln!("toolgate: {variable} is not set here, so it is not passed on");
    }
    let file = prepared.servers_file.clone();
    let lock = prepared
        .settings
        .lock
        .clone()
        .unwrap_or_else(|| default_lock_path(&file));
    eprintln!(
        "toolgate: wrapping {} (its tools as {}__TOOL; pins in {})",
        prepared.name,
        prepared.namespace,
        lock.display()
    );
    config.mcp = prepared.settings;
    if args.list {
        return super::mcp::run(&config, Some(&file), McpCommand::List);
    }
    let serve = ServeArgs {
        toolset: ToolsetName::ALL[0],
        no_toolset: true,
        db: None,
        store: None,
        audit_db: args.audit_db.clone(),
        stdio: true,
        http: None,
        max_body_bytes: None,
        max_concurrent: None,
        request_timeout: None,
        trace: args.trace.clone(),
        insecure_no_auth: false,
        auth_issuer: None,
        auth_resource: None,
        auth_scope: Vec::new(),
    };
    super::serve::run(&config, Some(&file), &serve)
}
