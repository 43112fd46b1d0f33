//! The Valkey store on a real redis-server: what it refuses (staged writes
//! with the record, optimistic mode, an outbox), races of four processors,
//! a lease lapsing under a running owner, faults (dropped connections,
//! timeouts, a restart without persistence) and bad input (sizes at the
//! limits, keys holding something that is not a record).

use lambda_idempotency::sqs::{PreRead, SqsProcessor, SqsRecord, parse_sqs_event};
use lambda_idempotency::store::valkey::ValkeyTimeouts;
use lambda_idempotency::testing::FailedIds as _;
use lambda_idempotency::{
    CommitMode, Config, Error, HandlerError, Idempotency, KeySelector, MemoryStore, Outcome, Store,
    StoreError, ValkeyStore, Write, store::Status, write::Staged,
};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use test_kit::contract::pk_key;
use test_kit::events::{Msg, sqs_event};
use test_kit::valkey::{Valkey, valkey};

/// What happened per key: handler runs, and completions committed
/// (`Outcome::Executed`), which must end at exactly one each.
#[derive(Debug, Clone, Default)]
struct Tally(Arc<Mutex<HashMap<String, (usize, usize)>>>);

impl Tally {
    fn ran(&self, key: &str) {
        self.0.lock().unwrap().entry(key.to_owned()).or_default().0 += 1;
    }
    fn executed(&self, key: &str) {
        self.0.lock().unwrap().entry(key.to_owned()).or_default().1 += 1;
    }
    fn snapshot(&self) -> HashMap<String, (usize, usize)> {
        self.0.lock().unwrap().clone()
    }
}

fn config(prefix: &str) -> Config {
    Config::with_prefix(prefix).disabled(false)
}

fn credit(table: &str, pk: &str) -> Write {
    Write::update(table, pk_key(pk)).add("balance", 1)
}

