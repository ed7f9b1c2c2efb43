//! toolgate-egress: the single exit for everything that leaves the machine on a tool's behalf.
//!
//! - [`Egress::get`] fetches an `http(s)` URL only if every hop passes the allowlist
//!   ([`EgressConfig`] / [`Policy`]), canonical-host, resolution and address checks, and the
//!   response passes the byte, time and content-type caps. It connects to the addresses it
//!   checked, follows redirects itself, and writes one `egress` trace record per call.
//! - [`SmtpRelay::send`] hands mail to the one configured relay, itself checked against the same
//!   allowlist and address rules.
//! - With the current call's telemetry on, each decision is also one OpenTelemetry span, made
//!   from the same decision as the trace record ([`telemetry`]).
//! - Failures are a closed [`EgressError`] (blocks carry a [`BlockReason`]) that maps onto the
//!   core error algebra with [`EgressError::to_tool_error`].
//!
//! Guarantees: nothing is reachable unless listed; a bare `*` or a wildcard over a public suffix
//! never loads; no hop goes out unchecked; no credentials, cookies or referers are sent. Refuses:
//! userinfo, non-canonical hosts, unlisted IP literals, internal addresses (unless an entry says
//! `allow_private = true`), downgrades, and over-size or off-list responses.

pub mod addr;
pub mod canon;
pub mod config;
pub mod error;
pub mod fetch;
pub mod resolve;
pub mod smtp;
pub mod telemetry;
pub mod trace_event;

pub use addr::{check_addresses, classify};
pub use canon::{
    Host, Scheme, Target, canonical_host, canonicalize_url, check_downgrade, next_hop,
};
pub use config::{AllowEntry, ConfigError, EgressConfig, HostPattern, Permit, Policy};
pub use error::{AddressClass, BlockReason, EgressError, NonCanonical};
pub use fetch::{Egress, FetchedPage, check_encoding, check_framing};
pub use resolve::{ResolveFuture, Resolver, StaticResolver, SystemResolver};
pub use smtp::{OutgoingEmail, SmtpConfig, SmtpRelay, SmtpSecurity};
pub use trace_event::{Decision, EgressDecision, Failure, Request};
