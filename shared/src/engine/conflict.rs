//! Hot items: a commit cancelled by a conflicting transaction on one of its
//! items ([`TransactError::Conflict`], DynamoDB's `TransactionConflict`
//! cancellation reason, e.g. many instances crediting one account) applied
//! nothing, so the engine sends it again inside the invocation, with a
//! bounded, jittered exponential backoff ([`ConflictRetry`]). When every
//! attempt conflicted it becomes [`StoreError::Conflict`]: a retryable
//! failure of that record, never a duplicate, never a rejection.

use std::time::Duration;

use super::Idempotency;
use crate::error::StoreError;
use crate::store::{CommitsError, RecordWrite, TransactError};
use crate::write::Write;

/// How a commit cancelled by a conflicting transaction is sent again:
/// up to `attempts` in all, the pause before attempt `n + 1` drawn uniformly
/// from `[0, min(cap, base × 2^(n-1))]` ("full jitter": racing instances
/// spread out instead of colliding again in step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConflictRetry {
    /// Attempts in all (the first included).
    pub(crate) attempts: u32,
    /// The ceiling of the first pause.
    pub(crate) base: Duration,
    /// The ceiling of any pause.
    pub(crate) cap: Duration,
}

impl ConflictRetry {
    /// 8 attempts, pauses under 10, 20, 40, 80, 160, 200, 200 ms: at most
    /// 710 ms of waiting per commit (on average half), well inside an
    /// invocation's deadline margin.
    pub(crate) const DEFAULT: Self = Self {
        attempts: 8,
        base: Duration::from_millis(10),
        cap: Duration::from_millis(200),
    };

    /// A batch transaction: 3 attempts, pauses under 10 and 20 ms, then
    /// its records commit one by one (each with [`ConflictRetry::DEFAULT`]):
    /// the more items a transaction holds, the likelier it meets another
    /// one on a hot item, and the fewer a record waits for the others.
    pub(crate) const BATCH: Self = Self {
        attempts: 3,
        ..Self::DEFAULT
    };

    /// The pause after `conflicted` attempts (1-based) conflicted, with
    /// `unit` in `[0, 1)` drawing the jitter; `None` when no attempt is
    /// left.
    pub(crate) fn pause(&self, conflicted: u32, unit: f64) -> Option<Duration> {
        if conflicted == 0 || conflicted >= self.attempts {
            return None;
        }
        let ceiling = self
            .base
            .saturating_mul(1u32 << (conflicted - 1).min(20))
            .min(self.cap);
        Some(ceiling.mul_f64(unit.clamp(0.0, 1.0)))
    }

    /// The longest total pause before giving up.
    #[cfg(test)]
    pub(crate) fn worst_case(&self) -> Duration {
        (1..self.attempts).filter_map(|n| self.pause(n, 1.0)).sum()
    }
}

/// A uniform draw in `[0, 1)` from 53 random bits of a v4 UUID (its lowest
/// bits: the version and variant bits sit higher).
fn unit() -> f64 {
    let bits = uuid::Uuid::new_v4().as_u128() as u64 & ((1u64 << 53) - 1);
    bits as f64 / (1u64 << 53) as f64
}

impl Idempotency {
    /// [`Store::commit`](crate::Store::commit), sent again while it is
    /// cancelled by conflicting transactions ([`ConflictRetry::DEFAULT`]).
    /// Never returns [`TransactError::Conflict`]: exhausted, it is
    /// [`TransactError::Store`] with [`StoreError::Conflict`].
    pub(super) async fn commit(
        &self,
        record: RecordWrite<'_>,
        writes: &[Write],
    ) -> Result<(), TransactError> {
        self.commit_with(ConflictRetry::DEFAULT, record, writes)
            .await
    }

    pub(super) async fn commit_with(
        &self,
        policy: ConflictRetry,
        record: RecordWrite<'_>,
        writes: &[Write],
    ) -> Result<(), TransactError> {
        self.resend_on_conflict(policy, || self.store.commit(record, writes))
            .await
    }

