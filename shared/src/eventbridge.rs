//! EventBridge events invoking the function directly (asynchronous invocation).
//!
//! The key defaults to the event `id`, which EventBridge keeps across its
//! retries; a business key from `detail` can be chosen instead
//! ([`EventKey::Pointer`]). Lambda retries a failed asynchronous invocation
//! (twice by default), then sends the event to the on-failure destination or
//! DLQ, so:
//!
//! * a duplicate returns the stored response (`Ok`);
//! * a terminal error recorded by the engine is `Ok(`[`EventOutcome::Rejected`]`)`:
//!   done, not retried;
//! * an in-progress conflict or a retryable handler error is `Err`: the
//!   function fails and Lambda delivers the event again;
//! * a bad event (its `detail` does not parse, no key) is `Err` too, marked
//!   permanent ([`EventError::is_retryable`] is `false`): the retries fail the
//!   same way and the event ends in the DLQ.
//!
//! EventBridge events delivered through an SQS queue are handled by the
//! [`BatchProcessor`](crate::batch::BatchProcessor), with the same key rules.

use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use aws_lambda_events::eventbridge::EventBridgeEvent;

use crate::batch::{
    MissingKey, PayloadScope, is_missing, json_type, looks_like_envelope, pointer_key,
};
use crate::engine::{Idempotency, Outcome, panic_message};
use crate::error::{Error, ErrorKind, HandlerError, KeyError};
use crate::key::IdempotencyKey;
use crate::write::IntoStaged;

/// A key function over the event envelope (as JSON, `detail` included).
pub type EventKeyFn = Arc<dyn Fn(&Value) -> Result<Value, KeyError> + Send + Sync>;

/// Where an event's idempotency key comes from.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum EventKey {
    /// The event `id` (kept by EventBridge across its retries; a producer
    /// publishing the same business event twice makes two ids).
    #[default]
    Id,
    /// An RFC 6901 JSON Pointer into the envelope: `/detail/order_id`. The
    /// value must be a string or a number.
    Pointer(String),
    /// A function of the envelope; any non-empty JSON value. A panic fails the
    /// event (permanently).
    Custom(EventKeyFn),
}

impl EventKey {
    /// [`EventKey::Pointer`].
    pub fn pointer(pointer: impl Into<String>) -> Self {
        Self::Pointer(pointer.into())
    }

    /// [`EventKey::Custom`].
    pub fn custom<F>(f: F) -> Self
    where
        F: Fn(&Value) -> Result<Value, KeyError> + Send + Sync + 'static,
    {
        Self::Custom(Arc::new(f))
    }
}

impl fmt::Debug for EventKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Id => f.write_str("Id"),
            Self::Pointer(p) => f.debug_tuple("Pointer").field(p).finish(),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// What happened to an event that did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventOutcome<T> {
    /// The handler ran now and its completion was recorded.
    Executed(T),
    /// A duplicate: the handler did not run. The stored response, if kept.
    Replayed(Option<T>),
    /// A terminal handler error recorded as the key's outcome: the event is
    /// done (not retried); duplicates get the same rejection.
    Rejected {
        /// The recorded error.
        error: String,
        /// `true` when replaying an earlier rejection.
        replayed: bool,
    },
    /// The handler ran without idempotency (no key with
    /// [`MissingKey::RunUnprotected`], or the engine's kill switch).
    Unprotected(T),
}

impl<T> EventOutcome<T> {
    /// The handler's response, run now or replayed.
    pub fn response(&self) -> Option<&T> {
        match self {
            Self::Executed(t) | Self::Unprotected(t) | Self::Replayed(Some(t)) => Some(t),
            Self::Replayed(None) | Self::Rejected { .. } => None,
        }
    }
}

/// Why an event was not handled. Return it from the function (it is
/// `Send + Sync + 'static`; use [`crate::error::report`] for the whole chain)
/// so that Lambda retries the event, then sends it to the DLQ.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// The payload is not an EventBridge event (permanent).
    #[error("not an EventBridge event: {0}")]
    NotAnEventBridgeEvent(String),
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
    /// Another invocation is processing the same key: the function fails so
    /// that Lambda's asynchronous retry delivers the event again.
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

fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Retryable => "retryable",
        ErrorKind::Terminal => "terminal",
    }
}

