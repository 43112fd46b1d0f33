//! The outbox relay: publishes the messages a handler staged in its
//! idempotency record, read from the DynamoDB stream of the idempotency table.
//!
//! # The contract with the library
//! A completed record (`status` = `COMPLETED`) that staged messages carries an
//! attribute `outbox` (S): a JSON array of [`OutboxEntry`]. Each entry has a
//! stable `id` (sha256 of `"<record id>/<index>"`, see [`stable_id`]); every
//! publication of that message, first or repeated, carries it:
//! - SQS, one `SendMessageBatch` per ≤ 10 messages of one queue, in stream
//!   order: a String message attribute `outbox_id` on every queue, and on FIFO
//!   queues (URL ending in `.fifo`) `MessageDeduplicationId` = the id and
//!   `MessageGroupId` = the entry's `group_id`;
//! - EventBridge, one `PutEvents` per ≤ 10 events: the detail (the entry's
//!   body, a JSON object) gets `"outbox_id"`.
//!
//! The attribute names are the library's [`shared::Attributes`] ([`Policy`]).
//!
//! # Delivery
//! At least once, under the stable id. The relay answers with the DynamoDB
//! streams partial batch response naming the **first** record (in stream
//! order) with a message that was not published, so Lambda retries from that
//! record on: records after it are retried too (their messages may be
//! published again, under the same ids; a FIFO queue drops those repeats for
//! 5 minutes, a standard-queue consumer deduplicates on `outbox_id`).
//!
//! # Who may publish where: the allowlist
//! Each writer function may write records under its own key prefix only (the
//! template scopes each role with `dynamodb:LeadingKeys`), so a record's
//! prefix names its writer. [`Allowlist`] (`OUTBOX_ALLOWLIST`, from the
//! template) lists the destinations each prefix may publish to; an entry
//! whose destination is not listed for its record's prefix is **refused**:
//! not sent, an `ERROR` log line with the record key and entry id, the
//! `OutboxRefused` metric (alarmed), never retried. Under Lambda the relay
//! does not start without the allowlist.
//!
//! # Poison entries: skipped, logged, counted
//! An entry that can never be published as written (an `outbox` that is not
//! a JSON array of entries, an unknown destination, an id that is not a
//! stable id, a message that breaks [`shared::outbox::Message::check`] —
//! the library's own check when a handler stages it, so only entries staged
//! by an older version or by another writer get here —, a message SQS
//! refuses as the sender's fault, ...) is **skipped**: an `ERROR` log line
//! naming the record's sequence number, key and the entry id, and the
//! `OutboxPoison` metric (alarm on it). The rest of the record and of the
//! batch is published. We chose this over failing the record because the
//! failure is deterministic: retrying it would hold every later record of the
//! shard (their messages unpublished) for the mapping's whole retry budget,
//! only to end in the same place, the on-failure destination, which receives
//! the shard position and not the message. The message itself stays
//! recoverable where it was written, in the idempotency record (until its
//! expiry), and the log line says which one. Transient failures (throttling,
//! 5xx, timeouts, per-entry failures that are not the sender's fault) are
//! retried through the partial batch response; the mapping's bounded retries
//! and on-failure destination take over if they never clear. A whole request
//! refused (a queue that does not exist, a missing permission) is retried
//! the same way: it is a deployment fault, not a property of the message,
//! and it must be seen (the mapping's iterator age and the on-failure queue
//! alarm) rather than silently dropped.
//!
//! # Order, and what a failure holds back
//! Messages of one queue leave in stream order, 10 per request. After a
//! request with a retryable failure, no request whose messages all belong
//! to that record or later ones is sent, on any queue or bus of the
//! invocation: the stream retries from that record and would send them
//! again (on a standard queue each would reach the consumer twice). So on a
//! FIFO queue a message cannot overtake a failed one of its group by more
//! than the rest of its own request (SQS does not say whether it accepts
//! the entries after a failed one in a FIFO batch; those that it accepted
//! are sent again on the retry and deduplicated by their id). Targets are
//! published concurrently, so another target's request already under way
//! when a failure is seen still completes.

use async_trait::async_trait;
use aws_lambda_events::dynamodb::EventRecord;
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use lambda_runtime::LambdaEvent;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub mod aws;

