//! `orders` end to end against moto: a standard orders queue with a DLQ and
//! the event source mapping loop, the DynamoDB orders table and idempotency
//! table **with a stream**, the stream mapping emulator running
//! `outbox-relay`, and the FIFO notifications queue read as a consumer
//! reads it. The function never sends: each new order is one
//! `TransactWriteItems` (order put + record with its outbox), and the relay
//! publishes `OrderConfirmed` under the entry's stable id.

use aws_sdk_dynamodb::types::StreamViewType;
use aws_sdk_sqs::types::QueueAttributeName;
use lambda_idempotency::{DynamoDbStore, Idempotency, Table, store::TableConfig};
use lambda_runtime::{Context, LambdaEvent};
use orders::{App, OrderEvent};
use outbox_relay::{Allowlist, Policy, Relay, aws::AwsPublisher};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use test_kit::esm::{self, Queue};
use test_kit::stream_esm::{self, Options};
use test_kit::{Moto, create_idempotency_table_with_stream, create_table, moto, unique_name};

pub(crate) struct Setup<'m> {
    moto: &'m Moto,
    app: App,
    ddb: aws_sdk_dynamodb::Client,
    /// The idempotency table (its name is also the launcher's marker for
    /// this test's DynamoDB requests: every request of orders touches it).
    pub(crate) idempotency: String,
    pub(crate) orders_table: String,
    stream_arn: String,
    sqs: aws_sdk_sqs::Client,
    queue: Queue,
    pub(crate) notifications: String,
}

/// Tables on `moto` (the idempotency table with a `NEW_IMAGE` stream), an
/// orders queue (standard, DLQ after `max_receive` receives, visibility
/// 1 s) and a FIFO notifications queue (explicit deduplication ids).
async fn setup_on(moto: &Moto, max_receive: u32) -> Setup<'_> {
    let ddb = moto.dynamodb().await;
    let idempotency = format!("{}-idem", unique_name("orders"));
    let stream_arn =
        create_idempotency_table_with_stream(&ddb, &idempotency, StreamViewType::NewImage).await;
    let orders_table = create_table(&ddb, "orders", "order_id", None).await;
    let sqs = moto.sqs().await;
    let queue = esm::create_queue(&sqs, "orders", false, max_receive, 1).await;
    let notifications = sqs
        .create_queue()
        .queue_name(format!("{}.fifo", unique_name("notifications")))
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(&idempotency)),
        App::config(),
    );
    let app = App::new(
        engine,
        Table::dynamodb(ddb.clone(), &orders_table),
        &notifications,
    );
    Setup {
        moto,
        app,
        ddb,
        idempotency,
        orders_table,
        stream_arn,
        sqs,
        queue,
        notifications,
    }
}

pub(crate) async fn setup(max_receive: u32) -> Setup<'static> {
    setup_on(moto(), max_receive).await
}

async fn invoke(
    app: &App,
    event: Value,
) -> Result<aws_lambda_events::sqs::SqsBatchResponse, lambda_runtime::Error> {
    lambda_idempotency::testing::invoke(|e| app.handle(e), &event).await
}

pub(crate) fn order(i: usize) -> OrderEvent {
    OrderEvent {
        event_id: format!("evt-{i}"),
        order_id: format!("ord-{i}"),
        customer_id: format!("cust-{}", i % 5),
        amount_cents: 1000 + i as u64,
        status: "PLACED".to_owned(),
    }
}

