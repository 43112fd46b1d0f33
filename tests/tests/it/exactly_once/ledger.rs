//! `ledger` (a Kinesis consumer crediting accounts) end to end on moto: a
//! stream read by the Kinesis event source mapping emulator, the function's
//! `App` with its DynamoDB store and accounts table on moto. A producer's
//! retries credit once; a poison record holds back its own shard only;
//! nothing after a failed record of a shard is applied before it; through
//! the `ledger` binary, poison records are parked and no valid payment is
//! given up.

use lambda_idempotency::parking::ParkedRecord;
use lambda_idempotency::{DynamoDbStore, Idempotency, store::TableConfig};
use lambda_runtime::LambdaEvent;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use test_kit::kinesis_esm::{
    self, Options, Outcome, Put, Stats, Stream, create_stream, put_to_shard, records, shard_of,
};
use test_kit::runtime_api::{Invocation, RuntimeApi, spawn_function};
use test_kit::{
    Fault, FaultPlan, PaymentTables, balances, moto, now_ms, payment_tables, unique_name,
};

pub(crate) fn payment(id: &str, account: &str, amount: u64) -> Vec<u8> {
    json!({"payment_id": id, "account_id": account, "amount_cents": amount})
        .to_string()
        .into_bytes()
}

/// Puts each `(shard, payment id, account, amount)` of `writes` into its
/// shard (partition key: the account), in order; returns the puts.
pub(crate) async fn put_payments(
    kinesis: &aws_sdk_kinesis::Client,
    stream: &Stream,
    writes: &[(usize, &str, &str, u64)],
) -> Vec<Put> {
    let mut puts = Vec::new();
    for &(shard, id, account, amount) in writes {
        puts.push(
            put_to_shard(
                kinesis,
                stream,
                shard,
                account,
                payment(id, account, amount),
            )
            .await,
        );
    }
    puts
}

/// The function's app over the test's tables on moto.
async fn app(t: &PaymentTables) -> ledger::App {
    let ddb = moto().dynamodb().await;
    let store = DynamoDbStore::new(ddb.clone(), TableConfig::new(t.idempotency.clone()));
    let engine = Idempotency::new(store, ledger::App::config().disabled(false));
    ledger::App::new(
        engine,
        ledger::Accounts::from_table(lambda_idempotency::Table::dynamodb(ddb, &t.accounts)),
    )
}

/// Items of the idempotency table.
async fn records_stored(idempotency: &str) -> usize {
    moto()
        .dynamodb()
        .await
        .scan()
        .table_name(idempotency)
        .consistent_read(true)
        .send()
        .await
        .expect("scan idempotency")
        .items()
        .len()
}

/// Runs the mapping over `stream` with `app` as the function.
async fn run(stream: &kinesis_esm::Stream, options: &Options, app: &ledger::App) -> Stats {
    let kinesis = moto().kinesis().await;
    kinesis_esm::run(&kinesis, stream, options, |event: Value| async move {
        app.handle(LambdaEvent::new(event, Default::default()))
            .await
    })
    .await
}

