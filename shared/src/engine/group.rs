//! Batch commits ([`Config::batch_commits`](crate::Config::batch_commits)):
//! in [`CommitMode::Optimistic`](crate::CommitMode::Optimistic), the
//! records of one batch hand their finished commits (record, staged writes,
//! outbox) to the batch's [`CommitGroup`] instead of sending each alone;
//! the group sends them together in as few transactions as the store
//! allows ([`crate::store::batch::plan`]).
//!
//! The group flushes when no running record of the batch can still join:
//! every record holding a [`Seat`] has submitted, or is waiting for
//! something else (a concurrency permit, an in-batch duplicate's first
//! copy: it [parks](Seat::park)), or is done. Records not admitted yet, and
//! the next record of an ordered lane (it only starts once the one before
//! it settled), hold no active seat, so the flush never waits for them: a
//! lane's records commit one after another, in order, each in the
//! transaction of its turn.
//!
//! A transaction cancelled by some commits' conditions settles those
//! records as alone (replayed from the returned record, rejected by the
//! staged write's condition) and is sent again without them; one cancelled
//! by conflicting transactions is sent again with a short backoff
//! ([`ConflictRetry::BATCH`]); one that still fails (conflicts, throttling,
//! a timeout, a request the store refuses) falls back to one transaction
//! per record, each under its own claim condition, so a batch that did
//! commit after all (a timeout) is found record by record, never applied
//! twice.

use futures_util::FutureExt;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use tokio::sync::{Notify, oneshot};

use super::Idempotency;
use super::conflict::ConflictRetry;
use crate::error::StoreError;
use crate::record::Record;
use crate::store::batch::{self, Commit, CommitsError};
use crate::store::{RecordWrite, TransactError};
use crate::write::Write;

/// The commit group of one batch: the records' submitted commits and who
/// can still submit.
#[derive(Debug, Default)]
pub(crate) struct CommitGroup {
    state: Mutex<GroupState>,
    wake: Notify,
}

#[derive(Debug, Default)]
struct GroupState {
    seats: Vec<SeatState>,
    /// Seats in [`SeatState::Active`].
    active: usize,
    pending: Vec<Pending>,
    closed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SeatState {
    /// Running: may still submit; the group waits for it.
    Active,
    /// Waiting for something other than the group.
    Parked,
    /// Its commit is pending.
    Submitted,
    /// Dropped.
    Gone,
}

/// One record's finished commit, waiting for its transaction.
#[derive(Debug)]
struct Pending {
    seat: usize,
    record: Record,
    now_ms: u64,
    writes: Vec<Write>,
    reply: oneshot::Sender<Result<(), TransactError>>,
}

impl Pending {
    fn commit(&self) -> Commit<'_> {
        Commit {
            record: RecordWrite::Claim {
                record: &self.record,
                now_ms: self.now_ms,
            },
            writes: &self.writes,
        }
    }
}

/// A place in a [`CommitGroup`]: held by a unit of the batch (a record, or
/// an ordered lane) from its admission until it ends; active from the
/// start, so the group never flushes before an admitted record had its
/// chance to submit.
#[derive(Debug)]
pub(crate) struct Seat<'g> {
    group: &'g CommitGroup,
    id: usize,
}

impl CommitGroup {
    /// An empty group.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GroupState> {
        super::lock(&self.state)
    }

    /// A new active seat.
    pub(crate) fn seat(&self) -> Seat<'_> {
        let mut state = self.lock();
        state.seats.push(SeatState::Active);
        state.active += 1;
        Seat {
            group: self,
            id: state.seats.len() - 1,
        }
    }

    /// No seat will be taken any more: [`CommitGroup::drive`] returns once
    /// nothing is pending.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    fn transition(&self, state: &mut GroupState, id: usize, to: SeatState) {
        let from = state.seats[id];
        if from == to || from == SeatState::Gone {
            return;
        }
        if from == SeatState::Active {
            state.active -= 1;
        }
        if to == SeatState::Active {
            state.active += 1;
        }
        state.seats[id] = to;
        if state.active == 0 && (!state.pending.is_empty() || state.closed) {
            self.wake.notify_one();
        }
    }

    fn set(&self, id: usize, to: SeatState) {
        let mut state = self.lock();
        self.transition(&mut state, id, to);
    }

    /// Answers a pending commit; its seat is active again before the answer
    /// is sent, so the group waits for what the record does next.
    fn deliver(&self, pending: Pending, result: Result<(), TransactError>) {
        {
            let mut state = self.lock();
            if state.seats[pending.seat] == SeatState::Submitted {
                self.transition(&mut state, pending.seat, SeatState::Active);
            }
        }
        // A record that no longer waits (its future was dropped) needs no
        // answer.
        let _ = pending.reply.send(result);
    }

    /// Flushes whenever no active seat is left and commits are pending,
    /// until the group is closed: run alongside the batch's records.
    pub(crate) async fn drive(&self, engine: &Idempotency) {
        loop {
            let ready = {
                let mut state = self.lock();
                if state.active == 0 && !state.pending.is_empty() {
                    Some(std::mem::take(&mut state.pending))
                } else if state.closed && state.pending.is_empty() {
                    return;
                } else {
                    None
                }
            };
            match ready {
                // A panic fails this flush's records (their answers are
                // dropped), not the group.
                Some(pending) => {
                    let flush = AssertUnwindSafe(engine.flush(self, pending));
                    if flush.catch_unwind().await.is_err() {
                        tracing::error!("a batch commit panicked: its records fail (retryable)");
                    }
                }
                None => self.wake.notified().await,
            }
        }
    }
}