pub use shared::outbox::OUTBOX_ID;
/// Entries per `SendMessageBatch` / `PutEvents` request (the AWS maximum).
pub const MAX_BATCH_ENTRIES: usize = 10;
/// Payload bytes per `SendMessageBatch`: the sum of its messages' sizes is
/// at most what one message may be (1 MiB).
pub const MAX_SQS_BATCH_BYTES: usize = shared::outbox::MAX_SQS_MESSAGE_BYTES;
/// Payload bytes per `PutEvents`: the sum of its entries' sizes is at most
/// what one entry may be (1 MB).
pub const MAX_EVENTS_BATCH_BYTES: usize = shared::outbox::MAX_EVENT_ENTRY_BYTES;

pub use shared::outbox::{Destination, Entry as OutboxEntry, stable_id};

pub mod allowlist;
pub use allowlist::{ALLOWLIST_ENV, Allowlist, AllowlistError};

mod plan;
pub use plan::{
    EventPut, RecordPlan, SqsSend, event_put, is_fifo, plan_record, sqs_send, validate,
};

/// What the relay trusts: the record layout's attribute names (the
/// library's [`shared::Attributes`]) and which writers may publish where.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The idempotency table's attribute names.
    pub attributes: shared::Attributes,
    /// Which key prefixes may publish to which destinations.
    pub allowlist: Allowlist,
}

impl Policy {
    /// The default attribute names and `allowlist`.
    pub fn new(allowlist: Allowlist) -> Self {
        Self {
            attributes: shared::Attributes::default(),
            allowlist,
        }
    }

    /// Other attribute names (a table laid out with custom ones).
    pub fn with_attributes(mut self, attributes: shared::Attributes) -> Self {
        self.attributes = attributes;
        self
    }
}

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

/// Sends requests. [`aws::AwsPublisher`] calls SQS and EventBridge;
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

/// The event could not be read at all (the whole batch is retried).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadEvent(pub String);

impl std::fmt::Display for BadEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadEvent {}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Target {
    Queue(String),
    Events,
}

struct Slot<'a> {
    record: usize,
    entry: &'a OutboxEntry,
}