impl Setup<'_> {
    /// Runs `outbox-relay` over the idempotency table's stream (from its
    /// start: everything committed so far is published, again if it was
    /// before).
    pub(crate) async fn relay(&self) {
        // The relay tests count SendMessageBatch requests on the shared moto.
        let _serial = crate::exactly_once::relay::SERIAL.lock().await;
        let allowlist = json!({ orders::RECORD_PREFIX: [&self.notifications] }).to_string();
        let relay = Relay::new(
            Arc::new(AwsPublisher::new(&self.moto.sdk_config().await)),
            Policy::new(Allowlist::parse(&allowlist).expect("an allowlist")),
        );
        let streams = self.moto.dynamodbstreams().await;
        let stats = stream_esm::run(&streams, &self.stream_arn, &Options::default(), |event| {
            relay.handle(LambdaEvent::new(event, Context::default()))
        })
        .await;
        assert!(stats.skipped.is_empty() && !stats.timed_out, "{stats:?}");
        assert_eq!(stats.invocation_errors, 0, "{stats:?}");
    }

    /// Every `OrderConfirmed` in the notifications queue, received once
    /// each and deleted, counted by event id; each checked as a consumer
    /// would: group = order, `outbox_id` = deduplication id = the event's
    /// stable id, `type` = `OrderConfirmed`.
    pub(crate) async fn notifications_by_event(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for m in esm::receive_all(&self.sqs, &self.notifications).await {
            let body: Value = serde_json::from_str(&m.body).unwrap();
            assert_eq!(body["type"], "OrderConfirmed", "{body}");
            let event_id = body["event_id"].as_str().unwrap();
            let stable = orders::notification_id(event_id).unwrap();
            assert_eq!(
                m.group_id.as_deref(),
                body["order_id"].as_str().map(orders::group_id).as_deref()
            );
            assert_eq!(m.dedup_id.as_deref(), Some(stable.as_str()));
            let text = |name: &str| m.attributes.get(name).map(String::as_str);
            assert_eq!(text(orders::TYPE_ATTRIBUTE), Some("OrderConfirmed"));
            assert_eq!(
                text(lambda_idempotency::outbox::OUTBOX_ID),
                Some(stable.as_str())
            );
            *counts.entry(event_id.to_owned()).or_insert(0) += 1;
        }
        counts
    }

    /// Every item of the orders table, by order id.
    pub(crate) async fn orders(&self) -> BTreeMap<String, OrderEvent> {
        let table = Table::dynamodb(self.ddb.clone(), &self.orders_table);
        let scan = self
            .ddb
            .scan()
            .table_name(&self.orders_table)
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        let mut out = BTreeMap::new();
        for item in scan.items() {
            let id = item["order_id"].as_s().unwrap();
            let order = orders::table::get(&table, id).await.unwrap().unwrap();
            out.insert(id.clone(), order);
        }
        out
    }
}

pub(crate) fn once<'a>(event_ids: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, usize> {
    event_ids.into_iter().map(|e| (e.to_owned(), 1)).collect()
}

pub(crate) fn by_id(orders: &[OrderEvent]) -> BTreeMap<String, OrderEvent> {
    orders
        .iter()
        .map(|o| (o.order_id.clone(), o.clone()))
        .collect()
}

