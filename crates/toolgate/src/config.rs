//! `toolgate.toml`: mode, model, stores, the egress allowlist and the SMTP relay. See
//! `toolgate.example.toml` in the repository for every key with comments.
//!
//! Refuses unknown keys, so a typo is an error rather than a silently ignored setting; the
//! egress allowlist is validated when the file loads (a bare `*` or `*.com` is refused).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toolgate_core::Mode;
use toolgate_core::taint::TaintPolicy;
use toolgate_egress::{EgressConfig, SmtpConfig};
use toolgate_wiring::{ExitsConfig, StoreConfig, StoreKind, WiringError};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `auto` (medium-risk writes run, logged with an undo handle) or `ask`.
    #[serde(default)]
    pub mode: Option<Mode>,
    /// `[policy]`: what the dispatcher does with calls whose values came from untrusted text
    /// (`tainted_high = "refuse" | "ask"`, `tainted_outbound = "ask" | "allow"`).
    #[serde(default)]
    pub policy: TaintPolicy,
    #[serde(default)]
    pub model: ModelConfig,
    #[serde(default)]
    pub books: StoreConfig,
    #[serde(default)]
    pub notes: StoreConfig,
    /// Where tools may connect: see toolgate-egress. Empty (nothing allowed) by default.
    #[serde(default)]
    pub egress: EgressConfig,
    /// The relay `email_send` delivers through; `email_send` is refused without one.
    #[serde(default)]
    pub smtp: Option<SmtpConfig>,
    /// `toolgate serve`.
    #[serde(default)]
    pub serve: ServeConfig,
    /// `[mcp]`: the MCP servers whose tools are imported, our ratings of them, the pin lock.
    #[serde(default)]
    pub mcp: toolgate_mcp::client::imports::McpSettings,
    /// `[sandbox]`: where `code_execution` runs (bubblewrap, interpreter, limits, layers).
    #[serde(default)]
    pub sandbox: toolgate_sandbox::Settings,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// `[serve.auth]`: the HTTP server as an OAuth 2.1 resource server.
    #[serde(default)]
    pub auth: Option<toolgate_mcp::auth::AuthConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// As `--model`: embedded, embedded:FILE, anthropic:NAME, openai:NAME, ...
    pub name: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the config file {path} is not valid: {message}")]
    Parse { path: String, message: String },
    #[error("the [egress] section of {path} is refused: {source}")]
    Egress {
        path: String,
        source: toolgate_egress::ConfigError,
    },
}

pub const DEFAULT_CONFIG_FILE: &str = "toolgate.toml";

impl Config {
    /// Loads `explicit`, or `./toolgate.toml` when present, or the defaults.
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        let path = match explicit {
            Some(p) => p.to_path_buf(),
            None => {
                let default = PathBuf::from(DEFAULT_CONFIG_FILE);
                if !default.exists() {
                    return Ok(Config::default());
                }
                default
            }
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let config: Config = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        config
            .egress
            .validate()
            .map_err(|source| ConfigError::Egress {
                path: shown,
                source,
            })?;
        Ok(config)
    }

    /// Where the store of `kind` lives: the flag, else the config, else the user data folder.
    pub fn store_path(&self, kind: StoreKind, flag: Option<&Path>) -> Result<PathBuf, WiringError> {
        let configured = match kind {
            StoreKind::Books => &self.books,
            StoreKind::Notes => &self.notes,
        };
        configured.path(kind, flag)
    }

    /// The exits the configuration allows: the egress allowlist and the SMTP relay, if any.
    pub fn exits(&self) -> ExitsConfig {
        ExitsConfig::new(self.egress.clone(), self.smtp.clone())
    }
}
