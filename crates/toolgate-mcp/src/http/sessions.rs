//! Who owns each 2025-11-25 session (`Mcp-Session-Id`): the principal (tenant and id) whose
//! `initialize` opened it.
//!
//! Guarantees: a session is served only to the principal that opened it; a session with no
//! known owner is served to nobody (fail closed, [`session_access`]).

use std::collections::HashMap;

use crate::auth::Refusal;

/// The header naming a 2025-11-25 session.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";

/// A principal as a session's owner: its tenant (the token's issuer) and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owner {
    tenant: String,
    id: String,
}

impl Owner {
    pub(super) fn of(principal: &toolgate_core::Principal) -> Self {
        Owner {
            tenant: principal.tenant.clone(),
            id: principal.id.clone(),
        }
    }

    /// An owner as a shared store recorded it.
    pub(super) fn named(tenant: String, id: String) -> Self {
        Owner { tenant, id }
    }

    pub(super) fn tenant(&self) -> &str {
        &self.tenant
    }

    pub(super) fn id(&self) -> &str {
        &self.id
    }
}

/// Session id to the principal that opened it.
#[derive(Default)]
pub(super) struct Owners {
    by_session: std::sync::Mutex<HashMap<String, Owner>>,
}

impl Owners {
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Owner>) -> T) -> T {
        // Every change is one insert or remove: a poisoned map is still consistent.
        match self.by_session.lock() {
            Ok(mut map) => f(&mut map),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    pub(super) fn owner(&self, session: &str) -> Option<Owner> {
        self.with(|map| map.get(session).cloned())
    }
}

/// Whether `caller` may use a session bound to `bound`: only the principal that opened it,
/// and never a session with no known owner (fail closed).
pub(super) fn session_access(bound: Option<&Owner>, caller: &Owner) -> Result<(), Refusal> {
    match bound {
        Some(owner) if owner == caller => Ok(()),
        Some(_) | None => Err(Refusal::ForeignSession),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_served_only_to_the_principal_that_opened_it() {
        let owner = |tenant: &str, id: &str| Owner {
            tenant: tenant.into(),
            id: id.into(),
        };
        let alice = owner("https://as.example", "alice");
        let cases = [
            ("its owner", Some(alice.clone()), alice.clone(), true),
            (
                "another principal",
                Some(alice.clone()),
                owner("https://as.example", "bob"),
                false,
            ),
            (
                "the same id from another tenant",
                Some(alice.clone()),
                owner("https://other.example", "alice"),
                false,
            ),
            (
                "a session nobody was seen opening",
                None,
                alice.clone(),
                false,
            ),
        ];
        for (what, bound, caller, allowed) in cases {
            assert_eq!(
                session_access(bound.as_ref(), &caller).is_ok(),
                allowed,
                "{what}"
            );
        }
    }
}
