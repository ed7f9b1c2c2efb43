//! The registry: every declared tool, versioned, in a deterministic order, with a digest over
//! the canonical model views (a stable prompt-cache prefix), and per-principal filtering.
//!
//! Guarantees: names are unique; listing order is by name, whatever the registration order;
//! a principal sees only tools in its catalogue whose scopes it holds. A withheld name (an
//! imported tool in quarantine) is no tool at all: it is never listed or callable, and a call
//! to it is refused with the reason it is withheld.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::canonical::{canonical_json, sha256_hex};
use crate::principal::Principal;
use crate::schema;
use crate::spec::{InputOrigin, ModelView, Risk, ToolSpec};
use crate::tool::Tool;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    #[error("tool `{0}` is registered twice")]
    Duplicate(String),
}

#[derive(Debug, Clone)]
pub struct Registry {
    tools: BTreeMap<String, Tool>,
    digest: String,
    /// Names that are not tools now, with the reason a call to one is told.
    withheld: BTreeMap<String, String>,
}

impl Registry {
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> Result<Self, RegistryError> {
        let mut map = BTreeMap::new();
        for tool in tools {
            let name = tool.spec.name.clone();
            if map.insert(name.clone(), tool).is_some() {
                return Err(RegistryError::Duplicate(name));
            }
        }
        let digest = catalogue_digest(map.values().map(|t| &t.spec));
        Ok(Registry {
            tools: map,
            digest,
            withheld: BTreeMap::new(),
        })
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

/// SHA-256 over the canonical JSON of (name, version, model view) for each tool, in name order.
pub fn catalogue_digest<'a>(specs: impl Iterator<Item = &'a ToolSpec>) -> String {
    let mut entries: Vec<Value> = specs
        .map(|s| json!({"name": s.name, "version": s.version, "model_view": s.model_view()}))
        .collect();
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
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
