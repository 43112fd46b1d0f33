//! An SNS notification's `Message`, parsed, and what its key is selected
//! from: one rule for a notification invoking the function and for one
//! delivered in an SQS body.
//!
//! The handler gets the `Message` parsed as JSON when it is JSON text, and
//! as a JSON string (the text itself) when it is not. Keys are selected
//! from the notification with its `Message` so parsed: a business key in
//! the message ([`KeySelector::pointer`]`("/Message/event_id")`), or the
//! SNS `MessageId` (`pointer("/MessageId")`; and [`KeySelector::Id`] for a
//! notification invoking the function), which SNS keeps when it delivers
//! one publication again (not when a publisher publishes twice: prefer a
//! business key).
//!
//! [`KeySelector::pointer`]: crate::KeySelector::pointer
//! [`KeySelector::Id`]: crate::KeySelector::Id

use std::any::type_name;

use aws_lambda_events::sns::SnsRecord;
use serde::de::DeserializeOwned;
use serde_json::Value;

#[cfg(doc)]
use super::SnsProcessor;
use crate::adapter::pipeline::Pipeline;
use crate::adapter::{FailureReason, KeyInput, PayloadScope};
use crate::key::IdempotencyKey;

/// A notification's `Message`, opened.
pub(crate) struct Opened<M> {
    /// The handler's body.
    pub(crate) body: M,
    /// The `Message` parsed as JSON, or the text as a JSON string; numbers
    /// `f64` cannot hold kept exact.
    pub(crate) message: Value,
}

/// Parses `message`, the `Message` of the SNS notification in record
/// `ident`, into `M` (JSON text), or `M` from the text as a JSON string
/// (any other text).
pub(crate) fn open_message<M: DeserializeOwned>(
    ident: &str,
    message: &str,
) -> Result<Opened<M>, FailureReason> {
    let parse = FailureReason::Parse;
    match serde_json::from_str::<Value>(message) {
        Ok(value) => {
            let body: M = serde_json::from_str(message).map_err(|e| {
                parse(format!(
                    "the SNS Message in {ident} does not parse as {}: {e}",
                    type_name::<M>()
                ))
            })?;
            let message = crate::key::exact_material(message, &value).unwrap_or(value);
            Ok(Opened { body, message })
        }
        Err(not_json) => {
            let text = Value::String(message.to_owned());
            let body = M::deserialize(&text).map_err(|e| {
                parse(format!(
                    "the SNS Message in {ident} is not JSON ({not_json}) and its text does not \
                     parse as {}: {e}",
                    type_name::<M>()
                ))
            })?;
            Ok(Opened {
                body,
                message: text,
            })
        }
    }
}

/// The key material of a notification: `notification` (its JSON) with its
/// `Message` replaced by the parsed `message`.
pub(crate) fn material(mut notification: Value, message: &Value) -> Value {
    if let Some(slot) = notification.get_mut("Message") {
        *slot = message.clone();
    }
    notification
}

/// A notification's parsed body, key and payload.
pub(super) struct Parsed<M> {
    pub(super) body: M,
    pub(super) key: Option<IdempotencyKey>,
    pub(super) payload: Option<Value>,
}

/// How a notification invoking the function is parsed and keyed: the part
/// of an [`SnsProcessor`]'s settings its records' preparation reads.
#[derive(Debug, Clone)]
pub(super) struct MessageRules {
    /// [`SnsProcessor::payload`].
    pub(super) payload: PayloadScope,
}

impl MessageRules {
    /// Opens and keys one record's `Sns.Message`.
    pub(super) fn parse<M: DeserializeOwned>(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        record: &SnsRecord,
    ) -> Result<Parsed<M>, FailureReason> {
        let opened = open_message::<M>(&format!("notification {ident}"), &record.sns.message)?;
        let notification = serde_json::to_value(&record.sns).map_err(|e| {
            FailureReason::Parse(format!("the SNS notification {ident} is not JSON: {e}"))
        })?;
        let material = material(notification, &opened.message);
        let key = pipeline.key_of(ident, KeyInput::new(&material, Some(record)))?;
        let payload = match self.payload {
            PayloadScope::None => None,
            PayloadScope::Body => Some(opened.message),
        };
        Ok(Parsed {
            body: opened.body,
            key,
            payload,
        })
    }
}
