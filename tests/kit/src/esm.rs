//! A small SQS event source mapping, as Lambda runs it, for end-to-end tests
//! against moto: receive batches (≤ 10), invoke the handler with the event as
//! AWS builds it, delete what succeeded, leave failures to reappear after the
//! visibility timeout, and let the queue's redrive policy move poison
//! messages to the DLQ. Loops are bounded in rounds and time.

use aws_lambda_events::sqs::SqsBatchResponse;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, Instant};

/// A queue and, when it has one, its DLQ.
#[derive(Debug, Clone)]
pub struct Queue {
    /// Queue URL.
    pub url: String,
    /// Queue ARN.
    pub arn: String,
    /// DLQ URL.
    pub dlq_url: Option<String>,
}

/// Creates a queue (FIFO when `fifo`) with a DLQ after `max_receive_count`
/// receives, and a visibility timeout of `visibility_s` seconds.
pub async fn create_queue(
    sqs: &Client,
    prefix: &str,
    fifo: bool,
    max_receive_count: u32,
    visibility_s: u32,
) -> Queue {
    let suffix = if fifo { ".fifo" } else { "" };
    let name = crate::unique_name(prefix);
    let dlq_url = create(sqs, &format!("{name}-dlq{suffix}"), fifo, None).await;
    let dlq_arn = queue_arn(sqs, &dlq_url).await;
    let redrive =
        json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count.to_string()})
            .to_string();
    let url = create(
        sqs,
        &format!("{name}{suffix}"),
        fifo,
        Some((redrive, visibility_s)),
    )
    .await;
    let arn = queue_arn(sqs, &url).await;
    Queue {
        url,
        arn,
        dlq_url: Some(dlq_url),
    }
}

async fn create(sqs: &Client, name: &str, fifo: bool, main: Option<(String, u32)>) -> String {
    let mut req = sqs.create_queue().queue_name(name);
    if fifo {
        req = req.attributes(QueueAttributeName::FifoQueue, "true");
    }
    if let Some((redrive, visibility)) = main {
        req = req
            .attributes(QueueAttributeName::RedrivePolicy, redrive)
            .attributes(
                QueueAttributeName::VisibilityTimeout,
                visibility.to_string(),
            );
    }
    req.send()
        .await
        .expect("create queue on moto")
        .queue_url()
        .expect("queue url")
        .to_owned()
}

async fn queue_arn(sqs: &Client, url: &str) -> String {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("queue attributes")
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .expect("queue arn")
        .clone()
}

/// Sends `body` (with a group and deduplication id on FIFO queues).
pub async fn send(
    sqs: &Client,
    queue: &Queue,
    body: &str,
    group: Option<&str>,
    dedup: Option<&str>,
) {
    sqs.send_message()
        .queue_url(&queue.url)
        .message_body(body)
        .set_message_group_id(group.map(str::to_owned))
        .set_message_deduplication_id(dedup.map(str::to_owned))
        .send()
        .await
        .expect("send message to moto");
}

/// Bodies of every message in a queue (received with a long visibility so
/// each is seen once; meant for a DLQ at the end of a test).
pub async fn drain_bodies(sqs: &Client, url: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    for _ in 0..100 {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .send()
            .await
            .expect("receive from moto");
        let messages = out.messages();
        if messages.is_empty() {
            break;
        }
        bodies.extend(messages.iter().filter_map(|m| m.body().map(str::to_owned)));
    }
    bodies
}

/// A message as a consumer receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// Its body.
    pub body: String,
    /// Its `outbox_id` message attribute (the outbox entry's stable id).
    pub outbox_id: Option<String>,
    /// Its `MessageDeduplicationId` (FIFO queues).
    pub dedup_id: Option<String>,
    /// Its `MessageGroupId` (FIFO queues).
    pub group_id: Option<String>,
    /// Its string message attributes, by name.
    pub attributes: std::collections::BTreeMap<String, String>,
}

