//! Who is calling: identity, tenant, scopes, and the catalogue of tools they were given.
//!
//! Cheap to clone: every call carries its principal, and a handler's nested calls carry it
//! again, so the sets are shared rather than copied.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// Empty for an unauthenticated caller, which can call nothing.
    pub id: String,
    pub tenant: String,
    pub scopes: Arc<BTreeSet<String>>,
    /// The tool names this caller was handed (its session's toolset). `None` means every tool
    /// its scopes allow. Naming a tool outside this set is `forbidden`: discovery is not
    /// permission.
    pub catalogue: Option<Arc<BTreeSet<String>>>,
}

impl Principal {
    /// A local user holding the given scopes and no catalogue restriction.
    pub fn local(id: &str, scopes: &[&str]) -> Self {
        Principal {
            id: id.into(),
            tenant: "local".into(),
            scopes: Arc::new(scopes.iter().map(|s| s.to_string()).collect()),
            catalogue: None,
        }
    }

    pub fn anonymous() -> Self {
        Principal {
            id: String::new(),
            tenant: String::new(),
            scopes: Arc::default(),
            catalogue: Some(Arc::default()),
        }
    }

    pub fn with_catalogue<'a>(mut self, tools: impl IntoIterator<Item = &'a str>) -> Self {
        self.catalogue = Some(Arc::new(tools.into_iter().map(str::to_string).collect()));
        self
    }

    pub fn is_authenticated(&self) -> bool {
        !self.id.is_empty()
    }

    pub fn in_catalogue(&self, tool: &str) -> bool {
        self.catalogue.as_ref().is_none_or(|c| c.contains(tool))
    }

    /// Whether this principal may see and call a tool named `tool` that requires `scopes`:
    /// authenticated, the tool in its catalogue, every scope held. The registry's listing and
    /// tool search both ask this one question, so what a caller can find is what it can call.
    pub fn may_see(&self, tool: &str, scopes: &[String]) -> bool {
        self.is_authenticated() && self.in_catalogue(tool) && self.missing_scopes(scopes).is_empty()
    }

    /// The scopes `required` asks for that this principal lacks.
    pub fn missing_scopes<'a>(&self, required: &'a [String]) -> Vec<&'a str> {
        required
            .iter()
            .filter(|s| !self.scopes.contains(*s))
            .map(String::as_str)
            .collect()
    }
}
