//! `toolgate.toml`: where the stores live (later: mode, allowlist, SMTP relay, model).
//!
//! Refuses unknown keys, so a typo is an error rather than a silently ignored setting.

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub books: BooksConfig,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BooksConfig {
    /// The books database file.
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
    #[error(
        "no --db was given, no [books] db is configured, and neither XDG_DATA_HOME nor HOME is set"
    )]
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
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: shown,
            message: e.to_string(),
        })
    }

    /// The books database: the flag, else the config, else the user data folder.
    pub fn books_db(&self, flag: Option<&Path>) -> Result<PathBuf, ConfigError> {
        if let Some(p) = flag {
            return Ok(p.to_path_buf());
        }
        if let Some(p) = &self.books.db {
            return Ok(p.clone());
        }
        Ok(data_folder()?.join("books.sqlite"))
    }
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
