//! The store contract suite: one set of cases, run against every store
//! ([`memory`], [`dynamodb`] on moto, [`valkey`] on redis-server) through the engine and the
//! [`Store`] trait. Time moves on a [`ManualClock`]; nothing sleeps for it.

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lambda_idempotency::{
    CommitMode, Config, Error, HandlerError, Idempotency, IdempotencyKey, Item, MemoryStore, Store,
    StoreError, Table, Write, clock::ManualClock, config::OversizedResponse,
    config::TerminalErrors, store::Claim, store::KeyLayout, store::Record, store::RecordWrite,
    store::Status, store::TableConfig, store::TransactError, value::AttrValue, write::Cond,
    write::Staged,
};

/// A store under test and the clock its engines use.
#[derive(Debug, Clone)]
pub struct Harness {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The clock, starting at a fixed instant.
    pub clock: ManualClock,
    /// Where business tables live (the memory store itself, or DynamoDB):
    /// business tables are its [`Table::sibling`]s.
    pub tables: Table,
    /// The client that creates business tables (DynamoDB only).
    ddb: Option<aws_sdk_dynamodb::Client>,
}

/// 2026-11-29T10:00:00.250Z: a fixed start with a millisecond part.
pub const START_MS: u64 = 1_795_950_000_250;

impl Harness {
    fn new(store: Arc<dyn Store>, tables: Table, ddb: Option<aws_sdk_dynamodb::Client>) -> Self {
        Self {
            store,
            clock: ManualClock::new(START_MS),
            tables,
            ddb,
        }
    }

    /// A fresh business table with partition key `pk` (S).
    pub async fn business_table(&self) -> String {
        match &self.ddb {
            None => crate::unique_name("business"),
            Some(client) => crate::create_table(client, "business", "pk", None).await,
        }
    }

    /// A business item.
    pub async fn item(&self, table: &str, pk: &str) -> Option<Item> {
        self.tables
            .sibling(table)
            .get(&pk_key(pk))
            .await
            .expect("get item")
    }

    /// A business item's number attribute, as its exact text.
    pub async fn number_text(&self, table: &str, pk: &str, attr: &str) -> Option<String> {
        self.item(table, pk)
            .await?
            .get(attr)
            .and_then(AttrValue::as_n)
            .map(str::to_owned)
    }

    /// A business item's number attribute.
    pub async fn number(&self, table: &str, pk: &str, attr: &str) -> Option<i64> {
        self.item(table, pk).await?.get(attr)?.as_i64()
    }

    /// Seeds a business item with a number attribute.
    pub async fn seed(&self, table: &str, pk: &str, attr: &str, n: impl Into<AttrValue>) {
        let item = Item::from([(attr.to_owned(), n.into())]);
        self.tables
            .sibling(table)
            .put(&pk_key(pk), item)
            .await
            .expect("seed item");
    }

    /// An engine over the store, on the harness clock.
    pub fn engine(&self, config: Config) -> Idempotency {
        Idempotency::new(self.store.clone(), config).with_clock(self.clock.clone())
    }

    /// The record stored for `key`.
    pub async fn record(&self, key: &IdempotencyKey) -> Option<Record> {
        self.store.get(key.as_str()).await.expect("store get")
    }
}

/// The in-memory store.
pub async fn memory() -> Harness {
    let store = MemoryStore::new();
    Harness::new(
        Arc::new(store.clone()),
        Table::memory(store, "business"),
        None,
    )
}

/// The DynamoDB store on moto, with a fresh table.
pub async fn dynamodb() -> Harness {
    let client = crate::moto().dynamodb().await;
    let table = crate::create_idempotency_table(&client).await;
    Harness::new(
        Arc::new(lambda_idempotency::DynamoDbStore::new(
            client.clone(),
            TableConfig::new(table),
        )),
        Table::dynamodb(client.clone(), "business"),
        Some(client),
    )
}

/// The DynamoDB store on moto, its records in a fresh table with a
/// partition key `pk` and a sort key `sk` ([`KeyLayout::Spread`]: the
/// partition key `IDEMPOTENCY#<key>`, the sort key `IDEMPOTENCY`).
pub async fn dynamodb_sort_key() -> Harness {
    composite(KeyLayout::Spread {
        sort_key: "sk".into(),
    })
    .await
}

/// The DynamoDB store on moto, its records in a fresh table with a
/// partition key `pk` and a sort key `sk` ([`KeyLayout::FixedPartition`]:
/// Powertools' layout, every record under one partition key value).
pub async fn dynamodb_fixed_partition() -> Harness {
    composite(KeyLayout::FixedPartition {
        sort_key: "sk".into(),
        partition_value: "idempotency#contract".into(),
    })
    .await
}

/// The DynamoDB store over a composite-key table laid out as `layout`,
/// checked at start as a function's store is.
async fn composite(layout: KeyLayout) -> Harness {
    let client = crate::moto().dynamodb().await;
    let table = crate::create_composite_table(&client, "single-table").await;
    let config = TableConfig::new(table)
        .partition_key("pk")
        .key_layout(layout);
    let store = lambda_idempotency::DynamoDbStore::checked(client.clone(), config)
        .await
        .expect("the composite table passes the check");
    Harness::new(
        Arc::new(store),
        Table::dynamodb(client.clone(), "business"),
        Some(client),
    )
}

/// The Valkey store on the test process's `redis-server`, keys under a
/// prefix of their own, TTLs on the harness clock; staged writes (the kill
/// switch's) commit on their own in a memory store's business tables.
pub async fn valkey() -> Harness {
    let clock = ManualClock::new(START_MS);
    let tables = MemoryStore::new();
    let store = crate::valkey::valkey()
        .store_on(clock.clone())
        .await
        .with_tables(tables.clone());
    Harness {
        store: Arc::new(store),
        clock,
        tables: Table::memory(tables, "business"),
        ddb: None,
    }
}

/// A `pk` key.
pub fn pk_key(pk: &str) -> Item {
    Item::from([("pk".to_owned(), AttrValue::s(pk))])
}

fn config() -> Config {
    Config::with_prefix("contract.handler")
        .expires_after(Duration::from_secs(3600))
        .lease(Duration::from_secs(30))
        .disabled(false)
}

fn ok(v: Value) -> Result<Value, HandlerError> {
    Ok(v)
}

