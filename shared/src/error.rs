//! Errors. A duplicate, a conflict or a payload mismatch is an [`Outcome`](crate::Outcome),
//! never an error; errors are what the caller must retry or look into.

use std::error::Error as StdError;
use std::fmt;

/// Boxed error source.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Why key material could not become an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key was not found where the handler said it would be.
    #[error("idempotency key not found at {0}")]
    Missing(String),
    /// The key material is JSON null.
    #[error("idempotency key is null")]
    Null,
    /// The key material is an empty string, object or array.
    #[error("idempotency key is empty")]
    Empty,
    /// The key material has a type the key selector does not accept.
    #[error("idempotency key at {at} is {found}, expected a string or a number")]
    WrongType {
        /// Where the key was looked up.
        at: String,
        /// The JSON type found there.
        found: &'static str,
    },
    /// A JSON Pointer selects the key, but the handler takes the payload as
    /// text or bytes, which is not read as JSON.
    #[error(
        "idempotency key pointer {pointer} reads JSON, but the handler takes the payload as \
         text or bytes: key by the record (KeySelector::Id, DeduplicationId, EventId, or a \
         message attribute) or by KeySelector::custom over KeyInput::payload"
    )]
    NotJson {
        /// The pointer.
        pointer: String,
    },
}

/// A failure of the idempotency store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The record no longer carries this invocation's owner token: its lease
    /// lapsed and another invocation took it over (or it was released).
    #[error("record {id} is no longer owned by this invocation")]
    LeaseLost {
        /// The record id.
        id: String,
    },
    /// The record exceeds the store's item size limit.
    #[error("record {id} is {size} bytes, over the store's item limit")]
    ItemTooLarge {
        /// The record id.
        id: String,
        /// Estimated item size in bytes.
        size: usize,
    },
    /// A stored item could not be read as an idempotency record.
    #[error("stored item {id} is not a valid idempotency record: {reason}")]
    Corrupt {
        /// The record id.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A request no store accepts (e.g. staged writes over the transaction
    /// limit, two writes on one item, an update without changes).
    #[error("invalid request: {reason}")]
    Invalid {
        /// What is wrong with it.
        reason: String,
    },
    /// A transaction kept being cancelled by conflicting requests on its
    /// items (DynamoDB's `TransactionConflict`: a hot item) through every
    /// attempt of the engine's backoff. Nothing was applied; retryable.
    #[error(
        "idempotency store request {operation} was cancelled by conflicting transactions on its \
         items {attempts} times; nothing was applied"
    )]
    Conflict {
        /// The request (`TransactWriteItems`).
        operation: &'static str,
        /// Attempts made.
        attempts: u32,
        /// The last cancellation.
        #[source]
        source: BoxError,
    },
    /// The backend failed (network, throttling, service error after retries).
    #[error("idempotency store request {operation} failed")]
    Backend {
        /// The request that failed (e.g. `PutItem`).
        operation: &'static str,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
}

/// Whether a handler failure should be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Transient: the claim is released so a redelivery runs the handler again.
    Retryable,
    /// Permanent: retrying cannot help (bad input, a business rule said no).
    /// Depending on [`TerminalErrors`](crate::config::TerminalErrors) it is recorded as
    /// the outcome so duplicates replay it instead of running again.
    Terminal,
}

/// The error a handler returns: an error plus whether it is worth retrying.
///
/// Any `std::error::Error` converts into a *retryable* `HandlerError` with `?`;
/// use [`HandlerError::terminal`] for permanent failures.
pub struct HandlerError {
    kind: ErrorKind,
    error: BoxError,
}

impl HandlerError {
    /// A transient failure.
    pub fn retryable(error: impl Into<BoxError>) -> Self {
        Self {
            kind: ErrorKind::Retryable,
            error: error.into(),
        }
    }

    /// A permanent failure.
    pub fn terminal(error: impl Into<BoxError>) -> Self {
        Self {
            kind: ErrorKind::Terminal,
            error: error.into(),
        }
    }

    /// Retryable or terminal.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The underlying error.
    pub fn error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.error
    }

    /// Takes the underlying error.
    pub fn into_error(self) -> BoxError {
        self.error
    }
}

