//! The adapter core: one delivery model and one pipeline for every source.
//!
//! * [`Delivery`] is the source-neutral view of one delivered record: its
//!   id in the partial batch response, its ordering lane (FIFO group,
//!   shard, topic-partition), its position (sequence number, offset), its
//!   body and attributes, its receive count.
//! * [`KeySelector`] / [`KeyInput`] / [`MissingKey`] say where a record's
//!   idempotency key comes from, for every source alike; [`PayloadScope`]
//!   what payload validation hashes.
//! * `pipeline::Pipeline` runs a batch: in-batch duplicates coalesced, the
//!   batch pre-read ([`PreRead`](crate::batch::PreRead)), lanes cut by the
//!   [`Ordering`] (unordered; ordered lanes that skip the lane; ordered
//!   streams that stop the lane), bounded concurrency, panics isolated,
//!   one log line per record, the batch line and the metric counts.
//! * [`parking`]: on the ordered streams (Kinesis, DynamoDB Streams,
//!   Kafka), a record that can never succeed
//!   ([`FailureReason::is_terminal`]) is parked and its lane goes on; one
//!   mechanism in the pipeline, a builder on the three processors.
//! * [`BatchReport`] holds every record's [`RecordResult`] (an
//!   [`Outcome`] or a [`FailureReason`]) and builds any source's partial
//!   batch response ([`PartialResponse`]).
//!
//! The sources, one folder each: SQS ([`crate::batch`], in `adapter/sqs/`),
//! Kinesis Data Streams ([`crate::kinesis`], `adapter/kinesis/`), DynamoDB
//! Streams ([`crate::dynamodb_streams`], `adapter/dynamodb_streams/`), Kafka
//! ([`crate::kafka`], `adapter/kafka/`), SNS ([`crate::sns`], `adapter/sns/`:
//! a subscribed function; notifications in SQS bodies are the SQS
//! adapter's); EventBridge ([`crate::eventbridge`], `adapter/eventbridge/`)
//! and HTTP ([`crate::http`], `adapter/http/`) are single-event sources that
//! share the keys, the log line and the counts.
//!
//! # Adding a source
//!
//! A batch source is one folder `adapter/<source>/`, laid out like
//! `adapter/kinesis/`:
//!
//! * `parse.rs`: `parse_<source>_event(Value) -> Result<Event, BatchError>`,
//!   rejecting other payloads ([`BatchError::WrongEvent`]);
//! * `record.rs`: `impl Delivery for <the raw record type>` (what `id`,
//!   `lane`, `position`, `body`, `attribute` are; a `static` [`SourceNames`])
//!   and the record the handler gets (`<Source>Record<M>`: the parsed body,
//!   the raw record, the key);
//! * `key.rs`: the key rules (the docs of the default key: a business key by
//!   pointer, never a position) and the per-record preparation, a small
//!   settings struct (`DataRules` in Kinesis) whose `parse` decodes and
//!   parses the body and keys it with
//!   [`Pipeline::key_of`](pipeline::Pipeline::key_of);
//! * `response.rs`: `impl PartialResponse for <the response type>`;
//! * `mod.rs`: the `<Source>Processor` and all its methods (builders,
//!   `process`: prepare the slots, then `Pipeline::run`; `handle(LambdaEvent,
//!   handler)`);
//! * `tests.rs`: its unit tests on the [`MemoryStore`](crate::MemoryStore).
//!
//! Outside the folder: `pub mod <source>;` here and `pub use
//! adapter::<source>;` in `lib.rs`; the `aws_lambda_events` feature in the
//! root `Cargo.toml`; an [`IdField`] / [`LaneField`] variant only when its
//! ids or lanes need a log field not there yet (Kafka added `offset`: the
//! variant, its arm in `Unit::ids` / `Unit::lanes`, and the field in the
//! log lines of `log_outcome` and `key_for`); and,
//! when the adapter has an error type of its own, its
//! [`ErrorType`](crate::diagnostic::ErrorType) impl (in its folder) plus one
//! line in `diagnostic::ERROR_TYPES`. Batch-level errors are [`BatchError`]s
//! already.
//!
//! A minimal `process` (inside the crate; `Pipeline`, `Slot`, `Prepared`,
//! `Ids` and `guard` are crate-private; Kinesis's is the full version):
//!
//! ```text
//! let started = Instant::now();
//! let pipeline = Pipeline {
//!     engine: &self.engine,
//!     key: &self.key,
//!     missing_key: self.missing_key,
//!     pre_read: self.pre_read,
//!     concurrency: self.concurrency,
//!     deadline_margin: self.deadline_margin,
//!     ordering: Ordering::StopLane, // Unordered (SNS), SkipLane (FIFO)
//!     names: &MY_SOURCE,            // its `SourceNames`
//! };
//! let mut slots: Vec<_> = event.records.into_iter().enumerate().map(|(index, raw)| {
//!     let ids = Ids::of(&raw);                      // through `impl Delivery`
//!     let ident = ids.ident(index, MY_SOURCE.id);   // the id, or "record #3 (no ..)"
//!     let prepared = match guard(|| self.rules.parse::<M>(&pipeline, &ident, &raw)) {
//!         Ok(Ok(p)) => Ok(Prepared {
//!             record: MyRecord { body: p.body, raw, key: p.key.clone() },
//!             key: p.key,
//!             payload: p.payload,
//!         }),
//!         Ok(Err(reason)) => Err(reason),              // this record fails alone
//!         Err(panic) => Err(FailureReason::Panic(panic)),
//!     };
//!     Slot::new(index, ident, ids, prepared)
//! }).collect();
//! fail_after_missing_lane(&mut slots, pipeline.ordering, FailureReason::NoLane);
//! pipeline.run(slots, started, remaining, handler).await // a BatchReport<T>
//! ```
//!
//! and `handle` returns `report.response_as::<MyResponse>()?` (under
//! [`Ordering::StopLane`] it names the first failed record of each lane; a
//! failed record without an id is [`BatchError::NoItemIdentifier`], which
//! fails the invocation). The pipeline gives the new source in-batch
//! duplicates, the pre-read, lanes, bounded concurrency, panic isolation,
//! the per-record log line, the batch line and the metrics.
//!
//! Every adapter reports the engine's [`Outcome`] for what is done
//! (`Executed`, `Replayed`, `Rejected`, `Unprotected`; `Parked` for a
//! stream record set aside by [`parking`]) and its own failure
//! type for what must be delivered again or ends in the DLQ: an engine
//! `InProgress` or `PayloadMismatch` is always reported as a failure.

