//! Server-side records of who is signed in, and of sign-ins under way.
//!
//! Guarantees: a session id and a CSRF token are 32 random bytes each (unguessable); a session
//! is found only before its expiry and never after sign-out; a sign-in under way (its `state`
//! and PKCE verifier) is taken at most once, only within [`LOGIN_TIME`], and only by the
//! browser that started it (the binder its login cookie carries: no login CSRF). Both books are
//! bounded ([`MAX_RECORDS`]): past the bound, expired records are dropped first, and a new
//! record is refused rather than letting memory grow.
//!
//! Records live in this process's memory: a restart signs everyone out, and behind a load
//! balancer a person's requests must reach the instance that signed them in.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use toolgate_core::Principal;

/// How long a person has to complete a sign-in at the authorization server.
pub const LOGIN_TIME: Duration = Duration::from_secs(600);

/// The most sessions (and, separately, sign-ins under way) kept at once.
pub const MAX_RECORDS: usize = 10_000;

/// 32 random bytes as hex; `None` when the system has no randomness.
pub fn random_id() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A signed-in person.
#[derive(Debug, Clone)]
pub struct Session {
    pub principal: Principal,
    /// Every state-changing form of this session carries it.
    pub csrf: String,
    expires: Instant,
}

/// A sign-in sent to the authorization server and not yet back.
#[derive(Debug)]
struct Login {
    verifier: String,
    /// The value of the login cookie set on the browser that started the sign-in.
    binder: String,
    expires: Instant,
}

/// Why a record could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("no randomness was available to make a session")]
    NoRandomness,
    #[error("too many people are signed in or signing in at once; try again later")]
    Full,
    #[error("the session records' lock was poisoned by an earlier failure")]
    Poisoned,
}

/// Sessions and sign-ins under way.
#[derive(Debug)]
pub struct SessionBook {
    lifetime: Duration,
    sessions: Mutex<HashMap<String, Session>>,
    logins: Mutex<HashMap<String, Login>>,
}

impl SessionBook {
    /// Sessions that last `lifetime` from sign-in.
    pub fn new(lifetime: Duration) -> Self {
        SessionBook {
            lifetime,
            sessions: Mutex::new(HashMap::new()),
            logins: Mutex::new(HashMap::new()),
        }
    }

    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// Keeps `verifier` for the sign-in whose `state` is given; returns the binder the
    /// browser's login cookie must carry back.
    pub fn start_login(&self, state: &str, verifier: &str) -> Result<String, SessionError> {
        let binder = random_id().ok_or(SessionError::NoRandomness)?;
        let mut logins = self.logins.lock().map_err(|_| SessionError::Poisoned)?;
        let now = Instant::now();
        if logins.len() >= MAX_RECORDS {
            logins.retain(|_, l| l.expires > now);
        }
        if logins.len() >= MAX_RECORDS {
            return Err(SessionError::Full);
        }
        logins.insert(
            state.into(),
            Login {
                verifier: verifier.into(),
                binder: binder.clone(),
                expires: now + LOGIN_TIME,
            },
        );
        Ok(binder)
    }

    /// The verifier of the sign-in `state`, taken (a second callback with it finds nothing),
    /// when the callback's browser carries the `binder` of the one that started it.
    pub fn finish_login(&self, state: &str, binder: Option<&str>) -> Option<String> {
        let mut logins = self.logins.lock().ok()?;
        let login = logins.remove(state)?;
        let same_browser = binder.is_some_and(|b| crate::rules::same_secret(b, &login.binder));
        (same_browser && login.expires > Instant::now()).then_some(login.verifier)
    }

    /// A new session for `principal`; returns its id.
    pub fn open(&self, principal: Principal) -> Result<String, SessionError> {
        let id = random_id().ok_or(SessionError::NoRandomness)?;
        let csrf = random_id().ok_or(SessionError::NoRandomness)?;
        let mut sessions = self.sessions.lock().map_err(|_| SessionError::Poisoned)?;
        let now = Instant::now();
        if sessions.len() >= MAX_RECORDS {
            sessions.retain(|_, s| s.expires > now);
        }
        if sessions.len() >= MAX_RECORDS {
            return Err(SessionError::Full);
        }
        sessions.insert(
            id.clone(),
            Session {
                principal,
                csrf,
                expires: now + self.lifetime,
            },
        );
        Ok(id)
    }

    /// The session `id`, if it exists and has not expired (an expired one is dropped).
    pub fn find(&self, id: &str) -> Option<Session> {
        let mut sessions = self.sessions.lock().ok()?;
        match sessions.get(id) {
            Some(s) if s.expires > Instant::now() => Some(s.clone()),
            Some(_) => {
                sessions.remove(id);
                None
            }
            None => None,
        }
    }

    /// Ends session `id` (sign-out).
    pub fn close(&self, id: &str) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_out_or_expired_session_is_not_found() {
        let book = SessionBook::new(Duration::from_secs(60));
        let id = book.open(Principal::local("alice", &[])).unwrap();
        let found = book.find(&id).unwrap();
        assert_eq!(found.principal.id, "alice");
        assert_eq!(found.csrf.len(), 64);
        assert_ne!(found.csrf, id);
        book.close(&id);
        assert!(book.find(&id).is_none(), "signed out");

        let short = SessionBook::new(Duration::ZERO);
        let id = short.open(Principal::local("alice", &[])).unwrap();
        assert!(short.find(&id).is_none(), "expired");
        assert!(book.find("not-a-session").is_none());
    }

    #[test]
    fn a_sign_in_callback_is_taken_once() {
        let book = SessionBook::new(Duration::from_secs(60));
        let binder = book.start_login("state-1", "verifier-1").unwrap();
        assert_eq!(
            book.finish_login("state-1", Some(&binder)).as_deref(),
            Some("verifier-1")
        );
        assert_eq!(
            book.finish_login("state-1", Some(&binder)),
            None,
            "replayed callback"
        );
        assert_eq!(
            book.finish_login("state-2", Some(&binder)),
            None,
            "a state never issued"
        );
    }

    #[test]
    fn a_sign_in_started_in_another_browser_is_refused() {
        let book = SessionBook::new(Duration::from_secs(60));
        // An attacker starts a sign-in and sends their own callback URL to the victim.
        let _attackers = book.start_login("state-a", "verifier-a").unwrap();
        let victims = book.start_login("state-v", "verifier-v").unwrap();
        assert_eq!(book.finish_login("state-a", Some(&victims)), None);
        book.start_login("state-b", "verifier-b").unwrap();
        assert_eq!(book.finish_login("state-b", None), None, "no login cookie");
    }
}
