//! `toolgate.toml`: mode, model, stores, the egress allowlist and the SMTP relay. See
//! `toolgate.example.toml` in the repository for every key with comments.
//!
//! Refuses unknown keys, so a typo is an error rather than a silently ignored setting; the
//! egress allowlist is validated when the file loads (a bare `*` or `*.com` is refused).
//!
//! A file found in the current folder (not named with `--config`) may have been written by
//! whoever wrote the checkout. Such a file is loaded only when it asks for nothing a stranger
//! may not ([`needs_trust`]: starting processes, expanding secrets into them, rating imported
//! tools, relaxing the taint policy, widening the egress allowlist, choosing the model, the
//! mail relay, the server's authorization, the sandbox, the receipt keys or where telemetry is
//! sent), or when the user
//! trusted exactly these bytes once with `toolgate config trust` (recorded by digest, with the
//! file's path and the bytes of the mcpServers file it names, in the user's trust list
//! [`trust_file`]). A changed file is untrusted again. Otherwise it is refused before anything runs, with an
//! error naming `toolgate config trust`: fails closed, nothing is partly loaded.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolgate_core::Mode;
use toolgate_core::canonical::{digest_parts, sha256_hex};
use toolgate_core::receipt_keys;
use toolgate_core::receipt_signing::{KeyRing, ReceiptSigner};
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
    /// `[store]`: a team's shared PostgreSQL store (`url = "postgres://..."`), used instead of
    /// the files of `[books]` when set.
    #[serde(default)]
    pub store: SharedStoreConfig,
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
    pub mcp: toolgate_mcp_client::imports::McpSettings,
    /// `[sandbox]`: where `code_execution` runs (bubblewrap, interpreter, limits, layers).
    #[serde(default)]
    pub sandbox: toolgate_sandbox::Settings,
    /// `[console]`: the web console and approval inbox on `toolgate serve --http` (needs
    /// `[serve.auth]`); calls whose host cannot ask its user wait there for an approver.
    #[serde(default)]
    pub console: Option<ConsoleConfig>,
    /// `[receipts]`: the key each write's receipt is signed with, and the older public keys
    /// that still verify after a rotation.
    #[serde(default)]
    pub receipts: ReceiptsConfig,
    /// `[budgets]`: what each run and each principal may spend (`[budgets.per_run]`,
    /// `[budgets.per_principal]`: calls, writes, approvals, outbound, tokens); unset:
    /// unlimited.
    #[serde(default)]
    pub budgets: toolgate_core::budget::BudgetConfig,
    /// `[phases]`: with `gate_writes = true`, the tools that change something stay out of a
    /// run's catalogue until the person approves a plan naming the exact call
    /// (`plan_propose`); `plan_ttl_secs` (default 600), `ungated` (tools left open).
    #[serde(default)]
    pub phases: toolgate_core::phase_gate::PhaseConfig,
    /// `[telemetry]`: OpenTelemetry spans and metrics over OTLP (`otlp_endpoint`, `protocol`,
    /// `headers`, `sampling_ratio`, ...); no endpoint: nothing is exported, at no cost.
    #[serde(default)]
    pub telemetry: toolgate_telemetry::config::TelemetryConfig,
}

/// `[receipts]`: signed receipts (see `docs/verifiable-receipts.md`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptsConfig {
    /// The signing key file (PEM PKCS#8 Ed25519, mode 0600, yours): every write's receipt is
    /// signed with it. Unset: receipts are not signed.
    #[serde(default)]
    pub signing_key: Option<PathBuf>,
    /// Public keys that still verify (base64, or the path of a `.pub` or key file): the keys
    /// that signed before a rotation. The signing key's own always verifies.
    #[serde(default)]
    pub verify_keys: Vec<String>,
}

/// `[console]`: the console's own settings, and who is told when a ticket is opened.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsoleConfig {
    pub settings: toolgate_console::ConsoleSettings,
    pub notify: NotifyConfig,
}

/// The keys of `[console]` that say who is told of an opened ticket (read here; the rest of
/// the section is the console's own, which refuses any key it does not know).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// Where to POST a signed JSON notice (through the egress exit: its host must be on
    /// `[[egress.allow]]`).
    #[serde(default)]
    pub webhook_url: Option<String>,
    /// The environment variable that holds the webhook's HMAC secret (never the file).
    #[serde(default)]
    pub webhook_secret_env: Option<String>,
    /// Who is mailed a notice, through `[smtp]`.
    #[serde(default)]
    pub notify_email: Vec<String>,
}

