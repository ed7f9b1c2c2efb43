//! The `mcpServers` JSON desktop hosts use (Claude Desktop, Claude Code, Cursor), read into the
//! servers toolgate may import tools from. Pure: the file is read by the caller; `${VAR}` is
//! expanded from the environment map the caller passes.
//!
//! Guarantees: a stdio entry's `env` is read as written (a value may say `${VAR}` or
//! `${VAR:-default}` to pass one more variable of ours on, by name); it is laid over the SDKs'
//! short default set when the server starts ([`crate::default_env`]), nothing else of ours; a server
//! name becomes the namespace of its tools (`server__tool`), so it is normalized (lower case,
//! `-` and `.` as `_`) and two names that normalize alike are refused; an entry that is neither
//! stdio (`command`) nor HTTP (`url`), or is both, or asks for the old SSE transport, is refused
//! with the reason; keys toolgate does not act on (`autoApprove`, `disabled`, ...) are reported,
//! never silently honored, since approvals are ours to enforce.
//!
//! An HTTP entry may carry Claude Code's `oauth` object: `clientId` (a client registered with
//! the authorization server beforehand, else toolgate registers one dynamically),
//! `callbackPort` (the port of the loopback redirect URI) and `scopes` (a space-separated
//! string or a list). Other keys in it (`authServerMetadataUrl`, `clientSecret`, ...) are
//! reported as ignored: the authorization server is always the one the server's own metadata
//! names, and toolgate keeps no client secrets in this file.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One server to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// The entry's `env`, expanded: laid over the default set when the child starts
        /// ([`crate::default_env::child_environment`]).
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    /// Streamable HTTP at `url`, with these extra request headers.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// The `oauth` object of an HTTP entry: how toolgate logs in to the server, when it asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthEntry {
    /// A pre-registered client id; `None`: dynamic client registration.
    pub client_id: Option<String>,
    /// The loopback redirect URI's port; `None`: any free one.
    pub callback_port: Option<u16>,
    /// Scopes to ask for; empty: what the server suggests.
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEntry {
    /// The name as the file gives it.
    pub given_name: String,
    pub transport: Transport,
    /// The `oauth` object of an HTTP entry (empty when absent).
    pub oauth: OAuthEntry,
    /// Keys of the entry toolgate does not act on.
    pub ignored_keys: Vec<String>,
}

/// Why an `mcpServers` document is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("the file is not JSON: {0}")]
    NotJson(String),
    #[error("the file has no \"mcpServers\" object")]
    NoServers,
    #[error("server {0:?}: its entry is not an object")]
    NotAnObject(String),
    #[error(
        "server name {0:?} cannot namespace tools: use letters, digits, '-', '_' or '.', starting with a letter"
    )]
    BadName(String),
    #[error("servers {0:?} and {1:?} both become {2:?} as a tool namespace: rename one")]
    NameClash(String, String, String),
    #[error("server {0:?}: give either \"command\" (stdio) or \"url\" (HTTP)")]
    NoTransport(String),
    #[error("server {0:?}: give \"command\" (stdio) or \"url\" (HTTP), not both")]
    TwoTransports(String),
    #[error(
        "server {0:?}: the SSE transport is not supported; use Streamable HTTP (type \"http\")"
    )]
    Sse(String),
    #[error("server {0:?}: transport type {1:?} is unknown (use \"stdio\" or \"http\")")]
    UnknownType(String, String),
    #[error("server {server:?}: {field} must be {expected}")]
    Field {
        server: String,
        field: String,
        expected: &'static str,
    },
    #[error(
        "server {server:?}: {field} names ${{{variable}}}, which is not set (and has no default)"
    )]
    Unset {
        server: String,
        field: String,
        variable: String,
    },
}

