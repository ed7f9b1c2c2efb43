//! MCP imports, opened one way for every front end (`toolgate tools`, `ask`, `chat`, `serve`,
//! `mcp ...`): the servers of the `mcpServers` file (given, else `[mcp] config`), reached
//! through the egress exit that [`ExitsConfig`] builds, the same allowlist and set-up the
//! toolsets' tools get; and the imported tools handed to a dispatcher as [`ExtraTools`].
//!
//! Guarantees: no `mcpServers` file means no imports (`None`), never an empty connection
//! attempt; ratings for servers with no file to find them in are refused rather than ignored;
//! an allowlist the egress exit refuses is refused before any server is contacted; the
//! receipts database and the token file default to the user data folder. Everything else
//! (connect, pin, quarantine, forward) is the client crate's, unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolgate_core::trace::TraceSink;
use toolgate_mcp_client::credentials::DEFAULT_TOKEN_FILE;
use toolgate_mcp_client::imports::{
    DEFAULT_VAULT_FILE, ImportOptions, Imports, ImportsError, McpSettings, configured_options,
    open_vault,
};
use toolgate_mcp_client::plan::SamplingPolicy;
use toolgate_mcp_client::server_requests::Sampler;
use toolgate_mcp_client::vault::TokenVault;
use toolgate_store::SharedConnection;

use crate::dispatch::ExtraTools;
use crate::error::WiringError;
use crate::exits::ExitsConfig;
use crate::store::data_folder;

/// The file the receipts of forwarded writes are kept in, in the data folder by default.
pub const RECEIPTS_FILE: &str = "mcp-receipts.sqlite";