/// Staged writes cannot commit with a Valkey record: optimistic mode is
/// refused at construction (and per message when forced in), a fenced
/// commit with staged writes or a staged message is refused before
/// anything is written (the claim released, not retryable), and
/// claim-then-complete commits the writes on their own through the
/// business-table store, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_writes_are_refused_or_committed_on_their_own() {
    let server = valkey();
    let store = server.store().await;
    let refused = Idempotency::try_new(
        store.clone(),
        config("vk.mode").commit_mode(CommitMode::Optimistic),
    )
    .unwrap_err();
    assert!(
        matches!(
            &refused,
            lambda_idempotency::ConfigError::Mode(m) if m.mode == CommitMode::Optimistic
        ),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("optimistic"), "{refused}");
    assert!(Idempotency::try_new(store.clone(), config("vk.mode")).is_ok());

    let forced = Idempotency::new(store.clone(), config("vk.mode")).in_mode(CommitMode::Optimistic);
    let key = forced.key(&json!("forced")).unwrap();
    let ran = std::sync::atomic::AtomicBool::new(false);
    let out = forced
        .run(&key, None, None, || async {
            ran.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, HandlerError>(json!(1))
        })
        .await;
    assert!(
        matches!(&out, Err(e @ Error::Store(StoreError::Invalid { .. })) if !e.is_retryable()),
        "{out:?}"
    );
    assert!(
        !ran.load(std::sync::atomic::Ordering::SeqCst),
        "the handler must not run"
    );

    // Fenced with a staged write and no business-table store.
    let fenced = Idempotency::try_new(store.clone(), config("vk.fenced")).unwrap();
    let key = fenced.key(&json!("with-write")).unwrap();
    let out = fenced
        .run(&key, None, None, || async {
            Ok::<_, HandlerError>(Staged::new(json!(1)).write(credit("accounts", "a")))
        })
        .await;
    match &out {
        Err(e @ Error::Store(StoreError::Invalid { reason })) => {
            assert!(!e.is_retryable());
            assert!(reason.contains("cannot commit staged writes"), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        store.get(key.as_str()).await.unwrap(),
        None,
        "claim released"
    );

    // A staged message: no outbox in Valkey.
    let key = fenced.key(&json!("with-message")).unwrap();
    let out = fenced
        .run(&key, None, None, || async {
            Ok::<_, HandlerError>(Staged::new(json!(1)).publish(
                lambda_idempotency::outbox::Message::sqs(
                    "https://sqs.us-east-1.amazonaws.com/1/q",
                    "m",
                ),
            ))
        })
        .await;
    assert!(
        matches!(&out, Err(Error::Store(StoreError::Invalid { reason })) if reason.contains("outbox")),
        "{out:?}"
    );
    assert_eq!(store.get(key.as_str()).await.unwrap(), None);

    // Claim-then-complete: the write commits on its own, once.
    let tables = MemoryStore::new();
    let engine = Idempotency::try_new(
        store.clone().with_tables(tables.clone()),
        config("vk.ctc").commit_mode(CommitMode::ClaimThenComplete),
    )
    .unwrap();
    let key = engine.key(&json!("credit-once")).unwrap();
    for delivery in 0..3 {
        let out = engine
            .run(&key, None, None, || async {
                Ok::<_, HandlerError>(Staged::new(json!("credited")).write(credit("accounts", "b")))
            })
            .await
            .unwrap();
        let expected = if delivery == 0 {
            Outcome::Executed(json!("credited"))
        } else {
            Outcome::Replayed(Some(json!("credited")))
        };
        assert_eq!(out, expected);
    }
    let balance = tables.item("accounts", &pk_key("b")).unwrap()["balance"].as_i64();
    assert_eq!(balance, Some(1));
}

/// The record is a hash under `<prefix><id>` with the DynamoDB layout's
/// field names and a TTL from its expiration; a claim, a completion and a
/// batch pre-read are one script or one pipeline each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_are_hashes_with_a_ttl_one_round_trip_per_verb() {
    let server = Valkey::start();
    let store = server.store().await.with_key_prefix("app:");
    let engine = Idempotency::try_new(
        store.clone(),
        config("vk.layout").expires_after(Duration::from_secs(600)),
    )
    .unwrap();
    let key = engine.key(&json!("k1")).unwrap();
    server.reset_stats().await;
    let out = engine
        .run(&key, Some(&json!({"a": 1})), None, || async {
            Ok::<_, HandlerError>(json!({"ok": true}))
        })
        .await
        .unwrap();
    assert_eq!(out, Outcome::Executed(json!({"ok": true})));
    let counts = server.command_counts().await;
    // claim + complete: two EVALSHAs (the first use of each script also
    // loads it: NOSCRIPT, SCRIPT LOAD, EVALSHA again).
    assert_eq!(counts.get("evalsha").copied().unwrap_or(0), 4, "{counts:?}");
    assert_eq!(
        counts.get("script|load").copied().unwrap_or(0),
        2,
        "{counts:?}"
    );

    let mut conn = server.connection().await;
    let name = format!("app:{}", key.as_str());
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(&name)
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut names: Vec<&str> = fields.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["data", "expiration", "owner_token", "status", "validation"]
    );
    assert_eq!(fields["status"], "COMPLETED");
    let ttl_ms: i64 = redis::cmd("PTTL")
        .arg(&name)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((599_000..=601_000).contains(&ttl_ms), "PTTL {ttl_ms}");

    // Duplicates: one claim script each (returning the record), and a
    // redelivered batch is settled by one pipeline, no script.
    server.reset_stats().await;
    let again = engine
        .run(&key, Some(&json!({"a": 1})), None, || async {
            Ok::<_, HandlerError>(json!({"ok": false}))
        })
        .await
        .unwrap();
    assert_eq!(again, Outcome::Replayed(Some(json!({"ok": true}))));
    assert_eq!(server.command_counts().await.get("evalsha"), Some(&1));
    let ids: Vec<String> = (0..10)
        .map(|i| {
            engine
                .key(&json!(format!("pre-{i}")))
                .unwrap()
                .as_str()
                .to_owned()
        })
        .chain([key.as_str().to_owned()])
        .collect();
    server.reset_stats().await;
    let found = store.get_many(&ids).await.unwrap();
    assert_eq!(found.len(), 1);
    let counts = server.command_counts().await;
    assert_eq!(counts.get("hgetall"), Some(&11), "{counts:?}");
    assert_eq!(counts.get("evalsha"), None, "{counts:?}");
}

