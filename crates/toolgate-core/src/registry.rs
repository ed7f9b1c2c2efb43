//! The registry: every declared tool, versioned, in a deterministic order, with a digest over
//! the canonical model views (a stable prompt-cache prefix), and per-principal filtering.
//!
//! Guarantees: names are unique among the current tools; listing order is by name, whatever
//! the registration order;
//! a principal sees only tools in its catalogue whose scopes it holds. A withheld name (an
//! imported tool in quarantine) is no tool at all: it is never listed or callable, and a call
//! to it is refused with the reason it is withheld.
//!
//! Two versions side by side: an earlier version of a tool may be registered beside its
//! current one when the earlier one is deprecated (`ToolBuilder::deprecated`). It is never
//! listed or shown to a model; a caller that pins it (`CallRequest::version`) reaches it while
//! its window is open ([`still_served`]), so a host written against it keeps working during
//! the migration. Two tools with one name and no deprecation, or the same version twice, are
//! refused.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::canonical::{canonical_json, sha256_hex};
use crate::principal::Principal;
use crate::schema;
use crate::spec::{Deprecation, InputOrigin, Milestone, ModelView, Risk, ToolSpec};
use crate::tool::Tool;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    #[error("tool `{0}` is registered twice")]
    Duplicate(String),
    #[error(
        "tool `{name}` is registered at versions {current} and {earlier}: the earlier one is served beside the current one only when it is deprecated (deprecated_since, remove_after)"
    )]
    EarlierNotDeprecated {
        name: String,
        current: u32,
        earlier: u32,
    },
}

#[derive(Debug, Clone)]
pub struct Registry {
    tools: BTreeMap<String, Tool>,
    /// Earlier, deprecated versions served beside the current ones, by (name, version).
    earlier: BTreeMap<(String, u32), Tool>,
    digest: String,
    /// Names that are not tools now, with the reason a call to one is told.
    withheld: BTreeMap<String, String>,
}

impl Registry {
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> Result<Self, RegistryError> {
        let mut map: BTreeMap<String, Tool> = BTreeMap::new();
        let mut earlier: BTreeMap<(String, u32), Tool> = BTreeMap::new();
        for tool in tools {
            let name = tool.spec.name.clone();
            let Some(held) = map.remove(&name) else {
                map.insert(name, tool);
                continue;
            };
            let (current, older) = if tool.spec.version > held.spec.version {
                (tool, held)
            } else {
                (held, tool)
            };
            if current.spec.version == older.spec.version
                || earlier.contains_key(&(name.clone(), older.spec.version))
            {
                return Err(RegistryError::Duplicate(name));
            }
            if older.spec.deprecation.is_none() {
                return Err(RegistryError::EarlierNotDeprecated {
                    name,
                    current: current.spec.version,
                    earlier: older.spec.version,
                });
            }
            earlier.insert((name.clone(), older.spec.version), older);
            map.insert(name, current);
        }
        let digest = catalogue_digest(
            map.values()
                .map(|t| &t.spec)
                .chain(earlier.values().map(|t| &t.spec)),
        );
        Ok(Registry {
            tools: map,
            earlier,
            digest,
            withheld: BTreeMap::new(),
        })
    }

    /// The tool a call reaches: the current version when `version` is `None` or names it, else
    /// the earlier version of that number (whether it is still served is the caller's check,
    /// [`still_served`], because it depends on the day).
    pub fn get_version(&self, name: &str, version: Option<u32>) -> Option<&Tool> {
        let current = self.tools.get(name)?;
        match version {
            None => Some(current),
            Some(v) if v == current.spec.version => Some(current),
            Some(v) => self.earlier.get(&(name.to_string(), v)),
        }
    }

