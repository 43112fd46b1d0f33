//! One record as the handler sees it, and an SQS message as the pipeline
//! sees it ([`Delivery`]).

use std::any::Any;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sns::SnsMessage;
use aws_lambda_events::sqs::SqsMessage;
use serde_json::Value;

use crate::adapter::delivery::SQS;
use crate::adapter::{Attribute, Delivery, SourceNames};
use crate::key::IdempotencyKey;

use super::{APPROXIMATE_RECEIVE_COUNT, MESSAGE_DEDUPLICATION_ID, MESSAGE_GROUP_ID};

/// One record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqsRecord<M> {
    /// The parsed body, the parsed `detail` of an EventBridge envelope, or
    /// the parsed `Message` of an SNS notification.
    pub body: M,
    /// The SQS message (ids, attributes, the raw body).
    pub message: SqsMessage,
    /// The EventBridge envelope, when the body was one.
    pub envelope: Option<EventBridgeEvent<Value>>,
    /// The SNS notification, when the body was one (a queue subscribed to
    /// a topic with raw message delivery off): `MessageId`, `TopicArn`,
    /// `Subject`, `MessageAttributes`, the raw `Message`.
    pub sns: Option<SnsMessage>,
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
            sns: None,
            key: None,
        }
    }

    /// The SQS `messageId` (empty when absent).
    pub fn message_id(&self) -> &str {
        self.message.message_id.as_deref().unwrap_or_default()
    }

    /// The FIFO `MessageGroupId`.
    pub fn group_id(&self) -> Option<&str> {
        self.message
            .attributes
            .get(MESSAGE_GROUP_ID)
            .map(String::as_str)
    }

    /// The FIFO `MessageDeduplicationId`.
    pub fn deduplication_id(&self) -> Option<&str> {
        self.message
            .attributes
            .get(MESSAGE_DEDUPLICATION_ID)
            .map(String::as_str)
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