/// Four processors (each its own connection, as four Lambda instances)
/// handle overlapping batches at once, standard and FIFO, redelivering
/// their failed records (keys in progress elsewhere) until none is left:
/// every key runs and completes exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processors_over_overlapping_batches_execute_each_key_once() {
    for queue in ["orders", "payments.fifo"] {
        let tally = Tally::default();
        let prefix = test_kit::unique_name("vk.race");
        let batch = |range: std::ops::Range<u32>, tag: &str| {
            test_kit::events::keyed_batch(queue, range, tag)
        };
        let mut pending = vec![
            batch(0..10, "a"),
            batch(4..14, "b"),
            batch(8..18, "c"),
            batch(0..18, "d"),
        ];
        let mut processors = Vec::new();
        for i in 0..4 {
            // Four connections over one key space.
            let store = valkey().store().await.with_key_prefix(format!("{prefix}:"));
            let engine = Idempotency::try_new(store, config(&prefix)).unwrap();
            // Half read ahead: both paths race.
            let pre_read = if i % 2 == 0 {
                PreRead::Always
            } else {
                PreRead::Never
            };
            processors
                .push(SqsProcessor::new(engine, KeySelector::pointer("/key")).pre_read(pre_read));
        }
        let mut rounds = 0;
        while pending.iter().any(|b| !b.is_empty()) {
            rounds += 1;
            assert!(
                rounds <= 30,
                "{queue}: still pending after 30 rounds: {pending:?}"
            );
            let run = |i: usize| {
                let event = parse_sqs_event(sqs_event(queue, &pending[i])).unwrap();
                let tally = tally.clone();
                processors[i].process(event, None, move |r: SqsRecord<Value>| {
                    let tally = tally.clone();
                    async move {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        tally.ran(r.body["key"].as_str().unwrap());
                        Ok::<_, HandlerError>(json!(r.body["key"]))
                    }
                })
            };
            let reports = futures_join4(run(0), run(1), run(2), run(3)).await;
            pending = reports
                .into_iter()
                .zip(&pending)
                .map(|(report, msgs)| {
                    let mut failed = Vec::new();
                    for (r, m) in report.records.iter().zip(msgs) {
                        match &r.outcome {
                            Ok(Outcome::Executed(_)) => tally.executed(&key_of(m)),
                            Ok(Outcome::Replayed(_)) => {}
                            Ok(other) => panic!("{queue}: unexpected {other:?}"),
                            Err(_) => failed.push(m.clone()),
                        }
                    }
                    failed
                })
                .collect();
        }
        let counts = tally.snapshot();
        assert_eq!(counts.len(), 18, "{queue}: {counts:?}");
        assert!(counts.values().all(|&c| c == (1, 1)), "{queue}: {counts:?}");
    }
}

async fn futures_join4<A, B, C, D>(a: A, b: B, c: C, d: D) -> Vec<A::Output>
where
    A: std::future::Future,
    B: std::future::Future<Output = A::Output>,
    C: std::future::Future<Output = A::Output>,
    D: std::future::Future<Output = A::Output>,
{
    let (a, b, c, d) = tokio::join!(a, b, c, d);
    vec![a, b, c, d]
}