pub(crate) mod delivery;
pub mod envelope;
pub(crate) mod key;
pub(crate) mod lanes;
pub(crate) mod malformed;
pub mod parking;
pub(crate) mod pipeline;
mod processor;
pub(crate) mod report;
pub(crate) mod settings;
mod source;

pub use delivery::{Attribute, Delivery, IdField, LaneField, SourceNames, Within};
pub(crate) use key::{KeyFailure, json_type, key_for};
pub use key::{KeyFn, KeyInput, KeySelector, MissingKey};
pub use lanes::Ordering;
pub use malformed::{MalformedRecord, StreamEvent};
pub use pipeline::Pipeline;
pub use processor::{Parks, Processor};
pub use report::{
    BatchError, BatchReport, FailureReason, PartialResponse, RecordResult, partial_response,
};
pub use settings::{DEFAULT_CONCURRENCY, DEFAULT_DEADLINE_MARGIN, PreRead};
pub use source::{Prepare, Prepared, Source};

use std::time::Duration;

use crate::engine::Outcome;
use crate::error::{Error, HandlerError};
use crate::metrics::Counts;

/// What is hashed for payload validation (same key, other payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PayloadScope {
    /// The parsed body: the one document the handler and the key read. For
    /// an EventBridge event (invoking the function, or opened from an SQS
    /// body), its `detail` (the envelope's `id` and `time` differ between
    /// two publications of the same business event, which a business key
    /// would otherwise flag); for an SNS notification, its parsed `Message`
    /// (likewise its `MessageId`, `Timestamp`, `Signature`).
    #[default]
    Body,
    /// Nothing: no payload validation for this processor.
    None,
}

impl<T> Outcome<T> {
    /// The handler's response, run now or replayed.
    pub fn response(&self) -> Option<&T> {
        match self {
            Self::Executed(t) | Self::Unprotected(t) | Self::Replayed(Some(t)) => Some(t),
            _ => None,
        }
    }

    /// A short name for logs: `executed`, `replayed`, `rejected`,
    /// `unprotected`, `in_progress`, `payload_mismatch`, `parked`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Executed(_) => "executed",
            Self::Replayed(_) => "replayed",
            Self::Rejected { .. } => "rejected",
            Self::Unprotected(_) => "unprotected",
            Self::InProgress { .. } => "in_progress",
            Self::PayloadMismatch => "payload_mismatch",
            Self::Parked { .. } => "parked",
        }
    }
}

/// The invocation's remaining time at `now_ms` (epoch ms): `None` when the
/// context has no deadline (`deadline == 0`), otherwise the time left, zero
/// when the deadline has passed (a real zero, not "unknown": the engine then
/// takes leases that lapse at once).
#[cfg(feature = "lambda")]
pub(crate) fn remaining_time(ctx: &lambda_runtime::Context, now_ms: u64) -> Option<Duration> {
    (ctx.deadline != 0).then(|| Duration::from_millis(ctx.deadline.saturating_sub(now_ms)))
}

