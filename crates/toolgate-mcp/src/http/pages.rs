//! The routing hook: web pages served on the same listener as `/mcp` (the console), by a crate
//! above this one that the front knows only through [`Pages`].
//!
//! Guarantees: only a path equal to the pages' prefix or under it (`/console`, `/console/...`)
//! is handed over, never `/mcp`, the health paths or the resource metadata; the body is read
//! within the front's body time and size cap first (a slow or oversized body never reaches the
//! pages), and a page's answer is the pages' own (the front adds nothing to it). Everything
//! else the pages need (authentication, CSRF, escaping) is theirs.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use toolgate_core::BoxFuture;

/// Pages served beside the MCP endpoint.
pub trait Pages: Send + Sync {
    /// The path they answer under (`/console`): no trailing slash.
    fn prefix(&self) -> &str;

    /// Answers one request whose path is the prefix or under it, its body read in full.
    fn answer<'a>(&'a self, request: Request<Bytes>) -> BoxFuture<'a, Response<Full<Bytes>>>;
}

/// Whether `path` is `prefix` or under it (`/console/x`, not `/consolex`).
pub fn under(prefix: &str, path: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::under;

    #[test]
    fn only_the_prefix_and_paths_under_it_reach_the_pages() {
        let cases = [
            ("/console", true),
            ("/console/", true),
            ("/console/tickets/abc", true),
            ("/consoles", false),
            ("/mcp", false),
            ("/", false),
            ("/x/console", false),
        ];
        for (path, want) in cases {
            assert_eq!(under("/console", path), want, "{path}");
        }
    }
}
