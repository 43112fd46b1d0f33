//! Who sends the requests: the [`Publisher`] trait, what it answers per
//! message ([`Delivery`]), the [`AwsPublisher`] that calls SQS and
//! EventBridge and the [`PrintPublisher`] of a local run.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry as SqsEntry};
use lambda_idempotency::outbox::{EventPut, SqsSend};
use serde::Serialize;

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

/// One request of ≤ 10 entries, as a local run prints it
/// (`{"would_publish": "SendMessageBatch", "QueueUrl": .., "Entries": ..}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "would_publish", rename_all_fields = "PascalCase")]
#[allow(missing_docs, reason = "the services' own names")]
pub enum Request {
    SendMessageBatch {
        queue_url: String,
        entries: Vec<SqsSend>,
    },
    PutEvents {
        entries: Vec<EventPut>,
    },
}

impl Request {
    /// Its entries.
    pub fn len(&self) -> usize {
        match self {
            Self::SendMessageBatch { entries, .. } => entries.len(),
            Self::PutEvents { entries } => entries.len(),
        }
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Sends requests: one [`Delivery`] per entry, in order.
#[async_trait]
pub trait Publisher: Send + Sync + std::fmt::Debug {
    /// Sends one `SendMessageBatch` or `PutEvents`.
    async fn send(&self, request: &Request) -> Vec<Delivery>;
}

/// Prints each request as one JSON line on stdout and reports every entry
/// published: what a local run (`--event`) would publish.
#[derive(Debug, Default, Clone, Copy)]
pub struct PrintPublisher;

#[async_trait]
impl Publisher for PrintPublisher {
    async fn send(&self, request: &Request) -> Vec<Delivery> {
        println!("{}", serde_json::json!(request));
        vec![Delivery::Published; request.len()]
    }
}

/// SQS and EventBridge clients.
#[derive(Debug, Clone)]
pub struct AwsPublisher {
    sqs: aws_sdk_sqs::Client,
    events: aws_sdk_eventbridge::Client,
}

impl AwsPublisher {
    /// Clients from one SDK configuration.
    pub fn new(config: &aws_config::SdkConfig) -> Self {
        let sqs = aws_sdk_sqs::Client::new(config);
        Self {
            sqs,
            events: aws_sdk_eventbridge::Client::new(config),
        }
    }

    /// Clients from the environment (the library's retries and timeouts;
    /// `AWS_ENDPOINT_URL` honoured).
    pub async fn from_env() -> Self {
        Self::new(&lambda_idempotency::aws::aws_sdk_config().await)
    }
}

/// A failed entry: poison when retrying cannot fix it.
fn failed(operation: &str, code: &str, message: Option<&str>, poison: bool) -> Delivery {
    let reason = format!(
        "{operation} entry failed: {code} ({})",
        message.unwrap_or("no message")
    );
    if poison {
        Delivery::Poison(reason)
    } else {
        Delivery::Retry(reason)
    }
}

fn request_failed<E: std::error::Error>(operation: &str, e: &E) -> Delivery {
    let e = aws_sdk_sqs::error::DisplayErrorContext(e);
    Delivery::Retry(format!("{operation} failed: {e}"))
}

/// One `SendMessageBatch` entry, or why the SDK's builder refuses it.
fn sqs_entry(send: &SqsSend) -> Result<SqsEntry, String> {
    let mut entry = SqsEntry::builder()
        .id(&send.id)
        .message_body(&send.message_body)
        .set_message_group_id(send.message_group_id.clone())
        .set_message_deduplication_id(send.message_deduplication_id.clone());
    for (name, value) in &send.message_attributes {
        let value = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(value);
        let value = value
            .build()
            .map_err(|e| format!("attribute {name:?}: {e}"))?;
        entry = entry.message_attributes(name, value);
    }
    entry.build().map_err(|e| e.to_string())
}

/// Per-entry EventBridge error codes that retrying cannot fix.
const EVENTBRIDGE_POISON: [&str; 2] = ["MalformedDetail", "InvalidArgument"];

#[async_trait]
impl Publisher for AwsPublisher {
    async fn send(&self, request: &Request) -> Vec<Delivery> {
        match request {
            Request::SendMessageBatch { queue_url, entries } => self.sqs(queue_url, entries).await,
            Request::PutEvents { entries } => self.put_events(entries).await,
        }
    }
}

impl AwsPublisher {
    async fn sqs(&self, queue_url: &str, entries: &[SqsSend]) -> Vec<Delivery> {
        // An entry the builder refuses is poison on its own; the rest go.
        let mut by_id: HashMap<String, Delivery> = HashMap::new();
        let mut request = self.sqs.send_message_batch().queue_url(queue_url);
        for send in entries {
            match sqs_entry(send) {
                Ok(entry) => request = request.entries(entry),
                Err(reason) => drop(by_id.insert(send.id.clone(), Delivery::Poison(reason))),
            }
        }
        if by_id.len() < entries.len() {
            match request.send().await {
                Ok(out) => {
                    for ok in out.successful() {
                        by_id.insert(ok.id().to_owned(), Delivery::Published);
                    }
                    for f in out.failed() {
                        let d = failed("SendMessageBatch", f.code(), f.message(), f.sender_fault());
                        by_id.insert(f.id().to_owned(), d);
                    }
                }
                Err(e) => {
                    for send in entries {
                        let failed = || request_failed("SendMessageBatch", &e);
                        by_id.entry(send.id.clone()).or_insert_with(failed);
                    }
                }
            }
        }
        let missing = || Delivery::Retry("SendMessageBatch answered nothing for this entry".into());
        entries
            .iter()
            .map(|e| by_id.remove(&e.id).unwrap_or_else(missing))
            .collect()
    }

    async fn put_events(&self, entries: &[EventPut]) -> Vec<Delivery> {
        let entry = |put: &EventPut| {
            PutEventsRequestEntry::builder()
                .event_bus_name(&put.event_bus_name)
                .source(&put.source)
                .detail_type(&put.detail_type)
                .detail(&put.detail)
                .build()
        };
        let request = self
            .events
            .put_events()
            .set_entries(Some(entries.iter().map(entry).collect()));
        let out = match request.send().await {
            Ok(out) => out,
            Err(e) => return vec![request_failed("PutEvents", &e); entries.len()],
        };
        let results = out.entries();
        let result = |i: usize| match results.get(i) {
            None => Delivery::Retry("PutEvents answered nothing for this entry".to_owned()),
            Some(r) => match r.error_code() {
                None if r.event_id().is_some() => Delivery::Published,
                None => Delivery::Retry("PutEvents entry without event id".to_owned()),
                Some(code) => {
                    let poison = EVENTBRIDGE_POISON.contains(&code);
                    failed("PutEvents", code, r.error_message(), poison)
                }
            },
        };
        (0..entries.len()).map(result).collect()
    }
}
