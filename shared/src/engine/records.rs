//! Records: claiming a key, building the completed (or rejected) record,
//! failing and releasing, and the helpers the commit paths share.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use super::guard::{panic_message, unreachable_record, written_by};
use super::{Idempotency, Outcome, Settled};
use crate::config::{OversizedResponse, TerminalErrors};
use crate::error::{Error, ErrorKind, HandlerError};
use crate::key::IdempotencyKey;
use crate::record::{Record, Status};
use crate::store::{Claim, RecordWrite, TransactError};
use crate::write::Staged;

impl Idempotency {
    /// A fresh in-progress record for `key` with a new owner token.
    pub(super) fn new_claim(
        &self,
        key: &IdempotencyKey,
        validation: Option<String>,
        remaining: Option<Duration>,
    ) -> Record {
        let now_ms = self.clock.now_ms();
        let lease = remaining.map_or(self.config.lease, |r| r.min(self.config.lease));
        Record {
            id: key.as_str().to_owned(),
            status: Status::InProgress,
            expiration: now_ms / 1000 + self.config.expires_after.as_secs(),
            in_progress_expiration: Some(now_ms.saturating_add(millis(lease))),
            data: None,
            error: None,
            validation,
            owner: Some(uuid::Uuid::new_v4().to_string()),
            outbox: None,
        }
    }

    /// Claims `key`, or returns the outcome that makes running unnecessary.
    pub(super) async fn claim<T: DeserializeOwned>(
        &self,
        key: &IdempotencyKey,
        validation: Option<String>,
        remaining: Option<Duration>,
    ) -> Result<Result<Record, Outcome<T>>, Error> {
        let attempts = self.config.max_claim_attempts.max(1);
        for _ in 0..attempts {
            let record = self.new_claim(key, validation.clone(), remaining);
            let now_ms = self.clock.now_ms();
            let existing = match self.store.claim(&record, now_ms).await? {
                Claim::Acquired => return Ok(Ok(record)),
                Claim::Vanished => continue,
                Claim::Existing(existing) => existing,
            };
            // Our own claim: an earlier attempt of this request was applied
            // and its answer lost (a timeout); the SDK's retry found it. The
            // lease is ours (a lapsed one would have let the retry through).
            if written_by(&existing, &record, Status::InProgress) {
                return Ok(Ok(record));
            }
            // `None`: it changed between the conditional put and the read
            // (expired or its lease lapsed): claim again.
            if let Some(outcome) = self.settle_at(&existing, validation.as_deref(), now_ms) {
                return Ok(Err(outcome));
            }
        }
        Err(Error::Contention {
            key: key.as_str().to_owned(),
            attempts,
        })
    }

    /// A commit that went through: remembered, and the outcome.
    pub(super) fn committed<T>(&self, record: &Record, response: T) -> Outcome<T> {
        self.remember(record);
        Outcome::Executed(response)
    }

    /// The completed record for a claimed one, with the response stored
    /// according to the configuration and the staged messages in its
    /// outbox; under [`OversizedResponse::Fail`] a response too large to
    /// store is a terminal error instead, decided before anything commits.
    /// Messages are never dropped: a record too large with them is a
    /// terminal error whatever the policy.
    pub(super) fn completion<T: Serialize>(
        &self,
        claimed: &Record,
        staged: &Staged<T>,
    ) -> Result<Record, HandlerError> {
        // The completion is recorded whatever becomes of the response, so a
        // redelivery does not repeat the effect.
        let data = self
            .config
            .store_responses
            .then(|| serialize_response(&staged.response, &claimed.id))
            .flatten();
        let mut record = self.completed(claimed, data, None);
        record.outbox = crate::outbox::encode(&record.id, &staged.messages);
        let limit = self.config.max_item_bytes;
        let size = self.store.item_size(&record);
        if size <= limit {
            return Ok(record);
        }
        let body = record.data.take().map_or(0, |d| d.len());
        if record.outbox.is_some() {
            let without_response = self.store.item_size(&record);
            if without_response > limit {
                return Err(HandlerError::terminal(format!(
                    "the staged messages make the idempotency record {without_response} bytes, \
                     over its {limit} byte limit: publish a reference to the payload instead \
                     (a claim check, e.g. an S3 object key)"
                )));
            }
        }
        tracing::warn!(
            key = claimed.id.as_str(),
            size,
            limit,
            "response too large for the idempotency record"
        );
        if self.config.oversized == OversizedResponse::Fail {
            return Err(HandlerError::terminal(format!(
                "response of {body} bytes exceeds the {limit} byte record limit"
            )));
        }
        Ok(record)
    }

    pub(super) fn completed(
        &self,
        claimed: &Record,
        data: Option<String>,
        error: Option<String>,
    ) -> Record {
        let now_ms = self.clock.now_ms();
        Record {
            status: Status::Completed,
            expiration: now_ms / 1000 + self.config.expires_after.as_secs(),
            in_progress_expiration: None,
            data,
            error,
            outbox: None,
            ..claimed.clone()
        }
    }

