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
        let done: Vec<_> = messages
            .iter()
            .filter(|m| !failed.contains(m.message_id().unwrap_or_default()))
            .enumerate()
            .map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .expect("delete entry")
            })
            .collect();
        if !done.is_empty() {
            stats.deleted += done.len();
            sqs.delete_message_batch()
                .queue_url(&queue.url)
                .set_entries(Some(done))
                .send()
                .await
                .expect("delete from moto");
        }
    }
    stats
}

async fn queue_is_empty(sqs: &Client, url: &str) -> bool {
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .expect("queue attributes");
    let attrs = out.attributes().cloned().unwrap_or_default();
    let n = |k: QueueAttributeName| {
        attrs
            .get(&k)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    n(QueueAttributeName::ApproximateNumberOfMessages) == 0
        && n(QueueAttributeName::ApproximateNumberOfMessagesNotVisible) == 0
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
