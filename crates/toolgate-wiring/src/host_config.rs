//! The MCP configuration files of the hosts people already use, edited so that toolgate sits in
//! front (`toolgate mcp install` / `uninstall`): Claude Desktop's `claude_desktop_config.json`,
//! Claude Code's `~/.claude.json` (or a project's `.mcp.json`) and Cursor's `mcp.json`, all with
//! their servers under `mcpServers`; VS Code's `mcp.json`, with them under `servers` and a
//! `type` on every entry.
//!
//! Pure, but for the edges at the end ([`write_with_backup`], [`restore`]): [`parse`] reads a
//! host's file, [`plan`] decides the change, [`render`] prints the new file in the old one's
//! indentation, [`diff`] shows it.
//!
//! Guarantees:
//! - a file that is not a JSON object (comments and trailing commas included: the hosts' own
//!   readers differ on them), whose servers key is not an object, one of whose entries is not
//!   an object, or that is in the other format (`servers` given for a host that reads
//!   `mcpServers`, or the reverse), is refused with the reason, and nothing is written;
//! - every other key of the file and of each entry survives, in its order (serde_json keeps
//!   insertion order in this workspace);
//! - an entry already served through toolgate (its command is toolgate: `wrap` or `serve`) is
//!   never wrapped again; an entry that `toolgate wrap` cannot carry whole (an `envFile`, an
//!   HTTP server's `oauth` object, the SSE transport) is left as it is, with the reason;
//! - an entry of another program under the name a toolset's entry would take is refused, never
//!   overwritten;
//! - the file is replaced only after a byte-for-byte backup is on disk, through a temporary file
//!   in the same folder renamed over it, and only if it is still the file the change was planned
//!   on; [`restore`] puts the newest backup back byte for byte, refusing when the file changed
//!   since our write unless forced;
//! - a host file that does not exist yet ([`absent`]) is created, its backup saying so, and
//!   [`restore`] removes it again.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// A host whose MCP configuration file toolgate knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    Vscode,
}

/// Why a host's file is refused, or a change cannot be made. Each message says what was found;
/// the file is left untouched.
#[derive(Debug, thiserror::Error)]
pub enum HostFileError {
    #[error("unknown host {0:?}: toolgate knows claude-desktop, claude-code, cursor and vscode")]
    UnknownHost(String),
    #[error(
        "it is not valid JSON ({0}); comments and trailing commas are not accepted: fix the \
         file, or point --file at another"
    )]
    NotJson(String),
    #[error("its top level is not a JSON object")]
    NotAnObject,
    #[error("its {key:?} is not an object of servers")]
    ServersNotAnObject { key: &'static str },
    #[error("its server {0:?} is not an object")]
    EntryNotAnObject(String),
    #[error(
        "it has {found:?} but no {expected:?}: it is another host's format ({hint}), not \
         {host}'s"
    )]
    OtherHostsFormat {
        found: &'static str,
        expected: &'static str,
        host: &'static str,
        hint: &'static str,
    },
    #[error(
        "its server {0:?} is not toolgate's, and a toolset's entry would take that name: \
         rename it first"
    )]
    NameTaken(String),
    #[error("no default {host} file on this system: pass --file PATH")]
    NoDefaultFile { host: &'static str },
    #[error("{path}: {detail}")]
    Io { path: String, detail: String },
    #[error(
        "{path} changed since it was read (another program wrote it): nothing was written; run \
         the command again"
    )]
    ChangedSinceRead { path: String },
    #[error("no toolgate backup of {path} was found (FILE.toolgate-backup-UNIXTIME beside it)")]
    NoBackup { path: String },
    #[error(
        "{path} changed since toolgate wrote it (the host or a person edited it): restoring \
         {backup} would lose those edits; pass --force to restore it anyway"
    )]
    ChangedSinceWrite { path: String, backup: String },
}

impl std::str::FromStr for Host {
    type Err = HostFileError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "claude-desktop" => Ok(Host::ClaudeDesktop),
            "claude-code" => Ok(Host::ClaudeCode),
            "cursor" => Ok(Host::Cursor),
            "vscode" => Ok(Host::Vscode),
            other => Err(HostFileError::UnknownHost(other.to_string())),
        }
    }
}