const NOTIFY_KEYS: [&str; 3] = ["webhook_url", "webhook_secret_env", "notify_email"];

impl<'de> Deserialize<'de> for ConsoleConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut table = toml::Table::deserialize(deserializer)?;
        let mut ours = toml::Table::new();
        for key in NOTIFY_KEYS {
            if let Some(value) = table.remove(key) {
                ours.insert(key.into(), value);
            }
        }
        let notify =
            NotifyConfig::deserialize(toml::Value::Table(ours)).map_err(D::Error::custom)?;
        let settings = toolgate_console::ConsoleSettings::deserialize(toml::Value::Table(table))
            .map_err(|e| D::Error::custom(naming_notify_keys(&e.to_string())))?;
        Ok(ConsoleConfig { settings, notify })
    }
}

/// The console's refusal of an unknown key, naming this section's notification keys among
/// those it accepts (serde names only the console's own).
fn naming_notify_keys(message: &str) -> String {
    let ours: Vec<String> = NOTIFY_KEYS.iter().map(|k| format!("`{k}`")).collect();
    message.replacen(
        "expected one of ",
        &format!("expected one of {}, ", ours.join(", ")),
        1,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedStoreConfig {
    /// `postgres://USER:PASSWORD@HOST:PORT/DATABASE`.
    pub url: Option<String>,
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
    #[error(
        "{path} was found in the current folder and is not trusted{changed}, so it is refused and nothing was started: it asks for {asks}. Review what it would do and trust it with `toolgate config trust {path}`, or name it with --config {path} to use it once"
    )]
    Untrusted {
        path: String,
        asks: String,
        /// ", or changed since it was trusted" when an earlier version was trusted.
        changed: &'static str,
    },
    #[error("[receipts]: {0}")]
    ReceiptKey(#[from] toolgate_core::receipt_keys::KeyFileError),
    #[error("{path}: {source}")]
    TelemetrySection {
        path: String,
        source: toolgate_telemetry::config::ConfigError,
    },
    #[error("telemetry could not start: {0}")]
    Telemetry(#[from] toolgate_telemetry::export::TelemetryError),
    #[error("the trust list {path} cannot be used: {detail}")]
    TrustList { path: String, detail: String },
    #[error(
        "{path} is not what was shown (its digest is now {now}, not {given}), so nothing was trusted: run `toolgate config trust {path}` again and review it"
    )]
    TrustChanged {
        path: String,
        given: String,
        now: String,
    },
}

pub const DEFAULT_CONFIG_FILE: &str = "toolgate.toml";

