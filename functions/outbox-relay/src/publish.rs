//! One invocation's publication: every record planned, each target's
//! entries cut into requests, each record's run sending those its messages
//! are in (`docs/handlers.md`, *The relay: delivery, order, poison*).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use futures_util::future::join_all;
use lambda_idempotency::dynamodb_streams::{DynamoDbEventResponse, DynamoDbRecord};
use lambda_idempotency::dynamodb_streams::{DynamoDbStreamEvent, EventRecord, to_item};
use lambda_idempotency::outbox::{self, Entry, EventPut, Unpublishable};
use lambda_idempotency::outbox::{MAX_EVENT_ENTRY_BYTES, MAX_SQS_MESSAGE_BYTES};
use lambda_idempotency::{HandlerError, Item, store::KeyLayout, store::Status};
use tokio::sync::OnceCell;

use crate::{Delivery, Destination, Policy, Publisher, Request};

/// What one stream record asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordPlan {
    /// The record's `SequenceNumber`.
    pub sequence_number: Option<String>,
    /// The idempotency key (`id`), for logs and the allowlist.
    pub key: Option<String>,
    /// The entries to publish, in outbox order.
    pub entries: Vec<Entry>,
    /// Entries (or the whole outbox) skipped as poison: (entry id, reason).
    pub poison: Vec<Unpublishable>,
    /// Entries refused by the allowlist: (entry id, reason).
    pub refused: Vec<(String, String)>,
    /// Why nothing is published (not a completed record with an outbox).
    pub ignored: Option<&'static str>,
}

fn string<'a>(image: Option<&'a Item>, name: &str) -> Option<&'a str> {
    image?.get(name)?.as_s()
}

/// The record key of an image's item by the table's layout: `None` for an
/// item that is not a record.
fn record_key<'a>(policy: &Policy, image: Option<&'a Item>) -> Option<&'a str> {
    let layout = &policy.key_layout;
    let sort = layout.sort_key().and_then(|sk| string(image, sk));
    layout.record_id(string(image, &policy.attributes.id), sort)
}

/// Reads one stream record (`None`: an image is not valid, the processor
/// parks it): a completed record's new outbox, read by
/// [`outbox::decode_each`], each entry checked by the allowlist.
pub fn plan(record: &EventRecord, policy: &Policy) -> Option<RecordPlan> {
    let image = |i: &serde_dynamo::Item| (!i.is_empty()).then(|| to_item(i)).transpose();
    let change = &record.change;
    let [keys, new, old] = [&change.keys, &change.new_image, &change.old_image].map(image);
    let (keys, new, old) = (keys.ok()?, new.ok()?, old.ok()?);
    let (names, completed) = (&policy.attributes, Some(Status::Completed.as_str()));
    let (new, old) = (new.as_ref(), old.as_ref());
    // The record's key, read by the table's layout from the new image or
    // the stream record's keys; `None` for an item that is not a record (a
    // team's own item beside the records, under a sort key).
    let layout = &policy.key_layout;
    let key = record_key(policy, new).or_else(|| record_key(policy, keys.as_ref()));
    let mut plan = RecordPlan {
        sequence_number: change.sequence_number.clone(),
        key: key.map(str::to_owned),
        ..RecordPlan::default()
    };
    let outbox = match new.and_then(|image| image.get(&names.outbox)) {
        _ if key.is_none() && *layout != KeyLayout::PartitionKey => {
            Err("not an idempotency record")
        }
        _ if !matches!(record.event_name.as_str(), "INSERT" | "MODIFY") => {
            Err("not an INSERT or MODIFY")
        }
        _ if string(new, &names.status) != completed => Err("not COMPLETED"),
        None => Err("no outbox"),
        Some(v)
            if v.as_s().is_some()
                && string(old, &names.status) == completed
                && string(old, &names.outbox) == v.as_s() =>
        {
            Err("outbox already published with an earlier record")
        }
        Some(value) => Ok(value.as_s()),
    };
    let entries = match outbox {
        Err(ignored) => {
            plan.ignored = Some(ignored);
            return Some(plan);
        }
        Ok(Some(outbox)) => outbox::decode_each(outbox),
        Ok(None) => Err("the outbox attribute is not of type S".to_owned()),
    };
    let (allowlist, key) = (&policy.allowlist, key.unwrap_or(""));
    for entry in entries.unwrap_or_else(|reason| vec![Err((None, reason))]) {
        match entry.map(|e| (allowlist.permits(key, &e.message.destination), e)) {
            Err(poison) => plan.poison.push(poison),
            Ok((Ok(()), e)) => plan.entries.push(e),
            Ok((Err(reason), e)) => plan.refused.push((e.id, reason)),
        }
    }
    Some(plan)
}

