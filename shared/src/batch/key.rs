//! Where a record's or an event's idempotency key comes from, and what
//! happens when it has none.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde_json::Value;

use super::delivery::{Attribute, Delivery};
use super::envelope::Envelope;
use super::log::Unit;
use super::report::json_type;
use crate::engine::{Idempotency, panic_message};
use crate::error::KeyError;
use crate::key::IdempotencyKey;

/// A key function: gets what the key is selected from and returns the key
/// material.
pub type KeyFn = Arc<dyn Fn(KeyInput<'_>) -> Result<Value, KeyError> + Send + Sync>;

/// What a key is selected from.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct KeyInput<'a> {
    /// The record's one document, the one its handler reads: the parsed
    /// body, the `detail` or parsed `Message` of an opened envelope
    /// ([`crate::envelope`]), or an event invoking the function as
    /// delivered (an SNS notification with its `Message` parsed). A number
    /// `f64` cannot hold exactly is a string of its text.
    pub value: &'a Value,
    /// The delivered record; `None` for an EventBridge event invoking the
    /// function directly.
    pub delivery: Option<&'a dyn Delivery>,
    /// The envelope the record's body was opened from, if any.
    pub envelope: Option<&'a Envelope>,
    /// The payload as delivered, when the handler takes it as text or bytes
    /// ([`PayloadKind`](super::PayloadKind)): what a key function over the
    /// raw payload reads. `value` then is the payload as a JSON string (the
    /// base64 text of its bytes), which no JSON Pointer selects from
    /// ([`KeyError::NotJson`]); `None` when the handler takes JSON.
    pub payload: Option<&'a [u8]>,
}

impl<'a> KeyInput<'a> {
    /// A key input (a source's, or a key function's unit test).
    pub fn new(value: &'a Value, delivery: Option<&'a dyn Delivery>) -> Self {
        Self {
            value,
            delivery,
            envelope: None,
            payload: None,
        }
    }

    /// The same input, with the payload a text or bytes handler takes.
    pub fn with_payload(mut self, payload: Option<&'a [u8]>) -> Self {
        self.payload = payload;
        self
    }

    /// The same input, with the envelope the body was opened from.
    pub fn with_envelope(mut self, envelope: Option<&'a Envelope>) -> Self {
        self.envelope = envelope;
        self
    }

    /// The source's own record, when it is a `R`: `input.raw::<SqsMessage>()`
    /// for an SQS record, `input.raw::<KinesisDelivery>()` for a Kinesis
    /// one.
    pub fn raw<R: 'static>(&self) -> Option<&'a R> {
        self.delivery.and_then(|d| d.as_any().downcast_ref::<R>())
    }
}

impl fmt::Debug for KeyInput<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyInput")
            .field("value", self.value)
            .field("delivery", &self.delivery.map(Delivery::id))
            .field("envelope", &self.envelope.map(Envelope::id))
            .field("payload", &self.payload.map(<[u8]>::len))
            .finish()
    }
}

/// Where an idempotency key comes from, for every source alike (which to
/// choose: `docs/handlers.md`). A key that is absent, null or empty is
/// missing ([`MissingKey`]); any other error (a wrong type, a panicking key
/// function) fails the record or event.
#[derive(Clone)]
#[non_exhaustive]
pub enum KeySelector {
    /// An RFC 6901 JSON Pointer (`/order/id`) into [`KeyInput::value`]: a
    /// string or a number (`"1103"` and `1103` give the same key).
    Pointer(String),
    /// A text attribute of the delivery ([`Delivery::attribute`]): an SQS
    /// message attribute, a UTF-8 Kafka header, an SNS message attribute of
    /// a notification invoking the function.
    MessageAttribute(String),
    /// The delivery's own id ([`Delivery::id`]), or the `id` of an
    /// EventBridge event invoking the function: only redeliveries of one
    /// send have the same one (prefer a business key).
    Id,
    /// The id the wrapping service gave the event, kept across its
    /// retries: the EventBridge `id` or the SNS `MessageId`, of an event
    /// invoking the function or of a body opened as an envelope.
    EventId,
    /// The source's own deduplication id ([`Delivery::deduplication_id`]:
    /// the SQS FIFO `MessageDeduplicationId`).
    DeduplicationId,
    /// A function of the [`KeyInput`] returning any non-empty JSON value
    /// (hashed in canonical form). A panic fails only that record or event.
    Custom(KeyFn),
}