impl Config {
    /// Loads `explicit`, or `./toolgate.toml` when present (refused when it is untrusted and
    /// asks for what only a trusted file may: see the module doc), or the defaults.
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        if let Some(path) = explicit {
            return Ok(read(path)?.config);
        }
        let found = PathBuf::from(DEFAULT_CONFIG_FILE);
        if !found.exists() {
            return Ok(Config::default());
        }
        let read = read(&found)?;
        let asks = needs_trust(&read.config);
        if asks.is_empty() {
            return Ok(read.config);
        }
        let trust = TrustList::load()?;
        let fingerprint = read.fingerprint()?;
        if trust.trusts(&fingerprint) {
            return Ok(read.config);
        }
        Err(ConfigError::Untrusted {
            path: found.display().to_string(),
            asks: asks.join("; "),
            changed: if trust.knows_path(&fingerprint.path) {
                ", or changed since it was trusted"
            } else {
                ""
            },
        })
    }

    /// Where the store of `kind` lives: the flag, else the config, else the user data folder.
    pub fn store_path(&self, kind: StoreKind, flag: Option<&Path>) -> Result<PathBuf, WiringError> {
        let configured = match kind {
            StoreKind::Books => &self.books,
            StoreKind::Notes => &self.notes,
        };
        configured.path(kind, flag)
    }

    /// The shared store's URL: the flag, else `[store] url`, else none (files). A `--db` flag
    /// asks for a file, so it wins over the configured URL.
    pub fn shared_store_url(&self, flag: Option<&str>, db_flag: Option<&Path>) -> Option<String> {
        match (flag, db_flag) {
            (Some(url), _) => Some(url.to_owned()),
            (None, Some(_)) => None,
            (None, None) => self.store.url.clone(),
        }
    }

    /// The counters of `[budgets]`, one set for everything this process serves; `None` when
    /// no limit is set.
    pub fn budgets(&self) -> Option<std::sync::Arc<toolgate_core::budget::Budgets>> {
        let unlimited = toolgate_core::budget::Limits::default();
        (self.budgets.per_run != unlimited || self.budgets.per_principal != unlimited)
            .then(|| std::sync::Arc::new(toolgate_core::budget::Budgets::new(self.budgets)))
    }

    /// The gate of `[phases]`, one for everything this process serves; `None` when writes are
    /// not gated.
    pub fn phases(&self) -> Option<std::sync::Arc<toolgate_core::phase_gate::PhaseGate>> {
        self.phases.gate_writes.then(|| {
            std::sync::Arc::new(toolgate_core::phase_gate::PhaseGate::new(
                self.phases.clone(),
            ))
        })
    }

    /// The exporter of `[telemetry]`, started, when an endpoint is set: its `telemetry()` goes
    /// to every seat, and it is shut down (flushing what it holds) when the command ends.
    pub fn telemetry(&self) -> Result<Option<toolgate_telemetry::export::Exporting>, ConfigError> {
        Ok(toolgate_telemetry::export::start(&self.telemetry)?)
    }

    /// The signer of `[receipts] signing_key`, when one is set (its file checked: private,
    /// yours, an Ed25519 key).
    pub fn receipt_signer(&self) -> Result<Option<ReceiptSigner>, ConfigError> {
        match &self.receipts.signing_key {
            Some(path) => Ok(Some(receipt_keys::load_signer(path)?)),
            None => Ok(None),
        }
    }

    /// The keys receipts verify with: the signing key's and every `verify_keys` entry.
    pub fn receipt_key_ring(&self) -> Result<KeyRing, ConfigError> {
        let mut ring = KeyRing::new();
        if let Some(signer) = self.receipt_signer()? {
            ring.add_signer(&signer);
        }
        for entry in &self.receipts.verify_keys {
            receipt_keys::add_verify_entry(&mut ring, entry)?;
        }
        Ok(ring)
    }

    /// The exits the configuration allows: the egress allowlist and the SMTP relay, if any.
    pub fn exits(&self) -> ExitsConfig {
        ExitsConfig::new(self.egress.clone(), self.smtp.clone())
    }
}

/// A configuration file as read: its bytes, parsed and checked.
pub struct Read {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub config: Config,
}

/// Reads, parses and checks the configuration file `path` (one read: the bytes parsed are
/// the bytes a digest is taken of).
pub fn read(path: &Path) -> Result<Read, ConfigError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
        path: shown.clone(),
        source,
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| ConfigError::Parse {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    config
        .egress
        .validate()
        .map_err(|source| ConfigError::Egress {
            path: shown.clone(),
            source,
        })?;
    config
        .telemetry
        .validate()
        .map_err(|source| ConfigError::TelemetrySection {
            path: shown.clone(),
            source,
        })?;
    config
        .sandbox
        .check()
        .map_err(|message| ConfigError::Parse {
            path: shown,
            message,
        })?;
    Ok(Read {
        path: path.to_path_buf(),
        bytes,
        config,
    })
}

/// What a trust record binds: the file's absolute path, its bytes and the bytes of the
/// mcpServers file it names (whose commands it starts), as one digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub path: String,
    pub digest: String,
}

impl Read {
    /// This file's [`Fingerprint`] as it is now.
    pub fn fingerprint(&self) -> Result<Fingerprint, ConfigError> {
        let absolute = std::path::absolute(&self.path).map_err(|source| ConfigError::Read {
            path: self.path.display().to_string(),
            source,
        })?;
        let path = absolute.display().to_string();
        let servers = match &self.config.mcp.config {
            // Missing now and created later is a change too.
            Some(file) => std::fs::read(file)
                .map(|b| sha256_hex(&b))
                .unwrap_or_else(|_| "missing".into()),
            None => "none".into(),
        };
        let digest = digest_parts(&[
            "toolgate-config-trust-v1",
            &path,
            &sha256_hex(&self.bytes),
            &servers,
        ]);
        Ok(Fingerprint { path, digest })
    }
}