/// In real time: the first owner's lease (300 ms) lapses while its handler
/// still runs; a second invocation, told "in progress" before, takes the
/// key over and completes. The first owner's completion is refused
/// (`LeaseLost`) and overwrites nothing: the next delivery replays the
/// second owner's response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_lapse_while_the_first_owner_runs_refuses_its_completion() {
    let prefix = test_kit::unique_name("vk.lease");
    let cfg = config(&prefix).lease(Duration::from_millis(300));
    // Two connections over one key space, as two Lambda instances.
    let store = || async { valkey().store().await.with_key_prefix(format!("{prefix}:")) };
    let first = Idempotency::try_new(store().await, cfg.clone()).unwrap();
    let second = Idempotency::try_new(store().await, cfg).unwrap();
    let key = first.key(&json!("slow")).unwrap();
    // The first owner holds its claim until the second has taken over (no
    // timing assumption beyond the lease lapsing within the bound).
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let (taken_tx, taken_rx) = tokio::sync::oneshot::channel::<()>();
    let slow = first.run(&key, None, None, || async move {
        let _ = started_tx.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), taken_rx).await;
        Ok::<_, HandlerError>(json!("first"))
    });
    let takeover = async {
        started_rx.await.unwrap();
        // Still held: in progress.
        let early = second
            .run(&key, None, None, || async {
                Ok::<_, HandlerError>(json!("early"))
            })
            .await
            .unwrap();
        assert!(matches!(early, Outcome::InProgress { .. }), "{early:?}");
        // Once the lease lapses (300 ms after the claim), the key is taken.
        let mut outcome = early;
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            outcome = second
                .run(&key, None, None, || async {
                    Ok::<_, HandlerError>(json!("second"))
                })
                .await
                .unwrap();
            if !matches!(outcome, Outcome::InProgress { .. }) {
                break;
            }
        }
        let _ = taken_tx.send(());
        outcome
    };
    let (slow, takeover) = tokio::join!(slow, takeover);
    assert_eq!(takeover, Outcome::Executed(json!("second")));
    match slow {
        Err(Error::LeaseLost { key: lost }) => assert_eq!(lost, key.as_str()),
        other => panic!("expected LeaseLost, got {other:?}"),
    }
    let held = second.run(&key, None, None, || async {
        Ok::<_, HandlerError>(json!("third"))
    });
    assert_eq!(
        held.await.unwrap(),
        Outcome::Replayed(Some(json!("second")))
    );
}

/// Runs `batch` through `processor` until every record is done (bounded),
/// sleeping `pause` between rounds so held claims can lapse. Returns the
/// failures seen on the way.
async fn deliver_until_done(
    processor: &SqsProcessor,
    batch: Vec<Msg>,
    tally: &Tally,
    pause: Duration,
    during_first: impl FnMut(usize) + Send + Sync + Clone + 'static,
) -> Vec<lambda_idempotency::sqs::FailureReason> {
    let mut pending = batch;
    let mut failures = Vec::new();
    let mut round = 0;
    while !pending.is_empty() {
        round += 1;
        assert!(round <= 40, "still pending after 40 rounds: {pending:?}");
        let event = parse_sqs_event(sqs_event("orders", &pending)).unwrap();
        let first = round == 1;
        let hook = during_first.clone();
        let tally_in = tally.clone();
        let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let report = processor
            .process(event, None, move |r: SqsRecord<Value>| {
                let tally = tally_in.clone();
                let mut hook = hook.clone();
                let counter = counter.clone();
                async move {
                    let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if first {
                        hook(n);
                    }
                    tally.ran(r.body["key"].as_str().unwrap());
                    Ok::<_, HandlerError>(json!(r.body["key"]))
                }
            })
            .await;
        let mut next = Vec::new();
        for (r, m) in report.records.iter().zip(&pending) {
            match &r.outcome {
                Ok(Outcome::Executed(_)) => tally.executed(&key_of(m)),
                Ok(Outcome::Replayed(_)) => {}
                Ok(other) => panic!("unexpected {other:?}"),
                Err(reason) => {
                    failures.push(reason.clone());
                    next.push(m.clone());
                }
            }
        }
        pending = next;
        if !pending.is_empty() {
            tokio::time::sleep(pause).await;
        }
    }
    failures
}