impl Host {
    pub const ALL: [Host; 4] = [
        Host::ClaudeDesktop,
        Host::ClaudeCode,
        Host::Cursor,
        Host::Vscode,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Host::ClaudeDesktop => "claude-desktop",
            Host::ClaudeCode => "claude-code",
            Host::Cursor => "cursor",
            Host::Vscode => "vscode",
        }
    }

    /// The key the servers are under.
    pub fn servers_key(self) -> &'static str {
        match self {
            Host::Vscode => "servers",
            Host::ClaudeDesktop | Host::ClaudeCode | Host::Cursor => "mcpServers",
        }
    }

    /// Whether every entry names its transport in `type` (VS Code's format).
    fn typed_entries(self) -> bool {
        matches!(self, Host::Vscode)
    }

    /// The user-level file as each host documents it, under `home`, on Linux or macOS (`os`
    /// as `std::env::consts::OS` names it); a project's file (`.mcp.json`, `.cursor/mcp.json`,
    /// `.vscode/mcp.json`) is given with `--file`.
    pub fn default_file(self, home: &Path, os: &str) -> Result<PathBuf, HostFileError> {
        let no_default = || HostFileError::NoDefaultFile {
            host: self.as_str(),
        };
        let settings = match os {
            "linux" => home.join(".config"),
            "macos" => home.join("Library/Application Support"),
            _ => return Err(no_default()),
        };
        Ok(match self {
            Host::ClaudeDesktop => settings.join("Claude/claude_desktop_config.json"),
            Host::ClaudeCode => home.join(".claude.json"),
            Host::Cursor => home.join(".cursor/mcp.json"),
            Host::Vscode => settings.join("Code/User/mcp.json"),
        })
    }

    fn describe(self) -> &'static str {
        match self {
            Host::ClaudeDesktop => "Claude Desktop",
            Host::ClaudeCode => "Claude Code",
            Host::Cursor => "Cursor",
            Host::Vscode => "VS Code",
        }
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

/// A host's file, read: its document and how it was laid out.
#[derive(Debug, Clone)]
pub struct HostFile {
    pub host: Host,
    pub document: Map<String, Value>,
    /// One level of indentation as the file has it (two spaces when it shows none).
    pub indent: String,
    pub trailing_newline: bool,
}

/// Reads `text` as `host`'s file; refuses what is not one (see the module's guarantees).
pub fn parse(host: Host, text: &str) -> Result<HostFile, HostFileError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| HostFileError::NotJson(e.to_string()))?;
    let Value::Object(document) = value else {
        return Err(HostFileError::NotAnObject);
    };
    let key = host.servers_key();
    // A file of the other format (VS Code's `servers`, everyone else's `mcpServers`) would get
    // a second, unread servers object: refused instead.
    let (other, hint) = match host {
        Host::Vscode => (
            "mcpServers",
            "use --host claude-code for a project's .mcp.json",
        ),
        Host::ClaudeDesktop | Host::ClaudeCode | Host::Cursor => {
            ("servers", "use --host vscode for VS Code's mcp.json")
        }
    };
    if document.contains_key(other) && !document.contains_key(key) {
        return Err(HostFileError::OtherHostsFormat {
            found: other,
            expected: key,
            host: host.describe(),
            hint,
        });
    }
    match document.get(key) {
        None => {}
        Some(Value::Object(servers)) => {
            if let Some((name, _)) = servers.iter().find(|(_, entry)| !entry.is_object()) {
                return Err(HostFileError::EntryNotAnObject(name.clone()));
            }
        }
        Some(_) => return Err(HostFileError::ServersNotAnObject { key }),
    }
    Ok(HostFile {
        host,
        document,
        indent: indentation(text),
        trailing_newline: text.ends_with('\n'),
    })
}

/// The first indented line's leading whitespace: the file's one level.
fn indentation(text: &str) -> String {
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start_matches([' ', '\t']);
            &line[..line.len() - trimmed.len()]
        })
        .find(|lead| !lead.is_empty())
        .unwrap_or("  ")
        .to_string()
}

