//! Server-side records of who is signed in, and of sign-ins under way.
//!
//! Guarantees: a session id and a CSRF token are 32 random bytes each (unguessable); a session
//! is found only before its expiry and never after sign-out; a sign-in under way (its `state`
//! and PKCE verifier) is taken at most once, only within [`LOGIN_TIME`], and only by the
//! browser that started it (the binder its login cookie carries: no login CSRF). A record that
//! cannot be read is not found (fail closed: a person whose session cannot be checked is not
//! signed in, never signed in as someone else).
//!
//! Two keepers of the records, behind [`SessionRecords`]:
//! - [`SessionBook`], this process's memory: the embedded (SQLite, single-process) server. A
//!   restart signs everyone out, and behind a load balancer a person's requests would have to
//!   reach the instance that signed them in. Both books are bounded ([`MAX_RECORDS`]): past the
//!   bound, expired records are dropped first, and a new record is refused rather than letting
//!   memory grow.
//! - [`crate::shared_sessions::SharedSessions`], the team's PostgreSQL database (`serve` on a
//!   shared store): every instance finds a session another opened and takes a sign-in another
//!   started, once; only digests of the ids are stored ([`record_key`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use toolgate_core::{BoxFuture, Principal};

/// How long a person has to complete a sign-in at the authorization server.
pub const LOGIN_TIME: Duration = Duration::from_secs(600);

/// The most sessions (and, separately, sign-ins under way) kept at once in memory.
pub const MAX_RECORDS: usize = 10_000;

/// 32 random bytes as hex; `None` when the system has no randomness.
pub fn random_id() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What a shared store keeps in place of a secret (a session id, a sign-in's state, a login
/// binder): its SHA-256 as hex, so a reader of the store cannot present the secret itself.
pub fn record_key(secret: &str) -> String {
    toolgate_core::canonical::sha256_hex(secret.as_bytes())
}

/// Whether a record that expires at `expires_unix_ms` is still good at `now_unix_ms` (at its
/// expiry it is not).
pub fn is_live(expires_unix_ms: i64, now_unix_ms: i64) -> bool {
    now_unix_ms < expires_unix_ms
}

/// When a record made at `now_unix_ms` that lasts `lifetime` expires (saturating, never
/// wrapping into the past).
pub fn expiry_of(now_unix_ms: i64, lifetime: Duration) -> i64 {
    let lifetime = i64::try_from(lifetime.as_millis()).unwrap_or(i64::MAX);
    now_unix_ms.saturating_add(lifetime)
}

/// Whether a taken sign-in may finish: it has not expired, and the callback's browser carries
/// a binder whose key is the one the sign-in was started with.
pub fn login_admits(stored_binder_key: &str, binder: Option<&str>, live: bool) -> bool {
    let same_browser =
        binder.is_some_and(|b| crate::rules::same_secret(&record_key(b), stored_binder_key));
    live && same_browser
}

/// A signed-in person.
#[derive(Debug, Clone)]
pub struct Session {
    pub principal: Principal,
    /// Every state-changing form of this session carries it.
    pub csrf: String,
}

/// Why a record could not be made or ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("no randomness was available to make a session")]
    NoRandomness,
    #[error("too many people are signed in or signing in at once; try again later")]
    Full,
    #[error("the session records' lock was poisoned by an earlier failure")]
    Poisoned,
    #[error("the shared session records could not be reached; try again later")]
    Store,
}

/// Where sessions and sign-ins under way are kept. Every read that fails finds nothing.
pub trait SessionRecords: Send + Sync {
    /// How long a session lasts from sign-in.
    fn lifetime(&self) -> Duration;

    /// Keeps `verifier` for the sign-in whose `state` is given; returns the binder the
    /// browser's login cookie must carry back.
    fn start_login<'a>(
        &'a self,
        state: &'a str,
        verifier: &'a str,
    ) -> BoxFuture<'a, Result<String, SessionError>>;

    /// The verifier of the sign-in `state`, taken (a second callback with it finds nothing,
    /// at any instance), when the callback's browser carries the `binder` of the one that
    /// started it.
    fn finish_login<'a>(
        &'a self,
        state: &'a str,
        binder: Option<&'a str>,
    ) -> BoxFuture<'a, Option<String>>;

    /// A new session for `principal`; returns its id.
    fn open(&self, principal: Principal) -> BoxFuture<'_, Result<String, SessionError>>;

    /// The session `id`, if it exists and has not expired.
    fn find<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Option<Session>>;

    /// Ends session `id` (sign-out).
    fn close<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), SessionError>>;
}