/// A producer retries `PutRecord` (same payment, new sequence number): in
/// the same batch, in a later batch of the shard, and under another
/// partition key in the other shard (where both copies can run at once).
/// Each payment credits once; a mapping started again at the trim horizon
/// (its checkpoints lost) replays everything and credits nothing.
#[tokio::test]
async fn a_producer_retry_credits_once_in_a_batch_across_batches_and_across_shards() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "ledger-dup", 2).await;
    let t = payment_tables("ledger-dup").await;
    let app = app(&t).await;
    let writes = [
        (0, "p1", "a", 100),
        (0, "p1", "a", 100), // the retry, same batch
        (0, "p2", "b", 20),
        (0, "p1", "a", 100), // again, the next batch
        (1, "p3", "a", 3),
        (1, "p2", "b", 20), // p2's retry in the other shard
        (1, "p4", "c", 4000),
    ];
    let mut sequence_numbers = BTreeSet::new();
    for put in put_payments(&kinesis, &stream, &writes).await {
        sequence_numbers.insert(put.sequence_number + &put.shard_id);
    }
    assert_eq!(
        sequence_numbers.len(),
        7,
        "every copy is a record of its own"
    );
    let options = Options {
        batch_size: 2,
        max_retries: 20,
        retry_pause: Duration::from_millis(50),
        ..Options::default()
    };
    let expected = BTreeMap::from([("a".into(), 103), ("b".into(), 20), ("c".into(), 4000)]);

    let stats = run(&stream, &options, &app).await;
    assert!(stats.skipped.is_empty() && !stats.timed_out, "{stats:?}");
    assert_eq!(stats.read, 7);
    assert_eq!(balances(&t.accounts).await, expected);
    assert_eq!(
        records_stored(&t.idempotency).await,
        4,
        "one per payment_id"
    );

    // A mapping without its checkpoints reads the stream again.
    let again = run(&stream, &options, &app).await;
    assert_eq!(again.records, 7);
    assert_eq!(again.partial_failures + again.invocation_errors, 0);
    assert_eq!(
        balances(&t.accounts).await,
        expected,
        "replayed, not credited"
    );
    assert_eq!(records_stored(&t.idempotency).await, 4);
}

/// A producer using the KPL's aggregation: the Kinesis records of
/// `events/kinesis-payments-kpl.json` (two aggregates written by the awslabs
/// aggregator around a plain record: 8 user records, 7 payments, `pay-3001`
/// sent twice) put to a stream as they were written, read by the mapping in
/// batches of 2 Kinesis records. Each payment credits once, every answer
/// names only records of its batch; a mapping started again at the trim
/// horizon replays them all and credits nothing. Before deaggregation, both
/// aggregates failed as data that is not JSON and no balance was right.
#[tokio::test]
async fn kpl_aggregated_payments_credit_once_through_the_mapping() {
    use base64::Engine as _;
    let sample: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../events/kinesis-payments-kpl.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "ledger-kpl", 1).await;
    let t = payment_tables("ledger-kpl").await;
    let app = app(&t).await;
    for record in sample["Records"].as_array().unwrap() {
        let data = base64::engine::general_purpose::STANDARD
            .decode(record["kinesis"]["data"].as_str().unwrap())
            .unwrap();
        let key = record["kinesis"]["partitionKey"].as_str().unwrap();
        put_to_shard(&kinesis, &stream, 0, key, data).await;
    }
    let options = Options {
        batch_size: 2,
        max_retries: 3,
        retry_pause: Duration::from_millis(50),
        ..Options::default()
    };
    let expected = BTreeMap::from([
        ("acct-1".into(), 1500 + 250 + 3300),
        ("acct-2".into(), 700 + 900),
        ("acct-3".into(), 4200 + 100),
    ]);

    let stats = run(&stream, &options, &app).await;
    assert!(stats.skipped.is_empty() && !stats.timed_out, "{stats:?}");
    assert_eq!(stats.read, 3, "3 Kinesis records");
    assert_eq!(stats.partial_failures + stats.bad_responses, 0, "{stats:?}");
    assert_eq!(balances(&t.accounts).await, expected);
    assert_eq!(records_stored(&t.idempotency).await, 7, "one per payment");

    let again = run(&stream, &options, &app).await;
    assert_eq!(again.records, 3);
    assert_eq!(again.partial_failures + again.invocation_errors, 0);
    assert_eq!(balances(&t.accounts).await, expected, "replayed");
    assert_eq!(records_stored(&t.idempotency).await, 7);
}

