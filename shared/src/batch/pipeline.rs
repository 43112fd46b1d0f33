//! The one pipeline every batch source runs through: in-batch duplicates
//! linked, the pre-read, the batch cut into units by the [`Ordering`]
//! (`lanes.rs`), at most `concurrency` handlers at a time, the deadline
//! margin, panics isolated, one log line per record, the batch line and the
//! metric counts. What it guarantees: `docs/guarantees.md`.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{Semaphore, watch};

use super::delivery::{Ordering, SourceNames};
use super::key::{KeyFailure, KeyInput, PayloadScope, key_for};
use super::lanes;
use super::log::{Failure, Unit, log_outcome};
use super::report::{BatchReport, FailureReason, RecordResult, record_outcome};
use super::settings::UnprotectedOrder;
use super::settings::{DEFAULT_CONCURRENCY, PreRead, RecordLogs, Settings, margin, millis};
use super::slot::{Ready, Role, Shared, Slot, State};
use super::source::{Keyed, Prepare, Prepared, Reading};
use crate::engine::{CommitGroup, Outcome, Prefetched, Seat, panic_message};
use crate::error::{HandlerError, report};
use crate::key::{IdempotencyKey, payload_hash};
use crate::parking::Parking;
use crate::write::IntoStaged;

/// How one batch runs: what every source's processor hands the pipeline.
pub struct Pipeline<'a> {
    pub(crate) settings: &'a Settings,
    /// How records are ordered and what a failure takes down.
    pub(crate) ordering: Ordering,
    /// The source's names, for messages and log lines.
    pub(crate) names: &'static SourceNames,
    /// Where a record that can never be prepared is parked when the
    /// processor has no parking ([`Source::unprepared_parking`](super::Source::unprepared_parking)).
    pub(crate) unprepared: Option<&'static dyn Parking>,
    /// Whether a failure is the source's normal operation ([`Source::expected`](super::Source::expected)).
    pub(crate) expected: &'a (dyn Expects + Sync),
}

/// What every record of one batch shares.
struct Run<'a, Rec, T, H> {
    pipeline: &'a Pipeline<'a>,
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
    types: PhantomData<fn(Rec) -> T>,
}

/// A record's outcome: done, or why it failed.
type RecordOutcome<T> = Result<Outcome<T>, FailureReason>;

