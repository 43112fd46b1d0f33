//! The outbox relay (issue 10, relay half) on moto: completed idempotency
//! records with an `outbox` written into a table with a stream, the stream
//! event source mapping emulator (`test_kit::stream_esm`) invoking
//! the relay in process with the real SQS and EventBridge clients, then the
//! target queues read as a consumer reads them.

use aws_sdk_dynamodb::types::{AttributeValue, StreamViewType};
use aws_sdk_sqs::types::QueueAttributeName;
use lambda_runtime::{Context, LambdaEvent};
use outbox_relay::{Allowlist, Policy, Relay, aws::AwsPublisher, stable_id};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use test_kit::esm::{self, Queue, Received, create_queue};
use test_kit::stream_esm::{self, Options, Stats};
use test_kit::{Fault, FaultPlan, create_idempotency_table_with_stream, moto, unique_name};

/// The relay tests run one at a time: they read the launcher's global
/// request counts (other modules run the relay under this lock too, so no
/// other `SendMessageBatch` is counted), and together
/// they would load moto enough to slow the other modules' timed tests.
pub(crate) static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A test's resources share a marker (`relay-<pid>-<n>-`: the dash ends it,
/// so `…-1-` is not a part of `…-10-`) that scopes the launcher's faults.
struct Setup {
    marker: String,
    table: String,
    stream_arn: String,
    fifo: Queue,
    standard: Queue,
}

async fn setup(view: StreamViewType) -> Setup {
    let marker = format!("{}-", unique_name("relay"));
    let ddb = moto().dynamodb().await;
    let sqs = moto().sqs().await;
    let table = format!("{marker}idem");
    let stream_arn = create_idempotency_table_with_stream(&ddb, &table, view).await;
    let fifo = create_queue(&sqs, &format!("{marker}notify"), true, 5, 30).await;
    let standard = create_queue(&sqs, &format!("{marker}notify"), false, 5, 30).await;
    Setup {
        marker,
        table,
        stream_arn,
        fifo,
        standard,
    }
}

fn sqs_entry(record: &str, index: usize, url: &str, group: Option<&str>) -> Value {
    let mut e = json!({
        "id": stable_id(record, index),
        "destination": {"sqs": {"queue_url": url}},
        "body": json!({"record": record, "index": index}).to_string(),
        "attributes": {"type": "OrderConfirmed"},
    });
    if let Some(group) = group {
        e["group_id"] = json!(group);
    }
    e
}

/// Writes an idempotency record (`status`, and the outbox when given).
async fn put_record(table: &str, key: &str, status: &str, outbox: Option<&Value>) {
    let mut put = moto()
        .dynamodb()
        .await
        .put_item()
        .table_name(table)
        .item("id", AttributeValue::S(key.to_owned()))
        .item("status", AttributeValue::S(status.to_owned()))
        .item("expiration", AttributeValue::N("1796515200".to_owned()))
        .item("data", AttributeValue::S("{\"ok\":true}".to_owned()));
    if let Some(outbox) = outbox {
        put = put.item("outbox", AttributeValue::S(outbox.to_string()));
    }
    put.send().await.expect("put record");
}

/// What the template gives the relay for these tests' writer: records under
/// `orders.confirm` may publish to the setup's two queues and `buses`.
fn policy(s: &Setup, buses: &[&str]) -> Policy {
    let mut allowed = vec![s.fifo.url.as_str(), s.standard.url.as_str()];
    allowed.extend(buses);
    let json = json!({ "orders.confirm": allowed }).to_string();
    Policy::new(Allowlist::parse(&json).expect("an allowlist"))
}

async fn relay_with_moto(s: &Setup, buses: &[&str]) -> Relay {
    Relay::new(
        Arc::new(AwsPublisher::new(&moto().sdk_config().await)),
        policy(s, buses),
    )
}

async fn run_relay(s: &Setup, relay: &Relay, options: &Options) -> Stats {
    let streams = moto().dynamodbstreams().await;
    stream_esm::run(&streams, &s.stream_arn, options, |event| {
        relay.handle(LambdaEvent::new(event, Context::default()))
    })
    .await
}

/// The relay run once over the stream (default options, no bus): nothing
/// skipped, no record failed. Returns what the FIFO queue received.
async fn relay_cleanly(s: &Setup) -> Vec<Received> {
    let relay = relay_with_moto(s, &[]).await;
    let stats = run_relay(s, &relay, &Options::default()).await;
    assert!(
        stats.skipped.is_empty() && stats.partial_failures == 0,
        "{stats:?}"
    );
    drain(&s.fifo.url).await
}