/// Every order event is recorded and confirmed exactly once as the
/// consumer sees it, whatever is redelivered (producer resends with new
/// message ids, in-batch and cross-batch duplicates, the relay run twice
/// over the whole stream); poison messages end in the DLQ; nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_is_recorded_and_confirmed_once() {
    let setup = setup(3).await;
    let Setup { sqs, queue, .. } = &setup;
    let mut sent_good = 0;
    let mut expected = Vec::new();
    for i in 0..30 {
        let o = order(i);
        let body = serde_json::to_string(&o).unwrap();
        // Every third event is sent twice, every fifth three times.
        let copies = 1 + usize::from(i % 3 == 0) + usize::from(i % 5 == 0);
        for _ in 0..copies {
            esm::send(sqs, queue, &body, None, None).await;
            sent_good += 1;
        }
        expected.push(o);
    }
    // A second event of one order (another event id): confirmed too.
    let paid = OrderEvent {
        event_id: "evt-7-paid".to_owned(),
        status: "PAID".to_owned(),
        ..order(7)
    };
    esm::send(
        sqs,
        queue,
        &serde_json::to_string(&paid).unwrap(),
        None,
        None,
    )
    .await;
    sent_good += 1;
    // Resends of the first ten, after the others (other batches).
    for o in &expected[..10] {
        esm::send(sqs, queue, &serde_json::to_string(o).unwrap(), None, None).await;
        sent_good += 1;
    }

    let good = serde_json::to_value(order(99)).unwrap();
    let with = |field: &str, value: Value| {
        let mut b = good.clone();
        b["event_id"] = json!(format!("evt-bad-{field}"));
        b[field] = value;
        b.to_string()
    };
    let mut poison = vec![
        "not json {".to_owned(),
        with("amount_cents", json!(-1)),
        with("amount_cents", json!(12.5)),
        with("order_id", json!("")),
        with("status", json!(null)),
        json!({"order_id": "ord-98", "customer_id": "c", "amount_cents": 1, "status": "PLACED"})
            .to_string(),
    ];
    for body in &poison {
        esm::send(sqs, queue, body, None, None).await;
    }

    let stats = esm::run(sqs, queue, Duration::from_secs(90), |event| {
        invoke(&setup.app, event)
    })
    .await;
    assert_eq!(stats.invocation_errors, 0, "{stats:?}");
    assert!(stats.reported_failures >= poison.len() * 3, "{stats:?}");
    assert!(stats.deleted >= sent_good, "{stats:?}");
    assert_eq!(esm::messages_left(sqs, &queue.url).await, 0, "{stats:?}");

    // Twice over the whole stream: the FIFO queue drops the second publish.
    setup.relay().await;
    setup.relay().await;
    let counts = setup.notifications_by_event().await;
    let events: BTreeSet<&str> = expected
        .iter()
        .map(|o| o.event_id.as_str())
        .chain([paid.event_id.as_str()])
        .collect();
    assert_eq!(counts, once(events));

    // Every order written, with its content; ord-7: whichever of its two
    // events was applied last wins. Nothing from a poison message.
    let stored = setup.orders().await;
    let ord7 = &stored["ord-7"];
    assert!(*ord7 == order(7) || *ord7 == paid, "{ord7:?}");
    let mut want = by_id(&expected);
    want.insert("ord-7".into(), ord7.clone());
    assert_eq!(stored, want);

    let mut dlq = esm::drain_bodies(sqs, queue.dlq_url.as_deref().unwrap()).await;
    dlq.sort();
    poison.sort();
    assert_eq!(dlq, poison);
}

/// Two event source mapping pollers on one queue (as Lambda runs several
/// concurrent batches), every event sent three times: copies of one event
/// are processed at the same time by the two pollers, and still each event
/// is confirmed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pollers_confirm_each_event_once() {
    let setup = setup(5).await;
    let Setup { sqs, queue, .. } = &setup;
    let expected: Vec<OrderEvent> = (0..20).map(order).collect();
    // Blocks of 10 (a batch), each sent three times in a row: the pollers
    // receive copies of the same events in the batches they run side by side.
    for block in expected.chunks(10) {
        for _copy in 0..3 {
            for o in block {
                esm::send(sqs, queue, &serde_json::to_string(o).unwrap(), None, None).await;
            }
        }
    }
    let max = Duration::from_secs(90);
    let handler = |event| invoke(&setup.app, event);
    let (a, b) = tokio::join!(
        esm::run(sqs, queue, max, handler),
        esm::run(sqs, queue, max, handler)
    );
    eprintln!("concurrent pollers: {a:?} {b:?}");
    assert_eq!(a.invocation_errors + b.invocation_errors, 0, "{a:?} {b:?}");
    assert!(
        a.records > 0 && b.records > 0,
        "both pollers got work: {a:?} {b:?}"
    );
    assert!(a.deleted + b.deleted >= 60, "{a:?} {b:?}");
    assert_eq!(esm::messages_left(sqs, &queue.url).await, 0);

    setup.relay().await;
    let counts = setup.notifications_by_event().await;
    assert_eq!(counts, once(expected.iter().map(|o| o.event_id.as_str())));
    assert_eq!(setup.orders().await, by_id(&expected));
    assert!(
        esm::drain_bodies(sqs, queue.dlq_url.as_deref().unwrap())
            .await
            .is_empty()
    );
}

