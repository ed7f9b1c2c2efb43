//! Each user's own session with a server that asks for OAuth, for a gateway that calls such a
//! server with each user's own token (`[mcp.servers.NAME] credentials = "per_user"`, the
//! default behind `[serve.auth]`).
//!
//! Guarantees:
//! - a user's session is opened with that user's entries in the vault and nothing else: never
//!   the gateway's own login, never another user's token, never the token the user presented to
//!   us (nothing here sees it);
//! - a user without a token gets [`UpstreamError::UserNotConnected`], which says how to
//!   connect, and nothing is sent to the server's tools;
//! - one session per user and server, opened on the user's first call and reused; two first
//!   calls of one user open one session; a lost session is forgotten and reopened on the next
//!   call; at most [`MAX_SESSIONS`] are kept (the least recently opened is closed first).
//!
//! Refuses: an unauthenticated caller (it has no entries).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use toolgate_core::Principal;

use super::config::ServerEntry;
use super::credentials::TokenHolder;
use super::upstream::{ConnectOptions, Upstream, UpstreamError};
use super::vault::TokenVault;

/// Whose token a call to a server that asks for OAuth carries (`[mcp.servers.NAME]
/// credentials`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialMode {
    /// Each calling user's own, from the vault (`toolgate mcp login NAME --as USER`).
    PerUser,
    /// The gateway's own login (`toolgate mcp login NAME`), for every caller: right for one
    /// person's toolgate, a confused deputy in front of many users unless the server's rights
    /// are meant to be shared.
    Gateway,
}

/// How calls to one server are routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// The gateway's session for every caller.
    Shared,
    /// Each caller's own session.
    PerUser,
}

/// Why a server's tools cannot be offered under its credential mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteRefusal {
    #[error(
        "it is called with each user's own token, and no token vault is configured: set `[mcp.vault] keys_file` (and `path`, or use `--store postgres://...`)"
    )]
    NoVault,
}

/// How calls to a server are routed: `mode` as configured, `per_user_by_default` when the front
/// end serves many users (`[serve.auth]`), `with_token` when the server asked the gateway's own
/// connection for authorization, `vault` when a token vault is configured.
pub fn route_kind(
    mode: Option<CredentialMode>,
    per_user_by_default: bool,
    with_token: bool,
    vault: bool,
) -> Result<RouteKind, RouteRefusal> {
    if !with_token {
        // The server asks nobody for a token: there is no one's rights to act with.
        return Ok(RouteKind::Shared);
    }
    let per_user = match mode {
        Some(CredentialMode::PerUser) => true,
        Some(CredentialMode::Gateway) => false,
        None => per_user_by_default,
    };
    match (per_user, vault) {
        (false, _) => Ok(RouteKind::Shared),
        (true, true) => Ok(RouteKind::PerUser),
        (true, false) => Err(RouteRefusal::NoVault),
    }
}

/// Most user sessions kept open per server.
pub const MAX_SESSIONS: usize = 64;

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Upstream>>>>;

#[derive(Default)]
struct Open {
    slots: BTreeMap<String, Slot>,
    /// Holders in the order their slots were made, for eviction.
    order: VecDeque<String>,
}

/// The sessions of every user with one server.
pub struct UserSessions {
    entry: ServerEntry,
    options: ConnectOptions,
    vault: Arc<TokenVault>,
    open: Mutex<Open>,
}

impl std::fmt::Debug for UserSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSessions")
            .field("server", &self.entry.given_name)
            .finish_non_exhaustive()
    }
}

impl UserSessions {
    /// Sessions with `entry`'s server, opened as `options` say, with tokens from `vault`.
    pub fn new(entry: ServerEntry, options: ConnectOptions, vault: Arc<TokenVault>) -> Self {
        UserSessions {
            entry,
            options,
            vault,
            open: Mutex::new(Open::default()),
        }
    }

