//! `toolgate wrap`: one MCP server, given on the command line (`-- COMMAND ARGS...` or `--url
//! URL`), made into the one-server import every front end already knows, so the gateway
//! (`serve --stdio --no-toolset`) serves it with our names, risks, pins, approvals and trace.
//!
//! The server is written as a one-entry `mcpServers` file in the data folder
//! (`wrap/NAME.DIGEST.json`, named after its content, mode 0600) and imported from there
//! through [`crate::imports`], unchanged: nothing of the import path is copied. Its pins are
//! kept beside it (`wrap/NAME.lock.json`) unless a lock file is named, so a server wrapped by
//! several hosts under one name is pinned once, and a changed one is quarantined as any import
//! is.
//!
//! Guarantees: the file holds no value of the environment: a variable passed on (`--env NAME`)
//! is written as `${NAME}` and expanded from toolgate's own environment when the server starts,
//! so a host's secrets stay in the host's entry; the name is a valid tool namespace or the
//! command is refused (derived from the package or script, `--name` overrides); ratings from
//! the flags replace the configured `[mcp.servers.NAME]` ones they name, and an unrated tool
//! stays high risk.
//!
//! A header's value may come from a variable (`--header-env NAME=VAR`, written `${VAR}`), so a
//! token a host keeps in an entry's `env` never stands on a command line.
//!
//! Refuses: a name that cannot namespace tools, a `--risk` that is not `LEVEL[:EFFECT]` or
//! `TOOL=LEVEL[:EFFECT]`, a header that is not `NAME: VALUE`, a `--header-env` that is not
//! `NAME=VAR`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use toolgate_core::{Effect, Risk};
use toolgate_mcp_client::imports::McpSettings;
use toolgate_mcp_client::plan::{Rating, ServerRatings};

/// The folder of the data folder the wrapped servers' files and pins are kept in.
pub const WRAP_FOLDER: &str = "wrap";

/// The server to wrap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// A program speaking MCP on stdin/stdout: its command and arguments.
    Command(Vec<String>),
    /// A Streamable HTTP server, with extra request headers: `headers` as `NAME: VALUE`, and
    /// `header_env` as `NAME=VAR`, a header whose value is the variable VAR of toolgate's
    /// environment (read when the server starts; how `mcp install` keeps a host entry's
    /// tokens off the command line).
    Url {
        url: String,
        headers: Vec<String>,
        header_env: Vec<String>,
    },
}

/// What `toolgate wrap` was asked.
#[derive(Debug, Clone)]
pub struct WrapRequest {
    pub upstream: Upstream,
    /// `--name`; derived from the command or URL when absent.
    pub name: Option<String>,
    /// `--env NAME`: variables of ours passed on to a command.
    pub env: Vec<String>,
    /// `--risk LEVEL[:EFFECT]` or `--risk TOOL=LEVEL[:EFFECT]`.
    pub risks: Vec<String>,
    /// `--lock FILE`.
    pub lock: Option<PathBuf>,
}

/// Why a wrap is refused.
#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    #[error("no server to wrap: give `-- COMMAND ARGS...` or --url URL")]
    NothingToWrap,
    #[error("cannot derive a server name from {0:?}: pass --name NAME")]
    NoName(String),
    #[error(
        "--name {0:?} cannot namespace tools: use letters, digits, '-', '_' or '.', starting \
         with a letter, at most 32"
    )]
    BadName(String),
    #[error(
        "--risk {given:?}: {why}; give LEVEL[:EFFECT] for every tool or TOOL=LEVEL[:EFFECT] for \
         one (LEVEL low, medium or high; EFFECT read, undoable_write, outbound, irreversible or \
         costs_money)"
    )]
    BadRisk { given: String, why: String },
    #[error("--header {0:?} is not NAME: VALUE")]
    BadHeader(String),
    #[error("--env {0:?} is not a variable name")]
    BadEnv(String),
    #[error("--header-env {0:?} is not NAME=VAR (a header name, and a variable name)")]
    BadHeaderEnv(String),
    #[error("--env and --url do not go together: only a command has an environment")]
    EnvWithUrl,
    #[error("cannot write {path}: {detail}")]
    Write { path: String, detail: String },
}

