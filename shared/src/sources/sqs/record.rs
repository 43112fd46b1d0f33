//! An SQS message as the pipeline ([`Delivery`]) and the handler see it.

use std::any::Any;

use aws_lambda_events::sqs::SqsMessage;

use crate::batch::envelope::Envelope;
use crate::batch::{Attribute, Delivery, IdField, LaneField, SourceNames};
use crate::key::IdempotencyKey;

use super::{APPROXIMATE_RECEIVE_COUNT, MESSAGE_DEDUPLICATION_ID, MESSAGE_GROUP_ID};

/// The names of an SQS message's notions.
pub(crate) static SQS: SourceNames = SourceNames {
    id: "messageId",
    id_field: IdField::MessageId,
    lane_field: LaneField::Group,
    deduplication_id: "attribute MessageDeduplicationId (FIFO queues only)",
    no_lane: "FIFO record without a MessageGroupId attribute (is the queue really FIFO?)",
};

/// One record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqsRecord<M> {
    /// The parsed body; when the processor opened an envelope
    /// ([`EnvelopeMode`](crate::envelope::EnvelopeMode)), the parsed `detail`
    /// of the EventBridge event or the parsed `Message` of the SNS
    /// notification: the document the key and the payload hash read too.
    pub body: M,
    /// The SQS message (ids, attributes, the raw body).
    pub message: SqsMessage,
    /// The envelope the body was opened from: an EventBridge event or an
    /// SNS notification (`MessageId`, `TopicArn`, `Subject`,
    /// `MessageAttributes`, the raw `Message`).
    pub envelope: Option<Envelope>,
    /// The record's idempotency key (`None` when running unprotected).
    pub key: Option<IdempotencyKey>,
}

impl<M> SqsRecord<M> {
    /// A record (handler unit tests).
    pub fn new(body: M, message: SqsMessage) -> Self {
        Self {
            body,
            message,
            envelope: None,
            key: None,
        }
    }

    /// The SQS `messageId` (empty when absent).
    pub fn message_id(&self) -> &str {
        self.message.message_id.as_deref().unwrap_or_default()
    }

    /// The FIFO `MessageGroupId`.
    pub fn group_id(&self) -> Option<&str> {
        self.message.lane()
    }

    /// The FIFO `MessageDeduplicationId`.
    pub fn deduplication_id(&self) -> Option<&str> {
        Delivery::deduplication_id(&self.message)
    }

    /// `ApproximateReceiveCount`: 1 on the first delivery.
    pub fn receive_count(&self) -> Option<u32> {
        Delivery::receive_count(&self.message)
    }
}

impl Delivery for SqsMessage {
    fn id(&self) -> Option<&str> {
        self.message_id.as_deref()
    }

    /// The FIFO `MessageGroupId`.
    fn lane(&self) -> Option<&str> {
        self.attributes.get(MESSAGE_GROUP_ID).map(String::as_str)
    }

    /// The FIFO `SequenceNumber` attribute.
    fn position(&self) -> Option<&str> {
        self.attributes.get("SequenceNumber").map(String::as_str)
    }

    fn body(&self) -> Option<&[u8]> {
        self.body.as_deref().map(str::as_bytes)
    }

    fn attribute(&self, name: &str) -> Option<Attribute<'_>> {
        self.message_attributes
            .get(name)
            .map(|attr| match &attr.string_value {
                Some(s) => Attribute::Text(s),
                None => Attribute::Binary,
            })
    }

    fn deduplication_id(&self) -> Option<&str> {
        self.attributes
            .get(MESSAGE_DEDUPLICATION_ID)
            .map(String::as_str)
    }

    fn receive_count(&self) -> Option<u32> {
        self.attributes
            .get(APPROXIMATE_RECEIVE_COUNT)
            .and_then(|c| c.parse().ok())
    }

    fn source(&self) -> &'static SourceNames {
        &SQS
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
