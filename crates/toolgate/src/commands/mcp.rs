//! `toolgate mcp list|pin|diff|accept|login`, and the one way every command opens the MCP
//! servers whose tools are imported (`--mcp-config`, else `[mcp] config`).

use std::path::Path;
use std::sync::Arc;

use toolgate_core::Principal;
use toolgate_core::display::visible;
use toolgate_core::trace::TraceSink;
use toolgate_mcp_client::diff;
use toolgate_mcp_client::imports::{ImportOptions, Imports, ServerImport, ToolState};
use toolgate_mcp_client::oauth::DEFAULT_LOGIN_WAIT;

use super::{CommandError, runtime};
use crate::cli::McpCommand;
use crate::config::Config;
use crate::table;

/// Connects to every configured MCP server and imports its tools, through the wiring (the
/// `[egress]` exit it builds); `None` when no `mcpServers` file is configured.
pub(crate) async fn open_imports(
    config: &Config,
    flag: Option<&Path>,
    trace: Arc<dyn TraceSink>,
) -> Result<Option<Imports>, CommandError> {
    Ok(toolgate_wiring::open_imports(&config.mcp, flag, &config.exits(), trace).await?)
}

/// How the configured MCP servers are reached; `None` when no `mcpServers` file is
/// configured. The token vault is in the team's store `store` (else `[store] url`) when one
/// is given.
async fn import_options(
    config: &Config,
    flag: Option<&Path>,
    trace: Arc<dyn TraceSink>,
    store: Option<&str>,
) -> Result<Option<ImportOptions>, CommandError> {
    let placement = vault_placement(config, store).await?;
    Ok(toolgate_wiring::imports::import_options(
        &config.mcp,
        flag,
        &config.exits(),
        trace,
        &placement,
    )?)
}

/// The token vault in the team's store `store` (else `[store] url`), when one is given.
async fn vault_placement(
    config: &Config,
    store: Option<&str>,
) -> Result<toolgate_wiring::Placement, CommandError> {
    let mut placement = toolgate_wiring::Placement::default();
    if let Some(url) = config.shared_store_url(store, None) {
        let shared = toolgate_wiring::SharedStore::connect(&url).await?;
        placement.vault = Some(shared.token_vault());
    }
    Ok(placement)
}

/// The user `--as USER` names: their subject at the issuer of `[serve.auth]`, the tenant the
/// gateway gives every caller it authenticates.
fn user_named(config: &Config, user: &str) -> Result<Principal, CommandError> {
    let Some(auth) = &config.serve.auth else {
        return Err(CommandError::Usage(
            "--as names a user of the gateway by their subject at its authorization server:              set [serve.auth] issuer in toolgate.toml"
                .into(),
        ));
    };
    if user.trim().is_empty() || user.chars().any(char::is_control) {
        return Err(CommandError::Usage(
            "--as needs a user's subject (not empty, no control characters)".into(),
        ));
    }
    Ok(Principal {
        id: user.to_string(),
        tenant: auth.issuer.clone(),
        scopes: Arc::default(),
        catalogue: None,
    })
}

const NO_SERVERS: &str = "no MCP servers are configured: pass --mcp-config FILE (an mcpServers \
     JSON file as desktop hosts write it) or set [mcp] config in toolgate.toml";

pub fn run(config: &Config, flag: Option<&Path>, command: McpCommand) -> Result<(), CommandError> {
    let rt = runtime()?;
    rt.block_on(async {
        let trace: Arc<dyn TraceSink> = Arc::new(toolgate_core::trace::NoTrace);
        if let McpCommand::Login {
            server,
            wait_secs,
            as_user,
            store,
        } = &command
        {
            let user = as_user
                .as_deref()
                .map(|u| user_named(config, u))
                .transpose()?;
            let Some(options) = import_options(config, flag, trace, store.as_deref()).await? else {
                return Err(CommandError::Usage(NO_SERVERS.into()));
            };
            return login(&options, server, *wait_secs, user.as_ref()).await;
        }
        if let McpCommand::Rekey { store } = &command {
            return rekey(config, store.as_deref()).await;
        }
        let Some(mut imports) = open_imports(config, flag, trace).await? else {
            return Err(CommandError::Usage(NO_SERVERS.into()));
        };
        let result = act(&mut imports, command);
        imports.close().await;
        result
    })
}

