//! The injection suite: user tasks crossed with injection goals, run through the real loop.
//!
//! Not built yet (issue 13): [`run`] refuses, so `toolgate check injection` cannot pass.

use crate::{CheckError, SuiteOptions, SuiteReport};

pub async fn run(_options: &SuiteOptions) -> Result<SuiteReport, CheckError> {
    Err(CheckError::setup(
        "injection",
        "this suite is not built yet",
    ))
}
