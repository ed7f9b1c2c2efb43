//! The egress suite: URLs that must be blocked and allowlisted ones that must pass, against the real egress exit.
//!
//! Not built yet (issue 13): [`run`] refuses, so `toolgate check egress` cannot pass.

use crate::{CheckError, SuiteOptions, SuiteReport};

pub async fn run(_options: &SuiteOptions) -> Result<SuiteReport, CheckError> {
    Err(CheckError::setup("egress", "this suite is not built yet"))
}
