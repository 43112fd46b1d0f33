//! The one pipeline every batch source runs through: link in-batch
//! duplicates, read the batch's records ahead, cut the batch into lanes by
//! the [`Ordering`], run each lane's records one after another (lanes
//! concurrently, at most `concurrency` handlers at a time), share a first
//! copy's outcome with its duplicates, isolate panics, log one line per
//! record, and count. A source only turns its raw records into [`Slot`]s
//! (parse, key) and the [`BatchReport`] into its response; its settings
//! (`settings.rs`) make the pipeline of each batch.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{Semaphore, watch};

use super::delivery::{Ordering, SourceNames};
use super::key::{KeyFailure, KeyInput, KeySelector, MissingKey, key_for};
use super::lanes;
use super::log::{Unit, log_outcome};
use super::parking::Parking;
use super::report::{BatchReport, FailureReason, RecordResult};
use super::settings::{DEFAULT_CONCURRENCY, PreRead, Settings, margin, millis};
use super::slot::{Role, Shared, Slot, State};
use crate::engine::{CommitGroup, Idempotency, Outcome, Prefetched, Seat, panic_message};
use crate::error::{HandlerError, report};
use crate::key::{IdempotencyKey, payload_hash};
use crate::write::IntoStaged;

/// How one batch runs: what every source's processor hands the pipeline.
pub struct Pipeline<'a> {
    /// The engine.
    pub(crate) engine: &'a Idempotency,
    /// Where keys come from.
    pub(crate) key: &'a KeySelector,
    /// What to do without a key.
    pub(crate) missing_key: MissingKey,
    /// When to read the batch's records ahead.
    pub(crate) pre_read: PreRead,
    /// At most this many handlers at a time (`None`: [`DEFAULT_CONCURRENCY`]).
    pub(crate) concurrency: Option<usize>,
    /// A record not started when less than this is left of the invocation
    /// fails without starting (`None`: see [`DEFAULT_DEADLINE_MARGIN`]).
    pub(crate) deadline_margin: Option<Duration>,
    /// How records are ordered and what a failure takes down.
    pub(crate) ordering: Ordering,
    /// The source's names, for messages and log lines.
    pub(crate) names: &'static SourceNames,
    /// Where records that can never succeed are parked (ordered streams;
    /// `None`: they fail and stop their lane).
    pub(crate) parking: Option<&'a dyn Parking>,
}

/// What every record of one batch shares.
struct Run<'a, H> {
    handler: &'a H,
    /// Records read ahead ([`PreRead`]).
    known: &'a Prefetched,
    permits: &'a Semaphore,
    started: Instant,
    remaining: Option<Duration>,
    /// The deadline margin of this batch.
    margin: Duration,
    /// Where optimistic commits go to share transactions (batch commits).
    group: Option<&'a CommitGroup>,
}

/// A record's outcome: done, or why it failed.
type RecordOutcome<T> = Result<Outcome<T>, FailureReason>;

impl<'a> Pipeline<'a> {
    /// The pipeline for one batch of a source ordered by `ordering`, with
    /// `settings`.
    pub(crate) fn new(
        settings: &'a Settings,
        ordering: Ordering,
        names: &'static SourceNames,
    ) -> Self {
        Pipeline {
            engine: &settings.engine,
            key: &settings.key,
            missing_key: settings.missing_key,
            pre_read: settings.pre_read,
            concurrency: settings.concurrency,
            deadline_margin: settings.deadline_margin,
            ordering,
            names,
            parking: settings.parking.as_deref(),
        }
    }

    /// Whether records that can never succeed are parked: each record then
    /// gets its [`Ticket`](super::parking::Ticket) ([`Source::ticket`](super::Source::ticket)).
    pub fn parks(&self) -> bool {
        self.parking.is_some()
    }

