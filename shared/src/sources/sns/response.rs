//! How a subscribed function answers: no partial response, the invocation
//! fails when a notification does, and Lambda's asynchronous retries deliver
//! it again.

use crate::batch::report::{BatchReport, FailureReason};
use crate::error::ErrorKind;
use crate::error::{ErrorType, UNCLASSIFIED};

/// A notification was not done: the invocation fails so that Lambda's
/// asynchronous retry delivers it again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnsError {
    /// A notification failed (the first one in the event; SNS sends one per
    /// invocation).
    #[error(
        "SNS notification {message_id} failed: {reason}; failing the invocation so that \
         Lambda's asynchronous retry delivers it again"
    )]
    Failed {
        /// Its `MessageId` (or a description of a notification without one).
        message_id: String,
        /// Why it failed.
        reason: FailureReason,
        /// How many of the event's notifications failed.
        failed: usize,
    },
}

impl SnsError {
    /// Why the first failed notification failed.
    pub fn reason(&self) -> &FailureReason {
        match self {
            Self::Failed { reason, .. } => reason,
        }
    }
}

/// The `errorType` of a notification's failure.
fn reason_type(reason: &FailureReason) -> &'static str {
    match reason {
        FailureReason::Parse(_)
        | FailureReason::BodyTooLarge { .. }
        | FailureReason::BadSignature(_) => "InvalidEvent",
        FailureReason::Key(_) => "InvalidKey",
        FailureReason::InProgress { .. } => "InProgress",
        FailureReason::PayloadMismatch => "PayloadMismatch",
        FailureReason::Handler {
            kind: ErrorKind::Retryable,
            ..
        } => "HandlerFailed",
        FailureReason::Handler {
            kind: ErrorKind::Terminal,
            ..
        } => "HandlerRejected",
        FailureReason::Store(_) => "StoreUnavailable",
        FailureReason::DuplicateOf { reason, .. } => reason_type(reason),
        _ => UNCLASSIFIED,
    }
}

impl ErrorType for SnsError {
    /// The first failed notification's: `InvalidEvent`, `InvalidKey`,
    /// `InProgress`, `PayloadMismatch`, `HandlerFailed`, `HandlerRejected`,
    /// `StoreUnavailable`.
    fn error_type(&self) -> &'static str {
        reason_type(self.reason())
    }
}

/// The invocation's answer for `report`: `Ok` when every notification is
/// done, else the first failure ([`SnsError::Failed`]).
pub fn answer<T>(report: &BatchReport<T>) -> Result<(), SnsError> {
    let mut failures = report.failures();
    let Some(first) = failures.next() else {
        return Ok(());
    };
    let reason = first
        .outcome
        .as_ref()
        .err()
        .cloned()
        .unwrap_or(FailureReason::Idempotency("no outcome".to_owned()));
    Err(SnsError::Failed {
        message_id: first
            .message_id
            .clone()
            .unwrap_or_else(|| format!("#{} (no MessageId)", first.position)),
        reason,
        failed: 1 + failures.count(),
    })
}