/// What to install.
#[derive(Debug, Clone)]
pub struct InstallRequest<'a> {
    /// The program hosts start (toolgate's own path, so a host's short PATH does not matter).
    pub program: &'a str,
    /// The toolsets to serve, one entry each (`toolgate-<toolset>`).
    pub toolsets: &'a [String],
    /// Rewrite every other server's entry to go through `toolgate wrap`.
    pub wrap_all: bool,
}

/// What the change does to one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A toolset's entry, added (or brought up to date).
    Added { name: String, toolset: String },
    /// A toolset's entry that is already as it would be written.
    Unchanged { name: String },
    /// A server's entry rewritten to go through `toolgate wrap`.
    Wrapped { name: String },
    /// A server's entry that already goes through toolgate.
    AlreadyWrapped { name: String },
    /// A server's entry left as it is, and why.
    Kept { name: String, reason: String },
}

impl Change {
    /// Whether it changes the file.
    pub fn writes(&self) -> bool {
        matches!(self, Change::Added { .. } | Change::Wrapped { .. })
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Added { name, toolset } => write!(f, "{name}: serves toolgate's {toolset}"),
            Change::Unchanged { name } => write!(f, "{name}: already installed"),
            Change::Wrapped { name } => write!(f, "{name}: wrapped (toolgate wrap in front)"),
            Change::AlreadyWrapped { name } => write!(f, "{name}: already goes through toolgate"),
            Change::Kept { name, reason } => write!(f, "{name}: left as it is: {reason}"),
        }
    }
}

/// The new document and what changed, entry by entry.
#[derive(Debug, Clone)]
pub struct Plan {
    pub document: Map<String, Value>,
    pub changes: Vec<Change>,
}

impl Plan {
    pub fn writes(&self) -> bool {
        self.changes.iter().any(Change::writes)
    }
}

/// Decides the change `request` makes to `file` (see the module's guarantees).
pub fn plan(file: &HostFile, request: &InstallRequest<'_>) -> Result<Plan, HostFileError> {
    let host = file.host;
    let key = host.servers_key();
    let mut document = file.document.clone();
    let mut servers = match document.get(key) {
        Some(Value::Object(servers)) => servers.clone(),
        Some(_) => return Err(HostFileError::ServersNotAnObject { key }),
        None => Map::new(),
    };
    let mut changes = Vec::new();
    let ours: Vec<String> = request
        .toolsets
        .iter()
        .map(|t| format!("toolgate-{t}"))
        .collect();
    if request.wrap_all {
        for (name, entry) in servers.iter_mut() {
            if ours.contains(name) {
                continue;
            }
            let Value::Object(entry) = entry else {
                return Err(HostFileError::EntryNotAnObject(name.clone()));
            };
            let change = wrap_entry(host, name, entry, request.program);
            changes.push(change);
        }
    }
    for (name, toolset) in ours.iter().zip(request.toolsets) {
        let wanted = toolset_entry(host, request.program, toolset);
        match servers.get(name) {
            Some(existing) if *existing == wanted => {
                changes.push(Change::Unchanged { name: name.clone() });
                continue;
            }
            Some(Value::Object(existing)) if !is_toolgate(existing) => {
                return Err(HostFileError::NameTaken(name.clone()));
            }
            _ => {}
        }
        servers.insert(name.clone(), wanted);
        changes.push(Change::Added {
            name: name.clone(),
            toolset: toolset.clone(),
        });
    }
    document.insert(key.to_string(), Value::Object(servers));
    Ok(Plan { document, changes })
}

/// The entry that serves `toolset` over stdio.
fn toolset_entry(host: Host, program: &str, toolset: &str) -> Value {
    let mut entry = Map::new();
    if host.typed_entries() {
        entry.insert("type".into(), "stdio".into());
    }
    entry.insert("command".into(), program.into());
    entry.insert(
        "args".into(),
        Value::from(vec!["serve", "--stdio", "--toolset", toolset]),
    );
    Value::Object(entry)
}

