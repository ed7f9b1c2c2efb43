//! `toolgate.toml`: mode, model, stores, the egress allowlist and the SMTP relay. See
//! `toolgate.example.toml` in the repository for every key with comments.
//!
//! Refuses unknown keys, so a typo is an error rather than a silently ignored setting; the
//! egress allowlist is validated when the file loads (a bare `*` or `*.com` is refused).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toolgate_core::Mode;
use toolgate_egress::{EgressConfig, Policy, SmtpConfig};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `auto` (medium-risk writes run, logged with an undo handle) or `ask`.
    #[serde(default)]
    pub mode: Option<Mode>,
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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// As `--model`: embedded, embedded:FILE, anthropic:NAME, openai:NAME, ...
    pub name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// The database file.
    pub db: Option<PathBuf>,
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
    #[error("no --db was given, none is configured, and neither XDG_DATA_HOME nor HOME is set")]
    NoDataFolder,
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

    /// The validated egress policy.
    pub fn egress_policy(&self) -> Result<Policy, ConfigError> {
        self.egress
            .validate()
            .map_err(|source| ConfigError::Egress {
                path: DEFAULT_CONFIG_FILE.into(),
                source,
            })
    }

    /// The books database: the flag, else the config, else the user data folder.
    pub fn books_db(&self, flag: Option<&Path>) -> Result<PathBuf, ConfigError> {
        store_path(flag, self.books.db.as_deref(), "books.sqlite")
    }

    /// The notes database: the flag, else the config, else the user data folder.
    pub fn notes_db(&self, flag: Option<&Path>) -> Result<PathBuf, ConfigError> {
        store_path(flag, self.notes.db.as_deref(), "notes.sqlite")
    }
}

fn store_path(
    flag: Option<&Path>,
    configured: Option<&Path>,
    file: &str,
) -> Result<PathBuf, ConfigError> {
    if let Some(p) = flag.or(configured) {
        return Ok(p.to_path_buf());
    }
    Ok(data_folder()?.join(file))
}

fn data_folder() -> Result<PathBuf, ConfigError> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("toolgate"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".local/share/toolgate"))
        .ok_or(ConfigError::NoDataFolder)
}