/// The servers of an `mcpServers` document, by their normalized names; `${VAR}` is expanded
/// from `environment`.
pub fn parse(
    text: &str,
    environment: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, ServerEntry>, ConfigError> {
    let document: Value =
        serde_json::from_str(text).map_err(|e| ConfigError::NotJson(e.to_string()))?;
    let servers = document
        .get("mcpServers")
        .and_then(Value::as_object)
        .ok_or(ConfigError::NoServers)?;
    let mut parsed: BTreeMap<String, ServerEntry> = BTreeMap::new();
    for (given, entry) in servers {
        let name = namespace(given)?;
        if let Some(other) = parsed.get(&name) {
            return Err(ConfigError::NameClash(
                other.given_name.clone(),
                given.clone(),
                name,
            ));
        }
        let entry = entry
            .as_object()
            .ok_or_else(|| ConfigError::NotAnObject(given.clone()))?;
        parsed.insert(name, server_entry(given, entry, environment)?);
    }
    Ok(parsed)
}

/// `given` as a tool namespace.
pub fn namespace(given: &str) -> Result<String, ConfigError> {
    let name: String = given
        .chars()
        .map(|c| match c {
            '-' | '.' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.contains("__")
        && name.len() <= 32;
    if valid {
        Ok(name)
    } else {
        Err(ConfigError::BadName(given.into()))
    }
}

const STDIO_KEYS: [&str; 5] = ["type", "command", "args", "env", "cwd"];
const HTTP_KEYS: [&str; 4] = ["type", "url", "headers", "oauth"];
const OAUTH_KEYS: [&str; 3] = ["clientId", "callbackPort", "scopes"];

fn server_entry(
    given: &str,
    entry: &Map<String, Value>,
    environment: &BTreeMap<String, String>,
) -> Result<ServerEntry, ConfigError> {
    let kind = entry.get("type").and_then(Value::as_str);
    let stdio = entry.contains_key("command");
    let http = entry.contains_key("url");
    match kind {
        None | Some("stdio" | "http" | "streamable-http" | "streamableHttp") => {}
        Some("sse") => return Err(ConfigError::Sse(given.into())),
        Some(other) => return Err(ConfigError::UnknownType(given.into(), other.into())),
    }
    let field = |name: &str, expected: &'static str| ConfigError::Field {
        server: given.into(),
        field: name.into(),
        expected,
    };
    let expand = |name: &str, value: &str| expand(given, name, value, environment);
    let mut oauth = OAuthEntry::default();
    let mut ignored_keys: Vec<String> = Vec::new();
    let (transport, known): (Transport, &[&str]) = match (stdio, http) {
        (true, true) => return Err(ConfigError::TwoTransports(given.into())),
        (false, false) => return Err(ConfigError::NoTransport(given.into())),
        (true, false) => {
            let command = entry["command"]
                .as_str()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| field("command", "a non-empty string"))?;
            let args =
                strings(entry.get("args")).ok_or_else(|| field("args", "a list of strings"))?;
            let env = string_map(entry.get("env"))
                .ok_or_else(|| field("env", "an object of strings"))?
                .into_iter()
                .map(|(k, v)| Ok((k.clone(), expand(&format!("env.{k}"), &v)?)))
                .collect::<Result<_, ConfigError>>()?;
            let cwd = match entry.get("cwd") {
                None | Some(Value::Null) => None,
                Some(Value::String(dir)) => Some(dir.clone()),
                Some(_) => return Err(field("cwd", "a string")),
            };
            (
                Transport::Stdio {
                    command: command.into(),
                    args,
                    env,
                    cwd,
                },
                &STDIO_KEYS,
            )
        }
        (false, true) => {
            let url = entry["url"]
                .as_str()
                .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                .ok_or_else(|| field("url", "an http:// or https:// URL"))?;
            let headers = string_map(entry.get("headers"))
                .ok_or_else(|| field("headers", "an object of strings"))?
                .into_iter()
                .map(|(k, v)| Ok((k.clone(), expand(&format!("headers.{k}"), &v)?)))
                .collect::<Result<_, ConfigError>>()?;
            if let Some(object) = entry.get("oauth") {
                let (parsed, ignored) = oauth_entry(given, object)?;
                oauth = parsed;
                ignored_keys.extend(ignored);
            }
            (
                Transport::Http {
                    url: expand("url", url)?,
                    headers,
                },
                &HTTP_KEYS,
            )
        }
    };
    ignored_keys.splice(
        0..0,
        entry
            .keys()
            .filter(|k| !known.contains(&k.as_str()))
            .cloned(),
    );
    Ok(ServerEntry {
        given_name: given.into(),
        transport,
        oauth,
        ignored_keys,
    })
}

/// The `oauth` object of `given`'s entry, and its keys toolgate does not act on (as
/// `oauth.KEY`).
fn oauth_entry(given: &str, value: &Value) -> Result<(OAuthEntry, Vec<String>), ConfigError> {
    let field = |name: &str, expected: &'static str| ConfigError::Field {
        server: given.into(),
        field: format!("oauth.{name}"),
        expected,
    };
    let object = value.as_object().ok_or_else(|| ConfigError::Field {
        server: given.into(),
        field: "oauth".into(),
        expected: "an object",
    })?;
    let client_id = match object.get("clientId") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if !id.trim().is_empty() => Some(id.clone()),
        Some(_) => return Err(field("clientId", "a non-empty string")),
    };
    let callback_port = match object.get("callbackPort") {
        None | Some(Value::Null) => None,
        Some(port) => Some(
            port.as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p != 0)
                .ok_or_else(|| field("callbackPort", "a port number (1-65535)"))?,
        ),
    };
    let scopes = match object.get("scopes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => text.split_whitespace().map(str::to_string).collect(),
        Some(list @ Value::Array(_)) => strings(Some(list))
            .filter(|s| s.iter().all(|s| !s.is_empty() && !s.contains(' ')))
            .ok_or_else(|| field("scopes", "a space-separated string or a list of scopes"))?,
        Some(_) => {
            return Err(field(
                "scopes",
                "a space-separated string or a list of scopes",
            ));
        }
    };
    let ignored = object
        .keys()
        .filter(|k| !OAUTH_KEYS.contains(&k.as_str()))
        .map(|k| format!("oauth.{k}"))
        .collect();
    Ok((
        OAuthEntry {
            client_id,
            callback_port,
            scopes,
        },
        ignored,
    ))
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