    /// Sends `send` again while it is cancelled by conflicting transactions
    /// (`policy`); exhausted, the last conflict as [`StoreError::Conflict`].
    pub(super) async fn resend_on_conflict<R, Fut>(
        &self,
        policy: ConflictRetry,
        mut send: impl FnMut() -> Fut,
    ) -> R
    where
        R: Resend,
        Fut: std::future::Future<Output = R>,
    {
        let mut conflicted = 0;
        loop {
            let err = match send().await.conflict() {
                Ok(err) => err,
                Err(other) => return other,
            };
            conflicted += 1;
            match policy.pause(conflicted, unit()) {
                Some(pause) => {
                    tracing::debug!(
                        attempt = conflicted,
                        pause_ms = pause.as_millis() as u64,
                        "transaction conflict on a hot item: sending the commit again"
                    );
                    tokio::time::sleep(pause).await;
                }
                None => {
                    tracing::warn!(
                        attempts = conflicted,
                        "transaction conflict on every attempt: the record fails (retryable)"
                    );
                    return R::exhausted(StoreError::Conflict {
                        operation: "TransactWriteItems",
                        attempts: conflicted,
                        source: Box::new(err),
                    });
                }
            }
        }
    }
}

/// A commit's answer that may be a conflict to send again on.
pub(super) trait Resend: Sized {
    /// The conflict's error when this answer is one, else the answer.
    fn conflict(self) -> Result<StoreError, Self>;
    /// The answer when every attempt conflicted.
    fn exhausted(err: StoreError) -> Self;
}

impl Resend for Result<(), TransactError> {
    fn conflict(self) -> Result<StoreError, Self> {
        match self {
            Err(TransactError::Conflict(err)) => Ok(err),
            other => Err(other),
        }
    }
    fn exhausted(err: StoreError) -> Self {
        Err(TransactError::Store(err))
    }
}

