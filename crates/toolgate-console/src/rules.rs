//! The console's decisions that need no I/O, each a pure function with a table of cases: who
//! may approve a ticket, whether a state-changing request is admitted (its origin and its CSRF
//! token), and the session cookie's attributes.
//!
//! Fails closed: a request whose origin cannot be established, a missing token, a person who is
//! neither a named approver nor holds an approver scope, and the requester of a call approving it
//! themselves (unless the configuration allows that at the call's risk) are all refused.

use serde::Deserialize;
use toolgate_core::Principal;
use toolgate_core::approval::holder;
use toolgate_core::spec::Risk;

/// Who may approve: anyone holding one of `scopes`, or whose subject is one of `subjects`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approvers {
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub subjects: Vec<String>,
}

impl Approvers {
    /// Whether `person` is one of these people: signed in, and named by subject or holding
    /// one of the scopes.
    pub fn includes(&self, person: &Principal) -> bool {
        person.is_authenticated()
            && (self.subjects.contains(&person.id)
                || self.scopes.iter().any(|s| person.scopes.contains(s)))
    }
}

/// Who may read the audit, named as approvers are (by scope or subject). Nobody by default:
/// the audit shows every call of every principal with its arguments (not only the calls that
/// wait for a person, as the inbox does), so reading it is granted, never implied.
pub type Auditors = Approvers;

/// Why a person may not read the audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "you are not an auditor: the console's auditors are named by scope or subject ([console] auditors)"
)]
pub struct NotAnAuditor;

/// Whether `person` may read the audit.
pub fn may_audit(person: &Principal, auditors: &Auditors) -> Result<(), NotAnAuditor> {
    if auditors.includes(person) {
        Ok(())
    } else {
        Err(NotAnAuditor)
    }
}

/// Why a person may not decide a ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ApproverRefusal {
    #[error("you are not an approver: the console's approvers are named by scope or subject")]
    NotAnApprover,
    #[error("you made this call yourself, and another person must approve it (four eyes)")]
    OwnCall,
}

/// Whether `person` may decide a ticket issued to `requester` (the ledger's holder form) for a
/// call of `risk`: an approver by scope or subject, and not the requester unless
/// `self_approval` lists the risk.
pub fn may_decide(
    person: &Principal,
    approvers: &Approvers,
    requester: &str,
    risk: Risk,
    self_approval: &[Risk],
) -> Result<(), ApproverRefusal> {
    if !approvers.includes(person) {
        return Err(ApproverRefusal::NotAnApprover);
    }
    if holder(person) == requester && !self_approval.contains(&risk) {
        return Err(ApproverRefusal::OwnCall);
    }
    Ok(())
}

/// Why a state-changing request is refused before anything is read from its form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SubmissionRefusal {
    #[error("the request came from another site (Sec-Fetch-Site)")]
    CrossSite,
    #[error("the request came from another origin")]
    OtherOrigin,
    #[error("the request names no origin, so where it came from cannot be checked")]
    NoOrigin,
    #[error("the form carries no CSRF token")]
    NoToken,
    #[error("the form's CSRF token is not this session's")]
    WrongToken,
}

/// What a state-changing request says about where it came from, and the token its form carries.
#[derive(Debug, Clone, Copy, Default)]
pub struct Submission<'a> {
    pub origin: Option<&'a str>,
    pub fetch_site: Option<&'a str>,
    pub form_token: Option<&'a str>,
}

/// Whether a state-changing request is admitted for the session whose CSRF token is
/// `session_token`, on a console served at `our_origin`: a browser's `Sec-Fetch-Site`, when
/// sent, must be `same-origin`; the `Origin` must be sent and be ours; the form's token must be
/// the session's.
pub fn admit_submission(
    submission: &Submission<'_>,
    our_origin: &str,
    session_token: &str,
) -> Result<(), SubmissionRefusal> {
    if submission
        .fetch_site
        .is_some_and(|site| site != "same-origin")
    {
        return Err(SubmissionRefusal::CrossSite);
    }
    match submission.origin {
        None => return Err(SubmissionRefusal::NoOrigin),
        Some(origin) if origin != our_origin => return Err(SubmissionRefusal::OtherOrigin),
        Some(_) => {}
    }
    match submission.form_token {
        None | Some("") => Err(SubmissionRefusal::NoToken),
        Some(token) if same_secret(token, session_token) => Ok(()),
        Some(_) => Err(SubmissionRefusal::WrongToken),
    }
}

/// Equality that takes as long whichever byte differs (a token is a secret).
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

/// The session cookie's name.
pub const COOKIE_NAME: &str = "toolgate_console";