/// Why the configured MCP servers could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenImportsError {
    #[error(
        "[mcp.servers] rates MCP servers, but no mcpServers file is given: set [mcp] config or \
         pass --mcp-config FILE"
    )]
    RatingsWithoutServersFile,
    #[error("the [egress] allowlist is refused: {0}")]
    Egress(#[from] toolgate_egress::ConfigError),
    #[error(transparent)]
    Wiring(#[from] WiringError),
    #[error(transparent)]
    Imports(#[from] ImportsError),
}

/// The `mcpServers` file: `flag` (the front end's own option), else `[mcp] config`.
pub fn servers_file(settings: &McpSettings, flag: Option<&Path>) -> Option<PathBuf> {
    flag.map(Path::to_path_buf)
        .or_else(|| settings.config.clone())
}

/// Where the imports keep what instances share, whom the front end serves, and which model
/// answers the servers allowed to sample.
#[derive(Clone, Default)]
pub struct Placement {
    /// Forwarded writes are claimed and settled here instead of `[mcp] receipts` (a team's
    /// shared store: [`crate::SharedStore::mcp_receipts`]).
    pub receipts: Option<SharedConnection>,
    /// Each user's downstream tokens are kept here instead of `[mcp.vault] path` (a team's
    /// shared store: [`crate::SharedStore::token_vault`]).
    pub vault: Option<SharedConnection>,
    /// The front end serves many users (`serve --http` behind `[serve.auth]`): a server that
    /// asks for OAuth is called with each user's own token unless configured otherwise.
    pub many_users: bool,
    /// The front end's model, on which a server whose `[mcp.servers.NAME]` says `sampling =
    /// "allow"` samples ([`crate::sampling::ModelSampler`]); none: every sampling request is
    /// refused.
    pub sampler: Option<Arc<dyn Sampler>>,
}

/// Whether any configured server may sample: the front end then wires its model in.
pub fn sampling_allowed(settings: &McpSettings) -> bool {
    settings
        .servers
        .values()
        .any(|ratings| ratings.sampling == SamplingPolicy::Allow)
}

/// How the configured MCP servers are reached; `None` when no `mcpServers` file is
/// configured. HTTP servers go through the egress exit `exits` builds (its relay, if any, is
/// not built: imports send no mail); `${VAR}` in the file is expanded from this process's
/// environment. The vault of `[mcp.vault]` is opened (in `placement.vault` when given).
pub fn import_options(
    settings: &McpSettings,
    flag: Option<&Path>,
    exits: &ExitsConfig,
    trace: Arc<dyn TraceSink>,
    placement: &Placement,
) -> Result<Option<ImportOptions>, OpenImportsError> {
    let Some(file) = servers_file(settings, flag) else {
        if !settings.servers.is_empty() {
            return Err(OpenImportsError::RatingsWithoutServersFile);
        }
        return Ok(None);
    };
    let egress = exits.egress(trace)?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let receipts = match &settings.receipts {
        Some(path) => path.clone(),
        None => data_folder()?.join(RECEIPTS_FILE),
    };
    let tokens = match &settings.tokens {
        Some(path) => path.clone(),
        None => data_folder()?.join(DEFAULT_TOKEN_FILE),
    };
    let mut options = configured_options(settings, &file, &receipts, &tokens, &env, Some(egress))?;
    if let Some(receipts) = &placement.receipts {
        options.receipts = receipts.clone();
    }
    options.vault = token_vault(settings, placement)?;
    options.per_user_by_default = placement.many_users;
    options.sampler = placement.sampler.clone();
    Ok(Some(options))
}

/// The token vault `[mcp.vault]` configures (in `placement.vault` when given, else its SQLite
/// file); `None` when none is configured.
pub fn token_vault(
    settings: &McpSettings,
    placement: &Placement,
) -> Result<Option<Arc<TokenVault>>, OpenImportsError> {
    let Some(vault) = &settings.vault else {
        return Ok(None);
    };
    let default_path = match &vault.path {
        Some(path) => path.clone(),
        None => data_folder()?.join(DEFAULT_VAULT_FILE),
    };
    Ok(Some(open_vault(
        vault,
        &default_path,
        placement.vault.clone(),
    )?))
}

/// Connects to every configured MCP server and imports its tools; `None` when no
/// `mcpServers` file is configured.
pub async fn open_imports(
    settings: &McpSettings,
    flag: Option<&Path>,
    exits: &ExitsConfig,
    trace: Arc<dyn TraceSink>,
) -> Result<Option<Imports>, OpenImportsError> {
    open_imports_placed(settings, flag, exits, trace, &Placement::default()).await
}

/// As [`open_imports`], with what instances share kept where `placement` says.
pub async fn open_imports_placed(
    settings: &McpSettings,
    flag: Option<&Path>,
    exits: &ExitsConfig,
    trace: Arc<dyn TraceSink>,
    placement: &Placement,
) -> Result<Option<Imports>, OpenImportsError> {
    let Some(options) = import_options(settings, flag, exits, trace, placement)? else {
        return Ok(None);
    };
    Ok(Some(Imports::open(options).await?))
}

/// The offered tools and the withheld names, for a dispatcher beside a toolset's tools (with
/// `tool_search` over all of them when `with_search`).
pub fn extra_tools(imports: &Imports, with_search: bool) -> ExtraTools {
    ExtraTools {
        tools: imports.tools.clone(),
        withheld: imports.withheld.clone(),
        with_search,
        code: None,
    }
}

#[cfg(test)]
mod tests {
    use toolgate_core::trace::NoTrace;
    use toolgate_egress::{AllowEntry, EgressConfig};

    use super::*;

    fn ratings() -> McpSettings {
        toml::from_str("[servers.docs]\nrisk = \"low\"").unwrap()
    }

    #[test]
    fn no_servers_file_opens_nothing_and_ratings_without_one_are_refused() {
        let none = import_options(
            &McpSettings::default(),
            None,
            &ExitsConfig::default(),
            Arc::new(NoTrace),
            &Placement::default(),
        );
        assert!(matches!(none, Ok(None)));
        let rated = import_options(
            &ratings(),
            None,
            &ExitsConfig::default(),
            Arc::new(NoTrace),
            &Placement::default(),
        );
        assert!(matches!(
            rated,
            Err(OpenImportsError::RatingsWithoutServersFile)
        ));
    }

    #[test]
    fn a_refused_allowlist_stops_imports_before_the_servers_file_is_read() {
        let mut egress = EgressConfig::default();
        egress.allow.push(AllowEntry {
            host: "not a host".into(),
            schemes: vec!["https".into()],
            ports: None,
            allow_private: false,
        });
        let exits = ExitsConfig::new(egress, None);
        let flag = Path::new("/nonexistent/servers.json");
        let opened = import_options(
            &McpSettings::default(),
            Some(flag),
            &exits,
            Arc::new(NoTrace),
            &Placement::default(),
        );
        match opened {
            Err(OpenImportsError::Egress(_)) => {}
            Err(other) => panic!("refused for another reason: {other}"),
            Ok(_) => panic!("a refused allowlist opened the imports"),
        }
    }

    #[test]
    fn the_flag_wins_over_the_configured_servers_file() {
        let settings = McpSettings {
            config: Some("configured.json".into()),
            ..McpSettings::default()
        };
        assert_eq!(
            servers_file(&settings, Some(Path::new("flag.json"))),
            Some(PathBuf::from("flag.json"))
        );
        assert_eq!(
            servers_file(&settings, None),
            Some(PathBuf::from("configured.json"))
        );
    }
}
