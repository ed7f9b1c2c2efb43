//! The SMTP relay sender: the only way mail leaves, and only to the one relay in the config.
//!
//! Contract:
//! - [`SmtpRelay`] connects to its configured `host:port` and nowhere else; recipients are
//!   handed to that relay, never looked up (no MX resolution, no direct delivery).
//! - The relay is itself subject to the egress allowlist: it needs an `[[egress.allow]]` entry
//!   with `schemes = ["smtp"]` and its port, checked when the relay is built (a
//!   [`ConfigError::RelayNotAllowed`] otherwise) and again on every send. Its name is resolved by
//!   the exit's [`Resolver`], every address is checked like an HTTP destination, and the
//!   connection goes to the first checked address (no second lookup). A relay on `127.0.0.1` (as
//!   in tests) therefore needs an entry for that exact address with `allow_private = true`.
//! - `security = "starttls"` (the default) requires STARTTLS, `"tls"` is TLS from the first byte
//!   (port 465), `"none"` is plain SMTP: tests and a relay on the same machine only. Certificates
//!   are verified against the relay's configured name.
//! - One send is one message to all recipients, bounded by `timeout_secs`; it emits exactly one
//!   `egress` trace event (scheme `smtp`, recipients, the message id, the decision and rule;
//!   never the body or subject), and with telemetry on one span made from the same decision
//!   ([`crate::telemetry`]).
//! - The result is the message's `Message-ID`, generated here, so a caller can record it.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde::Deserialize;
use toolgate_core::trace::TraceSink;

use crate::addr::check_addresses;
use crate::canon::{Host, Scheme, canonical_host, cut};
use crate::config::{ConfigError, Permit, Policy};
use crate::error::EgressError;
use crate::fetch::ensure_crypto_provider;
use crate::resolve::{Resolver, addresses_of};
use crate::trace_event::{EgressDecision, Request};

/// How the connection to the relay is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SmtpSecurity {
    /// Plain connection upgraded with STARTTLS, which is required (port 587).
    #[default]
    Starttls,
    /// TLS from the first byte (port 465).
    Tls,
    /// No encryption: for tests and a relay on the same machine only.
    None,
}

/// The `[smtp]` table.
///
/// ```toml
/// [smtp]
/// host = "smtp.example.org"
/// port = 587
/// security = "starttls"        # or "tls" (port 465), or "none" (local test relays only)
/// from = "Notes Assistant <assistant@example.org>"
/// timeout_secs = 30
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpConfig {
    /// The relay's host name or IP address; must be allowed by an `smtp` allow entry.
    pub host: String,
    /// The relay's port; must be listed in that entry's `ports`.
    pub port: u16,
    #[serde(default)]
    pub security: SmtpSecurity,
    /// The sender, as `addr@example.org` or `Name <addr@example.org>`.
    pub from: String,
    /// The time one send may take in all. Default 30 s.
    #[serde(default = "default_smtp_timeout")]
    pub timeout_secs: u64,
    /// The name given in `EHLO`. Default: the address literal `[127.0.0.1]`.
    #[serde(default)]
    pub hello_name: Option<String>,
}

fn default_smtp_timeout() -> u64 {
    30
}

/// One message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingEmail {
    pub to: Vec<String>,
    pub subject: String,
    /// Plain text.
    pub body: String,
}

/// The mail sender.
pub struct SmtpRelay {
    config: SmtpConfig,
    host: Host,
    from: Mailbox,
    policy: Policy,
    resolver: Arc<dyn Resolver>,
    trace: Arc<dyn TraceSink>,
}

