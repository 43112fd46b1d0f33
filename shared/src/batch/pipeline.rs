//! The per-record pipeline, for standard and FIFO queues alike: run the
//! records of a unit one after another, share a first copy's outcome with
//! its in-batch duplicates, run the handler through the engine, log. On a
//! standard queue every record is its own unit.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use tokio::sync::{Semaphore, watch};

use super::{BatchProcessor, FailureReason, PreRead, RecordResult, SqsRecord};
use crate::adapter::{self, Unit, log_outcome, millis};
use crate::engine::{Outcome, Prefetched, panic_message};
use crate::error::{HandlerError, report};
use crate::key::IdempotencyKey;
use crate::write::IntoStaged;

/// What every record of one `process` call shares.
pub(super) struct Run<'a, H> {
    pub(super) handler: &'a H,
    /// Records read ahead ([`PreRead`]).
    pub(super) known: &'a Prefetched,
    pub(super) permits: &'a Semaphore,
    pub(super) started: Instant,
    pub(super) remaining: Option<Duration>,
}

/// One record on its way through `process`.
pub(super) struct Slot<M> {
    pub(super) index: usize,
    /// The `messageId`, or a description of the record when it has none.
    pub(super) ident: String,
    pub(super) message_id: Option<String>,
    pub(super) group: Option<String>,
    pub(super) state: State<M>,
    pub(super) role: Role,
}

pub(super) enum State<M> {
    Ready {
        record: Box<SqsRecord<M>>,
        /// `None`: run unprotected.
        key: Option<IdempotencyKey>,
        payload: Option<Value>,
    },
    Failed(FailureReason),
}

/// A record's part in in-batch deduplication.
pub(super) enum Role {
    Solo,
    /// The first record of its key, with later copies waiting for its outcome.
    Leader(watch::Sender<Option<Shared>>),
    /// A later copy: waits for the first one and takes its outcome.
    Follower {
        first: String,
        outcome: watch::Receiver<Option<Shared>>,
    },
}

/// A first copy's outcome as its in-batch duplicates receive it.
#[derive(Clone)]
pub(super) enum Shared {
    Done(Option<Value>),
    Rejected(String),
    Failed(FailureReason),
}

/// The record's `messageId`, or a description when it has none.
pub(super) fn ident(index: usize, message_id: Option<&str>) -> String {
    match message_id {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => format!("record #{index} (no messageId)"),
    }
}

/// Standard queue: one unit per record (all independent).
pub(super) fn units<M>(slots: Vec<Slot<M>>) -> Vec<Vec<Slot<M>>> {
    slots.into_iter().map(|slot| vec![slot]).collect()
}

/// A record's outcome: done, or why it failed.
type RecordOutcome<T> = Result<Outcome<T>, FailureReason>;

impl BatchProcessor {
    /// Reads ahead the records of the batch's keys when [`PreRead`] says so.
    /// A failed read is logged and ignored: each record then claims as usual.
    pub(super) async fn read_ahead<M>(&self, slots: &[Slot<M>]) -> Prefetched {
        let redelivered = || {
            slots.iter().any(|s| match &s.state {
                State::Ready { record, .. } => record.receive_count().is_some_and(|c| c > 1),
                State::Failed(_) => false,
            })
        };
        let wanted = match self.pre_read {
            PreRead::Never => false,
            PreRead::Always => true,
            PreRead::OnRedelivery => redelivered(),
        };
        if !wanted {
            return Prefetched::default();
        }
        let keys: Vec<&IdempotencyKey> = slots
            .iter()
            .filter(|s| !matches!(s.role, Role::Follower { .. }))
            .filter_map(|s| match &s.state {
                State::Ready { key: Some(k), .. } => Some(k),
                _ => None,
            })
            .collect();
        match self.engine.prefetch(&keys).await {
            Ok(known) => known,
            Err(err) => {
                tracing::warn!(error = %report(&err), "pre-read failed; records claim one by one");
                Prefetched::default()
            }
        }
    }

    /// Runs the records of one unit (one record; a FIFO group; a whole FIFO
    /// batch in `FifoFailureMode::StopBatch`) one after another. After the
    /// first failure, the unit's later records are failed without running.
    pub(super) async fn run_unit<M, T, R, H, Fut>(
        &self,
        unit: Vec<Slot<M>>,
        run: &Run<'_, H>,
    ) -> Vec<RecordResult<T>>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(SqsRecord<M>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let mut results = Vec::with_capacity(unit.len());
        let mut failed: Option<String> = None;
        for slot in unit {
            let ident = slot.ident.clone();
            let result = self.run_slot(slot, failed.as_deref(), run).await;
            if failed.is_none() && result.is_failure() {
                failed = Some(ident);
            }
            results.push(result);
        }
        results
    }

