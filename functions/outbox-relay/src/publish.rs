//! One invocation's publication. Every record is planned before any runs,
//! and each target's entries (a queue's; EventBridge's, `PutEvents` taking
//! any bus) are cut, in stream order, into requests ([`outbox::chunks`]).
//! A record's run (the processor's handler) sends every request of each
//! target up to the last one holding one of its messages, those not sent
//! yet, in order (targets at once): one request carries several records'
//! messages, and a record's outcome is that of its messages. After a
//! message fails (retryably), no request whose messages all belong to its
//! record or later ones is sent, on any target (the stream retries from
//! that record), and no request starts after the cutoff.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use futures_util::future::join_all;
use lambda_idempotency::HandlerError;
use lambda_idempotency::dynamodb_streams::{
    DynamoDbEventResponse, DynamoDbRecord, DynamoDbStreamEvent,
};
use lambda_idempotency::outbox::{self, EventPut, MAX_EVENT_ENTRY_BYTES, MAX_SQS_MESSAGE_BYTES};
use tokio::sync::OnceCell;

use crate::{
    Delivery, Destination, OutboxEntry, Policy, Publisher, RecordPlan, Request, plan::plan_raw,
};

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

/// The counters of [`Report`], in its order.
const PUBLISHED: usize = 0;
const UNPUBLISHED: usize = 1;
const POISON: usize = 2;
const REFUSED: usize = 3;
const REQUESTS: usize = 4;

/// One request, sent at most once, with its entries' records and ids.
struct Pending {
    request: Request,
    owners: Vec<(usize, String)>,
    sent: OnceCell<Vec<Delivery>>,
}

/// A target's entries (to a queue; `None`: EventBridge) and their records.
type Group = (Option<String>, Vec<(usize, OutboxEntry)>);

