//! Name resolution, done by the exit itself so that the addresses it checks are the addresses it
//! connects to.
//!
//! Contract:
//! - A [`Resolver`] returns every address a name has (the exit checks all of them and blocks if
//!   any is forbidden); an error or an empty answer means the name is not reachable.
//! - [`SystemResolver`] asks the operating system (`getaddrinfo` through tokio's `lookup_host`);
//!   it is the one used in production. [`StaticResolver`] answers from a fixed table and never
//!   touches the network; tests use it, and it records which names were asked for.
//! - Neither connects anywhere. An IP literal is its own address, asked of the resolver too
//!   ([`Resolver::literal`]) so a resolver that lets nothing be reached refuses it as well.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Mutex;

/// What a resolution returns.
pub type ResolveFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<IpAddr>, String>> + Send + 'a>>;

/// Turns a canonical host name (lower-case ASCII, no trailing dot) into all its addresses.
pub trait Resolver: Send + Sync {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a>;

    /// The addresses an IP literal in a URL or a relay's host stands for: itself, unless this
    /// resolver lets nothing be reached (a recorder for shadow replay refuses literals too, so
    /// no exit can connect by naming an address instead of a name).
    fn literal(&self, ip: IpAddr) -> Result<Vec<IpAddr>, String> {
        Ok(vec![ip])
    }
}

/// The operating system's resolver.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, 0))
                .await
                .map_err(|e| e.to_string())?;
            let mut ips: Vec<IpAddr> = Vec::new();
            for addr in addrs {
                if !ips.contains(&addr.ip()) {
                    ips.push(addr.ip());
                }
            }
            Ok(ips)
        })
    }
}

/// A fixed name → addresses table. Unknown names fail to resolve.
#[derive(Debug, Default)]
pub struct StaticResolver {
    table: HashMap<String, Vec<IpAddr>>,
    asked: Mutex<Vec<String>>,
}

impl StaticResolver {
    pub fn new() -> Self {
        StaticResolver::default()
    }

    /// Adds (or replaces) a name's addresses. The name is stored lower-case, without a
    /// trailing dot, as the exit asks for it.
    pub fn with(mut self, host: &str, addrs: &[IpAddr]) -> Self {
        let key = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        self.table.insert(key, addrs.to_vec());
        self
    }

    /// The names asked for so far, in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl Resolver for StaticResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(host.to_string());
        }
        let answer = self
            .table
            .get(host)
            .cloned()
            .ok_or_else(|| format!("no such host `{host}` in the static table"));
        Box::pin(async move { answer })
    }
}

/// The addresses `host` stands for: an IP literal itself, a name as `resolver` answers (one
/// lookup, shared by every exit so each checks exactly the addresses it will connect to).
pub async fn addresses_of(
    resolver: &dyn Resolver,
    host: &crate::canon::Host,
) -> Result<Vec<IpAddr>, crate::error::EgressError> {
    match host {
        crate::canon::Host::Ip(ip) => {
            resolver
                .literal(*ip)
                .map_err(|detail| crate::error::EgressError::Resolve {
                    host: ip.to_string(),
                    detail,
                })
        }
        crate::canon::Host::Domain(name) => {
            resolver
                .resolve(name)
                .await
                .map_err(|detail| crate::error::EgressError::Resolve {
                    host: name.clone(),
                    detail,
                })
        }
    }
}