/// Whether `entry` already starts toolgate (any path to a program named toolgate).
fn is_toolgate(entry: &Map<String, Value>) -> bool {
    entry
        .get("command")
        .and_then(Value::as_str)
        .map(|command| {
            let name = command.rsplit(['/', '\\']).next().unwrap_or(command);
            name == "toolgate" || name == "toolgate.exe"
        })
        .unwrap_or(false)
}

/// `entry` rewritten in place to go through `toolgate wrap --name NAME`, or why it is kept.
fn wrap_entry(host: Host, name: &str, entry: &mut Map<String, Value>, program: &str) -> Change {
    let kept = |reason: &str| Change::Kept {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if is_toolgate(entry) {
        return Change::AlreadyWrapped {
            name: name.to_string(),
        };
    }
    if toolgate_mcp_client::config::namespace(name).is_err() {
        return kept(
            "its name cannot namespace tools (letters, digits, '-', '_' or '.', starting with a \
             letter, at most 32)",
        );
    }
    if entry.contains_key("envFile") {
        return kept("its envFile's variables cannot be passed on by name");
    }
    match entry.get("type").and_then(Value::as_str) {
        Some("sse") => return kept("the SSE transport is not supported by toolgate"),
        None | Some("stdio" | "http" | "streamable-http" | "streamableHttp") => {}
        Some(_) => return kept("its type is unknown to toolgate"),
    }
    let mut args: Vec<String> = vec!["wrap".into(), "--name".into(), name.into()];
    let rebuilt = match (entry.get("command"), entry.get("url")) {
        (Some(Value::String(command)), None) => {
            let Some(own_args) = strings(entry.get("args")) else {
                return kept("its args are not a list of strings");
            };
            let env: Option<Vec<String>> = entry.get("env").map_or(Some(Vec::new()), |env| {
                env.as_object().map(|m| m.keys().cloned().collect())
            });
            let Some(env) = env else {
                return kept("its env is not an object");
            };
            for variable in env {
                args.extend(["--env".to_string(), variable]);
            }
            args.push("--".into());
            args.push(command.clone());
            args.extend(own_args);
            replace_transport(host, entry, program, args, &["command", "args"])
        }
        (None, Some(Value::String(url))) => {
            if entry.contains_key("oauth") {
                return kept("its oauth object cannot be carried on a command line");
            }
            if entry.contains_key("env") {
                return kept("an HTTP entry with an env of its own is not a form toolgate knows");
            }
            args.extend(["--url".to_string(), url.clone()]);
            // Each header's value moves into the entry's env and is named on the command line
            // only by its variable: a token in `args` would be in every process listing.
            let mut env = Map::new();
            match entry.get("headers") {
                None => {}
                Some(Value::Object(headers)) => {
                    for (header, value) in headers {
                        let Some(value) = value.as_str() else {
                            return kept("its headers are not an object of strings");
                        };
                        let Some(variable) = header_variable(header, &env) else {
                            return kept("a header name is not letters, digits, '-' or '_'");
                        };
                        args.extend(["--header-env".to_string(), format!("{header}={variable}")]);
                        env.insert(variable, value.into());
                    }
                }
                Some(_) => return kept("its headers are not an object of strings"),
            }
            let mut rebuilt = replace_transport(host, entry, program, args, &["url", "headers"]);
            if !env.is_empty() {
                rebuilt.insert("env".into(), Value::Object(env));
            }
            rebuilt
        }
        _ => return kept("it gives neither a command nor a URL (or both)"),
    };
    *entry = rebuilt;
    Change::Wrapped {
        name: name.to_string(),
    }
}

/// The variable a wrapped entry's `header` travels in (`TOOLGATE_HEADER_X_TEAM` for
/// `X-Team`), one not in `taken`; `None` for a header name that is not a token of letters,
/// digits, `-` and `_`.
fn header_variable(header: &str, taken: &Map<String, Value>) -> Option<String> {
    if header.is_empty()
        || !header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return None;
    }
    let base = format!(
        "TOOLGATE_HEADER_{}",
        header.to_ascii_uppercase().replace('-', "_")
    );
    let mut variable = base.clone();
    let mut n = 2;
    while taken.contains_key(&variable) {
        variable = format!("{base}_{n}");
        n += 1;
    }
    Some(variable)
}

