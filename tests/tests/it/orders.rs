//! `orders` end to end against moto: a standard queue with a DLQ, the event
//! source mapping loop, DynamoDB idempotency and orders tables, and the
//! notifications queue (standard, or FIFO with deduplication ids).

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use integration_tests::esm::{self, Queue};
use integration_tests::{create_idempotency_table, create_table, moto, unique_name};
use lambda_runtime::LambdaEvent;
use orders::{App, DynamoDbOrders, OrderEvent, SqsNotifier};
use serde_json::{Value, json};
use shared::{DynamoDbStore, Idempotency, MemoryStore, TableConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

struct Setup {
    app: App,
    ddb: aws_sdk_dynamodb::Client,
    orders_table: String,
    sqs: aws_sdk_sqs::Client,
    queue: Queue,
    notifications: String,
}

/// A queue without a DLQ (FIFO with explicit deduplication ids when `fifo`).
async fn plain_queue(sqs: &aws_sdk_sqs::Client, prefix: &str, fifo: bool) -> String {
    let mut req = sqs.create_queue();
    if fifo {
        req = req
            .queue_name(format!("{}.fifo", unique_name(prefix)))
            .attributes(QueueAttributeName::FifoQueue, "true")
            .attributes(QueueAttributeName::ContentBasedDeduplication, "false");
    } else {
        req = req.queue_name(unique_name(prefix));
    }
    req.send().await.unwrap().queue_url().unwrap().to_owned()
}

fn app_over(
    engine: Idempotency,
    ddb: &aws_sdk_dynamodb::Client,
    orders_table: &str,
    sqs: &aws_sdk_sqs::Client,
    notifications: &str,
) -> App {
    App::new(
        engine,
        Arc::new(DynamoDbOrders::new(ddb.clone(), orders_table)),
        Arc::new(SqsNotifier::new(sqs.clone(), notifications)),
    )
}

/// Tables on moto, an orders queue (standard, DLQ after `max_receive`
/// receives, visibility 1 s) and a notifications queue.
async fn setup(max_receive: u32, fifo_notifications: bool) -> Setup {
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let orders_table = create_table(&ddb, "orders", "order_id", None).await;
    let sqs = moto.sqs().await;
    let queue = esm::create_queue(&sqs, "orders", false, max_receive, 1).await;
    let notifications = plain_queue(&sqs, "notifications", fifo_notifications).await;
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
        App::config(),
    );
    let app = app_over(engine, &ddb, &orders_table, &sqs, &notifications);
    Setup {
        app,
        ddb,
        orders_table,
        sqs,
        queue,
        notifications,
    }
}

async fn invoke(
    app: &App,
    event: Value,
) -> Result<aws_lambda_events::sqs::SqsBatchResponse, lambda_runtime::Error> {
    let ctx = shared::runtime::local_context(0, Duration::from_secs(30));
    app.handle(LambdaEvent::new(event, ctx)).await
}

fn order(i: usize) -> OrderEvent {
    OrderEvent {
        event_id: format!("evt-{i}"),
        order_id: format!("ord-{i}"),
        customer_id: format!("cust-{}", i % 5),
        amount_cents: 1000 + i as u64,
        status: "PLACED".to_owned(),
    }
}

/// The notifications in a queue, counted by event id (each body checked to
/// be an `OrderConfirmed`).
async fn notifications_by_event(sqs: &aws_sdk_sqs::Client, url: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for body in esm::drain_bodies(sqs, url).await {
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["type"], "OrderConfirmed", "{body}");
        *counts
            .entry(v["event_id"].as_str().unwrap().to_owned())
            .or_insert(0) += 1;
    }
    counts
}

/// Messages visible or in flight in a queue.
async fn messages_left(sqs: &aws_sdk_sqs::Client, url: &str) -> u64 {
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap();
    let attrs = out.attributes().cloned().unwrap_or_default();
    attrs.values().map(|v| v.parse::<u64>().unwrap_or(0)).sum()
}

async fn assert_orders_stored(setup: &Setup, expected: &[OrderEvent]) {
    let table = DynamoDbOrders::new(setup.ddb.clone(), &setup.orders_table);
    for o in expected {
        let stored = orders::Orders::get(&table, &o.order_id).await.unwrap();
        assert_eq!(stored.as_ref(), Some(o), "order {}", o.order_id);
    }
}