/// Cuts `sizes` (in order) into runs of ≤ [`MAX_BATCH_ENTRIES`] entries and
/// ≤ `max_bytes` (an entry larger than that goes alone).
pub fn chunks(sizes: &[usize], max_bytes: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, size) in sizes.iter().enumerate() {
        if i > start && (i - start == MAX_BATCH_ENTRIES || bytes + size > max_bytes) {
            out.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

fn sqs_size(entry: &OutboxEntry) -> usize {
    shared::outbox::sqs_message_size(&entry.message.body, &entry.message.attributes)
}

fn event_size(put: &EventPut) -> usize {
    put.source.len() + put.detail_type.len() + put.detail.len()
}

/// Time kept in hand at the end of an invocation: no request starts later
/// than this before the deadline (the SDK's operation timeout is 8 s), so an
/// invocation answers with what it published instead of timing out (which
/// would retry the whole batch).
pub const REQUEST_BUDGET: Duration = Duration::from_secs(9);

/// How long from `now_ms` requests may still start, for an invocation whose
/// deadline is `deadline_ms` (epoch ms): the time left less
/// [`REQUEST_BUDGET`], or less half the time left when that is shorter (a
/// short function timeout still publishes). `None` when the deadline is not
/// after now: unknown (`cargo lambda watch` gives `600000`), so no cut-off.
pub fn request_window(deadline_ms: u64, now_ms: u64) -> Option<Duration> {
    let left = Duration::from_millis(deadline_ms.checked_sub(now_ms).filter(|l| *l > 0)?);
    Some(left - REQUEST_BUDGET.min(left / 2))
}

/// Publishes one target's slots in stream order; returns per slot whether it
/// was published (or skipped as poison), and the requests sent. `failed` is
/// the earliest record (in stream order, across every target of the
/// invocation) with a message not published: a request whose entries all
/// belong to that record or later ones is not sent (the stream retries from
/// that record and would send them again), so after a failed request a
/// queue's later requests stop, on standard and FIFO queues alike (on a
/// FIFO queue they would also overtake the failed message in its group). No
/// request starts after `cutoff`.
async fn publish_target(
    target: &Target,
    slots: &[Slot<'_>],
    publisher: &dyn Publisher,
    cutoff: Option<Instant>,
    failed: &AtomicUsize,
) -> (Vec<Delivery>, usize) {
    const LATE: &str = "not sent: the invocation's time is nearly up";
    const HELD: &str = "not sent: an earlier record of this batch has an unpublished message (the stream retries from it)";
    let late = || cutoff.is_some_and(|c| Instant::now() >= c);
    // Why a chunk starting at record `first` is not sent, if it is not.
    let hold = |first: usize| -> Option<&'static str> {
        if first >= failed.load(AtomicOrdering::SeqCst) {
            Some(HELD)
        } else if late() {
            Some(LATE)
        } else {
            None
        }
    };
    let note_failures = |indices: &[usize], outcome: &[Delivery]| {
        for (i, delivery) in indices.iter().zip(outcome) {
            if matches!(delivery, Delivery::Retry(_)) {
                failed.fetch_min(slots[*i].record, AtomicOrdering::SeqCst);
            }
        }
    };
    let mut requests = 0;
    let mut results: Vec<Delivery> = vec![Delivery::Retry("not sent".to_owned()); slots.len()];
    match target {
        Target::Queue(url) => {
            let sizes: Vec<usize> = slots.iter().map(|s| sqs_size(s.entry)).collect();
            for range in chunks(&sizes, MAX_SQS_BATCH_BYTES) {
                if let Some(reason) = hold(slots[range.start].record) {
                    for i in range {
                        results[i] = Delivery::Retry(reason.to_owned());
                    }
                    continue;
                }
                let batch: Vec<SqsSend> = range
                    .clone()
                    .enumerate()
                    .map(|(i, slot)| sqs_send(url, i, slots[slot].entry))
                    .collect();
                requests += 1;
                let outcome =
                    complete(publisher.send_message_batch(url, &batch).await, batch.len());
                let indices: Vec<usize> = range.clone().collect();
                note_failures(&indices, &outcome);
                for (i, delivery) in range.zip(outcome) {
                    results[i] = delivery;
                }
            }
        }
        Target::Events => {
            let mut ok: Vec<(usize, EventPut)> = Vec::with_capacity(slots.len());
            for (i, slot) in slots.iter().enumerate() {
                match event_put(slot.entry) {
                    Ok(put) => ok.push((i, put)),
                    Err(e) => results[i] = Delivery::Poison(e),
                }
            }
            let sizes: Vec<usize> = ok.iter().map(|(_, p)| event_size(p)).collect();
            for range in chunks(&sizes, MAX_EVENTS_BATCH_BYTES) {
                if let Some(reason) = hold(slots[ok[range.start].0].record) {
                    for (slot, _) in &ok[range] {
                        results[*slot] = Delivery::Retry(reason.to_owned());
                    }
                    continue;
                }
                let batch: Vec<EventPut> =
                    ok[range.clone()].iter().map(|(_, p)| p.clone()).collect();
                requests += 1;
                let outcome = complete(publisher.put_events(&batch).await, batch.len());
                let indices: Vec<usize> = ok[range.clone()].iter().map(|(i, _)| *i).collect();
                note_failures(&indices, &outcome);
                for ((slot, _), delivery) in ok[range].iter().zip(outcome) {
                    results[*slot] = delivery;
                }
            }
        }
    }
    (results, requests)
}

/// A publisher's answer padded (or cut) to one delivery per entry.
fn complete(mut outcome: Vec<Delivery>, n: usize) -> Vec<Delivery> {
    outcome.truncate(n);
    while outcome.len() < n {
        outcome.push(Delivery::Retry("no result for this entry".to_owned()));
    }
    outcome
}

/// Relays one DynamoDB stream event (the Lambda payload): publishes every
/// completed record's outbox and reports the first record (in stream order)
/// with an unpublished message in `batchItemFailures`.
pub async fn relay(
    event: &Value,
    publisher: &dyn Publisher,
    policy: &Policy,
) -> Result<Report, BadEvent> {
    relay_until(event, publisher, policy, None).await
}

/// [`relay`], starting no request after `cutoff` (the messages not sent by
/// then are reported like failed ones).
pub async fn relay_until(
    event: &Value,
    publisher: &dyn Publisher,
    policy: &Policy,
    cutoff: Option<Instant>,
) -> Result<Report, BadEvent> {
    let raw = event
        .get("Records")
        .and_then(Value::as_array)
        .ok_or_else(|| BadEvent("the event has no Records array".to_owned()))?;
    let mut plans = Vec::with_capacity(raw.len());
    for (i, value) in raw.iter().enumerate() {
        match serde_json::from_value::<EventRecord>(value.clone()) {
            Ok(record) => plans.push(plan_record(&record, policy)),
            Err(e) => {
                let sequence_number = value
                    .pointer("/dynamodb/SequenceNumber")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                plans.push(RecordPlan {
                    sequence_number,
                    key: None,
                    entries: Vec::new(),
                    poison: vec![(
                        None,
                        format!("record {i} is not a DynamoDB stream record: {e}"),
                    )],
                    refused: Vec::new(),
                    ignored: None,
                });
            }
        }
    }
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
    let mut first_failed: Option<usize> = None;
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
                    first_failed = Some(first_failed.map_or(slot.record, |f| f.min(slot.record)));
                }
            }
        }
    }
    if let Some(record) = first_failed {
        let Some(sequence_number) = plans[record].sequence_number.clone() else {
            return Err(BadEvent(format!(
                "record {record} failed and has no SequenceNumber to report"
            )));
        };
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(sequence_number);
        report.response.batch_item_failures = vec![failure];
    }
    Ok(report)
}