/// Every message of the queue at `url` as a consumer receives it (with its
/// attributes), each received once and deleted, until two receives in a
/// row come back empty (a FIFO group delivers nothing more while a message
/// of it is in flight).
pub async fn receive_all(sqs: &Client, url: &str) -> Vec<Received> {
    let mut out = Vec::new();
    let mut empty = 0;
    while empty < 2 {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive from moto");
        if got.messages().is_empty() {
            empty += 1;
            continue;
        }
        delete(sqs, url, got.messages().iter()).await;
        for m in got.messages() {
            let system = |name: MessageSystemAttributeName| {
                m.attributes().and_then(|a| a.get(&name)).cloned()
            };
            let attributes: std::collections::BTreeMap<String, String> = m
                .message_attributes()
                .map(|a| {
                    a.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.string_value()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default();
            out.push(Received {
                body: m.body().unwrap_or_default().to_owned(),
                outbox_id: attributes
                    .get(lambda_idempotency::outbox::OUTBOX_ID)
                    .cloned(),
                dedup_id: system(MessageSystemAttributeName::MessageDeduplicationId),
                group_id: system(MessageSystemAttributeName::MessageGroupId),
                attributes,
            });
        }
    }
    out
}

/// Messages visible or in flight in the queue at `url`.
pub async fn messages_left(sqs: &Client, url: &str) -> u64 {
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .expect("queue attributes");
    let attrs = out.attributes().cloned().unwrap_or_default();
    attrs.values().map(|v| v.parse::<u64>().unwrap_or(0)).sum()
}

/// What a mapping run did.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Handler invocations.
    pub invocations: usize,
    /// Records delivered (with redeliveries).
    pub records: usize,
    /// Records reported in `batchItemFailures`.
    pub reported_failures: usize,
    /// Invocations that returned an error (whole batch retried).
    pub invocation_errors: usize,
    /// Messages deleted after success.
    pub deleted: usize,
}

/// Polls `queue` and invokes `handler` until the queue is empty (nothing
/// visible or in flight) or `max_time` passes.
pub async fn run<F, Fut>(sqs: &Client, queue: &Queue, max_time: Duration, handler: F) -> Stats
where
    F: Fn(Value) -> Fut,
    Fut: Future<Output = Result<SqsBatchResponse, lambda_runtime::Error>>,
{
    let start = Instant::now();
    let mut stats = Stats::default();
    while start.elapsed() < max_time {
        let out = sqs
            .receive_message()
            .queue_url(&queue.url)
            .max_number_of_messages(10)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive from moto");
        let messages = out.messages();
        if messages.is_empty() {
            if queue_is_empty(sqs, &queue.url).await {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let records: Vec<Value> = messages.iter().map(|m| record(m, &queue.arn)).collect();
        stats.invocations += 1;
        stats.records += records.len();
        let failed: HashSet<String> = match handler(json!({ "Records": records })).await {
            Ok(response) => response
                .batch_item_failures
                .into_iter()
                .map(|f| f.item_identifier)
                .collect(),
            Err(_) => {
                stats.invocation_errors += 1;
                continue;
            }
        };
        stats.reported_failures += failed.len();
        let done = messages
            .iter()
            .filter(|m| !failed.contains(m.message_id().unwrap_or_default()));
        stats.deleted += delete(sqs, &queue.url, done).await;
    }
    stats
}

/// Deletes `messages` (at most 10: one receive's) from the queue at `url`
/// in one request; returns how many (no request for none).
async fn delete<'a>(
    sqs: &Client,
    url: &str,
    messages: impl Iterator<Item = &'a aws_sdk_sqs::types::Message>,
) -> usize {
    let entries: Vec<_> = messages
        .enumerate()
        .map(|(i, m)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .build()
                .expect("delete entry")
        })
        .collect();
    if entries.is_empty() {
        return 0;
    }
    let n = entries.len();
    sqs.delete_message_batch()
        .queue_url(url)
        .set_entries(Some(entries))
        .send()
        .await
        .expect("delete from moto");
    n
}

async fn queue_is_empty(sqs: &Client, url: &str) -> bool {
    messages_left(sqs, url).await == 0
}

/// One event record as Lambda's SQS poller builds it.
fn record(m: &aws_sdk_sqs::types::Message, arn: &str) -> Value {
    let attributes: Map<String, Value> = m
        .attributes()
        .map(|a| {
            a.iter()
                .map(|(k, v)| (k.as_str().to_owned(), Value::String(v.clone())))
                .collect()
        })
        .unwrap_or_default();
    let message_attributes: Map<String, Value> = m
        .message_attributes()
        .map(|a| {
            a.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        json!({
                            "stringValue": v.string_value(),
                            "stringListValues": [],
                            "binaryListValues": [],
                            "dataType": v.data_type(),
                        }),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "messageId": m.message_id(),
        "receiptHandle": m.receipt_handle(),
        "body": m.body(),
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": m.md5_of_body(),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": "us-east-1",
    })
}
