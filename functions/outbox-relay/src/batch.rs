//! One invocation's batch: parsed by the library's DynamoDB Streams adapter
//! (record by record: a record that is not a stream record is poison, not
//! the batch's failure), every record planned, every target published
//! concurrently, and the partial batch response built by the library
//! (stop-the-lane: the first record, in stream order, with a message not
//! published).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use lambda_idempotency::batch::{BatchError, FailureReason, Ordering};
use lambda_idempotency::dynamodb_streams::{
    DynamoDbEventResponse, parse_dynamodb_event, partial_response,
};
use lambda_idempotency::{ErrorKind, batch::Delivery as StreamDelivery};
use serde_json::Value;

use crate::publish::{Slot, Target, publish_target};
use crate::{Delivery, Destination, Policy, Publisher, plan_malformed, plan_record};

/// What one invocation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The answer to Lambda.
    pub response: DynamoDbEventResponse,
    /// Stream records in the event.
    pub records: usize,
    /// Messages accepted by SQS or EventBridge.
    pub published: usize,
    /// Messages not published (their record and every later one retried).
    pub unpublished: usize,
    /// Entries (or whole outboxes) skipped as poison.
    pub poison: usize,
    /// Entries refused by the allowlist (not sent, never retried).
    pub refused: usize,
    /// Requests sent.
    pub requests: usize,
}

/// Relays one DynamoDB stream event (the Lambda payload): publishes every
/// completed record's outbox and reports the first record (in stream order)
/// with an unpublished message in `batchItemFailures`. An `Err` when the
/// payload is not a DynamoDB Streams event, or the record to report has no
/// `SequenceNumber` (the whole batch is retried).
pub async fn relay(
    event: &Value,
    publisher: &dyn Publisher,
    policy: &Policy,
) -> Result<Report, BatchError> {
    relay_until(event, publisher, policy, None).await
}

/// [`relay`], starting no request after `cutoff` (the messages not sent by
/// then are reported like failed ones).
pub async fn relay_until(
    event: &Value,
    publisher: &dyn Publisher,
    policy: &Policy,
    cutoff: Option<Instant>,
) -> Result<Report, BatchError> {
    let event = parse_dynamodb_event(event.clone())?;
    let plans: Vec<_> = event
        .records
        .iter()
        .map(|record| match record {
            Ok(record) => plan_record(record, policy),
            Err(malformed) => plan_malformed(malformed),
        })
        .collect();
    let mut report = Report {
        records: plans.len(),
        ..Report::default()
    };
    for plan in &plans {
        for (id, reason) in &plan.poison {
            report.poison += 1;
            tracing::error!(
                sequence_number = plan.sequence_number.as_deref().unwrap_or("-"),
                key = plan.key.as_deref().unwrap_or("-"),
                outbox_id = id.as_deref().unwrap_or("-"),
                "outbox entry skipped as poison (never publishable as written; the message stays in the idempotency record): {reason}"
            );
        }
        for (id, reason) in &plan.refused {
            report.refused += 1;
            tracing::error!(
                sequence_number = plan.sequence_number.as_deref().unwrap_or("-"),
                key = plan.key.as_deref().unwrap_or("-"),
                outbox_id = %id,
                "outbox entry refused, not sent and never retried (its writer may not publish there): {reason}"
            );
        }
    }
    // Slots per target, each in stream order; targets in order of first use.
    let mut targets: Vec<(Target, Vec<Slot<'_>>)> = Vec::new();
    for (record, plan) in plans.iter().enumerate() {
        for entry in &plan.entries {
            let target = match &entry.message.destination {
                Destination::Sqs { queue_url } => Target::Queue(queue_url.clone()),
                Destination::EventBridge { .. } => Target::Events,
                // Refused by `validate` before planning.
                _ => continue,
            };
            let slot = Slot { record, entry };
            match targets.iter_mut().find(|(t, _)| *t == target) {
                Some((_, slots)) => slots.push(slot),
                None => targets.push((target, vec![slot])),
            }
        }
    }
    let failed = AtomicUsize::new(usize::MAX);
    let outcomes = futures_util::future::join_all(
        targets
            .iter()
            .map(|(target, slots)| publish_target(target, slots, publisher, cutoff, &failed)),
    )
    .await;
    // Each record with a message not published, with the first reason.
    let mut unpublished: BTreeMap<usize, FailureReason> = BTreeMap::new();
    for ((_, slots), (deliveries, requests)) in targets.iter().zip(outcomes) {
        report.requests += requests;
        for (slot, delivery) in slots.iter().zip(deliveries) {
            let plan = &plans[slot.record];
            match delivery {
                Delivery::Published => report.published += 1,
                Delivery::Poison(reason) => {
                    report.poison += 1;
                    tracing::error!(
                        sequence_number = plan.sequence_number.as_deref().unwrap_or("-"),
                        key = plan.key.as_deref().unwrap_or("-"),
                        outbox_id = %slot.entry.id,
                        "outbox message refused for good, skipped as poison (it stays in the idempotency record): {reason}"
                    );
                }
                Delivery::Retry(reason) => {
                    report.unpublished += 1;
                    tracing::warn!(
                        sequence_number = plan.sequence_number.as_deref().unwrap_or("-"),
                        outbox_id = %slot.entry.id,
                        "outbox message not published, retried with its record: {reason}"
                    );
                    unpublished
                        .entry(slot.record)
                        .or_insert_with(|| FailureReason::Handler {
                            message: format!(
                                "outbox message {} not published: {reason}",
                                slot.entry.id
                            ),
                            kind: ErrorKind::Retryable,
                        });
                }
            }
        }
    }
    // The stream's records (one shard: one lane): the library names the
    // first one with an unpublished message.
    let records: Vec<&dyn StreamDelivery> = event.deliveries().collect();
    report.response = partial_response(
        Ordering::StopLane,
        unpublished
            .iter()
            .map(|(record, reason)| (*record, records[*record], reason)),
    )?;
    Ok(report)
}
