//! What a failed invocation tells Lambda: an `errorType` that says what
//! failed (`InvalidEvent`, `StoreUnavailable`, …) instead of a Rust type
//! name, and an `errorMessage` with the whole chain of causes.
//!
//! Lambda returns both to a synchronous caller (`aws lambda invoke` prints
//! them) and puts them in the on-failure record of an asynchronous
//! invocation (`responsePayload`): what an operator reads first.
//! [`runtime::run`](crate::runtime::run) answers every invocation error this
//! way, and prints the same locally.
//!
//! | `errorType` | what failed | redelivery |
//! | --- | --- | --- |
//! | `InvalidEvent` | the payload is not the trigger's event, or not what the processor accepts, or its `detail` does not parse | fails the same way |
//! | `InvalidKey` | no usable idempotency key (missing, empty, the key function panicked) | fails the same way |
//! | `PayloadMismatch` | the key was used before with another payload | fails the same way |
//! | `InProgress` | another invocation holds the key | succeeds once it is done |
//! | `HandlerFailed` / `HandlerRejected` | the handler's retryable / terminal (not recorded) error | retried / fails the same way |
//! | `StoreUnavailable` | the idempotency store did not answer (network, throttling, service error after the SDK's retries) | succeeds once the store is back |
//! | `LeaseLost` | the lease lapsed and another invocation took the record over | replayed |
//! | `RecordTooLarge`, `CorruptRecord`, `InvalidStoreRequest`, `Contention` | the other [`StoreError`](crate::StoreError)s and [`Error`](crate::Error)s | see their docs |
//! | `UnreportableRecordFailure` | a failed record has no id (`messageId`, `sequenceNumber`), so the whole batch fails | the batch is retried |
//! | `InvocationError` | anything else | – |

use std::error::Error as StdError;

pub use crate::error::{ErrorType, UNCLASSIFIED};

/// Every error type that knows its `errorType` ([`error_type`] searches
/// them in this order): one line per error type. Each says its own
/// `errorType` next to its definition; this list is the only place that
/// names them all.
static ERROR_TYPES: &[fn(&(dyn StdError + 'static)) -> Option<&'static str>] = &[
    classify::<crate::batch::BatchError>,
    classify::<crate::batch::Unfinished>,
    classify::<crate::error::Error>,
    classify::<crate::error::StoreError>,
    classify::<InvalidEvent>,
];

/// The `errorType` of `err` when it is an `E`: one entry of the core's list.
fn classify<E: ErrorType>(err: &(dyn StdError + 'static)) -> Option<&'static str> {
    err.downcast_ref::<E>().map(ErrorType::error_type)
}

/// An invocation payload the function cannot handle (wrong trigger, wrong
/// shape): `errorType` `InvalidEvent`. For functions whose own parsing
/// fails outside the processors of this crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidEvent(pub String);

impl ErrorType for InvalidEvent {
    fn error_type(&self) -> &'static str {
        "InvalidEvent"
    }
}

/// The `errorType` for `err`: the first error of its chain (itself, then its
/// sources) that this crate knows, else [`UNCLASSIFIED`].
pub fn error_type(err: &(dyn StdError + 'static)) -> &'static str {
    std::iter::successors(Some(err), |e| (*e).source())
        .find_map(|e| ERROR_TYPES.iter().find_map(|known| known(e)))
        .unwrap_or(UNCLASSIFIED)
}

/// The Lambda error response for `err`: [`error_type`] and the whole chain
/// of causes ([`report`](crate::report)) as the message.
#[cfg(feature = "lambda")]
pub fn diagnostic(err: &(dyn StdError + 'static)) -> lambda_runtime::Diagnostic {
    lambda_runtime::Diagnostic {
        error_type: error_type(err).to_owned(),
        error_message: crate::error::report(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyError;
    use crate::batch::report::record_outcome;
    use crate::batch::{BatchError, FailureReason, Unfinished};
    use crate::error::{Error, HandlerError, StoreError};

    type Boxed = Box<dyn StdError + Send + Sync + 'static>;

    fn of(err: impl Into<Boxed>) -> &'static str {
        let boxed: Boxed = err.into();
        error_type(&*boxed)
    }

    fn backend() -> StoreError {
        StoreError::Backend {
            operation: "PutItem",
            source: "connection refused".into(),
        }
    }

    /// A one-record event's failure (EventBridge, SNS, the layer), named by
    /// its reason.
    fn failed(reason: FailureReason) -> Unfinished {
        Unfinished::Failed {
            message_id: "e".into(),
            reason,
            failed: 1,
            records: vec!["e".into()],
        }
    }

    #[test]
    fn wrong_events_are_invalid_events() {
        assert_eq!(
            of(BatchError::WrongEvent {
                expected: "an SQS",
                message: "no Records".into()
            }),
            "InvalidEvent"
        );
        assert_eq!(
            of(failed(FailureReason::Parse(
                "not an EventBridge event".into()
            ))),
            "InvalidEvent"
        );
        assert_eq!(
            of(failed(FailureReason::NotAccepted("another source".into()))),
            "InvalidEvent"
        );
        assert_eq!(
            of(InvalidEvent("not a stream event".into())),
            "InvalidEvent"
        );
        assert_eq!(of(failed(FailureReason::Key(KeyError::Null))), "InvalidKey");
    }

    #[test]
    fn store_failures_say_so_through_every_wrapper() {
        assert_eq!(of(backend()), "StoreUnavailable");
        assert_eq!(of(Error::Store(backend())), "StoreUnavailable");
        let reason = record_outcome::<()>(Err(Error::Store(backend()))).unwrap_err();
        assert_eq!(of(failed(reason)), "StoreUnavailable");
        assert_eq!(
            of(Error::Store(StoreError::LeaseLost { id: "k".into() })),
            "LeaseLost"
        );
    }

    #[test]
    fn handler_errors_by_kind_and_conflicts() {
        let handler = |error| {
            let reason = record_outcome::<()>(Err(Error::Handler(error)));
            failed(reason.unwrap_err())
        };
        assert_eq!(
            of(handler(HandlerError::retryable("timeout"))),
            "HandlerFailed"
        );
        assert_eq!(
            of(handler(HandlerError::terminal("no stock"))),
            "HandlerRejected"
        );
        let in_progress = FailureReason::InProgress {
            lease_expires_at_ms: None,
        };
        assert_eq!(of(failed(in_progress)), "InProgress");
        assert_eq!(
            of(failed(FailureReason::PayloadMismatch)),
            "PayloadMismatch"
        );
    }

    /// An error of its own wrapping one of ours is classified by the cause.
    #[test]
    fn the_chain_is_searched_and_unknown_errors_are_unclassified() {
        #[derive(Debug, thiserror::Error)]
        #[error("wrapped")]
        struct Wrapper(#[source] StoreError);
        assert_eq!(of(Wrapper(backend())), "StoreUnavailable");
        assert_eq!(of("something else"), UNCLASSIFIED);
    }

    #[cfg(feature = "lambda")]
    #[test]
    fn the_message_carries_the_causes() {
        let err: Boxed = Error::Store(backend()).into();
        let d = diagnostic(&*err);
        assert_eq!(d.error_type, "StoreUnavailable");
        assert!(d.error_message.contains("PutItem"), "{}", d.error_message);
        assert!(
            d.error_message.contains("connection refused"),
            "{}",
            d.error_message
        );
    }
}