impl Pipeline<'_> {
    /// Whether records that can never succeed are parked: each record then
    /// gets its [`Ticket`](super::parking::Ticket) ([`Source::ticket`](super::Source::ticket)).
    pub fn parks(&self) -> bool {
        self.settings.parking.is_some() || self.unprepared.is_some()
    }

    /// A record's document from `build`, only when the key or the payload
    /// hash reads it (JSON `null` otherwise): [`Reading::document`].
    pub(crate) fn document(&self, build: impl FnOnce() -> Value) -> Value {
        let read =
            self.settings.payload == PayloadScope::Body || self.settings.key.reads_document();
        if read { build() } else { Value::Null }
    }

    /// Makes `raw` (the record `ident`) what the handler takes, one rule
    /// for every source: `source` reads it ([`Prepare::prepare`]), the
    /// record is keyed ([`KeyInput`] of its document, itself, its envelope
    /// and payload), what payload validation hashes is decided, and
    /// `source` makes the handler's record with its key
    /// ([`Prepare::record`]).
    pub(crate) fn prepare<S: Prepare<Rec>, Rec>(
        &self,
        source: &S,
        ident: &str,
        raw: S::Raw,
    ) -> Result<Ready<Rec>, FailureReason> {
        let Prepared {
            body,
            document,
            envelope,
            payload,
            hashed,
        } = source.prepare(
            &Reading {
                ident,
                pipeline: self,
            },
            &raw,
        )?;
        let input = KeyInput::new(&document, Some(&raw))
            .with_envelope(envelope.as_ref())
            .with_payload(payload.as_deref());
        let key = self.key_of(ident, input)?;
        drop(payload);
        let payload = match self.settings.payload {
            PayloadScope::None => None,
            PayloadScope::Body => Some(hashed.unwrap_or(document)),
        };
        let keyed = Keyed {
            key: key.clone(),
            envelope,
        };
        let record = source.record(raw, body, keyed);
        Ok(Ready {
            record,
            key,
            payload,
        })
    }

    /// The key of the record `ident` from `input`; `None` to run
    /// unprotected.
    pub(crate) fn key_of(
        &self,
        ident: &str,
        input: KeyInput<'_>,
    ) -> Result<Option<IdempotencyKey>, FailureReason> {
        let unit = Unit::new("record", ident, self.names.id_field);
        let s = self.settings;
        key_for(&s.engine, &s.key, s.missing_key, input, &unit).map_err(|e| match e {
            KeyFailure::Bad(e) => FailureReason::Key(e),
            KeyFailure::Panic(panic) => {
                FailureReason::Panic(format!("key selector panicked on message {ident}: {panic}"))
            }
        })
    }

    /// Runs a batch of prepared `slots` (in batch order) and reports every
    /// record, logs the batch line and emits the metric counts. `remaining`
    /// is the invocation's remaining time at `started` (`None`: unknown).
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
        let engine = &self.settings.engine;
        let limit = (self.settings.concurrency)
            .unwrap_or(DEFAULT_CONCURRENCY)
            .clamp(1, Semaphore::MAX_PERMITS);
        let permits = Semaphore::new(limit);
        let group = engine.commit_group();
        let run = Run {
            pipeline: self,
            handler: &handler,
            known: &known,
            permits: &permits,
            started,
            remaining,
            margin: margin(self.settings.deadline_margin, remaining),
            group: group.as_ref(),
            types: PhantomData,
        };
        // Unordered, each record is a unit, and at most `limit` units that
        // run a handler are admitted at a time (a batch of 10,000 holds
        // `limit` futures); units come in batch order, so a copy's first
        // copy is admitted before it. Ordered, every unit is admitted: a
        // unit's copy may wait for its first copy in a later unit.
        let window = if self.ordering.is_ordered() {
            usize::MAX
        } else {
            limit
        };
        let work = run.all(lanes::units(slots, self.ordering), window, size);
        let records = match &group {
            None => work.await,
            Some(group) => {
                let work = work.inspect(|_| group.close());
                futures_util::future::join(group.drive(engine), work)
                    .await
                    .1
            }
        };
        debug_assert_eq!(records.len(), size);
        let count = |label: &str| records.iter().filter(|r| r.label() == label).count();
        tracing::info!(
            records = size,
            fifo = self.ordering.is_ordered(),
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
        let counts = crate::metrics::Counts {
            undecodable: engine.take_undecodable(),
            ..report.counts()
        };
        crate::metrics::emit_for(&counts, engine.tenant());
        report
    }

    /// Links the records that share a key: the first runs, the later ones
    /// take its outcome. A later copy with another payload fails as a payload
    /// mismatch without waiting. Nothing is linked when the kill switch is on.
    fn assign_duplicates<Rec>(&self, slots: &mut [Slot<Rec>]) {
        let config = self.settings.engine.config();
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
            let first = slots[leader].ident.clone();
            slots[i].role = Role::Follower { first, outcome };
        }
    }

    /// Reads ahead the records of the batch's keys when [`PreRead`] says so.
    /// A failed read is logged and ignored: each record then claims as usual.
    async fn read_ahead<Rec>(&self, slots: &[Slot<Rec>]) -> Prefetched {
        let wanted = match self.settings.pre_read {
            PreRead::Never => false,
            PreRead::Always => true,
            PreRead::OnRedelivery => slots.iter().any(|s| {
                matches!(s.state, State::Ready { .. }) && s.ids.receive_count.is_some_and(|c| c > 1)
            }),
        };
        if !wanted {
            return Prefetched::default();
        }
        let keys: Vec<&IdempotencyKey> = (slots.iter())
            .filter_map(|s| match (&s.state, &s.role) {
                (State::Ready { key: Some(k), .. }, Role::Solo | Role::Leader(_)) => Some(k),
                _ => None,
            })
            .collect();
        self.settings
            .engine
            .prefetch(&keys)
            .await
            .unwrap_or_else(|err| {
                tracing::warn!(error = %report(&err), "pre-read failed; records claim one by one");
                Prefetched::default()
            })
    }
}

