//! An SNS notification's `Message`, parsed, and what its key is selected
//! from: one rule for a notification invoking the function and for one
//! delivered in an SQS body.
//!
//! The handler gets the `Message` parsed as JSON when it is JSON text, and
//! as a JSON string (the text itself) when it is not (one rule with a
//! notification opened from an SQS body: [`crate::envelope`]). Keys are selected
//! from the notification with its `Message` so parsed: a business key in
//! the message ([`KeySelector::pointer`]`("/Message/event_id")`), or the
//! SNS `MessageId` (`pointer("/MessageId")`; and [`KeySelector::Id`] for a
//! notification invoking the function), which SNS keeps when it delivers
//! one publication again (not when a publisher publishes twice: prefer a
//! business key).
//!
//! [`KeySelector::pointer`]: crate::KeySelector::pointer
//! [`KeySelector::Id`]: crate::KeySelector::Id

use aws_lambda_events::sns::SnsRecord;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Sns;
use crate::batch::envelope::open_message;
use crate::batch::{FailureReason, KeyInput, PayloadScope, Pipeline};
use crate::key::IdempotencyKey;

/// The key material of a notification invoking the function:
/// `notification` (its JSON) with its `Message` replaced by the parsed
/// `message`.
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
impl Sns {
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
        let material = material(notification, &opened.document);
        let key = pipeline.key_of(ident, KeyInput::new(&material, Some(record)))?;
        let payload = match self.payload {
            PayloadScope::None => None,
            PayloadScope::Body => Some(opened.document),
        };
        Ok(Parsed {
            body: opened.body,
            key,
            payload,
        })
    }
}
