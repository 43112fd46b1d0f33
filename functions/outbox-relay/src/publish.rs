//! One invocation's publication, the relay's [`BatchHook`]: every record
//! planned, each target's entries cut into requests and sent in stream
//! order, then each record settled by what became of its messages
//! (`docs/handlers.md`, *The relay: delivery, order, poison*).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

use futures_util::future::join_all;
use lambda_idempotency::batch::{self as hook, BatchHook, FailureReason};
use lambda_idempotency::dynamodb_streams::{DynamoDbEventResponse, DynamoDbRecord};
use lambda_idempotency::outbox::{self, Entry, EventPut, Unpublishable};
use lambda_idempotency::outbox::{MAX_EVENT_ENTRY_BYTES, MAX_SQS_MESSAGE_BYTES};
use lambda_idempotency::{ErrorKind, Item, store::KeyLayout, store::Status};

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

/// Reads one stream record, its images as the processor converted them: a
/// completed record's new outbox, read by [`outbox::decode_each`], each
/// entry checked by the allowlist.
pub fn plan(record: &DynamoDbRecord, policy: &Policy) -> RecordPlan {
    let (keys, new, old) = (
        Some(&record.keys),
        record.new_image.as_ref(),
        record.old_image.as_ref(),
    );
    let (names, completed) = (&policy.attributes, Some(Status::Completed.as_str()));
    // The record's key, read by the table's layout from the new image or
    // the stream record's keys; `None` for an item that is not a record (a
    // team's own item beside the records, under a sort key).
    let layout = &policy.key_layout;
    let key = record_key(policy, new).or_else(|| record_key(policy, keys));
    let mut plan = RecordPlan {
        sequence_number: record.sequence_number().map(str::to_owned),
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
            return plan;
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
    plan
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
    /// What each of its entries became; unset until the flush reaches it.
    sent: OnceLock<Vec<Delivery>>,
}

/// An entry to send, its record and, to a bus, its `PutEvents` entry.
type Due = (usize, Entry, Option<EventPut>);

/// One record of the batch, by its position.
enum Planned {
    /// Read: what it asks for.
    Read(RecordPlan),
    /// Not readable as a `DynamoDbRecord` (an image that does not convert),
    /// or not runnable (no lane): its `SequenceNumber` and why.
    Unread(Option<String>, FailureReason),
}

/// The relay as a [`BatchHook`]: plans a batch's publications, sends them,
/// settles each record by its messages' fate.
pub(crate) struct Relaying<'a> {
    pub(crate) publisher: &'a dyn Publisher,
    pub(crate) policy: &'a Policy,
}

/// One batch: every record planned, each target's requests, the counts.
pub(crate) struct Batch {
    /// The records, by their position in the batch.
    records: Vec<Planned>,
    /// Each target's requests, in stream order.
    targets: Vec<Vec<Pending>>,
    /// The earliest record with a message not published.
    failed: AtomicUsize,
    report: Mutex<Report>,
}