impl EventError {
    /// Whether a redelivery can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::InProgress { .. } => true,
            Self::Handler { error, .. } => error.kind() == ErrorKind::Retryable,
            Self::Idempotency { error, .. } => error.is_retryable(),
            Self::NotAnEventBridgeEvent(_)
            | Self::BadDetail { .. }
            | Self::Key { .. }
            | Self::KeyPanicked { .. }
            | Self::PayloadMismatch { .. } => false,
        }
    }
}

/// Parses an invocation payload as an EventBridge event, rejecting other
/// shapes (an SQS batch, garbage) with a clear error.
pub fn parse_event(value: Value) -> Result<EventBridgeEvent<Value>, EventError> {
    let wrong = |m: String| Err(EventError::NotAnEventBridgeEvent(m));
    let Some(object) = value.as_object() else {
        return wrong(format!("expected a JSON object, got {}", json_type(&value)));
    };
    if object.contains_key("Records") {
        return wrong(
            "it has a Records array: this is an SQS (or SNS, S3) batch; is the function wired to \
             the right trigger?"
                .to_owned(),
        );
    }
    let missing: Vec<&str> = ["detail-type", "source", "detail"]
        .into_iter()
        .filter(|k| !object.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return wrong(format!("missing {}", missing.join(", ")));
    }
    if !looks_like_envelope(&value) {
        return wrong("detail-type and source must be strings".to_owned());
    }
    serde_json::from_value(value).or_else(|e| wrong(format!("malformed envelope: {e}")))
}

/// Runs EventBridge events through the engine.
#[derive(Debug, Clone)]
pub struct EventBridgeProcessor {
    engine: Idempotency,
    key: EventKey,
    missing_key: MissingKey,
    payload: PayloadScope,
}

impl EventBridgeProcessor {
    /// A processor keyed by the event id.
    pub fn new(engine: Idempotency) -> Self {
        Self {
            engine,
            key: EventKey::default(),
            missing_key: MissingKey::default(),
            payload: PayloadScope::default(),
        }
    }

    /// Where the key comes from. Default [`EventKey::Id`].
    pub fn key(mut self, key: EventKey) -> Self {
        self.key = key;
        self
    }

    /// What to do without a key. Default [`MissingKey::Fail`].
    pub fn missing_key(mut self, policy: MissingKey) -> Self {
        self.missing_key = policy;
        self
    }

