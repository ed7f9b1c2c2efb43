//! Why a model call failed, classified so the loop knows whether to retry.

/// A failed model call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The provider answered with an error status.
    #[error("the provider answered {status}: {message}")]
    Status { status: u16, message: String },
    /// The request never got an answer (connection, timeout).
    #[error("could not reach the provider: {0}")]
    Transport(String),
    /// The answer was not in the documented format.
    #[error("the provider's answer could not be read: {0}")]
    Decode(String),
    /// Missing key, bad URL, unknown model name: fix the configuration.
    #[error("configuration: {0}")]
    Config(String),
    /// The embedded engine failed.
    #[error("the local model failed: {0}")]
    Engine(String),
}

impl LlmError {
    /// Whether the same request may succeed later.
    pub fn retryable(&self) -> bool {
        match self {
            LlmError::Status { status, .. } => matches!(status, 408 | 409 | 425 | 429 | 500..=599),
            LlmError::Transport(_) => true,
            LlmError::Decode(_) | LlmError::Config(_) | LlmError::Engine(_) => false,
        }
    }
}