/// What one invocation did: the answer to Lambda and its counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The answer to Lambda.
    pub response: DynamoDbEventResponse,
    /// Messages accepted by SQS or EventBridge.
    pub published: u64,
    /// Messages not published (their record and every later one retried).
    pub unpublished: u64,
    /// Entries (or whole outboxes, or stream records) skipped as poison.
    pub poison: u64,
    /// Entries refused by the allowlist (not sent, never retried).
    pub refused: u64,
    /// Requests sent.
    pub requests: u64,
}

impl Report {
    /// Its EMF metrics: `OutboxPublished`, `OutboxUnpublished` (retried),
    /// `OutboxPoison` and `OutboxRefused` (alarmed), `OutboxRequests`.
    pub fn metrics(&self) -> [(&'static str, u64); 5] {
        [
            ("OutboxPublished", self.published),
            ("OutboxUnpublished", self.unpublished),
            ("OutboxPoison", self.poison),
            ("OutboxRefused", self.refused),
            ("OutboxRequests", self.requests),
        ]
    }
}

/// A count of [`Report`].
type Count = fn(&mut Report) -> &mut u64;

/// One request, sent at most once, with its entries' records and ids.
struct Pending {
    request: Request,
    owners: Vec<(usize, String)>,
    sent: OnceCell<Vec<Delivery>>,
}

/// An entry to send, its record and, to a bus, its `PutEvents` entry.
type Due = (usize, Entry, Option<EventPut>);

/// One invocation's planned records and each target's requests.
pub(crate) struct Batch<'a> {
    publisher: &'a dyn Publisher,
    /// The records planned, in stream order, and by `SequenceNumber`.
    plans: Vec<RecordPlan>,
    positions: HashMap<String, usize>,
    /// Each target's requests, in stream order.
    targets: Vec<Vec<Pending>>,
    /// The earliest record with a message not published.
    failed: AtomicUsize,
    cutoff: Option<Instant>,
    report: Mutex<Report>,
}

impl<'a> Batch<'a> {
    /// Plans every record of `event` and cuts each target's requests.
    pub(crate) fn new(
        event: &DynamoDbStreamEvent,
        publisher: &'a dyn Publisher,
        policy: &Policy,
        cutoff: Option<Instant>,
    ) -> Self {
        let (mut plans, mut positions) = (Vec::new(), HashMap::new());
        // Per target (a queue; `None`: EventBridge, any bus), its entries.
        let mut targets: Vec<(Option<String>, Vec<Due>)> = Vec::new();
        for record in event.records.iter().filter_map(|r| r.as_ref().ok()) {
            let Some(mut plan) = plan(record, policy) else {
                continue;
            };
            let index = plans.len();
            for entry in std::mem::take(&mut plan.entries) {
                let (queue, put) = match &entry.message.destination {
                    Destination::Sqs { queue_url } => (Some(queue_url.clone()), None),
                    _ => match entry.event_put() {
                        Ok(put) => (None, Some(put)),
                        Err(reason) => {
                            plan.poison.push((Some(entry.id), reason));
                            continue;
                        }
                    },
                };
                match targets.iter_mut().find(|(q, _)| *q == queue) {
                    Some((_, list)) => list.push((index, entry, put)),
                    None => targets.push((queue, vec![(index, entry, put)])),
                }
            }
            positions.extend(plan.sequence_number.clone().map(|s| (s, index)));
            plans.push(plan);
        }
        let targets = targets.iter().map(|(q, list)| requests(q.as_deref(), list));
        Self {
            publisher,
            targets: targets.collect(),
            plans,
            positions,
            failed: AtomicUsize::new(usize::MAX),
            cutoff,
            report: Mutex::default(),
        }
    }

    fn count(&self, count: Count, n: usize) {
        *count(&mut self.report.lock().unwrap_or_else(PoisonError::into_inner)) += n as u64;
    }

    fn seq(&self, record: usize) -> &str {
        self.plans[record].sequence_number.as_deref().unwrap_or("-")
    }

    /// Counts and logs (`ERROR`) an entry of `record` skipped for good.
    fn skip(&self, count: Count, record: usize, id: Option<&str>, what: &str, reason: &str) {
        self.count(count, 1);
        let (seq, key) = (self.seq(record), self.plans[record].key.as_deref());
        let (key, id) = (key.unwrap_or("-"), id.unwrap_or("-"));
        tracing::error!(
            sequence_number = seq,
            key,
            outbox_id = id,
            "outbox {what}: {reason}"
        );
    }

    /// The report: `response`, the counts, `parked` records as poison.
    pub(crate) fn report(self, response: DynamoDbEventResponse, parked: u64) -> Report {
        let report = self
            .report
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let poison = report.poison + parked;
        Report {
            response,
            poison,
            ..report
        }
    }