/// The key material of a synthetic message.
fn key_of(m: &Msg) -> String {
    let body: Value = serde_json::from_str(&m.body).unwrap();
    body["key"].as_str().unwrap().to_owned()
}

fn messages(tag: &str, n: u32) -> Vec<Msg> {
    (0..n)
        .map(|k| {
            Msg::new(
                format!("{tag}-{k}"),
                json!({"key": format!("{tag}{k}")}).to_string(),
            )
        })
        .collect()
}

/// Every failure is retryable (a store failure or a key still in progress).
fn assert_retryable(failures: &[lambda_idempotency::sqs::FailureReason]) {
    use lambda_idempotency::sqs::FailureReason;
    for f in failures {
        assert!(
            matches!(
                f,
                FailureReason::Store(_)
                    | FailureReason::InProgress { .. }
                    | FailureReason::Idempotency(_)
            ),
            "not a retryable failure: {f:?}"
        );
    }
}

/// Every key is completed in the store, and its completion was committed
/// at most once: by one `Executed` delivery, or (after a timeout whose
/// outcome was unknown) by the timed-out command itself, which the
/// redelivery then replays. A handler may run again only when its first
/// completion was lost (the claim-then-complete window), never while
/// another delivery holds the key.
async fn assert_completed_once(tally: &Tally, n: usize, processor: &SqsProcessor) {
    let counts = tally.snapshot();
    assert_eq!(counts.len(), n, "{counts:?}");
    let engine = processor.engine();
    for (key, &(ran, executed)) in &counts {
        assert!(
            executed <= 1,
            "{key} completed {executed} times: {counts:?}"
        );
        assert!(ran >= 1, "{key}: {counts:?}");
        let id = engine.key(&json!(key)).unwrap();
        let outcome = engine
            .run(&id, None, None, || async {
                Ok::<_, HandlerError>(json!("not again"))
            })
            .await
            .unwrap();
        assert_eq!(outcome, Outcome::Replayed(Some(json!(key))), "{key}");
    }
}

/// The server drops every client connection in the middle of a batch (as a
/// failover or an idle timeout would): the records in flight fail
/// retryably, the store reconnects by itself, and the redeliveries complete
/// every key exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connections_fail_retryably_and_complete_once() {
    // A server of its own: the drops must not hit the other tests.
    let server = Valkey::start();
    let url = server.url();
    let prefix = test_kit::unique_name("vk.drop");
    let engine = Idempotency::try_new(
        server.store().await,
        config(&prefix).lease(Duration::from_millis(300)),
    )
    .unwrap();
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/key")).concurrency(2);
    let tally = Tally::default();
    let kills = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let kills_in = kills.clone();
    let failures = deliver_until_done(
        &processor,
        messages("drop", 12),
        &tally,
        Duration::from_millis(350),
        move |n| {
            if n == 3 || n == 7 {
                let client = redis::Client::open(url.as_str()).unwrap();
                let mut admin = client.get_connection().unwrap();
                let killed: i64 = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("normal")
                    .query(&mut admin)
                    .unwrap();
                kills_in.fetch_add(
                    usize::try_from(killed).unwrap(),
                    std::sync::atomic::Ordering::SeqCst,
                );
            }
        },
    )
    .await;
    assert!(
        kills.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "connections were dropped"
    );
    assert!(!failures.is_empty(), "the drops failed some records");
    assert_retryable(&failures);
    assert_completed_once(&tally, 12, &processor).await;
}