/// Every order event is recorded and confirmed exactly once, whatever is
/// redelivered (producer retries with new message ids, in-batch
/// duplicates); poison messages end in the DLQ; nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_is_recorded_and_confirmed_once() {
    let setup = setup(3, false).await;
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
    assert_eq!(messages_left(sqs, &queue.url).await, 0, "{stats:?}");

    let counts = notifications_by_event(sqs, &setup.notifications).await;
    let mut expected_events: BTreeSet<String> =
        expected.iter().map(|o| o.event_id.clone()).collect();
    expected_events.insert(paid.event_id.clone());
    assert_eq!(
        counts.keys().cloned().collect::<BTreeSet<_>>(),
        expected_events
    );
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");

    expected.retain(|o| o.order_id != "ord-7");
    assert_orders_stored(&setup, &expected).await;
    // ord-7: whichever of its two events was applied last wins.
    let table = DynamoDbOrders::new(setup.ddb.clone(), &setup.orders_table);
    let ord7 = orders::Orders::get(&table, "ord-7").await.unwrap().unwrap();
    assert!(ord7 == order(7) || ord7 == paid, "{ord7:?}");

    let mut dlq = esm::drain_bodies(sqs, queue.dlq_url.as_deref().unwrap()).await;
    dlq.sort();
    poison.sort();
    assert_eq!(dlq, poison);
}

/// Two event source mapping pollers on one queue (as Lambda runs several
/// concurrent batches), every event sent three times: copies of one event
/// are processed at the same time by the two pollers (one claims it, the
/// other replays it or finds it in progress and gets it again after the
/// visibility timeout), and still each event is confirmed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pollers_confirm_each_event_once() {
    let setup = setup(5, false).await;
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
    assert_eq!(messages_left(sqs, &queue.url).await, 0);

    let counts = notifications_by_event(sqs, &setup.notifications).await;
    assert_eq!(counts.len(), 20, "{counts:?}");
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    assert_orders_stored(&setup, &expected).await;
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
    let setup = setup(3, false).await;
    let event: Value =
        serde_json::from_str(include_str!("../../../events/orders-standard.json")).unwrap();
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
    let counts = notifications_by_event(&setup.sqs, &setup.notifications).await;
    assert_eq!(
        counts,
        BTreeMap::from([
            ("evt-5c1e0a11".to_owned(), 1),
            ("evt-5c1e0a12".to_owned(), 1),
            ("evt-5c1e0a13".to_owned(), 1)
        ])
    );
    let ord = OrderEvent {
        event_id: "evt-5c1e0a11".into(),
        order_id: "ord-1001".into(),
        customer_id: "cust-0042".into(),
        amount_cents: 4999,
        status: "PLACED".into(),
    };
    assert_orders_stored(&setup, &[ord]).await;
}

/// With a FIFO notifications queue, each notification carries
/// `MessageGroupId` = order_id and `MessageDeduplicationId` = event_id, so
/// SQS drops a second send of the same event even when the engine did not
/// stop it (here: two functions with separate idempotency stores).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_notifications_are_deduplicated_by_event_id() {
    let setup = setup(3, true).await;
    assert!(setup.notifications.ends_with(".fifo"));
    let event: Value =
        serde_json::from_str(include_str!("../../../events/orders-standard.json")).unwrap();
    let forgetful = app_over(
        Idempotency::new(MemoryStore::new(), App::config()),
        &setup.ddb,
        &setup.orders_table,
        &setup.sqs,
        &setup.notifications,
    );
    for app in [&setup.app, &forgetful] {
        let response = invoke(app, event.clone()).await.unwrap();
        assert_eq!(response.batch_item_failures.len(), 1, "{response:?}");
    }

    let mut seen = BTreeMap::new();
    for _ in 0..10 {
        let out = setup
            .sqs
            .receive_message()
            .queue_url(&setup.notifications)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        if out.messages().is_empty() {
            break;
        }
        for m in out.messages() {
            let body: Value = serde_json::from_str(m.body().unwrap()).unwrap();
            let attrs = m.attributes().unwrap();
            let attr = |name| attrs.get(&name).map(String::as_str);
            assert_eq!(
                attr(MessageSystemAttributeName::MessageGroupId),
                body["order_id"].as_str()
            );
            assert_eq!(
                attr(MessageSystemAttributeName::MessageDeduplicationId),
                body["event_id"].as_str()
            );
            let kind =
                m.message_attributes().unwrap()[orders::notifier::TYPE_ATTRIBUTE].string_value();
            assert_eq!(kind, Some("OrderConfirmed"));
            *seen
                .entry(body["event_id"].as_str().unwrap().to_owned())
                .or_insert(0) += 1;
        }
    }
    assert_eq!(
        seen,
        BTreeMap::from([
            ("evt-5c1e0a11".to_owned(), 1),
            ("evt-5c1e0a12".to_owned(), 1),
            ("evt-5c1e0a13".to_owned(), 1)
        ])
    );
}