impl<Rec, T, R, H, Fut> Run<'_, Rec, T, H>
where
    T: Serialize + DeserializeOwned,
    R: IntoStaged<T>,
    H: Fn(Rec) -> Fut,
    Fut: Future<Output = Result<R, HandlerError>>,
{
    /// Runs `units`, at most `window` of those that run a handler admitted
    /// at a time: the `size` records' results, in batch order.
    async fn all(
        &self,
        units: Vec<Vec<Slot<Rec>>>,
        window: usize,
        size: usize,
    ) -> Vec<RecordResult<T>> {
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
                // Taken at admission, before any record of the batch runs:
                // the group waits for every admitted unit.
                let seat = self.group.filter(|_| counts).map(CommitGroup::seat);
                running.push(async move { (counts, self.unit(unit, seat).await) });
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
        results.into_iter().flatten().collect()
    }

    /// Runs the records of one unit (one record; a lane or a lane's key; a
    /// whole batch in [`Ordering::StopBatch`]) one after another. After the
    /// first failure, the unit's later records are failed without running.
    async fn unit(&self, unit: Vec<Slot<Rec>>, seat: Option<Seat<'_>>) -> Vec<RecordResult<T>> {
        let mut results = Vec::with_capacity(unit.len());
        let mut failed: Option<String> = None;
        for slot in unit {
            let ident = slot.ident.clone();
            let result = self.slot(slot, failed.as_deref(), seat.as_ref()).await;
            if failed.is_none() && result.is_failure() {
                failed = Some(ident);
            }
            results.push(result);
        }
        results
    }

    /// Runs one record (or skips it when `skip_after` names an earlier
    /// failure it must follow, or when it runs unprotected and an earlier
    /// record of its lane failed), shares its outcome with its in-batch
    /// duplicates, parks it if it failed terminally, and logs it.
    async fn slot(
        &self,
        slot: Slot<Rec>,
        skip_after: Option<&str>,
        seat: Option<&Seat<'_>>,
    ) -> RecordResult<T> {
        let start = Instant::now();
        let (p, ident, role) = (self.pipeline, slot.ident, slot.role);
        let key_hash = match &slot.state {
            State::Ready { key: Some(k), .. } => Some(k.hash().to_owned()),
            _ => None,
        };
        // A record that failed its signature check is unauthenticated: its
        // line carries the id and the reason only (no lane: on payments it
        // is the account id).
        let unauthenticated = matches!(slot.state, State::Failed(FailureReason::BadSignature(_)));
        // A record run unprotected would run again on every redelivery from
        // an earlier failure of its lane: in a lane cut by key, it waits for
        // every earlier record of the lane and does not run behind a failure
        // of any of them, as if the lane were its unit ([`UnprotectedOrder`]).
        let disabled = p.settings.engine.config().disabled;
        let unprotected =
            matches!(&slot.state, State::Ready { key, .. } if key.is_none() || disabled);
        let by_lane = unprotected && p.settings.unprotected_order == UnprotectedOrder::Lane;
        let mut skip_after = skip_after.map(str::to_owned);
        if let (None, true, Some(turn)) = (&skip_after, by_lane, &slot.turn) {
            skip_after = aside(seat, turn.wait()).await;
        }
        let parking = match &slot.state {
            State::Failed(_) => p.settings.parking.as_deref().or(p.unprepared),
            State::Ready { .. } => p.settings.parking.as_deref(),
        };
        let outcome = match (slot.state, skip_after, &role) {
            // Skipped already, behind the record that made it so.
            (State::Failed(reason @ FailureReason::Skipped { .. }), ..) => Err(reason),
            // Behind a failure a record is skipped, whatever it is: one that
            // cannot run is parked when its turn comes, not before.
            (_, Some(after), _) => Err(FailureReason::Skipped { after }),
            (State::Failed(reason), None, _) => Err(reason),
            // Its first copy may be waiting for the batch's commit.
            (State::Ready { .. }, None, Role::Follower { first, outcome }) => {
                aside(seat, follow(first, outcome.clone())).await
            }
            (
                State::Ready {
                    record,
                    key,
                    payload,
                },
                None,
                _,
            ) => AssertUnwindSafe(self.execute(*record, key, payload, seat))
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| {
                    let panic = panic_message(&*panic);
                    Err(FailureReason::Panic(format!(
                        "processing message {ident} panicked: {panic}"
                    )))
                }),
        };
        // Copies take the failure, not the parking: each copy is parked
        // under its own position.
        if let Role::Leader(tx) = &role {
            tx.send_replace(Some(share(&outcome)));
        }
        let outcome = match (outcome, slot.ticket, parking) {
            (Err(reason), Some(ticket), Some(parking)) if reason.is_terminal() => {
                ticket.park(parking, reason, &ident).await
            }
            (outcome, ..) => outcome,
        };
        if let Some(turn) = &slot.turn {
            turn.settle(outcome.is_err().then_some(ident.as_str()));
        }
        let duplicate_of = match &role {
            Role::Follower { first, .. } => Some(first.as_str()),
            _ => None,
        };
        let lane = if unauthenticated {
            None
        } else {
            slot.ids.lane.as_deref()
        };
        let unit = Unit {
            lane,
            lane_field: p.names.lane_field,
            key: key_hash.as_deref(),
            duplicate_of,
            tenant: p.settings.engine.tenant(),
            ..Unit::new("record", &ident, p.names.id_field)
        };
        let done = matches!(
            outcome,
            Ok(Outcome::Executed(_) | Outcome::Replayed(_) | Outcome::Unprotected(_))
        );
        if !done || p.settings.record_logs == RecordLogs::All {
            let logged = outcome.as_ref().map_err(|reason| Logged {
                reason,
                expected: p.expected.expected(reason),
                next: p.expected.next(reason),
            });
            log_outcome(&unit, logged.as_ref().map(|o| *o), millis(start.elapsed()));
        }
        RecordResult {
            position: slot.index,
            message_id: slot.ids.id,
            lane: slot.ids.lane,
            key_hash,
            outcome,
        }
    }

    /// Runs the handler through the engine (or unprotected without a key),
    /// holding one of the batch's concurrency permits.
    async fn execute(
        &self,
        record: Rec,
        key: Option<IdempotencyKey>,
        payload: Option<Value>,
        seat: Option<&Seat<'_>>,
    ) -> RecordOutcome<T> {
        let engine = &self.pipeline.settings.engine;
        // A record read ahead may settle the outcome without a request.
        if let Some(known) = key.as_ref().and_then(|k| self.known.get(k))
            && let Some(settled) = engine.settle(known, payload.as_ref())
        {
            return record_outcome(Ok(settled));
        }
        // The semaphore is never closed; without a permit, run anyway. The
        // batch's commit does not wait for a record waiting for a permit
        // (the permits may all be held by records waiting for the commit).
        let _permit = match self.permits.try_acquire() {
            Ok(permit) => Some(permit),
            Err(_) => aside(seat, self.permits.acquire()).await.ok(),
        };
        let remaining = (self.remaining).map(|r| r.saturating_sub(self.started.elapsed()));
        // Too close to the deadline: fail without starting, so nothing is
        // cut off half way and the batch answers in time.
        if let Some(left) = remaining
            && left < self.margin
        {
            return Err(FailureReason::OutOfTime {
                remaining_ms: millis(left),
                margin_ms: millis(self.margin),
            });
        }
        // Boxed: a record waiting for its permit holds a small future; only
        // the records in flight hold the engine's and the handler's state.
        let (key, payload) = (key.as_ref(), payload.as_ref());
        let handler = || (self.handler)(record);
        record_outcome(Box::pin(engine.run_seated(seat, key, payload, remaining, handler)).await)
    }
}

