//! The exits a toolset's tools may use, built from configuration in one way: the egress exit
//! (the only way out for HTTP) and, when configured, the SMTP relay.
//!
//! Guarantees: [`ExitsConfig::build`] validates the allowlist once and checks the relay against
//! it, so a relay the allowlist does not name is refused when the exits are built, not when
//! mail is sent; nothing is reachable that the configuration does not list. Extra destinations
//! a front end runs itself on this machine (the eval's page server, the demo's relay) are
//! configuration too ([`ExitsConfig::allow_loopback`]), never a second set-up.
//!
//! [`RecordingResolver`] makes the same exits into recorders (shadow replay): every name the
//! egress exit or the relay would look up is noted and refused, so no connection is ever
//! opened, while the exits' own trace events still say what would have been sent.

use std::sync::{Arc, Mutex};

use toolgate_core::trace::TraceSink;
use toolgate_egress::{
    AllowEntry, ConfigError, Egress, EgressConfig, ResolveFuture, Resolver, SmtpConfig, SmtpRelay,
    SmtpSecurity, SystemResolver,
};

use crate::error::WiringError;

/// What the exits are built from: the `[egress]` allowlist and the optional `[smtp]` relay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExitsConfig {
    pub egress: EgressConfig,
    pub smtp: Option<SmtpConfig>,
}

/// The built exits, tracing to the sink they were built with.
pub struct Exits {
    pub egress: Arc<Egress>,
    pub relay: Option<Arc<SmtpRelay>>,
}

impl ExitsConfig {
    pub fn new(egress: EgressConfig, smtp: Option<SmtpConfig>) -> Self {
        ExitsConfig { egress, smtp }
    }

    /// Also allow `scheme` to `127.0.0.1:port`, loopback address included: for a server the
    /// front end itself runs on this machine.
    pub fn allow_loopback(mut self, scheme: &str, port: u16) -> Self {
        self.egress.allow.push(AllowEntry {
            host: "127.0.0.1".into(),
            schemes: vec![scheme.into()],
            ports: Some(vec![port]),
            allow_private: true,
        });
        self
    }

    /// Deliver mail in the clear to a relay on this machine at `127.0.0.1:port` (a local mail
    /// server, or a test's), allowing exactly that port, with `from` as the sender.
    pub fn with_loopback_relay(self, port: u16, from: &str) -> Self {
        self.allow_loopback("smtp", port).with_relay(SmtpConfig {
            host: "127.0.0.1".into(),
            port,
            security: SmtpSecurity::None,
            from: from.into(),
            timeout_secs: 10,
            hello_name: None,
        })
    }

    /// Deliver mail through `smtp` (which the allowlist must still allow).
    pub fn with_relay(mut self, smtp: SmtpConfig) -> Self {
        self.smtp = Some(smtp);
        self
    }

    /// The egress exit alone, resolving names with the system resolver: for a front end's
    /// own connections (MCP imports) that send no mail, so a relay is not built for them.
    pub fn egress(&self, trace: Arc<dyn TraceSink>) -> Result<Arc<Egress>, ConfigError> {
        let policy = self.egress.validate()?;
        Ok(Arc::new(Egress::from_policy(
            policy,
            Arc::new(SystemResolver),
            trace,
        )))
    }

    /// The egress exit alone, answering only in `content_types`: for a front end's own fetches
    /// of documents of known types (an authorization server's metadata and key set), so the
    /// server's OAuth fetches leave through the same allowlist as the toolsets' and imports'.
    pub fn egress_answering(
        &self,
        content_types: &[&str],
        trace: Arc<dyn TraceSink>,
    ) -> Result<Arc<Egress>, ConfigError> {
        let mut config = self.clone();
        config.egress.content_types = content_types.iter().map(|t| t.to_string()).collect();
        config.egress(trace)
    }

    /// The exits, resolving names with the system resolver.
    pub fn build(&self, trace: Arc<dyn TraceSink>) -> Result<Exits, WiringError> {
        self.build_with(Arc::new(SystemResolver), trace)
    }