    /// The processor's handler: logs `record`'s skipped entries and sends
    /// the requests its messages are in; an error names the first not
    /// published.
    pub(crate) async fn publish(&self, record: DynamoDbRecord) -> Result<(), HandlerError> {
        let index = record.sequence_number().and_then(|s| self.positions.get(s));
        let Some(&index) = index else {
            return Ok(());
        };
        let plan = &self.plans[index];
        for (id, reason) in &plan.poison {
            let what = "entry skipped as poison (never publishable as written; the message stays in the idempotency record)";
            self.skip(|r| &mut r.poison, index, id.as_deref(), what, reason);
        }
        for (id, reason) in &plan.refused {
            let what =
                "entry refused, not sent and never retried (its writer may not publish there)";
            self.skip(|r| &mut r.refused, index, Some(id), what, reason);
        }
        let retries = join_all(self.targets.iter().map(|t| self.through(t, index))).await;
        match retries.into_iter().flatten().next() {
            Some(e) => Err(HandlerError::retryable(std::io::Error::other(e))),
            None => Ok(()),
        }
    }

    /// Sends `target`'s requests up to the last one with a message of
    /// `record` (those not sent yet, in order); the first of its messages
    /// not published, and why.
    async fn through(&self, target: &[Pending], record: usize) -> Option<String> {
        let last = target
            .iter()
            .rposition(|p| p.owners.iter().any(|o| o.0 == record))?;
        let mut retry = None;
        for pending in &target[..=last] {
            let deliveries = pending.sent.get_or_init(|| self.send(pending)).await;
            let mut mine = pending.owners.iter().zip(deliveries);
            retry = retry.or_else(|| {
                mine.find_map(|((r, id), d)| match d {
                    Delivery::Retry(why) if *r == record => {
                        Some(format!("outbox message {id} not published: {why}"))
                    }
                    _ => None,
                })
            });
        }
        retry
    }

    /// Sends one request (unless an earlier record's message failed or the
    /// time is up), and counts and logs its outcome.
    async fn send(&self, pending: &Pending) -> Vec<Delivery> {
        let (n, first) = (pending.owners.len(), pending.owners[0].0);
        let held = if first >= self.failed.load(Ordering::SeqCst) {
            "not sent: an earlier record of this batch has an unpublished message (the stream retries from it)"
        } else if self.cutoff.is_some_and(|c| Instant::now() >= c) {
            "not sent: the invocation's time is nearly up"
        } else {
            ""
        };
        if !held.is_empty() {
            self.count(|r| &mut r.unpublished, n);
            self.failed.fetch_min(first, Ordering::SeqCst);
            return vec![Delivery::Retry(held.to_owned()); n];
        }
        self.count(|r| &mut r.requests, 1);
        let mut out = self.publisher.send(&pending.request).await;
        out.resize(n, Delivery::Retry("no result for this entry".to_owned()));
        for ((record, id), delivery) in pending.owners.iter().zip(&out) {
            match delivery {
                Delivery::Published => self.count(|r| &mut r.published, 1),
                Delivery::Poison(reason) => {
                    let what = "message refused for good, skipped as poison (it stays in the idempotency record)";
                    self.skip(|r| &mut r.poison, *record, Some(id), what, reason);
                }
                Delivery::Retry(reason) => {
                    self.count(|r| &mut r.unpublished, 1);
                    self.failed.fetch_min(*record, Ordering::SeqCst);
                    let seq = self.seq(*record);
                    tracing::warn!(sequence_number = seq, outbox_id = %id, "outbox message not published, retried with its record: {reason}");
                }
            }
        }
        out
    }
}

/// A target's requests (to `queue`; `None`: EventBridge), in stream order.
fn requests(queue: Option<&str>, list: &[Due]) -> Vec<Pending> {
    let size = |(_, e, put): &Due| put.as_ref().map_or_else(|| e.sqs_size(), EventPut::size);
    let sizes: Vec<usize> = list.iter().map(size).collect();
    let max = queue.map_or(MAX_EVENT_ENTRY_BYTES, |_| MAX_SQS_MESSAGE_BYTES);
    let pending = |range: std::ops::Range<usize>| {
        let list = &list[range];
        let request = match queue {
            Some(url) => {
                let entries = list
                    .iter()
                    .enumerate()
                    .map(|(i, (_, e, _))| e.sqs_send(url, i));
                let (queue_url, entries) = (url.to_owned(), entries.collect());
                Request::SendMessageBatch { queue_url, entries }
            }
            None => {
                let entries = list.iter().filter_map(|(_, _, put)| put.clone()).collect();
                Request::PutEvents { entries }
            }
        };
        let owners = list.iter().map(|(r, e, _)| (*r, e.id.clone())).collect();
        let sent = OnceCell::new();
        Pending {
            request,
            owners,
            sent,
        }
    };
    outbox::chunks(&sizes, max)
        .into_iter()
        .map(pending)
        .collect()
}