/// A record's failure as its log line says it, with the source's word on
/// whether it is expected ([`Source::expected`](super::Source::expected)).
struct Logged<'r> {
    reason: &'r FailureReason,
    expected: bool,
    next: &'static str,
}

impl Failure for Logged<'_> {
    fn in_progress(&self) -> bool {
        self.reason.in_progress()
    }

    fn expected(&self) -> bool {
        self.expected
    }

    fn retryable(&self) -> Option<bool> {
        self.reason.retryable()
    }

    fn next(&self) -> &'static str {
        self.next
    }

    fn describe(&self) -> String {
        self.reason.describe()
    }
}

/// Awaits `f` with `seat` parked: the batch's commit does not wait for it
/// (what `f` waits for may itself wait for the commit).
async fn aside<F: Future>(seat: Option<&Seat<'_>>, f: F) -> F::Output {
    seat.inspect(|s| s.park());
    let output = f.await;
    seat.inspect(|s| s.resume());
    output
}

/// Waits for the first copy of an in-batch duplicate and takes its outcome.
async fn follow<T: DeserializeOwned>(
    first: &str,
    mut outcome: watch::Receiver<Option<Shared>>,
) -> RecordOutcome<T> {
    let shared = outcome
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|s| s.clone());
    let reason = match shared {
        Some(Shared::Done(response)) => {
            return Ok(Outcome::Replayed(
                response.and_then(|v| serde_json::from_value(v).ok()),
            ));
        }
        Some(Shared::Rejected(error)) => {
            return Ok(Outcome::Rejected {
                error,
                replayed: true,
            });
        }
        Some(Shared::Failed(reason)) => reason,
        None => FailureReason::Idempotency("the first copy ended without an outcome".to_owned()),
    };
    Err(FailureReason::DuplicateOf {
        first: first.to_owned(),
        reason: Box::new(reason),
    })
}

