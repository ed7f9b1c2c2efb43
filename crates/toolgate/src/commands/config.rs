//! `toolgate config trust [PATH] [--digest sha256:...]`: shows what a configuration file
//! would do that only a trusted file may, then, given the digest it showed, records exactly
//! that file in the user's trust list (see [`crate::config`]). Refuses a file that changed
//! between the two, a file that does not parse, and records nothing then.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::CommandError;
use crate::cli::ConfigCommand;
use crate::config::{self, ConfigError, DEFAULT_CONFIG_FILE, TrustList};

/// Longest value shown of a server's command, argument or environment entry.
const SHOWN_CHARS: usize = 200;

pub fn run(command: ConfigCommand) -> Result<(), CommandError> {
    match command {
        ConfigCommand::Trust { path, digest } => {
            let path = path.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG_FILE));
            trust(&path, digest.as_deref())
        }
    }
}

fn trust(path: &Path, digest: Option<&str>) -> Result<(), CommandError> {
    let read = config::read(path)?;
    let fingerprint = read.fingerprint()?;
    let shown = path.display().to_string();
    let Some(given) = digest else {
        print!("{}", describe(&read));
        println!(
            "trust exactly this file (and the mcpServers file it names) with:\n  toolgate config trust {shown} --digest sha256:{}",
            fingerprint.digest
        );
        return Ok(());
    };
    let given = given.strip_prefix("sha256:").unwrap_or(given);
    if !given.eq_ignore_ascii_case(&fingerprint.digest) {
        return Err(ConfigError::TrustChanged {
            path: shown,
            given: format!("sha256:{given}"),
            now: format!("sha256:{}", fingerprint.digest),
        }
        .into());
    }
    let list = TrustList::load()?.record(&fingerprint)?;
    println!(
        "trusted {} (sha256:{}), recorded in {}; it loads when found in the current folder until it changes",
        fingerprint.path,
        fingerprint.digest,
        list.display()
    );
    Ok(())
}

/// What the file asks for that needs trust, and the commands its mcpServers file would
/// start (as written: `${VAR}` shown unexpanded, so the secrets it would take are visible).
fn describe(read: &config::Read) -> String {
    let asks = config::needs_trust(&read.config);
    let mut out = String::new();
    if asks.is_empty() {
        out.push_str(&format!(
            "{}: asks for nothing that needs trust; it loads as it is\n",
            read.path.display()
        ));
        return out;
    }
    out.push_str(&format!(
        "{} asks for what only a trusted configuration may:\n",
        read.path.display()
    ));
    for ask in &asks {
        out.push_str(&format!("  - {ask}\n"));
    }
    if let Some(file) = &read.config.mcp.config {
        out.push_str(&servers_summary(file));
    }
    out
}

fn servers_summary(file: &Path) -> String {
    let parsed = std::fs::read_to_string(file)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()));
    let servers = match parsed {
        Ok(v) => v,
        Err(e) => return format!("  {} cannot be read now: {e}\n", file.display()),
    };
    let mut out = format!("  the servers {} starts or reaches:\n", file.display());
    let entries = servers
        .get("mcpServers")
        .and_then(Value::as_object)
        .into_iter()
        .flatten();
    for (name, entry) in entries {
        let field = |key: &str| entry.get(key).map(|v| cut(&v.to_string()));
        match (field("command"), field("url")) {
            (Some(command), _) => {
                out.push_str(&format!("    {}: runs {command}", cut(name)));
                if let Some(args) = field("args") {
                    out.push_str(&format!(" with args {args}"));
                }
                if let Some(env) = field("env") {
                    out.push_str(&format!(" and env {env}"));
                }
                out.push('\n');
            }
            (None, Some(url)) => out.push_str(&format!("    {}: connects to {url}\n", cut(name))),
            (None, None) => out.push_str(&format!("    {}: (no command or url)\n", cut(name))),
        }
    }
    out
}

/// `text` cut to [`SHOWN_CHARS`] characters, every control, format and bidirectional
/// character shown by name (the file's author chose them; a terminal must not act on them).
fn cut(text: &str) -> String {
    let escaped = toolgate_core::display::visible_line(text);
    let mut shown: String = escaped.chars().take(SHOWN_CHARS).collect();
    if escaped.chars().count() > SHOWN_CHARS {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_in_a_shown_command_are_escaped() {
        assert_eq!(cut("a\u{1b}[2Kb"), "a<ESC>[2Kb");
        assert_eq!(cut("x\u{202e}y"), "x<U+202E>y");
        assert_eq!(cut(&"z".repeat(300)).chars().count(), SHOWN_CHARS + 1);
    }
}
