//! Where the server may listen and which names it answers to.
//!
//! Guarantees: without authorization only a loopback address is served
//! ([`refuse_non_loopback`]); the Host and Origin names rmcp accepts are this machine's
//! loopback names on the listener's port, plus, for an OAuth resource server, its resource
//! URI's authority and origin (the name its clients use).

use std::net::SocketAddr;

use crate::auth::ResourceServer;
use crate::server::ServeError;

/// Without authorization the server is for this machine only: any address but a loopback one
/// is refused.
pub fn refuse_non_loopback(address: SocketAddr) -> Result<(), ServeError> {
    match non_loopback_refusal(address) {
        None => Ok(()),
        Some(refusal) => Err(ServeError::Start(refusal)),
    }
}

/// Why `address` may not be served without authorization, or `None` when it is a loopback
/// address (for front ends that check before they open or create anything).
pub fn non_loopback_refusal(address: SocketAddr) -> Option<String> {
    (!address.ip().is_loopback()).then(|| {
        format!(
            "refusing to serve MCP over HTTP on {address}: without authorization toolgate \
             serves loopback addresses only (127.0.0.1 or ::1)"
        )
    })
}

/// The Host and Origin values the server answers to on `local`, and on `auth`'s resource URI.
pub(super) fn allowed_names(
    local: SocketAddr,
    auth: Option<&ResourceServer>,
) -> (Vec<String>, Vec<String>) {
    let mut hosts = allowed_hosts(local);
    let mut origins = allowed_origins(local);
    if let Some(auth) = auth {
        // Clients name the server by its resource URI's authority.
        if let Ok(resource) = url::Url::parse(auth.resource()) {
            if let Some(host) = resource.host_str() {
                hosts.push(host.to_string());
                if let Some(port) = resource.port() {
                    hosts.push(format!("{host}:{port}"));
                }
            }
            origins.push(resource.origin().ascii_serialization());
        }
    }
    (hosts, origins)
}

fn allowed_hosts(local: SocketAddr) -> Vec<String> {
    let port = local.port();
    vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.1".into(),
        "localhost".into(),
        "::1".into(),
    ]
}

fn allowed_origins(local: SocketAddr) -> Vec<String> {
    let port = local.port();
    vec![
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        format!("http://[::1]:{port}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_a_public_address_without_authorization_is_refused() {
        let cases = [
            ("127.0.0.1:8080", true),
            ("[::1]:8080", true),
            ("0.0.0.0:8080", false),
            ("192.168.1.10:8080", false),
            ("[::]:8080", false),
        ];
        for (address, allowed) in cases {
            let address: SocketAddr = address.parse().unwrap();
            assert_eq!(refuse_non_loopback(address).is_ok(), allowed, "{address}");
        }
    }

    #[test]
    fn only_this_servers_loopback_origins_are_allowed() {
        let origins = allowed_origins("127.0.0.1:5000".parse().unwrap());
        assert!(origins.contains(&"http://127.0.0.1:5000".to_string()));
        assert!(origins.iter().all(|o| o.ends_with(":5000")), "{origins:?}");
    }
}