/// Whether the console at `origin` must mark its cookie `Secure`: everywhere but plain http on
/// a loopback address (a browser on this machine, which would not send a Secure cookie there).
pub fn secure_cookie(origin: &url::Url) -> bool {
    let loopback = match origin.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    };
    !(origin.scheme() == "http" && loopback)
}

/// The `Set-Cookie` value that holds session `id` for `max_age_secs` (0 clears it): never
/// readable by script, sent only to the console's own pages on same-site navigations.
pub fn session_cookie(id: &str, secure: bool, max_age_secs: u64) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{COOKIE_NAME}={id}; Path=/console; Max-Age={max_age_secs}; HttpOnly; SameSite=Strict{secure}"
    )
}

/// The login cookie's name: it ties a sign-in's callback to the browser that started it.
pub const LOGIN_COOKIE_NAME: &str = "toolgate_console_login";

/// The `Set-Cookie` value that holds a sign-in's `binder` for `max_age_secs` (0 clears it),
/// sent only to the callback. `SameSite=Lax`, not `Strict`: the callback arrives as a
/// top-level navigation from the authorization server, another site, and must carry it.
pub fn login_cookie(binder: &str, secure: bool, max_age_secs: u64) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{LOGIN_COOKIE_NAME}={binder}; Path=/console/callback; Max-Age={max_age_secs}; HttpOnly; SameSite=Lax{secure}"
    )
}

/// The session id in a `Cookie` header, if it holds ours.
pub fn session_of(cookie_header: &str) -> Option<&str> {
    cookie_value(cookie_header, COOKIE_NAME)
}