/// What `config` asks for that only a configuration the user trusts may: each as a phrase
/// naming the setting and what it does. Empty: a stranger's file may set it (store paths,
/// timeouts, a stricter mode or policy).
pub fn needs_trust(config: &Config) -> Vec<String> {
    let mut asks = Vec::new();
    let mcp = &config.mcp;
    if let Some(file) = &mcp.config {
        asks.push(format!(
            "[mcp] config = {} (starts the commands of that mcpServers file, with ${{VAR}} expanded from your environment)",
            file.display()
        ));
    }
    if !mcp.servers.is_empty() {
        let names: Vec<&str> = mcp.servers.keys().map(String::as_str).collect();
        asks.push(format!(
            "[mcp.servers] ratings for {} (can lower the risk of imported tools)",
            names.join(", ")
        ));
    }
    for (key, set) in [
        ("lock", mcp.lock.is_some()),
        ("receipts", mcp.receipts.is_some()),
        ("tokens", mcp.tokens.is_some()),
    ] {
        if set {
            asks.push(format!(
                "[mcp] {key} (where imported tools' pins, receipts or tokens are kept)"
            ));
        }
    }
    if config.policy.tainted_high == toolgate_core::taint::TaintedHigh::Ask {
        asks.push("[policy] tainted_high = \"ask\" (relaxes the taint rule)".into());
    }
    if config.policy.tainted_outbound == toolgate_core::taint::TaintedOutbound::Allow {
        asks.push("[policy] tainted_outbound = \"allow\" (relaxes the taint rule)".into());
    }
    if let Some(name) = config.model.name.as_deref().filter(|n| *n != "embedded") {
        asks.push(format!(
            "[model] name = \"{name}\" (which model reads your data, and where keys are sent)"
        ));
    }
    if !config.egress.allow.is_empty() {
        let hosts: Vec<&str> = config
            .egress
            .allow
            .iter()
            .map(|a| a.host.as_str())
            .collect();
        asks.push(format!(
            "[egress] allow {} (where tools may connect)",
            hosts.join(", ")
        ));
    }
    let default = EgressConfig::default();
    if config.egress.max_bytes > default.max_bytes
        || config.egress.timeout_secs > default.timeout_secs
        || config.egress.max_redirects > default.max_redirects
        || config
            .egress
            .content_types
            .iter()
            .any(|t| !default.content_types.contains(t))
    {
        asks.push("[egress] limits above the defaults".into());
    }
    if config.smtp.is_some() {
        asks.push("[smtp] (the relay email_send delivers through)".into());
    }
    if config.serve.auth.is_some() {
        asks.push("[serve.auth] (which tokens the HTTP server accepts)".into());
    }
    if let Some(endpoint) = &config.telemetry.otlp_endpoint {
        asks.push(format!(
            "[telemetry] otlp_endpoint = \"{endpoint}\" (where every call's span and metrics are sent)"
        ));
    }
    if config.console.is_some() {
        asks.push("[console] (who may approve calls in the web console)".into());
    }
    if let Some(key) = &config.receipts.signing_key {
        asks.push(format!(
            "[receipts] signing_key = {} (the key your receipts are signed with)",
            key.display()
        ));
    }
    if !config.receipts.verify_keys.is_empty() {
        asks.push("[receipts] verify_keys (which keys make a receipt verify)".into());
    }
    if config.sandbox != toolgate_sandbox::Settings::default() {
        asks.push("[sandbox] (which programs code_execution starts, and its limits)".into());
    }
    asks
}

/// The user's trust list: `$XDG_CONFIG_HOME/toolgate/trusted.toml`, else
/// `~/.config/toolgate/trusted.toml`; `None` without either variable (nothing is trusted).
pub fn trust_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("toolgate").join("trusted.toml"))
}

/// One trusted configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trusted {
    pub path: String,
    /// Its [`Fingerprint`] digest when it was trusted.
    pub digest: String,
}

/// The trust list as stored.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustList {
    #[serde(default)]
    pub trusted: Vec<Trusted>,
}

