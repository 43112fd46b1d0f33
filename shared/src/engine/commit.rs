//! The three commit paths behind [`Idempotency::run`]: unprotected (no
//! record), claimed ([`CommitMode::Fenced`], [`CommitMode::ClaimThenComplete`])
//! and optimistic.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::time::Duration;

use super::guard::{run_guarded, unreachable_record, written_by};
use super::{Idempotency, Outcome, Seat};
use crate::config::CommitMode;
use crate::error::{Error, HandlerError};
use crate::key::IdempotencyKey;
use crate::record::{Record, Status};
use crate::store::{RecordWrite, TransactError};
use crate::write::{IntoStaged, Staged, Write};

impl Idempotency {
    /// Runs a handler without a record and commits its staged writes
    /// (atomically, in one request).
    pub(super) async fn unprotected<T, R, F, Fut>(&self, handler: F) -> Result<Outcome<T>, Error>
    where
        R: IntoStaged<T>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let staged: Staged<T> = run_guarded(handler)
            .await
            .map_err(Error::Handler)?
            .into_staged();
        check_staged(&staged).map_err(Error::Handler)?;
        if staged.writes.is_empty() && staged.messages.is_empty() {
            return Ok(Outcome::Unprotected(staged.response));
        }
        // Messages still need a record to ride in: one of their own, under
        // a fresh id, committed with the writes.
        let carrier = (!staged.messages.is_empty()).then(|| {
            let now_ms = self.clock.now_ms();
            let id = format!("{}#outbox-{}", self.config.prefix, uuid::Uuid::new_v4());
            Record {
                outbox: crate::outbox::encode(&id, &staged.messages),
                id,
                status: Status::Completed,
                expiration: now_ms / 1000 + self.config.expires_after.as_secs(),
                in_progress_expiration: None,
                data: None,
                error: None,
                validation: None,
                owner: None,
            }
        });
        let record = match &carrier {
            Some(record) => RecordWrite::Claim {
                record,
                now_ms: self.clock.now_ms(),
            },
            None => RecordWrite::None,
        };
        match self.commit(record, &staged.writes).await {
            Ok(()) => Ok(Outcome::Unprotected(staged.response)),
            Err(TransactError::Write { index, item }) => Err(Error::Handler(rejection(
                &staged.writes[index],
                item.as_ref(),
            ))),
            Err(TransactError::Record(_)) => unreachable_record(),
            Err(TransactError::Store(e) | TransactError::Conflict(e)) => Err(Error::Store(e)),
        }
    }

    /// Claim, run, commit: [`CommitMode::Fenced`] and
    /// [`CommitMode::ClaimThenComplete`].
    pub(super) async fn claimed<T, R, F, Fut>(
        &self,
        key: &IdempotencyKey,
        validation: Option<String>,
        remaining: Option<Duration>,
        mode: CommitMode,
        handler: F,
    ) -> Result<Outcome<T>, Error>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let claimed = match self.claim(key, validation, remaining).await? {
            Ok(claimed) => claimed,
            Err(outcome) => return Ok(outcome),
        };
        let staged: Staged<T> = match run_guarded(handler).await {
            Ok(staged) => staged.into_staged(),
            Err(err) => return self.fail(&claimed, err).await,
        };
        // Everything that can refuse the result is decided before anything
        // commits, so the effects and the outcome always agree.
        let record = match check_staged(&staged).and_then(|()| self.completion(&claimed, &staged)) {
            Ok(record) => record,
            Err(err) => return self.fail(&claimed, err).await,
        };
        let writes: &[Write] = match mode {
            CommitMode::ClaimThenComplete if !staged.writes.is_empty() => {
                match self.commit(RecordWrite::None, &staged.writes).await {
                    Ok(()) => {}
                    Err(TransactError::Write { index, item }) => {
                        let err = rejection(&staged.writes[index], item.as_ref());
                        return self.fail(&claimed, err).await;
                    }
                    Err(TransactError::Record(_)) => return unreachable_record(),
                    // Unknown whether the writes applied (a timeout): the
                    // claim is kept, so no redelivery repeats them before
                    // the lease lapses.
                    Err(TransactError::Store(e) | TransactError::Conflict(e)) => {
                        return Err(Error::Store(e));
                    }
                }
                &[]
            }
            _ => &staged.writes,
        };
        let after_effects = writes.is_empty() && !staged.writes.is_empty();
        match self.commit(RecordWrite::Fenced(&record), writes).await {
            Ok(()) => Ok(self.committed(&record, staged.response)),
            // An earlier attempt of this commit was applied and its answer
            // lost (a timeout); the SDK's retry found our own completion.
            Err(TransactError::Record(Some(existing)))
                if written_by(&existing, &record, Status::Completed) =>
            {
                Ok(self.committed(&record, staged.response))
            }
            Err(TransactError::Record(_)) => Err(Error::LeaseLost {
                key: claimed.id.clone(),
            }),
            Err(TransactError::Write { index, item }) => {
                self.fail(&claimed, rejection(&writes[index], item.as_ref()))
                    .await
            }
            Err(TransactError::Store(e) | TransactError::Conflict(e)) => {
                // Nothing was applied, or (a timeout) it committed: then the
                // record is completed and the fenced release cannot touch
                // it. After writes applied on their own, the claim is kept:
                // releasing it would let a redelivery apply them again at
                // once.
                if !after_effects {
                    self.release(&claimed).await;
                }
                Err(Error::Store(e))
            }
        }
    }

    /// One transaction carrying the claim condition: [`CommitMode::Optimistic`].
    pub(super) async fn optimistic<T, R, F, Fut>(
        &self,
        key: &IdempotencyKey,
        validation: Option<String>,
        seat: Option<&Seat<'_>>,
        handler: F,
    ) -> Result<Outcome<T>, Error>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let base = self.new_claim(key, validation.clone(), None);
        let staged: Staged<T> = match run_guarded(handler).await {
            Ok(staged) => staged.into_staged(),
            Err(err) => return self.fail_unclaimed(&base, validation, err).await,
        };
        if let Err(err) = check_staged(&staged) {
            return self.fail_unclaimed(&base, validation, err).await;
        }
        let attempts = self.config.max_claim_attempts.max(1);
        for attempt in 0..attempts {
            let now_ms = self.clock.now_ms();
            let record = match self.completion(&base, &staged) {
                Ok(record) => record,
                Err(err) => return self.fail_unclaimed(&base, validation, err).await,
            };
            // The first attempt joins the batch's transaction when there is
            // one; a later one (the record in the way vanished) goes alone.
            let result = match seat.filter(|_| attempt == 0) {
                Some(seat) => seat.submit(&record, now_ms, &staged.writes).await,
                None => {
                    self.commit(
                        RecordWrite::Claim {
                            record: &record,
                            now_ms,
                        },
                        &staged.writes,
                    )
                    .await
                }
            };
            let existing = match result {
                Ok(()) => return Ok(self.committed(&record, staged.response)),
                // Our own commit, applied by an earlier attempt whose answer
                // was lost (a timeout): executed now, not a replay.
                Err(TransactError::Record(Some(existing)))
                    if written_by(&existing, &record, Status::Completed) =>
                {
                    return Ok(self.committed(&record, staged.response));
                }
                Err(TransactError::Record(Some(existing))) => Some(existing),
                Err(TransactError::Record(None)) => self.store.get(key.as_str()).await?,
                Err(TransactError::Write { index: i, item }) => {
                    return self
                        .fail_unclaimed(
                            &base,
                            validation,
                            rejection(&staged.writes[i], item.as_ref()),
                        )
                        .await;
                }
                Err(TransactError::Store(e) | TransactError::Conflict(e)) => {
                    return Err(Error::Store(e));
                }
            };
            if let Some(outcome) = existing
                .as_ref()
                .and_then(|e| self.settle_at(e, validation.as_deref(), self.clock.now_ms()))
            {
                return Ok(outcome);
            }
        }
        Err(Error::Contention {
            key: key.as_str().to_owned(),
            attempts,
        })
    }
}

/// Staged writes that no store accepts (the same answer from every store:
/// more than [`MAX_STAGED_WRITES`](crate::write::MAX_STAGED_WRITES), two
/// writes on one item, an update without changes, a number out of range)
/// and messages that could never be delivered, refused before anything
/// commits.
pub(super) fn check_staged<T>(staged: &Staged<T>) -> Result<(), HandlerError> {
    crate::write::check(&staged.writes).map_err(|reason| {
        HandlerError::terminal(format!("the staged writes cannot commit: {reason}"))
    })?;
    for message in &staged.messages {
        message.check().map_err(|reason| {
            HandlerError::terminal(format!("a staged message cannot be published: {reason}"))
        })?;
    }
    Ok(())
}

/// The handler error a staged write's failed condition stands for.
pub(super) fn rejection(write: &Write, item: Option<&crate::write::Item>) -> HandlerError {
    match &write.rejection {
        Some(rejection) => HandlerError::terminal(rejection.message(item)),
        None => HandlerError::retryable(format!(
            "the condition of a staged write on table {} failed",
            write.table
        )),
    }
}