    /// Runs one record (or fails it without running when `skip_after` names
    /// an earlier failure it must follow), shares its outcome with its
    /// in-batch duplicates and logs it.
    async fn run_slot<M, T, R, H, Fut>(
        &self,
        slot: Slot<M>,
        skip_after: Option<&str>,
        run: &Run<'_, H>,
    ) -> RecordResult<T>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(SqsRecord<M>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let start = Instant::now();
        let Slot {
            index,
            ident,
            message_id,
            group,
            state,
            role,
        } = slot;
        let key_hash = match &state {
            State::Ready { key: Some(k), .. } => Some(k.hash().to_owned()),
            _ => None,
        };
        let outcome = match (state, skip_after, &role) {
            (State::Failed(reason), _, _) => Err(reason),
            (State::Ready { .. }, Some(after), _) => Err(FailureReason::Skipped {
                after: after.to_owned(),
            }),
            (State::Ready { .. }, None, Role::Follower { first, outcome }) => {
                follow(first, outcome.clone()).await
            }
            (
                State::Ready {
                    record,
                    key,
                    payload,
                },
                None,
                _,
            ) => AssertUnwindSafe(self.execute(*record, key, payload, run))
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| {
                    Err(FailureReason::Panic(format!(
                        "processing message {ident} panicked: {}",
                        panic_message(&*panic)
                    )))
                }),
        };
        if let Role::Leader(tx) = &role {
            tx.send_replace(Some(share(&outcome)));
        }
        let duplicate_of = match &role {
            Role::Follower { first, .. } => Some(first.as_str()),
            _ => None,
        };
        // A record that failed its signature check is unauthenticated: its
        // line carries the message id and the reason only (no group: on
        // payments it is the account id).
        let group = match &outcome {
            Err(FailureReason::BadSignature(_)) => None,
            _ => group,
        };
        let unit = Unit {
            noun: "record",
            message_id: Some(&ident),
            event_id: None,
            group: group.as_deref(),
            key: key_hash.as_deref(),
            duplicate_of,
        };
        log_outcome(&unit, outcome.as_ref(), millis(start.elapsed()));
        RecordResult {
            position: index,
            message_id,
            key_hash,
            outcome,
        }
    }

    /// Runs the handler through the engine (or unprotected without a key),
    /// holding one of the batch's concurrency permits.
    async fn execute<M, T, R, H, Fut>(
        &self,
        record: SqsRecord<M>,
        key: Option<IdempotencyKey>,
        payload: Option<Value>,
        run: &Run<'_, H>,
    ) -> RecordOutcome<T>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(SqsRecord<M>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        // A record read ahead may settle the outcome without a request.
        if let Some(known) = key.as_ref().and_then(|k| run.known.get(k))
            && let Some(settled) = self.engine.settle(known, payload.as_ref())
        {
            return adapter::split(Ok(settled)).map_err(FailureReason::from);
        }
        // The semaphore is never closed; without a permit, run anyway.
        let _permit = run.permits.acquire().await.ok();
        let remaining = run
            .remaining
            .map(|r| r.saturating_sub(run.started.elapsed()));
        let result = self
            .engine
            .run(key.as_ref(), payload.as_ref(), remaining, || {
                (run.handler)(record)
            })
            .await;
        adapter::split(result).map_err(FailureReason::from)
    }
}

/// Waits for the first copy of an in-batch duplicate and takes its outcome.
async fn follow<T: DeserializeOwned>(
    first: &str,
    mut outcome: watch::Receiver<Option<Shared>>,
) -> RecordOutcome<T> {
    let shared = outcome
        .wait_for(Option::is_some)
        .await
        .map(|s| s.clone())
        .ok()
        .flatten();
    let failed = |reason| {
        Err(FailureReason::DuplicateOf {
            first: first.to_owned(),
            reason: Box::new(reason),
        })
    };
    match shared {
        Some(Shared::Done(response)) => Ok(Outcome::Replayed(
            response.and_then(|v| serde_json::from_value(v).ok()),
        )),
        Some(Shared::Rejected(error)) => Ok(Outcome::Rejected {
            error,
            replayed: true,
        }),
        Some(Shared::Failed(reason)) => failed(reason),
        None => failed(FailureReason::Idempotency(
            "the first copy ended without an outcome".to_owned(),
        )),
    }
}

/// A first copy's outcome for its duplicates.
fn share<T: Serialize>(outcome: &RecordOutcome<T>) -> Shared {
    match outcome {
        Ok(Outcome::Executed(t) | Outcome::Unprotected(t)) => Shared::Done(to_value(t)),
        Ok(Outcome::Replayed(t)) => Shared::Done(t.as_ref().and_then(to_value)),
        Ok(Outcome::Rejected { error, .. }) => Shared::Rejected(error.clone()),
        // Never from `execute` (split makes them failures).
        Ok(Outcome::InProgress {
            lease_expires_at_ms,
        }) => Shared::Failed(FailureReason::InProgress {
            lease_expires_at_ms: *lease_expires_at_ms,
        }),
        Ok(Outcome::PayloadMismatch) => Shared::Failed(FailureReason::PayloadMismatch),
        Err(reason) => Shared::Failed(reason.clone()),
    }
}

/// The response as JSON for the copies, or `None` when it cannot be
/// serialized (even by a panicking `Serialize` impl): the copies then replay
/// no body, as a duplicate of a record stored without its response does.
fn to_value<T: Serialize>(t: &T) -> Option<Value> {
    catch_unwind(AssertUnwindSafe(|| serde_json::to_value(t).ok())).unwrap_or(None)
}

#[cfg(test)]
mod tests;