/// Every message in the queue, each received once and deleted.
async fn drain(url: &str) -> Vec<Received> {
    esm::receive_all(&moto().sqs().await, url).await
}

/// Each body belongs to exactly one outbox id (nothing published under two
/// ids), the one its record and index give; returns the ids and how often
/// each was received.
pub(crate) fn check_ids(messages: &[Received]) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for m in messages {
        let body: Value = serde_json::from_str(&m.body).expect("a JSON body");
        let expected = stable_id(
            body["record"].as_str().unwrap(),
            body["index"].as_u64().unwrap() as usize,
        );
        assert_eq!(m.outbox_id.as_deref(), Some(expected.as_str()), "{m:?}");
        *seen.entry(expected).or_insert(0) += 1;
    }
    seen
}

/// What the consumers received: each id of `fifo_ids` exactly once on the
/// FIFO queue, each of `standard_ids` on the standard queue, every body
/// under its own id ([`check_ids`]). Returns the messages of each queue.
pub(crate) async fn received_once(
    fifo: &str,
    standard: &str,
    fifo_ids: &BTreeSet<String>,
    standard_ids: &BTreeSet<String>,
    label: &str,
) -> (Vec<Received>, Vec<Received>) {
    let fifo = drain(fifo).await;
    let seen = check_ids(&fifo);
    assert_eq!(
        &seen.keys().cloned().collect::<BTreeSet<_>>(),
        fifo_ids,
        "{label}"
    );
    assert!(
        seen.values().all(|n| *n == 1),
        "{label}: FIFO: one message per id: {seen:?}"
    );
    let standard = drain(standard).await;
    let seen = check_ids(&standard);
    assert_eq!(
        &seen.keys().cloned().collect::<BTreeSet<_>>(),
        standard_ids,
        "{label}"
    );
    (fifo, standard)
}

/// Writes `n` completed records, each with one FIFO message (3 groups) and
/// one standard-queue message; every 5th first claimed (INSERT INPROGRESS,
/// then completed: a MODIFY), every 7th completed twice (the same outbox
/// again: a second MODIFY the relay publishes again under the same ids).
/// Returns the expected ids per queue.
async fn write_records(s: &Setup, n: usize) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut fifo, mut standard) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..n {
        let key = format!("orders.confirm#evt-{i}");
        let group = format!("acct-{}", i % 3);
        let outbox = json!([
            sqs_entry(&key, 0, &s.fifo.url, Some(&group)),
            sqs_entry(&key, 1, &s.standard.url, None),
        ]);
        fifo.insert(stable_id(&key, 0));
        standard.insert(stable_id(&key, 1));
        if i % 5 == 0 {
            put_record(&s.table, &key, "INPROGRESS", None).await;
        }
        put_record(&s.table, &key, "COMPLETED", Some(&outbox)).await;
        if i % 7 == 0 {
            put_record(&s.table, &key, "COMPLETED", Some(&outbox)).await;
        }
    }
    (fifo, standard)
}

fn sent(counts: &serde_json::Map<String, Value>, operation: &str) -> u64 {
    counts.get(operation).and_then(Value::as_u64).unwrap_or(0)
}

/// A transaction (Put b; Put a if absent) cancelled by its second item's
/// condition, between a write of `a` and one of `c`, on `m`; returns the
/// stream as the mapping delivers it ("INSERT a", ...) and the items left.
async fn stream_after_a_cancelled_transaction(m: &test_kit::Moto) -> (Vec<String>, i32) {
    use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
    let ddb = m.dynamodb().await;
    let table = format!("{}-idem", unique_name("relay-txn"));
    let arn = create_idempotency_table_with_stream(&ddb, &table, StreamViewType::NewImage).await;
    let item = |key: &str| {
        [
            ("id".to_owned(), AttributeValue::S(key.to_owned())),
            (
                "status".to_owned(),
                AttributeValue::S("COMPLETED".to_owned()),
            ),
        ]
        .into_iter()
        .collect::<std::collections::HashMap<_, _>>()
    };
    ddb.put_item()
        .table_name(&table)
        .set_item(Some(item("a")))
        .send()
        .await
        .unwrap();
    let put = |key: &str, conditioned: bool| {
        let mut p = Put::builder().table_name(&table).set_item(Some(item(key)));
        if conditioned {
            p = p.condition_expression("attribute_not_exists(id)");
        }
        TransactWriteItem::builder().put(p.build().unwrap()).build()
    };
    let cancelled = ddb
        .transact_write_items()
        .transact_items(put("b", false))
        .transact_items(put("a", true))
        .send()
        .await;
    assert!(cancelled.is_err(), "the second item's condition fails");
    ddb.put_item()
        .table_name(&table)
        .set_item(Some(item("c")))
        .send()
        .await
        .unwrap();

    let streams = m.dynamodbstreams().await;
    let keys = std::sync::Mutex::new(Vec::new());
    let stats = stream_esm::run(&streams, &arn, &Options::default(), |event| {
        let records: Vec<String> = event["Records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r["eventName"].as_str().unwrap(),
                    r["dynamodb"]["Keys"]["id"]["S"].as_str().unwrap()
                )
            })
            .collect();
        keys.lock().unwrap().extend(records);
        async { Ok(Default::default()) }
    })
    .await;
    assert!(stats.skipped.is_empty() && !stats.timed_out, "{stats:?}");
    let scan = ddb.scan().table_name(&table).send().await.unwrap();
    (keys.into_inner().unwrap(), scan.count())
}

