//! The engine: claim, run, complete; replay duplicates.

use lru::LruCache;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::config::{CommitMode, Config, LifetimeError};
use crate::error::{Error, HandlerError, KeyError};
use crate::key::{IdempotencyKey, payload_hash};
use crate::record::{Record, Status};
use crate::store::Store;
use crate::write::IntoStaged;

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
    /// A stream record that can never succeed, set aside in its processor's
    /// parking queue ([`crate::parking`]) so its lane goes on: done for the
    /// source. Never from the engine: the stream sources give it.
    Parked {
        /// The parked message's id: the record's source position.
        id: String,
        /// Why it can never succeed.
        reason: String,
    },
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
    /// The invocation's tenant (Lambda's tenant isolation mode), if any.
    tenant: Option<Arc<str>>,
}

impl std::fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("store", &self.store)
            .field("config", &self.config)
            .field("clock", &self.clock)
            .field("cache", &self.cache.as_ref().map(|_| "lru"))
            .field("tenant", &self.tenant)
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
        Self::over(Arc::new(store), config)
    }

    /// [`Idempotency::new`] over a store already shared.
    fn over(store: Arc<dyn Store>, config: Config) -> Self {
        let cache =
            NonZeroUsize::new(config.local_cache).map(|n| Arc::new(Mutex::new(LruCache::new(n))));
        Self {
            store,
            config: Arc::new(config),
            clock: Arc::new(SystemClock),
            cache,
            undecodable: Arc::default(),
            tenant: None,
        }
    }

    /// [`Idempotency::new`], refusing a configuration the engine cannot
    /// keep ([`ConfigError`]): a commit mode the store cannot keep
    /// ([`CommitMode::Optimistic`] needs staged writes to commit atomically
    /// with the record ([`Store::transactions`]), and does not claim, so
    /// over a store without transactions (Valkey) it would protect
    /// nothing), or a record lifetime shorter than the lease
    /// ([`Config::check_lifetime`]). Use this constructor whenever the
    /// store or the settings are chosen by configuration.
    pub fn try_new(store: impl Store + 'static, config: Config) -> Result<Self, ConfigError> {
        check(&store, &config)?;
        Ok(Self::new(store, config))
    }

    /// [`Idempotency::try_new`] over a store already shared (what a
    /// store's connect step gives).
    pub(crate) fn try_shared(store: Arc<dyn Store>, config: Config) -> Result<Self, ConfigError> {
        check(&*store, &config)?;
        Ok(Self::over(store, config))
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

    /// This engine for an invocation of `tenant` (Lambda's tenant
    /// isolation mode; `None` or empty: no tenant), sharing its store,
    /// clock and cache: its keys are scoped by the tenant unless
    /// [`Config::tenant_scope`] shares them, and its log lines and metrics
    /// name it. The processors' and the layer's `handle` take the tenant
    /// from the invocation's `Context::tenant_id`.
    pub fn for_tenant(&self, tenant: Option<&str>) -> Self {
        Self {
            tenant: tenant.filter(|t| !t.is_empty()).map(Arc::from),
            ..self.clone()
        }
    }

    /// The invocation's tenant, if any ([`Idempotency::for_tenant`]).
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The key for `material` under this handler's prefix, scoped by the
    /// tenant when there is one ([`IdempotencyKey::scoped`]) and keys are
    /// not shared across tenants ([`Config::tenant_scope`]).
    pub fn key(&self, material: &Value) -> Result<IdempotencyKey, KeyError> {
        let tenant = match self.config.tenant_scope {
            crate::tenant::TenantScope::PerTenant => self.tenant(),
            crate::tenant::TenantScope::Shared => None,
        };
        IdempotencyKey::scoped(&self.config.prefix, tenant, material)
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
                crate::metrics::count_undecodable(&self.undecodable);
                None
            }
        }
    }

    /// Takes (and resets) the count of replays whose stored response no
    /// longer decoded, for the invocation's metrics: the current
    /// invocation's own (see [`crate::metrics::invocation`]).
    pub(crate) fn take_undecodable(&self) -> u64 {
        crate::metrics::take_undecodable(&self.undecodable)
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
    /// The handler returns its response, or a [`Staged`](crate::write::Staged) response with the
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
    /// becomes the handler's outcome: its [`Write::or_reject`](crate::Write::or_reject) message as a
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
        self.run_seated(None, key.into(), payload, remaining, handler)
            .await
    }

    /// [`Idempotency::run`] for a record of a batch holding `seat` in the
    /// batch's [`CommitGroup`]: an optimistic commit goes through the group.
    pub(crate) async fn run_seated<T, R, F, Fut>(
        &self,
        seat: Option<&Seat<'_>>,
        key: Option<&IdempotencyKey>,
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
        let key = match key {
            Some(key) if !self.config.disabled => key,
            _ => return self.unprotected(handler).await,
        };
        let validation = self.validation(payload);
        if let Some(outcome) = self.cached(key, validation.as_deref()) {
            return Ok(outcome);
        }
        // An engine built with `new` or switched with `in_mode` gets the
        // refusal of `try_new` per message, before the handler runs.
        check(&*self.store, &self.config).map_err(|e| {
            Error::Store(crate::error::StoreError::Invalid {
                reason: e.to_string(),
            })
        })?;
        match self.config.commit_mode {
            CommitMode::Optimistic => self.optimistic(key, validation, seat, handler).await,
            mode => {
                self.claimed(key, validation, remaining, mode, handler)
                    .await
            }
        }
    }
}

/// A commit mode the engine's store cannot keep.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "commit mode {} needs a store that commits staged writes atomically with the record; \
     this store cannot (use fenced, or claim-then-complete for keyed or naturally idempotent \
     writes)",
    .mode.as_str()
)]
#[non_exhaustive]
pub struct ModeError {
    /// The refused mode.
    pub mode: CommitMode,
}

/// A configuration the engine refuses ([`Idempotency::try_new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The store cannot keep the commit mode.
    #[error(transparent)]
    Mode(#[from] ModeError),
    /// The record lifetime is shorter than the lease.
    #[error(transparent)]
    Lifetime(#[from] LifetimeError),
}

/// What the engine refuses, in one place: [`Idempotency::try_new`] at
/// construction, [`Idempotency::run`] per message.
fn check(store: &dyn Store, config: &Config) -> Result<(), ConfigError> {
    if config.commit_mode == CommitMode::Optimistic && !store.transactions() {
        return Err(ModeError {
            mode: config.commit_mode,
        }
        .into());
    }
    config.check_lifetime()?;
    Ok(())
}

fn lock<V>(m: &Mutex<V>) -> std::sync::MutexGuard<'_, V> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

mod commit;
mod conflict;
mod group;
mod guard;
mod records;

pub(crate) use group::{CommitGroup, Seat};
pub(crate) use guard::panic_message;

#[cfg(test)]
mod tests;
