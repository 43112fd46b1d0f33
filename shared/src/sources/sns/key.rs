//! An SNS notification's `Message` parsed (JSON, or its text as a JSON
//! string), and the key material: the notification with that `Message`,
//! one rule for a subscribed function and an SQS body ([`crate::envelope`]).

use aws_lambda_events::sns::SnsRecord;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Notification, Sns};
use crate::batch::envelope::open_message;
use crate::batch::{FailureReason, KeyInput, Pipeline, Prepare, Prepared};
use crate::sources::hashed;

/// The key material of a notification invoking the function:
/// `notification` (its JSON) with its `Message` replaced by the parsed
/// `message`.
pub(crate) fn material(mut notification: Value, message: &Value) -> Value {
    if let Some(slot) = notification.get_mut("Message") {
        *slot = message.clone();
    }
    notification
}

impl<M: DeserializeOwned> Prepare<Notification<M>> for Sns {
    /// Opens and keys one record's `Sns.Message`.
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