fn string_map(value: Option<&Value>) -> Option<BTreeMap<String, String>> {
    match value {
        None | Some(Value::Null) => Some(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect(),
        Some(_) => None,
    }
}

/// `value` with each `${VAR}` / `${VAR:-default}` replaced from `environment`.
fn expand(
    server: &str,
    field: &str,
    value: &str,
    environment: &BTreeMap<String, String>,
) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        out.push_str(&rest[..start]);
        let inner = &rest[start + 2..start + end];
        let (variable, default) = match inner.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (inner, None),
        };
        match (environment.get(variable), default) {
            (Some(set), _) => out.push_str(set),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(ConfigError::Unset {
                    server: server.into(),
                    field: field.into(),
                    variable: variable.into(),
                });
            }
        }
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env() -> BTreeMap<String, String> {
        [("GITHUB_TOKEN", "ghp_secret"), ("HOME", "/home/me")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn one(entry: Value) -> Result<ServerEntry, ConfigError> {
        let text = json!({"mcpServers": {"files": entry}}).to_string();
        parse(&text, &env()).map(|mut servers| servers.remove("files").unwrap())
    }

    #[test]
    fn a_stdio_entrys_env_is_expanded_and_nothing_else_is_added_to_it() {
        let entry = one(json!({
            "command": "node", "args": ["server.js", "--root", "${HOME}/notes"],
            "env": {"TOKEN": "${GITHUB_TOKEN}", "MODE": "${MODE:-safe}", "PLAIN": "x"},
            "autoApprove": ["write_file"], "disabled": false
        }))
        .unwrap();
        let Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } = entry.transport
        else {
            panic!("stdio expected");
        };
        assert_eq!(command, "node");
        // Arguments are passed as written: only env and headers carry variables.
        assert_eq!(args, ["server.js", "--root", "${HOME}/notes"]);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            env,
            [("MODE", "safe"), ("PLAIN", "x"), ("TOKEN", "ghp_secret")]
        );
        assert_eq!(cwd, None);
        assert_eq!(entry.ignored_keys, ["autoApprove", "disabled"]);
    }

    #[test]
    fn an_http_server_takes_its_url_and_headers() {
        let entry = one(json!({"type": "http", "url": "https://mcp.example/mcp",
                               "headers": {"X-Key": "k-${GITHUB_TOKEN}"}}))
        .unwrap();
        assert_eq!(
            entry.transport,
            Transport::Http {
                url: "https://mcp.example/mcp".into(),
                headers: [("X-Key".to_string(), "k-ghp_secret".to_string())].into(),
            }
        );
    }

    #[test]
    fn an_oauth_object_is_read_and_its_unknown_keys_are_reported_not_honored() {
        let entry = one(json!({"type": "http", "url": "https://mcp.example/mcp",
            "oauth": {"clientId": "my-app", "callbackPort": 8765, "scopes": "notes:read  notes:write",
                      "authServerMetadataUrl": "https://evil.example/.well-known/x"}}))
        .unwrap();
        assert_eq!(
            entry.oauth,
            OAuthEntry {
                client_id: Some("my-app".into()),
                callback_port: Some(8765),
                scopes: vec!["notes:read".into(), "notes:write".into()],
            }
        );
        assert_eq!(entry.ignored_keys, ["oauth.authServerMetadataUrl"]);
        let listed =
            one(json!({"url": "https://mcp.example/mcp", "oauth": {"scopes": ["a", "b"]}}))
                .unwrap();
        assert_eq!(listed.oauth.scopes, ["a", "b"]);
        assert_eq!(listed.oauth.client_id, None);
        let none = one(json!({"url": "https://mcp.example/mcp"})).unwrap();
        assert_eq!(none.oauth, OAuthEntry::default());
        // On a stdio entry it means nothing, and says so.
        let stdio = one(json!({"command": "a", "oauth": {"clientId": "x"}})).unwrap();
        assert_eq!(stdio.ignored_keys, ["oauth"]);
    }

    #[test]
    fn a_malformed_oauth_object_is_refused_not_guessed() {
        let field = |name: &str, expected: &'static str| ConfigError::Field {
            server: "files".into(),
            field: name.into(),
            expected,
        };
        let cases = [
            (json!("yes"), field("oauth", "an object")),
            (
                json!({"clientId": ""}),
                field("oauth.clientId", "a non-empty string"),
            ),
            (
                json!({"clientId": 7}),
                field("oauth.clientId", "a non-empty string"),
            ),
            (
                json!({"callbackPort": 0}),
                field("oauth.callbackPort", "a port number (1-65535)"),
            ),
            (
                json!({"callbackPort": 70000}),
                field("oauth.callbackPort", "a port number (1-65535)"),
            ),
            (
                json!({"callbackPort": "8080"}),
                field("oauth.callbackPort", "a port number (1-65535)"),
            ),
            (
                json!({"scopes": ["a b"]}),
                field(
                    "oauth.scopes",
                    "a space-separated string or a list of scopes",
                ),
            ),
            (
                json!({"scopes": 3}),
                field(
                    "oauth.scopes",
                    "a space-separated string or a list of scopes",
                ),
            ),
        ];
        for (oauth, want) in cases {
            let got = one(json!({"url": "https://mcp.example/mcp", "oauth": oauth.clone()}));
            assert_eq!(got.unwrap_err(), want, "{oauth}");
        }
    }

    #[test]
    fn entries_that_do_not_say_one_transport_plainly_are_refused() {
        let name = "files".to_string();
        let cases = [
            (json!({}), ConfigError::NoTransport(name.clone())),
            (
                json!({"command": "a", "url": "https://x"}),
                ConfigError::TwoTransports(name.clone()),
            ),
            (
                json!({"type": "sse", "url": "https://x/sse"}),
                ConfigError::Sse(name.clone()),
            ),
            (
                json!({"type": "ws", "url": "wss://x"}),
                ConfigError::UnknownType(name.clone(), "ws".into()),
            ),
            (
                json!({"url": "file:///etc/passwd"}),
                ConfigError::Field {
                    server: name.clone(),
                    field: "url".into(),
                    expected: "an http:// or https:// URL",
                },
            ),
            (
                json!({"command": "a", "args": "--all"}),
                ConfigError::Field {
                    server: name.clone(),
                    field: "args".into(),
                    expected: "a list of strings",
                },
            ),
            (
                json!({"command": "a", "env": {"K": "${NOPE}"}}),
                ConfigError::Unset {
                    server: name.clone(),
                    field: "env.K".into(),
                    variable: "NOPE".into(),
                },
            ),
        ];
        for (entry, expected) in cases {
            assert_eq!(one(entry.clone()).unwrap_err(), expected, "{entry}");
        }
    }

    #[test]
    fn server_names_become_tool_namespaces_without_collisions() {
        assert_eq!(namespace("server-everything").unwrap(), "server_everything");
        assert_eq!(namespace("My.Files").unwrap(), "my_files");
        for bad in ["", "9lives", "a b", "a__b", "über"] {
            assert_eq!(
                namespace(bad),
                Err(ConfigError::BadName(bad.into())),
                "{bad:?}"
            );
        }
        let text =
            json!({"mcpServers": {"my-files": {"command": "a"}, "my_files": {"command": "b"}}})
                .to_string();
        assert_eq!(
            parse(&text, &env()).unwrap_err(),
            ConfigError::NameClash("my-files".into(), "my_files".into(), "my_files".into())
        );
        assert_eq!(parse("{}", &env()).unwrap_err(), ConfigError::NoServers);
        assert!(matches!(parse("{", &env()), Err(ConfigError::NotJson(_))));
    }
}