/// A session kept in memory, with its expiry.
#[derive(Debug, Clone)]
struct Kept {
    session: Session,
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

/// Sessions and sign-ins under way, in this process's memory.
#[derive(Debug)]
pub struct SessionBook {
    lifetime: Duration,
    sessions: Mutex<HashMap<String, Kept>>,
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
            Kept {
                session: Session { principal, csrf },
                expires: now + self.lifetime,
            },
        );
        Ok(id)
    }

    /// The session `id`, if it exists and has not expired (an expired one is dropped).
    pub fn find(&self, id: &str) -> Option<Session> {
        let mut sessions = self.sessions.lock().ok()?;
        match sessions.get(id) {
            Some(s) if s.expires > Instant::now() => Some(s.session.clone()),
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

impl SessionRecords for SessionBook {
    fn lifetime(&self) -> Duration {
        self.lifetime
    }

    fn start_login<'a>(
        &'a self,
        state: &'a str,
        verifier: &'a str,
    ) -> BoxFuture<'a, Result<String, SessionError>> {
        Box::pin(async move { SessionBook::start_login(self, state, verifier) })
    }

    fn finish_login<'a>(
        &'a self,
        state: &'a str,
        binder: Option<&'a str>,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move { SessionBook::finish_login(self, state, binder) })
    }

    fn open(&self, principal: Principal) -> BoxFuture<'_, Result<String, SessionError>> {
        Box::pin(async move { SessionBook::open(self, principal) })
    }

    fn find<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Option<Session>> {
        Box::pin(async move { SessionBook::find(self, id) })
    }

    fn close<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), SessionError>> {
        Box::pin(async move {
            SessionBook::close(self, id);
            Ok(())
        })
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

    #[test]
    fn a_stored_key_never_is_the_secret_it_stands_for() {
        let id = random_id().unwrap();
        let key = record_key(&id);
        assert_ne!(key, id, "the store would hold a usable session id");
        assert!(!key.contains(&id));
        assert_eq!(key.len(), 64);
        assert_eq!(key, record_key(&id), "the same id finds the same row");
        assert_ne!(key, record_key(&random_id().unwrap()));
        // A known value: SHA-256 of "abc".
        assert_eq!(
            record_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_record_at_or_past_its_expiry_is_not_live() {
        for (expires, now, live) in [
            (1_000, 999, true),
            (1_000, 1_000, false),
            (1_000, 1_001, false),
            (i64::MAX, 0, true),
            (i64::MIN, 0, false),
        ] {
            assert_eq!(is_live(expires, now), live, "expires {expires}, now {now}");
        }
        assert_eq!(expiry_of(1_000, Duration::from_secs(2)), 3_000);
        assert_eq!(expiry_of(1_000, Duration::ZERO), 1_000);
        assert!(
            !is_live(expiry_of(1_000, Duration::ZERO), 1_000),
            "a zero lifetime"
        );
        assert_eq!(
            expiry_of(i64::MAX - 1, Duration::MAX),
            i64::MAX,
            "a huge lifetime wraps into the past"
        );
    }

    #[test]
    fn a_taken_login_from_another_browser_or_too_late_does_not_finish() {
        let binder = "binder-of-the-browser-that-started-it";
        let stored = record_key(binder);
        for (presented, live, admitted) in [
            (Some(binder), true, true),
            (Some(binder), false, false),
            (Some("another-browsers-binder"), true, false),
            (None, true, false),
            // The stored key itself presented as a binder (read out of the database).
            (Some(stored.as_str()), true, false),
        ] {
            assert_eq!(
                login_admits(&stored, presented, live),
                admitted,
                "{presented:?}, live {live}"
            );
        }
    }
}