    /// The exits, resolving names with `resolver` (tests pin addresses with a static one).
    pub fn build_with(
        &self,
        resolver: Arc<dyn Resolver>,
        trace: Arc<dyn TraceSink>,
    ) -> Result<Exits, WiringError> {
        let policy = self.egress.validate()?;
        let relay = match &self.smtp {
            Some(smtp) => Some(Arc::new(SmtpRelay::new(
                smtp.clone(),
                &policy,
                Arc::clone(&resolver),
                Arc::clone(&trace),
            )?)),
            None => None,
        };
        let egress = Egress::from_policy(policy, resolver, trace);
        Ok(Exits {
            egress: Arc::new(egress),
            relay,
        })
    }
}

/// A resolver that answers no name: the exits built with it ([`ExitsConfig::build_with`])
/// check every request as usual and record their decision in the trace, but a request the
/// allowlist admits fails at name resolution, before any connection (no HTTP request, no
/// mail). It keeps the names asked for, in order: what would have been reached.
#[derive(Debug, Default)]
pub struct RecordingResolver {
    asked: Mutex<Vec<String>>,
}

/// Why every lookup of a [`RecordingResolver`] fails, as the exit reports it.
pub const NOTHING_LEAVES: &str = "shadow replay: nothing leaves this process";

impl RecordingResolver {
    pub fn new() -> Self {
        RecordingResolver::default()
    }

    /// The names the exits asked for, in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl Resolver for RecordingResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(host.to_string());
        }
        Box::pin(async { Err(NOTHING_LEAVES.to_string()) })
    }

    /// An address named directly (`http://127.0.0.1/`, a relay at `127.0.0.1`) is refused as a
    /// name is: otherwise an exit would connect without asking.
    fn literal(&self, ip: std::net::IpAddr) -> Result<Vec<std::net::IpAddr>, String> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(ip.to_string());
        }
        Err(NOTHING_LEAVES.to_string())
    }
}

#[cfg(test)]
mod tests {
    use toolgate_core::trace::NoTrace;

    use super::*;

    fn relay(port: u16) -> SmtpConfig {
        SmtpConfig {
            host: "127.0.0.1".into(),
            port,
            security: SmtpSecurity::None,
            from: "Test <test@localhost.localdomain>".into(),
            timeout_secs: 1,
            hello_name: None,
        }
    }

    #[test]
    fn a_loopback_relay_allows_its_own_port_and_no_other() {
        let exits =
            ExitsConfig::default().with_loopback_relay(2526, "Test <test@localhost.localdomain>");
        assert_eq!(exits.smtp.as_ref().map(|s| s.port), Some(2526));
        assert!(exits.build(Arc::new(NoTrace)).unwrap().relay.is_some());
        let entry = &exits.egress.allow[0];
        assert_eq!(
            (entry.host.as_str(), entry.ports.as_deref()),
            ("127.0.0.1", Some(&[2526][..]))
        );
        assert_eq!(entry.schemes, vec!["smtp".to_string()]);
    }

    #[test]
    fn a_relay_is_built_only_when_the_allowlist_names_it() {
        let none = ExitsConfig::default().build(Arc::new(NoTrace)).unwrap();
        assert!(none.relay.is_none());
        let unlisted = ExitsConfig::default().with_relay(relay(2526));
        assert!(matches!(
            unlisted.build(Arc::new(NoTrace)),
            Err(WiringError::Exits(_))
        ));
        let listed = ExitsConfig::default()
            .allow_loopback("smtp", 2526)
            .with_relay(relay(2526));
        assert!(listed.build(Arc::new(NoTrace)).unwrap().relay.is_some());
    }

    #[tokio::test]
    async fn a_recording_resolver_notes_every_name_and_reaches_none() {
        let recorder = RecordingResolver::new();
        for host in ["example.org", "127.0.0.1"] {
            let answer = recorder.resolve(host).await;
            assert_eq!(answer, Err(NOTHING_LEAVES.to_string()));
        }
        assert_eq!(recorder.asked(), ["example.org", "127.0.0.1"]);
    }
}