    /// The key of the record `ident` from `input`; `None` to run
    /// unprotected.
    pub fn key_of(
        &self,
        ident: &str,
        input: KeyInput<'_>,
    ) -> Result<Option<IdempotencyKey>, FailureReason> {
        let unit = Unit {
            noun: "record",
            id: Some(ident),
            id_field: self.names.id_field,
            ..Unit::default()
        };
        key_for(self.engine, self.key, self.missing_key, input, &unit).map_err(|e| match e {
            KeyFailure::Bad(e) => FailureReason::Key(e),
            KeyFailure::Panic(panic) => {
                FailureReason::Panic(format!("key selector panicked on message {ident}: {panic}"))
            }
        })
    }

    /// Runs a batch of prepared `slots` (in batch order) and reports every
    /// record, logs the batch line and emits the metric counts.
    ///
    /// `remaining` is the invocation's remaining time at the call (`None`:
    /// unknown); each record's lease is capped by what is left when it
    /// starts. `started` is when the batch's processing began.
    pub(crate) async fn run<Rec, T, R, H, Fut>(
        &self,
        mut slots: Vec<Slot<Rec>>,
        started: Instant,
        remaining: Option<Duration>,
        handler: H,
    ) -> BatchReport<T>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(Rec) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let size = slots.len();
        self.assign_duplicates(&mut slots);
        let known = self.read_ahead(&slots).await;
        let units = lanes::units(slots, self.ordering);

        let limit = self
            .concurrency
            .unwrap_or(DEFAULT_CONCURRENCY)
            .clamp(1, Semaphore::MAX_PERMITS);
        let permits = Semaphore::new(limit);
        let group = self.engine.commit_group();
        let run = Run {
            handler: &handler,
            known: &known,
            permits: &permits,
            started,
            remaining,
            margin: margin(self.deadline_margin, remaining),
            group: group.as_ref(),
        };
        // Unordered, each record is a unit: at most `limit` of them that run
        // a handler are admitted at a time, so a batch of 10,000 holds
        // `limit` futures, not 10,000. Units come in batch order, so a
        // copy's first copy is always admitted before it (a copy and a
        // record failed before running take no place). Ordered, the units
        // are lanes (or a lane's keys), all admitted: a unit's copy may wait
        // for its first copy in a later unit; a unit waiting for a permit
        // holds a small future (its handler's is boxed).
        let window = if self.ordering.is_ordered() {
            usize::MAX
        } else {
            limit
        };
        let run = &run;
        let work = async {
            let mut pending = units.into_iter();
            let mut running = FuturesUnordered::new();
            let mut admitted = 0usize;
            let mut results: Vec<Option<RecordResult<T>>> = (0..size).map(|_| None).collect();
            loop {
                while admitted < window
                    && let Some(unit) = pending.next()
                {
                    let counts = unit.iter().any(|s| {
                        matches!(s.state, State::Ready { .. })
                            && !matches!(s.role, Role::Follower { .. })
                    });
                    admitted += usize::from(counts);
                    // Taken at admission, before any record of the batch
                    // runs: the group waits for every admitted unit.
                    let seat = run.group.filter(|_| counts).map(CommitGroup::seat);
                    running.push(async move { (counts, self.run_unit(unit, run, seat).await) });
                }
                let Some((counted, done)) = running.next().await else {
                    break;
                };
                admitted -= usize::from(counted);
                for result in done {
                    let position = result.position;
                    results[position] = Some(result);
                }
            }
            results
        };
        let results = match &group {
            None => work.await,
            Some(group) => {
                let work = async {
                    let results = work.await;
                    group.close();
                    results
                };
                futures_util::future::join(group.drive(self.engine), work)
                    .await
                    .1
            }
        };
        let records: Vec<RecordResult<T>> = results.into_iter().flatten().collect();
        debug_assert_eq!(records.len(), size);

