//! The publisher that calls SQS (`SendMessageBatch`) and EventBridge
//! (`PutEvents`).

use crate::{Delivery, EventPut, Publisher, SqsSend};
use async_trait::async_trait;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use std::collections::HashMap;

/// Per-entry EventBridge error codes that retrying cannot fix.
const EVENTBRIDGE_POISON: [&str; 2] = ["MalformedDetail", "InvalidArgument"];

/// SQS and EventBridge clients.
#[derive(Debug, Clone)]
pub struct AwsPublisher {
    sqs: aws_sdk_sqs::Client,
    events: aws_sdk_eventbridge::Client,
}

impl AwsPublisher {
    /// Clients from one SDK configuration.
    pub fn new(config: &aws_config::SdkConfig) -> Self {
        Self {
            sqs: aws_sdk_sqs::Client::new(config),
            events: aws_sdk_eventbridge::Client::new(config),
        }
    }

    /// Clients from the environment (the crate's retries and timeouts;
    /// `AWS_ENDPOINT_URL` honoured).
    pub async fn from_env() -> Self {
        Self::new(&lambda_idempotency::aws::aws_sdk_config().await)
    }
}

/// One `SendMessageBatch` entry, or why the SDK's builder refuses it.
fn build_entry(send: &SqsSend) -> Result<SendMessageBatchRequestEntry, String> {
    let mut entry = SendMessageBatchRequestEntry::builder()
        .id(&send.id)
        .message_body(&send.message_body)
        .set_message_group_id(send.message_group_id.clone())
        .set_message_deduplication_id(send.message_deduplication_id.clone());
    for (name, value) in &send.message_attributes {
        let attribute = MessageAttributeValue::builder()
            .data_type("String")
            .string_value(value)
            .build()
            .map_err(|e| format!("attribute {name:?}: {e}"))?;
        entry = entry.message_attributes(name, attribute);
    }
    entry.build().map_err(|e| e.to_string())
}

fn error_text<E: std::error::Error>(e: &E) -> String {
    aws_sdk_sqs::error::DisplayErrorContext(e).to_string()
}

#[async_trait]
impl Publisher for AwsPublisher {
    async fn send_message_batch(&self, queue_url: &str, entries: &[SqsSend]) -> Vec<Delivery> {
        // An entry the request builder refuses is poison on its own; the
        // others are sent.
        let mut refused: HashMap<&str, Delivery> = HashMap::new();
        let mut request = self.sqs.send_message_batch().queue_url(queue_url);
        let mut sent = 0;
        for send in entries {
            match build_entry(send) {
                Ok(entry) => {
                    request = request.entries(entry);
                    sent += 1;
                }
                Err(reason) => {
                    refused.insert(send.id.as_str(), Delivery::Poison(reason));
                }
            }
        }
        if sent == 0 {
            return entries
                .iter()
                .map(|e| {
                    refused
                        .remove(e.id.as_str())
                        .unwrap_or(Delivery::Retry("not sent".into()))
                })
                .collect();
        }
        let out = match request.send().await {
            Ok(out) => out,
            Err(e) => {
                let reason = format!("SendMessageBatch failed: {}", error_text(&e));
                return entries
                    .iter()
                    .map(|send| {
                        refused
                            .remove(send.id.as_str())
                            .unwrap_or_else(|| Delivery::Retry(reason.clone()))
                    })
                    .collect();
            }
        };
        let mut by_id: HashMap<&str, Delivery> = refused;
        for ok in out.successful() {
            by_id.insert(ok.id(), Delivery::Published);
        }
        for failed in out.failed() {
            let reason = format!(
                "SendMessageBatch entry failed: {} ({})",
                failed.code(),
                failed.message().unwrap_or("no message")
            );
            let delivery = if failed.sender_fault() {
                Delivery::Poison(reason)
            } else {
                Delivery::Retry(reason)
            };
            by_id.insert(failed.id(), delivery);
        }
        entries
            .iter()
            .map(|e| {
                by_id.remove(e.id.as_str()).unwrap_or_else(|| {
                    Delivery::Retry("SendMessageBatch answered nothing for this entry".to_owned())
                })
            })
            .collect()
    }

    async fn put_events(&self, entries: &[EventPut]) -> Vec<Delivery> {
        let request = self.events.put_events().set_entries(Some(
            entries
                .iter()
                .map(|put| {
                    PutEventsRequestEntry::builder()
                        .event_bus_name(&put.event_bus_name)
                        .source(&put.source)
                        .detail_type(&put.detail_type)
                        .detail(&put.detail)
                        .build()
                })
                .collect(),
        ));
        let out = match request.send().await {
            Ok(out) => out,
            Err(e) => {
                let reason = format!("PutEvents failed: {}", error_text(&e));
                return vec![Delivery::Retry(reason); entries.len()];
            }
        };
        let results = out.entries();
        if out.failed_entry_count() == 0 && results.len() == entries.len() {
            return vec![Delivery::Published; entries.len()];
        }
        (0..entries.len())
            .map(|i| match results.get(i) {
                None => Delivery::Retry("PutEvents answered nothing for this entry".to_owned()),
                Some(r) => match r.error_code() {
                    None if r.event_id().is_some() => Delivery::Published,
                    None => Delivery::Retry("PutEvents entry without event id".to_owned()),
                    Some(code) => {
                        let reason = format!(
                            "PutEvents entry failed: {code} ({})",
                            r.error_message().unwrap_or("no message")
                        );
                        if EVENTBRIDGE_POISON.contains(&code) {
                            Delivery::Poison(reason)
                        } else {
                            Delivery::Retry(reason)
                        }
                    }
                },
            })
            .collect()
    }
}
