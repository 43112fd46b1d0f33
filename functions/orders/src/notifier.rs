//! `OrderConfirmed` notifications: the side effect outside DynamoDB
//! (`NOTIFICATIONS_QUEUE_URL`).

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::MessageAttributeValue;
use shared::HandlerError;
use std::sync::Mutex;

use crate::OrderConfirmed;

/// Where `OrderConfirmed` notifications go.
#[async_trait]
pub trait Notifier: Send + Sync + std::fmt::Debug {
    /// Sends one notification and returns its message id. Not idempotent by
    /// itself: the engine runs it once per event (and a FIFO queue's
    /// deduplication backs that up, see [`SqsNotifier`]).
    async fn order_confirmed(&self, message: &OrderConfirmed) -> Result<String, HandlerError>;
}

/// The SQS message attribute naming the notification's type.
pub const TYPE_ATTRIBUTE: &str = "type";

/// Notifications sent to an SQS queue as JSON bodies, with the message
/// attribute `type` = `OrderConfirmed`.
///
/// When the queue URL ends in `.fifo`, each message gets `MessageGroupId` =
/// `order_id` (one order's notifications stay in order) and
/// `MessageDeduplicationId` = the event's idempotency key, its `event_id`
/// ([`deduplication_id`]). SQS then drops a second send of the same event
/// within its 5-minute deduplication window: this covers the one gap the
/// engine leaves, a send that succeeded but whose completion could not be
/// recorded (the claim lapses and a redelivery runs the handler again).
#[derive(Debug, Clone)]
pub struct SqsNotifier {
    client: Client,
    queue_url: String,
    fifo: bool,
}

impl SqsNotifier {
    /// Notifications to `queue_url` (FIFO when it ends in `.fifo`).
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        let queue_url = queue_url.into();
        let fifo = queue_url.ends_with(".fifo");
        Self {
            client,
            queue_url,
            fifo,
        }
    }

    /// Whether the queue is FIFO.
    pub fn is_fifo(&self) -> bool {
        self.fifo
    }
}

/// The longest `MessageDeduplicationId` SQS accepts.
pub const MAX_DEDUPLICATION_ID_LEN: usize = 128;

/// The FIFO `MessageDeduplicationId` of an event: its `event_id` when SQS
/// accepts it as one (1 to 128 printable ASCII characters, no spaces),
/// otherwise the SHA-256 hex of the `event_id` (stable, so duplicates still
/// collide).
pub fn deduplication_id(event_id: &str) -> String {
    let valid = !event_id.is_empty()
        && event_id.len() <= MAX_DEDUPLICATION_ID_LEN
        && event_id.chars().all(|c| c.is_ascii_graphic());
    if valid {
        event_id.to_owned()
    } else {
        shared::sha256_hex(event_id.as_bytes())
    }
}

#[async_trait]
impl Notifier for SqsNotifier {
    async fn order_confirmed(&self, message: &OrderConfirmed) -> Result<String, HandlerError> {
        let body = serde_json::to_string(message)?;
        let kind = MessageAttributeValue::builder()
            .data_type("String")
            .string_value("OrderConfirmed")
            .build()?;
        let mut request = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_attributes(TYPE_ATTRIBUTE, kind);
        if self.fifo {
            request = request
                .message_group_id(&message.order_id)
                .message_deduplication_id(deduplication_id(&message.event_id));
        }
        let out = request.send().await.map_err(shared::sdk_error)?;
        out.message_id()
            .map(str::to_owned)
            .ok_or_else(|| HandlerError::retryable("SendMessage returned no MessageId"))
    }
}

/// A notification kept by [`MemoryNotifier`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The message id given to it.
    pub message_id: String,
    /// The notification.
    pub message: OrderConfirmed,
}

/// Notifications kept in memory and logged (local runs, tests): nothing
/// leaves the process.
#[derive(Debug, Default)]
pub struct MemoryNotifier(Mutex<Vec<Sent>>);

impl MemoryNotifier {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Sent>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What was sent, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.lock().clone()
    }
}

#[async_trait]
impl Notifier for MemoryNotifier {
    async fn order_confirmed(&self, message: &OrderConfirmed) -> Result<String, HandlerError> {
        let body = serde_json::to_string(message)?;
        let mut sent = self.lock();
        let message_id = format!("local-notification-{}", sent.len() + 1);
        tracing::info!(
            message_id = message_id.as_str(),
            body = body.as_str(),
            "OrderConfirmed kept in memory (NOTIFICATIONS_QUEUE_URL not set): this is what would be sent"
        );
        sent.push(Sent {
            message_id: message_id.clone(),
            message: message.clone(),
        });
        Ok(message_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deduplication_ids() {
        assert_eq!(deduplication_id("evt-5c1e0a11"), "evt-5c1e0a11");
        let punctuation = "a!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~z";
        assert_eq!(deduplication_id(punctuation), punctuation);
        let max = "x".repeat(MAX_DEDUPLICATION_ID_LEN);
        assert_eq!(deduplication_id(&max), max);
        for bad in [
            String::new(),
            "x".repeat(MAX_DEDUPLICATION_ID_LEN + 1),
            "with space".to_owned(),
            "café".to_owned(),
        ] {
            let id = deduplication_id(&bad);
            assert_eq!(id.len(), 64, "{bad:?}");
            assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{bad:?}");
            assert_eq!(id, deduplication_id(&bad), "stable");
        }
        assert_ne!(
            deduplication_id("with space"),
            deduplication_id("with  space")
        );
    }
}