impl TrustList {
    /// The user's trust list; empty when there is none.
    pub fn load() -> Result<TrustList, ConfigError> {
        let Some(file) = trust_file() else {
            return Ok(TrustList::default());
        };
        let shown = file.display().to_string();
        match std::fs::read_to_string(&file) {
            Ok(text) => toml::from_str(&text).map_err(|e| ConfigError::TrustList {
                path: shown,
                detail: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TrustList::default()),
            Err(e) => Err(ConfigError::TrustList {
                path: shown,
                detail: e.to_string(),
            }),
        }
    }

    pub fn trusts(&self, fingerprint: &Fingerprint) -> bool {
        self.trusted
            .iter()
            .any(|t| t.path == fingerprint.path && t.digest == fingerprint.digest)
    }

    pub fn knows_path(&self, path: &str) -> bool {
        self.trusted.iter().any(|t| t.path == path)
    }

    /// Records `fingerprint` (replacing an earlier version of the same file) and saves the
    /// list, readable by the user only.
    pub fn record(mut self, fingerprint: &Fingerprint) -> Result<PathBuf, ConfigError> {
        let file = trust_file().ok_or_else(|| ConfigError::TrustList {
            path: "~/.config/toolgate/trusted.toml".into(),
            detail: "neither XDG_CONFIG_HOME nor HOME is set".into(),
        })?;
        let fail = |detail: String| ConfigError::TrustList {
            path: file.display().to_string(),
            detail,
        };
        self.trusted.retain(|t| t.path != fingerprint.path);
        self.trusted.push(Trusted {
            path: fingerprint.path.clone(),
            digest: fingerprint.digest.clone(),
        });
        let text = toml::to_string(&self).map_err(|e| fail(e.to_string()))?;
        let dir = file
            .parent()
            .ok_or_else(|| fail("it has no folder".into()))?;
        std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
        // Written whole then renamed: a crash leaves the old list, never half a new one.
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail(e.to_string()))?;
        std::io::Write::write_all(
            &mut temp,
            format!("# Configuration files toolgate trusts (`toolgate config trust`).\n{text}")
                .as_bytes(),
        )
        .map_err(|e| fail(e.to_string()))?;
        temp.persist(&file).map_err(|e| fail(e.to_string()))?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Config {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_strangers_file_may_not_start_processes_lower_risk_or_relax_policy() {
        let needs = [
            "[mcp]\nconfig = \"servers.json\"",
            "[mcp.servers.x]\nrisk = \"low\"",
            "[mcp]\nlock = \"other.lock.json\"",
            "[policy]\ntainted_high = \"ask\"",
            "[policy]\ntainted_outbound = \"allow\"",
            "[model]\nname = \"openai-compat:http://evil.example/v1#m\"",
            "[[egress.allow]]\nhost = \"evil.example\"",
            "[egress]\nmax_bytes = 999999999",
            "[serve.auth]\nissuer = \"https://as.example\"\nresource = \"https://r.example/mcp\"\n[serve.auth.scopes]\n\"notes:all\" = [\"notes\"]",
            // A collector of the file's author's would receive every call's span.
            "[telemetry]\notlp_endpoint = \"http://collector.evil.example:4318\"",
        ];
        for text in needs {
            assert!(!needs_trust(&parsed(text)).is_empty(), "{text}");
        }
        let harmless = [
            "",
            "mode = \"ask\"",
            "mode = \"auto\"",
            "[policy]\ntainted_high = \"refuse\"",
            "[books]\ndb = \"b.sqlite\"\n[notes]\ndb = \"n.sqlite\"",
            "[model]\nname = \"embedded\"",
            "[mcp]\ncall_timeout_secs = 5",
            "[egress]\nmax_bytes = 1000",
            "[telemetry]\nsampling_ratio = 0.5",
        ];
        for text in harmless {
            assert_eq!(needs_trust(&parsed(text)), Vec::<String>::new(), "{text}");
        }
    }

    #[test]
    fn a_sandbox_size_of_zero_is_refused_when_the_file_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolgate.toml");
        std::fs::write(&path, "[sandbox]\nwork_mb = 0\n").unwrap();
        match read(&path) {
            Err(ConfigError::Parse { message, .. }) => assert!(message.contains("work_mb")),
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("a zero work_mb loaded"),
        }
        std::fs::write(
            &path,
            "[sandbox]\nmemory_mb = 512\ntmp_mb = 16\nwork_mb = 64\n",
        )
        .unwrap();
        assert!(read(&path).is_ok());
    }
}

#[cfg(test)]
#[path = "config_reference_tests.rs"]
mod reference_tests;
