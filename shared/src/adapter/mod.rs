//! The adapter core shared by the SQS ([`crate::batch`]) and EventBridge
//! ([`crate::eventbridge`]) adapters: where the key comes from
//! ([`KeySelector`], [`MissingKey`]), what payload validation hashes
//! ([`PayloadScope`]), how the engine's answer splits into an outcome or a
//! failure, the per-record (per-event) log line, and the metric counts.
//!
//! Both adapters report the engine's [`Outcome`] for what is done
//! (`Executed`, `Replayed`, `Rejected`, `Unprotected`) and their own failure
//! type for what must be delivered again or ends in the DLQ: an engine
//! `InProgress` or `PayloadMismatch` is always reported as a failure.

pub(crate) mod key;

pub(crate) use key::{KeyFailure, json_type, key_for, looks_like_envelope};
pub use key::{KeyFn, KeyInput, KeySelector, MissingKey};

use std::time::Duration;

use crate::engine::Outcome;
use crate::error::{Error, HandlerError};
use crate::metrics::Counts;

/// What is hashed for payload validation (same key, other payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PayloadScope {
    /// The parsed body; for an EventBridge event (invoking the function or
    /// in an SQS body), its `detail` (the envelope's `id` and `time` differ
    /// between two publications of the same business event, which a
    /// business key would otherwise flag).
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
    /// `unprotected`, `in_progress`, `payload_mismatch`.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Executed(_) => "executed",
            Self::Replayed(_) => "replayed",
            Self::Rejected { .. } => "rejected",
            Self::Unprotected(_) => "unprotected",
            Self::InProgress { .. } => "in_progress",
            Self::PayloadMismatch => "payload_mismatch",
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

/// One record or event, as its log line names it.
#[derive(Debug, Default)]
pub(crate) struct Unit<'a> {
    /// `record` or `event`.
    pub(crate) noun: &'static str,
    /// The SQS message id (or a description of a record without one).
    pub(crate) message_id: Option<&'a str>,
    /// The EventBridge event id.
    pub(crate) event_id: Option<&'a str>,
    /// The FIFO message group.
    pub(crate) group: Option<&'a str>,
    /// The key's hash (the key itself is never logged).
    pub(crate) key: Option<&'a str>,
    /// The first copy of an in-batch duplicate.
    pub(crate) duplicate_of: Option<&'a str>,
}

/// Adds one outcome to `counts`.
pub(crate) fn count<T, F: Failure>(counts: &mut Counts, outcome: Result<&Outcome<T>, &F>) {
    match outcome {
        Ok(Outcome::Executed(_) | Outcome::Unprotected(_)) => counts.processed += 1,
        Ok(Outcome::Replayed(_) | Outcome::Rejected { replayed: true, .. }) => counts.replayed += 1,
        Ok(Outcome::Rejected { .. }) => counts.rejected += 1,
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
        message_id,
        event_id,
        group,
        key,
        duplicate_of,
    } = *unit;
    let label = match outcome {
        Ok(o) => o.label(),
        Err(_) => "failed",
    };
    match outcome {
        Ok(Outcome::Executed(_)) => tracing::info!(
            message_id,
            event_id,
            group,
            key,
            outcome = label,
            latency_ms,
            "{noun} executed"
        ),
        Ok(Outcome::Replayed(_)) => tracing::info!(
            message_id,
            event_id,
            group,
            key,
            duplicate_of,
            outcome = label,
            latency_ms,
            "duplicate {noun}: the stored outcome is replayed, the handler did not run"
        ),
        Ok(Outcome::Rejected { error, replayed }) => tracing::warn!(
            message_id,
            event_id,
            group,
            key,
            duplicate_of,
            outcome = label,
            replayed,
            error = error.as_str(),
            latency_ms,
            "{noun} rejected with a recorded terminal error (done, not retried)"
        ),
        Ok(Outcome::Unprotected(_)) => tracing::warn!(
            message_id,
            event_id,
            group,
            outcome = label,
            latency_ms,
            "{noun} executed without idempotency protection"
        ),
        Ok(other) => tracing::warn!(
            message_id,
            event_id,
            group,
            key,
            outcome = other.label(),
            latency_ms,
            "{noun} not done"
        ),
        Err(failure) if failure.expected() => tracing::warn!(
            message_id,
            event_id,
            group,
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
            group,
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