/// One invocation's records, planned, and their targets' requests.
pub(crate) struct Batch<'a> {
    publisher: &'a dyn Publisher,
    /// Per record, its plan (`None`: not a `DynamoDbRecord`, parked).
    plans: Vec<Option<RecordPlan>>,
    positions: HashMap<String, usize>,
    /// Each target's requests, in stream order.
    targets: Vec<Vec<Pending>>,
    /// The earliest record with a message not published.
    failed: AtomicUsize,
    cutoff: Option<Instant>,
    counts: [AtomicU64; 5],
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
        let mut groups: Vec<Group> = Vec::new();
        for (index, record) in event.records.iter().enumerate() {
            let plan = record.as_ref().ok().and_then(|r| plan_raw(r, policy));
            let Some(mut plan) = plan else {
                plans.push(None);
                continue;
            };
            for entry in std::mem::take(&mut plan.entries) {
                let queue = match &entry.message.destination {
                    Destination::Sqs { queue_url } => Some(queue_url.clone()),
                    _ => None,
                };
                if let (None, Err(reason)) = (&queue, entry.event_put()) {
                    plan.poison.push((Some(entry.id), reason));
                    continue;
                }
                match groups.iter_mut().find(|(q, _)| *q == queue) {
                    Some((_, list)) => list.push((index, entry)),
                    None => groups.push((queue, vec![(index, entry)])),
                }
            }
            positions.extend(plan.sequence_number.clone().map(|s| (s, index)));
            plans.push(Some(plan));
        }
        let targets = groups
            .iter()
            .map(|(queue, list)| requests(queue.as_deref(), list));
        Self {
            publisher,
            targets: targets.collect(),
            plans,
            positions,
            failed: AtomicUsize::new(usize::MAX),
            cutoff,
            counts: Default::default(),
        }
    }

    fn add(&self, counter: usize, n: usize) {
        self.counts[counter].fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts and logs (`ERROR`) an entry of `record` skipped for good.
    fn skip(&self, counter: usize, record: usize, id: Option<&str>, what: &str, reason: &str) {
        self.add(counter, 1);
        let plan = self.plans[record].as_ref();
        let seq = plan
            .and_then(|p| p.sequence_number.as_deref())
            .unwrap_or("-");
        let key = plan.and_then(|p| p.key.as_deref()).unwrap_or("-");
        let id = id.unwrap_or("-");
        tracing::error!(
            sequence_number = seq,
            key,
            outbox_id = id,
            "outbox {what}: {reason}"
        );
    }

    /// The invocation's report: `response`, the counts, and the `parked`
    /// stream records counted as poison.
    pub(crate) fn report(self, response: DynamoDbEventResponse, parked: u64) -> Report {
        let [published, unpublished, poison, refused, requests] =
            self.counts.map(|c| c.into_inner());
        let poison = poison + parked;
        Report {
            response,
            published,
            unpublished,
            poison,
            refused,
            requests,
        }
    }

    /// The processor's handler: logs and counts `record`'s skipped entries
    /// and sends the requests its messages are in (and the earlier ones of
    /// their targets); a retryable error names its first message not
    /// published.
    pub(crate) async fn publish(&self, record: DynamoDbRecord) -> Result<(), HandlerError> {
        let index = record.sequence_number().and_then(|s| self.positions.get(s));
        let Some((index, Some(plan))) = index.map(|i| (*i, &self.plans[*i])) else {
            return Ok(());
        };
        for (id, reason) in &plan.poison {
            let what = "entry skipped as poison (never publishable as written; the message stays in the idempotency record)";
            self.skip(POISON, index, id.as_deref(), what, reason);
        }
        for (id, reason) in &plan.refused {
            let what =
                "entry refused, not sent and never retried (its writer may not publish there)";
            self.skip(REFUSED, index, Some(id), what, reason);
        }
        let outcomes = join_all(self.targets.iter().map(|t| self.through(t, index))).await;
        let retry = outcomes.into_iter().flatten().find_map(|(id, d)| match d {
            Delivery::Retry(reason) => Some(format!("outbox message {id} not published: {reason}")),
            _ => None,
        });
        retry.map_or(Ok(()), |e| {
            Err(HandlerError::retryable(std::io::Error::other(e)))
        })
    }

    /// Sends `target`'s requests up to the last one with a message of
    /// `record` (those not sent yet, in order); what became of its messages.
    async fn through<'t>(&self, target: &'t [Pending], record: usize) -> Vec<(&'t str, Delivery)> {
        let mine = |p: &Pending| p.owners.iter().any(|(r, _)| *r == record);
        let Some(last) = target.iter().rposition(mine) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for pending in &target[..=last] {
            let deliveries = pending.sent.get_or_init(|| self.send(pending)).await;
            let owned = pending
                .owners
                .iter()
                .zip(deliveries)
                .filter(|((r, _), _)| *r == record);
            out.extend(owned.map(|((_, id), d)| (id.as_str(), d.clone())));
        }
        out
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
            self.add(UNPUBLISHED, n);
            self.failed.fetch_min(first, Ordering::SeqCst);
            return vec![Delivery::Retry(held.to_owned()); n];
        }
        self.add(REQUESTS, 1);
        let mut out = self.publisher.send(&pending.request).await;
        out.resize(n, Delivery::Retry("no result for this entry".to_owned()));
        for ((record, id), delivery) in pending.owners.iter().zip(&out) {
            match delivery {
                Delivery::Published => self.add(PUBLISHED, 1),
                Delivery::Poison(reason) => {
                    let what = "message refused for good, skipped as poison (it stays in the idempotency record)";
                    self.skip(POISON, *record, Some(id), what, reason);
                }
                Delivery::Retry(reason) => {
                    self.add(UNPUBLISHED, 1);
                    self.failed.fetch_min(*record, Ordering::SeqCst);
                    let seq = self.plans[*record]
                        .as_ref()
                        .and_then(|p| p.sequence_number.as_deref());
                    let seq = seq.unwrap_or("-");
                    tracing::warn!(sequence_number = seq, outbox_id = %id, "outbox message not published, retried with its record: {reason}");
                }
            }
        }
        out
    }
}

/// A target's requests (to `queue`; `None`: EventBridge, whose entries
/// [`Batch::new`] checked): its entries in stream order, cut by
/// [`outbox::chunks`] within the service's size limit.
fn requests(queue: Option<&str>, list: &[(usize, OutboxEntry)]) -> Vec<Pending> {
    let puts: Vec<Option<EventPut>> = list.iter().map(|(_, e)| e.event_put().ok()).collect();
    let size = |((_, e), put): (&(usize, OutboxEntry), &Option<EventPut>)| match queue {
        Some(_) => e.sqs_size(),
        None => put.as_ref().map_or(0, EventPut::size),
    };
    let sizes: Vec<usize> = list.iter().zip(&puts).map(size).collect();
    let max = queue.map_or(MAX_EVENT_ENTRY_BYTES, |_| MAX_SQS_MESSAGE_BYTES);
    let request = |range: std::ops::Range<usize>| {
        let request = match queue {
            Some(url) => {
                let entries = list[range.clone()]
                    .iter()
                    .enumerate()
                    .map(|(i, (_, e))| e.sqs_send(url, i));
                Request::SendMessageBatch {
                    queue_url: url.to_owned(),
                    entries: entries.collect(),
                }
            }
            None => Request::PutEvents {
                entries: puts[range.clone()].iter().flatten().cloned().collect(),
            },
        };
        let owners = list[range]
            .iter()
            .map(|(r, e)| (*r, e.id.clone()))
            .collect();
        Pending {
            request,
            owners,
            sent: OnceCell::new(),
        }
    };
    outbox::chunks(&sizes, max)
        .into_iter()
        .map(request)
        .collect()
}
