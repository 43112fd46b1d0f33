use super::*;
use crate::config::CommitMode;
use crate::error::StoreError;
use crate::record::Status;
use crate::store::{Claim, MemoryStore, RecordWrite, TransactError};
use crate::write::{Staged, Write};
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
    async fn commit(&self, record: RecordWrite<'_>, writes: &[Write]) -> Result<(), TransactError> {
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
    async fn commit(&self, record: RecordWrite<'_>, writes: &[Write]) -> Result<(), TransactError> {
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
        let engine = Idempotency::new(store.clone(), Config::with_prefix("own").disabled(false));
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
    let names = crate::store::Attributes {
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

/// A memory store that says it cannot commit staged writes with a record
/// (as the Valkey store says).
#[derive(Debug, Default)]
struct NoTransactions(Counting);

#[async_trait]
impl Store for NoTransactions {
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
        self.0.claim(record, now_ms).await
    }
    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        self.0.release(id, owner).await
    }
    async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
        self.0.get_many(ids).await
    }
    async fn commit(&self, record: RecordWrite<'_>, writes: &[Write]) -> Result<(), TransactError> {
        self.0.commit(record, writes).await
    }
    fn transactions(&self) -> bool {
        false
    }
}

#[tokio::test]
async fn optimistic_mode_needs_a_store_with_transactions() {
    let config = || Config::with_prefix("modes").disabled(false);
    let refused = Idempotency::try_new(
        NoTransactions::default(),
        config().commit_mode(CommitMode::Optimistic),
    )
    .unwrap_err();
    assert_eq!(
        refused,
        ConfigError::Mode(ModeError {
            mode: CommitMode::Optimistic
        })
    );
    for mode in [CommitMode::Fenced, CommitMode::ClaimThenComplete] {
        assert!(
            Idempotency::try_new(NoTransactions::default(), config().commit_mode(mode)).is_ok()
        );
    }
    assert!(
        Idempotency::try_new(
            MemoryStore::new(),
            config().commit_mode(CommitMode::Optimistic)
        )
        .is_ok()
    );

    // Forced in after construction: refused per message, before the handler
    // runs and before any request.
    let store = Arc::new(NoTransactions::default());
    let engine = Idempotency::new(store.clone(), config()).in_mode(CommitMode::Optimistic);
    let key = engine.key(&json!("k")).unwrap();
    let out = engine
        .run(&key, None, None, || async {
            panic!("the handler must not run");
            #[allow(unreachable_code)]
            Ok::<u32, HandlerError>(1)
        })
        .await;
    assert!(
        matches!(&out, Err(e @ Error::Store(StoreError::Invalid { .. })) if !e.is_retryable()),
        "{out:?}"
    );
    assert_eq!(store.0.calls.load(Ordering::SeqCst), 0);
}

/// Optimistic mode reads the record only when the handler fails: a new
/// message costs its one transaction, a duplicate whose handler succeeds
/// the cancelled transaction (it returns the record), and a handler's
/// failure one read, which answers a duplicate from its record.
#[tokio::test]
async fn optimistic_mode_reads_the_record_only_when_the_handler_fails() {
    let store = Arc::new(Counting::default());
    let engine = Idempotency::new(
        store.clone(),
        Config::with_prefix("cost")
            .commit_mode(CommitMode::Optimistic)
            .disabled(false),
    );
    let calls = || store.calls.load(Ordering::SeqCst);
    let key = engine.key(&json!("k")).unwrap();
    let out = engine
        .run(&key, None, None, || async {
            Err::<u32, _>(HandlerError::retryable("downstream timeout"))
        })
        .await;
    assert!(matches!(out, Err(Error::Handler(_))), "{out:?}");
    assert_eq!(calls(), 1, "one read, nothing written");
    let out = engine
        .run(&key, None, None, || async { Ok::<_, HandlerError>(1) })
        .await
        .unwrap();
    assert_eq!(out, Outcome::Executed(1));
    assert_eq!(calls(), 2, "one transaction, no read");
    let out = engine
        .run(&key, None, None, || async { Ok::<_, HandlerError>(2) })
        .await
        .unwrap();
    assert_eq!(out, Outcome::Replayed(Some(1)));
    assert_eq!(calls(), 3, "the cancelled transaction returns the record");
    for err in [
        HandlerError::terminal("already shipped"),
        HandlerError::retryable("downstream timeout"),
    ] {
        let out = engine
            .run(&key, None, None, || async move { Err::<u32, _>(err) })
            .await
            .unwrap();
        assert_eq!(out, Outcome::Replayed(Some(1)));
    }
    assert_eq!(calls(), 5, "one read per failure");
}

/// A record lifetime shorter than the lease would let a second delivery
/// claim a key whose first delivery still runs (the claim condition takes
/// an expired record): refused at construction with both numbers, and per
/// message, before the handler runs, by an engine built with `new`.
#[tokio::test]
async fn a_record_lifetime_shorter_than_the_lease_is_refused() {
    let short = Config::with_prefix("lifetime")
        .disabled(false)
        .expires_after(std::time::Duration::from_secs(30));
    let refused = Idempotency::try_new(MemoryStore::new(), short.clone()).unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("30 s") && message.contains("60 s"),
        "{message}"
    );
    for (expires, lease) in [(60, 60), (30, 30), (3600, 60)] {
        let config = short
            .clone()
            .expires_after(std::time::Duration::from_secs(expires))
            .lease(std::time::Duration::from_secs(lease));
        assert!(Idempotency::try_new(MemoryStore::new(), config).is_ok());
    }

    let store = Arc::new(Counting::default());
    let engine = Idempotency::new(store.clone(), short);
    let key = engine.key(&json!("k")).unwrap();
    let out = engine
        .run(&key, None, None, || async {
            panic!("the handler must not run");
            #[allow(unreachable_code)]
            Ok::<u32, HandlerError>(1)
        })
        .await;
    assert!(
        matches!(&out, Err(e @ Error::Store(StoreError::Invalid { .. })) if !e.is_retryable()),
        "{out:?}"
    );
    let report = crate::error::report(out.as_ref().unwrap_err());
    assert!(
        report.contains("30 s") && report.contains("60 s"),
        "{report}"
    );
    assert_eq!(store.calls.load(Ordering::SeqCst), 0);
}