/// The moto launcher's item-level transaction backups: a transaction
/// cancelled by its second item's condition leaves no stream record of its
/// first item, and the stream goes on after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_transaction_leaves_no_stream_records() {
    let _serial = SERIAL.lock().await;
    let (stream, items) = stream_after_a_cancelled_transaction(moto()).await;
    assert_eq!(stream, ["INSERT a", "INSERT c"]);
    assert_eq!(items, 2, "b was never written");
}

/// The control: the launcher without its stream rollback
/// (`--keep-cancelled-stream-records`) shows the cancelled transaction's
/// first item in the stream, an item that does not exist: the test above
/// can tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_rollback_a_cancelled_transaction_leaves_a_stream_record() {
    let _serial = SERIAL.lock().await;
    let control = test_kit::Moto::start(&["--keep-cancelled-stream-records"]);
    let (stream, items) = stream_after_a_cancelled_transaction(&control).await;
    assert_eq!(stream, ["INSERT a", "INSERT b", "INSERT c"]);
    assert_eq!(items, 2, "b was never written");
}

/// The emulator honours the partial batch response: a handler that fails a
/// record twice sees it (and the records after it) again, never the ones
/// before; one that always fails it skips it after the retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_mapping_retries_from_the_reported_record() {
    let _serial = SERIAL.lock().await;
    let s = setup(StreamViewType::NewImage).await;
    for i in 0..6 {
        put_record(&s.table, &format!("k{i}"), "INPROGRESS", None).await;
    }
    let streams = moto().dynamodbstreams().await;
    let calls = std::sync::Mutex::new(Vec::<Vec<String>>::new());
    let options = Options {
        batch_size: 4,
        max_retries: 2,
        ..Options::default()
    };
    let stats = stream_esm::run(&streams, &s.stream_arn, &options, |event| {
        let keys: Vec<(String, String)> = event["Records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["dynamodb"]["Keys"]["id"]["S"].as_str().unwrap().to_owned(),
                    r["dynamodb"]["SequenceNumber"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        calls
            .lock()
            .unwrap()
            .push(keys.iter().map(|(k, _)| k.clone()).collect());
        // k2 always fails.
        let failed = keys.iter().find(|(k, _)| k == "k2").map(|(_, seq)| seq.clone());
        async move {
            let response: aws_lambda_events::streams::DynamoDbEventResponse =
                serde_json::from_value(json!({
                    "batchItemFailures": failed.map(|seq| json!({"itemIdentifier": seq})).into_iter().collect::<Vec<_>>()
                }))
                .unwrap();
            Ok(response)
        }
    })
    .await;
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls[0], ["k0", "k1", "k2", "k3"]);
    assert_eq!(calls[1], ["k2", "k3", "k4", "k5"]);
    assert_eq!(calls[2], ["k2", "k3", "k4", "k5"]);
    // Retried twice, then k2..k5 (the failed batch from k2 on) skipped.
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(stats.skipped.len(), 4, "{stats:?}");
    assert_eq!(stats.partial_failures, 3);
}