/// Shard 0 holds a record that never parses (`not json`) between good ones;
/// shard 1 only good ones. The poison is named in every answer, so its shard
/// retries from it (the record after it in the batch is never applied) until
/// the mapping gives up on that batch (`MaximumRetryAttempts`, as Lambda
/// does: those records go to the on-failure destination). Shard 1 is done
/// meanwhile, long before the poison's last try.
#[tokio::test]
async fn a_poison_record_stops_its_shard_and_does_not_hold_back_the_other() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "ledger-poison", 2).await;
    let t = payment_tables("ledger-poison").await;
    let app = app(&t).await;
    put_to_shard(&kinesis, &stream, 0, "x", payment("x0", "x0", 1)).await;
    let poison = put_to_shard(&kinesis, &stream, 0, "x", b"not json {".to_vec()).await;
    let after = put_to_shard(&kinesis, &stream, 0, "x", payment("x2", "x2", 3)).await;
    for n in 0..3 {
        let id = format!("y{n}");
        put_to_shard(&kinesis, &stream, 1, "y", payment(&id, &id, 10 + n)).await;
    }
    let options = Options {
        max_retries: 3,
        retry_pause: Duration::from_millis(150),
        ..Options::default()
    };
    // After every invocation of shard 0: the record after the poison is not
    // applied.
    let boundaries: Mutex<Vec<BTreeMap<String, i64>>> = Mutex::new(Vec::new());
    let accounts = t.accounts.clone();
    let (boundaries_ref, accounts_ref) = (&boundaries, &accounts);
    let held_shard = stream.shard_id(0).to_owned();
    let held_shard = &held_shard;
    let kinesis_client = moto().kinesis().await;
    let stats = kinesis_esm::run(&kinesis_client, &stream, &options, |event: Value| {
        let app = &app;
        async move {
            let answer = app
                .handle(LambdaEvent::new(event.clone(), Default::default()))
                .await?;
            if shard_of(&records(&event)[0]) == held_shard.as_str() {
                let now = balances(accounts_ref).await;
                boundaries_ref.lock().unwrap().push(now);
            }
            Ok::<_, lambda_runtime::Error>(answer)
        }
    })
    .await;

    let failing = stats.shard(stream.shard_id(0));
    let good = stats.shard(stream.shard_id(1));
    assert_eq!(failing.invocations, 4, "the first try and 3 retries");
    for invocation in &failing.log {
        assert_eq!(
            invocation.outcome,
            Outcome::Partial(poison.sequence_number.clone())
        );
    }
    assert_eq!(
        failing.skipped,
        vec![
            poison.sequence_number.clone(),
            after.sequence_number.clone()
        ]
    );
    let boundaries = boundaries.into_inner().unwrap();
    assert_eq!(boundaries.len(), 4);
    for b in &boundaries {
        assert_eq!(b.get("x0"), Some(&1), "the record before the poison");
        assert_eq!(b.get("x2"), None, "the record after the poison");
    }
    assert!(good.skipped.is_empty() && good.partial_failures == 0);
    let good_done = good.log.last().unwrap().ended;
    let last_try = failing.log.last().unwrap().started;
    assert!(
        good_done < last_try,
        "shard 1 done at {good_done:?}, the poison's last try at {last_try:?}"
    );
    let expected = BTreeMap::from([
        ("x0".into(), 1),
        ("y0".into(), 10),
        ("y1".into(), 11),
        ("y2".into(), 12),
    ]);
    assert_eq!(balances(&t.accounts).await, expected);
}

/// Polls the accounts table until `stop`: every snapshot, in order.
fn poll(accounts: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<BTreeSet<String>>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            seen.push(balances(&accounts).await.into_keys().collect());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        seen
    })
}

/// Whether `applied` holds a prefix of `order` and nothing else of it.
fn is_prefix(order: &[String], applied: &BTreeSet<String>) -> bool {
    let n = order.iter().take_while(|a| applied.contains(*a)).count();
    order[n..].iter().all(|a| !applied.contains(a))
}

