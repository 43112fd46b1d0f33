//! Publishing one target's messages (a queue, or the buses), in stream
//! order, ten per request, under the invocation's shared watermark: the
//! earliest record with a message not published.

use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::time::Instant;

use crate::chunk::{event_size, sqs_size};
use crate::{
    Delivery, EventPut, MAX_EVENTS_BATCH_BYTES, MAX_SQS_BATCH_BYTES, OutboxEntry, Publisher,
    SqsSend, chunks, event_put, sqs_send,
};

/// Where a message goes: one queue, or EventBridge (`PutEvents` takes
/// entries for any bus).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    Queue(String),
    Events,
}

/// One message of a target: its record (its position in the batch) and
/// its entry.
pub(crate) struct Slot<'a> {
    pub(crate) record: usize,
    pub(crate) entry: &'a OutboxEntry,
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
pub(crate) async fn publish_target(
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
