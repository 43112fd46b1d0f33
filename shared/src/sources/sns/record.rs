//! An SNS record as the pipeline ([`Delivery`]) and the handler see it: its
//! `Message` parsed (JSON, or its text as a JSON string) and keyed
//! ([`Prepare`]).

use std::any::Any;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{SALVAGE, Sns, SnsRecord};
use crate::batch::SourceNames;
use crate::batch::envelope::open_message;
use crate::batch::{Attribute, Delivery, FailureReason, KeyInput, Pipeline, Prepare, Prepared};
use crate::key::IdempotencyKey;
use crate::sources::hashed;

impl Delivery for SnsRecord {
    fn id(&self) -> Option<&str> {
        Some(self.sns.message_id.as_str()).filter(|id| !id.is_empty())
    }

    fn body(&self) -> Option<&[u8]> {
        Some(self.sns.message.as_bytes())
    }

    /// `String`, `Number` and `String.Array` values are text.
    fn attribute(&self, name: &str) -> Option<Attribute<'_>> {
        let attr = self.sns.message_attributes.get(name)?;
        Some(match attr.data_type.as_str() {
            "Binary" => Attribute::Binary,
            _ => Attribute::Text(&attr.value),
        })
    }

    fn source(&self) -> &'static SourceNames {
        &SALVAGE.names
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One SNS notification as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Notification<M> {
    /// The parsed `Message` (JSON, or its text as a JSON string).
    pub body: M,
    /// The record as Lambda delivered it (`Sns`: `MessageId`, `TopicArn`,
    /// `Subject`, `Timestamp`, `MessageAttributes`, the raw `Message`).
    pub record: SnsRecord,
    /// The notification's idempotency key (`None` when running
    /// unprotected).
    pub key: Option<IdempotencyKey>,
}

impl<M> Notification<M> {
    /// A notification (handler unit tests).
    pub fn new(body: M, record: SnsRecord) -> Self {
        Self {
            body,
            record,
            key: None,
        }
    }
}

/// The key material of a notification invoking the function:
/// `notification` (its JSON) with its `Message` replaced by the parsed
/// `message`, one rule with an SQS body ([`crate::envelope`]).
pub(crate) fn material(mut notification: Value, message: &Value) -> Value {
    if let Some(slot) = notification.get_mut("Message") {
        *slot = message.clone();
    }
    notification
}

impl<M: DeserializeOwned> Prepare<Notification<M>> for Sns {
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        record: SnsRecord,
    ) -> Result<Prepared<Notification<M>>, FailureReason> {
        let opened = open_message::<M>(&format!("notification {ident}"), &record.sns.message)?;
        let notification = serde_json::to_value(&record.sns).map_err(|e| {
            FailureReason::Parse(format!("the SNS notification {ident} is not JSON: {e}"))
        })?;
        let material = material(notification, &opened.document);
        let key = pipeline.key_of(ident, KeyInput::new(&material, Some(&record)))?;
        let (body, payload) = (opened.body, hashed(self.payload, opened.document));
        let notification = Notification {
            body,
            record,
            key: key.clone(),
        };
        Ok(Prepared::new(notification, key, payload))
    }
}