/// Shard 0's third record fails for a while (its credit's
/// `TransactWriteItems` gets HTTP 500s from the store, the SDK's retries
/// included), then succeeds on a later try; shard 1 runs clean. The
/// records after it in its shard are applied only after it: at every
/// invocation's end and in every snapshot of a poller reading the balances
/// all along, the credited records of each shard are a prefix of the
/// shard's order. Balances end exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_after_a_failed_record_in_its_shard_is_applied_before_it() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "ledger-order", 2).await;
    let t = payment_tables("ledger-order").await;
    let app = app(&t).await;
    // The held account's id scopes the faults to its credit.
    let held = unique_name("held");
    let mut order: [Vec<String>; 2] = Default::default();
    let mut puts: Vec<Put> = Vec::new();
    let mut expected = BTreeMap::new();
    for (shard, n) in [
        (0, 0),
        (1, 0),
        (0, 1),
        (1, 1),
        (0, 2),
        (1, 2),
        (0, 3),
        (0, 4),
    ] {
        let account = if (shard, n) == (0, 2) {
            held.clone()
        } else {
            format!("s{shard}-{n}")
        };
        let amount = 1 + 10 * shard as u64 + n;
        let id = format!("pay-{account}");
        puts.push(
            put_to_shard(
                &kinesis,
                &stream,
                shard,
                "p",
                payment(&id, &account, amount),
            )
            .await,
        );
        order[shard].push(account.clone());
        expected.insert(account, amount as i64);
    }
    let held_seq = puts[4].sequence_number.clone();
    moto()
        .inject(
            &held,
            &FaultPlan::new(1.0, &[Fault::ServerError])
                .max(6)
                .target("TransactWriteItems"),
        )
        .await;
    let stop = Arc::new(AtomicBool::new(false));
    let poller = poll(t.accounts.clone(), stop.clone());
    let options = Options {
        max_retries: 20,
        retry_pause: Duration::from_millis(100),
        ..Options::default()
    };
    let stats = run(&stream, &options, &app).await;
    stop.store(true, Ordering::SeqCst);
    let snapshots = poller.await.unwrap();
    let faults = moto().clear_faults(&held).await;
    assert!(
        faults.injected >= 3,
        "the held record failed a try: {faults}"
    );

    assert!(stats.skipped.is_empty() && !stats.timed_out, "{stats:?}");
    let held_shard = stats.shard(stream.shard_id(0));
    assert!(
        held_shard.partial_failures >= 1,
        "the held record failed an invocation"
    );
    for invocation in &held_shard.log {
        if let Outcome::Partial(seq) = &invocation.outcome {
            assert_eq!(seq, &held_seq, "only the held record fails");
        }
    }
    assert_eq!(stats.shard(stream.shard_id(1)).partial_failures, 0);
    assert!(
        snapshots.len() > 3,
        "the poller read along: {}",
        snapshots.len()
    );
    for (i, applied) in snapshots.iter().enumerate() {
        for shard_order in &order {
            assert!(
                is_prefix(shard_order, applied),
                "snapshot {i}: {applied:?} is not a prefix of {shard_order:?}"
            );
        }
    }
    assert!(
        snapshots
            .iter()
            .any(|s| s.contains("s0-1") && !s.contains(&held)),
        "a snapshot saw the records before the held one applied, and it not yet"
    );
    assert_eq!(balances(&t.accounts).await, expected);
}

/// Runs the `ledger` binary (under a local Runtime API, on the test's
/// tables, parking in `parking` when set) as the function of a mapping over
/// `stream`.
async fn run_binary(
    stream: &Stream,
    t: &PaymentTables,
    parking: Option<&str>,
    options: &Options,
) -> Stats {
    let api = RuntimeApi::start().await;
    let [idempotency, accounts] = t.env();
    let mut env = vec![idempotency, accounts, (payments::MODE_ENV, "optimistic")];
    if let Some(url) = parking {
        env.push((lambda_idempotency::parking::PARKING_QUEUE_ENV, url));
    }
    let mut child = spawn_function("ledger", &api, &env);
    api.wait_first_poll(Duration::from_secs(20)).await;
    let kinesis = moto().kinesis().await;
    let api = &api;
    let stats = kinesis_esm::run(&kinesis, stream, options, |event: Value| async move {
        match api
            .invoke(event, now_ms() + 30_000, Duration::from_secs(30))
            .await
        {
            Some(Invocation::Response(answer)) => Ok(answer),
            other => Err(lambda_runtime::Error::from(format!("{other:?}"))),
        }
    })
    .await;
    child.kill().expect("stop ledger");
    child.wait().expect("reap ledger");
    stats
}