impl Seat<'_> {
    /// Waits for something other than the group (a permit, a first copy):
    /// the group does not wait for this seat meanwhile.
    pub(crate) fn park(&self) {
        self.group.set(self.id, SeatState::Parked);
    }

    /// Running again after [`Seat::park`].
    pub(crate) fn resume(&self) {
        self.group.set(self.id, SeatState::Active);
    }

    /// Hands a finished optimistic commit to the group and waits for its
    /// transaction: the answer [`Store::commit`](crate::Store::commit)
    /// would give for it alone.
    pub(crate) async fn submit(
        &self,
        record: &Record,
        now_ms: u64,
        writes: &[Write],
    ) -> Result<(), TransactError> {
        let (reply, answer) = oneshot::channel();
        {
            let mut state = self.group.lock();
            state.pending.push(Pending {
                seat: self.id,
                record: record.clone(),
                now_ms,
                writes: writes.to_vec(),
                reply,
            });
            // The last active seat submitting wakes the flush.
            self.group
                .transition(&mut state, self.id, SeatState::Submitted);
        }
        let answer = answer.await;
        self.resume();
        match answer {
            Ok(result) => result,
            Err(_) => Err(TransactError::Store(StoreError::Backend {
                operation: "TransactWriteItems",
                source: "the batch commit ended without an answer".into(),
            })),
        }
    }
}

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        self.group.set(self.id, SeatState::Gone);
    }
}

impl Idempotency {
    /// The commit group for one batch, when this engine batches its
    /// commits: optimistic mode, [`Config::batch_commits`](crate::Config::batch_commits)
    /// on, idempotency not switched off.
    pub(crate) fn commit_group(&self) -> Option<CommitGroup> {
        let c = &self.config;
        (c.commit_mode == crate::CommitMode::Optimistic
            && c.batch_commits
            && !c.disabled
            && self.store.transactions())
        .then(CommitGroup::new)
    }

    /// Sends `pending` in the transactions [`batch::plan`] cuts, one after
    /// another, answering each commit.
    async fn flush(&self, group: &CommitGroup, pending: Vec<Pending>) {
        let size = |r: &Record| self.store.item_size(r);
        let plan = {
            let commits: Vec<Commit<'_>> = pending.iter().map(Pending::commit).collect();
            batch::plan(&commits, &size)
        };
        let mut slots: Vec<Option<Pending>> = pending.into_iter().map(Some).collect();
        for tx in plan {
            let live: Vec<Pending> = tx.into_iter().filter_map(|i| slots[i].take()).collect();
            self.send_transaction(group, live).await;
        }
    }

    /// One transaction of a flush: sent again without the commits whose
    /// conditions cancelled it; on any other failure, one transaction per
    /// record.
    async fn send_transaction(&self, group: &CommitGroup, mut live: Vec<Pending>) {
        while live.len() > 1 {
            let result = {
                let commits: Vec<Commit<'_>> = live.iter().map(Pending::commit).collect();
                self.resend_on_conflict(ConflictRetry::BATCH, || self.store.commit_many(&commits))
                    .await
            };
            match result {
                Ok(()) => {
                    for p in live {
                        group.deliver(p, Ok(()));
                    }
                    return;
                }
                Err(CommitsError::Cancelled(failed)) if !failed.is_empty() => {
                    let mut failed: HashMap<usize, TransactError> = failed.into_iter().collect();
                    let mut rest = Vec::with_capacity(live.len());
                    for (i, p) in live.into_iter().enumerate() {
                        match failed.remove(&i) {
                            Some(err) => group.deliver(p, Err(err)),
                            None => rest.push(p),
                        }
                    }
                    live = rest;
                }
                Err(CommitsError::Unsupported) => break,
                Err(err) => {
                    tracing::warn!(
                        records = live.len(),
                        error = %crate::error::report(&err),
                        "batch commit failed: committing its records one by one"
                    );
                    break;
                }
            }
        }
        // No two of them touch one item: they may commit concurrently.
        let one_by_one = live.into_iter().map(|p| async move {
            let result = self.commit(p.commit().record, &p.writes).await;
            group.deliver(p, result);
        });
        futures_util::future::join_all(one_by_one).await;
    }
}