/// The server stalls (`CLIENT PAUSE`) past the store's 100 ms response
/// timeout: the records fail retryably, their outcome unknown (the paused
/// claims apply later and hold the keys until their lease lapses); the
/// redeliveries complete every key exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_fail_retryably_and_complete_once() {
    let server = Valkey::start();
    let url = server.url();
    let prefix = test_kit::unique_name("vk.timeout");
    let store = server
        .store_with(ValkeyTimeouts {
            response: Duration::from_millis(100),
            ..ValkeyTimeouts::default()
        })
        .await;
    let engine =
        Idempotency::try_new(store, config(&prefix).lease(Duration::from_millis(300))).unwrap();
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/key")).concurrency(1);
    let tally = Tally::default();
    let failures = deliver_until_done(
        &processor,
        messages("slow", 8),
        &tally,
        Duration::from_millis(350),
        move |n| {
            if n == 2 {
                let client = redis::Client::open(url.as_str()).unwrap();
                let mut admin = client.get_connection().unwrap();
                redis::cmd("CLIENT")
                    .arg("PAUSE")
                    .arg(400)
                    .arg("ALL")
                    .query::<()>(&mut admin)
                    .unwrap();
            }
        },
    )
    .await;
    assert!(
        failures.iter().any(|f| format!("{f:?}").contains("script")),
        "a command timed out: {failures:?}"
    );
    assert_retryable(&failures);
    assert_completed_once(&tally, 8, &processor).await;
}

/// The server is killed and restarted empty (no persistence) in the middle
/// of a batch: the records in flight fail retryably and complete on
/// redelivery, through the same store (it reconnects and reloads its
/// scripts). What the restart loses: every record written before it, so a
/// redelivery of an already completed message runs its handler again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_persistence_fails_retryably_and_forgets_every_record() {
    let started = Valkey::start();
    let store = started.store().await;
    let server = Arc::new(Mutex::new(started));
    let prefix = test_kit::unique_name("vk.restart");
    let engine = Idempotency::try_new(
        store.clone(),
        config(&prefix).lease(Duration::from_millis(300)),
    )
    .unwrap();
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/key")).concurrency(2);

    let before = Tally::default();
    let failures = deliver_until_done(
        &processor,
        messages("early", 4),
        &before,
        Duration::ZERO,
        |_| {},
    )
    .await;
    assert!(failures.is_empty(), "{failures:?}");
    assert_completed_once(&before, 4, &processor).await;

    let tally = Tally::default();
    let restarting = server.clone();
    let failures = deliver_until_done(
        &processor,
        messages("mid", 10),
        &tally,
        Duration::from_millis(350),
        move |n| {
            if n == 4 {
                tokio::task::block_in_place(|| restarting.lock().unwrap().restart());
            }
        },
    )
    .await;
    assert!(!failures.is_empty(), "the restart failed some records");
    assert_retryable(&failures);
    // Each key completed at most once per server life: the records of the
    // keys done before the restart are gone with it (checked below).
    let counts = tally.snapshot();
    assert_eq!(counts.len(), 10, "{counts:?}");
    assert!(
        counts
            .values()
            .all(|&(ran, executed)| ran >= 1 && executed <= 1),
        "{counts:?}"
    );

    // The completed records of before the restart are gone: their
    // redelivery runs again.
    let again = Tally::default();
    let failures = deliver_until_done(
        &processor,
        messages("early", 4),
        &again,
        Duration::ZERO,
        |_| {},
    )
    .await;
    assert!(failures.is_empty(), "{failures:?}");
    assert_completed_once(&again, 4, &processor).await;
}

