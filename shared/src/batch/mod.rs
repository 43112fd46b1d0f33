//! The source-neutral core: one delivery model, one pipeline and one
//! processor for every batch source.
//!
//! * [`Source`] is what a source states: its Lambda event and how it splits
//!   into records (each parsed on its own), each record's [`Delivery`] (id,
//!   lane, position, body, attributes), its [`Ordering`], and how its
//!   response is built from the failures. [`Prepare`] turns one record into
//!   what the handler takes.
//! * [`Processor`] is the one processor over any source: `handle`,
//!   `process` and the builders are written once. `SqsProcessor` is
//!   `Processor<Sqs>`, `KinesisProcessor` is `Processor<Kinesis>`, and so on.
//! * [`KeySelector`] / [`KeyInput`] / [`MissingKey`] say where a record's
//!   idempotency key comes from, for every source alike; [`PayloadScope`]
//!   what payload validation hashes; [`envelope`] when a body is an
//!   EventBridge event or an SNS notification to open.
//! * [`Pipeline`] runs a batch: in-batch duplicates coalesced, the pre-read
//!   ([`PreRead`]), lanes cut by the [`Ordering`] (and by key within a lane:
//!   [`Within`]), bounded concurrency, panics isolated, one log line per
//!   record, the batch line and the metric counts.
//! * [`parking`]: on the ordered streams, a record that can never succeed
//!   ([`FailureReason::is_terminal`]) is parked and its lane goes on.
//! * [`BatchReport`] holds every record's [`RecordResult`] (an
//!   [`Outcome`] or a [`FailureReason`]) and builds any source's partial
//!   batch response ([`PartialResponse`]).
//!
//! The sources are one folder each under `shared/src/sources/`: SQS
//! ([`crate::sqs`]), Kinesis ([`crate::kinesis`]), DynamoDB Streams
//! ([`crate::dynamodb_streams`]), Kafka ([`crate::kafka`]) and SNS
//! ([`crate::sns`]) implement [`Source`]; EventBridge
//! ([`crate::eventbridge`]) and HTTP ([`crate::http`]) are single-event
//! sources that share the keys, the log line and the counts.
//!
//! # Adding a source
//!
//! One folder `shared/src/sources/<source>/`, laid out like `kinesis/`:
//! `mod.rs` (the source's settings struct, `impl Source`, `impl
//! Prepare<YourRecord<M>>`, `pub type <Source>Processor = Processor<..>` and
//! its own builders on `impl Processor<..>`), `parse.rs` (the event,
//! rejecting other payloads with [`BatchError::WrongEvent`]), `record.rs`
//! (`impl Delivery` for the raw record, its `static` [`SourceNames`], the
//! record the handler takes), `key.rs` (decode, parse and key one record
//! with [`Pipeline::key_of`]), `response.rs` ([`PartialResponse`] for its
//! response type) and `tests.rs`. Outside it: `pub mod <source>;` in
//! `sources/mod.rs` and the name in `lib.rs`'s `pub use sources::{..}`.
//!
//! Every source reports the engine's [`Outcome`] for what is done
//! (`Executed`, `Replayed`, `Rejected`, `Unprotected`; `Parked` for a
//! stream record set aside by [`parking`]) and a [`FailureReason`] for what
//! must be delivered again or ends in the DLQ: an engine `InProgress` or
//! `PayloadMismatch` is always reported as a failure.

pub(crate) mod delivery;
pub mod envelope;
pub(crate) mod key;
pub(crate) mod lanes;
mod log;
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
pub(crate) use log::{Failure, Unit, count, finish_one, log_outcome};
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