    /// What payload validation hashes ([`PayloadScope::Body`]: the `detail`).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.payload = scope;
        self
    }

    /// The engine.
    pub fn engine(&self) -> &Idempotency {
        &self.engine
    }

    /// Handles one event: `detail` is parsed into `D`, the key selected, and
    /// `handler` run through the engine. See the module docs for what is
    /// `Ok` and what is `Err`.
    pub async fn process<D, T, R, H, Fut>(
        &self,
        event: EventBridgeEvent<Value>,
        remaining: Option<Duration>,
        handler: H,
    ) -> Result<EventOutcome<T>, EventError>
    where
        D: Serialize + DeserializeOwned,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: FnOnce(EventBridgeEvent<D>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        self.process_with(event, move |engine, key, payload, typed| async move {
            engine
                .run(key.as_ref(), payload.as_ref(), remaining, || handler(typed))
                .await
        })
        .await
    }

    /// Parses, keys, runs `call` (the engine call), logs and counts.
    async fn process_with<D, T, C, Fut>(
        &self,
        event: EventBridgeEvent<Value>,
        call: C,
    ) -> Result<EventOutcome<T>, EventError>
    where
        D: Serialize + DeserializeOwned,
        T: Serialize + DeserializeOwned,
        C: FnOnce(Idempotency, Option<IdempotencyKey>, Option<Value>, EventBridgeEvent<D>) -> Fut,
        Fut: Future<Output = Result<Outcome<T>, Error>>,
    {
        let start = Instant::now();
        let event_id = match event.id.as_deref() {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => "(no id)".to_owned(),
        };
        let result = self.run(&event_id, event, call).await;
        let latency_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        log_event(&event_id, &result, latency_ms);
        crate::metrics::emit(&crate::metrics::Counts {
            undecodable: self.engine.take_undecodable(),
            ..event_counts(&result)
        });
        result.map(|(outcome, _)| outcome)
    }

    async fn run<D, T, C, Fut>(
        &self,
        event_id: &str,
        event: EventBridgeEvent<Value>,
        call: C,
    ) -> Result<(EventOutcome<T>, Option<IdempotencyKey>), EventError>
    where
        D: Serialize + DeserializeOwned,
        T: Serialize + DeserializeOwned,
        C: FnOnce(Idempotency, Option<IdempotencyKey>, Option<Value>, EventBridgeEvent<D>) -> Fut,
        Fut: Future<Output = Result<Outcome<T>, Error>>,
    {
        let id = || event_id.to_owned();
        let envelope = serde_json::to_value(&event)
            .map_err(|e| EventError::NotAnEventBridgeEvent(e.to_string()))?;
        let typed: EventBridgeEvent<D> =
            serde_json::from_value(envelope.clone()).map_err(|e| EventError::BadDetail {
                event_id: id(),
                expected: std::any::type_name::<D>(),
                error: e.to_string(),
            })?;
        let key = self.key_for(event_id, &event, &envelope)?;
        let payload = match self.payload {
            PayloadScope::Body => Some(event.detail),
            PayloadScope::None => None,
        };
        let result = call(self.engine.clone(), key.clone(), payload, typed).await;
        let outcome = match result {
            Ok(Outcome::Executed(t)) => EventOutcome::Executed(t),
            Ok(Outcome::Replayed(t)) => EventOutcome::Replayed(t),
            Ok(Outcome::Unprotected(t)) => EventOutcome::Unprotected(t),
            Ok(Outcome::Rejected { error, replayed }) => EventOutcome::Rejected { error, replayed },
            Ok(Outcome::InProgress {
                lease_expires_at_ms,
            }) => {
                return Err(EventError::InProgress {
                    event_id: id(),
                    lease_expires_at_ms,
                });
            }
            Ok(Outcome::PayloadMismatch) => {
                return Err(EventError::PayloadMismatch { event_id: id() });
            }
            Err(Error::Handler(error)) => {
                return Err(EventError::Handler {
                    event_id: id(),
                    error,
                });
            }
            Err(error) => {
                return Err(EventError::Idempotency {
                    event_id: id(),
                    error,
                });
            }
        };
        Ok((outcome, key))
    }

    fn key_for(
        &self,
        event_id: &str,
        event: &EventBridgeEvent<Value>,
        envelope: &Value,
    ) -> Result<Option<IdempotencyKey>, EventError> {
        let material = match &self.key {
            EventKey::Id => event
                .id
                .clone()
                .map(Value::String)
                .ok_or_else(|| KeyError::Missing("id".to_owned())),
            EventKey::Pointer(pointer) => pointer_key(envelope, pointer),
            EventKey::Custom(f) => {
                catch_unwind(AssertUnwindSafe(|| f(envelope))).map_err(|panic| {
                    EventError::KeyPanicked {
                        event_id: event_id.to_owned(),
                        message: panic_message(&*panic),
                    }
                })?
            }
        };
        match material.and_then(|m| self.engine.key(&m)) {
            Ok(key) => Ok(Some(key)),
            Err(e) if is_missing(&e) && self.missing_key == MissingKey::RunUnprotected => {
                tracing::warn!(
                    event_id,
                    error = %e,
                    "no idempotency key: the event runs unprotected (MissingKey::RunUnprotected)"
                );
                Ok(None)
            }
            Err(error) => Err(EventError::Key {
                event_id: event_id.to_owned(),
                error,
            }),
        }
    }
}

/// One log line per event; the key appears only as its hash.
/// The metric counts of one event.
fn event_counts<T>(
    result: &Result<(EventOutcome<T>, Option<IdempotencyKey>), EventError>,
) -> crate::metrics::Counts {
    let mut counts = crate::metrics::Counts::default();
    match result {
        Ok((EventOutcome::Executed(_) | EventOutcome::Unprotected(_), _)) => counts.processed = 1,
        Ok((EventOutcome::Replayed(_), _))
        | Ok((EventOutcome::Rejected { replayed: true, .. }, _)) => counts.replayed = 1,
        Ok((EventOutcome::Rejected { .. }, _)) => counts.rejected = 1,
        Err(EventError::InProgress { .. }) => {
            counts.in_progress = 1;
            counts.failed = 1;
        }
        Err(_) => counts.failed = 1,
    }
    counts
}

