//! The helpers both commit paths share (`commit.rs`, `records.rs`): the
//! handler run with its panic caught, and what a retry after an ambiguous
//! write reads back.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use crate::error::{Error, HandlerError, StoreError};
use crate::record::{Record, Status};

/// Runs the handler, turning a panic into a retryable error.
pub(super) async fn run_guarded<T, F, Fut>(handler: F) -> Result<T, HandlerError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, HandlerError>>,
{
    match AssertUnwindSafe(async move { handler().await })
        .catch_unwind()
        .await
    {
        Ok(result) => result,
        Err(panic) => Err(HandlerError::retryable(format!(
            "handler panicked: {}",
            panic_message(&*panic)
        ))),
    }
}

/// The message of a caught panic payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}

/// Whether `existing` is `ours` as written, found by a retry after an
/// ambiguous attempt: the given status and our owner token (fresh for every
/// claim, so no other invocation writes it).
pub(super) fn written_by(existing: &Record, ours: &Record, status: Status) -> bool {
    existing.status == status && existing.owner.is_some() && existing.owner == ours.owner
}

pub(super) fn unreachable_record<T>() -> Result<T, Error> {
    Err(Error::Store(StoreError::Corrupt {
        id: String::new(),
        reason: "a commit reported a condition it did not carry".into(),
    }))
}
