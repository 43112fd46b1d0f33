//! One event per invocation (EventBridge invoking the function, the tower
//! layer): its failures ([`EventError`]), and its path through the engine.

use std::future::Future;
use std::time::{Duration, Instant};

use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use super::delivery::{Delivery, IdField};
use super::key::{KeyFailure, KeyInput, KeySelector, MissingKey, PayloadScope, key_for};
use super::log::{Failure, Unit, finish_one};
use super::{report::kind_name, settings::millis};
use crate::engine::{Idempotency, Outcome};
use crate::error::{Error, ErrorKind, HandlerError, KeyError, report};
use crate::{key::IdempotencyKey, write::IntoStaged};

/// Why an event was not handled: return it from the function so that
/// Lambda retries the event, then sends it to the DLQ.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// The payload is not the event expected (permanent).
    #[error("not {expected} event: {message}")]
    InvalidEvent {
        /// The expected event, with its article (`an EventBridge`).
        expected: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Not the `source` and `detail-type` the processor accepts (permanent).
    #[error(
        "event {event_id}: expected detail-type {expected_detail_type:?} from source \
         {expected_source:?}, got detail-type {found_detail_type:?} from source {found_source:?}: is the \
         EventBridge rule's pattern right? (permanent)"
    )]
    WrongEvent {
        /// The event id.
        event_id: String,
        /// The event's `source`.
        found_source: String,
        /// The event's `detail-type`.
        found_detail_type: String,
        /// The accepted `source`.
        expected_source: String,
        /// The accepted `detail-type`.
        expected_detail_type: String,
    },
    /// The `detail` does not parse into the handler's type (permanent).
    #[error(
        "event {event_id}: detail does not parse as {expected}: {error}; this is permanent \
         (retries fail the same way until the event reaches the DLQ or on-failure destination)"
    )]
    BadDetail {
        /// The event id.
        event_id: String,
        /// The type the handler expects.
        expected: &'static str,
        /// The deserialization error.
        error: String,
    },
    /// No usable idempotency key (permanent).
    #[error("event {event_id}: no usable idempotency key: {error} (permanent)")]
    Key {
        /// The event id.
        event_id: String,
        /// What is wrong with the key.
        error: KeyError,
    },
    /// The key function panicked (permanent).
    #[error("event {event_id}: the key function panicked: {message} (permanent)")]
    KeyPanicked {
        /// The event id.
        event_id: String,
        /// The panic message.
        message: String,
    },
    /// Another invocation is processing the same key (retryable).
    #[error(
        "event {event_id} is being processed by another invocation; failing so that Lambda \
         delivers it again"
    )]
    InProgress {
        /// The event id.
        event_id: String,
        /// When that claim lapses (epoch ms), if known.
        lease_expires_at_ms: Option<u64>,
    },
    /// The key was used before with a different payload (permanent).
    #[error(
        "event {event_id}: its idempotency key was already used with a different detail (permanent)"
    )]
    PayloadMismatch {
        /// The event id.
        event_id: String,
    },
    /// The handler failed (retryable, or terminal and not recorded).
    #[error("event {event_id}: handler failed ({}): {error}", kind_name(error.kind()))]
    Handler {
        /// The event id.
        event_id: String,
        /// The handler's error.
        error: HandlerError,
    },
    /// The engine failed: store unavailable, lease lost, response too large...
    #[error("event {event_id}: idempotency failed")]
    Idempotency {
        /// The event id.
        event_id: String,
        /// The engine's error.
        #[source]
        error: Error,
    },
}

impl EventError {
    /// Whether a redelivery can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::InProgress { .. } => true,
            Self::Handler { error, .. } => error.kind() == ErrorKind::Retryable,
            Self::Idempotency { error, .. } => error.is_retryable(),
            Self::InvalidEvent { .. }
            | Self::WrongEvent { .. }
            | Self::BadDetail { .. }
            | Self::Key { .. }
            | Self::KeyPanicked { .. }
            | Self::PayloadMismatch { .. } => false,
        }
    }
}

