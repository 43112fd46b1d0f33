//! Who sends the requests: the [`Publisher`] trait and what it answers per
//! message ([`Delivery`]), the [`AwsPublisher`] (SQS and EventBridge) and
//! the [`PrintPublisher`] of a local run.

use async_trait::async_trait;
use aws_sdk_eventbridge::types::{PutEventsRequestEntry, PutEventsResultEntry};
use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry as SqsEntry};
use lambda_idempotency::outbox::{EventPut, SqsSend};

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
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::SendMessageBatch { entries, .. } => entries.len(),
            Self::PutEvents { entries } => entries.len(),
        }
    }
}

/// Sends requests: one [`Delivery`] per entry, in order.
#[async_trait]
pub trait Publisher: Send + Sync + std::fmt::Debug {
    /// Sends one `SendMessageBatch` or `PutEvents`.
    async fn send(&self, request: &Request) -> Vec<Delivery>;
}

/// Prints each request as one JSON line on stdout, every entry published:
/// what a local run (`--event`) would publish.
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
pub struct AwsPublisher(aws_sdk_sqs::Client, aws_sdk_eventbridge::Client);

impl AwsPublisher {
    /// Clients from one SDK configuration.
    pub fn new(config: &aws_config::SdkConfig) -> Self {
        Self(
            aws_sdk_sqs::Client::new(config),
            aws_sdk_eventbridge::Client::new(config),
        )
    }

    /// Clients from the environment (the library's retries and timeouts;
    /// `AWS_ENDPOINT_URL` honoured).
    pub async fn from_env() -> Self {
        Self::new(&lambda_idempotency::aws::aws_sdk_config().await)
    }
}

/// One `SendMessageBatch` entry, or why the SDK's builder refuses it.
fn sqs_entry(send: &SqsSend) -> Result<SqsEntry, String> {
    let mut entry = SqsEntry::builder()
        .id(&send.id)
        .message_body(&send.message_body)
        .set_message_group_id(send.message_group_id.clone())
        .set_message_deduplication_id(send.message_deduplication_id.clone());
    for (name, value) in &send.message_attributes {
        let built = MessageAttributeValue::builder().data_type("String");
        let built = built.string_value(value).build();
        let value = built.map_err(|e| format!("attribute {name:?}: {e}"))?;
        entry = entry.message_attributes(name, value);
    }
    entry.build().map_err(|e| e.to_string())
}

/// A failed entry: poison when retrying cannot fix it.
fn failed(op: &str, code: &str, message: Option<&str>, poison: bool) -> Delivery {
    let message = message.unwrap_or("no message");
    let reason = format!("{op} entry failed: {code} ({message})");
    match poison {
        true => Delivery::Poison(reason),
        false => Delivery::Retry(reason),
    }
}

/// Per-entry EventBridge error codes that retrying cannot fix.
const EVENTBRIDGE_POISON: [&str; 2] = ["MalformedDetail", "InvalidArgument"];

#[async_trait]
impl Publisher for AwsPublisher {
    async fn send(&self, request: &Request) -> Vec<Delivery> {
        // Per entry: its delivery once known (an entry the SDK's builder
        // refuses is poison on its own), else what the answer says.
        let mut out = vec![None; request.len()];
        let (op, answer) = match request {
            Request::SendMessageBatch { queue_url, entries } => {
                let mut call = self.0.send_message_batch().queue_url(queue_url);
                for (slot, send) in out.iter_mut().zip(entries) {
                    match sqs_entry(send) {
                        Ok(entry) => call = call.entries(entry),
                        Err(reason) => *slot = Some(Delivery::Poison(reason)),
                    }
                }
                if out.iter().all(Option::is_some) {
                    return out.into_iter().flatten().collect();
                }
                let op = "SendMessageBatch";
                // Entry ids are positions ([`SqsSend::id`]).
                let answer = call.send().await.map(|answer| {
                    let ok = answer.successful().iter();
                    let ok = ok.map(|s| (s.id().parse().ok(), Delivery::Published));
                    let errors = answer.failed().iter().map(|f| {
                        let delivery = failed(op, f.code(), f.message(), f.sender_fault());
                        (f.id().parse().ok(), delivery)
                    });
                    ok.chain(errors).collect::<Vec<_>>()
                });
                (op, answer.map_err(|e| DisplayErrorContext(e).to_string()))
            }
            Request::PutEvents { entries } => {
                let entry = |put: &EventPut| {
                    PutEventsRequestEntry::builder()
                        .event_bus_name(&put.event_bus_name)
                        .source(&put.source)
                        .detail_type(&put.detail_type)
                        .detail(&put.detail)
                        .build()
                };
                let entries = Some(entries.iter().map(entry).collect());
                let op = "PutEvents";
                let answer = self.1.put_events().set_entries(entries).send().await;
                let answer = answer.map(|answer| {
                    let result = |r: &PutEventsResultEntry| match (r.error_code(), r.event_id()) {
                        (None, Some(_)) => Delivery::Published,
                        (None, None) => Delivery::Retry(format!("{op} entry without event id")),
                        (Some(code), _) => {
                            let poison = EVENTBRIDGE_POISON.contains(&code);
                            failed(op, code, r.error_message(), poison)
                        }
                    };
                    let results = answer.entries().iter().map(result);
                    results.enumerate().map(|(i, d)| (Some(i), d)).collect()
                });
                (op, answer.map_err(|e| DisplayErrorContext(e).to_string()))
            }
        };
        match answer {
            Ok(results) => {
                for (i, delivery) in results {
                    if let Some(slot) = i.and_then(|i: usize| out.get_mut(i)) {
                        *slot = Some(delivery);
                    }
                }
            }
            Err(e) => {
                let retry = Delivery::Retry(format!("{op} failed: {e}"));
                out.iter_mut()
                    .filter(|s| s.is_none())
                    .for_each(|s| *s = Some(retry.clone()));
            }
        }
        let none = || Delivery::Retry(format!("{op} answered nothing for this entry"));
        out.into_iter().map(|d| d.unwrap_or_else(none)).collect()
    }
}