impl Resend for Result<(), CommitsError> {
    fn conflict(self) -> Result<StoreError, Self> {
        match self {
            Err(CommitsError::Transaction(TransactError::Conflict(err))) => Ok(err),
            other => Err(other),
        }
    }
    fn exhausted(err: StoreError) -> Self {
        Err(CommitsError::Transaction(TransactError::Store(err)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_exponentially_under_a_cap_and_stop_at_the_bound() {
        let p = ConflictRetry::DEFAULT;
        let ceilings: Vec<u64> = (1..p.attempts)
            .map(|n| p.pause(n, 1.0).unwrap().as_millis() as u64)
            .collect();
        assert_eq!(ceilings, [10, 20, 40, 80, 160, 200, 200]);
        assert_eq!(p.pause(p.attempts, 0.5), None, "no attempt left");
        assert_eq!(p.pause(p.attempts + 5, 0.5), None);
        assert_eq!(p.pause(0, 0.5), None, "nothing conflicted yet");
        assert_eq!(p.worst_case(), Duration::from_millis(710));
    }

    #[test]
    fn pauses_are_jittered_over_the_whole_range() {
        let p = ConflictRetry::DEFAULT;
        assert_eq!(p.pause(3, 0.0), Some(Duration::ZERO));
        assert_eq!(p.pause(3, 0.5), Some(Duration::from_millis(20)));
        // Out-of-range draws are clamped, never longer than the ceiling.
        assert_eq!(p.pause(3, 7.0), Some(Duration::from_millis(40)));
        let draws: Vec<f64> = (0..1000).map(|_| unit()).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        let low = draws.iter().filter(|u| **u < 0.5).count();
        assert!((350..650).contains(&low), "{low} of 1000 under one half");
        let distinct: std::collections::BTreeSet<u64> = (0..50)
            .map(|_| p.pause(4, unit()).unwrap().as_micros() as u64)
            .collect();
        assert!(
            distinct.len() > 40,
            "racing instances draw different pauses"
        );
    }

    /// A memory store whose first `conflicts` transactions are cancelled by
    /// a conflict (nothing applied).
    #[derive(Debug, Default)]
    struct Hot {
        inner: crate::store::MemoryStore,
        conflicts: std::sync::atomic::AtomicU32,
        commits: std::sync::atomic::AtomicU32,
    }

    #[async_trait::async_trait]
    impl crate::store::Store for Hot {
        async fn claim(
            &self,
            record: &crate::record::Record,
            now_ms: u64,
        ) -> Result<crate::store::Claim, StoreError> {
            self.inner.claim(record, now_ms).await
        }
        async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
            self.inner.release(id, owner).await
        }
        async fn get_many(&self, ids: &[String]) -> Result<Vec<crate::record::Record>, StoreError> {
            self.inner.get_many(ids).await
        }
        async fn commit(
            &self,
            record: RecordWrite<'_>,
            writes: &[Write],
        ) -> Result<(), TransactError> {
            use std::sync::atomic::Ordering::SeqCst;
            self.commits.fetch_add(1, SeqCst);
            let left = self.conflicts.load(SeqCst);
            if !writes.is_empty() && left > 0 {
                self.conflicts.store(left - 1, SeqCst);
                return Err(TransactError::Conflict(StoreError::Backend {
                    operation: "TransactWriteItems",
                    source: "TransactionConflict".into(),
                }));
            }
            self.inner.commit(record, writes).await
        }
    }

    async fn credit_once(store: std::sync::Arc<Hot>) -> Result<crate::Outcome<u32>, crate::Error> {
        use crate::value::AttrValue;
        let engine = Idempotency::new(store, crate::Config::with_prefix("hot").disabled(false));
        let key = engine.key(&serde_json::json!("pay-1")).unwrap();
        engine
            .run(&key, None, None, || async {
                let account = crate::write::Item::from([("pk".to_owned(), AttrValue::s("a"))]);
                Ok::<_, crate::HandlerError>(
                    crate::write::Staged::new(1u32)
                        .write(Write::update("accounts", account).add("balance", 5)),
                )
            })
            .await
    }

    #[tokio::test]
    async fn the_engine_sends_a_conflicted_commit_again_then_fails_it_retryably() {
        use crate::error::ErrorType;
        use std::sync::atomic::Ordering::SeqCst;
        let store = std::sync::Arc::new(Hot::default());
        store.conflicts.store(7, SeqCst);
        let out = credit_once(store.clone()).await.unwrap();
        assert_eq!(out, crate::Outcome::Executed(1), "the 8th attempt commits");
        assert_eq!(store.commits.load(SeqCst), 8);

        let store = std::sync::Arc::new(Hot::default());
        store.conflicts.store(u32::MAX, SeqCst);
        let err = credit_once(store.clone()).await.unwrap_err();
        assert!(
            matches!(
                &err,
                crate::Error::Store(StoreError::Conflict { attempts: 8, .. })
            ),
            "{err:?}"
        );
        assert!(err.is_retryable());
        assert_eq!(err.error_type(), "TransactionConflict");
        assert_eq!(store.commits.load(SeqCst), 8, "bounded");
        // The claim was released: a redelivery runs the handler again.
        let id = crate::IdempotencyKey::new("hot", &serde_json::json!("pay-1")).unwrap();
        assert_eq!(
            crate::store::Store::get(&store.inner, id.as_str())
                .await
                .unwrap(),
            None
        );
        store.conflicts.store(0, SeqCst);
        assert_eq!(
            credit_once(store).await.unwrap(),
            crate::Outcome::Executed(1)
        );
    }

    #[test]
    fn a_huge_attempt_count_does_not_overflow() {
        let p = ConflictRetry {
            attempts: u32::MAX,
            ..ConflictRetry::DEFAULT
        };
        assert_eq!(p.pause(200, 1.0), Some(p.cap));
    }
}
