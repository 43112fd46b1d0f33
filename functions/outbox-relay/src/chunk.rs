//! How many messages go in one request: the AWS limits, each entry's size,
//! and the cut of a target's entries into requests.

use crate::{EventPut, OutboxEntry};

/// Entries per `SendMessageBatch` / `PutEvents` request (the AWS maximum).
pub const MAX_BATCH_ENTRIES: usize = 10;
/// Payload bytes per `SendMessageBatch`: the sum of its messages' sizes is
/// at most what one message may be (1 MiB).
pub const MAX_SQS_BATCH_BYTES: usize = lambda_idempotency::outbox::MAX_SQS_MESSAGE_BYTES;
/// Payload bytes per `PutEvents`: the sum of its entries' sizes is at most
/// what one entry may be (1 MB).
pub const MAX_EVENTS_BATCH_BYTES: usize = lambda_idempotency::outbox::MAX_EVENT_ENTRY_BYTES;

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

/// The size SQS counts for `entry`'s message (body and attributes).
pub(crate) fn sqs_size(entry: &OutboxEntry) -> usize {
    lambda_idempotency::outbox::sqs_message_size(&entry.message.body, &entry.message.attributes)
}

/// The size EventBridge counts for a `PutEvents` entry.
pub(crate) fn event_size(put: &EventPut) -> usize {
    put.source.len() + put.detail_type.len() + put.detail.len()
}