fn log_event<T>(
    event_id: &str,
    result: &Result<(EventOutcome<T>, Option<IdempotencyKey>), EventError>,
    latency_ms: u64,
) {
    match result {
        Ok((outcome, key)) => {
            let key = key.as_ref().map(IdempotencyKey::hash);
            match outcome {
                EventOutcome::Executed(_) => {
                    tracing::info!(
                        event_id,
                        key,
                        outcome = "executed",
                        latency_ms,
                        "event processed"
                    );
                }
                EventOutcome::Replayed(_) => tracing::info!(
                    event_id,
                    key,
                    outcome = "replayed",
                    latency_ms,
                    "duplicate event: the stored outcome is replayed, the handler did not run"
                ),
                EventOutcome::Rejected { error, replayed } => tracing::warn!(
                    event_id,
                    key,
                    outcome = "rejected",
                    replayed,
                    error = error.as_str(),
                    latency_ms,
                    "event rejected with a recorded terminal error (done, not retried)"
                ),
                EventOutcome::Unprotected(_) => tracing::warn!(
                    event_id,
                    outcome = "unprotected",
                    latency_ms,
                    "event processed without idempotency protection"
                ),
            }
        }
        Err(error) if error.is_retryable() => tracing::warn!(
            event_id,
            outcome = "failed",
            retryable = true,
            error = %crate::error::report(error),
            latency_ms,
            "event failed; Lambda will deliver it again"
        ),
        Err(error) => tracing::error!(
            event_id,
            outcome = "failed",
            retryable = false,
            error = %crate::error::report(error),
            latency_ms,
            "event failed permanently; after Lambda's retries it goes to the DLQ"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::testkit::{T0, engine_with, event_json, memory_engine};
    use crate::record::{Record, Status};
    use crate::{Config, TerminalErrors};
    use serde::Deserialize;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    #[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
    struct OrderPlaced {
        order_id: String,
        sku: String,
        quantity: u32,
    }

    fn order_placed() -> EventBridgeEvent<Value> {
        parse_event(event_json("inventory-order-placed.json")).unwrap()
    }

    async fn reserve(
        runs: &AtomicUsize,
        e: EventBridgeEvent<OrderPlaced>,
    ) -> Result<Value, HandlerError> {
        runs.fetch_add(1, SeqCst);
        if e.detail.quantity > 100 {
            return Err(HandlerError::terminal(format!(
                "insufficient stock for {} x {}",
                e.detail.quantity, e.detail.sku
            )));
        }
        Ok(json!({"reserved": e.detail.order_id, "event": e.id}))
    }

    #[tokio::test]
    async fn keyed_by_event_id_and_duplicates_replay() {
        let (engine, store, _) = memory_engine();
        let processor = EventBridgeProcessor::new(engine.clone());
        let runs = AtomicUsize::new(0);
        let first = processor
            .process(order_placed(), None, |e| reserve(&runs, e))
            .await
            .unwrap();
        let expected =
            json!({"reserved": "ord-1001", "event": "4197b62e-be24-4f92-8058-adf067913c93"});
        assert_eq!(first, EventOutcome::Executed(expected.clone()));
        let again = processor
            .process(order_placed(), None, |e| reserve(&runs, e))
            .await
            .unwrap();
        assert_eq!(again, EventOutcome::Replayed(Some(expected.clone())));
        assert_eq!(again.response(), Some(&expected));
        assert_eq!(runs.load(SeqCst), 1);
        // The record is the event id's.
        let key = engine
            .key(&json!("4197b62e-be24-4f92-8058-adf067913c93"))
            .unwrap();
        assert!(
            crate::Store::get(&store, key.as_str())
                .await
                .unwrap()
                .is_some()
        );
    }

    #[tokio::test]
    async fn business_key_from_detail() {
        let (engine, _, _) = memory_engine();
        let processor =
            EventBridgeProcessor::new(engine).key(EventKey::pointer("/detail/order_id"));
        let runs = AtomicUsize::new(0);
        processor
            .process(order_placed(), None, |e| reserve(&runs, e))
            .await
            .unwrap();
        // The same order published again: a new event id, same detail.
        let mut republished = order_placed();
        republished.id = Some("0f0f0f0f-0000-4000-8000-000000000000".into());
        let outcome = processor
            .process(republished, None, |e| reserve(&runs, e))
            .await
            .unwrap();
        assert!(matches!(outcome, EventOutcome::Replayed(Some(_))));
        assert_eq!(runs.load(SeqCst), 1);
        // The same order id with another detail is a mismatch (permanent).
        let mut changed = order_placed();
        changed.detail["quantity"] = json!(3);
        let err = processor
            .process(changed, None, |e| reserve(&runs, e))
            .await
            .unwrap_err();
        assert!(matches!(err, EventError::PayloadMismatch { .. }), "{err}");
        assert!(!err.is_retryable());
    }

    #[tokio::test]
    async fn in_progress_is_an_error_to_retry() {
        let (engine, _, clock) = memory_engine();
        let key = engine
            .key(&json!("4197b62e-be24-4f92-8058-adf067913c93"))
            .unwrap();
        let held = Record {
            id: key.as_str().to_owned(),
            status: Status::InProgress,
            expiration: T0 / 1000 + 3600,
            in_progress_expiration: Some(T0 + 10_000),
            data: None,
            error: None,
            validation: None,
            owner: Some("another".into()),
            outbox: None,
        };
        engine.store().claim(&held, T0).await.unwrap();
        let processor = EventBridgeProcessor::new(engine);
        let runs = AtomicUsize::new(0);
        let err = processor
            .process(order_placed(), None, |e| reserve(&runs, e))
            .await
            .unwrap_err();
        match &err {
            EventError::InProgress {
                event_id,
                lease_expires_at_ms,
            } => {
                assert_eq!(event_id, "4197b62e-be24-4f92-8058-adf067913c93");
                assert_eq!(*lease_expires_at_ms, Some(T0 + 10_000));
            }
            other => panic!("{other:?}"),
        }
        assert!(err.is_retryable());
        assert_eq!(runs.load(SeqCst), 0);
        // Lambda's retry after the holder's lease lapsed runs it.
        clock.advance(Duration::from_secs(11));
        let outcome = processor
            .process(order_placed(), None, |e| reserve(&runs, e))
            .await
            .unwrap();
        assert!(matches!(outcome, EventOutcome::Executed(_)));
    }

    #[tokio::test]
    async fn terminal_errors_are_recorded() {
        let (engine, _, _) =
            engine_with(Config::with_prefix("test.eb").on_terminal_error(TerminalErrors::Record));
        let processor = EventBridgeProcessor::new(engine);
        let runs = AtomicUsize::new(0);
        let event = || parse_event(event_json("inventory-insufficient-stock.json")).unwrap();
        for replayed in [false, true] {
            let outcome = processor
                .process(event(), None, |e| reserve(&runs, e))
                .await
                .unwrap();
            assert_eq!(
                outcome,
                EventOutcome::Rejected {
                    error: "insufficient stock for 1000 x SKU-RED-MUG".into(),
                    replayed
                }
            );
            assert_eq!(outcome.response(), None);
        }
        assert_eq!(runs.load(SeqCst), 1);

        // With the default policy a terminal error is an error, not retryable.
        let (engine, _, _) = memory_engine();
        let err = EventBridgeProcessor::new(engine)
            .process(event(), None, |e| reserve(&runs, e))
            .await
            .unwrap_err();
        assert!(
            matches!(err, EventError::Handler { .. }) && !err.is_retryable(),
            "{err}"
        );
        assert!(
            err.to_string().contains("(terminal): insufficient stock"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn retryable_errors_and_panics_release_the_claim() {
        let (engine, store, _) = memory_engine();
        let processor = EventBridgeProcessor::new(engine);
        let err = processor
            .process(
                order_placed(),
                None,
                |_e: EventBridgeEvent<OrderPlaced>| async {
                    Err::<(), _>(HandlerError::retryable("warehouse API timeout"))
                },
            )
            .await
            .unwrap_err();
        assert!(err.is_retryable());
        assert!(err.to_string().contains("warehouse API timeout"), "{err}");
        let err = processor
            .process(
                order_placed(),
                None,
                |_e: EventBridgeEvent<OrderPlaced>| async {
                    if true {
                        panic!("handler bug");
                    }
                    Ok::<(), HandlerError>(())
                },
            )
            .await
            .unwrap_err();
        assert!(
            err.is_retryable() && err.to_string().contains("handler bug"),
            "{err}"
        );
        assert!(store.is_empty());
        let runs = AtomicUsize::new(0);
        assert!(
            processor
                .process(order_placed(), None, |e| reserve(&runs, e))
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn bad_detail_is_a_permanent_error() {
        let (engine, store, _) = memory_engine();
        let mut event = order_placed();
        event.detail["quantity"] = json!("two");
        let runs = AtomicUsize::new(0);
        let err = EventBridgeProcessor::new(engine)
            .process(event, None, |e| reserve(&runs, e))
            .await
            .unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, EventError::BadDetail { .. }), "{message}");
        assert!(!err.is_retryable());
        assert!(
            message.contains("4197b62e-be24-4f92-8058-adf067913c93"),
            "{message}"
        );
        assert!(
            message.contains("OrderPlaced") && message.contains("permanent"),
            "{message}"
        );
        assert!(message.contains("invalid type"), "{message}");
        assert_eq!(runs.load(SeqCst), 0);
        assert!(store.is_empty());
    }

    #[tokio::test]
    async fn missing_keys() {
        let runs = AtomicUsize::new(0);
        let (engine, _, _) = memory_engine();
        let processor =
            EventBridgeProcessor::new(engine).key(EventKey::pointer("/detail/customer_id"));
        let err = processor
            .process(order_placed(), None, |e| reserve(&runs, e))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, EventError::Key { error: KeyError::Missing(p), .. } if p == "/detail/customer_id"),
            "{err}"
        );
        assert!(!err.is_retryable());
        let outcome = processor
            .missing_key(MissingKey::RunUnprotected)
            .process(order_placed(), None, |e| reserve(&runs, e))
            .await
            .unwrap();
        assert!(matches!(outcome, EventOutcome::Unprotected(_)));
        // No id at all.
        let (engine, _, _) = memory_engine();
        let mut anonymous = order_placed();
        anonymous.id = None;
        let err = EventBridgeProcessor::new(engine)
            .process(anonymous, None, |e| reserve(&runs, e))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("(no id)"), "{err}");
        // A panicking key function.
        let (engine, _, _) = memory_engine();
        let err = EventBridgeProcessor::new(engine)
            .key(EventKey::custom(|_| panic!("key bug")))
            .process(order_placed(), None, |e| reserve(&runs, e))
            .await
            .unwrap_err();
        assert!(matches!(&err, EventError::KeyPanicked { message, .. } if message == "key bug"));
        assert_eq!(runs.load(SeqCst), 1);
    }

    #[test]
    fn wrong_shapes_are_not_eventbridge_events() {
        let cases = [
            (event_json("orders-standard.json"), "Records array"),
            (event_json("payments-fifo.json"), "SQS"),
            (json!([1, 2]), "got an array"),
            (json!(null), "got null"),
            (
                json!({"hello": "world"}),
                "missing detail-type, source, detail",
            ),
            (
                json!({"detail-type": 1, "source": "s", "detail": {}}),
                "must be strings",
            ),
            (
                json!({"detail-type": "X", "source": "s", "detail": {}, "time": "yesterday"}),
                "malformed envelope",
            ),
        ];
        for (value, expected) in cases {
            let err = parse_event(value.clone()).unwrap_err();
            assert!(
                matches!(err, EventError::NotAnEventBridgeEvent(_)),
                "{value}"
            );
            assert!(!err.is_retryable());
            assert!(err.to_string().contains(expected), "{value}: {err}");
        }
        assert!(parse_event(event_json("inventory-insufficient-stock.json")).is_ok());
    }

    #[test]
    fn process_future_is_send() {
        fn assert_send<F: Future + Send>(_: F) {}
        let (engine, _, _) = memory_engine();
        let processor = EventBridgeProcessor::new(engine);
        assert_send(processor.process(
            order_placed(),
            None,
            |e: EventBridgeEvent<Value>| async move { Ok::<_, HandlerError>(e.detail) },
        ));
    }
}
