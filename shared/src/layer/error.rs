//! Why the layer did not answer an invocation with an outcome.

use crate::batch::Failure;
use crate::error::{Error, ErrorKind, HandlerError, KeyError, report};

/// Why an [`IdempotencyService`](super::IdempotencyService) did not answer
/// an invocation. It reaches the runtime through the inner service's error
/// type (`S::Error: From<LayerError>`: `lambda_runtime::Error` is), so the
/// invocation fails and Lambda retries an asynchronous one, then sends it
/// to the on-failure destination or DLQ. The inner service's own errors
/// are not wrapped: they come back as it returned them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LayerError {
    /// The payload is not what the layer's [`Shape`](super::Shape) reads
    /// (permanent).
    #[error("not the event the idempotency layer expects: {0} (permanent)")]
    InvalidEvent(String),
    /// No usable idempotency key (permanent).
    #[error("event {id}: no usable idempotency key: {error} (permanent)")]
    Key {
        /// The event id (or the Lambda request id).
        id: String,
        /// What is wrong with the key.
        error: KeyError,
    },
    /// The key function panicked (permanent).
    #[error("event {id}: the key function panicked: {message} (permanent)")]
    KeyPanicked {
        /// The event id (or the Lambda request id).
        id: String,
        /// The panic message.
        message: String,
    },
    /// Another invocation is processing the same key: the invocation fails
    /// so that it is delivered again.
    #[error(
        "event {id} is being processed by another invocation; failing so that it is delivered again"
    )]
    InProgress {
        /// The event id (or the Lambda request id).
        id: String,
        /// When that claim lapses (epoch ms), if known.
        lease_expires_at_ms: Option<u64>,
    },
    /// The key was used before with a different payload (permanent).
    #[error(
        "event {id}: its idempotency key was already used with a different payload (permanent)"
    )]
    PayloadMismatch {
        /// The event id (or the Lambda request id).
        id: String,
    },
    /// The inner service failed without an error of its own: it panicked.
    /// The claim was released; a redelivery runs it again.
    #[error("event {id}: the handler failed: {error}")]
    Handler {
        /// The event id (or the Lambda request id).
        id: String,
        /// What failed.
        error: HandlerError,
    },
    /// The engine failed: store unavailable, lease lost, response too large...
    #[error("event {id}: idempotency failed")]
    Idempotency {
        /// The event id (or the Lambda request id).
        id: String,
        /// The engine's error.
        #[source]
        error: Error,
    },
}

impl LayerError {
    /// Whether a redelivery can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::InProgress { .. } => true,
            Self::Handler { error, .. } => error.kind() == ErrorKind::Retryable,
            Self::Idempotency { error, .. } => error.is_retryable(),
            Self::InvalidEvent(_)
            | Self::Key { .. }
            | Self::KeyPanicked { .. }
            | Self::PayloadMismatch { .. } => false,
        }
    }
}

impl crate::error::ErrorType for LayerError {
    fn error_type(&self) -> &'static str {
        match self {
            Self::InvalidEvent(_) => "InvalidEvent",
            Self::Key { .. } | Self::KeyPanicked { .. } => "InvalidKey",
            Self::InProgress { .. } => "InProgress",
            Self::PayloadMismatch { .. } => "PayloadMismatch",
            Self::Handler { error, .. } => error.error_type(),
            Self::Idempotency { error, .. } => error.error_type(),
        }
    }
}

impl Failure for LayerError {
    fn in_progress(&self) -> bool {
        matches!(self, Self::InProgress { .. })
    }

    fn expected(&self) -> bool {
        self.is_retryable()
    }

    fn retryable(&self) -> Option<bool> {
        Some(self.is_retryable())
    }

    fn next(&self) -> &'static str {
        if self.is_retryable() {
            "the invocation fails; a retry delivers it again"
        } else {
            "permanent: retries fail the same way"
        }
    }

    fn describe(&self) -> String {
        report(self)
    }
}
