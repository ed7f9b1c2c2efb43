//! The egress suite's test world: the allowlists of its three exits and the resolver that
//! answers for every name the cases use.
//!
//! Contract:
//! - Only loopback is reachable, so listed test hosts reach the 127.0.0.1 servers through
//!   entries that name the host and the servers' exact port with `allow_private = true` (as the
//!   exit's own tests do). No exit lists loopback in general: `127.0.0.1` is listed only in the
//!   `literal` exit, for one port; `loopback.test` is listed WITHOUT `allow_private`, so a name
//!   that resolves to 127.0.0.1 under it must be blocked.
//! - [`WorldResolver`] answers from a fixed table; a name with a sequence answers its first
//!   answer at its first lookup in a case and its second answer at every later lookup (the
//!   DNS-change cases); any other name under `.test` or `.example` resolves to 127.0.0.1, so a
//!   request that leaks lands on the suite's own server; every other name does not resolve. It
//!   records every lookup and never touches the network.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;

use toolgate_egress::{AllowEntry, EgressConfig, ResolveFuture, Resolver};

use super::cases::{ExitName, Ports};
use super::server::TRAP_IP;

/// The main exit's body cap.
pub const MAX_BYTES: u64 = 65_536;
/// The main exit's time cap, seconds.
pub const TIMEOUT_SECS: u64 = 10;
/// The tight exit's time cap, seconds.
pub const TIGHT_TIMEOUT_SECS: u64 = 1;
/// Redirects followed after the first request.
pub const MAX_REDIRECTS: u32 = 5;
/// The second port `flip.test` is listed on (without `allow_private`): nothing listens there.
pub const FLIP_PORT: u16 = 8081;

fn entry(host: &str, scheme: &str, ports: &[u16], allow_private: bool) -> AllowEntry {
    AllowEntry {
        host: host.into(),
        schemes: vec![scheme.into()],
        ports: Some(ports.to_vec()),
        allow_private,
    }
}

/// The allowlist every exit shares, in order (the trace's rule names `allow[i]:host`).
pub fn allowlist(ports: Ports) -> Vec<AllowEntry> {
    let p = ports.http;
    vec![
        entry("allowed.test", "http", &[p], true),
        entry("*.hops.test", "http", &[p], true),
        entry("secure.test", "https", &[ports.tls], true),
        entry("plain.test", "http", &[p], true),
        entry("*.docs.test", "http", &[p], true),
        entry("bücher.test", "http", &[p], true),
        // Stands in for a host whose first answer is public (see the rebinding cases).
        entry("rebind.test", "http", &[p], true),
        entry("flip.test", "http", &[p], true),
        entry("flip.test", "http", &[FLIP_PORT], false),
        // Listed, but its answer (127.0.0.1) is loopback and this entry does not allow that.
        entry("loopback.test", "http", &[p], false),
        // Internal names: listed, so only the address rules can stop them.
        entry("*.corp.test", "http", &[p, 80], false),
        // Listed for https at the TLS server, which presents a bad certificate for each name
        // (see `certs`): only the certificate check can stop them.
        entry("*.badtls.test", "https", &[ports.tls], true),
    ]
}

/// The configuration of one exit.
pub fn config(exit: ExitName, ports: Ports) -> EgressConfig {
    let mut allow = allowlist(ports);
    let mut timeout_secs = TIMEOUT_SECS;
    match exit {
        ExitName::Main => {}
        ExitName::Tight => timeout_secs = TIGHT_TIMEOUT_SECS,
        ExitName::Literal => allow.push(entry("127.0.0.1", "http", &[ports.http], true)),
    }
    EgressConfig {
        allow,
        max_bytes: MAX_BYTES,
        timeout_secs,
        max_redirects: MAX_REDIRECTS,
        ..EgressConfig::default()
    }
}