/// Keys that hold something else than a record (another type, a hash that
/// is not ours, a non-UTF-8 response): a clear error naming the key on
/// every verb, never a panic, and the foreign value is left as it is. In a
/// batch only that record fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_values_at_the_key_are_clear_errors() {
    let server = valkey();
    let store = server.store().await;
    let engine = Idempotency::try_new(store.clone(), config("vk.foreign")).unwrap();
    let mut conn = server.connection().await;
    let far = (test_kit::now_ms() / 1000 + 3600).to_string();
    // (name, hash fields when a hash, what the error says)
    type Case<'a> = (&'a str, Vec<(&'a str, Vec<u8>)>, &'a str);
    let cases: Vec<Case<'_>> = vec![
        ("string", vec![], "holds a Valkey string"),
        ("list", vec![], "holds a Valkey list"),
        (
            "hash-foreign",
            vec![("foo", b"bar".to_vec())],
            "no status field",
        ),
        (
            "hash-status",
            vec![
                ("status", b"DONE".to_vec()),
                ("expiration", far.clone().into_bytes()),
            ],
            "unknown status DONE",
        ),
        (
            "hash-utf8",
            vec![
                ("status", b"COMPLETED".to_vec()),
                ("expiration", far.clone().into_bytes()),
                ("data", vec![0xff, 0xfe, 0x00]),
            ],
            "data is not UTF-8",
        ),
    ];
    for (name, fields, expected) in cases {
        let key = engine.key(&json!(name)).unwrap();
        let server_key = store.key(key.as_str());
        let mut cmd = match name {
            "string" => redis::cmd("SET"),
            "list" => redis::cmd("RPUSH"),
            _ => redis::cmd("HSET"),
        };
        cmd.arg(&server_key);
        match name {
            "string" => cmd.arg("garbage"),
            "list" => cmd.arg("a"),
            _ => {
                for (f, v) in &fields {
                    cmd.arg(*f).arg(v.as_slice());
                }
                &mut cmd
            }
        };
        cmd.query_async::<()>(&mut conn).await.unwrap();
        let out = engine
            .run(&key, None, None, || async {
                Ok::<_, HandlerError>(json!("ran"))
            })
            .await;
        match &out {
            Err(Error::Store(e @ StoreError::Corrupt { .. })) => {
                assert!(e.to_string().contains(expected), "{name}: {e}");
            }
            other => panic!("{name}: expected a corrupt-record error, got {other:?}"),
        }
        let read = store.get(key.as_str()).await;
        assert!(
            matches!(read, Err(StoreError::Corrupt { .. })),
            "{name}: {read:?}"
        );
        let release = store.release(key.as_str(), "someone").await;
        assert!(release.is_err(), "{name}: {release:?}");
        let kind: String = redis::cmd("TYPE")
            .arg(&server_key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_ne!(kind, "none", "{name}: the foreign value is left alone");
    }

    // In a batch: the foreign key's record fails, the others complete.
    let processor =
        SqsProcessor::new(engine.clone(), KeySelector::pointer("/key")).pre_read(PreRead::Always);
    let event = parse_sqs_event(sqs_event(
        "orders",
        &[
            Msg::new("m1", json!({"key": "string"}).to_string()),
            Msg::new("m2", json!({"key": "fine-1"}).to_string()),
            Msg::new("m3", json!({"key": "fine-2"}).to_string()),
        ],
    ))
    .unwrap();
    let report = processor
        .process(event, None, |_r: SqsRecord<Value>| async {
            Ok::<_, HandlerError>(json!(1))
        })
        .await;
    let failed = report
        .response_as::<lambda_idempotency::sqs::SqsBatchResponse>()
        .unwrap()
        .failed_ids();
    assert_eq!(failed, ["m1"]);
}

