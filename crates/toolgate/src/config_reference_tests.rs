//! `toolgate.example.toml` is the configuration reference (the book's configuration page
//! includes it), so it is tested against the parser in both directions: every key it shows,
//! commented out or not, is one the parser accepts, and every key the parser accepts is in it.
//!
//! The parser's keys are not kept in a list here, which could drift: they are asked of the
//! parser itself. Each section refuses unknown keys (`deny_unknown_fields`), and serde's
//! refusal names the keys the section does accept, so placing a probe key in a section and
//! reading the refusal walks the whole tree of sections. The one thing serde cannot name is a
//! section that takes another struct's keys as its own (`#[serde(flatten)]`): those are listed
//! in [`FLATTENED`], and each listed key is still checked against the parser.

use super::*;

const REFERENCE: &str = include_str!("../../../toolgate.example.toml");

/// A key no section has, placed where a section is expected so that its refusal lists the
/// section's keys.
const PROBE: &str = "__probe__";

/// Stands for a name the user chooses (a server's namespace, a tool's name, a scope).
const ANY_NAME: &str = "*";

/// Sections serde cannot list (they flatten another struct's keys into their own), with their
/// keys: `[mcp.servers.NAME]` takes a `Rating`'s `risk` and `effect` beside `tools`.
const FLATTENED: &[(&str, &[&str])] = &[("mcp.servers.*", &["risk", "effect", "tools"])];

/// One step from the top of the file to a value: a key (a section's key, or a name the user
/// chooses), or an element of an array of tables (`[[egress.allow]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Element,
}