/// `entry` with its transport keys (`old`) replaced by `command`/`args` where the first of them
/// stood, `type` (when present, or required by the host) saying stdio; every other key kept in
/// place.
fn replace_transport(
    host: Host,
    entry: &Map<String, Value>,
    program: &str,
    args: Vec<String>,
    old: &[&str],
) -> Map<String, Value> {
    let mut rebuilt = Map::new();
    if host.typed_entries() && !entry.contains_key("type") {
        rebuilt.insert("type".into(), "stdio".into());
    }
    let mut args = Some(args);
    for (key, value) in entry {
        if key == "type" {
            rebuilt.insert("type".into(), "stdio".into());
        } else if old.contains(&key.as_str()) {
            if let Some(args) = args.take() {
                rebuilt.insert("command".into(), program.into());
                rebuilt.insert("args".into(), Value::from(args));
            }
        } else {
            rebuilt.insert(key.clone(), value.clone());
        }
    }
    rebuilt
}

fn strings(value: Option<&Value>) -> Option<Vec<String>> {
    match value {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect(),
        Some(_) => None,
    }
}

/// `document` as `file` was laid out: its indentation, its final newline.
pub fn render(file: &HostFile, document: &Map<String, Value>) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(file.indent.as_bytes());
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    // Serializing a map of JSON values into memory cannot fail.
    let _ = document.serialize(&mut serializer);
    let mut text = String::from_utf8_lossy(&out).into_owned();
    if file.trailing_newline {
        text.push('\n');
    }
    text
}

/// A unified diff from `old` to `new`, headed with `path`.
pub fn diff(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(path, &format!("{path} (with toolgate)"))
        .to_string()
}

/// The suffix of a backup's name, before its Unix time.
pub const BACKUP_SUFFIX: &str = ".toolgate-backup-";
/// After the time: the file did not exist before toolgate wrote it (the backup is empty, and
/// restoring it removes the file).
pub const ABSENT_SUFFIX: &str = ".absent";
/// The suffix of the record of what toolgate wrote, after a backup's name.
pub const WRITTEN_SUFFIX: &str = ".written";

/// `file`'s backup taken at `unix` seconds: `FILE.toolgate-backup-UNIX` beside it
/// (`….absent` when there was no file).
pub fn backup_path(file: &Path, unix: u64, absent: bool) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let absent = if absent { ABSENT_SUFFIX } else { "" };
    file.with_file_name(format!("{name}{BACKUP_SUFFIX}{unix}{absent}"))
}

/// The newest backup of the file named `file_name` among the names in its folder, by the time
/// in its name, and whether it records that there was no file.
pub fn newest_backup<'a>(
    file_name: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> Option<(&'a str, bool)> {
    let prefix = format!("{file_name}{BACKUP_SUFFIX}");
    names
        .into_iter()
        .filter_map(|name| {
            let rest = name.strip_prefix(&prefix)?;
            let (time, absent) = match rest.strip_suffix(ABSENT_SUFFIX) {
                Some(time) => (time, true),
                None => (rest, false),
            };
            let time = time.parse::<u64>().ok()?;
            Some((time, name, absent))
        })
        .max_by_key(|(time, _, _)| *time)
        .map(|(_, name, absent)| (name, absent))
}

/// A host's file that does not exist yet (Claude Desktop writes its file only once a setting
/// is changed): an empty document, laid out as the hosts write theirs.
pub fn absent(host: Host) -> HostFile {
    HostFile {
        host,
        document: Map::new(),
        indent: "  ".into(),
        trailing_newline: true,
    }
}

/// What [`write_with_backup`] did.
#[derive(Debug, Clone)]
pub struct Written {
    pub backup: PathBuf,
}

fn io_error(path: &Path, error: std::io::Error) -> HostFileError {
    HostFileError::Io {
        path: path.display().to_string(),
        detail: error.to_string(),
    }
}