/// Sizes at the limits: a response whose record is exactly the item limit
/// is stored and replayed, one byte more is stored without its body (the
/// default policy); key material of 256 KiB still makes a short key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_at_the_limits() {
    let store = valkey().store().await;
    let limit = lambda_idempotency::config::DEFAULT_MAX_ITEM_BYTES;
    let engine = Idempotency::try_new(store.clone(), config("vk.size")).unwrap();
    // The record's size without its response.
    let probe = engine.key(&json!("probe")).unwrap();
    engine
        .run(&probe, Some(&json!(1)), None, || async {
            Ok::<_, HandlerError>(json!(""))
        })
        .await
        .unwrap();
    let record = store.get(probe.as_str()).await.unwrap().unwrap();
    let base = store.item_size(&record) - record.data.as_ref().unwrap().len();
    // A JSON string of n characters is n + 2 bytes.
    let fits = limit - base - 2;
    for (name, n, kept) in [("at-limit", fits, true), ("over-limit", fits + 1, false)] {
        let key = engine.key(&json!(name)).unwrap();
        // Ids (prefix#sha256), owner tokens and payload hashes have fixed
        // lengths: the same base size as the probe's.
        assert_eq!(key.as_str().len(), probe.as_str().len());
        let body = "x".repeat(n);
        let out = engine
            .run(&key, Some(&json!(1)), None, || async {
                Ok::<_, HandlerError>(json!(body))
            })
            .await
            .unwrap();
        assert!(matches!(out, Outcome::Executed(_)), "{name}");
        let record = store.get(key.as_str()).await.unwrap().unwrap();
        assert_eq!(record.status, Status::Completed, "{name}");
        assert_eq!(
            record.data.is_some(),
            kept,
            "{name}: size {}",
            store.item_size(&record)
        );
        let replay = engine
            .run(&key, Some(&json!(1)), None, || async {
                Ok::<_, HandlerError>(json!("again"))
            })
            .await
            .unwrap();
        let expected = if kept {
            Outcome::Replayed(Some(json!(body)))
        } else {
            Outcome::Replayed(None)
        };
        assert_eq!(replay, expected, "{name}");
    }
    // The store refuses a record over its limit, whatever the engine says.
    let mut big = record.clone();
    big.id = engine.key(&json!("direct")).unwrap().as_str().to_owned();
    big.data = Some("y".repeat(limit));
    let claim = store.claim(&big, test_kit::now_ms()).await;
    assert!(
        matches!(claim, Err(StoreError::ItemTooLarge { .. })),
        "{claim:?}"
    );

    let material = "k".repeat(256 * 1024);
    let key = engine.key(&json!(material)).unwrap();
    assert!(store.key(key.as_str()).len() < 200);
    let out = engine
        .run(&key, None, None, || async {
            Ok::<_, HandlerError>(json!(1))
        })
        .await
        .unwrap();
    assert_eq!(out, Outcome::Executed(json!(1)));
}

/// The store reads its URL from `VALKEY_URL` / `REDIS_URL`, and a bad URL or
/// an unreachable server is a clear error at construction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_errors_are_clear() {
    let bad = ValkeyStore::connect("http://127.0.0.1:1", ValkeyTimeouts::default()).await;
    let bad = bad.unwrap_err();
    assert!(bad.to_string().contains("not a usable Valkey URL"), "{bad}");
    // A port nothing listens on (a fresh server's, stopped).
    let mut gone = Valkey::start();
    let url = gone.url();
    gone.stop();
    let down = ValkeyStore::connect(
        &url,
        ValkeyTimeouts {
            connect: Duration::from_millis(200),
            reconnect_attempts: 0,
            ..ValkeyTimeouts::default()
        },
    )
    .await
    .unwrap_err();
    assert!(
        down.to_string().contains("cannot connect"),
        "{}",
        lambda_idempotency::report(&down)
    );
    // rediss:// is understood (TLS is compiled in): a TLS handshake with a
    // plain-text server fails as a connection error, not as a bad URL.
    let server = valkey();
    let tls = ValkeyStore::connect(
        &format!("rediss://127.0.0.1:{}", server.port()),
        ValkeyTimeouts {
            connect: Duration::from_millis(500),
            reconnect_attempts: 0,
            ..ValkeyTimeouts::default()
        },
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            tls,
            lambda_idempotency::store::valkey::ValkeyConfigError::Connect(_)
        ),
        "{}",
        lambda_idempotency::report(&tls)
    );
}