/// The value of the cookie `name` in a `Cookie` header, if set and not empty.
pub fn cookie_value<'a>(cookie_header: &'a str, name: &str) -> Option<&'a str> {
    cookie_header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(found, _)| *found == name)
        .map(|(_, value)| value)
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use super::*;

    fn person(id: &str, scopes: &[&str]) -> Principal {
        Principal {
            id: id.into(),
            tenant: "https://as.example".into(),
            scopes: Arc::new(
                scopes
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<BTreeSet<_>>(),
            ),
            catalogue: None,
        }
    }

    #[test]
    fn only_named_auditors_read_the_audit_and_nobody_by_default() {
        let auditors = Auditors {
            scopes: vec!["audit:read".into()],
            subjects: vec!["carol".into()],
        };
        let cases = [
            ("by scope", person("dave", &["audit:read"]), &auditors, true),
            ("by subject", person("carol", &[]), &auditors, true),
            (
                "an approver only",
                person("alice", &["approvals"]),
                &auditors,
                false,
            ),
            (
                "nobody signed in",
                person("", &["audit:read"]),
                &auditors,
                false,
            ),
            (
                "the default names nobody",
                person("carol", &["audit:read"]),
                &Auditors::default(),
                false,
            ),
        ];
        for (case, who, auditors, allowed) in cases {
            assert_eq!(may_audit(&who, auditors).is_ok(), allowed, "{case}");
        }
    }

    #[test]
    fn only_named_approvers_decide_and_nobody_approves_their_own_call() {
        let approvers = Approvers {
            scopes: vec!["approvals".into()],
            subjects: vec!["carol".into()],
        };
        let alice = person("alice", &["approvals"]);
        let requested_by_alice = holder(&alice);
        let requested_by_bob = holder(&person("bob", &[]));
        let cases = [
            (
                "an approver by scope",
                person("dave", &["approvals"]),
                &requested_by_bob,
                Risk::High,
                vec![],
                Ok(()),
            ),
            (
                "an approver by subject",
                person("carol", &[]),
                &requested_by_bob,
                Risk::High,
                vec![],
                Ok(()),
            ),
            (
                "a person without the approver scope",
                person("eve", &["notes:write"]),
                &requested_by_bob,
                Risk::High,
                vec![],
                Err(ApproverRefusal::NotAnApprover),
            ),
            (
                "an unauthenticated person",
                person("", &["approvals"]),
                &requested_by_bob,
                Risk::High,
                vec![],
                Err(ApproverRefusal::NotAnApprover),
            ),
            (
                "the requester approving their own call",
                alice.clone(),
                &requested_by_alice,
                Risk::High,
                vec![],
                Err(ApproverRefusal::OwnCall),
            ),
            (
                "the requester where only medium risk may be self-approved",
                alice.clone(),
                &requested_by_alice,
                Risk::High,
                vec![Risk::Medium],
                Err(ApproverRefusal::OwnCall),
            ),
            (
                "the requester where the risk may be self-approved",
                alice.clone(),
                &requested_by_alice,
                Risk::Medium,
                vec![Risk::Medium],
                Ok(()),
            ),
            (
                "the same name from another issuer",
                Principal {
                    tenant: "https://other.example".into(),
                    ..alice.clone()
                },
                &requested_by_alice,
                Risk::High,
                vec![],
                Ok(()),
            ),
        ];
        for (label, who, requester, risk, allowed, want) in cases {
            assert_eq!(
                may_decide(&who, &approvers, requester, risk, &allowed),
                want,
                "{label}"
            );
        }
    }

    #[test]
    fn forged_or_tokenless_submissions_are_refused() {
        let ours = "http://127.0.0.1:8080";
        let good = Submission {
            origin: Some(ours),
            fetch_site: Some("same-origin"),
            form_token: Some("tok-123"),
        };
        let cases = [
            ("a form posted from our own page", good, Ok(())),
            (
                "a client that sends no Sec-Fetch-Site",
                Submission {
                    fetch_site: None,
                    ..good
                },
                Ok(()),
            ),
            (
                "a form posted from another port of this host",
                Submission {
                    origin: Some("http://127.0.0.1:9999"),
                    fetch_site: Some("same-site"),
                    ..good
                },
                Err(SubmissionRefusal::CrossSite),
            ),
            (
                "a cross-site form",
                Submission {
                    origin: Some("https://evil.example"),
                    fetch_site: Some("cross-site"),
                    ..good
                },
                Err(SubmissionRefusal::CrossSite),
            ),
            (
                "a forged Origin without fetch metadata",
                Submission {
                    origin: Some("https://evil.example"),
                    fetch_site: None,
                    ..good
                },
                Err(SubmissionRefusal::OtherOrigin),
            ),
            (
                "a sandboxed page's null origin",
                Submission {
                    origin: Some("null"),
                    fetch_site: None,
                    ..good
                },
                Err(SubmissionRefusal::OtherOrigin),
            ),
            (
                "a request that names no origin",
                Submission {
                    origin: None,
                    fetch_site: None,
                    ..good
                },
                Err(SubmissionRefusal::NoOrigin),
            ),
            (
                "a form without the token",
                Submission {
                    form_token: None,
                    ..good
                },
                Err(SubmissionRefusal::NoToken),
            ),
            (
                "a form with an empty token",
                Submission {
                    form_token: Some(""),
                    ..good
                },
                Err(SubmissionRefusal::NoToken),
            ),
            (
                "a form with another session's token",
                Submission {
                    form_token: Some("tok-124"),
                    ..good
                },
                Err(SubmissionRefusal::WrongToken),
            ),
            (
                "a form with a token's prefix",
                Submission {
                    form_token: Some("tok-12"),
                    ..good
                },
                Err(SubmissionRefusal::WrongToken),
            ),
        ];
        for (label, submission, want) in cases {
            assert_eq!(
                admit_submission(&submission, ours, "tok-123"),
                want,
                "{label}"
            );
        }
    }

    #[test]
    fn the_session_cookie_is_never_script_readable_or_cross_site_and_secure_off_loopback() {
        let cases = [
            ("http://127.0.0.1:8080", false),
            ("http://[::1]:8080", false),
            ("http://localhost:8080", false),
            ("https://127.0.0.1:8443", true),
            ("http://console.example.org", true),
            ("https://console.example.org", true),
            ("http://10.0.0.5:8080", true),
        ];
        for (origin, secure) in cases {
            let url = url::Url::parse(origin).unwrap();
            assert_eq!(secure_cookie(&url), secure, "{origin}");
            let cookie = session_cookie("abc", secure_cookie(&url), 600);
            assert!(cookie.contains("; HttpOnly"), "{cookie}");
            assert!(cookie.contains("; SameSite=Strict"), "{cookie}");
            assert!(cookie.contains("; Path=/console"), "{cookie}");
            assert_eq!(cookie.contains("; Secure"), secure, "{cookie}");
        }
        assert!(session_cookie("", true, 0).contains("Max-Age=0"));
        let login = login_cookie("b", false, 600);
        assert!(
            login.contains("; HttpOnly") && login.contains("; SameSite=Lax"),
            "{login}"
        );
        assert!(login.contains("; Path=/console/callback"), "{login}");
    }

    #[test]
    fn a_cookie_of_another_name_is_not_a_session() {
        assert_eq!(session_of("a=1; toolgate_console=xyz; b=2"), Some("xyz"));
        assert_eq!(session_of("toolgate_console_x=xyz"), None);
        assert_eq!(session_of("toolgate_console="), None);
        assert_eq!(session_of("other=toolgate_console"), None);
    }
}