    /// A terminal error as the record's outcome (cut to fit the item limit).
    pub(super) fn rejection_record(&self, claimed: &Record, err: &HandlerError) -> Record {
        let message = err.to_string();
        let mut record = self.completed(claimed, None, Some(message.clone()));
        if self.store.item_size(&record) > self.config.max_item_bytes {
            let cut = floor_char_boundary(&message, 1024);
            record.error = Some(message[..cut].to_owned());
        }
        record
    }

    pub(super) fn records_terminal(&self, err: &HandlerError) -> bool {
        err.kind() == ErrorKind::Terminal && self.config.terminal_errors == TerminalErrors::Record
    }

    /// A handler failure on a claimed key: record a terminal error when so
    /// configured, otherwise release the claim.
    pub(super) async fn fail<T>(&self, claimed: &Record, err: HandlerError) -> Settled<T> {
        if self.records_terminal(&err) {
            let record = self.rejection_record(claimed, &err);
            match self.commit(RecordWrite::Fenced(&record), &[]).await {
                Ok(()) => {}
                Err(TransactError::Record(Some(existing)))
                    if written_by(&existing, &record, Status::Completed) => {}
                Err(TransactError::Record(_)) => {
                    return Err(Error::LeaseLost {
                        key: claimed.id.clone(),
                    });
                }
                Err(TransactError::Write { .. }) => return unreachable_record(),
                Err(TransactError::Store(e) | TransactError::Conflict(e)) => {
                    return Err(Error::Store(e));
                }
            }
            self.remember(&record);
            return Ok(Outcome::Rejected {
                error: record.error.unwrap_or_default(),
                replayed: false,
            });
        }
        self.release(claimed).await;
        Err(Error::Handler(err))
    }

    /// A handler failure without a claim (optimistic mode, where the
    /// handler runs before any store check): a duplicate is answered from
    /// its record, as the claim modes answer it before running the handler
    /// (replayed, its recorded rejection, a payload mismatch, in progress);
    /// without a live record the error stands. A terminal error to record
    /// is written under the claim condition, whose failure returns the
    /// record; any other error reads the record. The read happens only
    /// here, on a failure: the success path's one transaction carries the
    /// claim condition and costs nothing more.
    pub(super) async fn fail_unclaimed<T: DeserializeOwned>(
        &self,
        base: &Record,
        validation: Option<String>,
        err: HandlerError,
    ) -> Settled<T> {
        if !self.records_terminal(&err) {
            // Unread, the key may be a completed duplicate: not a failure
            // to report as the handler's, but the store's (retryable).
            let existing = self.store.get(&base.id).await.inspect_err(|_| {
                tracing::warn!(
                    key = base.id.as_str(),
                    error = %err,
                    "handler failed and its record could not be read"
                );
            })?;
            let now_ms = self.clock.now_ms();
            return match existing.and_then(|e| self.settle_at(&e, validation.as_deref(), now_ms)) {
                Some(outcome) => Ok(outcome),
                None => Err(Error::Handler(err)),
            };
        }
        let record = self.rejection_record(base, &err);
        let now_ms = self.clock.now_ms();
        match self.store.claim(&record, now_ms).await? {
            Claim::Acquired => {
                self.remember(&record);
                Ok(Outcome::Rejected {
                    error: record.error.unwrap_or_default(),
                    replayed: false,
                })
            }
            Claim::Existing(existing) if written_by(&existing, &record, Status::Completed) => {
                self.remember(&record);
                Ok(Outcome::Rejected {
                    error: record.error.unwrap_or_default(),
                    replayed: false,
                })
            }
            Claim::Existing(existing) => self
                .settle_at(&existing, validation.as_deref(), now_ms)
                .ok_or(Error::Handler(err)),
            Claim::Vanished => Err(Error::Handler(err)),
        }
    }

    pub(super) async fn release(&self, claimed: &Record) {
        let owner = claimed.owner.as_deref().unwrap_or_default();
        if let Err(release) = self.store.release(&claimed.id, owner).await {
            // The lease lapses by itself; the redelivery waits for it.
            tracing::warn!(
                key = claimed.id.as_str(),
                error = %crate::error::report(&release),
                "could not release the claim after a handler error"
            );
        }
    }
}

/// The response as stored JSON, or `None` (logged) when it cannot be
/// serialized, even by a panicking `Serialize` impl.
pub(super) fn serialize_response<T: Serialize>(value: &T, id: &str) -> Option<String> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| serde_json::to_string(value))) {
        Ok(Ok(data)) => Some(data),
        Ok(Err(err)) => {
            tracing::error!(key = id, error = %err, "response not serializable: completion recorded without it");
            None
        }
        Err(panic) => {
            tracing::error!(
                key = id,
                panic = panic_message(&*panic),
                "response serialization panicked: completion recorded without it"
            );
            None
        }
    }
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}