/// The server name for `upstream`: the package a runner starts (`npx -y @scope/server-x@1` →
/// `server-x`, `uvx mcp-server-fetch` → `mcp-server-fetch`), the folder of a script an
/// interpreter runs (`node …/server-filesystem/dist/index.js` → `server-filesystem`), else the
/// program's own name; for a URL, its host. `None` when nothing usable is found.
pub fn derived_name(upstream: &Upstream) -> Option<String> {
    match upstream {
        Upstream::Url { url, .. } => {
            let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
            let authority = rest.split(['/', '?', '#']).next()?;
            let host = authority.rsplit('@').next()?.split(':').next()?;
            (!host.is_empty()).then(|| host.to_string())
        }
        Upstream::Command(words) => {
            let (program, args) = words.split_first()?;
            let program = file_name(program);
            let program = program.strip_suffix(".exe").unwrap_or(program);
            let first_operand = || args.iter().find(|a| !a.starts_with('-'));
            match program {
                "npx" | "bunx" | "uvx" | "pipx" | "pnpx" => first_operand().map(|p| package(p)),
                "pnpm" | "yarn" | "bun" | "uv"
                    if args
                        .first()
                        .is_some_and(|a| a == "dlx" || a == "x" || a == "run") =>
                {
                    args[1..]
                        .iter()
                        .find(|a| !a.starts_with('-'))
                        .map(|p| script_or_package(p))
                }
                "node" | "deno" | "python" | "python3" | "bun" | "tsx" | "ts-node" => {
                    first_operand().map(|p| script_or_package(p))
                }
                _ => Some(program.to_string()),
            }
        }
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// An npm or PyPI package's own name: scope and version dropped.
fn package(spec: &str) -> String {
    let unscoped = file_name(spec);
    let name = match unscoped.rfind('@') {
        Some(at) if at > 0 => &unscoped[..at],
        _ => unscoped,
    };
    name.split("==").next().unwrap_or(name).to_string()
}

/// A script's name, or the folder it is in when its name says nothing (`index.js`,
/// `dist/main.py`, ...); a package when it is not a path.
fn script_or_package(operand: &str) -> String {
    if !operand.contains(['/', '\\']) && !operand.contains('.') {
        return package(operand);
    }
    const PLAIN_FILES: [&str; 5] = ["index", "main", "server", "cli", "__main__"];
    const PLAIN_FOLDERS: [&str; 6] = ["dist", "build", "src", "lib", "bin", "out"];
    let parts: Vec<&str> = operand
        .split(['/', '\\'])
        .filter(|p| !p.is_empty())
        .collect();
    let stem = |p: &str| p.split('.').next().unwrap_or(p).to_string();
    let Some((last, folders)) = parts.split_last() else {
        return package(operand);
    };
    if !PLAIN_FILES.contains(&stem(last).as_str()) {
        return stem(last);
    }
    folders
        .iter()
        .rev()
        .find(|f| !PLAIN_FOLDERS.contains(f) && !f.starts_with('.'))
        .map_or_else(|| stem(last), |f| f.to_string())
}

/// `--risk` flags as ratings over `configured` (the `[mcp.servers.NAME]` table, if any): a
/// flag without `TOOL=` rates every tool, one with it rates that tool (by the server's own
/// name for it). Unchanged when no flag is given.
pub fn ratings(
    configured: Option<&ServerRatings>,
    flags: &[String],
) -> Result<Option<ServerRatings>, WrapError> {
    if flags.is_empty() {
        return Ok(configured.cloned());
    }
    let mut ratings = configured.cloned().unwrap_or_default();
    for flag in flags {
        let bad = |why: &str| WrapError::BadRisk {
            given: flag.clone(),
            why: why.to_string(),
        };
        let (tool, rating) = match flag.split_once('=') {
            Some((tool, rating)) if !tool.trim().is_empty() => (Some(tool.trim()), rating),
            Some(_) => return Err(bad("no tool before '='")),
            None => (None, flag.as_str()),
        };
        let (level, effect) = match rating.split_once(':') {
            Some((level, effect)) => (level, Some(effect)),
            None => (rating, None),
        };
        let risk: Risk = serde_json::from_value(json!(level.trim()))
            .map_err(|_| bad(&format!("{level:?} is not a risk level")))?;
        let effect: Option<Effect> = effect
            .map(|e| {
                serde_json::from_value(json!(e.trim()))
                    .map_err(|_| bad(&format!("{e:?} is not an effect")))
            })
            .transpose()?;
        let rating = Rating {
            risk: Some(risk),
            effect,
        };
        match tool {
            Some(tool) => {
                ratings.tools.insert(tool.to_string(), rating);
            }
            None => ratings.server = rating,
        }
    }
    Ok(Some(ratings))
}

/// The one-entry `mcpServers` document for `name`: a command's variables written as
/// `${NAME}` references (never their values), a URL's headers as given.
pub fn servers_document(
    name: &str,
    upstream: &Upstream,
    env: &[String],
) -> Result<Value, WrapError> {
    let mut entry = Map::new();
    match upstream {
        Upstream::Command(words) => {
            let (command, args) = words.split_first().ok_or(WrapError::NothingToWrap)?;
            entry.insert("command".into(), command.as_str().into());
            entry.insert("args".into(), Value::from(args.to_vec()));
            if !env.is_empty() {
                let mut passed = Map::new();
                for variable in env {
                    if !is_variable_name(variable) {
                        return Err(WrapError::BadEnv(variable.clone()));
                    }
                    passed.insert(variable.clone(), format!("${{{variable}}}").into());
                }
                entry.insert("env".into(), Value::Object(passed));
            }
        }
        Upstream::Url {
            url,
            headers,
            header_env,
        } => {
            if !env.is_empty() {
                return Err(WrapError::EnvWithUrl);
            }
            entry.insert("type".into(), "http".into());
            entry.insert("url".into(), url.as_str().into());
            let mut map = Map::new();
            for header in headers {
                let (key, value) = header
                    .split_once(':')
                    .filter(|(k, _)| !k.trim().is_empty())
                    .ok_or_else(|| WrapError::BadHeader(header.clone()))?;
                map.insert(key.trim().to_string(), value.trim().into());
            }
            for given in header_env {
                let (key, variable) = header_from_env(given)?;
                map.insert(key.to_string(), format!("${{{variable}}}").into());
            }
            if !map.is_empty() {
                entry.insert("headers".into(), Value::Object(map));
            }
        }
    }
    let mut servers = Map::new();
    servers.insert(name.to_string(), Value::Object(entry));
    Ok(json!({ "mcpServers": servers }))
}

/// A `--header-env NAME=VAR`: the header's name and the variable's.
pub fn header_from_env(given: &str) -> Result<(&str, &str), WrapError> {
    let refused = || WrapError::BadHeaderEnv(given.to_string());
    let (key, variable) = given.split_once('=').ok_or_else(refused)?;
    let key_ok = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if key_ok && is_variable_name(variable) {
        Ok((key, variable))
    } else {
        Err(refused())
    }
}

/// A name `${NAME}` can reference: letters, digits and `_`, not starting with a digit.
fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The server's name (the flag, else derived), checked as a tool namespace; and the namespace.
pub fn server_name(request: &WrapRequest) -> Result<(String, String), WrapError> {
    let name = match &request.name {
        Some(name) => name.clone(),
        None => derived_name(&request.upstream).ok_or_else(|| {
            WrapError::NoName(match &request.upstream {
                Upstream::Command(words) => words.join(" "),
                Upstream::Url { url, .. } => url.clone(),
            })
        })?,
    };
    match toolgate_mcp_client::config::namespace(&name) {
        Ok(namespace) => Ok((name, namespace)),
        Err(_) if request.name.is_some() => Err(WrapError::BadName(name)),
        Err(_) => Err(WrapError::NoName(name)),
    }
}

/// A wrap, ready to import: the `[mcp]` settings that import exactly the one server (its file,
/// its lock, its ratings), and the file.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub name: String,
    pub namespace: String,
    pub settings: McpSettings,
    pub servers_file: PathBuf,
    /// `--env` and `--header-env` variables not set in toolgate's environment (left out: the
    /// server would not start with an unset `${NAME}`).
    pub unset_env: Vec<String>,
}

/// Writes the one-server file under `folder` (the data folder's [`WRAP_FOLDER`]) and returns
/// `base` (`[mcp]` as configured) importing only it, with `environment` (ours) deciding which
/// `--env` variables can be passed on.
pub fn prepare(
    base: &McpSettings,
    request: &WrapRequest,
    folder: &Path,
    environment: &BTreeMap<String, String>,
) -> Result<Prepared, WrapError> {
    if let Upstream::Command(words) = &request.upstream
        && words.is_empty()
    {
        return Err(WrapError::NothingToWrap);
    }
    let (name, namespace) = server_name(request)?;
    let (env, mut unset_env): (Vec<String>, Vec<String>) = request
        .env
        .iter()
        .cloned()
        .partition(|v| environment.contains_key(v));
    // A header whose variable is unset is left out, as an unset `--env` is: the import would
    // refuse the whole file for one unset `${VAR}`.
    let upstream = match &request.upstream {
        Upstream::Url {
            url,
            headers,
            header_env,
        } => {
            let mut set = Vec::new();
            for given in header_env {
                let (_, variable) = header_from_env(given)?;
                if environment.contains_key(variable) {
                    set.push(given.clone());
                } else {
                    unset_env.push(variable.to_string());
                }
            }
            Upstream::Url {
                url: url.clone(),
                headers: headers.clone(),
                header_env: set,
            }
        }
        command => command.clone(),
    };
    let document = servers_document(&name, &upstream, &env)?;
    let rated = ratings(base.servers.get(&namespace), &request.risks)?;
    let text = format!("{document:#}\n");
    // Named after its content too: two wraps under one name started at once (a host starts
    // all its servers together; two hosts may both have a "filesystem") never read each
    // other's command line, and the same command line is the same file.
    let servers_file = folder.join(format!("{namespace}.{}.json", short_digest(&text)));
    write_private(&servers_file, &text)?;
    let mut settings = base.clone();
    settings.config = Some(servers_file.clone());
    // Keyed by the name: not the configured lock of other servers.
    settings.lock = Some(
        request
            .lock
            .clone()
            .unwrap_or_else(|| folder.join(format!("{namespace}.lock.json"))),
    );
    settings.servers = rated
        .map(|r| BTreeMap::from([(namespace.clone(), r)]))
        .unwrap_or_default();
    Ok(Prepared {
        name,
        namespace,
        settings,
        servers_file,
        unset_env,
    })
}

/// The first 12 hex digits of the SHA-256 of `text`.
fn short_digest(text: &str) -> String {
    use sha2_11::Digest;
    sha2_11::Sha256::digest(text.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `text` to `path` (mode 0600: a header may hold a token) through a temporary file
/// renamed over it, so a host starting two wraps at once never reads half a file.
fn write_private(path: &Path, text: &str) -> Result<(), WrapError> {
    use std::io::Write;
    let failed = |e: std::io::Error| WrapError::Write {
        path: path.display().to_string(),
        detail: e.to_string(),
    };
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).map_err(failed)?;
    }
    let temp = path.with_extension(format!("{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = options
        .open(&temp)
        .and_then(|mut out| {
            out.write_all(text.as_bytes())?;
            out.sync_all()
        })
        .and_then(|()| std::fs::rename(&temp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        failed(e)
    })
}

#[cfg(test)]
#[path = "wrap_tests.rs"]
mod tests;