impl KeySelector {
    /// [`KeySelector::Pointer`].
    pub fn pointer(pointer: impl Into<String>) -> Self {
        Self::Pointer(pointer.into())
    }

    /// [`KeySelector::MessageAttribute`].
    pub fn attribute(name: impl Into<String>) -> Self {
        Self::MessageAttribute(name.into())
    }

    /// [`KeySelector::EventId`].
    pub fn event_id() -> Self {
        Self::EventId
    }

    /// [`KeySelector::Custom`].
    pub fn custom<F>(f: F) -> Self
    where
        F: Fn(KeyInput<'_>) -> Result<Value, KeyError> + Send + Sync + 'static,
    {
        Self::Custom(Arc::new(f))
    }

    /// Whether the key of a delivered record is read from its document
    /// ([`KeyInput::value`]), not from the delivery alone.
    pub(crate) fn reads_document(&self) -> bool {
        matches!(self, Self::Pointer(_) | Self::Custom(_))
    }

    /// The key material in `input`. The outer `Err` is a panic of a custom
    /// key function.
    fn select(&self, input: KeyInput<'_>) -> Result<Result<Value, KeyError>, String> {
        let delivery = input.delivery;
        let found = match self {
            // A text or bytes payload is no JSON document.
            // A text or bytes payload is no JSON document: a pointer into it
            // (or, for an SNS notification, one that finds nothing) fails
            // as such, never as a missing key that could run unprotected.
            Self::Pointer(pointer) if input.payload.is_some() => {
                return Ok(match pointer_key(input.value, pointer) {
                    Ok(found) if !input.value.is_string() => Ok(found),
                    _ => Err(KeyError::NotJson {
                        pointer: pointer.clone(),
                    }),
                });
            }
            Self::Pointer(pointer) => return Ok(pointer_key(input.value, pointer)),
            Self::Custom(f) => {
                return catch_unwind(AssertUnwindSafe(|| f(input)))
                    .map_err(|panic| panic_message(&*panic));
            }
            Self::MessageAttribute(name) => match delivery.and_then(|d| d.attribute(name)) {
                Some(Attribute::Text(s)) => Some(s),
                Some(Attribute::Binary) => {
                    let at = format!("message attribute {name}");
                    let found = "a binary attribute";
                    return Ok(Err(KeyError::WrongType { at, found }));
                }
                None => None,
            },
            Self::Id => match delivery {
                Some(d) => d.id(),
                None => input.value.get("id").and_then(Value::as_str),
            },
            Self::EventId => input.envelope.and_then(Envelope::id).or(match delivery {
                // An EventBridge event invoking the function: its `id`.
                None => input.value.get("id").and_then(Value::as_str),
                // An event invoking the function as a record of its source
                // (an EventBridge event, an SNS notification).
                Some(d) => d.event_id(),
            }),
            Self::DeduplicationId => delivery.and_then(|d| d.deduplication_id()),
        };
        let missing = || KeyError::Missing(self.looked_for(delivery));
        Ok(found
            .map(|s| Value::String(s.to_owned()))
            .ok_or_else(missing))
    }

    /// What a missing key was looked for as, for its message.
    fn looked_for(&self, delivery: Option<&dyn Delivery>) -> String {
        match (self, delivery) {
            (Self::MessageAttribute(name), _) => format!("message attribute {name}"),
            (Self::Id, Some(d)) => d.source().id.to_owned(),
            (Self::DeduplicationId, Some(d)) => d.source().deduplication_id.to_owned(),
            (Self::DeduplicationId, None) => "a deduplication id (no record)".to_owned(),
            (Self::EventId, _) => "the event id (an EventBridge id or SNS MessageId; this body \
                                   was not opened as an envelope)"
                .to_owned(),
            // An EventBridge event's `id`.
            _ => "id".to_owned(),
        }
    }
}

impl fmt::Debug for KeySelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pointer(p) => f.debug_tuple("Pointer").field(p).finish(),
            Self::MessageAttribute(a) => f.debug_tuple("MessageAttribute").field(a).finish(),
            Self::Id => f.write_str("Id"),
            Self::EventId => f.write_str("EventId"),
            Self::DeduplicationId => f.write_str("DeduplicationId"),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// What to do with a record or event that has no idempotency key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingKey {
    /// Fail it (it is retried, then goes to the DLQ).
    #[default]
    Fail,
    /// Run the handler without idempotency (a warning is logged); the
    /// outcome is [`Outcome::Unprotected`](crate::Outcome::Unprotected).
    RunUnprotected,
}