    fn slot(&self, holder: &str) -> Result<Slot, UpstreamError> {
        let mut open = self
            .open
            .lock()
            .map_err(|_| UpstreamError::Gone("the user sessions are unusable".into()))?;
        if let Some(slot) = open.slots.get(holder) {
            return Ok(Arc::clone(slot));
        }
        while open.slots.len() >= MAX_SESSIONS {
            let Some(oldest) = open.order.pop_front() else {
                break;
            };
            open.slots.remove(&oldest);
        }
        let slot = Slot::default();
        open.slots.insert(holder.to_string(), Arc::clone(&slot));
        open.order.push_back(holder.to_string());
        Ok(slot)
    }

    /// `principal`'s session, opened with their own token when they have none yet.
    pub async fn session_for(&self, principal: &Principal) -> Result<Arc<Upstream>, UpstreamError> {
        if !principal.is_authenticated() {
            return Err(UpstreamError::UserNotConnected {
                server: self.entry.given_name.clone(),
                user: "(an unauthenticated caller)".into(),
            });
        }
        let key = toolgate_core::approval::holder(principal);
        let slot = self.slot(&key)?;
        // Held while connecting: a user's second first call waits for the first one's session.
        let mut session = slot.lock().await;
        if let Some(open) = session.as_ref() {
            return Ok(Arc::clone(open));
        }
        let mut options = self.options.clone();
        options.tokens = Some(TokenHolder::user(&self.vault, principal));
        match Upstream::connect(&self.entry, &options).await {
            Ok(opened) => {
                let opened = Arc::new(opened);
                *session = Some(Arc::clone(&opened));
                Ok(opened)
            }
            Err(error) => {
                drop(session);
                self.forget_holder(&key);
                Err(error)
            }
        }
    }

    /// Forgets `principal`'s session (it was lost): their next call opens a new one.
    pub fn forget(&self, principal: &Principal) {
        self.forget_holder(&toolgate_core::approval::holder(principal));
    }

    fn forget_holder(&self, holder: &str) {
        if let Ok(mut open) = self.open.lock() {
            open.slots.remove(holder);
            open.order.retain(|h| h != holder);
        }
    }

    /// How many users have a session now.
    pub fn open_sessions(&self) -> usize {
        self.open.lock().map_or(0, |open| open.slots.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_never_calls_with_the_gateways_token_where_users_act_for_themselves() {
        use CredentialMode::*;
        let cases = [
            // (mode, many users, server asked for a token, vault) -> route
            (None, true, true, true, Ok(RouteKind::PerUser)),
            (None, true, true, false, Err(RouteRefusal::NoVault)),
            (Some(PerUser), false, true, true, Ok(RouteKind::PerUser)),
            (
                Some(PerUser),
                false,
                true,
                false,
                Err(RouteRefusal::NoVault),
            ),
            // Only when stated: the gateway's own login for every caller.
            (Some(Gateway), true, true, true, Ok(RouteKind::Shared)),
            (None, false, true, false, Ok(RouteKind::Shared)),
            // A server that asks for no token has no one's rights to borrow.
            (None, true, false, false, Ok(RouteKind::Shared)),
            (Some(PerUser), true, false, true, Ok(RouteKind::Shared)),
        ];
        for (mode, many, with_token, vault, want) in cases {
            assert_eq!(
                route_kind(mode, many, with_token, vault),
                want,
                "{mode:?} {many} {with_token} {vault}"
            );
        }
    }

    #[test]
    fn credential_modes_are_spelled_as_in_the_configuration() {
        #[derive(serde::Deserialize)]
        struct Entry {
            credentials: CredentialMode,
        }
        let parse = |text: &str| toml::from_str::<Entry>(text).map(|e| e.credentials);
        assert_eq!(
            parse("credentials = \"per_user\"").unwrap(),
            CredentialMode::PerUser
        );
        assert_eq!(
            parse("credentials = \"gateway\"").unwrap(),
            CredentialMode::Gateway
        );
        assert!(parse("credentials = \"passthrough\"").is_err());
    }
}