        let fifo = self.ordering.is_ordered();
        let count = |label: &str| records.iter().filter(|r| r.label() == label).count();
        tracing::info!(
            records = size,
            fifo,
            ordering = self.ordering.label(),
            executed = count("executed"),
            replayed = count("replayed"),
            rejected = count("rejected"),
            unprotected = count("unprotected"),
            parked = count("parked"),
            failed = count("failed"),
            latency_ms = millis(started.elapsed()),
            "batch processed"
        );
        let report = BatchReport::new(records, self.ordering, self.names);
        crate::metrics::emit(&crate::metrics::Counts {
            undecodable: self.engine.take_undecodable(),
            ..report.counts()
        });
        report
    }

    /// Links the records that share a key: the first runs, the later ones
    /// take its outcome. A later copy with another payload fails as a payload
    /// mismatch without waiting. Nothing is linked when the kill switch is on.
    fn assign_duplicates<Rec>(&self, slots: &mut [Slot<Rec>]) {
        let config = self.engine.config();
        if config.disabled {
            return;
        }
        let hash = |slot: &Slot<Rec>| match &slot.state {
            State::Ready {
                payload: Some(p), ..
            } if config.validate_payload => Some(payload_hash(p)),
            _ => None,
        };
        let mut first: HashMap<IdempotencyKey, (usize, Option<String>)> = HashMap::new();
        for i in 0..slots.len() {
            let State::Ready { key: Some(key), .. } = &slots[i].state else {
                continue;
            };
            let (leader, leader_hash) = match first.entry(key.clone()) {
                Entry::Vacant(v) => {
                    v.insert((i, hash(&slots[i])));
                    continue;
                }
                Entry::Occupied(o) => o.get().clone(),
            };
            if let (Some(a), Some(b)) = (&leader_hash, hash(&slots[i]))
                && *a != b
            {
                slots[i].state = State::Failed(FailureReason::PayloadMismatch);
                continue;
            }
            let outcome = match &slots[leader].role {
                Role::Leader(tx) => tx.subscribe(),
                _ => {
                    let (tx, rx) = watch::channel(None);
                    slots[leader].role = Role::Leader(tx);
                    rx
                }
            };
            slots[i].role = Role::Follower {
                first: slots[leader].ident.clone(),
                outcome,
            };
        }
    }

    /// Reads ahead the records of the batch's keys when [`PreRead`] says so.
    /// A failed read is logged and ignored: each record then claims as usual.
    async fn read_ahead<Rec>(&self, slots: &[Slot<Rec>]) -> Prefetched {
        let redelivered = || {
            slots.iter().any(|s| match &s.state {
                State::Ready { .. } => s.ids.receive_count.is_some_and(|c| c > 1),
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

    /// Runs the records of one unit (one record; a lane; a whole batch in
    /// [`Ordering::StopBatch`]) one after another. After the first failure,
    /// the unit's later records are failed without running.
    async fn run_unit<Rec, T, R, H, Fut>(
        &self,
        unit: Vec<Slot<Rec>>,
        run: &Run<'_, H>,
        seat: Option<Seat<'_>>,
    ) -> Vec<RecordResult<T>>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(Rec) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let mut results = Vec::with_capacity(unit.len());
        let mut failed: Option<String> = None;
        for slot in unit {
            let ident = slot.ident.clone();
            let result = self
                .run_slot(slot, failed.as_deref(), run, seat.as_ref())
                .await;
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
    async fn run_slot<Rec, T, R, H, Fut>(
        &self,
        slot: Slot<Rec>,
        skip_after: Option<&str>,
        run: &Run<'_, H>,
        seat: Option<&Seat<'_>>,
    ) -> RecordResult<T>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(Rec) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let start = Instant::now();
        let Slot {
            index,
            ident,
            ids,
            state,
            role,
            ticket,
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
                // Its first copy may be waiting for the batch's commit.
                seat.inspect(|s| s.park());
                let followed = follow(first, outcome.clone()).await;
                seat.inspect(|s| s.resume());
                followed
            }
            (
                State::Ready {
                    record,
                    key,
                    payload,
                },
                None,
                _,
            ) => AssertUnwindSafe(self.execute(*record, key, payload, run, seat))
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| {
                    Err(FailureReason::Panic(format!(
                        "processing message {ident} panicked: {}",
                        panic_message(&*panic)
                    )))
                }),
        };
        // Copies take the failure, not the parking: each copy is parked
        // under its own position.
        if let Role::Leader(tx) = &role {
            tx.send_replace(Some(share(&outcome)));
        }
        let outcome = match (outcome, ticket, self.parking) {
            (Err(reason), Some(ticket), Some(parking)) if reason.is_terminal() => {
                ticket.park(parking, reason, &ident).await
            }
            (outcome, ..) => outcome,
        };
        let duplicate_of = match &role {
            Role::Follower { first, .. } => Some(first.as_str()),
            _ => None,
        };
        // A record that failed its signature check is unauthenticated: its
        // line carries the id and the reason only (no lane: on payments it
        // is the account id).
        let lane = match &outcome {
            Err(FailureReason::BadSignature(_)) => None,
            _ => ids.lane.as_deref(),
        };
        let unit = Unit {
            noun: "record",
            id: Some(&ident),
            id_field: self.names.id_field,
            lane,
            lane_field: self.names.lane_field,
            key: key_hash.as_deref(),
            duplicate_of,
        };
        log_outcome(&unit, outcome.as_ref(), millis(start.elapsed()));
        RecordResult {
            position: index,
            message_id: ids.id,
            lane: ids.lane,
            key_hash,
            outcome,
        }
    }

    /// Runs the handler through the engine (or unprotected without a key),
    /// holding one of the batch's concurrency permits.
    async fn execute<Rec, T, R, H, Fut>(
        &self,
        record: Rec,
        key: Option<IdempotencyKey>,
        payload: Option<Value>,
        run: &Run<'_, H>,
        seat: Option<&Seat<'_>>,
    ) -> RecordOutcome<T>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(Rec) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        // A record read ahead may settle the outcome without a request.
        if let Some(known) = key.as_ref().and_then(|k| run.known.get(k))
            && let Some(settled) = self.engine.settle(known, payload.as_ref())
        {
            return super::report::split(Ok(settled)).map_err(FailureReason::from);
        }
        // The semaphore is never closed; without a permit, run anyway. The
        // batch's commit does not wait for a record waiting for a permit
        // (the permits may all be held by records waiting for the commit).
        let _permit = match run.permits.try_acquire() {
            Ok(permit) => Some(permit),
            Err(_) => {
                seat.inspect(|s| s.park());
                let permit = run.permits.acquire().await.ok();
                seat.inspect(|s| s.resume());
                permit
            }
        };
        let remaining = run
            .remaining
            .map(|r| r.saturating_sub(run.started.elapsed()));
        // Too close to the deadline: fail without starting, so nothing is
        // cut off half way and the batch answers in time.
        if let Some(left) = remaining
            && left < run.margin
        {
            return Err(FailureReason::OutOfTime {
                remaining_ms: millis(left),
                margin_ms: millis(run.margin),
            });
        }
        // Boxed: a record waiting for its permit holds a small future; only
        // the records in flight hold the engine's and the handler's (large:
        // the SDK's request futures) state.
        let result = Box::pin(self.engine.run_seated(
            seat,
            key.as_ref(),
            payload.as_ref(),
            remaining,
            || (run.handler)(record),
        ))
        .await;
        super::report::split(result).map_err(FailureReason::from)
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
        // Never: a record is shared before it is parked.
        Ok(Outcome::Parked { reason, .. }) => Shared::Failed(FailureReason::Idempotency(format!(
            "the first copy was parked: {reason}"
        ))),
        Err(reason) => Shared::Failed(reason.clone()),
    }
}

/// The response as JSON for the copies, or `None` when it cannot be
/// serialized (even by a panicking `Serialize` impl): the copies then replay
/// no body, as a duplicate of a record stored without its response does.
fn to_value<T: Serialize>(t: &T) -> Option<Value> {
    catch_unwind(AssertUnwindSafe(|| serde_json::to_value(t).ok())).unwrap_or(None)
}
