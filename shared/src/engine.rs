//! The engine: claim, run, complete; replay duplicates.

use futures_util::FutureExt;
use lru::LruCache;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroUsize;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::config::{CommitMode, Config, OversizedResponse, TerminalErrors};
use crate::error::{Error, ErrorKind, HandlerError, KeyError, StoreError};
use crate::key::{IdempotencyKey, payload_hash};
use crate::record::{Record, Status};
use crate::store::{Claim, RecordWrite, Store, TransactError};
use crate::write::{IntoStaged, Staged, Write};

/// What happened to one message. Duplicates and conflicts are outcomes, not errors.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome<T> {
    /// The handler ran now and its completion was recorded.
    Executed(T),
    /// A duplicate of a completed message: the handler did not run. Carries the
    /// stored response, or `None` when none was kept (responses not stored, or
    /// too large to store).
    Replayed(Option<T>),
    /// Another invocation holds a live claim on the key: retry later.
    InProgress {
        /// When that claim's lease lapses (epoch ms), if known.
        lease_expires_at_ms: Option<u64>,
    },
    /// The key was used before with a different payload: a permanent error.
    PayloadMismatch,
    /// A terminal handler error recorded as the key's outcome.
    Rejected {
        /// The recorded error message.
        error: String,
        /// `true` when this is a duplicate replaying an earlier rejection.
        replayed: bool,
    },
    /// Idempotency is disabled by the kill switch: the handler ran unprotected.
    Unprotected(T),
}

/// The idempotency engine for one handler. Cheap to clone; build it once per
/// execution environment and share it.
#[derive(Clone)]
pub struct Idempotency {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    clock: Arc<dyn Clock>,
    cache: Option<Arc<Mutex<LruCache<String, Record>>>>,
    /// Replays whose stored response no longer decodes, since last taken.
    undecodable: Arc<AtomicU64>,
}

impl std::fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("store", &self.store)
            .field("config", &self.config)
            .field("clock", &self.clock)
            .field("cache", &self.cache.as_ref().map(|_| "lru"))
            .finish()
    }
}

/// Records read ahead for a batch (see [`Idempotency::prefetch`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct Prefetched(HashMap<String, Record>);

impl Prefetched {
    /// The record read for `key`, if any.
    pub(crate) fn get(&self, key: &IdempotencyKey) -> Option<&Record> {
        self.0.get(key.as_str())
    }
}

/// What happened after the handler returned, for the paths that share it.
type Settled<T> = Result<Outcome<T>, Error>;

impl Idempotency {
    /// An engine over `store` with `config`, on the system clock.
    pub fn new(store: impl Store + 'static, config: Config) -> Self {
        let cache =
            NonZeroUsize::new(config.local_cache).map(|n| Arc::new(Mutex::new(LruCache::new(n))));
        Self {
            store: Arc::new(store),
            config: Arc::new(config),
            clock: Arc::new(SystemClock),
            cache,
            undecodable: Arc::default(),
        }
    }