/// How a key path is written in the reference: keys joined by dots (an element adds nothing:
/// `[[egress.allow]]` then `host` is `egress.allow.host`).
fn dotted(path: &[Step]) -> String {
    path.iter()
        .filter_map(|step| match step {
            Step::Key(key) => Some(key.as_str()),
            Step::Element => None,
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// `value` placed at `path` in an otherwise empty file.
fn placed(path: &[Step], value: toml::Value) -> toml::Value {
    path.iter().rev().fold(value, |inner, step| match step {
        Step::Key(key) => toml::Value::Table(toml::Table::from_iter([(key.clone(), inner)])),
        Step::Element => toml::Value::Array(vec![inner]),
    })
}

/// What the parser answers to a file holding only `value` at `path`.
fn parse(path: &[Step], value: toml::Value) -> Result<(), String> {
    placed(path, value)
        .try_into::<Config>()
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A section holding only the probe key.
fn probe_section() -> toml::Value {
    toml::Value::Table(toml::Table::from_iter([(
        PROBE.to_string(),
        toml::Value::Integer(0),
    )]))
}

/// What the parser says of a section at `path` holding only the probe key.
enum Answer {
    /// It refused the probe and named the keys it accepts.
    Keys(Vec<String>),
    /// It refused the probe without naming its keys (a flattened section).
    UnlistedKeys,
    /// It took the probe: this section would silently drop a misspelled key.
    TookUnknownKey,
    /// No section here (a value of another type, or nothing the probe reaches).
    NotASection,
}

fn probe(path: &[Step]) -> Answer {
    let message = match parse(path, probe_section()) {
        Err(message) if !message.contains("missing field") => message,
        // Taken (or got past the probe to the section's required keys): either a table whose
        // names the user picks, whose values then have a type (`[serve.auth.scopes]`), or a
        // section that drops unknown keys.
        _ => {
            let named = [path, &[Step::Key(PROBE.into())]].concat();
            return match parse(&named, probe_section()) {
                Err(message) if message.contains("invalid type") => Answer::NotASection,
                _ => Answer::TookUnknownKey,
            };
        }
    };
    let refusal = format!("unknown field `{PROBE}`");
    let Some(at) = message.find(&refusal) else {
        return Answer::NotASection;
    };
    let named = &message[at + refusal.len()..];
    let named = named.lines().next().unwrap_or_default();
    // serde names them as "expected `a`", "expected `a` or `b`" or "expected one of `a`, `b`, `c`".
    let list = named
        .strip_prefix(", expected one of ")
        .or_else(|| named.strip_prefix(", expected "));
    if let Some(list) = list {
        let keys = list.split(", ").flat_map(|k| k.split(" or "));
        Answer::Keys(keys.map(|k| k.trim_matches('`').into()).collect())
    } else if named.starts_with(", there are no fields") {
        Answer::Keys(Vec::new())
    } else {
        Answer::UnlistedKeys
    }
}

/// Every key path the parser accepts under the section at `path`, walking its sub-sections,
/// named sections (`[mcp.servers.NAME]`) and arrays of tables; panics on a section that takes
/// unknown keys.
fn accepted_keys(path: &[Step]) -> Vec<String> {
    let keys = match probe(path) {
        Answer::Keys(keys) => keys,
        Answer::UnlistedKeys => {
            let shown = dotted(path);
            let (_, keys) = FLATTENED
                .iter()
                .find(|(section, _)| *section == shown)
                .unwrap_or_else(|| {
                    panic!("[{shown}] refuses unknown keys without naming its own: list them in FLATTENED")
                });
            for key in *keys {
                let at = [path, &[Step::Key((*key).into())]].concat();
                // Taken, or refused for its type rather than as unknown: the section has it.
                let answer = parse(&at, toml::Value::Integer(0));
                assert!(
                    !answer.is_err_and(|m| m.contains("unknown field")),
                    "FLATTENED lists {key} in [{shown}], which the parser refuses"
                );
            }
            keys.iter().map(|k| (*k).to_string()).collect()
        }
        Answer::TookUnknownKey => panic!(
            "[{}] takes an unknown key: a misspelled setting would be dropped silently (add #[serde(deny_unknown_fields)])",
            dotted(path)
        ),
        Answer::NotASection => panic!("nothing the parser reads at {}", dotted(path)),
    };
    let mut found = Vec::new();
    for key in keys {
        let at = [path, &[Step::Key(key)]].concat();
        let named = [at.as_slice(), &[Step::Key(ANY_NAME.into())]].concat();
        let element = [at.as_slice(), &[Step::Element]].concat();
        if is_section(&at) {
            found.extend(accepted_keys(&at));
        } else if is_section(&named) {
            found.extend(accepted_keys(&named));
        } else if is_section(&element) {
            found.extend(accepted_keys(&element));
        } else {
            found.push(dotted(&at));
        }
    }
    found
}

fn is_section(path: &[Step]) -> bool {
    !matches!(probe(path), Answer::NotASection)
}

/// The reference with its commented-out settings switched on: a comment line that is itself a
/// TOML key or table header (`# port = 2525`, `# [smtp]`) loses its `#`; prose stays a comment.
fn with_every_setting_on(reference: &str) -> String {
    reference
        .lines()
        .map(|line| {
            let Some(rest) = line.trim_start().strip_prefix('#') else {
                return line;
            };
            let setting = rest.strip_prefix(' ').unwrap_or(rest);
            let looks_like_one = setting.starts_with('[') || setting.contains('=');
            if looks_like_one && setting.parse::<toml::Table>().is_ok() {
                setting
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every key path in `table`, sections included (`serve.auth`, `serve.auth.issuer`).
fn written_keys(table: &toml::Table, prefix: &str, into: &mut Vec<String>) {
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(section) => written_keys(section, &path, into),
            toml::Value::Array(items) => {
                for item in items {
                    if let toml::Value::Table(section) = item {
                        written_keys(section, &path, into);
                    }
                }
            }
            _ => {}
        }
        into.push(path);
    }
}

/// `accepted` (which may hold `*` for a name the user chooses) is `written`.
fn same_path(accepted: &str, written: &str) -> bool {
    let (accepted, written): (Vec<_>, Vec<_>) =
        (accepted.split('.').collect(), written.split('.').collect());
    accepted.len() == written.len()
        && accepted
            .iter()
            .zip(&written)
            .all(|(a, w)| *a == ANY_NAME || a == w)
}

fn reference_loads(text: &str) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolgate.toml");
    std::fs::write(&path, text).unwrap();
    read(&path).map(|read| read.config)
}

#[test]
fn a_key_in_the_reference_the_parser_refuses_fails() {
    if let Err(e) = reference_loads(REFERENCE) {
        panic!("toolgate.example.toml as shipped: {e}");
    }
    let every_setting_on = with_every_setting_on(REFERENCE);
    assert!(
        every_setting_on.contains("\n[smtp]\n") && every_setting_on.contains("\n[sandbox]\n"),
        "the commented-out sections were switched on:\n{every_setting_on}"
    );
    if let Err(e) = reference_loads(&every_setting_on) {
        panic!("toolgate.example.toml with its commented-out settings switched on: {e}");
    }
}

#[test]
fn a_config_key_missing_from_the_reference_fails() {
    let accepted = accepted_keys(&[]);
    // The walk reaches every kind of section, so an empty or shallow walk cannot pass.
    for deep in [
        "mode",
        "egress.allow.allow_private",
        "serve.auth.scopes",
        "mcp.servers.*.risk",
        "mcp.servers.*.tools.*.effect",
        "sandbox.cgroup",
    ] {
        assert!(accepted.iter().any(|k| k == deep), "{deep} in {accepted:?}");
    }
    let reference: toml::Table = with_every_setting_on(REFERENCE).parse().unwrap();
    let mut written = Vec::new();
    written_keys(&reference, "", &mut written);
    let missing: Vec<&String> = accepted
        .iter()
        .filter(|key| !written.iter().any(|w| same_path(key, w)))
        .collect();
    assert!(
        missing.is_empty(),
        "keys the parser accepts that toolgate.example.toml does not show (add each, commented out if it has no default worth setting, with a one-line comment): {missing:?}"
    );
}