impl BatchHook<DynamoDbRecord> for Relaying<'_> {
    type Plan = Batch;

    /// Plans every record and cuts each target's requests.
    fn plan(&self, records: Vec<hook::Planned<DynamoDbRecord>>) -> Batch {
        let mut planned = Vec::with_capacity(records.len());
        // Per target (a queue; `None`: EventBridge, any bus), its entries.
        let mut targets: Vec<(Option<String>, Vec<Due>)> = Vec::new();
        for record in records {
            let (index, mut plan) = match record.record {
                Ok(read) => (record.index, plan(&read, self.policy)),
                Err(reason) => {
                    planned.push(Planned::Unread(record.id, reason));
                    continue;
                }
            };
            debug_assert_eq!(index, planned.len(), "records come in batch order");
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
            planned.push(Planned::Read(plan));
        }
        let targets = targets.iter().map(|(q, list)| requests(q.as_deref(), list));
        Batch {
            records: planned,
            targets: targets.collect(),
            failed: AtomicUsize::new(usize::MAX),
            report: Mutex::default(),
        }
    }

    /// Sends each target's requests in stream order (the targets at once),
    /// none at or after `cutoff` nor behind an earlier record's failure.
    async fn flush(&self, batch: &Batch, cutoff: Option<Instant>) {
        let each = batch.targets.iter().map(|target| async move {
            for pending in target {
                let deliveries = batch.send(self.publisher, pending, cutoff).await;
                let _ = pending.sent.set(deliveries);
            }
        });
        join_all(each).await;
    }

    /// Logs the record's skipped entries; an error names its first message
    /// not published.
    fn settle(&self, batch: &Batch, index: usize) -> Result<(), FailureReason> {
        let plan = match &batch.records[index] {
            Planned::Read(plan) => plan,
            Planned::Unread(seq, reason) if reason.is_terminal() => {
                batch.count(|r| &mut r.poison, 1);
                let seq = seq.as_deref().unwrap_or("-");
                tracing::error!(
                    sequence_number = seq,
                    "stream record skipped as poison: {reason}"
                );
                return Ok(());
            }
            Planned::Unread(_, reason) => return Err(reason.clone()),
        };
        for (id, reason) in &plan.poison {
            let what = "entry skipped as poison (never publishable as written; the message stays in the idempotency record)";
            batch.skip(|r| &mut r.poison, index, id.as_deref(), what, reason);
        }
        for (id, reason) in &plan.refused {
            let what =
                "entry refused, not sent and never retried (its writer may not publish there)";
            batch.skip(|r| &mut r.refused, index, Some(id), what, reason);
        }
        let mine = (batch.targets.iter().flatten()).flat_map(|pending| {
            let sent = pending.sent.get().map_or(&[][..], Vec::as_slice);
            pending.owners.iter().zip(sent)
        });
        for ((record, id), delivery) in mine {
            if let (true, Delivery::Retry(why)) = (*record == index, delivery) {
                let message = format!("outbox message {id} not published: {why}");
                let kind = ErrorKind::Retryable;
                return Err(FailureReason::Handler { message, kind });
            }
        }
        Ok(())
    }
}

impl Batch {
    fn count(&self, count: Count, n: usize) {
        *count(&mut self.report.lock().unwrap_or_else(PoisonError::into_inner)) += n as u64;
    }

    fn seq(&self, record: usize) -> &str {
        match &self.records[record] {
            Planned::Read(plan) => plan.sequence_number.as_deref(),
            Planned::Unread(seq, _) => seq.as_deref(),
        }
        .unwrap_or("-")
    }

    /// Counts and logs (`ERROR`) an entry of `record` skipped for good.
    fn skip(&self, count: Count, record: usize, id: Option<&str>, what: &str, reason: &str) {
        self.count(count, 1);
        let seq = self.seq(record);
        let key = match &self.records[record] {
            Planned::Read(plan) => plan.key.as_deref(),
            Planned::Unread(..) => None,
        };
        let (key, id) = (key.unwrap_or("-"), id.unwrap_or("-"));
        tracing::error!(
            sequence_number = seq,
            key,
            outbox_id = id,
            "outbox {what}: {reason}"
        );
    }

    /// The report: `response` and the counts.
    pub(crate) fn report(self, response: DynamoDbEventResponse) -> Report {
        let report = self
            .report
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        Report { response, ..report }
    }

    /// Sends one request (unless an earlier record's message failed or the
    /// time is up), and counts and logs its outcome.
    async fn send(
        &self,
        publisher: &dyn Publisher,
        pending: &Pending,
        cutoff: Option<Instant>,
    ) -> Vec<Delivery> {
        let (n, first) = (pending.owners.len(), pending.owners[0].0);
        let held = if first >= self.failed.load(Ordering::SeqCst) {
            "not sent: an earlier record of this batch has an unpublished message (the stream retries from it)"
        } else if cutoff.is_some_and(|c| Instant::now() >= c) {
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
        let mut out = publisher.send(&pending.request).await;
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
        let sent = OnceLock::new();
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
