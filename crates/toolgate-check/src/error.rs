//! Why a suite could not run. A suite that cannot run reports nothing as passed.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// A case file is unreadable, malformed, has an unknown field or a duplicate id.
    #[error("case file {path}: {message}")]
    Cases { path: PathBuf, message: String },
    /// The report or trace folder could not be written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A part the suite runs against (a local server, the dispatcher, a model) could not be
    /// set up; no case was judged.
    #[error("could not set up the {suite} suite: {message}")]
    Setup {
        suite: &'static str,
        message: String,
    },
}

impl CheckError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CheckError::Io {
            path: path.into(),
            source,
        }
    }

    pub fn setup(suite: &'static str, message: impl std::fmt::Display) -> Self {
        CheckError::Setup {
            suite,
            message: message.to_string(),
        }
    }
}
