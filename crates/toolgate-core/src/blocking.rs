//! Blocking work from async code: a commit that may wait on the disk, a lock another call
//! holds, a database round trip.
//!
//! [`run_blocking`] runs it on the calling thread inside `tokio::task::block_in_place` when
//! the runtime is tokio's multi-thread one: the runtime hands this worker's queue to another
//! thread first, so every other task keeps running while this one waits, and the caller pays
//! no trip to the blocking pool and back (two thread switches: a write through the dispatcher
//! at 4.9-5.4x `run_once` with the hop, 1.7-2.2x this way, in `cargo bench -p toolgate-core`).
//! Anywhere else (the current-thread runtime, where blocking the thread would stall every task
//! on it) the work goes to the blocking pool as `spawn_blocking` sends it.
//!
//! Guarantees: the work runs exactly once, to completion, whichever way it goes (a caller
//! dropped while the pool runs it does not stop it, as with `spawn_blocking`); a panic in it is
//! an `internal` error naming `what`, never a panic of the caller's task.

use tokio::runtime::{Handle, RuntimeFlavor};

use crate::error::ToolError;

/// Runs `work` where it may block (see the module documentation); `what` names it in the
/// error of a panic ("the notes store").
pub async fn run_blocking<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    let failed = || ToolError::internal(format!("{what} failed (a panic)"));
    if on_multi_thread_runtime() {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tokio::task::block_in_place(work)
        }))
        .map_err(|_| failed())?;
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| failed())?
}

/// Whether this thread is in tokio's multi-thread runtime, where `block_in_place` may be used.
fn on_multi_thread_runtime() -> bool {
    Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn thread_name() -> Result<Option<String>, ToolError> {
        Ok(std::thread::current().name().map(str::to_owned))
    }

    #[test]
    fn a_current_thread_runtime_is_never_blocked_and_a_multi_thread_one_skips_the_pool_trip() {
        // The current-thread runtime's only thread must stay free: the work goes to the pool.
        let current = tokio::runtime::Builder::new_current_thread()
            .thread_name("caller")
            .build()
            .unwrap();
        let here = std::thread::current().name().map(str::to_owned);
        let ran_on = current.block_on(run_blocking("t", thread_name)).unwrap();
        assert_ne!(ran_on, here, "the current-thread runtime's thread ran it");

        // On the multi-thread runtime the worker that called runs it itself.
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("worker")
            .build()
            .unwrap();
        let (caller, ran_on) = multi.block_on(async {
            tokio::spawn(async {
                let caller = std::thread::current().name().map(str::to_owned);
                (caller, run_blocking("t", thread_name).await.unwrap())
            })
            .await
            .unwrap()
        });
        assert_eq!(caller.as_deref(), Some("worker"));
        assert_eq!(ran_on, caller);
    }

    #[test]
    fn a_panic_in_the_work_is_an_internal_error_on_either_runtime() {
        let boom = || -> Result<(), ToolError> { panic!("boom") };
        let current = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let error = current
            .block_on(run_blocking("the write", boom))
            .unwrap_err();
        assert_eq!(error.code, crate::ErrorCode::Internal);
        assert!(error.message.contains("the write failed"));
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let error = multi
            .block_on(async { tokio::spawn(run_blocking("the write", boom)).await.unwrap() })
            .unwrap_err();
        assert_eq!(error.code, crate::ErrorCode::Internal);
    }
}
