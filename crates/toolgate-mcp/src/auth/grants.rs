//! Which OAuth scopes grant which tools (`[serve.auth.scopes]`): a scope names single tools or a
//! whole toolset. Pure; built once when the server starts.
//!
//! Refuses, at start: a scope name that is not an RFC 6749 scope token (printable ASCII without
//! space, `"` or backslash: a token's `scope` claim is split on spaces, so such a name could
//! never be granted), a scope that grants nothing, and an entry that is neither a tool of the
//! served toolset nor its name (a typo would otherwise grant less, or more, than meant).

use std::collections::{BTreeMap, BTreeSet};

/// Why the scope table is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error(
        "scope {scope:?} grants {entry:?}, which is neither a tool of the served toolset nor its name ({toolset})"
    )]
    UnknownEntry {
        scope: String,
        entry: String,
        toolset: String,
    },
    #[error("scope {0:?} grants no tool")]
    Empty(String),
    #[error(
        "scope name {0:?} is not an RFC 6749 scope token: use printable ASCII without spaces, quotes or backslashes"
    )]
    BadName(String),
    #[error("no scope grants any tool: [serve.auth.scopes] must name at least one")]
    NoScopes,
}

/// Whether `name` is a scope token (RFC 6749 section 3.3: `%x21 / %x23-5B / %x5D-7E`).
fn is_scope_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

/// Scope names and the tools each grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    by_scope: BTreeMap<String, BTreeSet<String>>,
}

impl Grants {
    /// `table` (scope to tool names or `toolset`'s name) over the tools `tools` of `toolset`.
    pub fn new(
        table: &BTreeMap<String, Vec<String>>,
        toolset: &str,
        tools: &[String],
    ) -> Result<Grants, GrantError> {
        if table.is_empty() {
            return Err(GrantError::NoScopes);
        }
        let mut by_scope = BTreeMap::new();
        for (scope, entries) in table {
            if !is_scope_token(scope) {
                return Err(GrantError::BadName(scope.clone()));
            }
            let mut granted = BTreeSet::new();
            for entry in entries {
                if entry == toolset {
                    granted.extend(tools.iter().cloned());
                } else if tools.contains(entry) {
                    granted.insert(entry.clone());
                } else {
                    return Err(GrantError::UnknownEntry {
                        scope: scope.clone(),
                        entry: entry.clone(),
                        toolset: toolset.into(),
                    });
                }
            }
            if granted.is_empty() {
                return Err(GrantError::Empty(scope.clone()));
            }
            by_scope.insert(scope.clone(), granted);
        }
        Ok(Grants { by_scope })
    }

    /// Every scope, in order (for `scopes_supported` and challenges).
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.by_scope.keys().map(String::as_str)
    }

    /// The tools `scopes` grant together.
    pub fn tools_for(&self, scopes: &BTreeSet<String>) -> BTreeSet<String> {
        scopes
            .iter()
            .filter_map(|s| self.by_scope.get(s))
            .flatten()
            .cloned()
            .collect()
    }

    /// The scopes any of which grants `tool` (empty for a tool no scope grants).
    pub fn scopes_granting(&self, tool: &str) -> Vec<&str> {
        self.by_scope
            .iter()
            .filter(|(_, tools)| tools.contains(tool))
            .map(|(scope, _)| scope.as_str())
            .collect()
    }

    /// Whether any scope grants `tool`.
    pub fn knows(&self, tool: &str) -> bool {
        self.by_scope.values().any(|tools| tools.contains(tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<String> {
        ["notes_get", "notes_search", "notes_delete"]
            .map(String::from)
            .to_vec()
    }

    fn table(rows: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        rows.iter()
            .map(|(s, e)| (s.to_string(), e.iter().map(|x| x.to_string()).collect()))
            .collect()
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_scope_grants_its_tools_or_its_whole_toolset_and_nothing_else() {
        let grants = Grants::new(
            &table(&[
                ("notes:read", &["notes_get", "notes_search"]),
                ("notes:all", &["notes"]),
            ]),
            "notes",
            &tools(),
        )
        .unwrap();
        assert_eq!(
            grants.tools_for(&set(&["notes:read"])),
            set(&["notes_get", "notes_search"])
        );
        assert_eq!(
            grants.tools_for(&set(&["notes:all"])),
            set(&tools().iter().map(String::as_str).collect::<Vec<_>>())
        );
        assert!(grants.tools_for(&set(&["other", "openid"])).is_empty());
        assert_eq!(grants.scopes_granting("notes_delete"), ["notes:all"]);
        assert_eq!(
            grants.scopes_granting("notes_get"),
            ["notes:all", "notes:read"]
        );
    }

    #[test]
    fn a_scope_table_with_a_typo_or_nothing_granted_is_refused() {
        let cases: [(&[(&str, &[&str])], GrantError); 6] = [
            (
                &[("notes read", &["notes_get"])],
                GrantError::BadName("notes read".into()),
            ),
            (
                &[("notes\u{3000}read", &["notes_get"])],
                GrantError::BadName("notes\u{3000}read".into()),
            ),
            (&[("", &["notes_get"])], GrantError::BadName(String::new())),
            (
                &[("notes:read", &["notes_gett"])],
                GrantError::UnknownEntry {
                    scope: "notes:read".into(),
                    entry: "notes_gett".into(),
                    toolset: "notes".into(),
                },
            ),
            (
                &[("notes:read", &[])],
                GrantError::Empty("notes:read".into()),
            ),
            (&[], GrantError::NoScopes),
        ];
        for (rows, expected) in cases {
            assert_eq!(
                Grants::new(&table(rows), "notes", &tools()).unwrap_err(),
                expected
            );
        }
    }
}
