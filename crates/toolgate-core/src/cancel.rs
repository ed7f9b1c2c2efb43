//! Cooperative cancellation shared by a caller and the handler it started: tokio-util's
//! `CancellationToken`, so a front end that already has one for a request (rmcp's per-request
//! token) hands it to the dispatcher as it is, with nothing to forward in between.

use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: CancellationToken,
}

impl CancelToken {
    pub fn new() -> Self {
        CancelToken::default()
    }

    pub fn cancel(&self) {
        self.inner.cancel();
    }

    pub fn is_canceled(&self) -> bool {
        self.inner.is_cancelled()
    }

    /// Resolves once `cancel` has been called (at once if it already was).
    pub async fn canceled(&self) {
        self.inner.cancelled().await;
    }
}

/// Cancelling either is cancelling both: they are one token.
impl From<CancellationToken> for CancelToken {
    fn from(inner: CancellationToken) -> Self {
        CancelToken { inner }
    }
}