/// A first copy's outcome for its duplicates.
fn share<T: Serialize>(outcome: &RecordOutcome<T>) -> Shared {
    match outcome {
        Ok(Outcome::Executed(t) | Outcome::Unprotected(t)) => Shared::Done(to_value(t)),
        Ok(Outcome::Replayed(t)) => Shared::Done(t.as_ref().and_then(to_value)),
        Ok(Outcome::Rejected { error, .. }) => Shared::Rejected(error.clone()),
        Err(reason) => Shared::Failed(reason.clone()),
        // Never: `execute` makes `InProgress` and `PayloadMismatch` failures,
        // and a record is shared before it is parked.
        Ok(other) => Shared::Failed(FailureReason::Idempotency(format!(
            "the first copy ended {}",
            other.label()
        ))),
    }
}

/// The response as JSON for the copies, or `None` when it cannot be
/// serialized (even by a panicking `Serialize` impl): the copies then replay
/// no body, as a duplicate of a record stored without its response does.
fn to_value<T: Serialize>(t: &T) -> Option<Value> {
    catch_unwind(AssertUnwindSafe(|| serde_json::to_value(t).ok())).unwrap_or(None)
}

/// Whether a failure is a source's normal operation, for a pipeline that
/// knows its source only by this ([`Source::expected`](super::Source::expected)).
pub(crate) trait Expects {
    /// Whether `reason` is expected.
    fn expected(&self, reason: &FailureReason) -> bool;
    /// What happens next to a record that failed for `reason`.
    fn next(&self, reason: &FailureReason) -> &'static str;
}

impl<S: super::Source> Expects for S {
    fn expected(&self, reason: &FailureReason) -> bool {
        super::Source::expected(self, reason)
    }

    fn next(&self, reason: &FailureReason) -> &'static str {
        super::Source::next(self, reason)
    }
}
