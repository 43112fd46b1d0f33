//! Who sends the requests: the [`Publisher`] trait, what it answers per
//! message ([`Delivery`]), and the [`PrintPublisher`] of a local run.

use async_trait::async_trait;

use crate::{EventPut, SqsSend};

/// What became of one message in one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Accepted by the service.
    Published,
    /// Not accepted; may succeed later (throttling, 5xx, a lost answer).
    Retry(String),
    /// Refused for good (the sender's fault): skipped as poison.
    Poison(String),
}

/// Sends requests. [`crate::aws::AwsPublisher`] calls SQS and EventBridge;
/// [`PrintPublisher`] prints what it would send.
#[async_trait]
pub trait Publisher: Send + Sync {
    /// One `SendMessageBatch` (≤ 10 entries, one queue): one [`Delivery`] per
    /// entry, in order.
    async fn send_message_batch(&self, queue_url: &str, entries: &[SqsSend]) -> Vec<Delivery>;
    /// One `PutEvents` (≤ 10 entries): one [`Delivery`] per entry, in order.
    async fn put_events(&self, entries: &[EventPut]) -> Vec<Delivery>;
}

/// Prints each request as one JSON line on stdout and reports every entry
/// published: what a local run (`--event`) would publish.
#[derive(Debug, Default, Clone, Copy)]
pub struct PrintPublisher;

#[async_trait]
impl Publisher for PrintPublisher {
    async fn send_message_batch(&self, queue_url: &str, entries: &[SqsSend]) -> Vec<Delivery> {
        let line = serde_json::json!({
            "would_publish": "SendMessageBatch",
            "QueueUrl": queue_url,
            "Entries": entries,
        });
        println!("{line}");
        vec![Delivery::Published; entries.len()]
    }

    async fn put_events(&self, entries: &[EventPut]) -> Vec<Delivery> {
        let line = serde_json::json!({"would_publish": "PutEvents", "Entries": entries});
        println!("{line}");
        vec![Delivery::Published; entries.len()]
    }
}
