//! OpenTelemetry for toolgate above the core: trace context carried in and out of MCP `_meta`
//! and HTTP headers ([`propagation`]), export over OTLP from `[telemetry]` ([`config`],
//! [`export`]), and the approval store's open tickets as a metric ([`tickets`]).
//!
//! The core records spans and metrics through the OpenTelemetry API
//! ([`toolgate_core::telemetry`]); this crate is where the SDK lives, so only front ends that
//! export pay for it.

pub mod config;
pub mod export;
pub mod propagation;
pub mod tickets;

pub use config::{ConfigError, Protocol, TelemetryConfig};
pub use export::{Exporting, TelemetryError, start};