/// First claim: the handler runs, the record is completed with the response,
/// the expiration in epoch seconds and the owner token.
pub async fn first_claim_executes(h: Harness) {
    let engine = h.engine(config());
    let key = engine.key(&json!("pay-1")).unwrap();
    let out = engine
        .run(&key, Some(&json!({"a": 1})), None, || async {
            ok(json!({"charged": 1}))
        })
        .await
        .unwrap();
    assert_eq!(
        out,
        lambda_idempotency::Outcome::Executed(json!({"charged": 1}))
    );
    let rec = h.record(&key).await.expect("record written");
    assert_eq!(rec.status, Status::Completed);
    assert_eq!(rec.data.as_deref(), Some(r#"{"charged":1}"#));
    assert_eq!(rec.expiration, START_MS / 1000 + 3600);
    assert!(rec.owner.is_some_and(|o| !o.is_empty()));
    assert!(rec.validation.is_some_and(|v| v.len() == 64));
    assert_eq!(rec.error, None);
}

/// A duplicate replays the stored response without running the handler.
pub async fn duplicate_replays(h: Harness) {
    let engine = h.engine(config());
    let key = engine.key(&json!({"payment": "pay-2"})).unwrap();
    let runs = AtomicUsize::new(0);
    for i in 0..3 {
        let out = engine
            .run(&key, Some(&json!({"amount": 5})), None, || async {
                runs.fetch_add(1, Ordering::SeqCst);
                ok(json!({"receipt": "r-1"}))
            })
            .await
            .unwrap();
        let expected = if i == 0 {
            lambda_idempotency::Outcome::Executed(json!({"receipt": "r-1"}))
        } else {
            lambda_idempotency::Outcome::Replayed(Some(json!({"receipt": "r-1"})))
        };
        assert_eq!(out, expected, "delivery {i}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// A completed record past its expiration is claimed again.
pub async fn expired_record_is_reclaimable(h: Harness) {
    // A lifetime is never shorter than the lease: both 10 s here.
    let engine = h.engine(
        config()
            .expires_after(Duration::from_secs(10))
            .lease(Duration::from_secs(10)),
    );
    let key = engine.key(&json!("pay-3")).unwrap();
    let runs = AtomicUsize::new(0);
    let run = || async {
        let n = runs.fetch_add(1, Ordering::SeqCst);
        ok(json!(n))
    };
    assert!(matches!(
        engine.run(&key, None, None, run).await.unwrap(),
        lambda_idempotency::Outcome::Executed(_)
    ));
    // At exactly the expiration second the record still stands.
    h.clock.advance(Duration::from_secs(10));
    assert_eq!(
        engine.run(&key, None, None, run).await.unwrap(),
        lambda_idempotency::Outcome::Replayed(Some(json!(0)))
    );
    h.clock.advance(Duration::from_secs(1));
    assert_eq!(
        engine.run(&key, None, None, run).await.unwrap(),
        lambda_idempotency::Outcome::Executed(json!(1))
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// While a claim's lease is live, another delivery is told it is in progress.
pub async fn live_claim_conflicts(h: Harness) {
    let engine = h.engine(config());
    let key = engine.key(&json!("pay-4")).unwrap();
    let out = engine
        .run(&key, None, None, || async {
            let rec = h.record(&key).await.expect("claim written");
            assert_eq!(rec.status, Status::InProgress);
            assert_eq!(rec.in_progress_expiration, Some(START_MS + 30_000));
            h.clock.advance(Duration::from_secs(29));
            let inner = engine
                .run(&key, None, None, || async { ok(json!("second")) })
                .await
                .unwrap();
            assert_eq!(
                inner,
                lambda_idempotency::Outcome::InProgress {
                    lease_expires_at_ms: Some(START_MS + 30_000)
                }
            );
            ok(json!("first"))
        })
        .await
        .unwrap();
    assert_eq!(out, lambda_idempotency::Outcome::Executed(json!("first")));
}

/// A lapsed lease is taken over; the stale owner's completion is rejected
/// and does not overwrite the new owner's record.
pub async fn lapsed_lease_is_taken_over(h: Harness) {
    let engine = h.engine(config());
    let key = engine.key(&json!("pay-5")).unwrap();
    let result = engine
        .run(&key, None, None, || async {
            h.clock.advance(Duration::from_millis(30_001));
            let takeover = engine
                .run(&key, None, None, || async { ok(json!("second")) })
                .await
                .unwrap();
            assert_eq!(
                takeover,
                lambda_idempotency::Outcome::Executed(json!("second"))
            );
            ok(json!("first"))
        })
        .await;
    match result {
        Err(Error::LeaseLost { key: lost }) => assert_eq!(lost, key.as_str()),
        other => panic!("expected LeaseLost, got {other:?}"),
    }
    let rec = h.record(&key).await.unwrap();
    assert_eq!(rec.status, Status::Completed);
    assert_eq!(rec.data.as_deref(), Some(r#""second""#));
}

/// A stale owner can neither complete nor release; a retryable failure after
/// a takeover leaves the new owner's record alone.
pub async fn stale_owner_cannot_complete_or_release(h: Harness) {
    let engine = h.engine(config());
    let key = engine.key(&json!("pay-6")).unwrap();
    let result = engine
        .run(&key, None, None, || async {
            h.clock.advance(Duration::from_secs(31));
            let takeover = engine
                .run(&key, None, None, || async {
                    // While the new owner holds the claim, the store refuses
                    // every other token.
                    let held = h.record(&key).await.unwrap();
                    let stale = Record {
                        owner: Some("not-the-owner".into()),
                        status: Status::Completed,
                        ..held.clone()
                    };
                    assert!(matches!(
                        h.store.commit(RecordWrite::Fenced(&stale), &[]).await,
                        Err(TransactError::Record(Some(_)))
                    ));
                    assert!(matches!(
                        h.store.release(key.as_str(), "not-the-owner").await,
                        Err(StoreError::LeaseLost { .. })
                    ));
                    assert_eq!(h.record(&key).await.unwrap(), held);
                    ok(json!("new owner"))
                })
                .await
                .unwrap();
            assert_eq!(
                takeover,
                lambda_idempotency::Outcome::Executed(json!("new owner"))
            );
            Err::<Value, _>(HandlerError::retryable("first owner failed late"))
        })
        .await;
    assert!(matches!(result, Err(Error::Handler(_))), "{result:?}");
    let rec = h.record(&key).await.expect("new owner's record kept");
    assert_eq!(rec.status, Status::Completed);
    assert_eq!(rec.data.as_deref(), Some(r#""new owner""#));
}

/// The same key with another payload is a mismatch; reordered keys are not.
pub async fn payload_mismatch(h: Harness) {
    let engine = h.engine(config());
    let key = engine.key(&json!("pay-7")).unwrap();
    let first = json!({"amount": 10, "currency": "EUR"});
    let reordered = json!({"currency": "EUR", "amount": 10});
    let other = json!({"amount": 11, "currency": "EUR"});
    let run = || async { ok(json!("done")) };
    engine.run(&key, Some(&first), None, run).await.unwrap();
    assert_eq!(
        engine.run(&key, Some(&reordered), None, run).await.unwrap(),
        lambda_idempotency::Outcome::Replayed(Some(json!("done")))
    );
    assert_eq!(
        engine.run(&key, Some(&other), None, run).await.unwrap(),
        lambda_idempotency::Outcome::PayloadMismatch
    );
}

/// Eight concurrent claims of one key: exactly one is acquired, at the store
/// and through the engine.
pub async fn concurrent_claims_one_winner(h: Harness) {
    let key = IdempotencyKey::new("contract.race", &json!("pay-8")).unwrap();
    let now = lambda_idempotency::clock::Clock::now_ms(&h.clock);
    let claims = (0..8).map(|i| {
        let store = h.store.clone();
        let record = Record {
            id: key.as_str().to_owned(),
            status: Status::InProgress,
            expiration: now / 1000 + 60,
            in_progress_expiration: Some(now + 10_000),
            data: None,
            error: None,
            validation: None,
            owner: Some(format!("owner-{i}")),
            outbox: None,
        };
        tokio::spawn(async move { store.claim(&record, now).await })
    });
    let mut acquired = 0;
    for c in claims {
        match c.await.unwrap().unwrap() {
            Claim::Acquired => acquired += 1,
            Claim::Existing(r) => assert_eq!(r.status, Status::InProgress),
            Claim::Vanished => panic!("nothing deletes in this race"),
        }
    }
    assert_eq!(acquired, 1);

    let engine = h.engine(config());
    let key = engine.key(&json!("pay-9")).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let tasks = (0..8).map(|_| {
        let (engine, key, runs) = (engine.clone(), key.clone(), runs.clone());
        tokio::spawn(async move {
            engine
                .run(&key, None, None, || async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    ok(json!("once"))
                })
                .await
                .unwrap()
        })
    });
    let mut executed = 0;
    for t in tasks {
        match t.await.unwrap() {
            lambda_idempotency::Outcome::Executed(_) => executed += 1,
            lambda_idempotency::Outcome::InProgress { .. }
            | lambda_idempotency::Outcome::Replayed(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(executed, 1);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// A response over the item limit never crashes: stored without its body by
/// default, or failing the record (with a recorded rejection) when configured.
pub async fn oversized_response_is_handled(h: Harness) {
    let big = "x".repeat(500 * 1024);
    let engine = h.engine(config());
    let key = engine.key(&json!("big-1")).unwrap();
    let out = engine
        .run(&key, None, None, || async { ok(json!(big)) })
        .await
        .unwrap();
    assert_eq!(out, lambda_idempotency::Outcome::Executed(json!(big)));
    let rec = h.record(&key).await.unwrap();
    assert_eq!((rec.status, rec.data), (Status::Completed, None));
    assert_eq!(
        engine
            .run(&key, None, None, || async { ok(json!("again")) })
            .await
            .unwrap(),
        lambda_idempotency::Outcome::Replayed(None)
    );

    // Fail: the oversized response is a terminal error decided before
    // anything commits: recorded as the key's outcome, replayed after.
    let strict = h.engine(
        config()
            .on_oversized(OversizedResponse::Fail)
            .on_terminal_error(TerminalErrors::Record),
    );
    let key = strict.key(&json!("big-2")).unwrap();
    let first = strict
        .run(&key, None, None, || async { ok(json!(big)) })
        .await
        .unwrap();
    match &first {
        lambda_idempotency::Outcome::Rejected {
            error,
            replayed: false,
        } => assert!(error.contains("exceeds"), "{error}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    let runs = AtomicUsize::new(0);
    let again = strict
        .run(&key, None, None, || async {
            runs.fetch_add(1, Ordering::SeqCst);
            ok(json!("again"))
        })
        .await
        .unwrap();
    assert!(
        matches!(
            again,
            lambda_idempotency::Outcome::Rejected { replayed: true, .. }
        ),
        "{again:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// `OversizedResponse::Fail` with staged writes: in every mode nothing
/// commits, and every delivery's outcome says so (a rejection, or a
/// retryable failure under the release policy) — never a committed effect
/// reported as a failure.
pub async fn oversized_response_commits_nothing(h: Harness) {
    let table = h.business_table().await;
    let big = "x".repeat(500 * 1024);
    for (n, mode) in [
        CommitMode::ClaimThenComplete,
        CommitMode::Fenced,
        CommitMode::Optimistic,
    ]
    .into_iter()
    .enumerate()
    {
        let pk = format!("big-{n}");
        for policy in [TerminalErrors::Record, TerminalErrors::Release] {
            let engine = h.engine(
                config()
                    .on_oversized(OversizedResponse::Fail)
                    .on_terminal_error(policy)
                    .commit_mode(mode),
            );
            let key = engine.key(&json!(format!("{pk}-{policy:?}"))).unwrap();
            for delivery in 0..2 {
                let out = engine
                    .run(&key, None, None, || async {
                        Ok::<_, HandlerError>(Staged::new(json!(big)).write(credit(&table, &pk, 1)))
                    })
                    .await;
                match (policy, out) {
                    (
                        TerminalErrors::Record,
                        Ok(lambda_idempotency::Outcome::Rejected { replayed, .. }),
                    ) => {
                        assert_eq!(replayed, delivery > 0, "{mode:?}")
                    }
                    (TerminalErrors::Release, Err(Error::Handler(e))) => {
                        assert!(e.to_string().contains("exceeds"), "{e}")
                    }
                    (_, other) => panic!("{mode:?} {policy:?}: unexpected {other:?}"),
                }
            }
            assert_eq!(h.number(&table, &pk, "balance").await, None, "{mode:?}");
        }
    }
}

/// Records carry `expiration` in epoch seconds and the lease in epoch
/// milliseconds; the lease is capped by the remaining time, and a remaining
/// time of zero is a real (immediately lapsing) lease.
pub async fn expiration_units_and_lease_cap(h: Harness) {
    let engine = h.engine(config());
    let key = engine.key(&json!("units")).unwrap();
    engine
        .run(&key, None, Some(Duration::from_secs(5)), || async {
            let rec = h.record(&key).await.unwrap();
            assert_eq!(rec.expiration, START_MS / 1000 + 3600);
            assert!(rec.expiration < 10_000_000_000, "seconds, not ms");
            assert_eq!(rec.in_progress_expiration, Some(START_MS + 5_000));
            ok(json!(null))
        })
        .await
        .unwrap();

    let key = engine.key(&json!("zero")).unwrap();
    let out = engine
        .run(&key, None, Some(Duration::ZERO), || async {
            let rec = h.record(&key).await.unwrap();
            assert_eq!(rec.in_progress_expiration, Some(START_MS));
            h.clock.advance(Duration::from_millis(1));
            let takeover = engine
                .run(&key, None, None, || async { ok(json!("b")) })
                .await
                .unwrap();
            assert_eq!(takeover, lambda_idempotency::Outcome::Executed(json!("b")));
            ok(json!("a"))
        })
        .await;
    assert!(matches!(out, Err(Error::LeaseLost { .. })), "{out:?}");
}

/// A retryable failure (and a panic) releases the claim: the next delivery runs.
pub async fn retryable_failure_releases(h: Harness) {
    let engine = h.engine(config());
    let key = engine.key(&json!("flaky")).unwrap();
    let err = engine
        .run(&key, None, None, || async {
            Err::<Value, _>(HandlerError::retryable("downstream timeout"))
        })
        .await
        .unwrap_err();
    assert!(err.is_retryable());
    assert!(err.to_string().contains("downstream timeout"), "{err}");
    assert_eq!(h.record(&key).await, None);

    let err = engine
        .run(&key, None, None, || async {
            if key.as_str().starts_with("contract") {
                panic!("handler bug");
            }
            ok(json!(0))
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("handler bug"), "{err}");
    assert_eq!(h.record(&key).await, None);

    assert_eq!(
        engine
            .run(&key, None, None, || async { ok(json!("fine")) })
            .await
            .unwrap(),
        lambda_idempotency::Outcome::Executed(json!("fine"))
    );
}

/// Terminal errors: recorded and replayed (Stripe style) when configured,
/// released by default.
pub async fn terminal_errors_follow_policy(h: Harness) {
    let recording = h.engine(config().on_terminal_error(TerminalErrors::Record));
    let key = recording.key(&json!("no-stock")).unwrap();
    let runs = AtomicUsize::new(0);
    let reject = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Err::<Value, _>(HandlerError::terminal("insufficient stock"))
    };
    let first = recording.run(&key, None, None, reject).await.unwrap();
    assert_eq!(
        first,
        lambda_idempotency::Outcome::Rejected {
            error: "insufficient stock".into(),
            replayed: false
        }
    );
    let second = recording.run(&key, None, None, reject).await.unwrap();
    assert_eq!(
        second,
        lambda_idempotency::Outcome::Rejected {
            error: "insufficient stock".into(),
            replayed: true
        }
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let rec = h.record(&key).await.unwrap();
    assert_eq!(rec.error.as_deref(), Some("insufficient stock"));

    let releasing = h.engine(config());
    let key = releasing.key(&json!("bad-input")).unwrap();
    let err = releasing
        .run(&key, None, None, || async {
            Err::<Value, _>(HandlerError::terminal("negative amount"))
        })
        .await
        .unwrap_err();
    assert!(!err.is_retryable());
    assert_eq!(h.record(&key).await, None);
}

/// A duplicate whose handler fails now is answered from its record, in
/// every commit mode the store keeps: the kept response replayed (or the
/// recorded rejection, or a payload mismatch), never the handler's error.
/// The claim modes find the record before the handler runs; optimistic
/// mode runs the handler before any store check and reads the record when
/// it fails. A key without a record fails with the handler's error and
/// writes nothing.
pub async fn a_failing_duplicate_is_answered_from_its_record(h: Harness) {
    use lambda_idempotency::Outcome;
    let mut modes = vec![CommitMode::ClaimThenComplete, CommitMode::Fenced];
    if h.store.transactions() {
        modes.push(CommitMode::Optimistic);
    }
    let table = h.business_table().await;
    for mode in modes {
        let name = mode.as_str();
        let engine = h.engine(config().commit_mode(mode));
        let runs = AtomicUsize::new(0);
        let payload = json!({"order": name});
        let key = engine.key(&json!(format!("shipped-{name}"))).unwrap();
        let out = engine
            .run(&key, Some(&payload), None, || async { ok(json!(1)) })
            .await
            .unwrap();
        assert_eq!(out, Outcome::Executed(json!(1)), "{name}");
        let failures: [fn() -> HandlerError; 2] = [
            || HandlerError::terminal("already shipped"),
            || HandlerError::retryable("downstream timeout"),
        ];
        for fail in failures {
            let out = engine
                .run(&key, Some(&payload), None, || async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Err::<Value, _>(fail())
                })
                .await;
            assert!(
                matches!(&out, Ok(Outcome::Replayed(Some(v))) if *v == json!(1)),
                "{name}: {out:?}"
            );
        }
        let out = engine
            .run(&key, Some(&payload), None, || async {
                runs.fetch_add(1, Ordering::SeqCst);
                if !name.is_empty() {
                    panic!("the duplicate's handler panicked");
                }
                ok(json!(2))
            })
            .await;
        assert!(
            matches!(&out, Ok(Outcome::Replayed(Some(v))) if *v == json!(1)),
            "{name}: {out:?}"
        );
        // A staged write whose condition fails now (the money is gone): the
        // duplicate is still the kept answer, and nothing is applied.
        if h.store.transactions() {
            let out = engine
                .run(&key, Some(&payload), None, || async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    let debit = Write::update(&table, pk_key("empty"))
                        .add("balance", -5)
                        .when(Cond::ge("balance", 5))
                        .or_reject("insufficient funds");
                    Ok::<_, HandlerError>(Staged::new(json!(3)).write(debit))
                })
                .await;
            assert!(
                matches!(&out, Ok(Outcome::Replayed(Some(v))) if *v == json!(1)),
                "{name}: {out:?}"
            );
            assert_eq!(h.number(&table, "empty", "balance").await, None, "{name}");
        }
        // Another payload under the key: a mismatch, failing or not.
        let out = engine
            .run(&key, Some(&json!({"order": "other"})), None, || async {
                runs.fetch_add(1, Ordering::SeqCst);
                Err::<Value, _>(HandlerError::retryable("downstream timeout"))
            })
            .await;
        assert!(
            matches!(out, Ok(Outcome::PayloadMismatch)),
            "{name}: {out:?}"
        );
        // The claim modes never ran the duplicates' handlers; optimistic
        // mode ran each of them, and answered from the record anyway.
        let expected = if mode == CommitMode::Optimistic { 5 } else { 0 };
        assert_eq!(runs.load(Ordering::SeqCst), expected, "{name}");
        let rec = h.record(&key).await.unwrap();
        assert_eq!(rec.data.as_deref(), Some("1"), "{name}");

        // A recorded rejection is the answer to a duplicate that fails
        // otherwise now.
        let recording = h.engine(
            config()
                .commit_mode(mode)
                .on_terminal_error(TerminalErrors::Record),
        );
        let closed = recording.key(&json!(format!("closed-{name}"))).unwrap();
        let first = recording
            .run(&closed, None, None, || async {
                Err::<Value, _>(HandlerError::terminal("account closed"))
            })
            .await;
        assert!(
            matches!(&first, Ok(Outcome::Rejected { error, replayed: false }) if error == "account closed"),
            "{name}: {first:?}"
        );
        let again = engine
            .run(&closed, None, None, || async {
                Err::<Value, _>(HandlerError::retryable("ledger unavailable"))
            })
            .await;
        assert!(
            matches!(&again, Ok(Outcome::Rejected { error, replayed: true }) if error == "account closed"),
            "{name}: {again:?}"
        );

        // No record: the handler's own error, and nothing written.
        let fresh = engine.key(&json!(format!("fresh-{name}"))).unwrap();
        for fail in failures {
            let out = engine
                .run(&fresh, None, None, || async { Err::<Value, _>(fail()) })
                .await;
            let err = out.unwrap_err();
            assert!(matches!(err, Error::Handler(_)), "{name}: {err:?}");
            assert_eq!(
                err.is_retryable(),
                fail().kind() == lambda_idempotency::ErrorKind::Retryable
            );
        }
        assert_eq!(h.record(&fresh).await, None, "{name}");
    }
}

/// The kill switch runs the handler unprotected and writes nothing.
pub async fn kill_switch_runs_unprotected(h: Harness) {
    let engine = h.engine(config().disabled(true));
    let key = engine.key(&json!("off")).unwrap();
    for _ in 0..2 {
        assert_eq!(
            engine
                .run(&key, None, None, || async { ok(json!(1)) })
                .await
                .unwrap(),
            lambda_idempotency::Outcome::Unprotected(json!(1))
        );
    }
    assert_eq!(h.record(&key).await, None);
}

/// Responses are not kept when the handler turns storage off.
pub async fn responses_can_be_withheld(h: Harness) {
    let engine = h.engine(config().store_responses(false));
    let key = engine.key(&json!("pii")).unwrap();
    engine
        .run(&key, None, None, || async { ok(json!({"card": "4242"})) })
        .await
        .unwrap();
    let rec = h.record(&key).await.unwrap();
    assert_eq!((rec.status, rec.data), (Status::Completed, None));
    assert_eq!(
        engine
            .run(&key, None, None, || async { ok(json!(0)) })
            .await
            .unwrap(),
        lambda_idempotency::Outcome::Replayed(None)
    );
}

/// A response that cannot be serialized does not undo the recorded effect:
/// the completion is stored without it and duplicates are still caught.
pub async fn unserializable_response_still_completes(h: Harness) {
    use std::collections::HashMap;
    let engine = h.engine(config());
    let key = engine.key(&json!("odd-response")).unwrap();
    let runs = AtomicUsize::new(0);
    let run = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        // JSON object keys must be strings: serializing this map fails.
        Ok::<_, HandlerError>(HashMap::from([((1, 2), 3)]))
    };
    let first = engine.run(&key, None, None, run).await.unwrap();
    assert!(
        matches!(first, lambda_idempotency::Outcome::Executed(_)),
        "{first:?}"
    );
    let rec = h.record(&key).await.unwrap();
    assert_eq!((rec.status, rec.data), (Status::Completed, None));
    let second = engine.run(&key, None, None, run).await.unwrap();
    assert_eq!(second, lambda_idempotency::Outcome::Replayed(None));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

const MODES: [CommitMode; 3] = [
    CommitMode::ClaimThenComplete,
    CommitMode::Fenced,
    CommitMode::Optimistic,
];

/// A credit of `n` to `pk`'s balance, staged.
fn credit(table: &str, pk: &str, n: i64) -> Write {
    Write::update(table, pk_key(pk)).add("balance", n)
}

/// Staged writes commit with the record; a duplicate replays and the effect
/// is not applied again (both commit modes).
pub async fn transaction_commits_writes_with_the_record(h: Harness) {
    let table = h.business_table().await;
    for mode in MODES {
        let engine = h.engine(config());
        let key = engine.key(&json!(format!("tx-{mode:?}"))).unwrap();
        let account = format!("acct-{mode:?}");
        let runs = AtomicUsize::new(0);
        for delivery in 0..3 {
            let out = engine
                .in_mode(mode)
                .run(&key, Some(&json!({"n": 5})), None, || async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, HandlerError>(
                        Staged::new(json!({"credited": 5})).write(credit(&table, &account, 5)),
                    )
                })
                .await
                .unwrap();
            let expected = if delivery == 0 {
                lambda_idempotency::Outcome::Executed(json!({"credited": 5}))
            } else {
                lambda_idempotency::Outcome::Replayed(Some(json!({"credited": 5})))
            };
            assert_eq!(out, expected, "{mode:?} delivery {delivery}");
        }
        assert_eq!(
            h.number(&table, &account, "balance").await,
            Some(5),
            "{mode:?}"
        );
        let rec = h.record(&key).await.unwrap();
        assert_eq!(rec.status, Status::Completed);
        match mode {
            // Optimistic duplicates compute, but only one commit applies.
            CommitMode::Optimistic => assert_eq!(runs.load(Ordering::SeqCst), 3),
            // Claimed duplicates stop at the claim.
            _ => assert_eq!(runs.load(Ordering::SeqCst), 1),
        }
    }
}

/// A failed business condition is the handler's outcome: a recorded
/// rejection (nothing applied) with `or_reject`, a retryable error without.
pub async fn transaction_business_condition_is_the_outcome(h: Harness) {
    let table = h.business_table().await;
    h.seed(&table, "mug", "stock", 1).await;
    for mode in MODES {
        let engine = h.engine(config().on_terminal_error(TerminalErrors::Record));
        let key = engine.key(&json!(format!("order-{mode:?}"))).unwrap();
        let reserve = || async {
            Ok::<_, HandlerError>(
                Staged::new(json!("reserved")).write(
                    Write::update(&table, pk_key("mug"))
                        .add("stock", -2)
                        .when(Cond::ge("stock", 2))
                        .or_reject("insufficient stock"),
                ),
            )
        };
        for replayed in [false, true] {
            let out = engine
                .in_mode(mode)
                .run(&key, None, None, reserve)
                .await
                .unwrap();
            assert_eq!(
                out,
                lambda_idempotency::Outcome::Rejected {
                    error: "insufficient stock".into(),
                    replayed
                },
                "{mode:?}"
            );
        }
        assert_eq!(h.number(&table, "mug", "stock").await, Some(1), "{mode:?}");

        // A rejection built from the item as it stood (absent, or short).
        for (sku, expected) in [("mug", "only 1 left"), ("ghost", "no such item")] {
            let key = engine
                .key(&json!(format!("describe-{sku}-{mode:?}")))
                .unwrap();
            let out = engine
                .in_mode(mode)
                .run(&key, None, None, || async {
                    Ok::<_, HandlerError>(
                        Staged::new(json!("reserved")).write(
                            Write::update(&table, pk_key(sku))
                                .add("stock", -2)
                                .when(Cond::exists("pk").and(Cond::ge("stock", 2)))
                                .or_reject_with(|item| match item {
                                    None => "no such item".to_owned(),
                                    Some(i) => {
                                        format!("only {} left", i["stock"].as_n().unwrap_or("?"))
                                    }
                                }),
                        ),
                    )
                })
                .await
                .unwrap();
            assert_eq!(
                out,
                lambda_idempotency::Outcome::Rejected {
                    error: expected.into(),
                    replayed: false
                },
                "{mode:?} {sku}"
            );
        }
        assert_eq!(h.item(&table, "ghost").await, None, "never created");

        let key = engine.key(&json!(format!("plain-{mode:?}"))).unwrap();
        let err = engine
            .in_mode(mode)
            .run(&key, None, None, || async {
                Ok::<_, HandlerError>(
                    Staged::new(json!(0)).write(
                        Write::update(&table, pk_key("mug"))
                            .add("stock", -2)
                            .when(Cond::ge("stock", 2)),
                    ),
                )
            })
            .await
            .unwrap_err();
        assert!(err.is_retryable(), "{mode:?}: {err}");
        assert_eq!(h.record(&key).await, None, "{mode:?}: nothing recorded");
        assert_eq!(h.number(&table, "mug", "stock").await, Some(1));
    }
}

/// Fenced: after the lease lapses and another invocation takes over and
/// commits, the stale owner's commit fails and applies nothing.
pub async fn fenced_stale_commit_applies_nothing(h: Harness) {
    let table = h.business_table().await;
    let engine = h.engine(config());
    let key = engine.key(&json!("stale-tx")).unwrap();
    let result = engine
        .in_mode(CommitMode::Fenced)
        .run(&key, None, None, || async {
            h.clock.advance(Duration::from_secs(31));
            let takeover = engine
                .in_mode(CommitMode::Fenced)
                .run(&key, None, None, || async {
                    Ok::<_, HandlerError>(Staged::new(json!("b")).write(credit(&table, "x", 1)))
                })
                .await
                .unwrap();
            assert_eq!(takeover, lambda_idempotency::Outcome::Executed(json!("b")));
            Ok::<_, HandlerError>(Staged::new(json!("a")).write(credit(&table, "x", 1)))
        })
        .await;
    assert!(matches!(result, Err(Error::LeaseLost { .. })), "{result:?}");
    assert_eq!(h.number(&table, "x", "balance").await, Some(1));
    let rec = h.record(&key).await.unwrap();
    assert_eq!(rec.data.as_deref(), Some(r#""b""#));
}

/// Fenced: an invocation that dies after its claim, before its commit,
/// applies nothing; after the lease the redelivery applies the effect once.
pub async fn fenced_crash_before_commit_applies_nothing(h: Harness) {
    let table = h.business_table().await;
    let engine = h.engine(config());
    let key = engine.key(&json!("crash-tx")).unwrap();
    let crashed = tokio::time::timeout(
        Duration::from_millis(50),
        engine
            .in_mode(CommitMode::Fenced)
            .run(&key, None, None, || async {
                std::future::pending::<()>().await;
                Ok::<_, HandlerError>(Staged::new(json!("never")).write(credit(&table, "y", 1)))
            }),
    )
    .await;
    assert!(crashed.is_err(), "the invocation was cut off");
    assert_eq!(h.record(&key).await.unwrap().status, Status::InProgress);
    assert_eq!(h.number(&table, "y", "balance").await, None);
    h.clock.advance(Duration::from_secs(31));
    let out = engine
        .in_mode(CommitMode::Fenced)
        .run(&key, None, None, || async {
            Ok::<_, HandlerError>(Staged::new(json!("once")).write(credit(&table, "y", 1)))
        })
        .await
        .unwrap();
    assert_eq!(out, lambda_idempotency::Outcome::Executed(json!("once")));
    assert_eq!(h.number(&table, "y", "balance").await, Some(1));
}

/// Optimistic: eight concurrent deliveries of one key all compute; exactly
/// one commits.
pub async fn optimistic_concurrent_duplicates_commit_once(h: Harness) {
    let table = h.business_table().await;
    let engine = h.engine(config());
    let key = engine.key(&json!("race-tx")).unwrap();
    let tasks = (0..8).map(|_| {
        let (engine, key, table) = (engine.clone(), key.clone(), table.clone());
        tokio::spawn(async move {
            engine
                .in_mode(CommitMode::Optimistic)
                .run(&key, None, None, || async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<_, HandlerError>(Staged::new(json!("one")).write(credit(&table, "z", 1)))
                })
                .await
                .unwrap()
        })
    });
    let mut executed = 0;
    for t in tasks {
        match t.await.unwrap() {
            lambda_idempotency::Outcome::Executed(_) => executed += 1,
            lambda_idempotency::Outcome::Replayed(Some(v)) => assert_eq!(v, json!("one")),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(executed, 1);
    assert_eq!(h.number(&table, "z", "balance").await, Some(1));
}

/// A batch read finds the completed record and leaves unknown keys out;
/// the kill switch commits writes without a record.
pub async fn get_many_and_kill_switch(h: Harness) {
    let table = h.business_table().await;
    let engine = h.engine(config());
    let done = engine.key(&json!("pre-1")).unwrap();
    let unknown = engine.key(&json!("pre-2")).unwrap();
    engine
        .run(&done, Some(&json!({"p": 1})), None, || async {
            ok(json!("r"))
        })
        .await
        .unwrap();
    let found = h
        .store
        .get_many(&[done.as_str().to_owned(), unknown.as_str().to_owned()])
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, done.as_str());
    assert_eq!(found[0].data.as_deref(), Some("\"r\""));
    assert_eq!(h.store.get(unknown.as_str()).await.unwrap(), None);

    let off = h.engine(config().disabled(true));
    let key = off.key(&json!("off-tx")).unwrap();
    for _ in 0..2 {
        let out = off
            .in_mode(CommitMode::Optimistic)
            .run(&key, None, None, || async {
                Ok::<_, HandlerError>(Staged::new(json!(1)).write(credit(&table, "w", 1)))
            })
            .await
            .unwrap();
        assert_eq!(out, lambda_idempotency::Outcome::Unprotected(json!(1)));
    }
    assert_eq!(h.number(&table, "w", "balance").await, Some(2));
    assert_eq!(h.record(&key).await, None);
}

/// `ADD` past `i64::MAX` is exact decimal arithmetic in every store:
/// 1 + 9223372036854775807 commits as 9223372036854775808 (DynamoDB keeps
/// 38 digits), directly and through the engine.
pub async fn add_past_i64_max_is_exact(h: Harness) {
    let table = h.business_table().await;
    h.seed(&table, "big", "balance", 1).await;
    let add = |n: i64| Write::update(&table, pk_key("big")).add("balance", n);
    h.store
        .commit(RecordWrite::None, &[add(i64::MAX)])
        .await
        .expect("ADD past i64::MAX commits");
    assert_eq!(
        h.number_text(&table, "big", "balance").await.as_deref(),
        Some("9223372036854775808")
    );
    assert_eq!(h.number(&table, "big", "balance").await, None, "not an i64");
    // Through the engine, in a transactional mode: the record and the sum.
    let engine = h.engine(config());
    let key = engine.key(&json!("big-credit")).unwrap();
    let out = engine
        .in_mode(CommitMode::Fenced)
        .run(&key, None, None, || async {
            Ok::<_, HandlerError>(Staged::new(json!("credited")).write(add(i64::MAX)))
        })
        .await
        .unwrap();
    assert_eq!(
        out,
        lambda_idempotency::Outcome::Executed(json!("credited"))
    );
    assert_eq!(
        h.number_text(&table, "big", "balance").await.as_deref(),
        Some("18446744073709551615")
    );
    // And back down, exactly.
    h.store
        .commit(RecordWrite::None, &[add(-i64::MAX)])
        .await
        .unwrap();
    assert_eq!(
        h.number_text(&table, "big", "balance").await.as_deref(),
        Some("9223372036854775808")
    );
}

/// Conditions compare numbers exactly, not through `f64`: a stored
/// 9007199254740992 (2^53) is not `>=` 9007199254740993, though both are
/// the same `f64`.
pub async fn number_comparisons_are_exact(h: Harness) {
    let table = h.business_table().await;
    let (low, high) = (9_007_199_254_740_992_i64, 9_007_199_254_740_993_i64);
    h.seed(&table, "mug", "stock", low).await;
    let take = |n: i64| {
        Write::update(&table, pk_key("mug"))
            .add("stock", -n)
            .when(Cond::ge("stock", n))
    };
    match h.store.commit(RecordWrite::None, &[take(high)]).await {
        Err(TransactError::Write { index: 0, .. }) => {}
        other => panic!("expected the condition to fail, got {other:?}"),
    }
    assert_eq!(h.number(&table, "mug", "stock").await, Some(low));
    let eq = Write::check(&table, pk_key("mug"), Cond::eq("stock", AttrValue::n(high)));
    assert!(
        matches!(
            h.store.commit(RecordWrite::None, &[eq]).await,
            Err(TransactError::Write { index: 0, .. })
        ),
        "2^53 = 2^53 + 1 must not hold"
    );
    // Through the engine: the failed condition is the recorded rejection.
    let engine = h.engine(config().on_terminal_error(TerminalErrors::Record));
    let key = engine.key(&json!("exact-order")).unwrap();
    let out = engine
        .in_mode(CommitMode::Optimistic)
        .run(&key, None, None, || async {
            Ok::<_, HandlerError>(
                Staged::new(json!("reserved")).write(take(high).or_reject("insufficient stock")),
            )
        })
        .await
        .unwrap();
    assert_eq!(
        out,
        lambda_idempotency::Outcome::Rejected {
            error: "insufficient stock".into(),
            replayed: false
        }
    );
    h.store
        .commit(RecordWrite::None, &[take(low)])
        .await
        .expect("2^53 >= 2^53 holds");
    assert_eq!(h.number(&table, "mug", "stock").await, Some(0));
}

/// Staged writes DynamoDB refuses as a whole are refused alike by every
/// store, before anything is written: an update without changes (DynamoDB
/// rejects the empty `UpdateExpression`), more than 99 writes (one
/// transaction holds 100 items, one of them the record), two writes on one
/// item, a number that is not one.
pub async fn invalid_staged_writes_are_refused_alike(h: Harness) {
    let table = h.business_table().await;
    let credit_to = |pk: &str| credit(&table, pk, 1);
    let many: Vec<Write> = (0..100).map(|i| credit_to(&format!("acct-{i}"))).collect();
    let cases: Vec<(&str, Vec<Write>)> = vec![
        ("no changes", vec![Write::update(&table, pk_key("empty"))]),
        ("100 writes", many.clone()),
        (
            "one item twice",
            vec![credit_to("twice"), Write::delete(&table, pk_key("twice"))],
        ),
        (
            "not a number",
            vec![Write::update(&table, pk_key("nan")).set("balance", AttrValue::n("1.2.3"))],
        ),
        (
            "39 digits",
            vec![Write::update(&table, pk_key("long")).set(
                "balance",
                AttrValue::n("123456789012345678901234567890123456789"),
            )],
        ),
    ];
    let engine = h.engine(config());
    for (what, writes) in cases {
        match h.store.commit(RecordWrite::None, &writes).await {
            Err(TransactError::Store(StoreError::Invalid { reason })) => {
                assert!(!reason.is_empty(), "{what}")
            }
            other => panic!("{what}: expected Invalid, got {other:?}"),
        }
        // Through the engine (optimistic: the record commits with the
        // writes): an error, and neither the record nor any write.
        let key = engine.key(&json!(format!("invalid-{what}"))).unwrap();
        let staged = writes.clone();
        let result = engine
            .in_mode(CommitMode::Optimistic)
            .run(&key, None, None, || async {
                Ok::<_, HandlerError>(Staged {
                    response: json!("never"),
                    writes: staged.clone(),
                    messages: Vec::new(),
                })
            })
            .await;
        assert!(result.is_err(), "{what}: {result:?}");
        assert_eq!(h.record(&key).await, None, "{what}: nothing recorded");
    }
    for pk in ["empty", "acct-0", "acct-99", "twice", "nan", "long"] {
        assert_eq!(h.item(&table, pk).await, None, "{pk} never written");
    }
    // 99 writes are within the limit.
    h.store
        .commit(RecordWrite::None, &many[..99])
        .await
        .expect("99 writes commit");
    assert_eq!(h.number(&table, "acct-98", "balance").await, Some(1));
    assert_eq!(h.item(&table, "acct-99").await, None);
}

/// A business [`Table`] reads and writes alike in DynamoDB and in memory:
/// a single write returns the item as it now stands, a failed condition is
/// its rejection (described from the item as it stood) or a retryable error.
pub async fn business_table_writes_alike(h: Harness) {
    let name = h.business_table().await;
    let table = h.tables.sibling(&name);
    assert_eq!(table.name(), name);
    assert_eq!(table.get(&pk_key("a")).await.unwrap(), None);
    let credit = Write::update(&name, pk_key("a")).add("balance", 5);
    let after = table.write(&credit).await.unwrap().expect("the new item");
    assert_eq!(after["balance"], AttrValue::n(5));
    assert_eq!(after["pk"], AttrValue::s("a"));
    let after = table.write(&credit).await.unwrap().unwrap();
    assert_eq!(after["balance"].as_i64(), Some(10));

    let take = |n: i64| {
        Write::update(&name, pk_key("a"))
            .add("balance", -n)
            .when(Cond::ge("balance", n))
    };
    let err = table
        .write(&take(11).or_reject_with(|item| match item {
            Some(i) => format!("only {}", i["balance"].as_n().unwrap_or("?")),
            None => "none".into(),
        }))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), lambda_idempotency::ErrorKind::Terminal);
    assert_eq!(err.to_string(), "only 10");
    let err = table.write(&take(11)).await.unwrap_err();
    assert_eq!(err.kind(), lambda_idempotency::ErrorKind::Retryable);
    assert_eq!(h.number(&name, "a", "balance").await, Some(10));

    table
        .put(
            &pk_key("b"),
            Item::from([("price".to_owned(), AttrValue::n("12.50"))]),
        )
        .await
        .unwrap();
    let b = table.get(&pk_key("b")).await.unwrap().unwrap();
    // DynamoDB trims leading and trailing zeros ("12.5"), as the memory
    // store does; moto keeps the text as sent: compare the numbers.
    assert_eq!(
        b["price"].as_decimal(),
        AttrValue::n("12.5").as_decimal(),
        "{b:?}"
    );
    assert_eq!(b["pk"], AttrValue::s("b"));
    let gone = table
        .write(&Write::delete(&name, pk_key("b")).when(Cond::exists("pk")))
        .await
        .unwrap();
    assert_eq!(gone, None);
    assert_eq!(table.get(&pk_key("b")).await.unwrap(), None);
}

/// In optimistic mode every entry that runs a handler through the engine
/// answers a duplicate whose handler fails now from its record, as the
/// engine does: the batch pipeline with batch commits (a resend under a new
/// message id, receive count 1: no pre-read) reports it done, replayed;
/// the HTTP processor answers the kept 201; the tower layer the kept
/// response.
pub async fn every_entry_answers_a_failing_duplicate_from_its_record(h: Harness) {
    use lambda_idempotency::Outcome;
    use lambda_idempotency::http::{HttpProcessor, HttpRequest, HttpResponse, REPLAYED_HEADER};
    use lambda_runtime::tower::{Layer, Service, ServiceExt};
    let table = h.business_table().await;
    let engine = h.engine(
        config()
            .commit_mode(CommitMode::Optimistic)
            .batch_commits(true),
    );
    // What the handlers answer for a key seen before: 0 runs it, 1 a
    // terminal error, 2 a retryable one.
    let now = Arc::new(AtomicUsize::new(0));
    let failure = |now: &AtomicUsize| match now.load(Ordering::SeqCst) {
        1 => Some(HandlerError::terminal("account closed")),
        2 => Some(HandlerError::retryable("ledger unavailable")),
        _ => None,
    };

    // The batch pipeline, the failing duplicate beside a new payment.
    let app = lambda_idempotency::sqs::SqsProcessor::new(
        engine.clone(),
        lambda_idempotency::KeySelector::pointer("/payment"),
    );
    let event = |messages: &[(&str, &str)]| {
        let records: Vec<Value> = messages
            .iter()
            .map(|(id, payment)| {
                json!({
                    "messageId": id,
                    "body": json!({"payment": payment}).to_string(),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:resends",
                    "attributes": {"ApproximateReceiveCount": "1"},
                    "messageAttributes": {},
                })
            })
            .collect();
        lambda_idempotency::sqs::parse_sqs_event(json!({ "Records": records })).unwrap()
    };
    let (table2, now2) = (table.clone(), now.clone());
    let handler = move |r: lambda_idempotency::sqs::SqsRecord<Value>| {
        let (table, now) = (table2.clone(), now2.clone());
        async move {
            let payment = r.body["payment"].as_str().unwrap_or_default().to_owned();
            if payment == "resent"
                && let Some(err) = failure(&now)
            {
                return Err(err);
            }
            let credit = Write::update(&table, pk_key(&payment)).add("balance", 1);
            Ok::<_, HandlerError>(Staged::new(json!(payment)).write(credit))
        }
    };
    let first = app
        .process(event(&[("m-1", "resent")]), None, &handler)
        .await;
    assert!(first.failures().next().is_none(), "{:?}", first.records);
    for (fails, new) in [(1, "new-1"), (2, "new-2")] {
        now.store(fails, Ordering::SeqCst);
        let id = format!("m-resent-{fails}");
        let report = app
            .process(event(&[(&id, "resent"), (new, new)]), None, &handler)
            .await;
        assert!(report.failures().next().is_none(), "{:?}", report.records);
        let outcomes: Vec<_> = report.records.iter().map(|r| &r.outcome).collect();
        assert!(
            matches!(outcomes[0], Ok(Outcome::Replayed(Some(v))) if *v == json!("resent")),
            "{outcomes:?}"
        );
        assert!(
            matches!(outcomes[1], Ok(Outcome::Executed(_))),
            "{outcomes:?}"
        );
        assert_eq!(h.number(&table, new, "balance").await, Some(1));
    }
    assert_eq!(h.number(&table, "resent", "balance").await, Some(1));

    // The HTTP processor: a client's retry of a completed POST.
    now.store(0, Ordering::SeqCst);
    let processor = HttpProcessor::new(engine.clone());
    let request = HttpRequest::from_event(json!({
        "version": "2.0",
        "routeKey": "POST /payments",
        "rawPath": "/payments",
        "rawQueryString": "",
        "headers": {"content-type": "application/json", "idempotency-key": "pay-http"},
        "requestContext": {
            "requestId": "r-1",
            "http": {"method": "POST", "path": "/payments", "protocol": "HTTP/1.1",
                     "sourceIp": "127.0.0.1"},
            "authorizer": {"iam": {"accountId": "123456789012",
                                   "userArn": "arn:aws:iam::123456789012:user/tests",
                                   "userId": "AIDACKCEVSQ6C2EXAMPLE",
                                   "callerId": "AIDACKCEVSQ6C2EXAMPLE",
                                   "accessKey": "AKIAIOSFODNN7EXAMPLE"}}
        },
        "body": r#"{"amount":5}"#,
        "isBase64Encoded": false
    }))
    .unwrap();
    let post = |answer: Result<u16, HandlerError>| {
        processor.process(
            &request,
            None,
            |r| r.json::<Value>(),
            |_body| async move {
                answer.map(|status| HttpResponse::json(status, &json!({"payment": "pay-http"})))
            },
        )
    };
    let created = post(Ok(201)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    for answer in [
        Ok(503),
        Ok(429),
        Err(HandlerError::retryable("ledger unavailable")),
        Err(HandlerError::terminal("account closed")),
    ] {
        let retry = post(answer).await;
        assert_eq!(
            (retry.status, retry.body.as_str()),
            (201, created.body.as_str()),
            "{}",
            retry.body
        );
        assert_eq!(retry.header_value(REPLAYED_HEADER), Some("true"));
    }

    // The tower layer over a single-event handler.
    let now3 = now.clone();
    let inner = lambda_runtime::service_fn(move |_event: lambda_runtime::LambdaEvent<Value>| {
        let now = now3.clone();
        async move {
            match failure(&now) {
                Some(err) => Err::<Value, lambda_runtime::Error>(err.to_string().into()),
                None => Ok(json!({"shipped": "ord-7"})),
            }
        }
    });
    let mut service = lambda_idempotency::layer::IdempotencyLayer::new(
        engine.clone(),
        lambda_idempotency::KeySelector::pointer("/id"),
    )
    .layer(inner);
    for fails in [0, 1, 2] {
        now.store(fails, Ordering::SeqCst);
        let answer = service
            .ready()
            .await
            .unwrap()
            .call(lambda_runtime::LambdaEvent::new(
                json!({"id": "ord-7"}),
                lambda_runtime::Context::default(),
            ))
            .await;
        let outcome = answer.map(|a| a.into_outcome());
        let wanted = if fails == 0 {
            Outcome::Executed(json!({"shipped": "ord-7"}))
        } else {
            Outcome::Replayed(Some(json!({"shipped": "ord-7"})))
        };
        assert!(
            matches!(&outcome, Ok(o) if *o == wanted),
            "delivery {fails}: {outcome:?}"
        );
    }
}

/// Runs the cases of this module against each store: one test per store and
/// case, in a module named after the store. `stores` names each store by its
/// [`Harness`] constructor here (`memory`, `dynamodb`, `valkey`); `+ writes`
/// marks the stores with transactions. The `records` cases run against every
/// store; the `writes` cases (staged writes committing with the record,
/// business tables) against the stores marked `+ writes`. A new store is its
/// constructor and one entry in `stores`.
#[macro_export]
macro_rules! contract_suite {
    (
        stores: [$($store:ident $(+ $writes:ident)?),* $(,)?],
        records: $records:tt,
        writes: $wcases:tt $(,)?
    ) => {
        $( $crate::contract_suite!(@store $store [$($writes)?] $records $wcases); )*
    };
    (@store $store:ident [] [$($case:ident),* $(,)?] $wcases:tt) => {
        mod $store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    $crate::contract::$case($crate::contract::$store().await).await;
                }
            )*
        }
    };
    (@store $store:ident [writes] [$($case:ident),* $(,)?] [$($wcase:ident),* $(,)?]) => {
        mod $store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    $crate::contract::$case($crate::contract::$store().await).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $wcase() {
                    $crate::contract::$wcase($crate::contract::$store().await).await;
                }
            )*
        }
    };
}

/// Staged messages commit inside the record, in the same write as the
/// writes, in every mode, with stable ids (the same on every commit of the
/// key); a duplicate adds nothing; a rejected or failed handler leaves no
/// message; with the kill switch they ride a record of their own.
pub async fn messages_commit_with_the_record(h: Harness) {
    use lambda_idempotency::outbox::Message;
    use lambda_idempotency::outbox::{decode, stable_id};
    let table = h.business_table().await;
    let queue = "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo";
    for mode in MODES {
        let engine = h.engine(config().commit_mode(mode));
        let pk = format!("order-{}", mode.as_str());
        let key = engine.key(&json!(pk)).unwrap();
        for _delivery in 0..2 {
            let out = engine
                .run(&key, None, None, || async {
                    Ok::<_, HandlerError>(
                        Staged::new(json!("ok"))
                            .write(credit(&table, &pk, 1))
                            .publish(Message::sqs(queue, format!("confirmed {pk}")).group("g"))
                            .publish(Message::sqs(queue, "second").group("g")),
                    )
                })
                .await
                .unwrap();
            assert!(
                matches!(
                    out,
                    lambda_idempotency::Outcome::Executed(_)
                        | lambda_idempotency::Outcome::Replayed(_)
                ),
                "{mode:?}: {out:?}"
            );
        }
        let record = h.record(&key).await.unwrap();
        let entries = decode(record.outbox.as_deref().expect("an outbox")).unwrap();
        assert_eq!(entries.len(), 2, "{mode:?}");
        assert_eq!(entries[0].id, stable_id(key.as_str(), 0));
        assert_eq!(entries[1].id, stable_id(key.as_str(), 1));
        assert_eq!(entries[0].message.body, format!("confirmed {pk}"));
        assert_eq!(entries[0].message.group_id.as_deref(), Some("g"));
        assert_eq!(h.number(&table, &pk, "balance").await, Some(1), "{mode:?}");

        // A business refusal: neither the write nor the message.
        let refused = engine.key(&json!(format!("refused-{pk}"))).unwrap();
        let out = engine
            .run(&refused, None, None, || async {
                Ok::<_, HandlerError>(
                    Staged::new(json!("no"))
                        .write(
                            credit(&table, &format!("none-{pk}"), 1)
                                .when(Cond::exists("pk"))
                                .or_reject("no such account"),
                        )
                        .publish(Message::sqs(queue, "never").group("g")),
                )
            })
            .await;
        assert!(out.is_err() || matches!(out, Ok(lambda_idempotency::Outcome::Rejected { .. })));
        assert!(
            h.record(&refused).await.and_then(|r| r.outbox).is_none(),
            "{mode:?}: no message for a refusal"
        );
        // An undeliverable message (FIFO without a group) is refused before
        // anything commits.
        let bad = engine.key(&json!(format!("bad-{pk}"))).unwrap();
        let out = engine
            .run(&bad, None, None, || async {
                Ok::<_, HandlerError>(
                    Staged::new(json!("x"))
                        .write(credit(&table, &format!("bad-{pk}"), 1))
                        .publish(Message::sqs(queue, "no group")),
                )
            })
            .await;
        assert!(out.is_err(), "{mode:?}: {out:?}");
        assert_eq!(
            h.number(&table, &format!("bad-{pk}"), "balance").await,
            None
        );
    }
    // Kill switch: no idempotency record, but the messages still commit
    // atomically with the writes, in a record of their own.
    let off = h.engine(config().disabled(true));
    let key = off.key(&json!("off-messages")).unwrap();
    let out = off
        .run(&key, None, None, || async {
            Ok::<_, HandlerError>(
                Staged::new(json!(1))
                    .write(credit(&table, "off", 1))
                    .publish(Message::sqs(queue, "unprotected").group("g")),
            )
        })
        .await
        .unwrap();
    assert_eq!(out, lambda_idempotency::Outcome::Unprotected(json!(1)));
    assert_eq!(h.record(&key).await, None);
    assert_eq!(h.number(&table, "off", "balance").await, Some(1));
}

/// Every message that SQS, EventBridge or the relay would refuse (one case
/// per documented rule), or that does not fit in the record's 400 KB, is a
/// terminal error of the handler before anything commits, in every mode:
/// no staged write, no record (the default `TerminalErrors::Release`), the
/// reason in the error; with `TerminalErrors::Record` the rejection is the
/// key's outcome, still without the write or an outbox.
pub async fn unpublishable_messages_commit_nothing(h: Harness) {
    use lambda_idempotency::outbox::Message;
    let table = h.business_table().await;
    let fifo = "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo";
    let standard = "https://sqs.us-east-1.amazonaws.com/123456789012/notifications";
    let ten = (0..10).fold(Message::sqs(standard, "b"), |m, i| {
        m.attribute(format!("a{i}"), "v")
    });
    let event = |source: &str, detail_type: &str| {
        Message::event("default", source, detail_type, &json!({"k": 1})).unwrap()
    };
    let cases: Vec<(&str, Message, &str)> = vec![
        (
            "empty body",
            Message::sqs(standard, ""),
            "body cannot be empty",
        ),
        ("empty group", Message::sqs(fifo, "b").group(""), "group id"),
        (
            "group with a space",
            Message::sqs(fifo, "b").group("order 1"),
            "group id",
        ),
        (
            "non-ASCII group",
            Message::sqs(fifo, "b").group("ordér"),
            "group id",
        ),
        (
            "129-char group",
            Message::sqs(fifo, "b").group("g".repeat(129)),
            "group id",
        ),
        ("FIFO without group", Message::sqs(fifo, "b"), "no group id"),
        ("10 attributes", ten, "10 message attributes"),
        (
            "empty attribute name",
            Message::sqs(standard, "b").attribute("", "v"),
            "not 1 to 256",
        ),
        (
            "empty attribute value",
            Message::sqs(standard, "b").attribute("k", ""),
            "is empty",
        ),
        (
            "AWS. attribute",
            Message::sqs(standard, "b").attribute("AWS.trace", "v"),
            "reserved",
        ),
        (
            "amazon. attribute",
            Message::sqs(standard, "b").attribute("amazon.x", "v"),
            "reserved",
        ),
        (
            "attribute with ..",
            Message::sqs(standard, "b").attribute("a..b", "v"),
            "period",
        ),
        (
            "attribute with a space",
            Message::sqs(standard, "b").attribute("a b", "v"),
            "character",
        ),
        (
            "outbox_id attribute",
            Message::sqs(standard, "b").attribute("outbox_id", "x"),
            "reserved",
        ),
        (
            "U+FFFF in the body",
            Message::sqs(standard, "a\u{FFFF}b"),
            "character SQS refuses",
        ),
        (
            "U+0001 in the body",
            Message::sqs(standard, "a\u{1}b"),
            "character SQS refuses",
        ),
        (
            "not an http(s) URL",
            Message::sqs("local://q", "b"),
            "not an http(s) URL",
        ),
        ("empty source", event("", "OrderConfirmed"), "event source"),
        (
            "reserved source",
            event("aws.orders", "OrderConfirmed"),
            "event source",
        ),
        ("empty detail_type", event("shop.orders", ""), "detail-type"),
        (
            "129-char detail_type",
            event("shop.orders", &"d".repeat(129)),
            "detail-type",
        ),
        (
            "empty bus",
            Message::event("", "s", "d", &json!({})).unwrap(),
            "event bus",
        ),
        (
            "detail not an object",
            Message::event("b", "s", "d", &json!([1])).unwrap(),
            "JSON object",
        ),
        (
            "over the record's 400 KB",
            Message::sqs(standard, "x".repeat(500_000)),
            "claim check",
        ),
    ];
    for mode in MODES {
        for policy in [TerminalErrors::Release, TerminalErrors::Record] {
            let engine = h.engine(config().commit_mode(mode).on_terminal_error(policy));
            for (i, (what, message, reason)) in cases.iter().enumerate() {
                let pk = format!("unpublishable-{}-{policy:?}-{i}", mode.as_str());
                let key = engine.key(&json!(pk)).unwrap();
                let out = engine
                    .run(&key, None, None, || async {
                        Ok::<_, HandlerError>(
                            Staged::new(json!("x"))
                                .write(credit(&table, &pk, 1))
                                .publish(message.clone()),
                        )
                    })
                    .await;
                let error = match (&out, policy) {
                    (Err(lambda_idempotency::Error::Handler(e)), TerminalErrors::Release) => {
                        assert_eq!(e.kind(), lambda_idempotency::ErrorKind::Terminal, "{what}");
                        e.to_string()
                    }
                    (
                        Ok(lambda_idempotency::Outcome::Rejected { error, .. }),
                        TerminalErrors::Record,
                    ) => error.clone(),
                    _ => panic!("{mode:?} {policy:?} {what}: {out:?}"),
                };
                assert!(error.contains(reason), "{what}: {error:?} lacks {reason:?}");
                assert_eq!(h.number(&table, &pk, "balance").await, None, "{what}");
                let record = h.record(&key).await;
                match policy {
                    TerminalErrors::Release => assert_eq!(record, None, "{what}"),
                    _ => assert!(
                        record.as_ref().is_some_and(|r| r.outbox.is_none()),
                        "{what}: {record:?}"
                    ),
                }
            }
        }
    }
}

/// A completed record for batch commits, written as the optimistic path
/// writes it (claim condition at the harness clock).
fn batch_record(h: &Harness, id: &str) -> Record {
    Record {
        id: format!("contract.batch#{id}"),
        status: Status::Completed,
        expiration: lambda_idempotency::clock::Clock::now_ms(&h.clock) / 1000 + 3600,
        in_progress_expiration: None,
        data: Some(json!(id).to_string()),
        error: None,
        validation: None,
        owner: Some(format!("owner-{id}")),
        outbox: None,
    }
}

fn claim<'a>(
    h: &Harness,
    record: &'a Record,
    writes: &'a [Write],
) -> lambda_idempotency::store::Commit<'a> {
    lambda_idempotency::store::Commit {
        record: RecordWrite::Claim {
            record,
            now_ms: lambda_idempotency::clock::Clock::now_ms(&h.clock),
        },
        writes,
    }
}

/// Batch commits: several records with their staged writes in one
/// transaction, all applied.
pub async fn batch_commit_applies_every_commit(h: Harness) {
    let table = h.business_table().await;
    let records: Vec<Record> = (0..5)
        .map(|i| batch_record(&h, &format!("all-{i}")))
        .collect();
    let writes: Vec<[Write; 1]> = (0..5)
        .map(|i| [credit(&table, &format!("all-{i}"), 10 + i)])
        .collect();
    let commits: Vec<_> = records
        .iter()
        .zip(&writes)
        .map(|(r, w)| claim(&h, r, w))
        .collect();
    h.store
        .commit_many(&commits)
        .await
        .expect("one transaction");
    for (i, r) in records.iter().enumerate() {
        assert_eq!(h.store.get(&r.id).await.unwrap().as_ref(), Some(r));
        assert_eq!(
            h.number(&table, &format!("all-{i}"), "balance").await,
            Some(10 + i as i64)
        );
    }
}

/// A record already committed cancels the batch transaction: the store
/// names its commit with the record in the way; nothing is applied, and
/// the others commit when sent again without it.
pub async fn batch_commit_names_a_duplicate(h: Harness) {
    let table = h.business_table().await;
    let records: Vec<Record> = (0..3)
        .map(|i| batch_record(&h, &format!("dup-{i}")))
        .collect();
    let writes: Vec<[Write; 1]> = (0..3)
        .map(|i| [credit(&table, &format!("dup-{i}"), 1)])
        .collect();
    let first = claim(&h, &records[1], &writes[1]);
    h.store.commit(first.record, first.writes).await.unwrap();
    let commits: Vec<_> = records
        .iter()
        .zip(&writes)
        .map(|(r, w)| claim(&h, r, w))
        .collect();
    match h.store.commit_many(&commits).await {
        Err(lambda_idempotency::store::CommitsError::Cancelled(failed)) => {
            assert_eq!(failed.len(), 1, "{failed:?}");
            assert_eq!(failed[0].0, 1);
            assert!(
                matches!(&failed[0].1, TransactError::Record(Some(r)) if *r == records[1]),
                "{failed:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.store.get(&records[0].id).await.unwrap(), None);
    assert_eq!(h.number(&table, "dup-0", "balance").await, None);
    assert_eq!(h.number(&table, "dup-1", "balance").await, Some(1));
    let rest = [commits[0], commits[2]];
    h.store.commit_many(&rest).await.expect("the rest commit");
    assert_eq!(h.number(&table, "dup-0", "balance").await, Some(1));
    assert_eq!(h.number(&table, "dup-1", "balance").await, Some(1));
    assert_eq!(h.number(&table, "dup-2", "balance").await, Some(1));
}

/// A staged write whose condition fails cancels the batch transaction: the
/// store names its commit and write, with the item as it stood.
pub async fn batch_commit_names_a_rejected_write(h: Harness) {
    let table = h.business_table().await;
    h.seed(&table, "stock", "stock", 1).await;
    let records: Vec<Record> = (0..3)
        .map(|i| batch_record(&h, &format!("rej-{i}")))
        .collect();
    let take = Write::update(&table, pk_key("stock"))
        .add("stock", -2)
        .when(Cond::ge("stock", 2))
        .or_reject_with(|item| format!("{item:?}"));
    let writes = [
        vec![credit(&table, "rej-0", 1)],
        vec![credit(&table, "rej-1", 1), take],
        vec![credit(&table, "rej-2", 1)],
    ];
    let commits: Vec<_> = records
        .iter()
        .zip(&writes)
        .map(|(r, w)| claim(&h, r, w))
        .collect();
    match h.store.commit_many(&commits).await {
        Err(lambda_idempotency::store::CommitsError::Cancelled(failed)) => {
            assert_eq!(failed.len(), 1, "{failed:?}");
            assert_eq!(failed[0].0, 1);
            match &failed[0].1 {
                TransactError::Write {
                    index: 1,
                    item: Some(item),
                } => assert_eq!(item.get("stock").and_then(AttrValue::as_i64), Some(1)),
                other => panic!("{other:?}"),
            }
        }
        other => panic!("{other:?}"),
    }
    for (i, record) in records.iter().enumerate() {
        assert_eq!(h.store.get(&record.id).await.unwrap(), None);
        assert_eq!(h.number(&table, &format!("rej-{i}"), "balance").await, None);
    }
    assert_eq!(h.number(&table, "stock", "stock").await, Some(1));
}

/// What DynamoDB refuses in one transaction, every store refuses before
/// applying anything: two actions on one item, more than 100 actions.
pub async fn batch_commit_refuses_what_one_transaction_cannot_hold(h: Harness) {
    let table = h.business_table().await;
    let records: Vec<Record> = (0..60)
        .map(|i| batch_record(&h, &format!("lim-{i}")))
        .collect();
    let same = [credit(&table, "lim", 1)];
    let two_on_one: Vec<_> = records[..2].iter().map(|r| claim(&h, r, &same)).collect();
    let writes: Vec<[Write; 1]> = (0..60)
        .map(|i| [credit(&table, &format!("lim-{i}"), 1)])
        .collect();
    let too_many: Vec<_> = records
        .iter()
        .zip(&writes)
        .map(|(r, w)| claim(&h, r, w))
        .collect();
    for (what, commits, reason) in [
        ("one item", &two_on_one, "one item"),
        ("120 actions", &too_many, "over the limit of 100"),
    ] {
        match h.store.commit_many(commits).await {
            Err(lambda_idempotency::store::CommitsError::Transaction(TransactError::Store(
                StoreError::Invalid { reason: r },
            ))) => assert!(r.contains(reason), "{what}: {r}"),
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(h.store.get(&records[0].id).await.unwrap(), None, "{what}");
        assert_eq!(h.number(&table, "lim", "balance").await, None, "{what}");
        assert_eq!(h.number(&table, "lim-0", "balance").await, None, "{what}");
    }
}

/// Through the batch pipeline in optimistic mode: new records, one
/// duplicate and one rejected record in one batch; two records on one
/// item; each applied once, the duplicate replayed, the rejection recorded.
pub async fn batch_pipeline_commits_each_record_once(h: Harness) {
    let table = h.business_table().await;
    h.seed(&table, "bp-funded", "balance", 5).await;
    let engine = h.engine(
        config()
            .commit_mode(CommitMode::Optimistic)
            .on_terminal_error(TerminalErrors::Record)
            .batch_commits(true),
    );
    let app = lambda_idempotency::sqs::SqsProcessor::new(
        engine,
        lambda_idempotency::KeySelector::pointer("/id"),
    );
    let event = |ids: &[(&str, &str, i64)]| {
        let records: Vec<Value> = ids
            .iter()
            .map(|(id, account, n)| {
                json!({
                    "messageId": id,
                    "body": json!({"id": id, "account": account, "n": n}).to_string(),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:pipeline",
                    "attributes": {},
                    "messageAttributes": {},
                })
            })
            .collect();
        lambda_idempotency::sqs::parse_sqs_event(json!({ "Records": records })).unwrap()
    };
    let table2 = table.clone();
    let handler = move |r: lambda_idempotency::sqs::SqsRecord<Value>| {
        let table = table2.clone();
        async move {
            let account = r.body["account"].as_str().unwrap_or_default().to_owned();
            let n = r.body["n"].as_i64().unwrap_or_default();
            let mut w = Write::update(&table, pk_key(&account)).add("balance", n);
            if n < 0 {
                w = w
                    .when(Cond::ge("balance", -n))
                    .or_reject("insufficient funds");
            }
            Ok::<_, HandlerError>(Staged::new(json!(r.body["id"])).write(w))
        }
    };
    let first = app
        .process(event(&[("bp-1", "bp-a", 1)]), None, &handler)
        .await;
    assert!(first.failures().next().is_none());
    let batch = [
        ("bp-0", "bp-a", 10),
        ("bp-1", "bp-a", 1),
        ("bp-2", "bp-b", 100),
        ("bp-3", "bp-empty", -7),
        ("bp-4", "bp-a", 1000),
        ("bp-5", "bp-funded", -5),
    ];
    let report = app.process(event(&batch), None, &handler).await;
    let outcomes: Vec<_> = report.records.iter().map(|r| r.outcome.clone()).collect();
    assert!(
        matches!(outcomes[0], Ok(lambda_idempotency::Outcome::Executed(_))),
        "{outcomes:?}"
    );
    assert!(
        matches!(
            outcomes[1],
            Ok(lambda_idempotency::Outcome::Replayed(Some(_)))
        ),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[2], Ok(lambda_idempotency::Outcome::Executed(_))),
        "{outcomes:?}"
    );
    assert!(
        matches!(&outcomes[3], Ok(lambda_idempotency::Outcome::Rejected { error, .. }) if error == "insufficient funds"),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[4], Ok(lambda_idempotency::Outcome::Executed(_))),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[5], Ok(lambda_idempotency::Outcome::Executed(_))),
        "{outcomes:?}"
    );
    assert_eq!(h.number(&table, "bp-a", "balance").await, Some(1011));
    assert_eq!(h.number(&table, "bp-b", "balance").await, Some(100));
    assert_eq!(h.number(&table, "bp-empty", "balance").await, None);
    assert_eq!(h.number(&table, "bp-funded", "balance").await, Some(0));
    // Redelivered: every record replays, nothing applies again.
    let again = app.process(event(&batch), None, &handler).await;
    assert!(
        again.records.iter().all(|r| matches!(
            r.outcome,
            Ok(lambda_idempotency::Outcome::Replayed(_)
                | lambda_idempotency::Outcome::Rejected { replayed: true, .. })
        )),
        "{:?}",
        again.records
    );
    assert_eq!(h.number(&table, "bp-a", "balance").await, Some(1011));
}