fn ip(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn v6(text: &str) -> Option<IpAddr> {
    text.parse().ok()
}

/// The fixed answers (every other `.test` / `.example` name is 127.0.0.1).
fn table() -> Vec<(&'static str, Vec<IpAddr>)> {
    let public = ip(93, 184, 215, 14);
    let mut rows: Vec<(&'static str, Vec<IpAddr>)> = vec![
        ("wiki.corp.test", vec![ip(10, 0, 0, 5)]),
        ("db.corp.test", vec![ip(172, 16, 0, 10)]),
        ("edge.corp.test", vec![ip(172, 31, 255, 254)]),
        ("router.corp.test", vec![ip(192, 168, 1, 1)]),
        ("meta.corp.test", vec![ip(169, 254, 169, 254)]),
        ("ecs-meta.corp.test", vec![ip(169, 254, 170, 2)]),
        ("azure-meta.corp.test", vec![ip(168, 63, 129, 16)]),
        ("alibaba-meta.corp.test", vec![ip(100, 100, 100, 200)]),
        ("link.corp.test", vec![ip(169, 254, 1, 1)]),
        ("cgnat.corp.test", vec![ip(100, 64, 0, 1)]),
        ("cgnat-top.corp.test", vec![ip(100, 127, 255, 254)]),
        ("lo.corp.test", vec![ip(127, 0, 0, 1)]),
        ("lo-other.corp.test", vec![IpAddr::V4(TRAP_IP)]),
        ("zero.corp.test", vec![ip(0, 0, 0, 0)]),
        ("this-net.corp.test", vec![ip(0, 1, 2, 3)]),
        ("broadcast.corp.test", vec![ip(255, 255, 255, 255)]),
        ("multicast.corp.test", vec![ip(224, 0, 0, 1)]),
        ("docnet.corp.test", vec![ip(192, 0, 2, 10)]),
        ("benchmark.corp.test", vec![ip(198, 18, 0, 1)]),
        ("reserved.corp.test", vec![ip(240, 0, 0, 1)]),
        ("mixed.corp.test", vec![public, ip(10, 0, 0, 5)]),
        ("mixed-meta.corp.test", vec![public, ip(169, 254, 169, 254)]),
        ("mixed-lo.corp.test", vec![ip(127, 0, 0, 1), public]),
        ("empty.corp.test", vec![]),
    ];
    let v6_rows: [(&'static str, &[&str]); 14] = [
        ("v6-loopback.corp.test", &["::1"]),
        ("v6-unspecified.corp.test", &["::"]),
        ("v6-ula.corp.test", &["fd00::1"]),
        ("v6-ula-random.corp.test", &["fd12:3456:789a::1"]),
        ("v6-fc.corp.test", &["fc00::5"]),
        ("v6-meta.corp.test", &["fd00:ec2::254"]),
        ("v6-link.corp.test", &["fe80::1"]),
        ("v6-mapped-lo.corp.test", &["::ffff:127.0.0.1"]),
        ("v6-mapped-meta.corp.test", &["::ffff:169.254.169.254"]),
        ("v6-mapped-private.corp.test", &["::ffff:10.0.0.5"]),
        ("v6-mapped-public.corp.test", &["::ffff:93.184.215.14"]),
        ("v6-nat64-meta.corp.test", &["64:ff9b::a9fe:a9fe"]),
        ("v6-6to4-lo.corp.test", &["2002:7f00:1::1"]),
        ("v6-mixed.corp.test", &["2606:4700::1111", "fd00::1"]),
    ];
    for (name, texts) in v6_rows {
        rows.push((name, texts.iter().filter_map(|t| v6(t)).collect()));
    }
    rows
}

/// Names whose answer changes: the first lookup in a case gets `.0`, every later one `.1`.
fn sequences() -> Vec<(&'static str, Vec<IpAddr>, Vec<IpAddr>)> {
    let lo = ip(127, 0, 0, 1);
    vec![
        // The first answer stands in for a public one; the later one is the trap.
        ("rebind.test", vec![lo], vec![IpAddr::V4(TRAP_IP)]),
        ("flip.test", vec![lo], vec![ip(169, 254, 169, 254)]),
    ]
}

/// The test world's resolver (see the module doc).
#[derive(Debug)]
pub struct WorldResolver {
    fixed: HashMap<String, Vec<IpAddr>>,
    changing: HashMap<String, (Vec<IpAddr>, Vec<IpAddr>)>,
    asked: Mutex<Vec<String>>,
}

impl Default for WorldResolver {
    fn default() -> Self {
        WorldResolver::new()
    }
}

impl WorldResolver {
    pub fn new() -> Self {
        WorldResolver {
            fixed: table()
                .into_iter()
                .map(|(name, addrs)| (name.to_string(), addrs))
                .collect(),
            changing: sequences()
                .into_iter()
                .map(|(name, first, later)| (name.to_string(), (first, later)))
                .collect(),
            asked: Mutex::new(Vec::new()),
        }
    }

    /// Forgets the lookups so far: the next case's first lookup of a changing name gets its
    /// first answer again.
    pub fn reset(&self) {
        if let Ok(mut asked) = self.asked.lock() {
            asked.clear();
        }
    }

    /// The names looked up since the last [`WorldResolver::reset`], in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }

    /// The first answer of a changing name (what a pinned request must have connected to).
    pub fn first_answer(&self, name: &str) -> Option<Vec<IpAddr>> {
        self.changing.get(name).map(|(first, _)| first.clone())
    }

    /// The answer to the `nth` (0-based) lookup of `name` in a case.
    pub fn answer(&self, name: &str, nth: usize) -> Result<Vec<IpAddr>, String> {
        if let Some((first, later)) = self.changing.get(name) {
            return Ok(if nth == 0 {
                first.clone()
            } else {
                later.clone()
            });
        }
        if let Some(addrs) = self.fixed.get(name) {
            return Ok(addrs.clone());
        }
        if name.ends_with(".test") || name.ends_with(".example") {
            return Ok(vec![ip(127, 0, 0, 1)]);
        }
        Err(format!("`{name}` is not a name of the test world"))
    }
}

impl Resolver for WorldResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a> {
        let nth = match self.asked.lock() {
            Ok(mut asked) => {
                let nth = asked.iter().filter(|n| n.as_str() == host).count();
                asked.push(host.to_string());
                nth
            }
            Err(_) => 0,
        };
        let answer = self.answer(host, nth);
        Box::pin(async move { answer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changing_names_answer_first_then_later_and_reset_starts_over() {
        let r = WorldResolver::new();
        let lo = vec![ip(127, 0, 0, 1)];
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let first = rt.block_on(r.resolve("rebind.test")).unwrap();
        let second = rt.block_on(r.resolve("rebind.test")).unwrap();
        assert_eq!(first, lo);
        assert_eq!(second, vec![IpAddr::V4(TRAP_IP)]);
        assert_eq!(r.asked().len(), 2);
        r.reset();
        assert_eq!(rt.block_on(r.resolve("rebind.test")).unwrap(), lo);
    }

    #[test]
    fn unknown_test_names_land_on_loopback_and_others_do_not_resolve() {
        let r = WorldResolver::new();
        assert_eq!(r.answer("evil.test", 0), Ok(vec![ip(127, 0, 0, 1)]));
        assert_eq!(r.answer("wiki.corp.test", 0), Ok(vec![ip(10, 0, 0, 5)]));
        assert!(r.answer("example.org", 0).is_err());
        assert_eq!(r.answer("v6-mixed.corp.test", 0).map(|a| a.len()), Ok(2));
    }

    #[test]
    fn no_exit_lists_loopback_in_general() {
        let ports = Ports {
            http: 8123,
            tls: 9443,
        };
        for exit in [ExitName::Main, ExitName::Tight, ExitName::Literal] {
            let config = config(exit, ports);
            assert!(config.validate().is_ok(), "{exit:?}");
            for entry in &config.allow {
                if entry.allow_private {
                    let ports = entry.ports.clone().unwrap_or_default();
                    assert!(
                        ports == vec![8123] || ports == vec![9443],
                        "{exit:?}: {} allows private addresses beyond the servers' ports",
                        entry.host
                    );
                }
            }
            let loopback = config.allow.iter().find(|e| e.host == "loopback.test");
            assert!(loopback.is_some_and(|e| !e.allow_private));
        }
    }
}
