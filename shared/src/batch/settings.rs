//! What every batch processor holds for the pipeline: the engine and the
//! settings its builders set, with their defaults.

use std::sync::Arc;
use std::time::Duration;

use super::key::{KeySelector, MissingKey, PayloadScope};
use crate::engine::Idempotency;
use crate::parking::Parking;

/// When to read a batch's idempotency records ahead (one `BatchGetItem` per
/// 100 keys), so completed duplicates are replayed without a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreRead {
    /// Never: every record claims (or commits) directly.
    Never,
    /// When a record shows a redelivery (`ApproximateReceiveCount` > 1;
    /// never on a source without a receive count).
    #[default]
    OnRedelivery,
    /// Always: one extra request per batch; duplicates cost no write.
    Always,
}

/// Which records get their own log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RecordLogs {
    /// Every record: `INFO` when done, `WARN`/`ERROR` otherwise.
    #[default]
    All,
    /// Only the records that need a look: failed, rejected or parked. A
    /// record done (executed, replayed, or run unprotected) has no line:
    /// for a function that runs without idempotency on purpose and logs
    /// its own summary.
    Failures,
}

/// What a record run unprotected (no key under
/// [`MissingKey::RunUnprotected`], or the kill switch) keeps its order with
/// in a lane cut by key (Kinesis partition keys, DynamoDB items, Kafka
/// record keys): nothing answers its redelivery, and the stream redelivers
/// its shard or topic-partition from the lowest failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UnprotectedOrder {
    /// Every earlier record of its shard or topic-partition, whatever their
    /// keys: it does not run behind a failure of any of them, so a
    /// redelivery from that failure does not run it twice. The default.
    #[default]
    Lane,
    /// Only its key, as a protected record: it runs again on every
    /// redelivery from an earlier failure of another key. For a handler that
    /// is safe to run again and keeps no records on purpose (the outbox
    /// relay: at least once, under stable ids).
    Key,
}

/// The default number of records that run at a time, whatever the batch
/// size (why 32: `docs/guarantees.md`, "Large batches and the deadline").
pub const DEFAULT_CONCURRENCY: usize = 32;

/// The default deadline margin ([`FailureReason::OutOfTime`](super::FailureReason::OutOfTime)):
/// this or a tenth of the time the batch had at its start, whichever is less.
pub const DEFAULT_DEADLINE_MARGIN: Duration = Duration::from_secs(1);

/// The margin a batch with `remaining` at its start keeps: `set`, or
/// [`DEFAULT_DEADLINE_MARGIN`] capped at a tenth of `remaining`.
pub(super) fn margin(set: Option<Duration>, remaining: Option<Duration>) -> Duration {
    set.unwrap_or_else(|| {
        remaining.map_or(DEFAULT_DEADLINE_MARGIN, |r| {
            DEFAULT_DEADLINE_MARGIN.min(r / 10)
        })
    })
}

/// What every batch processor holds for the pipeline.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) engine: Idempotency,
    pub(crate) key: KeySelector,
    pub(crate) concurrency: Option<usize>,
    pub(crate) deadline_margin: Option<Duration>,
    pub(crate) missing_key: MissingKey,
    pub(crate) pre_read: PreRead,
    pub(crate) record_logs: RecordLogs,
    pub(crate) unprotected_order: UnprotectedOrder,
    /// What payload validation hashes.
    pub(crate) payload: PayloadScope,
    /// Where records that can never succeed are parked (ordered streams).
    pub(crate) parking: Option<Arc<dyn Parking>>,
}

impl Settings {
    /// The defaults over `engine`, keys from `key`.
    pub(crate) fn new(engine: Idempotency, key: KeySelector) -> Self {
        Self {
            engine,
            key,
            concurrency: None,
            deadline_margin: None,
            missing_key: MissingKey::default(),
            pre_read: PreRead::default(),
            record_logs: RecordLogs::default(),
            unprotected_order: UnprotectedOrder::default(),
            payload: PayloadScope::default(),
            parking: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_margin_is_at_most_a_tenth_of_the_batch_time() {
        // The README's default, 1 s, by its value (not the constant).
        let s = Duration::from_secs;
        assert_eq!(margin(None, Some(s(30))), s(1));
        assert_eq!(margin(None, Some(s(1))), Duration::from_millis(100));
        assert_eq!(margin(None, None), s(1));
        // A margin set is kept as it is.
        assert_eq!(margin(Some(s(2)), Some(s(1))), s(2));
    }

    #[cfg(feature = "lambda")]
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