/// The relay function: a publisher and the invocation handler.
#[derive(Clone)]
pub struct Relay {
    publisher: Arc<dyn Publisher>,
    policy: Arc<Policy>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

impl Relay {
    /// A relay over `publisher`, publishing what `policy` allows.
    pub fn new(publisher: Arc<dyn Publisher>, policy: Policy) -> Self {
        Self {
            publisher,
            policy: Arc::new(policy),
        }
    }

    /// Printing publisher for a local run (`--event` among `args`), SQS and
    /// EventBridge clients otherwise (built once per execution environment,
    /// `AWS_ENDPOINT_URL` honoured). The allowlist comes from
    /// [`ALLOWLIST_ENV`]: required under Lambda (an error without it: the
    /// relay never guesses who may publish); a local run without it prints
    /// every entry, with a warning.
    pub async fn for_args(args: impl IntoIterator<Item = String>) -> Result<Self, AllowlistError> {
        let local = args
            .into_iter()
            .any(|a| a == "--event" || a == "-e" || a.starts_with("--event="));
        let allowlist = match Allowlist::from_env() {
            Err(AllowlistError::Missing) if local => {
                tracing::warn!(
                    "{ALLOWLIST_ENV} not set: a local run prints every entry, whoever wrote it"
                );
                Allowlist::everything()
            }
            other => other?,
        };
        let publisher: Arc<dyn Publisher> = if local {
            Arc::new(PrintPublisher)
        } else {
            Arc::new(aws::AwsPublisher::from_env().await)
        };
        Ok(Self::new(publisher, Policy::new(allowlist)))
    }

    /// Handles one invocation: the partial batch response, and one EMF
    /// metrics line under Lambda.
    pub async fn handle(
        &self,
        event: LambdaEvent<Value>,
    ) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let cutoff = request_window(event.context.deadline, now_ms).map(|w| Instant::now() + w);
        let report = relay_until(&event.payload, &*self.publisher, &self.policy, cutoff)
            .await
            .map_err(|e| shared::diagnostic::InvalidEvent(e.0))?;
        tracing::info!(
            records = report.records,
            published = report.published,
            unpublished = report.unpublished,
            poison = report.poison,
            refused = report.refused,
            requests = report.requests,
            "relayed"
        );
        if metrics_enabled() {
            eprintln!("{}", emf_line(&report, shared::metrics::service()));
        }
        Ok(report.response)
    }
}

fn metrics_enabled() -> bool {
    let flag = std::env::var(shared::metrics::METRICS_ENV).map(|v| v.trim().to_ascii_lowercase());
    match flag.as_deref() {
        Ok("on" | "true" | "1" | "yes") => true,
        Ok("off" | "false" | "0" | "no") => false,
        _ => std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some(),
    }
}

/// The EMF line of one invocation: `OutboxPublished`, `OutboxUnpublished`
/// (retried), `OutboxPoison` (skipped: alarm on it), `OutboxRefused` (not
/// allowed for its writer: alarm on it), `OutboxRequests`.
pub fn emf_line(report: &Report, service: String) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let metric = |name: &str| serde_json::json!({"Name": name, "Unit": "Count"});
    serde_json::json!({
        "_aws": {
            "Timestamp": ms,
            "CloudWatchMetrics": [{
                "Namespace": shared::metrics::NAMESPACE,
                "Dimensions": [["service"]],
                "Metrics": [
                    metric("OutboxPublished"),
                    metric("OutboxUnpublished"),
                    metric("OutboxPoison"),
                    metric("OutboxRefused"),
                    metric("OutboxRequests"),
                ],
            }],
        },
        "service": service,
        "OutboxPublished": report.published,
        "OutboxUnpublished": report.unpublished,
        "OutboxPoison": report.poison,
        "OutboxRefused": report.refused,
        "OutboxRequests": report.requests,
    })
    .to_string()
}

#[cfg(test)]
mod tests;