/// The invocation's remaining time now.
#[cfg(feature = "lambda")]
pub(crate) fn remaining_now(ctx: &lambda_runtime::Context) -> Option<Duration> {
    remaining_time(ctx, crate::clock::Clock::now_ms(&crate::clock::SystemClock))
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An engine answer that is not a done outcome.
#[derive(Debug)]
pub(crate) enum EngineFailure {
    /// Another invocation holds the key.
    InProgress { lease_expires_at_ms: Option<u64> },
    /// The key was used before with a different payload.
    PayloadMismatch,
    /// The handler failed (retryable, or terminal and not recorded).
    Handler(HandlerError),
    /// The engine failed (store, lease lost, response too large...).
    Engine(Error),
}

/// Splits the engine's answer into a done outcome or a failure.
pub(crate) fn split<T>(result: Result<Outcome<T>, Error>) -> Result<Outcome<T>, EngineFailure> {
    match result {
        Ok(Outcome::InProgress {
            lease_expires_at_ms,
        }) => Err(EngineFailure::InProgress {
            lease_expires_at_ms,
        }),
        Ok(Outcome::PayloadMismatch) => Err(EngineFailure::PayloadMismatch),
        Ok(done) => Ok(done),
        Err(Error::Handler(e)) => Err(EngineFailure::Handler(e)),
        Err(e) => Err(EngineFailure::Engine(e)),
    }
}

/// What the log line and the counts need to know of an adapter's failure.
pub(crate) trait Failure {
    /// Another invocation holds the key.
    fn in_progress(&self) -> bool;
    /// Part of normal operation (logged as a warning, not an error).
    fn expected(&self) -> bool;
    /// Whether a redelivery can succeed, when the adapter knows.
    fn retryable(&self) -> Option<bool>;
    /// What happens next, for the log line.
    fn next(&self) -> &'static str;
    /// The failure with its causes, for the log line.
    fn describe(&self) -> String;
}

/// A unit's id in its log field: `(message_id, event_id, sequence_number,
/// offset)`.
pub(crate) type Ids4<'a> = (
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
);

/// One record, event or request, as its log line names it.
#[derive(Debug, Default)]
pub(crate) struct Unit<'a> {
    /// `record`, `event` or `request`.
    pub(crate) noun: &'static str,
    /// Its id ([`Delivery::id`]; or a description of a record without one).
    pub(crate) id: Option<&'a str>,
    /// The log field of `id`.
    pub(crate) id_field: IdField,
    /// Its ordering lane ([`Delivery::lane`]).
    pub(crate) lane: Option<&'a str>,
    /// The log field of `lane`.
    pub(crate) lane_field: LaneField,
    /// The key's hash (the key itself is never logged).
    pub(crate) key: Option<&'a str>,
    /// The first copy of an in-batch duplicate.
    pub(crate) duplicate_of: Option<&'a str>,
}

impl<'a> Unit<'a> {
    /// The id as `(message_id, event_id, sequence_number, offset)`: one of
    /// them set.
    pub(crate) fn ids(&self) -> Ids4<'a> {
        match self.id_field {
            IdField::MessageId => (self.id, None, None, None),
            IdField::EventId => (None, self.id, None, None),
            IdField::SequenceNumber => (None, None, self.id, None),
            IdField::Offset => (None, None, None, self.id),
        }
    }

    /// The lane as `(group, shard, partition)`: at most one of them set.
    fn lanes(&self) -> (Option<&'a str>, Option<&'a str>, Option<&'a str>) {
        match self.lane_field {
            LaneField::Group => (self.lane, None, None),
            LaneField::Shard => (None, self.lane, None),
            LaneField::Partition => (None, None, self.lane),
        }
    }
}

/// The tail of a single-event source (EventBridge, HTTP), as the pipeline's
/// is for batches: the event's log line, then its metric counts (with the
/// engine's undecodable replays) emitted once.
pub(crate) fn finish_one<T, F: Failure>(
    engine: &crate::engine::Idempotency,
    unit: &Unit<'_>,
    outcome: Result<&Outcome<T>, &F>,
    latency_ms: u64,
) {
    log_outcome(unit, outcome, latency_ms);
    let mut counts = Counts {
        undecodable: engine.take_undecodable(),
        ..Counts::default()
    };
    count(&mut counts, outcome);
    crate::metrics::emit(&counts);
}

