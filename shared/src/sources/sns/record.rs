//! An SNS record as the pipeline ([`Delivery`]) and the handler see it.

use std::any::Any;

use aws_lambda_events::sns::SnsRecord;

use crate::batch::{Attribute, Delivery, IdField, LaneField, SourceNames};
use crate::key::IdempotencyKey;

/// The names of an SNS notification's notions.
pub(crate) static SNS: SourceNames = SourceNames {
    id: "MessageId",
    id_field: IdField::MessageId,
    lane_field: LaneField::Group,
    deduplication_id: "a deduplication id (SNS notifications invoking a function have none)",
    no_lane: "SNS record without a lane",
};

impl Delivery for SnsRecord {
    /// The SNS `MessageId`.
    fn id(&self) -> Option<&str> {
        Some(self.sns.message_id.as_str()).filter(|id| !id.is_empty())
    }

    /// The `Message` as published.
    fn body(&self) -> Option<&[u8]> {
        Some(self.sns.message.as_bytes())
    }

    /// A message attribute: `String`, `Number` and `String.Array` values
    /// are text, `Binary` ones binary.
    fn attribute(&self, name: &str) -> Option<Attribute<'_>> {
        self.sns
            .message_attributes
            .get(name)
            .map(|attr| match attr.data_type.as_str() {
                "Binary" => Attribute::Binary,
                _ => Attribute::Text(&attr.value),
            })
    }

    fn source(&self) -> &'static SourceNames {
        &SNS
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

    /// The SNS `MessageId`.
    pub fn message_id(&self) -> &str {
        &self.record.sns.message_id
    }

    /// The topic it was published to.
    pub fn topic_arn(&self) -> &str {
        &self.record.sns.topic_arn
    }

    /// The `Subject`, when the publisher set one.
    pub fn subject(&self) -> Option<&str> {
        self.record.sns.subject.as_deref()
    }

    /// The value of the message attribute `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.record
            .sns
            .message_attributes
            .get(name)
            .map(|a| a.value.as_str())
    }
}