    /// Replaces the clock (tests move time instead of sleeping).
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// This engine committing in `mode` instead (same store, clock and
    /// cache): for a handler that needs another mode than the rest.
    pub fn in_mode(&self, mode: CommitMode) -> Self {
        Self {
            config: Arc::new(self.config.as_ref().clone().commit_mode(mode)),
            ..self.clone()
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The store.
    #[cfg(test)]
    pub(crate) fn store(&self) -> &dyn Store {
        &*self.store
    }

    /// The clock's time, epoch milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The key for `material` under this handler's prefix.
    pub fn key(&self, material: &Value) -> Result<IdempotencyKey, KeyError> {
        IdempotencyKey::new(&self.config.prefix, material)
    }

    fn validation(&self, payload: Option<&Value>) -> Option<String> {
        payload
            .filter(|_| self.config.validate_payload)
            .map(payload_hash)
    }

    /// Reads the records of `keys` in one round trip per 100 keys
    /// (`BatchGetItem`), so a batch's completed duplicates can be settled
    /// with [`Idempotency::settle`] without a write.
    pub(crate) async fn prefetch(&self, keys: &[&IdempotencyKey]) -> Result<Prefetched, Error> {
        if self.config.disabled || keys.is_empty() {
            return Ok(Prefetched::default());
        }
        let ids: Vec<String> = keys.iter().map(|k| k.as_str().to_owned()).collect();
        let records = self.store.get_many(&ids).await?;
        Ok(Prefetched(
            records.into_iter().map(|r| (r.id.clone(), r)).collect(),
        ))
    }

    /// The outcome a stored record settles for a delivery of `payload`, if
    /// it settles one: a completed record (replayed, or a payload mismatch)
    /// or a live claim (in progress). `None` when the record is expired or
    /// its lease lapsed: the key must be claimed.
    pub(crate) fn settle<T: DeserializeOwned>(
        &self,
        record: &Record,
        payload: Option<&Value>,
    ) -> Option<Outcome<T>> {
        self.settle_at(
            record,
            self.validation(payload).as_deref(),
            self.clock.now_ms(),
        )
    }

    fn settle_at<T: DeserializeOwned>(
        &self,
        existing: &Record,
        validation: Option<&str>,
        now_ms: u64,
    ) -> Option<Outcome<T>> {
        if existing.is_claimable(now_ms) {
            return None;
        }
        if let (Some(stored), Some(ours)) = (&existing.validation, validation)
            && stored != ours
        {
            return Some(Outcome::PayloadMismatch);
        }
        Some(match existing.status {
            Status::InProgress => Outcome::InProgress {
                lease_expires_at_ms: existing.in_progress_expiration,
            },
            Status::Completed => {
                self.remember(existing);
                match (&existing.error, &existing.data) {
                    (Some(error), _) => Outcome::Rejected {
                        error: error.clone(),
                        replayed: true,
                    },
                    (None, Some(data)) => Outcome::Replayed(self.decode_stored(&existing.id, data)),
                    (None, None) => Outcome::Replayed(None),
                }
            }
        })
    }

    /// A stored response decoded for replay. One that no longer decodes (its
    /// type changed in a deploy) is replayed without its body, logged and
    /// counted: the effect was applied, so failing the message would only
    /// send it to the DLQ.
    fn decode_stored<T: DeserializeOwned>(&self, id: &str, data: &str) -> Option<T> {
        match serde_json::from_str(data) {
            Ok(value) => Some(value),
            Err(err) => {
                tracing::warn!(
                    key = id,
                    error = %err,
                    "stored response no longer decodes: replayed without its body"
                );
                self.undecodable.fetch_add(1, AtomicOrdering::Relaxed);
                None
            }
        }
    }

    /// Takes (and resets) the count of replays whose stored response no
    /// longer decoded, for the invocation's metrics.
    pub(crate) fn take_undecodable(&self) -> u64 {
        self.undecodable.swap(0, AtomicOrdering::Relaxed)
    }

    /// Keeps a completed record in the local cache (when enabled).
    fn remember(&self, record: &Record) {
        if let Some(cache) = &self.cache
            && record.status == Status::Completed
        {
            lock(cache).put(record.id.clone(), record.clone());
        }
    }

    /// The outcome the local cache settles, if enabled and it holds the key.
    fn cached<T: DeserializeOwned>(
        &self,
        key: &IdempotencyKey,
        validation: Option<&str>,
    ) -> Option<Outcome<T>> {
        let record = lock(self.cache.as_ref()?).get(key.as_str()).cloned()?;
        self.settle_at(&record, validation, self.clock.now_ms())
    }

    /// Runs `handler` at most once per `key` (within the record's lifetime)
    /// and commits its effects according to [`Config::commit_mode`].
    ///
    /// The handler returns its response, or a [`Staged`] response with the
    /// writes to commit with the idempotency record (a plain response is a
    /// `Staged` with no writes).
    ///
    /// * `key`: `None` runs the handler unprotected (no record), as does the
    ///   kill switch ([`Config::disabled`]); staged writes still commit
    ///   atomically.
    /// * `payload`: hashed for payload validation when that is on (`None`
    ///   skips validation for this call).
    /// * `remaining`: the invocation's remaining time; the lease is the
    ///   shorter of it and the configured lease. `Some(Duration::ZERO)` is a
    ///   real value (the claim lapses at once); `None` means unknown.
    ///
    /// A retryable handler error releases the claim and is returned as
    /// [`Error::Handler`]; a terminal one is recorded or released according to
    /// [`Config::terminal_errors`]. A staged write whose condition fails
    /// becomes the handler's outcome: its [`Write::or_reject`] message as a
    /// terminal error, or else a retryable one. A panic in the handler is
    /// caught and treated as a retryable error.
    pub async fn run<'k, T, R, F, Fut>(
        &self,
        key: impl Into<Option<&'k IdempotencyKey>>,
        payload: Option<&Value>,
        remaining: Option<Duration>,
        handler: F,
    ) -> Result<Outcome<T>, Error>
    where
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let key = match key.into() {
            Some(key) if !self.config.disabled => key,
            _ => return self.unprotected(handler).await,
        };
        let validation = self.validation(payload);
        if let Some(outcome) = self.cached(key, validation.as_deref()) {
            return Ok(outcome);
        }
        match self.config.commit_mode {
            CommitMode::Optimistic => self.optimistic(key, validation, handler).await,
            mode => {
                self.claimed(key, validation, remaining, mode, handler)
                    .await
            }
        }
    }