/// End to end: every FIFO id once, every standard id at least once and
/// under its own id, about 0.1 `SendMessageBatch` per message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_publishes_every_message_once_per_stable_id() {
    let _serial = SERIAL.lock().await;
    let s = setup(StreamViewType::NewImage).await;
    let (fifo_ids, standard_ids) = write_records(&s, 60).await;
    let relay = relay_with_moto(&s, &[]).await;
    let before = moto().request_counts().await;
    let stats = run_relay(&s, &relay, &Options::default()).await;
    let after = moto().request_counts().await;
    assert!(stats.skipped.is_empty() && !stats.timed_out, "{stats:?}");

    let (fifo, _) = received_once(
        &s.fifo.url,
        &s.standard.url,
        &fifo_ids,
        &standard_ids,
        "relayed",
    )
    .await;
    assert!(fifo.iter().all(|m| m.dedup_id == m.outbox_id));

    let batches =
        sent(&after, "AmazonSQS.SendMessageBatch") - sent(&before, "AmazonSQS.SendMessageBatch");
    let single = sent(&after, "AmazonSQS.SendMessage") - sent(&before, "AmazonSQS.SendMessage");
    // Published (the re-completed records' messages twice).
    let published = fifo_ids.len() + standard_ids.len() + 2 * 60usize.div_ceil(7);
    let per_message = batches as f64 / published as f64;
    eprintln!(
        "relay: {published} messages published in {batches} SendMessageBatch requests \
         ({per_message:.3} per message), {} invocations, {} stream records",
        stats.invocations, stats.read
    );
    assert_eq!(single, 0);
    assert!(per_message <= 0.15, "{per_message}");
}

/// 10 % throttles, 500s and connection resets on the relay's SQS calls and
/// on the mapping's stream calls: nothing lost, nothing under two ids, FIFO
/// still once per id. Once with the SDK's retries (3 attempts) and once
/// with none, so that failures reach the partial batch response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_on_sqs_and_stream_calls_lose_nothing() {
    let _serial = SERIAL.lock().await;
    use aws_config::retry::RetryConfig;
    for (attempts, seed) in [(1, 10), (3, 11)] {
        let s = setup(StreamViewType::NewImage).await;
        let (fifo_ids, standard_ids) = write_records(&s, 150).await;
        let config = moto()
            .sdk_config_loader()
            .retry_config(RetryConfig::standard().with_max_attempts(attempts))
            .load()
            .await;
        let relay = Relay::new(Arc::new(AwsPublisher::new(&config)), policy(&s, &[]));
        moto()
            .inject(
                &s.marker,
                &FaultPlan::new(0.1, &[Fault::Throttle, Fault::ServerError, Fault::Reset])
                    .seed(seed),
            )
            .await;
        let options = Options {
            batch_size: 10,
            fetch_limit: 10,
            max_retries: 50,
            ..Options::default()
        };
        let stats = run_relay(&s, &relay, &options).await;
        let faults = moto().clear_faults(&s.marker).await;
        eprintln!("relay under faults, {attempts} attempt(s): {faults}; {stats:?}");
        assert!(faults.injected >= 3 && faults.requests >= 50, "{faults}");
        assert!(stats.skipped.is_empty() && !stats.timed_out, "{stats:?}");
        if attempts == 1 {
            assert!(stats.partial_failures > 0, "{stats:?}");
        }

        let label = format!("under faults, {attempts} attempt(s)");
        let (fifo, standard) = received_once(
            &s.fifo.url,
            &s.standard.url,
            &fifo_ids,
            &standard_ids,
            &label,
        )
        .await;
        // What a standard-queue consumer deduplicates: every re-send is a
        // message it receives again.
        eprintln!(
            "relay under faults, {attempts} attempt(s): standard queue received {} messages \
             for {} ids, FIFO {} for {} ids",
            standard.len(),
            standard_ids.len(),
            fifo.len(),
            fifo_ids.len()
        );
    }
}

/// Per-entry failures of `SendMessageBatch` (the launcher fails the second
/// half of a third of the batches, entries not applied): the relay reports
/// the first record with a failed entry, the mapping retries from it, and
/// every message arrives, FIFO once per id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_batch_entries_are_retried_not_lost() {
    let _serial = SERIAL.lock().await;
    let s = setup(StreamViewType::NewImage).await;
    let (fifo_ids, standard_ids) = write_records(&s, 60).await;
    let relay = relay_with_moto(&s, &[]).await;
    moto()
        .inject(&s.marker, &FaultPlan::partial_batches(0.3).seed(4))
        .await;
    let options = Options {
        batch_size: 20,
        max_retries: 50,
        ..Options::default()
    };
    let stats = run_relay(&s, &relay, &options).await;
    let faults = moto().clear_faults(&s.marker).await;
    eprintln!("relay with failed entries: {faults}; {stats:?}");
    assert!(faults.injected >= 2, "{faults}");
    assert!(stats.partial_failures >= 2, "{stats:?}");
    assert!(stats.skipped.is_empty() && !stats.timed_out, "{stats:?}");

    received_once(
        &s.fifo.url,
        &s.standard.url,
        &fifo_ids,
        &standard_ids,
        "failed entries",
    )
    .await;
}

