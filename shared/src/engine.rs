//! The engine: claim, run, complete; replay duplicates.

use futures_util::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::config::{Config, OversizedResponse, TerminalErrors};
use crate::error::{Error, ErrorKind, HandlerError, KeyError, StoreError};
use crate::key::{IdempotencyKey, payload_hash};
use crate::record::{Record, Status};
use crate::store::{Claim, Store};

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
#[derive(Debug, Clone)]
pub struct Idempotency {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    clock: Arc<dyn Clock>,
}

impl Idempotency {
    /// An engine over `store` with `config`, on the system clock.
    pub fn new(store: impl Store + 'static, config: Config) -> Self {
        Self {
            store: Arc::new(store),
            config: Arc::new(config),
            clock: Arc::new(SystemClock),
        }
    }

    /// Replaces the clock (tests move time instead of sleeping).
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The store.
    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    /// The key for `material` under this handler's prefix.
    pub fn key(&self, material: &Value) -> Result<IdempotencyKey, KeyError> {
        IdempotencyKey::new(&self.config.prefix, material)
    }

    /// Runs `handler` at most once per `key` (within the record's lifetime).
    ///
    /// * `payload`: hashed for payload validation when that is on (`None`
    ///   skips validation for this call).
    /// * `remaining`: the invocation's remaining time; the lease is the
    ///   shorter of it and the configured lease. `Some(Duration::ZERO)` is a
    ///   real value (the claim lapses at once); `None` means unknown.
    ///
    /// A retryable handler error releases the claim and is returned as
    /// [`Error::Handler`]; a terminal one is recorded or released according to
    /// [`Config::terminal_errors`]. A panic in the handler is caught and
    /// treated as a retryable error.
    pub async fn execute<T, F, Fut>(
        &self,
        key: &IdempotencyKey,
        payload: Option<&Value>,
        remaining: Option<Duration>,
        handler: F,
    ) -> Result<Outcome<T>, Error>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, HandlerError>>,
    {
        if self.config.disabled {
            return run_guarded(handler)
                .await
                .map(Outcome::Unprotected)
                .map_err(Error::Handler);
        }
        let validation = payload
            .filter(|_| self.config.validate_payload)
            .map(payload_hash);
        let claimed = match self.claim(key, validation, remaining).await? {
            Ok(claimed) => claimed,
            Err(outcome) => return outcome,
        };
        let result = run_guarded(handler).await;
        self.finish(claimed, result).await
    }

    /// Claims `key`, or returns the outcome that makes running unnecessary.
    #[allow(clippy::type_complexity)]
    async fn claim<T: DeserializeOwned>(
        &self,
        key: &IdempotencyKey,
        validation: Option<String>,
        remaining: Option<Duration>,
    ) -> Result<Result<Record, Result<Outcome<T>, Error>>, Error> {
        let attempts = self.config.max_claim_attempts.max(1);
        for _ in 0..attempts {
            let now_ms = self.clock.now_ms();
            let lease = remaining.map_or(self.config.lease, |r| r.min(self.config.lease));
            let record = Record {
                id: key.as_str().to_owned(),
                status: Status::InProgress,
                expiration: now_ms / 1000 + self.config.expires_after.as_secs(),
                in_progress_expiration: Some(now_ms.saturating_add(millis(lease))),
                data: None,
                error: None,
                validation: validation.clone(),
                owner: Some(uuid::Uuid::new_v4().to_string()),
            };
            let existing = match self.store.claim(&record, now_ms).await? {
                Claim::Acquired => return Ok(Ok(record)),
                Claim::Vanished => continue,
                Claim::Existing(existing) => existing,
            };
            // Changed between the conditional put and the read: claim again.
            if existing.is_claimable(now_ms) {
                continue;
            }
            if let (Some(stored), Some(ours)) = (&existing.validation, &validation)
                && stored != ours
            {
                return Ok(Err(Ok(Outcome::PayloadMismatch)));
            }
            let outcome = match existing.status {
                Status::InProgress => Ok(Outcome::InProgress {
                    lease_expires_at_ms: existing.in_progress_expiration,
                }),
                Status::Completed => match (existing.error, existing.data) {
                    (Some(error), _) => Ok(Outcome::Rejected {
                        error,
                        replayed: true,
                    }),
                    (None, Some(data)) => serde_json::from_str(&data)
                        .map(|v| Outcome::Replayed(Some(v)))
                        .map_err(Error::Serde),
                    (None, None) => Ok(Outcome::Replayed(None)),
                },
            };
            return Ok(Err(outcome));
        }
        Err(Error::Contention {
            key: key.as_str().to_owned(),
            attempts,
        })
    }

    /// Records the handler's result on the claimed record.
    async fn finish<T: Serialize>(
        &self,
        claimed: Record,
        result: Result<T, HandlerError>,
    ) -> Result<Outcome<T>, Error> {
        let owner = claimed.owner.clone().unwrap_or_default();
        let now_ms = self.clock.now_ms();
        let completed = |data: Option<String>, error: Option<String>| Record {
            status: Status::Completed,
            expiration: now_ms / 1000 + self.config.expires_after.as_secs(),
            in_progress_expiration: None,
            data,
            error,
            ..claimed.clone()
        };
        match result {
            Ok(value) => {
                // The effect has happened: whatever becomes of the response,
                // the completion is recorded so a redelivery does not repeat it.
                let data = self
                    .config
                    .store_responses
                    .then(|| serialize_response(&value, &claimed.id))
                    .flatten();
                let mut record = completed(data, None);
                let limit = self.config.max_item_bytes;
                let mut too_large = None;
                let size = record.item_size(&Default::default());
                if size > limit {
                    let body = record.data.take().map_or(0, |d| d.len());
                    tracing::warn!(
                        key = claimed.id.as_str(),
                        size,
                        limit,
                        "response too large for the idempotency record"
                    );
                    if self.config.oversized == OversizedResponse::Fail {
                        record.error = Some(format!(
                            "response of {body} bytes exceeds the {limit} byte record limit"
                        ));
                        too_large = Some(Error::ResponseTooLarge { size: body, limit });
                    }
                }
                self.store_completion(&record).await?;
                match too_large {
                    Some(err) => Err(err),
                    None => Ok(Outcome::Executed(value)),
                }
            }
            Err(err)
                if err.kind() == ErrorKind::Terminal
                    && self.config.terminal_errors == TerminalErrors::Record =>
            {
                let message = err.to_string();
                let mut record = completed(None, Some(message.clone()));
                if record.item_size(&Default::default()) > self.config.max_item_bytes {
                    let cut = floor_char_boundary(&message, 1024);
                    record.error = Some(message[..cut].to_owned());
                }
                self.store_completion(&record).await?;
                Ok(Outcome::Rejected {
                    error: record.error.unwrap_or_default(),
                    replayed: false,
                })
            }
            Err(err) => {
                if let Err(release) = self.store.release(&claimed.id, &owner).await {
                    // The lease lapses by itself; the redelivery waits for it.
                    tracing::warn!(
                        key = claimed.id.as_str(),
                        error = %crate::error::report(&release),
                        "could not release the claim after a handler error"
                    );
                }
                Err(Error::Handler(err))
            }
        }
    }

    async fn store_completion(&self, record: &Record) -> Result<(), Error> {
        match self.store.complete(record).await {
            Ok(()) => Ok(()),
            Err(StoreError::LeaseLost { id }) => Err(Error::LeaseLost { key: id }),
            Err(other) => Err(Error::Store(other)),
        }
    }
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
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
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