    /// Runs a handler without a record and commits its staged writes
    /// (atomically, in one request).
    async fn unprotected<T, R, F, Fut>(&self, handler: F) -> Result<Outcome<T>, Error>
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
        match self.store.commit(record, &staged.writes).await {
            Ok(()) => Ok(Outcome::Unprotected(staged.response)),
            Err(TransactError::Write { index, item }) => Err(Error::Handler(rejection(
                &staged.writes[index],
                item.as_ref(),
            ))),
            Err(TransactError::Record(_)) => unreachable_record(),
            Err(TransactError::Store(e)) => Err(Error::Store(e)),
        }
    }

    /// Claim, run, commit: [`CommitMode::Fenced`] and
    /// [`CommitMode::ClaimThenComplete`].
    async fn claimed<T, R, F, Fut>(
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
                match self.store.commit(RecordWrite::None, &staged.writes).await {
                    Ok(()) => {}
                    Err(TransactError::Write { index, item }) => {
                        let err = rejection(&staged.writes[index], item.as_ref());
                        return self.fail(&claimed, err).await;
                    }
                    Err(TransactError::Record(_)) => return unreachable_record(),
                    // Unknown whether the writes applied (a timeout): the
                    // claim is kept, so no redelivery repeats them before
                    // the lease lapses.
                    Err(TransactError::Store(e)) => return Err(Error::Store(e)),
                }
                &[]
            }
            _ => &staged.writes,
        };
        let after_effects = writes.is_empty() && !staged.writes.is_empty();
        match self
            .store
            .commit(RecordWrite::Fenced(&record), writes)
            .await
        {
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
            Err(TransactError::Store(e)) => {
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
    async fn optimistic<T, R, F, Fut>(
        &self,
        key: &IdempotencyKey,
        validation: Option<String>,
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
        for _ in 0..attempts {
            let now_ms = self.clock.now_ms();
            let record = match self.completion(&base, &staged) {
                Ok(record) => record,
                Err(err) => return self.fail_unclaimed(&base, validation, err).await,
            };
            let result = self
                .store
                .commit(
                    RecordWrite::Claim {
                        record: &record,
                        now_ms,
                    },
                    &staged.writes,
                )
                .await;
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
                Err(TransactError::Store(e)) => return Err(Error::Store(e)),
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

    /// A fresh in-progress record for `key` with a new owner token.
    fn new_claim(
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
    async fn claim<T: DeserializeOwned>(
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
    fn committed<T>(&self, record: &Record, response: T) -> Outcome<T> {
        self.remember(record);
        Outcome::Executed(response)
    }

    /// The completed record for a claimed one, with the response stored
    /// according to the configuration and the staged messages in its
    /// outbox; under [`OversizedResponse::Fail`] a response too large to
    /// store is a terminal error instead, decided before anything commits.
    /// Messages are never dropped: a record too large with them is a
    /// terminal error whatever the policy.
    fn completion<T: Serialize>(
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
        if record.outbox.is_some() && self.store.item_size(&record) > limit {
            return Err(HandlerError::terminal(format!(
                "the staged messages exceed the {limit} byte record limit"
            )));
        }
        Ok(record)
    }

    fn completed(&self, claimed: &Record, data: Option<String>, error: Option<String>) -> Record {
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
    fn rejection_record(&self, claimed: &Record, err: &HandlerError) -> Record {
        let message = err.to_string();
        let mut record = self.completed(claimed, None, Some(message.clone()));
        if self.store.item_size(&record) > self.config.max_item_bytes {
            let cut = floor_char_boundary(&message, 1024);
            record.error = Some(message[..cut].to_owned());
        }
        record
    }

    fn records_terminal(&self, err: &HandlerError) -> bool {
        err.kind() == ErrorKind::Terminal && self.config.terminal_errors == TerminalErrors::Record
    }

    /// A handler failure on a claimed key: record a terminal error when so
    /// configured, otherwise release the claim.
    async fn fail<T>(&self, claimed: &Record, err: HandlerError) -> Settled<T> {
        if self.records_terminal(&err) {
            let record = self.rejection_record(claimed, &err);
            match self.store.commit(RecordWrite::Fenced(&record), &[]).await {
                Ok(()) => {}
                Err(TransactError::Record(Some(existing)))
                    if written_by(&existing, &record, Status::Completed) => {}
                Err(TransactError::Record(_)) => {
                    return Err(Error::LeaseLost {
                        key: claimed.id.clone(),
                    });
                }
                Err(TransactError::Write { .. }) => return unreachable_record(),
                Err(TransactError::Store(e)) => return Err(Error::Store(e)),
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

    /// A handler failure without a claim (optimistic mode): a terminal error
    /// to record is written under the claim condition.
    async fn fail_unclaimed<T: DeserializeOwned>(
        &self,
        base: &Record,
        validation: Option<String>,
        err: HandlerError,
    ) -> Settled<T> {
        if !self.records_terminal(&err) {
            return Err(Error::Handler(err));
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

    async fn release(&self, claimed: &Record) {
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

/// Whether `existing` is `ours` as written, found by a retry after an
/// ambiguous attempt: the given status and our owner token (fresh for every
/// claim, so no other invocation writes it).
fn written_by(existing: &Record, ours: &Record, status: Status) -> bool {
    existing.status == status && existing.owner.is_some() && existing.owner == ours.owner
}

/// Staged writes that no store accepts (the same answer from every store:
/// more than [`MAX_STAGED_WRITES`](crate::write::MAX_STAGED_WRITES), two
/// writes on one item, an update without changes, a number out of range)
/// and messages that could never be delivered, refused before anything
/// commits.
fn check_staged<T>(staged: &Staged<T>) -> Result<(), HandlerError> {
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
fn rejection(write: &Write, item: Option<&crate::write::Item>) -> HandlerError {
    match &write.rejection {
        Some(rejection) => HandlerError::terminal(rejection.message(item)),
        None => HandlerError::retryable(format!(
            "the condition of a staged write on table {} failed",
            write.table
        )),
    }
}

fn unreachable_record<T>() -> Result<T, Error> {
    Err(Error::Store(StoreError::Corrupt {
        id: String::new(),
        reason: "a commit reported a condition it did not carry".into(),
    }))
}

fn lock<V>(m: &Mutex<V>) -> std::sync::MutexGuard<'_, V> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The response as stored JSON, or `None` (logged) when it cannot be
/// serialized, even by a panicking `Serialize` impl.
fn serialize_response<T: Serialize>(value: &T, id: &str) -> Option<String> {
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

/// Runs the handler, turning a panic into a retryable error.
async fn run_guarded<T, F, Fut>(handler: F) -> Result<T, HandlerError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, HandlerError>>,
{
    match AssertUnwindSafe(async move { handler().await })
        .catch_unwind()
        .await
    {
        Ok(result) => result,
        Err(panic) => Err(HandlerError::retryable(format!(
            "handler panicked: {}",
            panic_message(&*panic)
        ))),
    }
}

/// The message of a caught panic payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use async_trait::async_trait;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A memory store that counts the requests reaching it.
    #[derive(Debug, Default)]
    struct Counting {
        inner: MemoryStore,
        calls: AtomicUsize,
    }

    impl Counting {
        fn hit(&self) {
            self.calls.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[async_trait]
    impl Store for Counting {
        async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
            self.hit();
            self.inner.claim(record, now_ms).await
        }
        async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
            self.hit();
            self.inner.release(id, owner).await
        }
        async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
            self.hit();
            self.inner.get_many(ids).await
        }
        async fn commit(
            &self,
            record: RecordWrite<'_>,
            writes: &[Write],
        ) -> Result<(), TransactError> {
            self.hit();
            self.inner.commit(record, writes).await
        }
    }

    #[tokio::test]
    async fn local_cache_replays_without_a_request_and_evicts() {
        let store = Arc::new(Counting::default());
        let engine = Idempotency::new(
            store.clone(),
            Config::with_prefix("cache").local_cache(2).disabled(false),
        );
        let calls = || store.calls.load(Ordering::SeqCst);
        let run = |v: u32| move || async move { Ok::<_, HandlerError>(v) };
        let k1 = engine.key(&json!(1)).unwrap();
        let k2 = engine.key(&json!(2)).unwrap();
        let k3 = engine.key(&json!(3)).unwrap();
        assert_eq!(
            engine.run(&k1, None, None, run(1)).await.unwrap(),
            Outcome::Executed(1)
        );
        assert_eq!(calls(), 2, "claim and complete");
        assert_eq!(
            engine.run(&k1, None, None, run(9)).await.unwrap(),
            Outcome::Replayed(Some(1))
        );
        assert_eq!(calls(), 2, "served from the cache");
        engine.run(&k2, None, None, run(2)).await.unwrap();
        engine.run(&k3, None, None, run(3)).await.unwrap();
        assert_eq!(calls(), 6);
        // k1 was evicted (capacity 2): the duplicate goes to the store.
        assert_eq!(
            engine.run(&k1, None, None, run(9)).await.unwrap(),
            Outcome::Replayed(Some(1))
        );
        assert_eq!(calls(), 7);
    }

    /// A store whose claims, completions and transactions are applied
    /// twice, the second answer returned: what the SDK's retry sees after an
    /// attempt that was applied but whose answer was lost (a timeout).
    #[derive(Debug, Default)]
    struct AnswerLost {
        inner: MemoryStore,
        claims: bool,
        completions: bool,
        transactions: bool,
    }

    #[async_trait]
    impl Store for AnswerLost {
        async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
            if self.claims {
                self.inner.claim(record, now_ms).await?;
            }
            self.inner.claim(record, now_ms).await
        }
        async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
            self.inner.release(id, owner).await
        }
        async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
            self.inner.get_many(ids).await
        }
        async fn commit(
            &self,
            record: RecordWrite<'_>,
            writes: &[Write],
        ) -> Result<(), TransactError> {
            let again = if writes.is_empty() {
                self.completions
            } else {
                self.transactions
            };
            if again {
                let _ = self.inner.commit(record, writes).await;
            }
            self.inner.commit(record, writes).await
        }
    }

    fn credit() -> Write {
        use crate::value::AttrValue;
        Write::update(
            "accounts",
            crate::write::Item::from([("pk".to_owned(), AttrValue::S("a".into()))]),
        )
        .add("balance", 5)
    }

    fn balance(store: &MemoryStore) -> Option<String> {
        use crate::value::AttrValue;
        let key = crate::write::Item::from([("pk".to_owned(), AttrValue::S("a".into()))]);
        store
            .item("accounts", &key)?
            .get("balance")
            .and_then(|v| v.as_n().map(str::to_owned))
    }

    /// A retried claim or commit that finds the record as this very call
    /// wrote it (its owner token) is ours: the handler runs, the commit
    /// counts, once — not "in progress" until the lease lapses, not "lease
    /// lost", not a replay.
    #[tokio::test]
    async fn a_retry_that_finds_its_own_write_is_not_a_conflict() {
        for (claims, completions, transactions) in [
            (true, false, false),
            (false, true, false),
            (false, false, true),
            (true, true, true),
        ] {
            let store = Arc::new(AnswerLost {
                inner: MemoryStore::new(),
                claims,
                completions,
                transactions,
            });
            let engine =
                Idempotency::new(store.clone(), Config::with_prefix("own").disabled(false));
            let in_mode = |mode| {
                Idempotency::new(
                    store.clone(),
                    Config::with_prefix("own").disabled(false).commit_mode(mode),
                )
            };
            let case =
                format!("claims {claims}, completions {completions}, transactions {transactions}");

            let key = engine.key(&json!("plain")).unwrap();
            let runs = AtomicUsize::new(0);
            let out = engine
                .run(&key, None, None, || async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, HandlerError>(1)
                })
                .await;
            assert_eq!(out.unwrap(), Outcome::Executed(1), "{case}");
            assert_eq!(runs.load(Ordering::SeqCst), 1, "{case}");

            for (n, mode) in [CommitMode::Fenced, CommitMode::Optimistic]
                .into_iter()
                .enumerate()
            {
                let key = engine.key(&json!(format!("tx-{n}"))).unwrap();
                let out = in_mode(mode)
                    .run(&key, None, None, || async {
                        Ok::<_, HandlerError>(Staged::new(2).write(credit()))
                    })
                    .await;
                assert_eq!(out.unwrap(), Outcome::Executed(2), "{case}, {mode:?}");
                let record = store.inner.get(key.as_str()).await.unwrap().unwrap();
                assert_eq!(record.status, Status::Completed, "{case}, {mode:?}");
            }
            // Two transactions of 5, each applied once (the retry's record
            // condition failed and applied nothing).
            assert_eq!(balance(&store.inner).as_deref(), Some("10"), "{case}");
        }
    }

    #[tokio::test]
    async fn cache_is_off_by_default() {
        let store = Arc::new(Counting::default());
        let engine = Idempotency::new(
            store.clone(),
            Config::with_prefix("nocache").disabled(false),
        );
        let k = engine.key(&json!("k")).unwrap();
        for _ in 0..3 {
            engine
                .run(&k, None, None, || async { Ok::<_, HandlerError>(1) })
                .await
                .unwrap();
        }
        assert_eq!(store.calls.load(Ordering::SeqCst), 4);
    }

    /// A stored response that no longer decodes into the handler's type (it
    /// changed in a deploy) is a replay without the body, counted: never a
    /// failure, and the handler does not run again.
    #[tokio::test]
    async fn an_undecodable_stored_response_replays_without_body() {
        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct V2 {
            charge: String,
            currency: String,
        }
        let store = MemoryStore::new();
        let engine = Idempotency::new(store, Config::with_prefix("deploy").disabled(false));
        let key = engine.key(&json!("pay-1")).unwrap();
        let v1 = engine
            .run(&key, None, None, || async {
                Ok::<_, HandlerError>(json!({"charge": "ch_1"}))
            })
            .await
            .unwrap();
        assert_eq!(v1, Outcome::Executed(json!({"charge": "ch_1"})));
        let runs = AtomicUsize::new(0);
        for _ in 0..2 {
            let again = engine
                .run(&key, None, None, || async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, HandlerError>(V2 {
                        charge: "ch_2".into(),
                        currency: "EUR".into(),
                    })
                })
                .await
                .unwrap();
            assert_eq!(again, Outcome::Replayed(None));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        assert_eq!(engine.take_undecodable(), 2);
        assert_eq!(engine.take_undecodable(), 0, "taken");
    }

    /// The item size counts the store's own attribute names: with long
    /// custom names a response that would fit under the default names is
    /// stored without its body instead of failing the write.
    #[tokio::test]
    async fn item_sizes_use_the_stores_attribute_names() {
        let long = |n: &str| format!("{n}_{}", "x".repeat(300));
        let names = crate::config::Attributes {
            id: long("id"),
            status: long("status"),
            expiration: long("expiration"),
            in_progress_expiration: long("lease"),
            data: long("data"),
            validation: long("validation"),
            owner: long("owner"),
            error: long("error"),
            outbox: long("outbox"),
        };
        let body = "b".repeat(1_000);
        for (custom, kept) in [(false, true), (true, false)] {
            let mut store = MemoryStore::new().with_max_item_bytes(2_500);
            if custom {
                store = store.with_attributes(names.clone());
            }
            let engine = Idempotency::new(
                store.clone(),
                Config::with_prefix("sizes")
                    .disabled(false)
                    .max_item_bytes(2_500),
            );
            let key = engine.key(&json!("k")).unwrap();
            let out = engine
                .run(&key, None, None, || async {
                    Ok::<_, HandlerError>(json!(body))
                })
                .await;
            assert_eq!(
                out.unwrap(),
                Outcome::Executed(json!(body)),
                "custom {custom}"
            );
            let record = store.get(key.as_str()).await.unwrap().unwrap();
            assert_eq!(record.status, Status::Completed);
            assert_eq!(record.data.is_some(), kept, "custom names {custom}");
        }
    }
}