/// Every message of the queue at `url` (received until it is empty, each
/// deleted): its body as a parked record, and its `parked-id` attribute.
async fn drain_parked(url: &str) -> Vec<(ParkedRecord, String)> {
    let sqs = moto().sqs().await;
    let mut parked = Vec::new();
    loop {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive parked");
        let messages = out.messages();
        if messages.is_empty() {
            return parked;
        }
        for m in messages {
            let record: ParkedRecord =
                serde_json::from_str(m.body().unwrap_or_default()).expect("a parked record");
            let id = m
                .message_attributes()
                .and_then(|a| a.get("parked-id"))
                .and_then(|v| v.string_value())
                .unwrap_or_default()
                .to_owned();
            parked.push((record, id));
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await
                .expect("delete parked");
        }
    }
}

/// A stream of 2 shards with 40 valid payments (one retried by its
/// producer) and 6 poison records among them: data that is not JSON, a
/// payment without `payment_id`, a blank account (a terminal rejection), an
/// amount too large (terminal). Through the `ledger` binary on moto:
///
/// * without a parking queue (as before), each poison record holds back its
///   shard's checkpoint until the mapping gives up on its batch: the
///   mapping skips the records from it on. Changed with lanes by partition
///   key (issue 29): the valid payments behind it were given up with it;
///   they are under other partition keys than the poison (`p`), so they
///   now run and are credited before the mapping gives up (the mapping
///   still skips them, the on-failure destination gets them);
/// * with `PARKING_QUEUE_URL`, every valid payment is credited exactly once,
///   none is given up, no invocation names a failure, and every poison
///   record is in the parking queue: its data as put, its shard and
///   sequence number, the reason, and its position as the `parked-id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_records_are_parked_and_no_valid_payment_is_given_up() {
    let kinesis = moto().kinesis().await;
    let stream = create_stream(&kinesis, "ledger-park", 2).await;
    let poison: [&[u8]; 6] = [
        b"not json {",
        br#"{"account_id": "nobody", "amount_cents": 1}"#,
        br#"{"payment_id": "blank-account", "account_id": " ", "amount_cents": 5}"#,
        br#"{"payment_id": "too-large", "account_id": "big", "amount_cents": 18446744073709551615}"#,
        b"\xff\xfe not utf-8",
        br#"{"payment_id": "blank-account-2", "account_id": "", "amount_cents": 7}"#,
    ];
    let mut expected = BTreeMap::new();
    let mut poison_puts: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for n in 0..40usize {
        let shard = n % 2;
        let account = format!("acct-{n}");
        let amount = 100 + n as u64;
        put_to_shard(
            &kinesis,
            &stream,
            shard,
            &account,
            payment(&format!("pay-{n}"), &account, amount),
        )
        .await;
        expected.insert(account, amount as i64);
        if n == 7 {
            // The producer's retry, under a new sequence number.
            put_to_shard(
                &kinesis,
                &stream,
                shard,
                "r",
                payment("pay-7", "acct-7", 107),
            )
            .await;
        }
        if n % 7 == 3 {
            let data = poison[poison_puts.len()].to_vec();
            let put = put_to_shard(&kinesis, &stream, shard, "p", data.clone()).await;
            poison_puts.insert(put.sequence_number, data);
        }
    }
    assert_eq!(poison_puts.len(), 6);
    let options = Options {
        max_retries: 2,
        retry_pause: Duration::from_millis(50),
        ..Options::default()
    };

    // Before: no parking queue.
    let before = payment_tables("ledger-park-off").await;
    let stats = run_binary(&stream, &before, None, &options).await;
    let credited = balances(&before.accounts).await;
    let given_up = expected
        .keys()
        .filter(|a| !credited.contains_key(*a))
        .count();
    eprintln!(
        "without parking: {} poison records, {given_up} of {} valid payments given up, {} records skipped",
        poison_puts.len(),
        expected.len(),
        stats.skipped.len()
    );
    assert!(
        !stats.skipped.is_empty(),
        "the mapping gave up the batches from a poison record on"
    );
    assert_eq!(
        given_up, 0,
        "the valid payments are under other partition keys: none held back"
    );

    // After: parking on.
    let sqs = moto().sqs().await;
    let url = sqs
        .create_queue()
        .queue_name(unique_name("ledger-parking"))
        .send()
        .await
        .expect("create the parking queue")
        .queue_url()
        .unwrap()
        .to_owned();
    let t = payment_tables("ledger-park-on").await;
    let stats = run_binary(&stream, &t, Some(&url), &options).await;
    assert!(!stats.timed_out, "{stats:?}");
    assert_eq!(stats.skipped, Vec::<String>::new(), "nothing given up");
    assert_eq!(stats.partial_failures + stats.invocation_errors, 0);
    assert_eq!(stats.read, 47);
    assert_eq!(balances(&t.accounts).await, expected, "each credited once");

    let parked = drain_parked(&url).await;
    let mut found = BTreeMap::new();
    for (record, attribute) in &parked {
        assert_eq!(attribute, &record.id, "the position is the parked-id");
        assert_eq!(
            record.id,
            format!(
                "{}/{}/{}",
                stream.arn,
                record.lane.as_deref().unwrap(),
                record.position
            )
        );
        assert_eq!(record.source, "aws:kinesis");
        assert!(!record.reason.is_empty());
        let kept = record.record.as_ref().expect("the record, not a reference");
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD
            .decode(kept["kinesis"]["data"].as_str().unwrap())
            .unwrap();
        found.insert(record.position.clone(), data);
    }
    assert_eq!(parked.len(), 6, "each poison record parked once");
    assert_eq!(found, poison_puts, "every poison record, with its data");
}