/// The sample batch: the in-batch duplicate is confirmed once, the poison
/// record is reported, and a second delivery of the batch is replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_batch_is_confirmed_once() {
    let setup = setup(3).await;
    let event: Value =
        serde_json::from_str(include_str!("../../../../events/orders-standard.json")).unwrap();
    let poison_id = event["Records"][3]["messageId"].as_str().unwrap();
    for _delivery in 0..2 {
        let response = invoke(&setup.app, event.clone()).await.unwrap();
        let failed: Vec<_> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(failed, [poison_id]);
    }
    setup.relay().await;
    let counts = setup.notifications_by_event().await;
    assert_eq!(
        counts,
        once(["evt-5c1e0a11", "evt-5c1e0a12", "evt-5c1e0a13"])
    );
    let stored = setup.orders().await;
    assert_eq!(stored.len(), 3, "{stored:?}");
    let ord = OrderEvent {
        event_id: "evt-5c1e0a11".into(),
        order_id: "ord-1001".into(),
        customer_id: "cust-0042".into(),
        amount_cents: 4999,
        status: "PLACED".into(),
    };
    assert_eq!(stored["ord-1001"], ord);
}

fn count(counts: &serde_json::Map<String, Value>, operation: &str) -> u64 {
    counts.get(operation).and_then(Value::as_u64).unwrap_or(0)
}

/// Requests per new order, counted by the launcher (a moto of this test's
/// own, so no other test's requests count): one `TransactWriteItems` for
/// the batch's ten new orders (each order put and its record with its
/// outbox: batch commits), no other DynamoDB request, no `SendMessage`;
/// a redelivered batch is settled by one
/// `BatchGetItem` and writes nothing. The relay
/// then publishes with `SendMessageBatch`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_transaction_for_a_batch_of_new_orders_and_no_send() {
    let own = Moto::start(&[]);
    let setup = setup_on(&own, 3).await;
    let new: Vec<OrderEvent> = (0..10).map(order).collect();
    let records: Vec<Value> = new
        .iter()
        .enumerate()
        .map(|(i, o)| {
            json!({"messageId": format!("m-{i}"), "eventSource": "aws:sqs",
                   "body": serde_json::to_string(o).unwrap(), "receiptHandle": "r",
                   "attributes": {"ApproximateReceiveCount": "1"},
                   "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders"})
        })
        .collect();
    let event = json!({ "Records": records });

    own.reset_counts().await;
    own.reset_ledger().await;
    let response = invoke(&setup.app, event.clone()).await.unwrap();
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let first = own.request_counts().await;
    let ledger = own.ledger().await;
    own.stop_ledger().await;
    let n = new.len();
    let transactions = count(&first, "DynamoDB_20120810.TransactWriteItems");
    eprintln!("orders: {n} new orders: {first:?}");
    assert_eq!(transactions, 1, "one TransactWriteItems for the new orders");
    assert_eq!(first.len(), 1, "nothing but the transactions: {first:?}");
    // Each order's put and its record with its outbox: 2 actions an order.
    let actions: Vec<usize> = ledger
        .iter()
        .map(|e| e["request"]["TransactItems"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(
        actions,
        [2 * n],
        "one transaction holds the {n} orders' actions"
    );

    // Redelivered (receive count 2): settled by one read of the records,
    // replayed, nothing written or sent.
    let mut redelivered = event;
    for r in redelivered["Records"].as_array_mut().unwrap() {
        r["attributes"]["ApproximateReceiveCount"] = json!("2");
    }
    own.reset_counts().await;
    let response = invoke(&setup.app, redelivered).await.unwrap();
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let again = own.request_counts().await;
    eprintln!("orders: the batch redelivered: {again:?}");
    assert_eq!(
        count(&again, "DynamoDB_20120810.TransactWriteItems"),
        0,
        "{again:?}"
    );
    assert_eq!(
        count(&again, "DynamoDB_20120810.BatchGetItem"),
        1,
        "{again:?}"
    );
    assert_eq!(count(&again, "AmazonSQS.SendMessage"), 0, "{again:?}");

    own.reset_counts().await;
    setup.relay().await;
    let relayed = own.request_counts().await;
    assert_eq!(count(&relayed, "AmazonSQS.SendMessage"), 0, "{relayed:?}");
    assert!(
        count(&relayed, "AmazonSQS.SendMessageBatch") >= 1,
        "{relayed:?}"
    );
    assert_eq!(
        setup.notifications_by_event().await,
        once(new.iter().map(|o| o.event_id.as_str()))
    );
    assert_eq!(setup.orders().await, by_id(&new));
}
