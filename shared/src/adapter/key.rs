//! Where a record's or an event's idempotency key comes from, and what
//! happens when it has none.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use aws_lambda_events::sqs::SqsMessage;
use serde_json::Value;

use super::Unit;
use crate::engine::{Idempotency, panic_message};
use crate::error::KeyError;
use crate::key::IdempotencyKey;

/// The SQS system attribute holding a FIFO record's deduplication id.
pub const MESSAGE_DEDUPLICATION_ID: &str = "MessageDeduplicationId";

/// A key function: gets what the key is selected from and returns the key
/// material.
pub type KeyFn = Arc<dyn Fn(KeyInput<'_>) -> Result<Value, KeyError> + Send + Sync>;

/// What a key is selected from.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct KeyInput<'a> {
    /// The parsed SQS body, or the EventBridge envelope (`detail` included)
    /// of an event invoking the function or delivered in an SQS body. A
    /// number that `f64` cannot hold exactly, read from the body's or the
    /// invocation's text, is a string of that text.
    pub value: &'a Value,
    /// The SQS message, for a record of an SQS batch; `None` for an
    /// EventBridge event invoking the function directly.
    pub message: Option<&'a SqsMessage>,
}

/// Where an idempotency key comes from, for SQS records and EventBridge
/// events alike.
///
/// A key that is absent ([`KeyError::Missing`]), null or empty is *missing*
/// and handled by [`MissingKey`]; any other error (wrong type, a panicking
/// key function) fails the record or event.
#[derive(Clone)]
#[non_exhaustive]
pub enum KeySelector {
    /// An RFC 6901 JSON Pointer (`/event_id`, `/order/id`, `/items/0/sku`)
    /// into the parsed body, or into the EventBridge envelope (`/id`,
    /// `/detail/order_id`). The value found must be a string or a number;
    /// `"1103"` and `1103` give the same key.
    Pointer(String),
    /// The `stringValue` of an SQS message attribute (SQS only).
    MessageAttribute(String),
    /// The delivery's own id: the SQS `messageId` of a record (it changes
    /// when a producer sends the same message twice, so it only catches
    /// redeliveries of one send: prefer a business key), or the `id` of an
    /// EventBridge event invoking the function (kept by EventBridge across
    /// its retries). For an envelope delivered through SQS, see
    /// [`KeySelector::event_id`].
    Id,
    /// The FIFO `MessageDeduplicationId` attribute (missing on standard
    /// queues and for EventBridge events).
    DeduplicationId,
    /// A function of the [`KeyInput`]. It may return any non-empty JSON value
    /// (objects combine several fields; they are hashed in canonical form).
    /// A panic fails only that record or event.
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

    /// The EventBridge event id of an envelope (`Pointer("/id")`), invoking
    /// the function or delivered through a queue: EventBridge keeps it
    /// across its retries, while the SQS `messageId` differs for each copy
    /// it puts on the queue.
    pub fn event_id() -> Self {
        Self::Pointer("/id".to_owned())
    }

    /// [`KeySelector::Custom`].
    pub fn custom<F>(f: F) -> Self
    where
        F: Fn(KeyInput<'_>) -> Result<Value, KeyError> + Send + Sync + 'static,
    {
        Self::Custom(Arc::new(f))
    }

    /// The key material in `input`. The outer `Err` is a panic of a custom
    /// key function.
    fn select(&self, input: KeyInput<'_>) -> Result<Result<Value, KeyError>, String> {
        let message = input.message;
        Ok(match self {
            Self::Pointer(pointer) => pointer_key(input.value, pointer),
            Self::MessageAttribute(name) => {
                let at = || format!("message attribute {name}");
                match message.and_then(|m| m.message_attributes.get(name)) {
                    None => Err(KeyError::Missing(at())),
                    Some(attr) => match &attr.string_value {
                        Some(s) => Ok(Value::String(s.clone())),
                        None => Err(KeyError::WrongType {
                            at: at(),
                            found: "a binary attribute",
                        }),
                    },
                }
            }
            Self::Id => match message {
                Some(m) => m
                    .message_id
                    .clone()
                    .map(Value::String)
                    .ok_or_else(|| KeyError::Missing("messageId".to_owned())),
                None => input
                    .value
                    .get("id")
                    .and_then(Value::as_str)
                    .map(|id| Value::String(id.to_owned()))
                    .ok_or_else(|| KeyError::Missing("id".to_owned())),
            },
            Self::DeduplicationId => message
                .and_then(|m| m.attributes.get(MESSAGE_DEDUPLICATION_ID))
                .cloned()
                .map(Value::String)
                .ok_or_else(|| {
                    KeyError::Missing(format!(
                        "attribute {MESSAGE_DEDUPLICATION_ID} (FIFO queues only)"
                    ))
                }),
            Self::Custom(f) => {
                return catch_unwind(AssertUnwindSafe(|| f(input)))
                    .map_err(|panic| panic_message(&*panic));
            }
        })
    }
}

impl fmt::Debug for KeySelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pointer(p) => f.debug_tuple("Pointer").field(p).finish(),
            Self::MessageAttribute(a) => f.debug_tuple("MessageAttribute").field(a).finish(),
            Self::Id => f.write_str("Id"),
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
            tracing::warn!(
                message_id = unit.message_id,
                event_id = unit.event_id,
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

/// The JSON type of `value`, for messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether `value` has the shape of an EventBridge envelope: an object with
/// string `detail-type` and `source` and a `detail`.
pub(crate) fn looks_like_envelope(value: &Value) -> bool {
    value.get("detail-type").is_some_and(Value::is_string)
        && value.get("source").is_some_and(Value::is_string)
        && value.get("detail").is_some()
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