/// Adds one outcome to `counts`.
pub(crate) fn count<T, F: Failure>(counts: &mut Counts, outcome: Result<&Outcome<T>, &F>) {
    match outcome {
        Ok(Outcome::Executed(_) | Outcome::Unprotected(_)) => counts.processed += 1,
        Ok(Outcome::Replayed(_) | Outcome::Rejected { replayed: true, .. }) => counts.replayed += 1,
        Ok(Outcome::Rejected { .. }) => counts.rejected += 1,
        Ok(Outcome::Parked { .. }) => counts.parked += 1,
        Ok(Outcome::InProgress { .. }) => {
            counts.in_progress += 1;
            counts.failed += 1;
        }
        Ok(Outcome::PayloadMismatch) => counts.failed += 1,
        Err(failure) => {
            counts.failed += 1;
            if failure.in_progress() {
                counts.in_progress += 1;
            }
        }
    }
}

/// One log line per record or event; the key appears only as its hash.
pub(crate) fn log_outcome<T, F: Failure>(
    unit: &Unit<'_>,
    outcome: Result<&Outcome<T>, &F>,
    latency_ms: u64,
) {
    let Unit {
        noun,
        key,
        duplicate_of,
        ..
    } = *unit;
    let (message_id, event_id, sequence_number, offset) = unit.ids();
    let (group, shard, partition) = unit.lanes();
    let label = match outcome {
        Ok(o) => o.label(),
        Err(_) => "failed",
    };
    match outcome {
        Ok(Outcome::Executed(_)) => tracing::info!(
            message_id,
            event_id,
            sequence_number,
            offset,
            group,
            shard,
            partition,
            key,
            outcome = label,
            latency_ms,
            "{noun} executed"
        ),
        Ok(Outcome::Replayed(_)) => tracing::info!(
            message_id,
            event_id,
            sequence_number,
            offset,
            group,
            shard,
            partition,
            key,
            duplicate_of,
            outcome = label,
            latency_ms,
            "duplicate {noun}: the stored outcome is replayed, the handler did not run"
        ),
        Ok(Outcome::Rejected { error, replayed }) => tracing::warn!(
            message_id,
            event_id,
            sequence_number,
            offset,
            group,
            shard,
            partition,
            key,
            duplicate_of,
            outcome = label,
            replayed,
            error = error.as_str(),
            latency_ms,
            "{noun} rejected with a recorded terminal error (done, not retried)"
        ),
        Ok(Outcome::Parked { id, reason }) => tracing::warn!(
            message_id,
            event_id,
            sequence_number,
            offset,
            group,
            shard,
            partition,
            key,
            duplicate_of,
            outcome = label,
            parked_id = id.as_str(),
            error = reason.as_str(),
            latency_ms,
            "{noun} can never succeed: parked in the parking queue (done, its lane goes on)"
        ),
        Ok(Outcome::Unprotected(_)) => tracing::warn!(
            message_id,
            event_id,
            sequence_number,
            offset,
            group,
            shard,
            partition,
            outcome = label,
            latency_ms,
            "{noun} executed without idempotency protection"
        ),
        Ok(other) => tracing::warn!(
            message_id,
            event_id,
            sequence_number,
            offset,
            group,
            shard,
            partition,
            key,
            outcome = other.label(),
            latency_ms,
            "{noun} not done"
        ),
        Err(failure) if failure.expected() => tracing::warn!(
            message_id,
            event_id,
            sequence_number,
            offset,
            group,
            shard,
            partition,
            key,
            duplicate_of,
            outcome = label,
            retryable = failure.retryable(),
            error = failure.describe(),
            latency_ms,
            "{noun} failed; {}",
            failure.next()
        ),
        Err(failure) => tracing::error!(
            message_id,
            event_id,
            sequence_number,
            offset,
            group,
            shard,
            partition,
            key,
            duplicate_of,
            outcome = label,
            retryable = failure.retryable(),
            error = failure.describe(),
            latency_ms,
            "{noun} failed; {}",
            failure.next()
        ),
    }
}

#[cfg(all(test, feature = "lambda"))]
mod tests {
    use super::*;

    #[test]
    fn remaining_time_from_the_context() {
        const T0: u64 = 1_795_946_400_000;
        let mut ctx = lambda_runtime::Context::default();
        assert_eq!(remaining_time(&ctx, T0), None, "no deadline is unknown");
        ctx.deadline = T0 + 2_500;
        assert_eq!(remaining_time(&ctx, T0), Some(Duration::from_millis(2_500)));
        // cargo lambda watch sends 600000: long past, a real zero.
        ctx.deadline = 600_000;
        assert_eq!(remaining_time(&ctx, T0), Some(Duration::ZERO));
    }
}