impl<E: StdError + Send + Sync + 'static> From<E> for HandlerError {
    fn from(error: E) -> Self {
        Self::retryable(error)
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerError")
            .field("kind", &self.kind)
            .field("error", &self.error)
            .finish()
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

/// An error from [`Idempotency::run`](crate::Idempotency::run).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The idempotency store failed; the handler may not have run.
    #[error("idempotency store unavailable")]
    Store(#[from] StoreError),
    /// The handler failed; its claim was released (retryable, or terminal
    /// errors not recorded) so a redelivery runs it again.
    #[error("handler failed: {0}")]
    Handler(HandlerError),
    /// The handler ran, but its lease lapsed and another invocation took the
    /// record over before the completion was written. Nothing was overwritten.
    #[error("lease on {key} was lost before completion; the record belongs to another invocation")]
    LeaseLost {
        /// The record id.
        key: String,
    },
    /// The record kept changing under this invocation (expired or deleted
    /// between the claim and the read) beyond the retry bound.
    #[error("record {key} kept changing during the claim; gave up after {attempts} attempts")]
    Contention {
        /// The record id.
        key: String,
        /// Attempts made.
        attempts: u32,
    },
}

impl Error {
    /// Whether a later redelivery can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Handler(e) => e.kind() == ErrorKind::Retryable,
            Error::Store(StoreError::Invalid { .. }) => false,
            _ => true,
        }
    }
}

/// Formats an error with its whole chain of sources (`a: b: c`), for logs.
pub fn report(err: &(dyn StdError + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The `errorType` of an error that none of this crate's types explains.
pub const UNCLASSIFIED: &str = "InvocationError";

/// An error that knows its `errorType` ([`crate::diagnostic`]). Every error
/// type of the crate implements it next to its definition and is listed
/// once in the registry `diagnostic::ERROR_TYPES`.
pub trait ErrorType: StdError + 'static {
    /// The `errorType` Lambda reports for it (`InvalidEvent`,
    /// `StoreUnavailable`, ...).
    fn error_type(&self) -> &'static str;
}

impl HandlerError {
    /// The `errorType` of a handler's error, by its kind: `HandlerFailed`
    /// (retryable) or `HandlerRejected` (terminal).
    pub(crate) fn error_type(&self) -> &'static str {
        match self.kind() {
            ErrorKind::Retryable => "HandlerFailed",
            ErrorKind::Terminal => "HandlerRejected",
        }
    }
}

impl ErrorType for Error {
    fn error_type(&self) -> &'static str {
        match self {
            Error::Store(e) => e.error_type(),
            Error::Handler(e) => e.error_type(),
            Error::LeaseLost { .. } => "LeaseLost",
            Error::Contention { .. } => "Contention",
        }
    }
}

impl ErrorType for StoreError {
    fn error_type(&self) -> &'static str {
        match self {
            StoreError::Backend { .. } => "StoreUnavailable",
            StoreError::Conflict { .. } => "TransactionConflict",
            StoreError::LeaseLost { .. } => "LeaseLost",
            StoreError::ItemTooLarge { .. } => "RecordTooLarge",
            StoreError::Corrupt { .. } => "CorruptRecord",
            StoreError::Invalid { .. } => "InvalidStoreRequest",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_errors_convert_to_retryable() {
        fn parse() -> Result<i32, HandlerError> {
            Ok("x".parse::<i32>()?)
        }
        let e = parse().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Retryable);
        assert!(e.to_string().contains("invalid digit"));
        assert!(Error::Handler(e).is_retryable());
    }

    #[test]
    fn terminal_from_string() {
        let e = HandlerError::terminal("insufficient stock");
        assert_eq!(e.kind(), ErrorKind::Terminal);
        assert_eq!(e.to_string(), "insufficient stock");
        assert!(!Error::Handler(e).is_retryable());
    }

    #[test]
    fn display_does_not_repeat_the_source() {
        let inner = StoreError::Backend {
            operation: "PutItem",
            source: "connection reset".into(),
        };
        assert!(!inner.to_string().contains("connection reset"));
        let outer = Error::from(inner);
        assert!(!outer.to_string().contains("PutItem"));
        assert!(StdError::source(&outer).is_some());
    }
}