/// Replaces `path` (whose bytes were `read` when the change was planned, `None`: there was no
/// file) with `text`: first a byte-for-byte backup (`FILE.toolgate-backup-UNIX`, or an empty
/// `….absent` one), with a record of what is written beside it, then the new file through a
/// temporary file in the same folder renamed over it, with the old file's permissions.
/// Refused, writing nothing, when the file is no longer as `read` says.
pub fn write_with_backup(
    path: &Path,
    read: Option<&[u8]>,
    text: &str,
    unix: u64,
) -> Result<Written, HostFileError> {
    let now = match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(path, e)),
    };
    if now.as_deref() != read {
        return Err(HostFileError::ChangedSinceRead {
            path: path.display().to_string(),
        });
    }
    let permissions = match read {
        Some(_) => Some(
            std::fs::metadata(path)
                .map_err(|e| io_error(path, e))?
                .permissions(),
        ),
        None => None,
    };
    // A second install in the same second takes the next free name.
    let mut time = unix;
    let backup = loop {
        let candidate = backup_path(path, time, read.is_none());
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
        {
            Ok(mut out) => {
                use std::io::Write;
                out.write_all(read.unwrap_or_default())
                    .and_then(|()| out.sync_all())
                    .map_err(|e| io_error(&candidate, e))?;
                if let Some(permissions) = &permissions {
                    std::fs::set_permissions(&candidate, permissions.clone())
                        .map_err(|e| io_error(&candidate, e))?;
                }
                break candidate;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => time += 1,
            Err(e) => return Err(io_error(&candidate, e)),
        }
    };
    let record = written_record(&backup);
    replace_atomically(&record, text.as_bytes(), permissions.as_ref())?;
    replace_atomically(path, text.as_bytes(), permissions.as_ref())?;
    Ok(Written { backup })
}

fn written_record(backup: &Path) -> PathBuf {
    let mut name = backup.as_os_str().to_owned();
    name.push(WRITTEN_SUFFIX);
    PathBuf::from(name)
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`.
fn replace_atomically(
    path: &Path,
    bytes: &[u8],
    permissions: Option<&std::fs::Permissions>,
) -> Result<(), HostFileError> {
    use std::io::Write;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.toolgate-{}.tmp", std::process::id()));
    let written = std::fs::File::create(&temp)
        .and_then(|mut out| {
            out.write_all(bytes)?;
            out.sync_all()
        })
        .and_then(|()| match permissions {
            Some(permissions) => std::fs::set_permissions(&temp, permissions.clone()),
            None => Ok(()),
        })
        .and_then(|()| std::fs::rename(&temp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        io_error(path, e)
    })
}

/// What [`restore`] put back.
#[derive(Debug, Clone)]
pub struct Restored {
    pub backup: PathBuf,
    /// There was no file before toolgate's: it was removed.
    pub removed: bool,
}

/// Puts `path`'s newest toolgate backup back, byte for byte (or removes the file when there was
/// none before ours), then removes that backup and its record. Refused when the file is no
/// longer what toolgate wrote (unless `force`).
pub fn restore(path: &Path, force: bool) -> Result<Restored, HostFileError> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let names: Vec<String> = std::fs::read_dir(&folder)
        .map_err(|e| io_error(&folder, e))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let (newest, removed) = newest_backup(&file_name, names.iter().map(String::as_str))
        .ok_or_else(|| HostFileError::NoBackup {
            path: path.display().to_string(),
        })?;
    let backup = folder.join(newest);
    let record = written_record(&backup);
    let current = match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(path, e)),
    };
    let written = std::fs::read(&record).ok();
    if !force && (current.is_none() || written != current) {
        return Err(HostFileError::ChangedSinceWrite {
            path: path.display().to_string(),
            backup: backup.display().to_string(),
        });
    }
    if removed {
        if current.is_some() {
            std::fs::remove_file(path).map_err(|e| io_error(path, e))?;
        }
    } else {
        let bytes = std::fs::read(&backup).map_err(|e| io_error(&backup, e))?;
        let permissions = std::fs::metadata(&backup)
            .map_err(|e| io_error(&backup, e))?
            .permissions();
        replace_atomically(path, &bytes, Some(&permissions))?;
    }
    let _ = std::fs::remove_file(&record);
    std::fs::remove_file(&backup).map_err(|e| io_error(&backup, e))?;
    Ok(Restored { backup, removed })
}

#[cfg(test)]
#[path = "host_config_tests.rs"]
mod tests;
