//! URL and host canonicalization (`toolgate_egress::canon`) on arbitrary text.
//!
//! Beyond "never panics", the contract's own promises: a canonical URL is accepted again and
//! canonicalizes to itself (one spelling per destination), it carries no userinfo and no
//! fragment, its host is the host it names; a canonical domain is accepted again as itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_egress::canon::{Host, canonical_host, canonicalize_url, next_hop};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(target) = canonicalize_url(text) {
        assert!(target.url.username().is_empty() && target.url.password().is_none());
        assert!(target.url.fragment().is_none());
        let again = canonicalize_url(target.url.as_str())
            .unwrap_or_else(|e| panic!("canonical {} refused again: {e:?}", target.url));
        assert_eq!(again.url, target.url, "canonical form is not a fixed point");
        assert_eq!(again.host, target.host);
        assert_eq!(again.port, target.port);
    }
    if let Ok(Host::Domain(domain)) = canonical_host(text) {
        let again = canonical_host(&domain)
            .unwrap_or_else(|e| panic!("canonical host {domain} refused again: {e:?}"));
        assert_eq!(again, Host::Domain(domain));
    }
    let base = url::Url::parse("https://example.org/a/b?q=1").expect("a fixed base URL");
    if let Ok(hop) = next_hop(&base, text) {
        // No redirect downgrades https to http.
        assert_eq!(hop.url.scheme(), "https", "downgrade to {}", hop.url);
    }
});