/// `toolgate mcp login SERVER`: the URL to open goes to stderr, the outcome to stdout; no
/// token is ever printed.
async fn login(
    options: &ImportOptions,
    server: &str,
    wait_secs: Option<u64>,
    user: Option<&Principal>,
) -> Result<(), CommandError> {
    let wait = wait_secs
        .map(|s| std::time::Duration::from_secs(s.max(1)))
        .unwrap_or(DEFAULT_LOGIN_WAIT);
    let shown_wait = wait.as_secs();
    let show = |url: &str| {
        eprintln!(
            "Open this URL in your browser to authorize toolgate (waiting up to {shown_wait} s \
             for the redirect back to this machine):\n\n  {url}\n"
        );
    };
    let logged_in = match user {
        None => toolgate_mcp_client::imports::login(options, server, wait, show).await?,
        Some(user) => {
            toolgate_mcp_client::imports::login_as(options, server, user, wait, show).await?
        }
    };
    let stored = match user {
        None => options
            .connect
            .tokens
            .as_ref()
            .map(|t| t.shown())
            .unwrap_or_default(),
        Some(user) => format!("the token vault, as {}'s own", visible(&user.id)),
    };
    let scopes = if logged_in.scopes.is_empty() {
        "the server's default scopes".to_string()
    } else {
        format!("scopes {}", logged_in.scopes.join(" "))
    };
    println!(
        "{server}: logged in (issuer {}, resource {}, client {}, {scopes}); the token is stored in {stored}",
        logged_in.key.issuer, logged_in.key.resource, logged_in.client_id,
    );
    Ok(())
}