impl crate::error::ErrorType for EventError {
    fn error_type(&self) -> &'static str {
        match self {
            Self::InvalidEvent { .. } | Self::WrongEvent { .. } | Self::BadDetail { .. } => {
                "InvalidEvent"
            }
            Self::Key { .. } | Self::KeyPanicked { .. } => "InvalidKey",
            Self::InProgress { .. } => "InProgress",
            Self::PayloadMismatch { .. } => "PayloadMismatch",
            Self::Handler { error, .. } => error.error_type(),
            Self::Idempotency { error, .. } => error.error_type(),
        }
    }
}

impl Failure for EventError {
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
            "Lambda will deliver it again"
        } else {
            "permanent: after Lambda's retries it goes to the DLQ or on-failure destination"
        }
    }

    fn describe(&self) -> String {
        report(self)
    }
}

/// An event ready to run: its key document and delivery, its body, its handler.
type Ready<'a, H> = (&'a Value, Option<&'a (dyn Delivery + Sync)>, &'a Value, H);

/// How single events are keyed and run: the engine, where the key comes
/// from, what to do without one, what payload validation hashes.
#[derive(Debug, Clone)]
pub(crate) struct EventKeys {
    pub(crate) engine: Idempotency,
    pub(crate) key: KeySelector,
    pub(crate) missing_key: MissingKey,
    pub(crate) payload: PayloadScope,
}

impl EventKeys {
    /// Events keyed by `key`, failing without one, their body hashed.
    pub(crate) fn new(engine: Idempotency, key: KeySelector) -> Self {
        let (missing_key, payload) = Default::default();
        Self {
            engine,
            key,
            missing_key,
            payload,
        }
    }

    /// These keys for an invocation of `tenant`
    /// ([`Idempotency::for_tenant`]).
    pub(crate) fn for_tenant(&self, tenant: Option<&str>) -> Self {
        Self {
            engine: self.engine.for_tenant(tenant),
            ..self.clone()
        }
    }

    /// Runs the event `id` (logged as `id_field`, timed from `started`) when
    /// `checked` is ready: keyed, through the engine (its `InProgress` or
    /// `PayloadMismatch` is an `Err`), logged and counted.
    pub(crate) async fn run<T, R, H, Fut>(
        &self,
        (id, id_field): (&str, IdField),
        started: Instant,
        remaining: Option<Duration>,
        checked: Result<Ready<'_, H>, EventError>,
    ) -> Result<Outcome<T>, EventError>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: FnOnce() -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let unit = Unit::new("event", id, id_field);
        let mut key = None;
        let result = async {
            let (document, delivery, body, handler) = checked?;
            let input = KeyInput::new(document, delivery.map(|d| d as &dyn Delivery));
            let (selector, missing, event_id) = (&self.key, self.missing_key, id.to_owned());
            key = key_for(&self.engine, selector, missing, input, &unit).map_err(|e| match e {
                KeyFailure::Bad(error) => EventError::Key { event_id, error },
                KeyFailure::Panic(message) => EventError::KeyPanicked { event_id, message },
            })?;
            let payload = (self.payload == PayloadScope::Body).then_some(body);
            let (engine, event_id) = (&self.engine, id.to_owned());
            match engine.run(key.as_ref(), payload, remaining, handler).await {
                Ok(Outcome::InProgress {
                    lease_expires_at_ms,
                }) => Err(EventError::InProgress {
                    event_id,
                    lease_expires_at_ms,
                }),
                Ok(Outcome::PayloadMismatch) => Err(EventError::PayloadMismatch { event_id }),
                Ok(done) => Ok(done),
                Err(Error::Handler(error)) => Err(EventError::Handler { event_id, error }),
                Err(error) => Err(EventError::Idempotency { event_id, error }),
            }
        }
        .await;
        let key = key.as_ref().map(IdempotencyKey::hash);
        let tenant = self.engine.tenant();
        let unit = Unit {
            key,
            tenant,
            ..unit
        };
        let ms = millis(started.elapsed());
        finish_one(&self.engine, &unit, result.as_ref(), ms);
        result
    }
}
