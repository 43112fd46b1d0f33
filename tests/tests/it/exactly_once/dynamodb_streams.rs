//! A user handler on the library's DynamoDB Streams adapter, fed by the
//! stream event source mapping emulator (`test_kit::stream_esm`)
//! from a real table's stream on moto: each change applied once and in
//! stream order per item, a refused record holding back what follows it of
//! its item until the mapping's retry from it succeeds, exact numbers through the stream, and
//! a re-read of the whole stream replayed.

use aws_sdk_dynamodb::types::{AttributeValue, StreamViewType};
use lambda_idempotency::dynamodb_streams::{DynamoDbRecord, DynamoDbStreamsProcessor, keys_and};
use lambda_idempotency::{Config, HandlerError, Idempotency, MemoryStore, value::AttrValue};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use test_kit::stream_esm::{self, Options};
use test_kit::{create_idempotency_table_with_stream, moto, unique_name};

/// 23 significant digits: more than `f64` holds.
const PRICE: &str = "12345678901234567890.125";

/// The applied changes, and how often the handler refused `sub-2`.
#[derive(Default)]
struct Ledger {
    applied: Mutex<Vec<(String, String, String)>>,
    refusals: Mutex<u32>,
    prices: Mutex<Vec<String>>,
}

impl Ledger {
    async fn apply(&self, r: DynamoDbRecord) -> Result<Value, HandlerError> {
        let text = |item: Option<&lambda_idempotency::Item>, name: &str| {
            item.and_then(|i| i.get(name))
                .and_then(|v| v.as_s().or(v.as_n()))
                .unwrap_or_default()
                .to_owned()
        };
        let id = text(Some(&r.keys), "id");
        let image = r.image();
        if text(image, "plan") == "gold" {
            let mut refusals = self.refusals.lock().unwrap();
            if *refusals < 2 {
                *refusals += 1;
                return Err(HandlerError::retryable("the gold plan is not ready yet"));
            }
        }
        if let Some(AttrValue::N(price)) = r.new_image.as_ref().and_then(|i| i.get("price")) {
            self.prices.lock().unwrap().push(price.clone());
        }
        let change = (r.event_name.clone(), id, text(image, "version"));
        self.applied.lock().unwrap().push(change.clone());
        Ok(json!({"applied": [change.0, change.1, change.2]}))
    }
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn n(v: &str) -> AttributeValue {
    AttributeValue::N(v.to_owned())
}

async fn put(table: &str, item: &[(&str, AttributeValue)]) {
    let item: HashMap<String, AttributeValue> = item
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    moto()
        .dynamodb()
        .await
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .send()
        .await
        .expect("put item");
}

#[tokio::test]
async fn each_change_is_applied_once_in_stream_order_behind_a_refused_record() {
    let ddb = moto().dynamodb().await;
    let table = unique_name("ddbstreams-subs");
    let stream_arn =
        create_idempotency_table_with_stream(&ddb, &table, StreamViewType::NewAndOldImages).await;
    put(
        &table,
        &[("id", s("sub-1")), ("version", n("1")), ("price", n(PRICE))],
    )
    .await;
    ddb.update_item()
        .table_name(&table)
        .key("id", s("sub-1"))
        .update_expression("SET version = :v")
        .expression_attribute_values(":v", n("2"))
        .send()
        .await
        .expect("update item");
    put(
        &table,
        &[("id", s("sub-2")), ("version", n("1")), ("plan", s("gold"))],
    )
    .await;
    put(&table, &[("id", s("sub-3")), ("version", n("1"))]).await;
    ddb.delete_item()
        .table_name(&table)
        .key("id", s("sub-1"))
        .send()
        .await
        .expect("delete item");
    put(&table, &[("id", s("sub-1")), ("version", n("3"))]).await;

    let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("subs.ledger"));
    let processor = DynamoDbStreamsProcessor::new(engine, keys_and("version"));
    let ledger = Ledger::default();
    let streams = moto().dynamodbstreams().await;
    let options = Options {
        batch_size: 3,
        ..Options::default()
    };
    let stats = stream_esm::run(&streams, &stream_arn, &options, |event| {
        processor.handle(LambdaEvent::new(event, Context::default()), |r| {
            ledger.apply(r)
        })
    })
    .await;
    let expected: Vec<(String, String, String)> = [
        ("INSERT", "sub-1", "1"),
        ("MODIFY", "sub-1", "2"),
        ("INSERT", "sub-2", "1"),
        ("INSERT", "sub-3", "1"),
        ("REMOVE", "sub-1", "2"),
        ("INSERT", "sub-1", "3"),
    ]
    .iter()
    .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
    .collect();
    // Once each, each item's changes in stream order. Changed with lanes by
    // item (issue 29): it asserted stream order across items; sub-3's INSERT,
    // after the refused sub-2 in the stream, no longer waits for it.
    let applied = ledger.applied.lock().unwrap().clone();
    let of = |changes: &[(String, String, String)], id: &str| -> Vec<(String, String, String)> {
        changes.iter().filter(|c| c.1 == id).cloned().collect()
    };
    assert_eq!(applied.len(), expected.len(), "{stats:?}");
    for id in ["sub-1", "sub-2", "sub-3"] {
        assert_eq!(of(&applied, id), of(&expected, id), "{id}: {stats:?}");
    }
    assert_eq!(*ledger.refusals.lock().unwrap(), 2);
    assert_eq!(stats.partial_failures, 2, "{stats:?}");
    assert_eq!(stats.invocation_errors, 0, "{stats:?}");
    assert!(stats.skipped.is_empty() && !stats.timed_out, "{stats:?}");
    // The INSERT and the MODIFY (which keeps the attribute) carry it.
    assert_eq!(*ledger.prices.lock().unwrap(), [PRICE, PRICE]);

    // The whole stream read again (a mapping recreated at TRIM_HORIZON):
    // every change replays, nothing is applied twice.
    let again = stream_esm::run(&streams, &stream_arn, &options, |event| {
        processor.handle(LambdaEvent::new(event, Context::default()), |r| {
            ledger.apply(r)
        })
    })
    .await;
    assert_eq!(again.partial_failures, 0, "{again:?}");
    assert_eq!(again.read, expected.len(), "{again:?}");
    assert_eq!(*ledger.applied.lock().unwrap(), applied);
}
