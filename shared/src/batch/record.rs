//! One record as the handler sees it.

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sqs::SqsMessage;
use serde_json::Value;

use crate::key::IdempotencyKey;

use super::{APPROXIMATE_RECEIVE_COUNT, MESSAGE_DEDUPLICATION_ID, MESSAGE_GROUP_ID};

/// One record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqsRecord<M> {
    /// The parsed body, or the parsed `detail` of an EventBridge envelope.
    pub body: M,
    /// The SQS message (ids, attributes, the raw body).
    pub message: SqsMessage,
    /// The EventBridge envelope, when the body was one.
    pub envelope: Option<EventBridgeEvent<Value>>,
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
        self.message
            .attributes
            .get(APPROXIMATE_RECEIVE_COUNT)
            .and_then(|c| c.parse().ok())
    }
}
