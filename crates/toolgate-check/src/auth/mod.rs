//! The authorization suite: token cases against the MCP server as an OAuth resource server.
//!
//! Not built yet (issue 13): [`run`] refuses, so `toolgate check auth` cannot pass.

use crate::{CheckError, SuiteOptions, SuiteReport};

pub async fn run(_options: &SuiteOptions) -> Result<SuiteReport, CheckError> {
    Err(CheckError::setup("auth", "this suite is not built yet"))
}