    /// The versions of `name` served, newest first (empty: no such tool).
    pub fn versions(&self, name: &str) -> Vec<u32> {
        let mut versions: Vec<u32> = self
            .tools
            .get(name)
            .map(|t| t.spec.version)
            .into_iter()
            .collect();
        versions.extend(
            self.earlier
                .keys()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| *v)
                .rev(),
        );
        versions
    }

    /// The earlier versions served beside the current ones, by name then version.
    pub fn earlier_specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.earlier.values().map(|t| &t.spec)
    }

    /// Also knows these names (name → reason) as withheld: a call to one is refused with its
    /// reason. A name that is also a tool stays a tool.
    pub fn withholding(mut self, withheld: BTreeMap<String, String>) -> Self {
        self.withheld = withheld
            .into_iter()
            .filter(|(name, _)| !self.tools.contains_key(name))
            .collect();
        self
    }

    /// Why `name` is withheld, if it is.
    pub fn withheld(&self, name: &str) -> Option<&str> {
        self.withheld.get(name).map(String::as_str)
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }

    /// Every tool's spec, ordered by name.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.values().map(|t| &t.spec)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// Digest over every tool's name, version and canonical model view.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The tools `principal` may see and call, ordered by name.
    pub fn visible_to<'a>(
        &'a self,
        principal: &'a Principal,
    ) -> impl Iterator<Item = &'a ToolSpec> + 'a {
        self.specs()
            .filter(move |spec| principal.may_see(&spec.name, &spec.policy.scopes))
    }

    pub fn model_views_for(&self, principal: &Principal) -> Vec<ModelView> {
        self.visible_to(principal)
            .map(ToolSpec::model_view)
            .collect()
    }
}

/// Whether an earlier version still answers on `today` (`YYYY-MM-DD`), beside `current`, the
/// version its name serves now: until its `remove_after` day, or while the current version is
/// not past its `remove_after` version.
pub fn still_served(deprecation: &Deprecation, current: u32, today: &str) -> bool {
    match &deprecation.remove_after {
        Milestone::Date(day) => today <= day.as_str(),
        Milestone::Version(last) => current <= *last,
    }
}

/// SHA-256 over the canonical JSON of (name, version, model view) for each tool, in name order.
pub fn catalogue_digest<'a>(specs: impl Iterator<Item = &'a ToolSpec>) -> String {
    let mut entries: Vec<Value> = specs
        .map(|s| json!({"name": s.name, "version": s.version, "model_view": s.model_view()}))
        .collect();
    entries.sort_by(|a, b| {
        (a["name"].as_str(), a["version"].as_u64())
            .cmp(&(b["name"].as_str(), b["version"].as_u64()))
    });
    sha256_hex(canonical_json(&Value::Array(entries)).as_bytes())
}

/// Contract problems in a toolset: each is a sentence naming the tool. Empty means the
/// toolset honours the contract.
pub fn contract_problems<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> Vec<String> {
    let specs: Vec<&ToolSpec> = specs.into_iter().collect();
    let mut problems = Vec::new();
    for spec in &specs {
        let name = &spec.name;
        if spec.input_origin == InputOrigin::DeclaredOpen || !schema::is_closed(&spec.input_schema)
        {
            problems.push(format!("{name}: input schema is not closed"));
        }
        let compiled = match spec.input_origin {
            InputOrigin::Derived => schema::CompiledSchema::derived(&spec.input_schema),
            InputOrigin::Declared | InputOrigin::DeclaredOpen => {
                schema::CompiledSchema::declared(&spec.input_schema, true)
            }
        };
        match compiled {
            Ok(compiled) => {
                for example in &spec.examples {
                    if !compiled.validate(&example.arguments).is_empty() {
                        problems.push(format!(
                            "{name}: example `{}` does not validate",
                            example.label
                        ));
                    }
                }
            }
            Err(e) => problems.push(format!("{name}: input schema is refused: {e}")),
        }
        if spec.policy.reason.trim().is_empty() {
            problems.push(format!("{name}: no risk reason"));
        }
        let reason_sentences = spec
            .policy
            .reason
            .trim()
            .trim_end_matches('.')
            .matches(". ")
            .count();
        if reason_sentences > 0 {
            problems.push(format!("{name}: risk reason must be one sentence"));
        }
        let siblings: Vec<&str> = specs
            .iter()
            .filter(|s| s.name != spec.name)
            .map(|s| s.name.as_str())
            .collect();
        if !siblings.is_empty() {
            let names_sibling = spec
                .description
                .avoid_when
                .as_deref()
                .is_some_and(|text| siblings.iter().any(|s| text.contains(s)));
            if !names_sibling {
                problems.push(format!(
                    "{name}: description must say when not to use it, naming the sibling tool to use instead"
                ));
            }
        }
        if spec.policy.risk == Risk::High && spec.writes() && !spec.executor.receipts_visible {
            problems.push(format!(
                "{name}: a high-risk write must declare its receipt log, or every retry of a call that already happened asks a human again"
            ));
        }
        if spec.examples.is_empty()
            && !spec.input_schema["properties"]
                .as_object()
                .is_none_or(|p| p.is_empty())
        {
            problems.push(format!("{name}: no example call"));
        }
    }
    problems
}