impl std::fmt::Debug for SmtpRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpRelay")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl SmtpRelay {
    /// Checks the relay against `policy` (the egress allowlist) and the sender address.
    pub fn new(
        config: SmtpConfig,
        policy: &Policy,
        resolver: Arc<dyn Resolver>,
        trace: Arc<dyn TraceSink>,
    ) -> Result<SmtpRelay, ConfigError> {
        let not_allowed = |reason| ConfigError::RelayNotAllowed {
            host: cut(&config.host, 200),
            port: config.port,
            reason,
        };
        // A bare IPv6 address is accepted without brackets, as in allow entries.
        let host = match config.host.parse::<std::net::Ipv6Addr>() {
            Ok(v6) => Host::Ip(IpAddr::V6(v6)),
            Err(_) => canonical_host(&config.host).map_err(not_allowed)?,
        };
        policy
            .check_target(Scheme::Smtp, &host, config.port)
            .map_err(not_allowed)?;
        let from: Mailbox = config
            .from
            .parse()
            .map_err(
                |e: lettre::address::AddressError| ConfigError::InvalidFrom {
                    value: config.from.clone(),
                    why: e.to_string(),
                },
            )?;
        if config.timeout_secs == 0 {
            return Err(ConfigError::InvalidLimit {
                field: "smtp.timeout_secs",
                expected: "at least 1".into(),
            });
        }
        ensure_crypto_provider();
        Ok(SmtpRelay {
            config,
            host,
            from,
            policy: policy.clone(),
            resolver,
            trace,
        })
    }

    /// Sends one message through the relay. Returns its `Message-ID`. Emits one trace event.
    pub async fn send(&self, email: &OutgoingEmail) -> Result<String, EgressError> {
        let span = crate::telemetry::start();
        let recipients: Vec<String> = email.to.iter().map(|t| cut(t, 200)).collect();
        let mut addresses: Vec<String> = Vec::new();
        let mut rule: Option<String> = None;
        let mut message_id: Option<String> = None;
        let timeout = Duration::from_secs(self.config.timeout_secs);
        // Charged to the call this message serves before the relay is contacted.
        let result =
            match toolgate_core::budget::charge_in_call(toolgate_core::budget::Spend::Outbound) {
                Err(exhausted) => Err(EgressError::BudgetExhausted(exhausted)),
                Ok(()) => match tokio::time::timeout(
                    timeout,
                    self.deliver(email, &mut addresses, &mut rule, &mut message_id),
                )
                .await
                {
                    Ok(result) => result,
                    Err(_) => Err(EgressError::Timeout { after: timeout }),
                },
            };
        let request = Request::Smtp {
            scheme: "smtp",
            host: self.host.to_string(),
            port: self.config.port,
            addresses,
            recipients,
            message_id,
        };
        let decision = EgressDecision::of(request, &result, rule, |detail| cut(&detail, 500));
        if let Some(span) = span {
            span.end(&decision);
        }
        self.trace.record(Arc::new(decision));
        result
    }

    async fn deliver(
        &self,
        email: &OutgoingEmail,
        addresses: &mut Vec<String>,
        rule: &mut Option<String>,
        message_id: &mut Option<String>,
    ) -> Result<String, EgressError> {
        let id = new_message_id(&self.from)?;
        let message = build_message(&self.from, email, &id)?;
        *message_id = Some(id.clone());

        let permit: Permit =
            self.policy
                .check_target(Scheme::Smtp, &self.host, self.config.port)?;
        *rule = Some(permit.rule());
        let addrs: Vec<IpAddr> = addresses_of(self.resolver.as_ref(), &self.host).await?;
        *addresses = addrs.iter().map(ToString::to_string).collect();
        check_addresses(&addrs, permit.allow_private)?;
        let Some(first) = addrs.first() else {
            return Err(crate::error::BlockReason::NoAddress.into());
        };

        let tls_name = match &self.host {
            Host::Domain(name) => name.clone(),
            Host::Ip(ip) => ip.to_string(),
        };
        let tls = match self.config.security {
            SmtpSecurity::None => Tls::None,
            SmtpSecurity::Starttls => Tls::Required(tls_parameters(&tls_name)?),
            SmtpSecurity::Tls => Tls::Wrapper(tls_parameters(&tls_name)?),
        };
        let hello = match &self.config.hello_name {
            Some(name) => ClientId::Domain(name.clone()),
            None => ClientId::default(),
        };
        // Connects to the checked address; the name is used only for TLS verification.
        let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(first.to_string())
            .port(self.config.port)
            .tls(tls)
            .hello_name(hello)
            .timeout(Some(Duration::from_secs(self.config.timeout_secs)))
            .build();
        match transport.send(message).await {
            Ok(_) => Ok(id),
            Err(e) if e.is_timeout() => Err(EgressError::Timeout {
                after: Duration::from_secs(self.config.timeout_secs),
            }),
            Err(e) if e.is_permanent() => Err(EgressError::SmtpRejected {
                detail: cut(&e.to_string(), 500),
            }),
            Err(e) => Err(EgressError::SmtpTransient {
                detail: cut(&e.to_string(), 500),
            }),
        }
    }
}

fn tls_parameters(name: &str) -> Result<TlsParameters, EgressError> {
    TlsParameters::new(name.to_string()).map_err(|e| EgressError::Internal {
        detail: format!("TLS setup for the SMTP relay failed: {e}"),
    })
}

/// `<random@sender-domain>`.
fn new_message_id(from: &Mailbox) -> Result<String, EgressError> {
    let mut bytes = [0_u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| EgressError::Internal {
        detail: format!("no randomness for a Message-ID: {e}"),
    })?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("<{hex}@{}>", from.email.domain()))
}

/// The message exactly as it will be sent. Pure: no I/O.
pub fn build_message(
    from: &Mailbox,
    email: &OutgoingEmail,
    message_id: &str,
) -> Result<Message, EgressError> {
    if email.to.is_empty() {
        return Err(EgressError::InvalidEmail {
            field: "to".into(),
            detail: "no recipients".into(),
        });
    }
    let mut builder = Message::builder()
        .from(from.clone())
        .subject(email.subject.clone())
        .message_id(Some(message_id.to_string()));
    for (i, to) in email.to.iter().enumerate() {
        let mailbox: Mailbox =
            to.parse().map_err(
                |e: lettre::address::AddressError| EgressError::InvalidEmail {
                    field: format!("to[{i}]"),
                    detail: e.to_string(),
                },
            )?;
        builder = builder.to(mailbox);
    }
    // The transport ends the data with a line break of its own, so a body's last line break
    // would arrive as an extra blank line.
    let body = email
        .body
        .strip_suffix("\r\n")
        .or_else(|| email.body.strip_suffix('\n'))
        .unwrap_or(&email.body);
    builder
        .header(ContentType::TEXT_PLAIN)
        .body(body.to_string())
        .map_err(|e| EgressError::InvalidEmail {
            field: "to".into(),
            detail: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from() -> Mailbox {
        "Notes <notes@example.org>"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn bad_recipients_are_refused_before_any_connection() {
        let cases = [
            (vec![], "to"),
            (vec!["not an address".to_string()], "to[0]"),
            (
                vec!["ok@example.org".to_string(), "a@b@c".to_string()],
                "to[1]",
            ),
        ];
        for (to, field) in cases {
            let email = OutgoingEmail {
                to,
                subject: "s".into(),
                body: "b".into(),
            };
            match build_message(&from(), &email, "<x@example.org>") {
                Err(EgressError::InvalidEmail { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn message_ids_are_unique_and_on_the_sender_domain() {
        let a = new_message_id(&from()).unwrap_or_default();
        let b = new_message_id(&from()).unwrap_or_default();
        assert_ne!(a, b);
        assert!(a.starts_with('<') && a.ends_with("@example.org>"), "{a}");
    }
}
