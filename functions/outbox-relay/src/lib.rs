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
//! The attribute names are the library's [`lambda_idempotency::store::Attributes`] ([`Policy`]).
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
//! `OutboxRefused` metric (alarmed), never retried. Destinations are
//! compared by partition, Region, account and name; a bare bus name or a
//! queue URL is in the relay's own, learned from its function ARN. Under
//! Lambda the relay does not start without the allowlist.
//!
//! # Poison entries: skipped, logged, counted
//! An entry that can never be published as written (an `outbox` that is not
//! a JSON array of entries, an unknown destination, an id that is not a
//! stable id, a message that breaks [`lambda_idempotency::outbox::Message::check`] —
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
//! # On the library's DynamoDB Streams adapter
//! The stream parsing ([`lambda_idempotency::dynamodb_streams::parse_dynamodb_event`]:
//! the wrong-trigger check, each record parsed on its own, a record that is
//! not a stream record kept with its sequence number and skipped here as
//! poison), the records' ids and lane ([`lambda_idempotency::batch::Delivery`] on the stream
//! record: the `SequenceNumber`; a batch is one shard) and the partial batch
//! response ([`lambda_idempotency::dynamodb_streams::partial_response`] under
//! stop-the-lane: the first record with a message not published) come from
//! the library. The relay keeps what is its own: planning (`plan.rs`), the
//! allowlist, and publishing across records, ten messages per request, per
//! target (`publish.rs`), which a handler run per record could not batch.
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

pub mod allowlist;
mod args;
pub mod aws;
mod batch;
mod chunk;
mod deadline;
mod emf;
mod handler;
mod plan;
mod policy;
mod publish;
mod publisher;

pub use allowlist::{ALLOWLIST_ENV, Allowlist, AllowlistError};
pub use batch::{Report, relay, relay_until};
pub use chunk::{MAX_BATCH_ENTRIES, MAX_EVENTS_BATCH_BYTES, MAX_SQS_BATCH_BYTES, chunks};
pub use deadline::{REQUEST_BUDGET, request_window};
pub use emf::emf_line;
pub use handler::Relay;
pub use lambda_idempotency::outbox::{Destination, Entry as OutboxEntry, OUTBOX_ID, stable_id};
pub use plan::{
    EventPut, RecordPlan, SqsSend, event_put, is_fifo, plan_malformed, plan_record, sqs_send,
    validate,
};
pub use policy::Policy;
pub use publisher::{Delivery, PrintPublisher, Publisher};

#[cfg(test)]
mod tests;