/// `toolgate mcp rekey`: every user's token sealed again under the current vault key.
async fn rekey(config: &Config, store: Option<&str>) -> Result<(), CommandError> {
    let placement = vault_placement(config, store).await?;
    let Some(vault) = toolgate_wiring::imports::token_vault(&config.mcp, &placement)? else {
        return Err(CommandError::Usage(
            "no token vault is configured: set [mcp.vault] keys_file in toolgate.toml".into(),
        ));
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let done = vault
        .rekey(now)
        .await
        .map_err(toolgate_mcp_client::imports::ImportsError::from)?;
    println!(
        "token vault: {} entries sealed again under the key `{}`, {} already under it",
        done.resealed, done.key_id, done.current
    );
    Ok(())
}

fn act(imports: &mut Imports, command: McpCommand) -> Result<(), CommandError> {
    match command {
        McpCommand::Login { .. } | McpCommand::Rekey { .. } => Err(CommandError::Usage(
            "login and rekey do not open the servers' tools".into(),
        )),
        McpCommand::List => {
            // Names, versions and definitions come from the servers: shown visibly.
            print!("{}", visible(&render_list(imports)));
            Ok(())
        }
        McpCommand::Pin { server } => {
            let only = server.map(|s| namespace_of(imports, &s)).transpose()?;
            for s in imports
                .servers
                .iter()
                .filter(|s| only.as_ref().is_none_or(|n| *n == s.namespace))
            {
                println!("{}", visible(&pin_line(s)));
            }
            Ok(())
        }
        McpCommand::Diff { server } => {
            let namespace = namespace_of(imports, &server)?;
            let review = imports.review(&namespace)?;
            let pins = imports.pins(&namespace).cloned().unwrap_or_default();
            let current = imports.catalogue(&namespace).unwrap_or_default();
            let text = diff::render(&namespace, &pins, &review, current);
            if text.is_empty() {
                println!("{namespace}: every tool is as pinned");
            } else {
                // The digest binds `accept` to exactly what was shown here.
                let digest = imports.catalogue_digest(&namespace)?;
                print!("{text}");
                println!(
                    "accept these definitions with: toolgate mcp accept {namespace} --digest sha256:{digest}"
                );
            }
            Ok(())
        }
        McpCommand::Accept { server, digest } => {
            let namespace = namespace_of(imports, &server)?;
            let accepted = imports.accept(&namespace, &digest)?;
            if accepted.is_clean() {
                println!("{namespace}: every tool was already as pinned; nothing changed");
            } else {
                let names: Vec<&str> = accepted.quarantined.keys().map(String::as_str).collect();
                println!(
                    "{namespace}: accepted the current definitions of {} ({}); a running gateway (`serve`, `wrap`) offers them now and tells its sessions; `ask` and `chat` from their next start",
                    names.len(),
                    names.join(", ")
                );
            }
            Ok(())
        }
    }
}

/// The namespace of the server `name` (as the file gives it, or already a namespace).
fn namespace_of(imports: &Imports, name: &str) -> Result<String, CommandError> {
    imports
        .servers
        .iter()
        .find(|s| s.namespace == name || s.given_name == name)
        .map(|s| s.namespace.clone())
        .ok_or_else(|| {
            let known: Vec<&str> = imports
                .servers
                .iter()
                .map(|s| s.given_name.as_str())
                .collect();
            CommandError::Usage(format!(
                "no MCP server is named `{name}` (configured: {})",
                known.join(", ")
            ))
        })
}

fn pin_line(server: &ServerImport) -> String {
    let count = server.tools.len();
    if let Err(e) = &server.connected {
        return format!("{}: not pinned now, unreachable: {e}", server.namespace);
    }
    if server.newly_pinned {
        return format!("{}: pinned {count} tools", server.namespace);
    }
    let quarantined = server
        .tools
        .iter()
        .filter(|t| matches!(t.state, ToolState::Quarantined(_)))
        .count();
    if quarantined == 0 {
        format!(
            "{}: already pinned, {count} tools as pinned",
            server.namespace
        )
    } else {
        format!(
            "{}: already pinned; {quarantined} of {count} tools differ: review with `toolgate mcp diff {}`, which prints the `toolgate mcp accept` command for what it shows",
            server.namespace, server.namespace
        )
    }
}

/// A server's heading line in listings.
pub(crate) fn server_heading(server: &ServerImport) -> String {
    let name = if server.given_name == server.namespace {
        server.namespace.clone()
    } else {
        format!("{} (namespace {})", server.given_name, server.namespace)
    };
    let status = match &server.connected {
        Ok((revision, info)) => format!(
            "connected{}{}{}",
            info.as_ref()
                .map(|i| format!(" to {i}"))
                .unwrap_or_default(),
            revision
                .as_ref()
                .map(|r| format!(", MCP {r}"))
                .unwrap_or_default(),
            if server.newly_pinned {
                ", pinned now (first use)"
            } else {
                ""
            }
        ),
        Err(e) => format!("UNREACHABLE: {e}"),
    };
    let mut line = format!("{name}: {status}\n  {}", server.terms.describe());
    if !server.ignored_keys.is_empty() {
        line.push_str(&format!(
            "\n  ignored keys (toolgate does not act on them): {}",
            server.ignored_keys.join(", ")
        ));
    }
    line
}

/// One row per tool: local name, remote name, risk, effect, where the risk came from, state.
pub(crate) fn tool_rows(server: &ServerImport) -> Vec<Vec<String>> {
    server
        .tools
        .iter()
        .map(|tool| {
            let (risk, effect, source) = match tool.rating() {
                Some((r, e, s)) => (r.as_str(), e.as_str(), s.as_str()),
                None => ("-", "-", "-"),
            };
            let state = match &tool.state {
                ToolState::Offered(_) => "offered".to_string(),
                ToolState::Quarantined(drift) => {
                    format!(
                        "QUARANTINED: {}",
                        drift.reason(&server.namespace, &tool.remote_name)
                    )
                }
                ToolState::Refused(why) => format!("REFUSED: {why}"),
                ToolState::Unreachable => "withheld: server unreachable".to_string(),
            };
            vec![
                tool.local_name.clone().unwrap_or_else(|| "-".into()),
                tool.remote_name.clone(),
                risk.into(),
                effect.into(),
                source.into(),
                state,
            ]
        })
        .collect()
}

pub(crate) const TOOL_HEADER: [&str; 6] = [
    "TOOL",
    "REMOTE NAME",
    "RISK",
    "EFFECT",
    "RISK FROM",
    "STATE",
];

fn render_list(imports: &Imports) -> String {
    let mut out = String::new();
    for server in &imports.servers {
        out.push_str(&server_heading(server));
        out.push('\n');
        let rows = tool_rows(server);
        if rows.is_empty() {
            out.push_str("  (no tools)\n\n");
            continue;
        }
        out.push_str(&table::render(&TOOL_HEADER, &rows, 140));
        out.push('\n');
    }
    out
}