/// Through the `ledger` binary on a moto of its own (optimistic, the
/// default): a Kinesis batch of 100 new payments over 10 accounts (the
/// partition key), each account's payments superincreasing, costs one
/// `BatchGetItem` (the pre-read) and at most 10 `TransactWriteItems` (one
/// per round of the accounts' lanes, not one per record, as with
/// shard-wide lanes); the same batch redelivered costs the pre-read alone.
/// Every balance is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_100_payments_over_10_accounts_commits_in_at_most_10_transactions() {
    use crate::exactly_once::batch_commits::{balances, invoke_ok, requests_of};
    let moto = test_kit::Moto::start(&[]);
    let t = test_kit::payment_tables_on(&moto, "ledger-lanes").await;
    let api = RuntimeApi::start().await;
    let mut child = test_kit::runtime_api::function_command("ledger", &api)
        .envs(moto.env())
        .envs(t.env())
        .spawn()
        .expect("start the ledger binary");
    api.wait_first_poll(Duration::from_secs(20)).await;
    let payments: Vec<(String, Vec<u8>)> = (0..100u64)
        .map(|i| {
            let account = format!("acct-{}", i % 10);
            let data = payment(&format!("pay-{i}"), &account, 1 << (i / 10));
            (account, data)
        })
        .collect();
    let records: Vec<(&str, &[u8])> = payments
        .iter()
        .map(|(k, d)| (k.as_str(), d.as_slice()))
        .collect();
    let event = lambda_idempotency::testing::events::kinesis_event("ledger-lanes", 0, 0, &records);

    let first = requests_of(&moto, invoke_ok(&api, event.clone())).await;
    let count = |op: &str, sent: &[crate::exactly_once::batch_commits::Sent]| {
        sent.iter().filter(|s| s.op == op).count()
    };
    assert_eq!(count("BatchGetItem", &first), 1, "{first:?}");
    let transactions = count("TransactWriteItems", &first);
    assert!(
        (1..=10).contains(&transactions) && first.len() == 1 + transactions,
        "{first:?}"
    );
    let expected: BTreeMap<String, i64> = (0..10)
        .map(|a| (format!("acct-{a}"), (1 << 10) - 1))
        .collect();
    assert_eq!(balances(&moto, &t).await, expected);

    let again = requests_of(&moto, invoke_ok(&api, event)).await;
    assert_eq!(
        again,
        [crate::exactly_once::batch_commits::sent(
            "BatchGetItem",
            100,
            false
        )],
        "redelivered: replayed from the pre-read"
    );
    assert_eq!(balances(&moto, &t).await, expected, "nothing applied twice");
    let _ = child.kill();
    let _ = child.wait();
}