/// Why no key came out of [`key_for`].
#[derive(Debug)]
pub(crate) enum KeyFailure {
    /// No usable key (a wrong type; or missing with [`MissingKey::Fail`]).
    Bad(KeyError),
    /// The key function panicked.
    Panic(String),
}

/// The key of one record or event (`unit`, for the log), by `selector`,
/// under the `missing` policy: `Ok(None)` to run unprotected.
pub(crate) fn key_for(
    engine: &Idempotency,
    selector: &KeySelector,
    missing: MissingKey,
    input: KeyInput<'_>,
    unit: &Unit<'_>,
) -> Result<Option<IdempotencyKey>, KeyFailure> {
    let material = selector.select(input).map_err(KeyFailure::Panic)?;
    match material.and_then(|m| engine.key(&m)) {
        Ok(key) => Ok(Some(key)),
        Err(e) if is_missing(&e) && missing == MissingKey::RunUnprotected => {
            let f = unit.fields();
            tracing::warn!(
                message_id = f.message_id,
                event_id = f.event_id,
                sequence_number = f.sequence_number,
                offset = f.offset,
                id_field = f.id_field,
                id = f.id,
                error = %e,
                "no idempotency key: the {} runs unprotected (MissingKey::RunUnprotected)",
                unit.noun
            );
            Ok(None)
        }
        Err(e) => Err(KeyFailure::Bad(e)),
    }
}

/// The key material at `pointer` in `value`: a string or a number.
pub(crate) fn pointer_key(value: &Value, pointer: &str) -> Result<Value, KeyError> {
    match value.pointer(pointer) {
        None if !pointer.is_empty() && !pointer.starts_with('/') => Err(KeyError::Missing(
            format!("{pointer} (not a JSON Pointer: it must start with '/')"),
        )),
        None => Err(KeyError::Missing(pointer.to_owned())),
        Some(Value::Null) => Err(KeyError::Missing(format!("{pointer} (null)"))),
        Some(v @ (Value::String(_) | Value::Number(_))) => Ok(v.clone()),
        Some(other) => Err(KeyError::WrongType {
            at: pointer.to_owned(),
            found: json_type(other),
        }),
    }
}

/// Whether a key error means "no key" (handled by [`MissingKey`]) rather
/// than "a bad key" (always a failure).
fn is_missing(error: &KeyError) -> bool {
    matches!(
        error,
        KeyError::Missing(_) | KeyError::Null | KeyError::Empty
    )
}

/// What is hashed for payload validation (same key, other payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PayloadScope {
    /// The one document the handler and the key read: the parsed body, an
    /// EventBridge `detail`, an SNS `Message` (not the envelope, whose id
    /// and time differ between two publications of one business event).
    #[default]
    Body,
    /// Nothing: no payload validation for this processor.
    None,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointer_keys() {
        let body = json!({"s": "k", "n": 1103, "z": null, "o": {"a": 1}, "b": true, "e": ""});
        assert_eq!(pointer_key(&body, "/s"), Ok(json!("k")));
        assert_eq!(pointer_key(&body, "/n"), Ok(json!(1103)));
        assert!(
            matches!(pointer_key(&body, "/missing"), Err(KeyError::Missing(p)) if p == "/missing")
        );
        assert!(
            matches!(pointer_key(&body, "/z"), Err(KeyError::Missing(p)) if p.contains("null"))
        );
        assert!(
            matches!(pointer_key(&body, "s"), Err(KeyError::Missing(p)) if p.contains("must start with '/'"))
        );
        assert_eq!(
            pointer_key(&body, "/o"),
            Err(KeyError::WrongType {
                at: "/o".into(),
                found: "an object"
            })
        );
        assert!(matches!(
            pointer_key(&body, "/b"),
            Err(KeyError::WrongType {
                found: "a boolean",
                ..
            })
        ));
        // Empty strings pass the selector and are rejected by the key itself.
        assert_eq!(pointer_key(&body, "/e"), Ok(json!("")));
        assert_eq!(IdempotencyKey::new("p", &json!("")), Err(KeyError::Empty));
    }
}