/// EventBridge: a bus rule with an SQS target receives each event with
/// `outbox_id` in its detail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_go_through_a_bus_rule_to_a_queue() {
    let _serial = SERIAL.lock().await;
    let s = setup(StreamViewType::NewAndOldImages).await;
    let events = moto().eventbridge().await;
    let bus = format!("{}bus", s.marker);
    events.create_event_bus().name(&bus).send().await.unwrap();
    events
        .put_rule()
        .name(format!("{}rule", s.marker))
        .event_bus_name(&bus)
        .event_pattern(json!({"source": ["orders"], "detail-type": ["OrderConfirmed"]}).to_string())
        .send()
        .await
        .unwrap();
    let target = aws_sdk_eventbridge::types::Target::builder()
        .id("queue")
        .arn(&s.standard.arn)
        .build()
        .unwrap();
    events
        .put_targets()
        .rule(format!("{}rule", s.marker))
        .event_bus_name(&bus)
        .targets(target)
        .send()
        .await
        .unwrap();
    let mut expected = BTreeSet::new();
    for i in 0..13 {
        let key = format!("orders.confirm#evt-{i}");
        let outbox = json!([{
            "id": stable_id(&key, 0),
            "destination": {"eventbridge": {"bus": bus, "source": "orders", "detail_type": "OrderConfirmed"}},
            "body": json!({"order_id": format!("o-{i}")}).to_string(),
        }]);
        expected.insert((stable_id(&key, 0), format!("o-{i}")));
        put_record(&s.table, &key, "COMPLETED", Some(&outbox)).await;
    }
    let relay = relay_with_moto(&s, &[&bus]).await;
    let before = moto().request_counts().await;
    let stats = run_relay(&s, &relay, &Options::default()).await;
    let after = moto().request_counts().await;
    assert!(stats.skipped.is_empty(), "{stats:?}");
    assert_eq!(
        sent(&after, "AWSEvents.PutEvents") - sent(&before, "AWSEvents.PutEvents"),
        2,
        "13 events in 2 PutEvents"
    );
    let got: BTreeSet<(String, String)> = drain(&s.standard.url)
        .await
        .iter()
        .map(|m| {
            let envelope: Value = serde_json::from_str(&m.body).unwrap();
            assert_eq!(envelope["source"], "orders");
            assert_eq!(envelope["detail-type"], "OrderConfirmed");
            (
                envelope["detail"]["outbox_id"].as_str().unwrap().to_owned(),
                envelope["detail"]["order_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(got, expected);
}

/// A record whose outbox is poison (not JSON, a FIFO message without a
/// group) does not hold the shard: the other records' messages go out, the
/// mapping skips nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_outboxes_do_not_block_the_shard() {
    let _serial = SERIAL.lock().await;
    let s = setup(StreamViewType::NewImage).await;
    put_record(&s.table, "orders.confirm#bad-json", "COMPLETED", None).await;
    moto()
        .dynamodb()
        .await
        .update_item()
        .table_name(&s.table)
        .key(
            "id",
            AttributeValue::S("orders.confirm#bad-json".to_owned()),
        )
        .update_expression("SET outbox = :o")
        .expression_attribute_values(":o", AttributeValue::S("[{not json".to_owned()))
        .send()
        .await
        .unwrap();
    put_record(
        &s.table,
        "orders.confirm#no-group",
        "COMPLETED",
        Some(&json!([sqs_entry(
            "orders.confirm#no-group",
            0,
            &s.fifo.url,
            None
        )])),
    )
    .await;
    put_record(
        &s.table,
        "orders.confirm#good",
        "COMPLETED",
        Some(&json!([sqs_entry(
            "orders.confirm#good",
            0,
            &s.fifo.url,
            Some("g")
        )])),
    )
    .await;
    let fifo = relay_cleanly(&s).await;
    assert_eq!(
        check_ids(&fifo).into_keys().collect::<Vec<_>>(),
        [stable_id("orders.confirm#good", 0)]
    );
}

/// An entry whose writer (its record key's prefix) the allowlist does not
/// give its destination is refused: not sent, not retried, the shard not
/// held; the allowed writer's entries go out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_outside_the_allowlist_are_refused_not_sent() {
    let _serial = SERIAL.lock().await;
    let s = setup(StreamViewType::NewImage).await;
    // Another function's prefix, and a lookalike, to the same queue.
    for key in ["payments.credit#x", "orders.confirmx#y"] {
        let outbox = json!([sqs_entry(key, 0, &s.fifo.url, Some("g"))]);
        put_record(&s.table, key, "COMPLETED", Some(&outbox)).await;
    }
    let key = "orders.confirm#ok";
    let outbox = json!([sqs_entry(key, 0, &s.fifo.url, Some("g"))]);
    put_record(&s.table, key, "COMPLETED", Some(&outbox)).await;
    let fifo = relay_cleanly(&s).await;
    assert_eq!(
        check_ids(&fifo).into_keys().collect::<Vec<_>>(),
        [stable_id(key, 0)]
    );
}

/// Under Lambda the relay does not start without `OUTBOX_ALLOWLIST` (it
/// never guesses who may publish where), and says why.
#[tokio::test]
async fn the_relay_does_not_start_without_its_allowlist() {
    use test_kit::runtime_api::{RuntimeApi, function_binary, lambda_command};
    let api = RuntimeApi::start().await;
    let mut command = lambda_command(&function_binary("outbox-relay"), "outbox-relay", &api);
    moto().apply_env(&mut command);
    command
        .env_remove(outbox_relay::ALLOWLIST_ENV)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("start the outbox-relay binary");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the relay started without an allowlist");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("read stderr");
    assert!(!status.success(), "{status:?}");
    assert!(stderr.contains("OUTBOX_ALLOWLIST is not set"), "{stderr}");
    assert!(
        api.first_poll().is_none(),
        "it never polled for an invocation"
    );
}

/// `outbox-relay --event events/dynamodb-stream-outbox.json` prints the
/// requests it would send, then the (empty) partial batch response. Its log
/// has the invocation's summary line (`relayed`) and no line per record
/// done: the relay runs without idempotency on purpose
/// (`RecordLogs::Failures`).
#[test]
fn the_relay_runs_locally_on_the_sample() {
    let binary = test_kit::runtime_api::function_binary("outbox-relay");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new(binary)
        .current_dir(&root)
        .env_remove("AWS_LAMBDA_RUNTIME_API")
        .env_remove("AWS_LAMBDA_FUNCTION_NAME")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("RUST_LOG", "info")
        .args(["--event", "events/dynamodb-stream-outbox.json"])
        .output()
        .expect("run outbox-relay");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("relayed"), "no summary line: {stderr}");
    assert!(
        !stderr.contains("record executed") && !stderr.contains("without idempotency protection"),
        "a line per record done: {stderr}"
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["would_publish"], "SendMessageBatch");
    assert!(
        lines[0]["QueueUrl"]
            .as_str()
            .unwrap()
            .ends_with("notifications.fifo")
    );
    assert_eq!(
        lines[0]["Entries"][0]["MessageDeduplicationId"],
        stable_id("orders.confirm#evt-1001", 0)
    );
    assert_eq!(lines[1]["would_publish"], "PutEvents");
    let detail: Value =
        serde_json::from_str(lines[1]["Entries"][0]["Detail"].as_str().unwrap()).unwrap();
    assert_eq!(detail["outbox_id"], stable_id("orders.confirm#evt-1001", 1));
    assert_eq!(
        lines[2]["Entries"][0]["MessageAttributes"]["outbox_id"],
        stable_id("orders.confirm#evt-1002", 0)
    );
    assert_eq!(lines[3], json!({"batchItemFailures": []}));
}

/// The queue attributes the consumer relies on: the FIFO queue is FIFO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_queues_are_what_they_say() {
    let _serial = SERIAL.lock().await;
    let s = setup(StreamViewType::NewImage).await;
    let attrs = moto()
        .sqs()
        .await
        .get_queue_attributes()
        .queue_url(&s.fifo.url)
        .attribute_names(QueueAttributeName::FifoQueue)
        .send()
        .await
        .unwrap();
    assert_eq!(
        attrs
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::FifoQueue))
            .map(String::as_str),
        Some("true")
    );
    assert!(s.fifo.url.contains(&s.marker) && s.standard.url.contains(&s.marker));
}
